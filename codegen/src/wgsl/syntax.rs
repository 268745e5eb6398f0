//! WGSL's spelling of the statements both writers share ([`crate::twin`]): `let` and
//! typed `var` declarations, `for (var ...)` loops, conversions by constructor,
//! `select`, `clamp`, and `gopt_div` for a division the reference rounds exactly.

use super::types::{f32_literal, store};
use crate::lower::index::Lit;
use crate::twin::{paren, Math, Syntax, Ty};
use gopt_ir::DType;

/// WGSL, its helper functions named with `prefix` (the shader's own, so they cannot
/// clash with `helpers.wgsl`'s).
pub struct Wgsl {
    /// The helper functions' prefix.
    pub prefix: &'static str,
}

impl Wgsl {
    /// WGSL with unprefixed helper functions.
    pub const PLAIN: Wgsl = Wgsl { prefix: "" };
}

impl Syntax for Wgsl {
    fn ty(&self, t: Ty) -> &'static str {
        match t {
            Ty::F32 => "f32",
            Ty::F32x4 => "vec4<f32>",
            Ty::I32 => "i32",
            Ty::Bool => "bool",
            Ty::Index => "u32",
            Ty::U32 => "u32",
            Ty::Auto => "auto",
            Ty::Named(n) => n,
        }
    }
    fn f32(&self, v: f32) -> String {
        f32_literal(v)
    }
    fn fl(&self, dec: &str) -> String {
        dec.to_string()
    }
    fn index(&self, v: usize) -> String {
        format!("{v}u")
    }
    fn count(&self, v: usize) -> String {
        format!("{v}u")
    }
    fn math(&self, f: Math, e: &str) -> String {
        match f {
            Math::Exp => format!("exp({e})"),
            Math::Log => format!("gopt_log({e})"),
            Math::Tanh => format!("gopt_tanh({e})"),
            Math::Sigmoid => format!("gopt_sigmoid({e})"),
            Math::RoundEven => format!("round({e})"),
            Math::Ceil => format!("ceil({e})"),
        }
    }
    fn int(&self, v: i64) -> String {
        format!("{v}i")
    }
    fn floats(&self, e: &str) -> String {
        e.to_string()
    }
    fn to_i32(&self, e: &str) -> String {
        format!("i32({e})")
    }
    fn to_u32(&self, e: &str) -> String {
        format!("u32({e})")
    }
    fn mul_rn(&self, a: &str, b: &str) -> String {
        format!("({} * {})", paren(a), paren(b))
    }
    fn add_rn(&self, a: &str, b: &str) -> String {
        format!("({} + {})", paren(a), paren(b))
    }
    fn sub_rn(&self, a: &str, b: &str) -> String {
        format!("({} - {})", paren(a), paren(b))
    }
    fn fma(&self, a: &str, b: &str, c: &str) -> String {
        format!("fma({a}, {b}, {c})")
    }
    fn unroll(&self) -> Option<&'static str> {
        None
    }
    fn max_f(&self, a: &str, b: &str) -> String {
        format!("max({a}, {b})")
    }
    fn min_f(&self, a: &str, b: &str) -> String {
        format!("min({a}, {b})")
    }
    fn let_(&self, _: Ty, name: &str, e: &str) -> String {
        format!("let {name} = {e};")
    }
    fn var(&self, t: Ty, name: &str, e: &str) -> String {
        format!("var {name}: {} = {e};", self.ty(t))
    }
    fn array(&self, t: Ty, name: &str, n: usize) -> String {
        format!("var {name}: array<{}, {n}>;", self.ty(t))
    }
    fn for_(&self, k: &str, n: usize) -> String {
        format!("for (var {k}: i32 = 0; {k} < {n}; {k} = {k} + 1)")
    }
    fn for_count(&self, k: &str, n: usize) -> String {
        format!("for (var {k}: u32 = 0u; {k} < {n}u; {k} = {k} + 1u)")
    }
    fn for_index(&self, k: &str, n: usize) -> String {
        format!("for (var {k}: u32 = 0u; {k} < {n}u; {k} = {k} + 1u)")
    }
    fn select(&self, c: &str, t: &str, f: &str) -> String {
        format!("select({f}, {t}, {c})")
    }
    fn to_f32(&self, e: &str) -> String {
        format!("f32({e})")
    }
    fn to_index(&self, e: &str) -> String {
        format!("u32({e})")
    }
    fn div(&self, a: &str, b: &str) -> String {
        format!("gopt_div({a}, {b})")
    }
    fn load_f32(&self, e: &str) -> String {
        format!("f32({e})")
    }
    fn floor(&self, e: &str) -> String {
        format!("floor({e})")
    }
    fn abs(&self, e: &str) -> String {
        format!("abs({e})")
    }
    fn clamp_f(&self, e: &str, lo: &str, hi: &str) -> String {
        format!("clamp({e}, {lo}, {hi})")
    }
    fn clamp_i(&self, e: &str, lo: &str, hi: &str) -> String {
        format!("clamp({e}, {lo}, {hi})")
    }
    fn unused(&self, _: &str) -> String {
        String::new()
    }
    fn helper(&self, f: &str) -> String {
        format!("{}{f}", self.prefix)
    }
    fn lit(&self) -> Lit {
        Lit("u")
    }
    fn signed(&self) -> &'static str {
        ""
    }
    fn index_zero(&self) -> &'static str {
        "0u"
    }
    fn coord(&self, e: &str, _: bool) -> String {
        format!("u32({e})")
    }
    fn wide(&self, v: &str) -> String {
        v.to_string()
    }
    fn i64_of(&self, v: &str) -> String {
        format!("vec2<u32>({v}, 0u)")
    }
    fn let_head(&self) -> &'static str {
        "let "
    }
    fn var_head(&self) -> &'static str {
        "var "
    }
    fn var_index(&self, v: &str, init: &str) -> String {
        format!("var {v}: u32 = {init}")
    }
    fn let_int(&self, v: &str) -> String {
        format!("let {v}")
    }
    fn var_u32(&self, v: &str, init: &str) -> String {
        format!("var {v} = {init}")
    }
    fn let_float(&self, v: &str) -> String {
        format!("let {v}")
    }
    fn var_float(&self, v: &str, init: &str) -> String {
        format!("var {v}: f32 = {init}")
    }
    fn count_from(&self, v: &str, from: &str, cond: &str) -> String {
        format!("for (var {v}: u32 = {from}; {cond}; {v} = {v} + 1u) {{")
    }
    fn index_from(&self, v: &str, from: &str, cond: &str) -> String {
        self.count_from(v, from, cond)
    }
    fn int_loop(&self, v: &str, n: usize) -> String {
        format!("for (var {v}: i32 = 0; {v} < {n}; {v} = {v} + 1) {{")
    }
    fn signed_loop(&self, v: &str, n: usize) -> String {
        self.int_loop(v, n)
    }
    fn continue_if(&self, cond: &str) -> String {
        format!("if ({cond}) {{ continue; }}")
    }
    fn add_one(&self, v: &str) -> String {
        format!("{v} = {v} + 1u")
    }
    fn ternary(&self, cond: &str, then: &str, other: &str) -> String {
        self.select(cond, then, other)
    }
    fn min_index(&self, a: &str, b: &str) -> String {
        format!("min({a}, {b})")
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
    fn first_thread(&self) -> &'static str {
        "lid == 0u"
    }
}
