//! The WGSL spelling of an element-wise step ([`crate::lower::body::Expr`], the op's
//! computation described once for both writers) over typed values (see
//! [`super::types`]): floats in f32, bool, i32/u32 (8/16-bit values wrapped by the
//! caller), and i64/u64 as `vec2<u32>` through the exact 64-bit helpers. What has no
//! exact WGSL form is an `Err` naming it.

use super::types::{self, kind, Kind};
use crate::lower::body::{Bin, Cmp, Expr, Not, Prim};
use gopt_ir::ops::ElementwiseOp as E;
use gopt_ir::DType;

type R = std::result::Result<String, String>;

/// The literal of attribute `name`'s value `v` (WGSL has no infinite literals).
fn lit(v: f32, name: &str) -> R {
    if v.is_finite() {
        Ok(types::f32_literal(v))
    } else {
        Err(format!("a non-finite {name}"))
    }
}

/// The zero of a kind.
fn zero(k: Kind) -> &'static str {
    match k {
        Kind::Float => "0.0",
        Kind::Bool => "false",
        Kind::Int => "0i",
        Kind::Uint => "0u",
        Kind::Wide => "vec2<u32>(0u, 0u)",
    }
}

/// `a < b` for values of `dt`.
fn less(dt: DType, a: &str, b: &str) -> String {
    match kind(dt) {
        Some(Kind::Wide) if dt == DType::I64 => format!("gopt_lt_i64({a}, {b})"),
        Some(Kind::Wide) => format!("gopt_lt_u64({a}, {b})"),
        Some(Kind::Bool) => format!("(select(0u, 1u, {a}) < select(0u, 1u, {b}))"),
        Some(Kind::Float | Kind::Int | Kind::Uint) | None => format!("({a} < {b})"),
    }
}

/// A comparison of two values of `dt` (IEEE for floats: NaN compares false).
fn compare(op: Cmp, dt: DType, a: &str, b: &str) -> String {
    let o = op.text();
    match kind(dt) {
        Some(Kind::Wide) => match op {
            Cmp::Eq => format!("all({a} == {b})"),
            Cmp::Lt => less(dt, a, b),
            Cmp::Gt => less(dt, b, a),
            Cmp::Le => format!("(!{})", less(dt, b, a)),
            Cmp::Ge => format!("(!{})", less(dt, a, b)),
        },
        Some(Kind::Bool) if op != Cmp::Eq => {
            format!("(select(0u, 1u, {a}) {o} select(0u, 1u, {b}))")
        }
        Some(Kind::Bool | Kind::Float | Kind::Int | Kind::Uint) | None => {
            format!("({a} {o} {b})")
        }
    }
}

/// The larger (`max`) or smaller of two values of `dt`.
fn extreme(dt: DType, max: bool, a: &str, b: &str) -> String {
    match kind(dt) {
        Some(Kind::Wide) => {
            let lt = less(dt, a, b);
            if max {
                format!("select({a}, {b}, {lt})")
            } else {
                format!("select({b}, {a}, {lt})")
            }
        }
        // NaN propagates, as in numpy's maximum/minimum and the interpreter.
        Some(Kind::Float) => format!("{}({a}, {b})", if max { "gopt_fmax" } else { "gopt_fmin" }),
        Some(Kind::Int | Kind::Uint | Kind::Bool) | None => {
            format!("{}({a}, {b})", if max { "max" } else { "min" })
        }
    }
}

/// BitCast of the computed value `v` from `from` to `to` (the IR gives them one
/// width): the value's storage bits as a u32 word (a 64-bit value keeps its two words),
/// read back as `to`'s kind; the caller wraps an 8/16-bit result to its width.
fn bitcast(from: DType, to: DType, v: &str) -> R {
    let refuse = || format!("BitCast from {from} to {to}");
    let (kf, kt) = (kind(from).ok_or_else(refuse)?, kind(to).ok_or_else(refuse)?);
    if (kf == Kind::Wide) != (kt == Kind::Wide) {
        return Err(refuse());
    }
    let bits = match (kf, from) {
        (Kind::Wide, _) => return Ok(v.to_string()),
        (Kind::Float, DType::F16) => format!("(pack2x16float(vec2<f32>({v}, 0.0)) & 0xffffu)"),
        (Kind::Float, _) | (Kind::Int, _) => format!("bitcast<u32>({v})"),
        (Kind::Uint, _) => v.to_string(),
        (Kind::Bool, _) => format!("select(0u, 1u, {v})"),
    };
    Ok(match (kt, to) {
        (Kind::Float, DType::F16) => format!("unpack2x16float({bits}).x"),
        (Kind::Float, _) => format!("bitcast<f32>({bits})"),
        (Kind::Int, _) => format!("bitcast<i32>({bits})"),
        (Kind::Uint, _) => bits,
        (Kind::Bool, _) => format!("({bits} != 0u)"),
        (Kind::Wide, _) => return Err(refuse()),
    })
}

/// The exact 64-bit helper of `o`, where `o` has one.
fn wide_helper(o: Bin) -> Option<&'static str> {
    match o {
        Bin::Add => Some("gopt_add64"),
        Bin::Sub => Some("gopt_sub64"),
        Bin::Mul => Some("gopt_mul64"),
        Bin::Div
        | Bin::Lt
        | Bin::Gt
        | Bin::And
        | Bin::Or
        | Bin::Ne
        | Bin::BitAnd
        | Bin::BitOr
        | Bin::BitXor => None,
    }
}

/// A step's arguments (`None`: an absent optional input), the first one's type and
/// kind, its result's type, and its op's name (for refusals).
struct Cx<'a> {
    args: &'a [Option<(String, DType)>],
    dt0: DType,
    k0: Kind,
    out: DType,
    name: &'static str,
}

/// `e`, the computation of a step of op `op`, over typed arguments (`None`: an absent
/// optional input), giving a value of `out`'s kind (not yet wrapped to an 8/16-bit
/// width).
pub fn expr(op: E, e: &Expr, args: &[Option<(String, DType)>], out: DType) -> R {
    let typed = |i: usize| args.get(i).and_then(|a| a.as_ref()).map(|a| a.1);
    let dt0 = typed(0)
        .or_else(|| typed(1))
        .ok_or_else(|| "input 1".to_string())?;
    let k0 = kind(dt0).ok_or_else(|| format!("{dt0} inputs"))?;
    kind(out).ok_or_else(|| format!("{out} outputs"))?;
    let cx = Cx {
        args,
        dt0,
        k0,
        out,
        name: op.name(),
    };
    cx.print(e)
}

impl Cx<'_> {
    fn on(&self, what: &str) -> String {
        format!("{} on {} ({what})", self.name, self.dt0)
    }

    fn wide_no(&self) -> R {
        Err(self.on("WGSL has no 64-bit integers and this op has no exact 64-bit form here"))
    }

    /// `e` where the op takes floats only.
    fn float_only(&self, e: String) -> R {
        if self.k0 == Kind::Float {
            Ok(e)
        } else {
            Err(self.on("takes a float type"))
        }
    }

    /// The type of argument expression `e` (the first argument's for a computed one).
    fn dtype_of(&self, e: &Expr) -> DType {
        match e {
            Expr::Arg(k) => self
                .args
                .get(*k)
                .and_then(|a| a.as_ref())
                .map_or(self.dt0, |a| a.1),
            Expr::Num(_)
            | Expr::Attr(..)
            | Expr::Paren(..)
            | Expr::Flat(..)
            | Expr::Not(..)
            | Expr::Select(..)
            | Expr::Helper(..)
            | Expr::Prim(..) => self.dt0,
        }
    }

    fn print(&self, e: &Expr) -> R {
        Ok(match e {
            Expr::Arg(k) => self
                .args
                .get(*k)
                .and_then(|a| a.as_ref())
                .map(|a| a.0.clone())
                .ok_or_else(|| format!("input {k}"))?,
            Expr::Num(s) => s.clone(),
            Expr::Attr(v, name) => lit(*v, name)?,
            Expr::Paren(o, a, b) => {
                let (a, b) = (self.print(a)?, self.print(b)?);
                // Add, Sub, Mul of 64-bit integers: the exact helpers.
                match wide_helper(*o).filter(|_| self.k0 == Kind::Wide) {
                    Some(h) => format!("{h}({a}, {b})"),
                    None => format!("({a} {} {b})", o.text()),
                }
            }
            Expr::Flat(o, a, b) => format!("{} {} {}", self.print(a)?, o.text(), self.print(b)?),
            Expr::Not(Not::Logical, a) => format!("(!{})", self.print(a)?),
            Expr::Not(Not::Bitwise, a) => format!("(~{})", self.print(a)?),
            Expr::Select(c, a, b) => {
                let (c, a, b) = (self.print(c)?, self.print(a)?, self.print(b)?);
                format!("select({b}, {a}, {c})")
            }
            Expr::Helper(name, xs) => {
                let xs: Vec<String> = xs.iter().map(|x| self.print(x)).collect::<Result<_, _>>()?;
                format!("{name}({})", xs.join(", "))
            }
            Expr::Prim(p, xs) => {
                let printed: Vec<String> =
                    xs.iter().map(|x| self.print(x)).collect::<Result<_, _>>()?;
                self.prim(*p, xs, &printed)?
            }
        })
    }

    fn prim(&self, p: Prim, es: &[Expr], xs: &[String]) -> R {
        let x = |i: usize| {
            xs.get(i)
                .map(String::as_str)
                .ok_or_else(|| format!("input {i}"))
        };
        let (dt0, k0, out) = (self.dt0, self.k0, self.out);
        let call = |f: &str| -> R { Ok(format!("{f}({})", x(0)?)) };
        Ok(match p {
            // Float math: `check` has refused other input types.
            Prim::Sqrt => call("sqrt")?,
            Prim::Exp => call("exp")?,
            Prim::Log => call("gopt_log")?,
            Prim::Ceil => call("ceil")?,
            Prim::Floor => call("floor")?,
            Prim::Round => call("round")?,
            Prim::Sin => call("sin")?,
            Prim::Cos => call("cos")?,
            Prim::Tan => call("tan")?,
            Prim::Asin => call("gopt_asin")?,
            Prim::Acos => call("gopt_acos")?,
            Prim::Atan => call("gopt_atan")?,
            Prim::Sinh => call("sinh")?,
            Prim::Cosh => call("cosh")?,
            Prim::Asinh => {
                // Odd by construction: no cancellation for negative arguments.
                let v = x(0)?;
                format!("(sign({v}) * gopt_log(abs({v}) + sqrt({v} * {v} + 1.0)))")
            }
            Prim::Acosh => {
                let v = x(0)?;
                format!("gopt_log({v} + sqrt(({v} - 1.0) * ({v} + 1.0)))")
            }
            Prim::Atanh => {
                let v = x(0)?;
                format!("(0.5 * gopt_log((1.0 + {v}) / (1.0 - {v})))")
            }
            Prim::Tanh => call("gopt_tanh")?,
            Prim::Erf => call("gopt_erf")?,
            Prim::Expm1 => format!("(exp({}) - 1.0)", x(0)?),
            Prim::FAbs => call("abs")?,
            Prim::FMax => format!("max({}, {})", x(0)?, x(1)?),
            Prim::FMin => format!("min({}, {})", x(0)?, x(1)?),
            Prim::Clamp => format!("clamp({}, {}, {})", x(0)?, x(1)?, x(2)?),
            Prim::Gelu(true) => {
                let v = x(0)?;
                format!(
                    "(0.5 * {v} * (1.0 + gopt_tanh(0.7978845608 * ({v} + 0.044715 * {v} * {v} * {v}))))"
                )
            }
            Prim::Gelu(false) => {
                let v = x(0)?;
                format!("(0.5 * {v} * (1.0 + gopt_erf({v} * 0.7071067812)))")
            }
            Prim::Div => match k0 {
                Kind::Bool => return Err(self.on("takes a numeric type")),
                Kind::Wide => return self.wide_no(),
                // WGSL's `/` may be 2.5 ULP off (NVIDIA's Vulkan driver); ONNX Div is IEEE.
                Kind::Float => format!("gopt_div({}, {})", x(0)?, x(1)?),
                Kind::Int | Kind::Uint => format!("({} / {})", x(0)?, x(1)?),
            },
            Prim::Mod(fmod) => {
                let (v, q) = (x(0)?, x(1)?);
                match (k0, fmod) {
                    (Kind::Float, true) => format!("gopt_fmod({v}, {q})"),
                    (Kind::Float, false) => format!("gopt_mod_floor({v}, {q})"),
                    (Kind::Int, false) => format!("gopt_imod_floor({v}, {q})"),
                    (Kind::Int | Kind::Uint, _) => format!("({v} % {q})"),
                    (Kind::Bool, _) => return Err(self.on("takes a numeric type")),
                    (Kind::Wide, _) => return self.wide_no(),
                }
            }
            Prim::Pow => {
                if k0 != Kind::Float {
                    return Err(self.on("integer powers have no WGSL form here"));
                }
                // numpy's power, edge cases included (`gopt_pow` in helpers.wgsl).
                let b = x(0)?;
                let edt = es.get(1).map_or(dt0, |e| self.dtype_of(e));
                let e = x(1)?;
                let e = if kind(edt) == Some(Kind::Float) {
                    e.to_string()
                } else {
                    types::cast(edt, DType::F32, e).ok_or_else(|| format!("{edt} exponents"))?
                };
                format!("gopt_pow({b}, {e})")
            }
            Prim::Neg => match k0 {
                Kind::Float | Kind::Int => format!("(-{})", x(0)?),
                Kind::Wide if dt0 == DType::I64 => format!("gopt_neg64({})", x(0)?),
                Kind::Wide | Kind::Uint | Kind::Bool => {
                    return Err(self.on("takes a float or signed integer type"))
                }
            },
            Prim::Abs => match k0 {
                Kind::Float | Kind::Int => format!("abs({})", x(0)?),
                Kind::Uint => x(0)?.to_string(),
                Kind::Wide if dt0 == DType::U64 => x(0)?.to_string(),
                Kind::Wide => {
                    let v = x(0)?;
                    format!("select({v}, gopt_neg64({v}), bitcast<i32>({v}.y) < 0i)")
                }
                Kind::Bool => return Err(self.on("takes a numeric type")),
            },
            Prim::Sign => {
                let v = x(0)?;
                match k0 {
                    Kind::Float => format!("sign({v})"),
                    Kind::Int => format!("(select(0i, 1i, {v} > 0i) - select(0i, 1i, {v} < 0i))"),
                    Kind::Uint => format!("select(0u, 1u, {v} > 0u)"),
                    Kind::Wide => {
                        let z = zero(k0);
                        let neg = less(dt0, v, z);
                        format!(
                            "select(select({z}, vec2<u32>(1u, 0u), any({v} != {z})), vec2<u32>(0xffffffffu, 0xffffffffu), {neg})"
                        )
                    }
                    Kind::Bool => return Err(self.on("takes a numeric type")),
                }
            }
            Prim::Relu => {
                let v = x(0)?;
                match k0 {
                    Kind::Bool => return Err(self.on("takes a numeric type")),
                    Kind::Uint => v.to_string(),
                    Kind::Wide => extreme(dt0, true, v, zero(k0)),
                    // NaN stays NaN, as in the interpreter.
                    Kind::Float => format!("select({v}, 0.0, {v} <= 0.0)"),
                    Kind::Int => format!("max({v}, {})", zero(k0)),
                }
            }
            Prim::PRelu => {
                let (v, s) = (x(0)?, x(1)?);
                match k0 {
                    Kind::Bool => return Err(self.on("takes a numeric type")),
                    Kind::Uint => v.to_string(),
                    Kind::Wide if dt0 == DType::U64 => v.to_string(),
                    Kind::Wide => format!(
                        "select({v}, gopt_mul64({v}, {s}), {})",
                        less(dt0, v, zero(k0))
                    ),
                    Kind::Float | Kind::Int => {
                        format!("select({v}, {v} * {s}, {v} < {})", zero(k0))
                    }
                }
            }
            Prim::LeakyRelu => {
                let (v, alpha) = (x(0)?, x(1)?);
                format!("select({v} * {alpha}, {v}, {v} >= 0.0)")
            }
            Prim::Elu => {
                let (v, alpha) = (x(0)?, x(1)?);
                format!("select({alpha} * (exp({v}) - 1.0), {v}, {v} >= 0.0)")
            }
            Prim::Selu => {
                let (v, alpha, gamma) = (x(0)?, x(1)?, x(2)?);
                format!("select({gamma} * {alpha} * (exp({v}) - 1.0), {gamma} * {v}, {v} > 0.0)")
            }
            Prim::BitShift(left) => self.bit_shift(left, x(0)?, x(1)?)?,
            Prim::IsNaN => self.float_only(format!(
                "((bitcast<u32>({}) & 0x7fffffffu) > 0x7f800000u)",
                x(0)?
            ))?,
            Prim::IsInf(pos, neg) => {
                let b = format!("bitcast<u32>({})", x(0)?);
                self.float_only(match (pos, neg) {
                    (true, true) => format!("(({b} & 0x7fffffffu) == 0x7f800000u)"),
                    (true, false) => format!("({b} == 0x7f800000u)"),
                    (false, true) => format!("({b} == 0xff800000u)"),
                    (false, false) => "false".into(),
                })?
            }
            Prim::Max | Prim::AtLeast => extreme(dt0, true, x(0)?, x(1)?),
            Prim::Min | Prim::AtMost => extreme(dt0, false, x(0)?, x(1)?),
            Prim::Compare(c) => compare(c, dt0, x(0)?, x(1)?),
            Prim::Cast => types::cast(dt0, out, x(0)?)
                .ok_or_else(|| format!("{} from {dt0} to {out}", self.name))?,
            Prim::BitCast => bitcast(dt0, out, x(0)?)?,
        })
    }

    /// Shifts by a negative amount or by the width or more give 0 (-1 for a negative
    /// value shifted right), as the reference; the amount is masked so that a constant
    /// one is a valid WGSL shift either way.
    fn bit_shift(&self, left: bool, v: &str, y: &str) -> R {
        let w = self.dt0.size() * 8;
        Ok(match self.k0 {
            Kind::Int => {
                let ok = format!("({y} >= 0i && {y} < {w}i)");
                let amt = format!("(u32({y}) & 31u)");
                if left {
                    format!("select(0i, {v} << {amt}, {ok})")
                } else {
                    format!("select(select(0i, -1i, {v} < 0i), {v} >> {amt}, {ok})")
                }
            }
            Kind::Uint => {
                let o = if left { "<<" } else { ">>" };
                format!("select(0u, {v} {o} ({y} & 31u), {y} < {w}u)")
            }
            Kind::Wide => {
                let ok = format!("({y}.y == 0u && {y}.x < 64u)");
                let amt = format!("({y}.x & 63u)");
                let z = zero(self.k0);
                if left {
                    format!("select({z}, gopt_shl64({v}, {amt}), {ok})")
                } else if self.dt0 == DType::U64 {
                    format!("select({z}, gopt_shr64({v}, {amt}), {ok})")
                } else {
                    let neg = format!("(bitcast<i32>({v}.y) < 0i)");
                    let ones = "vec2<u32>(0xffffffffu, 0xffffffffu)";
                    format!(
                        "select(select({z}, {ones}, {neg}), select(gopt_shr64({v}, {amt}), ~gopt_shr64(~{v}, {amt}), {neg}), {ok})"
                    )
                }
            }
            Kind::Float | Kind::Bool => return Err(self.on("takes an integer type")),
        })
    }
}
