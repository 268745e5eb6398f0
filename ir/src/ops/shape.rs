//! Shape computations and data movement: Shape, Reshape, Transpose, Concat, Slice,
//! Gather, Scatter, Pad, Expand, and the other ops that move or select elements
//! without arithmetic.

use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::util::{in_ty, input};
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;
use crate::{dim::Dim, dtype::DType};

op_family! {
    /// Shape computations and data movement.
    ShapeOp { Identity, Shape, Size }
}

impl ShapeOp {
    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        node: &Node,
        inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        match self {
            ShapeOp::Identity => Ok(vec![input(inputs, 0)?.clone()]),
            ShapeOp::Shape | ShapeOp::Size => {
                Ok(vec![shape_of_dims(node, input(inputs, 0)?.shape())?])
            }
        }
    }

    /// Output types.
    pub fn infer(
        self,
        _cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        match self {
            ShapeOp::Identity => Ok(vec![in_ty(inputs, 0)?.ty.clone()]),
            ShapeOp::Shape => {
                let rank = in_ty(inputs, 0)?.ty.shape.len();
                let (s, e) = shape_range(node, rank)?;
                Ok(vec![TensorType::new(
                    DType::I64,
                    vec![Dim::from(e.saturating_sub(s))],
                )])
            }
            ShapeOp::Size => Ok(vec![TensorType::new(DType::I64, vec![])]),
        }
    }
}

/// The `[start, end)` range of dims `Shape` reports (its `start`/`end` attributes,
/// clamped like Python slicing).
fn shape_range(node: &Node, rank: usize) -> Result<(usize, usize)> {
    let r = rank as i64;
    let clamp = |v: i64| -> usize { (if v < 0 { v + r } else { v }).clamp(0, r) as usize };
    let s = clamp(node.attrs.int_or("start", 0)?);
    let e = clamp(node.attrs.int_or("end", r)?);
    Ok((s, e.max(s)))
}

/// `Shape` or `Size` of a tensor with concrete dims `dims` (used by constant folding,
/// which knows the dims without having the data).
pub fn shape_of_dims(node: &Node, dims: &[usize]) -> Result<Tensor> {
    match node.op {
        crate::ops::Op::Shape(ShapeOp::Size) => Ok(Tensor::I64(
            ndarray::arr0(dims.iter().product::<usize>() as i64).into_dyn(),
        )),
        crate::ops::Op::Shape(ShapeOp::Shape) => {
            let (s, e) = shape_range(node, dims.len())?;
            Ok(Tensor::from_i64s(
                &dims[s..e].iter().map(|&d| d as i64).collect::<Vec<_>>(),
            ))
        }
        op => Err(IrError::Invalid(format!("shape_of_dims called on {op}"))),
    }
}
