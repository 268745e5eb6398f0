//! What both element-wise writers read of an op the same way: its attributes with
//! ONNX's defaults ([`params`]), the element types the GPU kernels take for its main
//! input ([`takes`], [`check`]), and whether a Dropout node runs in inference mode
//! ([`dropout_inference`]). The writers spell each op in their own language; this
//! module decides what that spelling has to compute.

use gopt_ir::ops::ElementwiseOp as E;
use gopt_ir::{Attrs, DType, Graph, Node, ValueId};

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

/// How a Dropout body node runs: always as the identity (the interpreter refuses
/// training with a non-zero ratio), proven so at compile time or checked on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropout {
    /// Inference: `training_mode` absent or a constant false, or the ratio a constant 0.
    Inference,
    /// Training mode or the ratio known only at run time: the kernel raises the node's
    /// error code where `training` is true and `ratio` is not 0. `None` is a side known
    /// to hold (a constant true `training_mode`; a constant non-zero or absent ratio,
    /// whose default is 0.5); the two are never both `None`.
    Checked {
        /// The body value of `training_mode`, when it is not a constant.
        training: Option<ValueId>,
        /// The body value of the ratio, when it is not a constant.
        ratio: Option<ValueId>,
    },
}

/// What the run's error says when a checked Dropout meets training with a non-zero
/// ratio.
pub const DROPOUT_TRAINING: &str =
    "Dropout in training mode with a non-zero ratio (only inference is implemented)";

/// What a checked Dropout tests of a body value: `training_mode` as it is, the ratio
/// against 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// The value is true (`training_mode`).
    True,
    /// The value is not 0 (the ratio).
    NonZero,
}

impl Dropout {
    /// The body values a checked Dropout tests, all of which must hold for it to train
    /// (the kernel then raises the node's code): none for inference.
    pub fn conditions(&self) -> Vec<(ValueId, Test)> {
        match *self {
            Dropout::Inference => Vec::new(),
            Dropout::Checked { training, ratio } => training
                .map(|t| (t, Test::True))
                .into_iter()
                .chain(ratio.map(|r| (r, Test::NonZero)))
                .collect(),
        }
    }
}

/// How Dropout body node `bn` runs; an `Err` is a Dropout that always trains with a
/// non-zero ratio. `body`'s inputs are `params`, values of `g`.
pub fn dropout(g: &Graph, body: &Graph, params: &[ValueId], bn: &Node) -> R<Dropout> {
    // A body value's constant: moved into the body, or a parameter that is one.
    let constant = |v: ValueId| {
        body.constant(v).or_else(|| {
            let k = body.inputs.iter().position(|&b| b == v)?;
            g.constant(*params.get(k)?)
        })
    };
    let input = |k: usize| bn.inputs.get(k).copied().flatten();
    let training = match input(2) {
        None => return Ok(Dropout::Inference),
        Some(v) => match constant(v) {
            Some(t) if t.to_i64_vec().iter().all(|&b| b == 0) => return Ok(Dropout::Inference),
            Some(_) => None,
            None => Some(v),
        },
    };
    let ratio = match input(1) {
        None => None,
        Some(v) => match constant(v) {
            Some(t) if t.to_f64_vec().iter().all(|&r| r == 0.0) => return Ok(Dropout::Inference),
            Some(_) => None,
            None => Some(v),
        },
    };
    if training.is_none() && ratio.is_none() {
        return Err("Dropout in training mode (training_mode a constant true, ratio not 0)".into());
    }
    Ok(Dropout::Checked { training, ratio })
}

/// The mask output of a single Dropout node `node` (all true in inference mode), when
/// it has one.
pub fn dropout_mask(node: &Node) -> Option<ValueId> {
    match node.op {
        gopt_ir::Op::Elementwise(E::Dropout) => node.outputs.get(1).copied(),
        _ => None,
    }
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
