//! CUDA C's spelling of the statements both writers share ([`crate::twin`]): C
//! declarations, `for (int ...)` loops, C casts and ternaries, the `f`-suffixed math
//! functions, helper functions prefixed with the kernel's name.

use super::support::flit;
use crate::twin::{paren, Math, Syntax, Ty};

/// CUDA C, in the kernel named `name` (its helper functions carry the name).
pub struct Cuda<'a> {
    /// The kernel's name.
    pub name: &'a str,
}

impl Syntax for Cuda<'_> {
    fn ty(&self, t: Ty) -> &'static str {
        match t {
            Ty::F32 => "float",
            Ty::F32x4 => "float4",
            Ty::I32 => "int",
            Ty::Bool => "bool",
            Ty::Index => "long long",
            Ty::Named(n) => n,
        }
    }
    fn f32(&self, v: f32) -> String {
        flit(v)
    }
    fn fl(&self, dec: &str) -> String {
        format!("{dec}f")
    }
    fn index(&self, v: usize) -> String {
        format!("{v}LL")
    }
    fn count(&self, v: usize) -> String {
        v.to_string()
    }
    fn math(&self, f: Math, e: &str) -> String {
        match f {
            Math::Exp => format!("expf({e})"),
            Math::Log => format!("logf({e})"),
            Math::Tanh => format!("tanhf({e})"),
            Math::Sigmoid => format!("gopt_sigmoid({e})"),
        }
    }
    fn max_f(&self, a: &str, b: &str) -> String {
        format!("fmaxf({a}, {b})")
    }
    fn min_f(&self, a: &str, b: &str) -> String {
        format!("fminf({a}, {b})")
    }
    fn let_(&self, t: Ty, name: &str, e: &str) -> String {
        format!("const {} {name} = {e};", self.ty(t))
    }
    fn var(&self, t: Ty, name: &str, e: &str) -> String {
        format!("{} {name} = {e};", self.ty(t))
    }
    fn array(&self, t: Ty, name: &str, n: usize) -> String {
        format!("{} {name}[{n}];", self.ty(t))
    }
    fn for_(&self, k: &str, n: usize) -> String {
        format!("for (int {k} = 0; {k} < {n}; {k} = {k} + 1)")
    }
    fn select(&self, c: &str, t: &str, f: &str) -> String {
        format!("(({c}) ? {t} : {f})")
    }
    fn to_f32(&self, e: &str) -> String {
        format!("(float){}", paren(e))
    }
    fn to_index(&self, e: &str) -> String {
        format!("(long long){}", paren(e))
    }
    fn div(&self, a: &str, b: &str) -> String {
        format!("({a}) / {b}")
    }
    fn load_f32(&self, e: &str) -> String {
        format!("gopt_ld({e})")
    }
    fn floor(&self, e: &str) -> String {
        format!("floorf({e})")
    }
    fn abs(&self, e: &str) -> String {
        format!("fabsf({e})")
    }
    fn clamp_f(&self, e: &str, lo: &str, hi: &str) -> String {
        format!("fminf(fmaxf({e}, {lo}), {hi})")
    }
    fn clamp_i(&self, e: &str, lo: &str, hi: &str) -> String {
        format!("min(max({e}, {lo}), {hi})")
    }
    fn unused(&self, v: &str) -> String {
        format!("(void){v};")
    }
    fn helper(&self, f: &str) -> String {
        format!("{}_{f}", self.name)
    }
}
