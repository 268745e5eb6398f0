//! The CUDA spelling of an element-wise step ([`crate::lower::body::Expr`], the op's
//! computation described once for both writers): floats in `float` (`double` for
//! f64), bool, integers in `long long` (`unsigned long long` for u64; narrower results
//! wrapped to their width by the caller). One exhaustive match over the primitives.

use super::{compute, storage};
use crate::cuda::support::flit;
use crate::lower::body::{Expr, Not, Prim};
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

/// A step's arguments (name and type; an absent optional input has an empty name)
/// and its result's type.
struct Cx<'a> {
    args: &'a [(String, DType)],
    dt0: DType,
    out: DType,
}

/// `e` over `args` (name and type; an absent optional input has an empty name),
/// giving a value of `out`'s compute type.
pub fn expr(e: &Expr, args: &[(String, DType)], out: DType) -> R {
    let dt0 = args.iter().find(|a| !a.0.is_empty()).map_or(out, |a| a.1);
    Cx { args, dt0, out }.print(e)
}

impl Cx<'_> {
    fn print(&self, e: &Expr) -> R {
        Ok(match e {
            Expr::Arg(k) => self
                .args
                .get(*k)
                .map(|a| a.0.clone())
                .filter(|a| !a.is_empty())
                .ok_or_else(|| format!("input {k}"))?,
            Expr::Num(s) => format!("{s}f"),
            Expr::Attr(v, _) => flit(*v),
            Expr::Paren(o, a, b) => format!("({} {} {})", self.print(a)?, o.text(), self.print(b)?),
            Expr::Flat(o, a, b) => format!("{} {} {}", self.print(a)?, o.text(), self.print(b)?),
            Expr::Not(Not::Logical, a) => format!("(!{})", self.print(a)?),
            Expr::Not(Not::Bitwise, a) => format!("(~{})", self.print(a)?),
            Expr::Select(c, a, b) => format!(
                "({} ? {} : {})",
                self.print(c)?,
                self.print(a)?,
                self.print(b)?
            ),
            Expr::Helper(name, xs) => {
                let xs: Vec<String> = xs.iter().map(|x| self.print(x)).collect::<Result<_, _>>()?;
                format!("{name}({})", xs.join(", "))
            }
            Expr::Prim(p, xs) => {
                let xs: Vec<String> = xs.iter().map(|x| self.print(x)).collect::<Result<_, _>>()?;
                self.prim(*p, &xs)?
            }
        })
    }

    fn prim(&self, p: Prim, xs: &[String]) -> R {
        let x = |i: usize| {
            xs.get(i)
                .map(String::as_str)
                .ok_or_else(|| format!("input {i}"))
        };
        let (dt0, out) = (self.dt0, self.out);
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
        match p {
            Prim::Sqrt => f("sqrt"),
            Prim::Exp => f("exp"),
            Prim::Log => f("log"),
            Prim::Ceil => f("ceil"),
            Prim::Floor => f("floor"),
            Prim::Round => f("rint"),
            Prim::Sin => f("sin"),
            Prim::Cos => f("cos"),
            Prim::Tan => f("tan"),
            Prim::Asin => f("asin"),
            Prim::Acos => f("acos"),
            Prim::Atan => f("atan"),
            Prim::Sinh => f("sinh"),
            Prim::Cosh => f("cosh"),
            Prim::Asinh => f("asinh"),
            Prim::Acosh => f("acosh"),
            Prim::Atanh => f("atanh"),
            Prim::Tanh => f("tanh"),
            Prim::Erf => f("erf"),
            Prim::Expm1 => Ok(format!("expm1{sfx}({})", x(0)?)),
            Prim::FAbs => Ok(format!("fabs{sfx}({})", x(0)?)),
            Prim::FMax => Ok(format!("fmax{sfx}({}, {})", x(0)?, x(1)?)),
            Prim::FMin => Ok(format!("fmin{sfx}({}, {})", x(0)?, x(1)?)),
            Prim::Clamp => Ok(format!(
                "fmin{sfx}(fmax{sfx}({}, {}), {})",
                x(0)?,
                x(1)?,
                x(2)?
            )),
            Prim::Gelu(true) => Ok(format!("gopt_gelu_tanh({})", x(0)?)),
            Prim::Gelu(false) => Ok(format!("gopt_gelu({})", x(0)?)),
            Prim::Div => Ok(format!("({} / {})", x(0)?, x(1)?)),
            Prim::Pow => Ok(if float {
                format!("powf({}, {})", x(0)?, x(1)?)
            } else {
                format!("pow((double){}, (double){})", x(0)?, x(1)?)
            }),
            Prim::Mod(fmod) => {
                let (v, y) = (x(0)?, x(1)?);
                Ok(match (dt0.is_float(), fmod) {
                    (true, true) => format!("fmod{sfx}({v}, {y})"),
                    (true, false) => format!("gopt_mod_floor({v}, {y})"),
                    (false, true) => format!("gopt_imod_trunc({v}, {y})"),
                    (false, false) => format!("gopt_imod_floor({v}, {y})"),
                })
            }
            Prim::Neg => Ok(format!("(-{})", x(0)?)),
            Prim::Abs => Ok(format!("({0} < 0 ? -{0} : {0})", x(0)?)),
            // NaN stays NaN, as in the interpreter.
            Prim::Sign if dt0.is_float() => Ok(format!(
                "({0} != {0} ? {0} : ({1})(({0} > 0) - ({0} < 0)))",
                x(0)?,
                compute(out)
            )),
            Prim::Sign => Ok(format!("(({0} > 0) - ({0} < 0))", x(0)?)),
            // NaN stays NaN, as in the interpreter.
            Prim::Relu => Ok(format!("({0} <= 0 ? 0 : {0})", x(0)?)),
            Prim::PRelu => {
                let v = x(0)?;
                Ok(if dt0 == DType::U64 {
                    v.to_string()
                } else {
                    format!("({v} < 0 ? {v} * {} : {v})", x(1)?)
                })
            }
            Prim::LeakyRelu => Ok(format!("({0} < 0 ? {1} * {0} : {0})", x(0)?, x(1)?)),
            Prim::Elu => Ok(format!(
                "({0} < 0 ? {1} * expm1{sfx}({0}) : {0})",
                x(0)?,
                x(1)?
            )),
            Prim::Selu => {
                let (v, al, ga) = (x(0)?, x(1)?, x(2)?);
                Ok(format!(
                    "({v} <= 0 ? {ga} * {al} * expm1{sfx}({v}) : {ga} * {v})"
                ))
            }
            Prim::BitShift(left) => {
                // Shifts by a negative amount or by the width or more give 0 (-1 for a
                // negative value shifted right), as the interpreter.
                let (v, y) = (x(0)?, x(1)?);
                let w = dt0.size() * 8;
                Ok(match (dt0 == DType::U64, left) {
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
            Prim::IsNaN => Ok(format!("isnan({})", x(0)?)),
            Prim::IsInf(pos, neg) => {
                let v = x(0)?;
                Ok(match (pos, neg) {
                    (true, true) => format!("isinf({v})"),
                    (true, false) => format!("(isinf({v}) && {v} > 0)"),
                    (false, true) => format!("(isinf({v}) && {v} < 0)"),
                    (false, false) => "false".into(),
                })
            }
            // Max and Min propagate NaN (numpy's maximum/minimum, the interpreter's).
            Prim::Max => Ok(format!("gopt_max({}, {})", x(0)?, x(1)?)),
            Prim::Min => Ok(format!("gopt_min({}, {})", x(0)?, x(1)?)),
            Prim::AtLeast => Ok(format!("({0} < {1} ? {1} : {0})", x(0)?, x(1)?)),
            Prim::AtMost => Ok(format!("({0} > {1} ? {1} : {0})", x(0)?, x(1)?)),
            Prim::Compare(c) => Ok(format!("({} {} {})", x(0)?, c.text(), x(1)?)),
            Prim::Cast => Ok(format!("({})({})", compute(out), x(0)?)),
            Prim::BitCast => Ok(bitcast(dt0, out, x(0)?)),
        }
    }
}
