//! The WGSL expression of one element-wise op over typed values (see [`super::types`]):
//! floats in f32, bool, i32/u32 (8/16-bit values wrapped by the caller), and i64/u64
//! as `vec2<u32>` through the exact 64-bit helpers. What has no exact WGSL form is an
//! `Err` naming it.

use super::types::{self, kind, Kind};
use crate::lower::body::Params;
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

/// A comparison.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
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
    match (kind(dt), dt) {
        (Some(Kind::Wide), DType::I64) => format!("gopt_lt_i64({a}, {b})"),
        (Some(Kind::Wide), _) => format!("gopt_lt_u64({a}, {b})"),
        (Some(Kind::Bool), _) => format!("(select(0u, 1u, {a}) < select(0u, 1u, {b}))"),
        _ => format!("({a} < {b})"),
    }
}

/// A comparison of two values of `dt` (IEEE for floats: NaN compares false).
fn compare(op: Cmp, dt: DType, a: &str, b: &str) -> String {
    let o = match op {
        Cmp::Eq => "==",
        Cmp::Lt => "<",
        Cmp::Le => "<=",
        Cmp::Gt => ">",
        Cmp::Ge => ">=",
    };
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
        _ => format!("({a} {o} {b})"),
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
        _ => format!("{}({a}, {b})", if max { "max" } else { "min" }),
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

/// The op over typed arguments (`None`: an absent optional input), giving a value of
/// `out`'s kind (not yet wrapped to an 8/16-bit width).
pub fn expr(op: E, p: &Params, args: &[Option<(String, DType)>], out: DType) -> R {
    let arg = |i: usize| -> std::result::Result<(&str, DType), String> {
        args.get(i)
            .and_then(|a| a.as_ref())
            .map(|(s, d)| (s.as_str(), *d))
            .ok_or_else(|| format!("input {i}"))
    };
    let x = |i: usize| arg(i).map(|a| a.0);
    let (_, dt0) = arg(0).or_else(|_| arg(1))?;
    let k0 = kind(dt0).ok_or_else(|| format!("{dt0} inputs"))?;
    kind(out).ok_or_else(|| format!("{out} outputs"))?;
    let name = op.name();
    let on = |what: &str| format!("{name} on {dt0} ({what})");
    let wide_no = || {
        Err(on(
            "WGSL has no 64-bit integers and this op has no exact 64-bit form here",
        ))
    };
    // Ops that only take floats.
    let float_only = |e: String| -> R {
        if k0 == Kind::Float {
            Ok(e)
        } else {
            Err(on("takes a float type"))
        }
    };
    let present: Vec<(&str, DType)> = args
        .iter()
        .flatten()
        .map(|(s, d)| (s.as_str(), *d))
        .collect();
    // Add, Sub, Mul: `wide` is the exact 64-bit helper.
    let add_like = |wide: &str, o: &str| -> R {
        let (v, q) = (x(0)?, x(1)?);
        match k0 {
            Kind::Bool => Err(on("takes a numeric type")),
            Kind::Wide => Ok(format!("{wide}({v}, {q})")),
            Kind::Float | Kind::Int | Kind::Uint => Ok(format!("({v} {o} {q})")),
        }
    };
    // Max, Min, Sum: `f` folded over the present inputs.
    let fold = |f: &dyn Fn(&str, &str) -> String| -> R {
        if k0 == Kind::Bool {
            return Err(on("takes a numeric type"));
        }
        let (first, rest) = present.split_first().ok_or("no inputs")?;
        Ok(rest
            .iter()
            .fold(first.0.to_string(), |acc, (v, _)| f(&acc, v)))
    };
    let logic = |o: &str| -> R {
        if k0 != Kind::Bool {
            return Err(on("takes bool"));
        }
        Ok(format!("({} {o} {})", x(0)?, x(1)?))
    };
    Ok(match op {
        E::Add => add_like("gopt_add64", "+")?,
        E::Sub => add_like("gopt_sub64", "-")?,
        E::Mul => add_like("gopt_mul64", "*")?,
        E::Div => match k0 {
            Kind::Bool => return Err(on("takes a numeric type")),
            Kind::Wide => return wide_no(),
            // WGSL's `/` may be 2.5 ULP off (NVIDIA's Vulkan driver); ONNX Div is IEEE.
            Kind::Float => format!("gopt_div({}, {})", x(0)?, x(1)?),
            Kind::Int | Kind::Uint => format!("({} / {})", x(0)?, x(1)?),
        },
        E::Mod => {
            let (v, q) = (x(0)?, x(1)?);
            match (k0, p.fmod) {
                (Kind::Float, true) => format!("gopt_fmod({v}, {q})"),
                (Kind::Float, false) => format!("gopt_mod_floor({v}, {q})"),
                (Kind::Int, false) => format!("gopt_imod_floor({v}, {q})"),
                (Kind::Int | Kind::Uint, _) => format!("({v} % {q})"),
                (Kind::Bool, _) => return Err(on("takes a numeric type")),
                (Kind::Wide, _) => return wide_no(),
            }
        }
        E::Pow => {
            if k0 != Kind::Float {
                return Err(on("integer powers have no WGSL form here"));
            }
            // numpy's power, edge cases included (`gopt_pow` in helpers.wgsl).
            let b = x(0)?;
            let (e, edt) = arg(1)?;
            let e = if kind(edt) == Some(Kind::Float) {
                e.to_string()
            } else {
                types::cast(edt, DType::F32, e).ok_or_else(|| format!("{edt} exponents"))?
            };
            format!("gopt_pow({b}, {e})")
        }
        E::Neg => match k0 {
            Kind::Float | Kind::Int => format!("(-{})", x(0)?),
            Kind::Wide if dt0 == DType::I64 => format!("gopt_neg64({})", x(0)?),
            _ => return Err(on("takes a float or signed integer type")),
        },
        E::Abs => match k0 {
            Kind::Float | Kind::Int => format!("abs({})", x(0)?),
            Kind::Uint => x(0)?.to_string(),
            Kind::Wide if dt0 == DType::U64 => x(0)?.to_string(),
            Kind::Wide => {
                let v = x(0)?;
                format!("select({v}, gopt_neg64({v}), bitcast<i32>({v}.y) < 0i)")
            }
            Kind::Bool => return Err(on("takes a numeric type")),
        },
        E::Sign => {
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
                Kind::Bool => return Err(on("takes a numeric type")),
            }
        }
        E::Relu => {
            let v = x(0)?;
            match k0 {
                Kind::Bool => return Err(on("takes a numeric type")),
                Kind::Uint => v.to_string(),
                Kind::Wide => extreme(dt0, true, v, zero(k0)),
                // NaN stays NaN, as in the interpreter.
                Kind::Float => format!("select({v}, 0.0, {v} <= 0.0)"),
                k => format!("max({v}, {})", zero(k)),
            }
        }
        E::PRelu => {
            let (v, s) = (x(0)?, x(1)?);
            match k0 {
                Kind::Bool => return Err(on("takes a numeric type")),
                Kind::Uint => v.to_string(),
                Kind::Wide if dt0 == DType::U64 => v.to_string(),
                Kind::Wide => format!(
                    "select({v}, gopt_mul64({v}, {s}), {})",
                    less(dt0, v, zero(k0))
                ),
                k => format!("select({v}, {v} * {s}, {v} < {})", zero(k)),
            }
        }
        E::Max => fold(&|acc, v| extreme(dt0, true, acc, v))?,
        E::Min => fold(&|acc, v| extreme(dt0, false, acc, v))?,
        E::Sum if k0 == Kind::Wide => fold(&|acc, v| format!("gopt_add64({acc}, {v})"))?,
        E::Sum => fold(&|acc, v| format!("({acc} + {v})"))?,
        E::Mean => {
            let sum = present
                .iter()
                .map(|(v, _)| v.to_string())
                .reduce(|acc, v| format!("({acc} + {v})"))
                .ok_or("no inputs")?;
            float_only(format!("({sum} / {}.0)", present.len()))?
        }
        E::Clip => {
            if k0 == Kind::Bool {
                return Err(on("takes a numeric type"));
            }
            let mut e = x(0)?.to_string();
            if let Some(Some((lo, _))) = args.get(1) {
                e = extreme(dt0, true, &e, lo);
            }
            if let Some(Some((hi, _))) = args.get(2) {
                e = extreme(dt0, false, &e, hi);
            }
            e
        }
        E::Equal => compare(Cmp::Eq, dt0, x(0)?, x(1)?),
        E::Less => compare(Cmp::Lt, dt0, x(0)?, x(1)?),
        E::LessOrEqual => compare(Cmp::Le, dt0, x(0)?, x(1)?),
        E::Greater => compare(Cmp::Gt, dt0, x(0)?, x(1)?),
        E::GreaterOrEqual => compare(Cmp::Ge, dt0, x(0)?, x(1)?),
        E::Not => match k0 {
            Kind::Bool => format!("(!{})", x(0)?),
            _ => return Err(on("takes bool")),
        },
        E::And => logic("&&")?,
        E::Or => logic("||")?,
        E::Xor => logic("!=")?,
        E::BitwiseNot => format!("(~{})", x(0)?),
        E::BitwiseAnd => format!("({} & {})", x(0)?, x(1)?),
        E::BitwiseOr => format!("({} | {})", x(0)?, x(1)?),
        E::BitwiseXor => format!("({} ^ {})", x(0)?, x(1)?),
        E::IsNaN => float_only(format!(
            "((bitcast<u32>({}) & 0x7fffffffu) > 0x7f800000u)",
            x(0)?
        ))?,
        E::IsInf => {
            let b = format!("bitcast<u32>({})", x(0)?);
            float_only(match (p.detect_positive, p.detect_negative) {
                (true, true) => format!("(({b} & 0x7fffffffu) == 0x7f800000u)"),
                (true, false) => format!("({b} == 0x7f800000u)"),
                (false, true) => format!("({b} == 0xff800000u)"),
                (false, false) => "false".into(),
            })?
        }
        E::Where => {
            let (c, cdt) = arg(0)?;
            if cdt != DType::Bool {
                return Err(format!("Where condition of type {cdt}"));
            }
            format!("select({}, {}, {c})", x(2)?, x(1)?)
        }
        E::Cast | E::CastLike => {
            types::cast(dt0, out, x(0)?).ok_or_else(|| format!("{name} from {dt0} to {out}"))?
        }
        E::Dropout => x(0)?.to_string(),
        E::BitCast => bitcast(dt0, out, x(0)?)?,
        E::BitShift => {
            // Shifts by a negative amount or by the width or more give 0 (-1 for a
            // negative value shifted right), as the reference; the amount is masked
            // so that a constant one is a valid WGSL shift either way.
            let left = p.shift_left;
            let (v, y) = (x(0)?, x(1)?);
            let w = dt0.size() * 8;
            match k0 {
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
                    let z = zero(k0);
                    if left {
                        format!("select({z}, gopt_shl64({v}, {amt}), {ok})")
                    } else if dt0 == DType::U64 {
                        format!("select({z}, gopt_shr64({v}, {amt}), {ok})")
                    } else {
                        let neg = format!("(bitcast<i32>({v}.y) < 0i)");
                        let ones = "vec2<u32>(0xffffffffu, 0xffffffffu)";
                        format!(
                            "select(select({z}, {ones}, {neg}), select(gopt_shr64({v}, {amt}), ~gopt_shr64(~{v}, {amt}), {neg}), {ok})"
                        )
                    }
                }
                _ => return Err(on("takes an integer type")),
            }
        }
        // Float math: `check` has refused other input types.
        E::Reciprocal => format!("(1.0 / {})", x(0)?),
        E::Sqrt => format!("sqrt({})", x(0)?),
        E::Exp => format!("exp({})", x(0)?),
        E::Log => format!("gopt_log({})", x(0)?),
        E::Ceil => format!("ceil({})", x(0)?),
        E::Floor => format!("floor({})", x(0)?),
        E::Round => format!("round({})", x(0)?),
        E::Sin => format!("sin({})", x(0)?),
        E::Cos => format!("cos({})", x(0)?),
        E::Tan => format!("tan({})", x(0)?),
        E::Asin => format!("gopt_asin({})", x(0)?),
        E::Acos => format!("gopt_acos({})", x(0)?),
        E::Atan => format!("gopt_atan({})", x(0)?),
        E::Sinh => format!("sinh({})", x(0)?),
        E::Cosh => format!("cosh({})", x(0)?),
        E::Asinh => {
            // Odd by construction: no cancellation for negative arguments.
            let v = x(0)?;
            format!("(sign({v}) * gopt_log(abs({v}) + sqrt({v} * {v} + 1.0)))")
        }
        E::Acosh => {
            let v = x(0)?;
            format!("gopt_log({v} + sqrt(({v} - 1.0) * ({v} + 1.0)))")
        }
        E::Atanh => {
            let v = x(0)?;
            format!("(0.5 * gopt_log((1.0 + {v}) / (1.0 - {v})))")
        }
        E::Tanh => format!("gopt_tanh({})", x(0)?),
        E::Sigmoid => format!("gopt_sigmoid({})", x(0)?),
        E::Erf => format!("gopt_erf({})", x(0)?),
        E::LeakyRelu => {
            let v = x(0)?;
            format!("select({v} * {}, {v}, {v} >= 0.0)", lit(p.alpha, "alpha")?)
        }
        E::Elu => {
            let v = x(0)?;
            format!(
                "select({} * (exp({v}) - 1.0), {v}, {v} >= 0.0)",
                lit(p.alpha, "alpha")?
            )
        }
        E::Selu => {
            let v = x(0)?;
            let alpha = lit(p.alpha, "alpha")?;
            let gamma = lit(p.gamma, "gamma")?;
            format!("select({gamma} * {alpha} * (exp({v}) - 1.0), {gamma} * {v}, {v} > 0.0)")
        }
        E::Celu => {
            let v = x(0)?;
            let alpha = lit(p.alpha, "alpha")?;
            format!("(max({v}, 0.0) + min(0.0, {alpha} * (exp({v} / {alpha}) - 1.0)))")
        }
        E::ThresholdedRelu => {
            let v = x(0)?;
            format!("select(0.0, {v}, {v} > {})", lit(p.alpha, "alpha")?)
        }
        E::Shrink => {
            let v = x(0)?;
            let bias = lit(p.bias, "bias")?;
            let lambd = lit(p.lambd, "lambd")?;
            format!(
                "select(select(0.0, {v} - {bias}, {v} > {lambd}), {v} + {bias}, {v} < -{lambd})"
            )
        }
        E::HardSigmoid => format!(
            "clamp({} * {} + {}, 0.0, 1.0)",
            lit(p.alpha, "alpha")?,
            x(0)?,
            lit(p.beta, "beta")?
        ),
        E::HardSwish => {
            let v = x(0)?;
            format!("({v} * clamp({v} / 6.0 + 0.5, 0.0, 1.0))")
        }
        E::Softplus => format!("gopt_softplus({})", x(0)?),
        E::Softsign => {
            let v = x(0)?;
            format!("({v} / (1.0 + abs({v})))")
        }
        E::Mish => {
            let v = x(0)?;
            format!("gopt_mish({v})")
        }
        E::Gelu => {
            let v = x(0)?;
            if p.gelu_tanh {
                format!(
                    "(0.5 * {v} * (1.0 + gopt_tanh(0.7978845608 * ({v} + 0.044715 * {v} * {v} * {v}))))"
                )
            } else {
                format!("(0.5 * {v} * (1.0 + gopt_erf({v} * 0.7071067812)))")
            }
        }
        E::Swish => {
            let v = x(0)?;
            format!("({v} * gopt_sigmoid({} * {v}))", lit(p.alpha, "alpha")?)
        }
        E::Bernoulli
        | E::RandomUniform
        | E::RandomNormal
        | E::RandomUniformLike
        | E::RandomNormalLike
        | E::Multinomial => return Err(format!("{name} (no WGSL form yet)")),
    })
}
