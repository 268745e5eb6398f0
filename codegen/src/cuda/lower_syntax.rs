//! CUDA C's spelling of the statements of the kernels `crate::lower` describes once
//! ([`crate::lower::syntax`]): 64-bit indices, `float` math through the prelude's
//! `gopt_ld`, rounding stores.

use super::support::{flit, store};
use crate::lower::index::Lit;
use crate::lower::syntax::Syntax;
use gopt_ir::DType;

/// CUDA C.
pub struct Cuda;

impl Syntax for Cuda {
    fn lit(&self) -> Lit {
        Lit("LL")
    }
    fn count(&self, v: &str, from: &str, cond: &str) -> String {
        format!("for (unsigned int {v} = {from}; {cond}; ++{v}) {{")
    }
    fn index_loop(&self, v: &str, from: &str, cond: &str) -> String {
        format!("for (long long {v} = {from}; {cond}; ++{v}) {{")
    }
    fn add_one(&self, v: &str) -> String {
        format!("{v} += 1u")
    }
    fn wide(&self, v: &str) -> String {
        format!("(long long){v}")
    }
    fn let_int(&self, v: &str) -> String {
        format!("const int {v}")
    }
    fn var_u32(&self, v: &str, init: &str) -> String {
        format!("unsigned int {v} = {init}")
    }
    fn i64_of(&self, v: &str) -> String {
        format!("(long long){v}")
    }
    fn let_index(&self, v: &str) -> String {
        format!("const long long {v}")
    }
    fn var_index(&self, v: &str, init: &str) -> String {
        format!("long long {v} = {init}")
    }
    fn index_zero(&self) -> &'static str {
        "0"
    }
    fn mark_used(&self, v: &str) -> Option<String> {
        Some(format!("(void){v};"))
    }
    fn let_float(&self, v: &str) -> String {
        format!("const float {v}")
    }
    fn var_float(&self, v: &str, init: &str) -> String {
        format!("float {v} = {init}")
    }
    fn float(&self, v: f32) -> String {
        flit(v)
    }
    fn float_text(&self, text: &str) -> String {
        format!("{text}f")
    }
    fn load(&self, e: &str) -> String {
        format!("gopt_ld({e})")
    }
    fn store(&self, dt: DType, v: &str) -> String {
        store(dt, v)
    }
    fn sqrt(&self) -> &'static str {
        "sqrtf"
    }
    fn pow(&self) -> &'static str {
        "powf"
    }
    fn select(&self, cond: &str, then: &str, other: &str) -> String {
        format!("{cond} ? {then} : {other}")
    }
    fn min(&self, a: &str, b: &str) -> String {
        format!("{a} < {b} ? {a} : {b}")
    }
    fn first_thread(&self) -> &'static str {
        "threadIdx.x == 0"
    }
}
