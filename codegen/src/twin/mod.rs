//! Kernel text both writers print: where a CUDA kernel and its WGSL twin are the same
//! algorithm statement for statement, the statements are written once here over a
//! [`Syntax`] (the few constructs the two languages spell differently: literals,
//! declarations, loops, casts, selects, clamps), and each writer passes its own
//! (`crate::cuda::syntax`, `crate::wgsl::syntax`). What a backend does its own way
//! (storage loads and stores, helper functions, bindings) stays in its writer.
//!
//! The same trait spells the kernels `crate::lower` describes once (norm, unique,
//! rotary, conv_nd, conv_transpose, pool): their index arithmetic, declarations and
//! loops are written there over a [`Syntax`], so one trait names every construct the
//! two languages spell differently.

pub mod linear_attention;
pub mod recurrent;
pub mod resize;
pub mod sample;
pub mod scatter;
pub mod spectral;

use crate::lower::index::Lit;
use gopt_ir::DType;

/// The value types of the shared statements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// 32-bit float.
    F32,
    /// Four 32-bit floats.
    F32x4,
    /// 32-bit signed integer.
    I32,
    /// A boolean.
    Bool,
    /// An element index or offset (`long long` on CUDA, `u32` on WGSL).
    Index,
    /// 32-bit unsigned integer.
    U32,
    /// The type of the initializer (CUDA's `auto`; WGSL's `let` infers it).
    Auto,
    /// A type the writer names (a storage element).
    Named(&'static str),
}

/// The f32 functions the shared statements call, spelled per backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Math {
    /// `e^x`.
    Exp,
    /// `ln x`.
    Log,
    /// `tanh x`.
    Tanh,
    /// The prelude's sigmoid.
    Sigmoid,
    /// The nearest integer, ties to even.
    RoundEven,
    /// The least integer not below.
    Ceil,
}

/// How one backend spells the constructs the shared statements use.
pub trait Syntax {
    /// The type's name.
    fn ty(&self, t: Ty) -> &'static str;
    /// A computed f32 literal.
    fn f32(&self, v: f32) -> String;
    /// A decimal f32 literal written in the text (`"1.0"`): `1.0f` or `1.0`.
    fn fl(&self, dec: &str) -> String;
    /// An index literal: `5LL` or `5u`.
    fn index(&self, v: usize) -> String;
    /// A literal of the loop counters and ids (`int` on CUDA, `u32` on WGSL).
    fn count(&self, v: usize) -> String;
    /// An `i32` literal.
    fn int(&self, v: i64) -> String;
    /// `e` with its decimal literals (`1.0`) made f32 literals.
    fn floats(&self, e: &str) -> String;
    /// `e` as i32 (truncated toward zero).
    fn to_i32(&self, e: &str) -> String;
    /// `e` as u32 (truncated toward zero).
    fn to_u32(&self, e: &str) -> String;
    /// `a * b` in f32, rounded once and never fused with a sum.
    fn mul_rn(&self, a: &str, b: &str) -> String;
    /// `a + b` in f32, rounded once and never fused with a product.
    fn add_rn(&self, a: &str, b: &str) -> String;
    /// `a - b` in f32, rounded once and never fused with a product.
    fn sub_rn(&self, a: &str, b: &str) -> String;
    /// `a * b + c` in f32, fused.
    fn fma(&self, a: &str, b: &str, c: &str) -> String;
    /// The line asking the compiler to unroll the next loop, where the language has one.
    fn unroll(&self) -> Option<&'static str>;
    /// `f(e)` in f32.
    fn math(&self, f: Math, e: &str) -> String;
    /// The larger of `a` and `b` in f32.
    fn max_f(&self, a: &str, b: &str) -> String;
    /// The smaller of `a` and `b` in f32.
    fn min_f(&self, a: &str, b: &str) -> String;
    /// An immutable local.
    fn let_(&self, t: Ty, name: &str, e: &str) -> String;
    /// A mutable local of type `t`.
    fn var(&self, t: Ty, name: &str, e: &str) -> String;
    /// A local array of `n` elements.
    fn array(&self, t: Ty, name: &str, n: usize) -> String;
    /// The head of a loop `k = 0 .. n` over an `i32` counter (the body's `{` follows).
    fn for_(&self, k: &str, n: usize) -> String;
    /// The head of a loop `k = 0 .. n` over a counter of the ids' type ([`Syntax::count`]).
    fn for_count(&self, k: &str, n: usize) -> String;
    /// The head of a loop `k = 0 .. n` over an index counter ([`Ty::Index`]).
    fn for_index(&self, k: &str, n: usize) -> String;
    /// `t` where `c`, else `f`.
    fn select(&self, c: &str, t: &str, f: &str) -> String;
    /// `e` as f32.
    fn to_f32(&self, e: &str) -> String;
    /// `e` as an index.
    fn to_index(&self, e: &str) -> String;
    /// `a / b` in f32 rounded as the reference divides (WGSL's `/` may be 2.5 ULP off).
    fn div(&self, a: &str, b: &str) -> String;
    /// The storage element `e` as an f32 value.
    fn load_f32(&self, e: &str) -> String;
    /// `floor(e)` in f32.
    fn floor(&self, e: &str) -> String;
    /// `|e|` in f32.
    fn abs(&self, e: &str) -> String;
    /// `e` clamped to `lo..=hi` in f32.
    fn clamp_f(&self, e: &str, lo: &str, hi: &str) -> String;
    /// `e` clamped to `lo..=hi` in i32.
    fn clamp_i(&self, e: &str, lo: &str, hi: &str) -> String;
    /// A statement that marks a variable as read (CUDA's `(void)r;`), or nothing.
    fn unused(&self, v: &str) -> String;
    /// The name of the kernel's helper function `f` (CUDA prefixes the kernel's name).
    fn helper(&self, f: &str) -> String;

    /// The suffix of index literals.
    fn lit(&self) -> Lit;
    /// The suffix of a signed coordinate literal (`12LL`; WGSL's `i32` takes `12`).
    fn signed(&self) -> &'static str;
    /// The index zero a mutable index starts from (`0` on CUDA, which widens it).
    fn index_zero(&self) -> &'static str;
    /// Signed coordinate `e` as an index operand: in CUDA `int` promotes by itself
    /// (`lead`: the first operand of a product, cast so the product is 64-bit); in WGSL
    /// every operand is converted to `u32`.
    fn coord(&self, e: &str, lead: bool) -> String;
    /// A `u32` expression `v` widened for index arithmetic.
    fn wide(&self, v: &str) -> String;
    /// An i64 element holding the `u32` `v`.
    fn i64_of(&self, v: &str) -> String;
    /// The start of an immutable index declaration, up to its name (`const long long `).
    fn let_head(&self) -> &'static str;
    /// The start of a mutable index declaration, up to its name (`long long `, `var `).
    fn var_head(&self) -> &'static str;
    /// The declaration of an immutable index `v` (before its `=`).
    fn let_index(&self, v: &str) -> String {
        format!("{}{v}", self.let_head())
    }
    /// The declaration of a mutable index `v` holding `init` (without `;`).
    fn var_index(&self, v: &str, init: &str) -> String;
    /// The declaration of an immutable `int` `v` (before its `=`).
    fn let_int(&self, v: &str) -> String;
    /// The declaration of a mutable `u32` `v` holding `init` (without `;`).
    fn var_u32(&self, v: &str, init: &str) -> String;
    /// The declaration of an immutable f32 `v` (before its `=`).
    fn let_float(&self, v: &str) -> String;
    /// The declaration of a mutable f32 `v` holding `init` (without `;`).
    fn var_float(&self, v: &str, init: &str) -> String;
    /// A `for` header, up to its `{`, counting `u32` `v` up from `from` while `cond`.
    fn count_from(&self, v: &str, from: &str, cond: &str) -> String;
    /// A `for` header, up to its `{`, counting index `v` up from `from` while `cond`.
    fn index_from(&self, v: &str, from: &str, cond: &str) -> String;
    /// The head of a loop of 32-bit signed counter `v` over `0..n`, up to its `{`.
    fn int_loop(&self, v: &str, n: usize) -> String;
    /// The head of a loop of signed coordinate `v` over `0..n`, up to its `{`.
    fn signed_loop(&self, v: &str, n: usize) -> String;
    /// The statement skipping to the loop's next iteration when `cond` holds.
    fn continue_if(&self, cond: &str) -> String;
    /// The statement (without `;`) that adds one to `u32` `v`.
    fn add_one(&self, v: &str) -> String;
    /// `then` where `cond` holds, else `other`, unparenthesized ([`Syntax::select`]
    /// parenthesizes CUDA's).
    fn ternary(&self, cond: &str, then: &str, other: &str) -> String;
    /// The smaller of two indices.
    fn min_index(&self, a: &str, b: &str) -> String;
    /// The f32 `v` as an element of dtype `dt`, rounded once.
    fn store(&self, dt: DType, v: &str) -> String;
    /// The f32 square root function.
    fn sqrt(&self) -> &'static str;
    /// The f32 power function.
    fn pow(&self) -> &'static str;
    /// Whether this is the block's (workgroup's) first thread.
    fn first_thread(&self) -> &'static str;
}

/// `v` in parentheses unless it is one term already: a word, or a call whose
/// parentheses close at its end.
pub fn paren(v: &str) -> String {
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if word(v) || call(v) {
        v.to_string()
    } else {
        format!("({v})")
    }
}

/// Whether `v` is `name(...)` with the first `(` closed by the last character.
fn call(v: &str) -> bool {
    let Some(open) = v.find('(') else {
        return false;
    };
    let name = &v[..open];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return false;
    }
    let mut depth = 0usize;
    for (i, c) in v.char_indices().skip(open) {
        if c == '(' {
            depth += 1;
        } else if c == ')' {
            depth -= 1;
            if depth == 0 {
                return i == v.len() - 1;
            }
        }
    }
    false
}
