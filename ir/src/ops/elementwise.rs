//! Element-wise ops: math, activations, comparisons, logic, bitwise ops and casts. All
//! broadcast numpy-style; float math runs in f32 (f64 for f64 inputs) and rounds back
//! for f16/bf16, as ONNX Runtime's CPU provider does.

use crate::error::{unsupported, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{broadcast_shape, broadcast_types, in_ty, input};
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::{Elem, Tensor};
use crate::{map_tensor, op_family};
use ndarray::{ArrayD, IxDyn, Zip};

op_family! {
    /// Element-wise operations.
    ElementwiseOp { Add, Relu }
}

impl ElementwiseOp {
    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        _node: &Node,
        inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        match self {
            ElementwiseOp::Add => {
                let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
                Ok(vec![binary_num(a, b, |x, y| x + y)?])
            }
            ElementwiseOp::Relu => {
                let a = input(inputs, 0)?;
                Ok(vec![
                    map_tensor!(a, x => x.mapv(|v| if v > Default::default() { v } else { Default::default() })),
                ])
            }
        }
    }

    /// Output types.
    pub fn infer(
        self,
        _cx: &mut InferCx,
        _node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        match self {
            ElementwiseOp::Add => Ok(vec![broadcast_types(&[
                in_ty(inputs, 0)?.ty,
                in_ty(inputs, 1)?.ty,
            ])?]),
            ElementwiseOp::Relu => Ok(vec![in_ty(inputs, 0)?.ty.clone()]),
        }
    }

    /// False for random ops.
    pub fn is_deterministic(self) -> bool {
        match self {
            ElementwiseOp::Add | ElementwiseOp::Relu => true,
        }
    }
}

/// Broadcasts `a` and `b` to a common shape and applies `f` element by element.
pub fn broadcast_zip<A: Elem, B: Elem, R: Elem>(
    a: &ArrayD<A>,
    b: &ArrayD<B>,
    f: impl Fn(A, B) -> R + Sync + Send,
) -> Result<ArrayD<R>> {
    let shape = broadcast_shape(a.shape(), b.shape())?;
    let av = a.broadcast(IxDyn(&shape)).expect("broadcastable");
    let bv = b.broadcast(IxDyn(&shape)).expect("broadcastable");
    Ok(Zip::from(&av).and(&bv).map_collect(|&x, &y| f(x, y)))
}

/// A numeric binary op on two tensors of the same dtype, computed in f64 for floats
/// and in i64 (wrapping) for integers.
fn binary_num(
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(f64, f64) -> f64 + Sync + Send + Copy,
) -> Result<Tensor> {
    fn go<T: Elem>(
        a: &ArrayD<T>,
        b: &Tensor,
        f: impl Fn(f64, f64) -> f64 + Sync + Send,
    ) -> Result<Tensor> {
        let b = b.as_array::<T>()?;
        Ok(T::wrap(broadcast_zip(a, b, |x, y| {
            T::from_f64(f(x.to_f64(), y.to_f64()))
        })?))
    }
    match a {
        Tensor::Bool(_) => unsupported("bool arithmetic"),
        t => crate::with_tensor!(t, x => go(x, b, f)),
    }
}
