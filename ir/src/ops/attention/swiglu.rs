//! ONNX `SwiGLU` (opset 28): `Y = A * sigmoid(alpha * A) * B`, the gated activation of
//! Llama-style MLPs. Mirrors `onnx/reference/ops/op_swiglu.py`.

use super::real::{from_real, real, rounder, to_real, wide, Real};
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input};
use crate::ops::InferInput;
use crate::tensor::Tensor;
use ndarray::Zip;

/// Runs the op.
pub(super) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
    if a.shape() != b.shape() || a.dtype() != b.dtype() {
        return Err(IrError::Shape(format!(
            "A ({} {:?}) and B ({} {:?}) must have the same dtype and shape",
            a.dtype(),
            a.shape(),
            b.dtype(),
            b.shape()
        )));
    }
    let alpha = f64::from(node.attrs.float_or("alpha", 1.0)?);
    let y = if wide(a.dtype(), "SwiGLU")? {
        run::<f64>(a, b, alpha)?
    } else {
        run::<f32>(a, b, alpha)?
    };
    Ok(vec![y])
}

fn run<F: Real>(a: &Tensor, b: &Tensor, alpha: f64) -> Result<Tensor> {
    let rt = rounder::<F>(a.dtype());
    let alpha: F = real(alpha);
    let (x, g) = (to_real::<F>(a, "A")?, to_real::<F>(b, "B")?);
    let y = Zip::from(&x).and(&g).map_collect(|&x, &g| {
        let sig = rt(F::one() / (F::one() + (-alpha * x).exp()));
        rt(rt(x * sig) * g)
    });
    Ok(from_real(y, a.dtype()))
}

/// Output types: those of `A`.
pub(super) fn infer(inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    Ok(vec![in_ty(inputs, 0)?.ty.clone()])
}
