//! Shape and dtype inference for the element-wise family: broadcasting of symbolic
//! shapes, bool outputs for comparisons and predicates, and dtypes taken from the
//! `to`/`dtype` attributes for casts and random ops.

use super::ElementwiseOp;
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{broadcast_dims, in_ty, opt_in_ty};
use crate::ops::InferInput;

/// Output types of `op` applied to `inputs`.
pub(crate) fn infer(
    op: ElementwiseOp,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    use ElementwiseOp as E;
    if op != E::RandomUniform && op != E::RandomNormal {
        let main = if op == E::Where { 1 } else { 0 };
        op.check_dtype(in_ty(inputs, main)?.ty.dtype)?;
    }
    let x = || in_ty(inputs, 0).map(|i| i.ty);
    let ty = match op {
        // Same dtype in, broadcast shape out.
        E::Add | E::Sub | E::Mul | E::Div | E::Mod => same_dtype_broadcast(inputs)?,
        E::And | E::Or | E::Xor => same_dtype_broadcast(inputs)?,
        E::BitwiseAnd | E::BitwiseOr | E::BitwiseXor | E::BitShift => same_dtype_broadcast(inputs)?,
        E::Max | E::Min | E::Sum | E::Mean => same_dtype_broadcast(inputs)?,
        E::Equal | E::Less | E::LessOrEqual | E::Greater | E::GreaterOrEqual => {
            let t = same_dtype_broadcast(inputs)?;
            TensorType::new(DType::Bool, t.shape)
        }
        E::Pow => {
            let (b, e) = (x()?, in_ty(inputs, 1)?.ty);
            TensorType::new(b.dtype, broadcast_dims(&b.shape, &e.shape)?)
        }
        E::Where => {
            let c = x()?;
            if c.dtype != DType::Bool {
                return Err(dtype_err("Where condition", "bool", c.dtype));
            }
            let t = same_dtype_broadcast(&inputs[1..])?;
            TensorType::new(t.dtype, broadcast_dims(&c.shape, &t.shape)?)
        }
        E::Clip => {
            let t = x()?;
            for i in 1..3 {
                if let Some(b) = opt_in_ty(inputs, i) {
                    check_same(t.dtype, b.ty.dtype, "Clip bound")?;
                }
            }
            t.clone()
        }
        E::PRelu => {
            let t = x()?;
            check_same(t.dtype, in_ty(inputs, 1)?.ty.dtype, "PRelu slope")?;
            t.clone()
        }
        // Same type out as in.
        E::Neg | E::Abs | E::Reciprocal | E::Sqrt | E::Exp | E::Log => x()?.clone(),
        E::Ceil | E::Floor | E::Round | E::Sign => x()?.clone(),
        E::Sin | E::Cos | E::Tan | E::Asin | E::Acos | E::Atan => x()?.clone(),
        E::Sinh | E::Cosh | E::Asinh | E::Acosh | E::Atanh | E::Tanh => x()?.clone(),
        E::Sigmoid | E::Erf | E::Relu | E::LeakyRelu | E::Elu | E::Selu | E::Celu => x()?.clone(),
        E::HardSigmoid | E::HardSwish | E::Softplus | E::Softsign => x()?.clone(),
        E::ThresholdedRelu | E::Shrink | E::Mish | E::Gelu | E::Swish => x()?.clone(),
        E::Not | E::BitwiseNot => x()?.clone(),
        E::IsNaN | E::IsInf => TensorType::new(DType::Bool, x()?.shape.clone()),
        E::Cast | E::BitCast => {
            let to = super::cast::to_attr(node)?;
            let t = x()?;
            if op == E::BitCast && t.dtype.size() != to.size() {
                return Err(IrError::Unsupported(format!(
                    "BitCast from {} to {to}: widths must match",
                    t.dtype
                )));
            }
            TensorType::new(to, t.shape.clone())
        }
        E::CastLike => TensorType::new(in_ty(inputs, 1)?.ty.dtype, x()?.shape.clone()),
        E::Dropout => {
            let t = x()?;
            let mask = TensorType::new(DType::Bool, t.shape.clone());
            return Ok(vec![t.clone(), mask]);
        }
        E::RandomUniform | E::RandomNormal => {
            let dtype = node.attrs.dtype("dtype")?.unwrap_or(DType::F32);
            if !dtype.is_float() {
                return Err(IrError::Unsupported(format!(
                    "{} with dtype {dtype} (takes a float type)",
                    op.name()
                )));
            }
            let shape = node.attrs.ints("shape")?.ok_or_else(|| IrError::Attr {
                name: "shape".into(),
                msg: "required but missing".into(),
            })?;
            let dims = shape.iter().map(|&d| Dim::Known(d.max(0) as u64)).collect();
            TensorType::new(dtype, dims)
        }
        E::RandomUniformLike | E::RandomNormalLike | E::Bernoulli => {
            let t = x()?;
            let dtype = node.attrs.dtype("dtype")?.unwrap_or(t.dtype);
            TensorType::new(dtype, t.shape.clone())
        }
        E::Multinomial => {
            let t = x()?;
            let dtype = node.attrs.dtype("dtype")?.unwrap_or(DType::I32);
            if !matches!(dtype, DType::I32 | DType::I64) {
                return Err(IrError::Unsupported(format!(
                    "Multinomial with dtype {dtype} (takes i32 or i64)"
                )));
            }
            let samples = node.attrs.int_or("sample_size", 1)?.max(0) as u64;
            let batch = match t.shape.as_slice() {
                [b, _] => b.clone(),
                s => {
                    return Err(IrError::Shape(format!(
                        "Multinomial input must be [batch, classes], found rank {}",
                        s.len()
                    )))
                }
            };
            TensorType::new(dtype, vec![batch, Dim::Known(samples)])
        }
    };
    Ok(vec![ty])
}

/// Broadcast of every present input's shape; all must share input 0's dtype.
fn same_dtype_broadcast(inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let first = in_ty(inputs, 0)?.ty;
    let mut shape = first.shape.clone();
    for i in inputs.iter().skip(1).flatten() {
        check_same(first.dtype, i.ty.dtype, "operand")?;
        shape = broadcast_dims(&shape, &i.ty.shape)?;
    }
    Ok(TensorType::new(first.dtype, shape))
}

fn check_same(want: DType, found: DType, what: &str) -> Result<()> {
    if want == found {
        Ok(())
    } else {
        Err(dtype_err(what, want.name(), found))
    }
}

fn dtype_err(context: &str, expected: &str, found: DType) -> IrError {
    IrError::DType {
        context: context.into(),
        expected: expected.into(),
        found,
    }
}
