//! What each element-wise op computes, the same for every backend, one exhaustive match
//! per fact: its attributes with ONNX's defaults ([`params`]), the element types the
//! GPU kernels take for its main input ([`takes`], [`check`]), and its computation in
//! the small expression language both writers print ([`describe`], over [`Expr`]).
//! Adding an element-wise op that is a composition of [`Expr`]'s parts touches this
//! file and no writer.

pub mod expr;

pub use expr::{Bin, Cmp, Expr, Not, Prim};
use gopt_ir::ops::ElementwiseOp as E;
use gopt_ir::{Attrs, DType};

type R<T> = std::result::Result<T, String>;

/// The attributes an element-wise op reads, ONNX's defaults filled in. A field an op
/// does not read keeps its neutral value (0, 1 or false).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// LeakyRelu (0.01), Elu, Celu, ThresholdedRelu, Swish (1), HardSigmoid (0.2),
    /// Selu (1.67326...).
    pub alpha: f32,
    /// HardSigmoid's offset (0.5).
    pub beta: f32,
    /// Selu's scale (1.0507...).
    pub gamma: f32,
    /// Shrink's bias (0).
    pub bias: f32,
    /// Shrink's threshold (0.5).
    pub lambd: f32,
    /// Mod: the remainder takes the dividend's sign (C's `fmod`), else the divisor's.
    pub fmod: bool,
    /// BitShift: `direction` is LEFT (else RIGHT).
    pub shift_left: bool,
    /// IsInf: which infinities are true (both by default).
    pub detect_positive: bool,
    /// IsInf: see `detect_positive`.
    pub detect_negative: bool,
    /// Gelu: the tanh approximation (`approximate = "tanh"`), else the erf form.
    pub gelu_tanh: bool,
}

/// Selu's default `alpha`.
pub const SELU_ALPHA: f32 = 1.673_263_2;
/// Selu's default `gamma`.
pub const SELU_GAMMA: f32 = 1.050_701;

impl Default for Params {
    fn default() -> Self {
        Params {
            alpha: 1.0,
            beta: 0.0,
            gamma: 1.0,
            bias: 0.0,
            lambd: 0.0,
            fmod: false,
            shift_left: false,
            detect_positive: true,
            detect_negative: true,
            gelu_tanh: false,
        }
    }
}

/// The attributes `op` reads from `a`, with ONNX's defaults.
pub fn params(op: E, a: &Attrs) -> R<Params> {
    let f = |name: &str, d: f32| a.float_or(name, d).map_err(|e| e.to_string());
    let flag = |name: &str, d: i64| a.int_or(name, d).map(|v| v != 0).map_err(|e| e.to_string());
    let p = Params::default();
    Ok(match op {
        E::LeakyRelu => Params {
            alpha: f("alpha", 0.01)?,
            ..p
        },
        E::Elu | E::Celu | E::ThresholdedRelu | E::Swish => Params {
            alpha: f("alpha", 1.0)?,
            ..p
        },
        E::HardSigmoid => Params {
            alpha: f("alpha", 0.2)?,
            beta: f("beta", 0.5)?,
            ..p
        },
        E::Selu => Params {
            alpha: f("alpha", SELU_ALPHA)?,
            gamma: f("gamma", SELU_GAMMA)?,
            ..p
        },
        E::Shrink => Params {
            bias: f("bias", 0.0)?,
            lambd: f("lambd", 0.5)?,
            ..p
        },
        E::Mod => Params {
            fmod: flag("fmod", 0)?,
            ..p
        },
        E::BitShift => Params {
            shift_left: match a.str_or("direction", "").map_err(|e| e.to_string())? {
                "LEFT" => true,
                "RIGHT" => false,
                d => return Err(format!("BitShift direction {d:?}")),
            },
            ..p
        },
        E::IsInf => Params {
            detect_positive: flag("detect_positive", 1)?,
            detect_negative: flag("detect_negative", 1)?,
            ..p
        },
        E::Gelu => Params {
            gelu_tanh: match a.str_or("approximate", "none").map_err(|e| e.to_string())? {
                "none" => false,
                "tanh" => true,
                other => return Err(format!("Gelu approximate {other:?}")),
            },
            ..p
        },
        E::Add | E::Sub | E::Mul | E::Div | E::Pow => p,
        E::Neg | E::Abs | E::Reciprocal | E::Sqrt | E::Exp | E::Log => p,
        E::Ceil | E::Floor | E::Round | E::Sign => p,
        E::Sin | E::Cos | E::Tan | E::Asin | E::Acos | E::Atan => p,
        E::Sinh | E::Cosh | E::Asinh | E::Acosh | E::Atanh | E::Tanh => p,
        E::Sigmoid | E::Erf | E::Relu | E::HardSwish | E::Softplus | E::Softsign => p,
        E::Mish | E::PRelu => p,
        E::Not | E::And | E::Or | E::Xor => p,
        E::BitwiseNot | E::BitwiseAnd | E::BitwiseOr | E::BitwiseXor => p,
        E::IsNaN | E::Equal | E::Less | E::LessOrEqual | E::Greater | E::GreaterOrEqual => p,
        E::Max | E::Min | E::Sum | E::Mean | E::Where | E::Clip => p,
        E::Cast | E::CastLike | E::BitCast | E::Dropout => p,
        E::Bernoulli | E::RandomUniform | E::RandomNormal => p,
        E::RandomUniformLike | E::RandomNormalLike | E::Multinomial => p,
    })
}

/// The element types a GPU kernel of an op takes for its first input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// Floats (f32, f16, bf16, f64 where the backend stores them).
    Float,
    /// Floats and integers.
    Num,
    /// Floats and signed integers.
    Signed,
    /// Signed and unsigned integers.
    Int,
    /// Bool.
    Bool,
    /// Every type.
    Any,
}

impl Takes {
    /// Whether `dt` is one of these types.
    pub fn allows(self, dt: DType) -> bool {
        match self {
            Takes::Float => dt.is_float(),
            Takes::Num => dt.is_float() || dt.is_int(),
            Takes::Signed => dt.is_float() || dt.is_signed_int(),
            Takes::Int => dt.is_int(),
            Takes::Bool => dt == DType::Bool,
            Takes::Any => true,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Takes::Float => "a float type",
            Takes::Num => "a numeric type",
            Takes::Signed => "a float or signed integer type",
            Takes::Int => "an integer type",
            Takes::Bool => "bool",
            Takes::Any => "any type",
        }
    }
}

/// The types the GPU kernels of `op` take for input 0, or why no GPU kernel computes
/// it. Narrower than the interpreter where a GPU form would be inexact: Shrink takes
/// floats only.
pub fn takes(op: E) -> R<Takes> {
    Ok(match op {
        E::Add | E::Sub | E::Mul | E::Div | E::Pow | E::Mod => Takes::Num,
        E::Abs | E::Sign | E::Relu | E::PRelu => Takes::Num,
        E::Max | E::Min | E::Sum | E::Clip => Takes::Num,
        E::Neg => Takes::Signed,
        E::Reciprocal | E::Sqrt | E::Exp | E::Log | E::Ceil | E::Floor | E::Round => Takes::Float,
        E::Sin | E::Cos | E::Tan | E::Asin | E::Acos | E::Atan => Takes::Float,
        E::Sinh | E::Cosh | E::Asinh | E::Acosh | E::Atanh | E::Tanh => Takes::Float,
        E::Sigmoid | E::Erf | E::LeakyRelu | E::Elu | E::Selu | E::Celu => Takes::Float,
        E::HardSigmoid | E::HardSwish | E::Softplus | E::Softsign | E::Shrink => Takes::Float,
        E::ThresholdedRelu | E::Mish | E::Gelu | E::Swish | E::Mean => Takes::Float,
        E::IsNaN | E::IsInf | E::Dropout => Takes::Float,
        E::Not | E::And | E::Or | E::Xor => Takes::Bool,
        E::BitwiseNot | E::BitwiseAnd | E::BitwiseOr | E::BitwiseXor | E::BitShift => Takes::Int,
        E::Equal | E::Less | E::LessOrEqual | E::Greater | E::GreaterOrEqual => Takes::Any,
        E::Where | E::Cast | E::CastLike | E::BitCast => Takes::Any,
        E::Bernoulli
        | E::RandomUniform
        | E::RandomNormal
        | E::RandomUniformLike
        | E::RandomNormalLike
        | E::Multinomial => return Err(format!("{} (random ops run on the CPU only)", op.name())),
    })
}

/// Refuses `op` on a first input of type `dt` when no GPU kernel computes it.
pub fn check(op: E, dt: DType) -> R<()> {
    let t = takes(op)?;
    if t.allows(dt) {
        Ok(())
    } else {
        Err(format!("{} on {dt} (takes {})", op.name(), t.describe()))
    }
}

fn arg(k: usize) -> Expr {
    Expr::Arg(k)
}

fn num(s: &str) -> Expr {
    Expr::Num(s.to_string())
}

fn prim(p: Prim, args: Vec<Expr>) -> Expr {
    Expr::Prim(p, args)
}

fn paren(o: Bin, a: Expr, b: Expr) -> Expr {
    Expr::Paren(o, Box::new(a), Box::new(b))
}

fn flat(o: Bin, a: Expr, b: Expr) -> Expr {
    Expr::Flat(o, Box::new(a), Box::new(b))
}

fn select(c: Expr, a: Expr, b: Expr) -> Expr {
    Expr::Select(Box::new(c), Box::new(a), Box::new(b))
}

/// What `op` computes over its arguments (`args[k]`: argument `k`'s type, `None` where
/// an optional one is absent), its attributes `p` resolved; [`check`] has accepted its
/// types.
pub fn describe(op: E, p: &Params, args: &[Option<DType>]) -> R<Expr> {
    let present: Vec<bool> = args.iter().map(Option::is_some).collect();
    let x = arg(0);
    let unary = |q: Prim| prim(q, vec![arg(0)]);
    let binary = |q: Prim| prim(q, vec![arg(0), arg(1)]);
    let given: Vec<usize> = (0..present.len()).filter(|&k| present[k]).collect();
    // Max, Min, Sum: `f` folded over the given arguments, left to right.
    let fold = |f: &dyn Fn(Expr, Expr) -> Expr| -> R<Expr> {
        let (first, rest) = given.split_first().ok_or("no inputs")?;
        Ok(rest.iter().fold(arg(*first), |acc, &k| f(acc, arg(k))))
    };
    let alpha = || Expr::Attr(p.alpha, "alpha");
    Ok(match op {
        E::Add => paren(Bin::Add, x, arg(1)),
        E::Sub => paren(Bin::Sub, x, arg(1)),
        E::Mul => paren(Bin::Mul, x, arg(1)),
        E::Div => binary(Prim::Div),
        E::Pow => binary(Prim::Pow),
        E::Mod => binary(Prim::Mod(p.fmod)),
        E::Neg => unary(Prim::Neg),
        E::Abs => unary(Prim::Abs),
        E::Reciprocal => paren(Bin::Div, num("1.0"), x),
        E::Sqrt => unary(Prim::Sqrt),
        E::Exp => unary(Prim::Exp),
        E::Log => unary(Prim::Log),
        E::Ceil => unary(Prim::Ceil),
        E::Floor => unary(Prim::Floor),
        E::Round => unary(Prim::Round),
        E::Sign => unary(Prim::Sign),
        E::Sin => unary(Prim::Sin),
        E::Cos => unary(Prim::Cos),
        E::Tan => unary(Prim::Tan),
        E::Asin => unary(Prim::Asin),
        E::Acos => unary(Prim::Acos),
        E::Atan => unary(Prim::Atan),
        E::Sinh => unary(Prim::Sinh),
        E::Cosh => unary(Prim::Cosh),
        E::Asinh => unary(Prim::Asinh),
        E::Acosh => unary(Prim::Acosh),
        E::Atanh => unary(Prim::Atanh),
        E::Tanh => unary(Prim::Tanh),
        E::Erf => unary(Prim::Erf),
        E::Sigmoid => Expr::Helper("gopt_sigmoid", vec![x]),
        E::Softplus => Expr::Helper("gopt_softplus", vec![x]),
        E::Mish => Expr::Helper("gopt_mish", vec![x]),
        E::Gelu => unary(Prim::Gelu(p.gelu_tanh)),
        E::Relu => unary(Prim::Relu),
        E::PRelu => binary(Prim::PRelu),
        E::LeakyRelu => prim(Prim::LeakyRelu, vec![x, alpha()]),
        E::Elu => prim(Prim::Elu, vec![x, alpha()]),
        E::Selu => prim(Prim::Selu, vec![x, alpha(), Expr::Attr(p.gamma, "gamma")]),
        // max(x, 0) + min(0, alpha * (exp(x / alpha) - 1))
        E::Celu => paren(
            Bin::Add,
            prim(Prim::FMax, vec![arg(0), num("0.0")]),
            prim(
                Prim::FMin,
                vec![
                    num("0.0"),
                    flat(
                        Bin::Mul,
                        alpha(),
                        prim(Prim::Expm1, vec![flat(Bin::Div, arg(0), alpha())]),
                    ),
                ],
            ),
        ),
        E::ThresholdedRelu => select(flat(Bin::Gt, arg(0), alpha()), x, num("0.0")),
        E::Shrink => {
            let bias = || Expr::Attr(p.bias, "bias");
            select(
                flat(Bin::Lt, arg(0), Expr::Attr(-p.lambd, "lambd")),
                flat(Bin::Add, arg(0), bias()),
                select(
                    flat(Bin::Gt, arg(0), Expr::Attr(p.lambd, "lambd")),
                    flat(Bin::Sub, arg(0), bias()),
                    num("0.0"),
                ),
            )
        }
        E::HardSigmoid => prim(
            Prim::Clamp,
            vec![
                flat(
                    Bin::Add,
                    flat(Bin::Mul, alpha(), x),
                    Expr::Attr(p.beta, "beta"),
                ),
                num("0.0"),
                num("1.0"),
            ],
        ),
        E::HardSwish => paren(
            Bin::Mul,
            arg(0),
            prim(
                Prim::Clamp,
                vec![
                    flat(Bin::Add, flat(Bin::Div, arg(0), num("6.0")), num("0.5")),
                    num("0.0"),
                    num("1.0"),
                ],
            ),
        ),
        E::Softsign => paren(
            Bin::Div,
            arg(0),
            paren(Bin::Add, num("1.0"), prim(Prim::FAbs, vec![x])),
        ),
        E::Swish => paren(
            Bin::Mul,
            arg(0),
            Expr::Helper("gopt_sigmoid", vec![flat(Bin::Mul, alpha(), x)]),
        ),
        E::Not => Expr::Not(Not::Logical, Box::new(x)),
        E::And => paren(Bin::And, x, arg(1)),
        E::Or => paren(Bin::Or, x, arg(1)),
        E::Xor => paren(Bin::Ne, x, arg(1)),
        E::BitwiseNot => Expr::Not(Not::Bitwise, Box::new(x)),
        E::BitwiseAnd => paren(Bin::BitAnd, x, arg(1)),
        E::BitwiseOr => paren(Bin::BitOr, x, arg(1)),
        E::BitwiseXor => paren(Bin::BitXor, x, arg(1)),
        E::BitShift => binary(Prim::BitShift(p.shift_left)),
        E::IsNaN => unary(Prim::IsNaN),
        E::IsInf => unary(Prim::IsInf(p.detect_positive, p.detect_negative)),
        E::Equal => binary(Prim::Compare(Cmp::Eq)),
        E::Less => binary(Prim::Compare(Cmp::Lt)),
        E::LessOrEqual => binary(Prim::Compare(Cmp::Le)),
        E::Greater => binary(Prim::Compare(Cmp::Gt)),
        E::GreaterOrEqual => binary(Prim::Compare(Cmp::Ge)),
        E::Max => fold(&|a, b| prim(Prim::Max, vec![a, b]))?,
        E::Min => fold(&|a, b| prim(Prim::Min, vec![a, b]))?,
        E::Sum => fold(&|a, b| paren(Bin::Add, a, b))?,
        E::Mean => paren(
            Bin::Div,
            fold(&|a, b| paren(Bin::Add, a, b))?,
            Expr::Num(format!("{}.0", given.len())),
        ),
        E::Where => match args.first() {
            Some(Some(DType::Bool)) => select(x, arg(1), arg(2)),
            Some(Some(cdt)) => return Err(format!("Where condition of type {cdt}")),
            Some(None) | None => return Err("input 0".into()),
        },
        E::Clip => {
            let mut e = x;
            if present.get(1) == Some(&true) {
                e = prim(Prim::AtLeast, vec![e, arg(1)]);
            }
            if present.get(2) == Some(&true) {
                e = prim(Prim::AtMost, vec![e, arg(2)]);
            }
            e
        }
        E::Cast | E::CastLike => unary(Prim::Cast),
        E::BitCast => unary(Prim::BitCast),
        E::Dropout => x,
        E::Bernoulli
        | E::RandomUniform
        | E::RandomNormal
        | E::RandomUniformLike
        | E::RandomNormalLike
        | E::Multinomial => return Err(format!("{} (random ops run on the CPU only)", op.name())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gopt_ir::Attr;

    #[test]
    fn defaults_are_onnx_s() {
        let a = Attrs::default();
        assert_eq!(params(E::LeakyRelu, &a).unwrap().alpha, 0.01);
        let s = params(E::Selu, &a).unwrap();
        assert_eq!((s.alpha, s.gamma), (SELU_ALPHA, SELU_GAMMA));
        let h = params(E::HardSigmoid, &a).unwrap();
        assert_eq!((h.alpha, h.beta), (0.2, 0.5));
        let k = params(E::Shrink, &a).unwrap();
        assert_eq!((k.bias, k.lambd), (0.0, 0.5));
        assert!(!params(E::Mod, &a).unwrap().fmod);
        assert!(params(E::BitShift, &a).is_err());
        let mut b = Attrs::default();
        b.set("direction", Attr::Str("LEFT".into()));
        assert!(params(E::BitShift, &b).unwrap().shift_left);
    }

    #[test]
    fn takes_refuses_what_no_kernel_computes() {
        assert!(check(E::Sqrt, DType::I32).is_err());
        assert!(check(E::BitShift, DType::U8).is_ok());
        assert!(check(E::BitwiseAnd, DType::F32).is_err());
        assert!(check(E::RandomNormal, DType::F32).is_err());
        assert!(check(E::Neg, DType::U32).is_err());
    }
}
