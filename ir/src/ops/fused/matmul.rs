//! `FusedMatMul(A, B, bias?, residual?)`: `Y = act(alpha * matmul(A, B') + bias) +
//! residual`. It exists because the linear layers of transformers and MLPs are a
//! MatMul (or Gemm) followed by a bias add, an activation and often a residual add;
//! fused, they are one node a backend maps onto one GEMM with an epilogue, and the
//! intermediate tensors are never stored.
//!
//! Attributes: `activation` (string, default `"none"`: `none`, `relu`, `gelu` (erf
//! form), `gelu_tanh`, `silu`, `tanh`, `sigmoid`), `alpha` (float, default 1.0),
//! `trans_b` (int, default 0: B' is B transposed over its last two axes) and
//! `output_dtype` (dtype, default A's). The product is numpy `matmul` (batch dims
//! broadcast, 1-D operands promoted, as ONNX MatMul); bias and residual broadcast
//! multidirectionally with it. A and B share one float dtype; bias and residual may be
//! any float dtype. f16/bf16 products accumulate in f32 and the result rounds once.

use super::{
    check_arity, check_float, check_operands, epilogue, epilogue_dims, output_dtype, to_f64_array,
    Activation, EpilogueOrder,
};
use crate::dim::Dim;
use crate::error::{shape_err, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::nn::gemm::{by_precision, Real};
use crate::ops::nn::matmul::{matmul, matmul_dims};
use crate::ops::util::{in_ty, input, opt_in_ty, opt_input};
use crate::ops::InferInput;
use crate::tensor::{Elem, Tensor};
use ndarray::ArrayD;

/// The activations FusedMatMul accepts.
pub const ACTIVATIONS: &[&str] = &[
    "none",
    "relu",
    "gelu",
    "gelu_tanh",
    "silu",
    "tanh",
    "sigmoid",
];

const OP: &str = "FusedMatMul";

/// Attribute `trans_b` (0 or 1).
fn trans_b(node: &Node) -> Result<bool> {
    match node.attrs.int_or("trans_b", 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(IrError::Attr {
            name: "trans_b".into(),
            msg: format!("expected 0 or 1, found {v}"),
        }),
    }
}

fn trans_rank_err<T>(rank: usize) -> Result<T> {
    shape_err(format!(
        "{OP} with trans_b=1 needs B of rank >= 2, got rank {rank}"
    ))
}

/// Runs the op.
pub(super) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    check_arity(node, inputs.len(), 2, 4)?;
    let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
    check_operands(OP, ("A", "B"), a.dtype(), b.dtype())?;
    let act = Activation::from_node(node, ACTIVATIONS)?;
    let alpha = f64::from(node.attrs.float_or("alpha", 1.0)?);
    let tb = trans_b(node)?;
    let dtype = output_dtype(node, a.dtype())?;
    let bias = opt_input(inputs, 2)
        .map(|t| to_f64_array(OP, "bias", t))
        .transpose()?;
    let residual = opt_input(inputs, 3)
        .map(|t| to_f64_array(OP, "residual", t))
        .transpose()?;
    let acc = by_precision(
        a.dtype(),
        OP,
        || product::<f32>(a, b, tb),
        || product::<f64>(a, b, tb),
    )?;
    Ok(vec![epilogue(
        acc,
        alpha,
        bias.as_ref(),
        act,
        residual.as_ref(),
        EpilogueOrder::ActThenResidual,
        dtype,
    )?])
}

/// `matmul(A, B')` on the nn family's kernel in precision `R` (f32 for f16/bf16), as
/// f64 for the epilogue.
fn product<R: Real>(a: &Tensor, b: &Tensor, trans_b: bool) -> Result<ArrayD<f64>> {
    let (x, y) = (R::widen(a)?, R::widen(b)?);
    let mut yv = y.view();
    if trans_b {
        let r = yv.ndim();
        if r < 2 {
            return trans_rank_err(r);
        }
        yv.swap_axes(r - 2, r - 1);
    }
    Ok(matmul(x.view(), yv)?.mapv(Elem::to_f64))
}

/// Output type: the broadcast of `matmul(A, B')` with bias and residual, of dtype
/// `output_dtype` or A's.
pub(super) fn infer(node: &Node, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    check_arity(node, inputs.len(), 2, 4)?;
    let (a, b) = (in_ty(inputs, 0)?.ty, in_ty(inputs, 1)?.ty);
    check_operands(OP, ("A", "B"), a.dtype, b.dtype)?;
    Activation::from_node(node, ACTIVATIONS)?;
    node.attrs.float_or("alpha", 1.0)?;
    let bias = opt_in_ty(inputs, 2).map(|i| i.ty);
    let residual = opt_in_ty(inputs, 3).map(|i| i.ty);
    for (what, t) in [("bias", bias), ("residual", residual)] {
        if let Some(t) = t {
            check_float(OP, what, t.dtype)?;
        }
    }
    let mut b_shape: Vec<Dim> = b.shape.clone();
    if trans_b(node)? {
        let r = b_shape.len();
        if r < 2 {
            return trans_rank_err(r);
        }
        b_shape.swap(r - 2, r - 1);
    }
    let shape = epilogue_dims(matmul_dims(&a.shape, &b_shape)?, &[bias, residual])?;
    Ok(vec![TensorType::new(output_dtype(node, a.dtype)?, shape)])
}
