//! Element-wise ops: math, activations, comparisons, logic, bitwise ops, casts and the
//! random generators. All broadcast numpy-style. Float math runs in f64 and rounds once
//! to the element type, so f16/bf16/f32 results are as close to exact as the type
//! allows; integer arithmetic stays in the integer type and wraps, as ONNX Runtime's
//! CPU provider does.
//!
//! The family is split by kind: `kernel` (broadcasting maps and the `Num`/`Int`
//! element traits), `math` (unary math), `activation`, `arith` (numeric binary and
//! variadic ops, Clip), `logic` (comparisons, boolean and bitwise ops, Where), `cast`
//! (Cast, CastLike, BitCast, Dropout), `random`, and `infer` (output types).

/// Matches a float tensor, binding `$a` to its array; other dtypes go to `$o`.
macro_rules! float_match {
    ($t:expr, $a:ident => $body:expr, $o:ident => $err:expr) => {
        match $t {
            $crate::Tensor::F32($a) => $body,
            $crate::Tensor::F16($a) => $body,
            $crate::Tensor::BF16($a) => $body,
            $crate::Tensor::F64($a) => $body,
            $o => $err,
        }
    };
}

/// Matches an integer tensor, binding `$a` to its array; other dtypes go to `$o`.
macro_rules! int_match {
    ($t:expr, $a:ident => $body:expr, $o:ident => $err:expr) => {
        match $t {
            $crate::Tensor::I8($a) => $body,
            $crate::Tensor::I16($a) => $body,
            $crate::Tensor::I32($a) => $body,
            $crate::Tensor::I64($a) => $body,
            $crate::Tensor::U8($a) => $body,
            $crate::Tensor::U16($a) => $body,
            $crate::Tensor::U32($a) => $body,
            $crate::Tensor::U64($a) => $body,
            $o => $err,
        }
    };
}

/// Matches a numeric (float or integer) tensor, binding `$a` to its array; bool goes
/// to `$o`.
macro_rules! num_match {
    ($t:expr, $a:ident => $body:expr, $o:ident => $err:expr) => {
        match $t {
            $crate::Tensor::F32($a) => $body,
            $crate::Tensor::F16($a) => $body,
            $crate::Tensor::BF16($a) => $body,
            $crate::Tensor::F64($a) => $body,
            $crate::Tensor::I8($a) => $body,
            $crate::Tensor::I16($a) => $body,
            $crate::Tensor::I32($a) => $body,
            $crate::Tensor::I64($a) => $body,
            $crate::Tensor::U8($a) => $body,
            $crate::Tensor::U16($a) => $body,
            $crate::Tensor::U32($a) => $body,
            $crate::Tensor::U64($a) => $body,
            $o => $err,
        }
    };
}

mod activation;
mod arith;
mod cast;
mod infer;
mod kernel;
mod logic;
mod math;
mod random;

pub(crate) use activation::{gelu_erf, gelu_tanh};
pub use kernel::broadcast_zip;
pub(crate) use math::sigmoid;

use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::util::input;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;
use crate::DType;
use activation::Act;
use arith::{Arith, Variadic};
use logic::{Bitwise, Cmp, Logic};
use math::Unary;

op_family! {
    /// Element-wise operations.
    ElementwiseOp {
        Add, Sub, Mul, Div, Pow, Mod,
        Neg, Abs, Reciprocal, Sqrt, Exp, Log, Ceil, Floor, Round, Sign,
        Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Tanh,
        Sigmoid, Erf,
        Relu, LeakyRelu, Elu, Selu, Celu, HardSigmoid, HardSwish, Softplus, Softsign,
        ThresholdedRelu, Shrink, Mish, Gelu, Swish, PRelu,
        Not, And, Or, Xor, BitwiseNot, BitwiseAnd, BitwiseOr, BitwiseXor, BitShift,
        IsNaN, IsInf, Equal, Less, LessOrEqual, Greater, GreaterOrEqual,
        Max, Min, Sum, Mean, Where, Clip,
        Cast, CastLike, BitCast, Dropout,
        Bernoulli, RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike,
        Multinomial,
    }
}

/// The element types an op accepts for its main input (input 0, or X for Where).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Accepts {
    /// f32, f16, bf16, f64.
    Float,
    /// Floats and integers.
    Num,
    /// Floats and signed integers.
    Signed,
    /// Signed and unsigned integers.
    Int,
    /// Bool only.
    Bool,
    /// Every dtype.
    Any,
    /// The op has no data input (RandomUniform, RandomNormal).
    Nothing,
}

impl Accepts {
    fn allows(self, d: DType) -> bool {
        match self {
            Accepts::Float => d.is_float(),
            Accepts::Num => d.is_float() || d.is_int(),
            Accepts::Signed => d.is_float() || d.is_signed_int(),
            Accepts::Int => d.is_int(),
            Accepts::Bool => d == DType::Bool,
            Accepts::Any | Accepts::Nothing => true,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Accepts::Float => "a float type",
            Accepts::Num => "a numeric type",
            Accepts::Signed => "a float or signed integer type",
            Accepts::Int => "an integer type",
            Accepts::Bool => "bool",
            Accepts::Any | Accepts::Nothing => "any type",
        }
    }
}

/// The `IrError::Unsupported` for `op` applied to `found`.
pub(crate) fn bad_dtype<T>(op: ElementwiseOp, found: DType) -> Result<T> {
    Err(IrError::Unsupported(format!(
        "{} on {found} (takes {})",
        op.name(),
        op.accepts().describe()
    )))
}

impl ElementwiseOp {
    /// Element types the op accepts for its main input.
    pub(crate) fn accepts(self) -> Accepts {
        use ElementwiseOp as E;
        match self {
            E::Add | E::Sub | E::Mul | E::Div | E::Pow | E::Mod => Accepts::Num,
            E::Abs | E::Sign | E::Relu | E::Shrink | E::PRelu => Accepts::Num,
            E::Max | E::Min | E::Sum | E::Clip => Accepts::Num,
            E::Neg => Accepts::Signed,
            E::Reciprocal | E::Sqrt | E::Exp | E::Log | E::Ceil | E::Floor | E::Round => {
                Accepts::Float
            }
            E::Sin | E::Cos | E::Tan | E::Asin | E::Acos | E::Atan => Accepts::Float,
            E::Sinh | E::Cosh | E::Asinh | E::Acosh | E::Atanh | E::Tanh => Accepts::Float,
            E::Sigmoid | E::Erf | E::LeakyRelu | E::Elu | E::Selu | E::Celu => Accepts::Float,
            E::HardSigmoid | E::HardSwish | E::Softplus | E::Softsign => Accepts::Float,
            E::ThresholdedRelu | E::Mish | E::Gelu | E::Swish | E::Mean => Accepts::Float,
            E::IsNaN | E::IsInf | E::Dropout | E::Bernoulli | E::Multinomial => Accepts::Float,
            E::Not | E::And | E::Or | E::Xor => Accepts::Bool,
            E::BitwiseNot | E::BitwiseAnd | E::BitwiseOr | E::BitwiseXor | E::BitShift => {
                Accepts::Int
            }
            E::Equal | E::Less | E::LessOrEqual | E::Greater | E::GreaterOrEqual => Accepts::Any,
            E::Where | E::Cast | E::CastLike | E::BitCast => Accepts::Any,
            E::RandomUniformLike | E::RandomNormalLike => Accepts::Any,
            E::RandomUniform | E::RandomNormal => Accepts::Nothing,
        }
    }

    /// Index of the input whose dtype `accepts` describes.
    fn main_input(self) -> usize {
        if self == ElementwiseOp::Where {
            1
        } else {
            0
        }
    }

    /// Fails with `Unsupported` when the main input's dtype is not one the op takes.
    pub(crate) fn check_dtype(self, d: DType) -> Result<()> {
        if self.accepts().allows(d) {
            Ok(())
        } else {
            bad_dtype(self, d)
        }
    }

    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        node: &Node,
        inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        use ElementwiseOp as E;
        if self.accepts() != Accepts::Nothing {
            self.check_dtype(input(inputs, self.main_input())?.dtype())?;
        }
        let x = || input(inputs, 0);
        let y = || input(inputs, 1);
        let one = match self {
            E::Add => arith::binary(Arith::Add, x()?, y()?)?,
            E::Sub => arith::binary(Arith::Sub, x()?, y()?)?,
            E::Mul => arith::binary(Arith::Mul, x()?, y()?)?,
            E::Div => arith::binary(Arith::Div, x()?, y()?)?,
            E::Mod => {
                let op = if node.attrs.int_or("fmod", 0)? != 0 {
                    Arith::Fmod
                } else {
                    Arith::Mod
                };
                arith::binary(op, x()?, y()?)?
            }
            E::Pow => arith::pow(x()?, y()?)?,
            E::Max => arith::variadic(Variadic::Max, inputs)?,
            E::Min => arith::variadic(Variadic::Min, inputs)?,
            E::Sum => arith::variadic(Variadic::Sum, inputs)?,
            E::Mean => arith::variadic(Variadic::Mean, inputs)?,
            E::Clip => arith::clip(inputs)?,
            E::Neg => math::unary(Unary::Neg, x()?)?,
            E::Abs => math::unary(Unary::Abs, x()?)?,
            E::Sign => math::unary(Unary::Sign, x()?)?,
            E::Reciprocal => math::unary(Unary::Reciprocal, x()?)?,
            E::Sqrt => math::unary(Unary::Sqrt, x()?)?,
            E::Exp => math::unary(Unary::Exp, x()?)?,
            E::Log => math::unary(Unary::Log, x()?)?,
            E::Ceil => math::unary(Unary::Ceil, x()?)?,
            E::Floor => math::unary(Unary::Floor, x()?)?,
            E::Round => math::unary(Unary::Round, x()?)?,
            E::Sin => math::unary(Unary::Sin, x()?)?,
            E::Cos => math::unary(Unary::Cos, x()?)?,
            E::Tan => math::unary(Unary::Tan, x()?)?,
            E::Asin => math::unary(Unary::Asin, x()?)?,
            E::Acos => math::unary(Unary::Acos, x()?)?,
            E::Atan => math::unary(Unary::Atan, x()?)?,
            E::Sinh => math::unary(Unary::Sinh, x()?)?,
            E::Cosh => math::unary(Unary::Cosh, x()?)?,
            E::Asinh => math::unary(Unary::Asinh, x()?)?,
            E::Acosh => math::unary(Unary::Acosh, x()?)?,
            E::Atanh => math::unary(Unary::Atanh, x()?)?,
            E::Tanh => math::unary(Unary::Tanh, x()?)?,
            E::Sigmoid => math::unary(Unary::Sigmoid, x()?)?,
            E::Erf => math::unary(Unary::Erf, x()?)?,
            E::Softplus => math::unary(Unary::Softplus, x()?)?,
            E::Softsign => math::unary(Unary::Softsign, x()?)?,
            E::Mish => math::unary(Unary::Mish, x()?)?,
            E::HardSwish => math::unary(Unary::HardSwish, x()?)?,
            E::Relu => activation::eval(Act::Relu, node, x()?)?,
            E::LeakyRelu => activation::eval(Act::LeakyRelu, node, x()?)?,
            E::Elu => activation::eval(Act::Elu, node, x()?)?,
            E::Selu => activation::eval(Act::Selu, node, x()?)?,
            E::Celu => activation::eval(Act::Celu, node, x()?)?,
            E::HardSigmoid => activation::eval(Act::HardSigmoid, node, x()?)?,
            E::ThresholdedRelu => activation::eval(Act::ThresholdedRelu, node, x()?)?,
            E::Shrink => activation::eval(Act::Shrink, node, x()?)?,
            E::Gelu => activation::eval(Act::Gelu, node, x()?)?,
            E::Swish => activation::eval(Act::Swish, node, x()?)?,
            E::PRelu => activation::prelu(x()?, y()?)?,
            E::Not => logic::not(x()?)?,
            E::And => logic::logic(Logic::And, x()?, y()?)?,
            E::Or => logic::logic(Logic::Or, x()?, y()?)?,
            E::Xor => logic::logic(Logic::Xor, x()?, y()?)?,
            E::BitwiseNot => logic::bitwise_not(x()?)?,
            E::BitwiseAnd => logic::bitwise(Bitwise::And, x()?, y()?)?,
            E::BitwiseOr => logic::bitwise(Bitwise::Or, x()?, y()?)?,
            E::BitwiseXor => logic::bitwise(Bitwise::Xor, x()?, y()?)?,
            E::BitShift => {
                let op = match node.attrs.str("direction")? {
                    Some("LEFT") => Bitwise::Shl,
                    Some("RIGHT") => Bitwise::Shr,
                    other => {
                        return Err(IrError::Attr {
                            name: "direction".into(),
                            msg: format!("expected \"LEFT\" or \"RIGHT\", found {other:?}"),
                        })
                    }
                };
                logic::bitwise(op, x()?, y()?)?
            }
            E::IsNaN => logic::is_nan(x()?)?,
            E::IsInf => logic::is_inf(node, x()?)?,
            E::Equal => logic::compare(Cmp::Eq, x()?, y()?)?,
            E::Less => logic::compare(Cmp::Lt, x()?, y()?)?,
            E::LessOrEqual => logic::compare(Cmp::Le, x()?, y()?)?,
            E::Greater => logic::compare(Cmp::Gt, x()?, y()?)?,
            E::GreaterOrEqual => logic::compare(Cmp::Ge, x()?, y()?)?,
            E::Where => logic::where_(x()?, y()?, input(inputs, 2)?)?,
            E::Cast => x()?.cast(cast::to_attr(node)?),
            E::CastLike => x()?.cast(y()?.dtype()),
            E::BitCast => cast::bitcast(x()?, cast::to_attr(node)?)?,
            E::Dropout => return cast::dropout(node, inputs),
            E::Bernoulli => random::bernoulli(node, x()?)?,
            E::RandomUniform => random::uniform(node, None)?,
            E::RandomNormal => random::normal(node, None)?,
            E::RandomUniformLike => random::uniform(node, Some(x()?))?,
            E::RandomNormalLike => random::normal(node, Some(x()?))?,
            E::Multinomial => random::multinomial(node, x()?)?,
        };
        Ok(vec![one])
    }

    /// Output types.
    pub fn infer(
        self,
        _cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        infer::infer(self, node, inputs)
    }

    /// False for random ops.
    pub fn is_deterministic(self) -> bool {
        use ElementwiseOp as E;
        match self {
            E::Bernoulli
            | E::RandomUniform
            | E::RandomNormal
            | E::RandomUniformLike
            | E::RandomNormalLike
            | E::Multinomial => false,
            E::Add | E::Sub | E::Mul | E::Div | E::Pow | E::Mod => true,
            E::Neg | E::Abs | E::Reciprocal | E::Sqrt | E::Exp | E::Log => true,
            E::Ceil | E::Floor | E::Round | E::Sign => true,
            E::Sin | E::Cos | E::Tan | E::Asin | E::Acos | E::Atan => true,
            E::Sinh | E::Cosh | E::Asinh | E::Acosh | E::Atanh | E::Tanh => true,
            E::Sigmoid | E::Erf | E::Relu | E::LeakyRelu | E::Elu | E::Selu | E::Celu => true,
            E::HardSigmoid | E::HardSwish | E::Softplus | E::Softsign => true,
            E::ThresholdedRelu | E::Shrink | E::Mish | E::Gelu | E::Swish | E::PRelu => true,
            E::Not | E::And | E::Or | E::Xor => true,
            E::BitwiseNot | E::BitwiseAnd | E::BitwiseOr | E::BitwiseXor | E::BitShift => true,
            E::IsNaN | E::IsInf => true,
            E::Equal | E::Less | E::LessOrEqual | E::Greater | E::GreaterOrEqual => true,
            E::Max | E::Min | E::Sum | E::Mean | E::Where | E::Clip => true,
            // Dropout only ever runs in inference mode (training with a non-zero ratio
            // is rejected), where it is the identity.
            E::Cast | E::CastLike | E::BitCast | E::Dropout => true,
        }
    }
}
