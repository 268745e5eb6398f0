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
            Ty::U32 => "unsigned int",
            Ty::Auto => "auto",
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
            Math::RoundEven => format!("rintf({e})"),
            Math::Ceil => format!("ceilf({e})"),
        }
    }
    fn int(&self, v: i64) -> String {
        v.to_string()
    }
    fn floats(&self, e: &str) -> String {
        f_suffixed(e)
    }
    fn to_i32(&self, e: &str) -> String {
        format!("(int){}", paren(e))
    }
    fn to_u32(&self, e: &str) -> String {
        format!("(unsigned int){}", paren(e))
    }
    fn mul_rn(&self, a: &str, b: &str) -> String {
        format!("__fmul_rn({a}, {b})")
    }
    fn add_rn(&self, a: &str, b: &str) -> String {
        format!("__fadd_rn({a}, {b})")
    }
    fn sub_rn(&self, a: &str, b: &str) -> String {
        format!("__fsub_rn({a}, {b})")
    }
    fn fma(&self, a: &str, b: &str, c: &str) -> String {
        format!("fmaf({a}, {b}, {c})")
    }
    fn unroll(&self) -> Option<&'static str> {
        Some("#pragma unroll")
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
    fn for_count(&self, k: &str, n: usize) -> String {
        format!("for (int {k} = 0; {k} < {n}; {k} = {k} + 1)")
    }
    fn for_index(&self, k: &str, n: usize) -> String {
        format!("for (long long {k} = 0; {k} < {n}LL; {k} = {k} + 1)")
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

/// `e` with an `f` after each decimal literal (`1.0` to `1.0f`): digits, a point and
/// digits, not part of a name and not suffixed already.
fn f_suffixed(e: &str) -> String {
    let b = e.as_bytes();
    let mut out = String::with_capacity(e.len() + 8);
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_digit()
            && (i == 0
                || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'.'));
        if !starts {
            out.push(b[i] as char);
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let decimal = j + 1 < b.len() && b[j] == b'.' && b[j + 1].is_ascii_digit();
        if decimal {
            j += 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
        }
        out.push_str(&e[i..j]);
        let suffixed = j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_');
        if decimal && !suffixed {
            out.push('f');
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::f_suffixed;

    #[test]
    fn decimal_literals_get_an_f() {
        assert_eq!(f_suffixed("(v + 1.0) / 2.0"), "(v + 1.0f) / 2.0f");
        assert_eq!(
            f_suffixed("x0 - 16777216.0f + a1 * 3"),
            "x0 - 16777216.0f + a1 * 3"
        );
        assert_eq!(f_suffixed("-0.75"), "-0.75f");
    }
}
