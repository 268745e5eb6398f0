//! The CUDA expression of one element-wise op over computed values: floats in `float`
//! (`double` for f64), bool, integers in `long long` (`unsigned long long` for u64;
//! narrower results wrapped to their width by the caller). One exhaustive match over
//! the ops: an op without a kernel says so. Attributes and the types each op takes
//! come from [`crate::lower::body`].

use super::{compute, storage};
use crate::cuda::support::flit;
use crate::lower::body::Params;
use gopt_ir::ops::ElementwiseOp as E;
use gopt_ir::DType;

type R = std::result::Result<String, String>;

/// BitCast of the computed value `v` from `from` to `to` (the IR gives them one
/// width): the value's storage bits as an unsigned integer of that width, read back as
/// `to` and loaded as its compute type (8/16-bit results wrapped again by the caller).
fn bitcast(from: DType, to: DType, v: &str) -> String {
    let bits = match from {
        DType::F32 => format!("__float_as_uint({v})"),
        DType::F64 => format!("(unsigned long long)__double_as_longlong({v})"),
        DType::F16 => format!("__half_as_ushort(__float2half_rn({v}))"),
        DType::BF16 => format!("__bfloat16_as_ushort(__float2bfloat16_rn({v}))"),
        DType::Bool | DType::I8 | DType::U8 => format!("(unsigned char)({v})"),
        DType::I16 | DType::U16 => format!("(unsigned short)({v})"),
        DType::I32 | DType::U32 => format!("(unsigned int)({v})"),
        DType::I64 | DType::U64 => format!("(unsigned long long)({v})"),
    };
    match to {
        DType::F32 => format!("__uint_as_float({bits})"),
        DType::F64 => format!("__longlong_as_double((long long)({bits}))"),
        DType::F16 => format!("__half2float(__ushort_as_half({bits}))"),
        DType::BF16 => format!("__bfloat162float(__ushort_as_bfloat16({bits}))"),
        DType::Bool => format!("({bits} != 0)"),
        DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => format!("({})({})({bits})", compute(to), storage(to)),
    }
}

/// `op` over `args` (name and type; an absent optional input has an empty name),
/// giving a value of `out`'s compute type.
pub fn expr(op: E, p: &Params, args: &[(String, DType)], out: DType) -> R {
    let x = |i: usize| -> std::result::Result<&str, String> {
        args.get(i)
            .map(|a| a.0.as_str())
            .filter(|a| !a.is_empty())
            .ok_or_else(|| format!("input {i}"))
    };
    let dt0 = args.iter().find(|a| !a.0.is_empty()).map_or(out, |a| a.1);
    // Math functions take an `f` suffix in float (`expf`); f64 computes in double.
    let float = matches!(compute(out), "float");
    let sfx = if matches!(compute(dt0), "float") {
        "f"
    } else {
        ""
    };
    let f = |name: &str| -> R {
        Ok(if float {
            format!("{name}f({})", x(0)?)
        } else {
            format!("{name}({})", x(0)?)
        })
    };
    let bin = |o: &str| -> R { Ok(format!("({} {o} {})", x(0)?, x(1)?)) };
    let u64_ = dt0 == DType::U64;
    match op {
        E::Add => bin("+"),
        E::Sub => bin("-"),
        E::Mul => bin("*"),
        E::Div => bin("/"),
        E::Pow => Ok(if float {
            format!("powf({}, {})", x(0)?, x(1)?)
        } else {
            format!("pow((double){}, (double){})", x(0)?, x(1)?)
        }),
        E::Mod => {
            let (v, y) = (x(0)?, x(1)?);
            Ok(match (dt0.is_float(), p.fmod) {
                (true, true) => format!("fmod{sfx}({v}, {y})"),
                (true, false) => format!("gopt_mod_floor({v}, {y})"),
                (false, true) => format!("gopt_imod_trunc({v}, {y})"),
                (false, false) => format!("gopt_imod_floor({v}, {y})"),
            })
        }
        E::Neg => Ok(format!("(-{})", x(0)?)),
        E::Abs => Ok(format!("({0} < 0 ? -{0} : {0})", x(0)?)),
        E::Reciprocal => Ok(format!("(1.0f / {})", x(0)?)),
        E::Sqrt => f("sqrt"),
        E::Exp => f("exp"),
        E::Log => f("log"),
        E::Ceil => f("ceil"),
        E::Floor => f("floor"),
        E::Round => f("rint"),
        // NaN stays NaN, as in the interpreter.
        E::Sign if dt0.is_float() => Ok(format!(
            "({0} != {0} ? {0} : ({1})(({0} > 0) - ({0} < 0)))",
            x(0)?,
            compute(out)
        )),
        E::Sign => Ok(format!("(({0} > 0) - ({0} < 0))", x(0)?)),
        E::Sin => f("sin"),
        E::Cos => f("cos"),
        E::Tan => f("tan"),
        E::Asin => f("asin"),
        E::Acos => f("acos"),
        E::Atan => f("atan"),
        E::Sinh => f("sinh"),
        E::Cosh => f("cosh"),
        E::Asinh => f("asinh"),
        E::Acosh => f("acosh"),
        E::Atanh => f("atanh"),
        E::Tanh => f("tanh"),
        E::Erf => f("erf"),
        E::Sigmoid => Ok(format!("gopt_sigmoid({})", x(0)?)),
        // NaN stays NaN, as in the interpreter.
        E::Relu => Ok(format!("({0} <= 0 ? 0 : {0})", x(0)?)),
        E::LeakyRelu => Ok(format!("({0} < 0 ? {1} * {0} : {0})", x(0)?, flit(p.alpha))),
        E::Elu => Ok(format!(
            "({0} < 0 ? {1} * expm1{sfx}({0}) : {0})",
            x(0)?,
            flit(p.alpha)
        )),
        E::Selu => {
            let v = x(0)?;
            let (al, ga) = (flit(p.alpha), flit(p.gamma));
            Ok(format!(
                "({v} <= 0 ? {ga} * {al} * expm1{sfx}({v}) : {ga} * {v})"
            ))
        }
        E::Celu => {
            let v = x(0)?;
            let al = flit(p.alpha);
            Ok(format!(
                "(fmax{sfx}({v}, 0.0f) + fmin{sfx}(0.0f, {al} * expm1{sfx}({v} / {al})))"
            ))
        }
        E::ThresholdedRelu => {
            let v = x(0)?;
            Ok(format!("({v} > {} ? {v} : 0.0f)", flit(p.alpha)))
        }
        E::Shrink => {
            let v = x(0)?;
            let (b, l, nl) = (flit(p.bias), flit(p.lambd), flit(-p.lambd));
            Ok(format!(
                "({v} < {nl} ? {v} + {b} : ({v} > {l} ? {v} - {b} : 0.0f))"
            ))
        }
        E::HardSigmoid => Ok(format!(
            "fmin{sfx}(fmax{sfx}({1} * {0} + {2}, 0.0f), 1.0f)",
            x(0)?,
            flit(p.alpha),
            flit(p.beta)
        )),
        E::HardSwish => Ok(format!(
            "({0} * fmin{sfx}(fmax{sfx}({0} / 6.0f + 0.5f, 0.0f), 1.0f))",
            x(0)?
        )),
        E::Softplus => Ok(format!("gopt_softplus({})", x(0)?)),
        E::Softsign => Ok(format!("({0} / (1.0f + fabs{sfx}({0})))", x(0)?)),
        E::Mish => Ok(format!("gopt_mish({})", x(0)?)),
        E::Gelu => Ok(if p.gelu_tanh {
            format!("gopt_gelu_tanh({})", x(0)?)
        } else {
            format!("gopt_gelu({})", x(0)?)
        }),
        E::Swish => Ok(format!(
            "({0} * gopt_sigmoid({1} * {0}))",
            x(0)?,
            flit(p.alpha)
        )),
        E::PRelu => {
            let v = x(0)?;
            Ok(if u64_ {
                v.to_string()
            } else {
                format!("({v} < 0 ? {v} * {} : {v})", x(1)?)
            })
        }
        E::Not => Ok(format!("(!{})", x(0)?)),
        E::And => bin("&&"),
        E::Or => bin("||"),
        E::Xor => bin("!="),
        E::BitwiseNot => Ok(format!("(~{})", x(0)?)),
        E::BitwiseAnd => bin("&"),
        E::BitwiseOr => bin("|"),
        E::BitwiseXor => bin("^"),
        E::BitShift => {
            // Shifts by a negative amount or by the width or more give 0 (-1 for a
            // negative value shifted right), as the interpreter.
            let (v, y) = (x(0)?, x(1)?);
            let w = dt0.size() * 8;
            Ok(match (u64_, p.shift_left) {
                (true, true) => format!("({y} < 64ULL ? {v} << {y} : 0ULL)"),
                (true, false) => format!("({y} < 64ULL ? {v} >> {y} : 0ULL)"),
                (false, true) => format!(
                    "({y} >= 0LL && {y} < {w}LL ? (long long)((unsigned long long){v} << {y}) : 0LL)"
                ),
                (false, false) => format!(
                    "({y} >= 0LL && {y} < {w}LL ? {v} >> {y} : ({v} < 0LL ? -1LL : 0LL))"
                ),
            })
        }
        E::IsNaN => Ok(format!("isnan({})", x(0)?)),
        E::IsInf => {
            let v = x(0)?;
            Ok(match (p.detect_positive, p.detect_negative) {
                (true, true) => format!("isinf({v})"),
                (true, false) => format!("(isinf({v}) && {v} > 0)"),
                (false, true) => format!("(isinf({v}) && {v} < 0)"),
                (false, false) => "false".into(),
            })
        }
        E::Equal => bin("=="),
        E::Less => bin("<"),
        E::LessOrEqual => bin("<="),
        E::Greater => bin(">"),
        E::GreaterOrEqual => bin(">="),
        E::Max | E::Min | E::Sum | E::Mean => {
            let xs: Vec<&str> = args.iter().map(|a| a.0.as_str()).collect();
            let first = xs.first().ok_or("no inputs")?.to_string();
            // Max and Min propagate NaN (numpy's maximum/minimum, the interpreter's).
            let folded = xs[1..].iter().fold(first, |acc, v| match op {
                E::Max => format!("gopt_max({acc}, {v})"),
                E::Min => format!("gopt_min({acc}, {v})"),
                _ => format!("({acc} + {v})"),
            });
            Ok(if op == E::Mean {
                format!("({folded} / {}.0f)", xs.len())
            } else {
                folded
            })
        }
        E::Where => Ok(format!("({} ? {} : {})", x(0)?, x(1)?, x(2)?)),
        E::Clip => {
            let v = x(0)?;
            let lo = args.get(1).map(|a| a.0.clone()).filter(|a| !a.is_empty());
            let hi = args.get(2).map(|a| a.0.clone()).filter(|a| !a.is_empty());
            let mut e = v.to_string();
            if let Some(lo) = lo {
                e = format!("({e} < {lo} ? {lo} : {e})");
            }
            if let Some(hi) = hi {
                e = format!("({e} > {hi} ? {hi} : {e})");
            }
            Ok(e)
        }
        E::Cast | E::CastLike => Ok(format!("({})({})", compute(out), x(0)?)),
        E::Dropout => Ok(x(0)?.to_string()),
        E::BitCast => Ok(bitcast(dt0, out, x(0)?)),
        E::Bernoulli
        | E::RandomUniform
        | E::RandomNormal
        | E::RandomUniformLike
        | E::RandomNormalLike
        | E::Multinomial => Err(format!("{} (no CUDA kernel)", op.name())),
    }
}
