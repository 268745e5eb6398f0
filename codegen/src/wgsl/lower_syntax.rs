//! WGSL's spelling of the statements of the kernels `crate::lower` describes once
//! ([`crate::lower::syntax`]): `u32` indices, f32 math, rounding stores.

use super::types::{f32_literal, store};
use crate::lower::index::Lit;
use crate::lower::syntax::Syntax;
use gopt_ir::DType;

/// WGSL.
pub struct Wgsl;

impl Syntax for Wgsl {
    fn lit(&self) -> Lit {
        Lit("u")
    }
    fn count(&self, v: &str, from: &str, cond: &str) -> String {
        format!("for (var {v}: u32 = {from}; {cond}; {v} = {v} + 1u) {{")
    }
    fn index_loop(&self, v: &str, from: &str, cond: &str) -> String {
        self.count(v, from, cond)
    }
    fn add_one(&self, v: &str) -> String {
        format!("{v} = {v} + 1u")
    }
    fn wide(&self, v: &str) -> String {
        v.to_string()
    }
    fn let_int(&self, v: &str) -> String {
        format!("let {v}")
    }
    fn var_u32(&self, v: &str, init: &str) -> String {
        format!("var {v} = {init}")
    }
    fn i64_of(&self, v: &str) -> String {
        format!("vec2<u32>({v}, 0u)")
    }
    fn let_index(&self, v: &str) -> String {
        format!("let {v}")
    }
    fn var_index(&self, v: &str, init: &str) -> String {
        format!("var {v}: u32 = {init}")
    }
    fn index_zero(&self) -> &'static str {
        "0u"
    }
    fn mark_used(&self, _: &str) -> Option<String> {
        None
    }
    fn let_float(&self, v: &str) -> String {
        format!("let {v}")
    }
    fn var_float(&self, v: &str, init: &str) -> String {
        format!("var {v}: f32 = {init}")
    }
    fn float(&self, v: f32) -> String {
        f32_literal(v)
    }
    fn float_text(&self, text: &str) -> String {
        text.to_string()
    }
    fn load(&self, e: &str) -> String {
        format!("f32({e})")
    }
    fn store(&self, dt: DType, v: &str) -> String {
        store(dt, v)
    }
    fn sqrt(&self) -> &'static str {
        "sqrt"
    }
    fn pow(&self) -> &'static str {
        "gopt_pow"
    }
    fn select(&self, cond: &str, then: &str, other: &str) -> String {
        format!("select({other}, {then}, {cond})")
    }
    fn min(&self, a: &str, b: &str) -> String {
        format!("min({a}, {b})")
    }
    fn first_thread(&self) -> &'static str {
        "lid == 0u"
    }
}
