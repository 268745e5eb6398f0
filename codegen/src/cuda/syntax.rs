//! CUDA C's spelling of the statements both writers share ([`crate::twin`]): C
//! declarations, `for (int ...)` loops, C casts and ternaries, the `f`-suffixed math
//! functions, helper functions prefixed with the kernel's name.

use super::support::{flit, store};
use crate::lower::index::Lit;
use crate::twin::{paren, Math, Syntax, Ty};
use gopt_ir::DType;

/// CUDA C, in the kernel named `name` (its helper functions carry the name).
pub struct Cuda<'a> {
    /// The kernel's name.
    pub name: &'a str,
}

impl Cuda<'static> {
    /// CUDA C outside any kernel's name (for statements that call no helper function).
    pub const PLAIN: Cuda<'static> = Cuda { name: "" };
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
    fn lit(&self) -> Lit {
        Lit("LL")
    }
    fn signed(&self) -> &'static str {
        "LL"
    }
    fn index_zero(&self) -> &'static str {
        "0"
    }
    fn coord(&self, e: &str, lead: bool) -> String {
        if lead {
            format!("(long long){e}")
        } else {
            e.to_string()
        }
    }
    fn wide(&self, v: &str) -> String {
        format!("(long long){v}")
    }
    fn i64_of(&self, v: &str) -> String {
        format!("(long long){v}")
    }
    fn let_head(&self) -> &'static str {
        "const long long "
    }
    fn var_head(&self) -> &'static str {
        "long long "
    }
    fn var_index(&self, v: &str, init: &str) -> String {
        format!("long long {v} = {init}")
    }
    fn let_int(&self, v: &str) -> String {
        format!("const int {v}")
    }
    fn var_u32(&self, v: &str, init: &str) -> String {
        format!("unsigned int {v} = {init}")
    }
    fn let_float(&self, v: &str) -> String {
        format!("const float {v}")
    }
    fn var_float(&self, v: &str, init: &str) -> String {
        format!("float {v} = {init}")
    }
    fn count_from(&self, v: &str, from: &str, cond: &str) -> String {
        format!("for (unsigned int {v} = {from}; {cond}; ++{v}) {{")
    }
    fn index_from(&self, v: &str, from: &str, cond: &str) -> String {
        format!("for (long long {v} = {from}; {cond}; ++{v}) {{")
    }
    fn int_loop(&self, v: &str, n: usize) -> String {
        format!("for (int {v} = 0; {v} < {n}; ++{v}) {{")
    }
    fn signed_loop(&self, v: &str, n: usize) -> String {
        format!("for (long long {v} = 0; {v} < {n}LL; ++{v}) {{")
    }
    fn continue_if(&self, cond: &str) -> String {
        format!("if ({cond}) continue;")
    }
    fn add_one(&self, v: &str) -> String {
        format!("{v} += 1u")
    }
    fn ternary(&self, cond: &str, then: &str, other: &str) -> String {
        format!("{cond} ? {then} : {other}")
    }
    fn min_index(&self, a: &str, b: &str) -> String {
        format!("{a} < {b} ? {a} : {b}")
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
    fn first_thread(&self) -> &'static str {
        "threadIdx.x == 0"
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
