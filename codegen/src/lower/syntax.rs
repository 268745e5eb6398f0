//! How a backend spells the statements of the kernels described once in `lower`
//! ([`super::unique`], [`super::norm_kernel`]): a kernel's algorithm is written there a
//! single time over this trait, and each writer (`crate::cuda::syntax`,
//! `crate::wgsl::syntax`) says how its language writes a loop, a declaration, a load
//! or a store, so the CUDA and WGSL kernels cannot drift apart.

use super::index::Lit;
use gopt_ir::DType;

/// A backend's spelling of the statements the shared kernel descriptions use.
pub trait Syntax {
    /// The suffix of index literals.
    fn lit(&self) -> Lit;
    /// A `for` header, up to its `{`, counting `u32` `v` up from `from` while `cond`.
    fn count(&self, v: &str, from: &str, cond: &str) -> String;
    /// A `for` header, up to its `{`, counting index `v` up from `from` while `cond`.
    fn index_loop(&self, v: &str, from: &str, cond: &str) -> String;
    /// The statement (without `;`) that adds one to `u32` `v`.
    fn add_one(&self, v: &str) -> String;
    /// A `u32` expression `v` widened for index arithmetic.
    fn wide(&self, v: &str) -> String;
    /// The declaration of an immutable `int` `v` (before its `=`).
    fn let_int(&self, v: &str) -> String;
    /// The declaration of a mutable `u32` `v` holding `init` (without `;`).
    fn var_u32(&self, v: &str, init: &str) -> String;
    /// An i64 element holding the `u32` `v`.
    fn i64_of(&self, v: &str) -> String;
    /// The declaration of an immutable index `v` (before its `=`).
    fn let_index(&self, v: &str) -> String;
    /// The declaration of a mutable index `v` holding `init` (without `;`).
    fn var_index(&self, v: &str, init: &str) -> String;
    /// The index zero a mutable index starts from.
    fn index_zero(&self) -> &'static str;
    /// The statement that marks index `v` used, where the language needs one.
    fn mark_used(&self, v: &str) -> Option<String>;
    /// The declaration of an immutable f32 `v` (before its `=`).
    fn let_float(&self, v: &str) -> String;
    /// The declaration of a mutable f32 `v` holding `init` (without `;`).
    fn var_float(&self, v: &str, init: &str) -> String;
    /// The f32 literal of `v`.
    fn float(&self, v: f32) -> String;
    /// The f32 literal written `text` (`1.0`, `1e-9`).
    fn float_text(&self, text: &str) -> String;
    /// The element `e` of a float tensor, as f32.
    fn load(&self, e: &str) -> String;
    /// The f32 `v` as an element of dtype `dt`, rounded once.
    fn store(&self, dt: DType, v: &str) -> String;
    /// The f32 square root function.
    fn sqrt(&self) -> &'static str;
    /// The f32 power function.
    fn pow(&self) -> &'static str;
    /// `then` where `cond` holds, else `other`.
    fn select(&self, cond: &str, then: &str, other: &str) -> String;
    /// The smaller of two indices.
    fn min(&self, a: &str, b: &str) -> String;
    /// Whether this is the block's (workgroup's) first thread.
    fn first_thread(&self) -> &'static str;
}
