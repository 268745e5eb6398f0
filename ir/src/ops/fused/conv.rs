//! `FusedConv(X, W, B?, residual?)`: `Y = act(conv(X, W) + B) + residual`, or
//! `Y = act(conv(X, W) + B + residual)` (attribute `epilogue`). It exists because CNN
//! blocks are a Conv followed by an activation (Relu, Clip for Relu6, SiLU, Sigmoid)
//! and, in residual networks, an Add of the block's input; fused, they are one node a
//! backend maps onto one convolution kernel with an epilogue. It also carries the
//! layout a backend wants (`NHWC`), so that layout changes are decided once by the
//! optimizer instead of as Transpose nodes around every Conv.
//!
//! Attributes: ONNX Conv's (`auto_pad`, `dilations`, `group`, `kernel_shape`, `pads`,
//! `strides`, same defaults and meaning), `activation` (string, default `"none"`:
//! `none`, `relu`, `clip` with float `clip_min`/`clip_max` (defaults -inf/+inf), `silu`,
//! `sigmoid`), `epilogue` (string, the order of the epilogue's steps:
//! `"bias_act_residual"`, the default, adds the residual after the activation, as
//! MobileNetV2's linear bottlenecks do; `"bias_residual_act"` before it, as ResNet's
//! `relu(conv(x) + b + identity)` and cuBLASLt's epilogue do), `layout` (`"NCHW"`, the
//! default, or `"NHWC"`: X, residual and Y are channels-last `[N, *spatial, C]`, W
//! stays `[M, C/group, *kernel]`) and `output_dtype` (dtype, default X's). B holds one
//! value per output channel; residual broadcasts (unidirectionally) to Y's shape. X and
//! W share one float dtype; B and residual may be any float dtype. f16/bf16
//! convolutions accumulate in f32 and the result rounds once.

use super::{
    check_arity, check_float, check_operands, epilogue, output_dtype, to_f64_array, Activation,
    EpilogueOrder,
};
use crate::dim::{fmt_shape, Dim};
use crate::error::{shape_err, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::nn::conv::{check_bias, conv_array, conv_dims, ConvShape};
use crate::ops::nn::gemm::{by_precision, Real};
use crate::ops::util::{broadcast_dims, broadcast_shape, in_ty, input, opt_in_ty, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::{Elem, Tensor};
use ndarray::{ArrayD, IxDyn};

/// The activations FusedConv accepts.
pub const ACTIVATIONS: &[&str] = &["none", "relu", "clip", "silu", "sigmoid"];

const OP: &str = "FusedConv";

/// Attribute `layout`: true for channels-last (`"NHWC"`).
fn channels_last(node: &Node) -> Result<bool> {
    match node.attrs.str_or("layout", "NCHW")? {
        "NCHW" => Ok(false),
        "NHWC" => Ok(true),
        other => Err(IrError::Attr {
            name: "layout".into(),
            msg: format!("expected \"NCHW\" or \"NHWC\", found \"{other}\""),
        }),
    }
}

/// The axis order taking `[N, *S, C]` to `[N, C, *S]`.
fn to_channels_first(rank: usize) -> Vec<usize> {
    let mut p = vec![0, rank - 1];
    p.extend(1..rank - 1);
    p
}

/// The axis order taking `[N, C, *S]` to `[N, *S, C]`.
fn to_channels_last(rank: usize) -> Vec<usize> {
    let mut p = vec![0];
    p.extend(2..rank);
    p.push(1);
    p
}

fn permute<T: Clone>(v: &[T], perm: &[usize]) -> Vec<T> {
    perm.iter().map(|&i| v[i].clone()).collect()
}

fn rank_err<T>(x: &str) -> Result<T> {
    shape_err(format!(
        "{OP} needs X of rank >= 3 ([N, C, spatial...] or [N, spatial..., C]), got {x}"
    ))
}

/// Runs the op.
pub(super) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    check_arity(node, inputs.len(), 2, 4)?;
    let (x, w) = (input(inputs, 0)?, input(inputs, 1)?);
    check_operands(OP, ("X", "W"), x.dtype(), w.dtype())?;
    let act = Activation::from_node(node, ACTIVATIONS)?;
    let order = EpilogueOrder::from_node(node)?;
    let nhwc = channels_last(node)?;
    let dtype = output_dtype(node, x.dtype())?;
    let rank = x.rank();
    if rank < 3 {
        return rank_err(&format!("{:?}", x.shape()));
    }
    let x_nchw = if nhwc {
        permute(x.shape(), &to_channels_first(rank))
    } else {
        x.shape().to_vec()
    };
    let cs = ConvShape::new(node, &x_nchw, w.shape())?;
    let mut y_shape = cs.out_shape();
    if nhwc {
        y_shape = permute(&y_shape, &to_channels_last(rank));
    }
    let bias = match opt_input(inputs, 2) {
        Some(b) => {
            check_bias(b, cs.m, OP)?;
            // Per output channel: [M, 1, ...] against NCHW, [M] against channels-last.
            let mut bshape = vec![cs.m];
            if !nhwc {
                bshape.extend(std::iter::repeat_n(1, rank - 2));
            }
            Some(
                to_f64_array(OP, "bias", b)?
                    .into_shape_clone(IxDyn(&bshape))
                    .map_err(|e| IrError::Shape(format!("{OP} bias: {e}")))?,
            )
        }
        None => None,
    };
    let residual = match opt_input(inputs, 3) {
        Some(r) => {
            if broadcast_shape(&y_shape, r.shape()).ok().as_ref() != Some(&y_shape) {
                return shape_err(format!(
                    "{OP} residual {:?} does not broadcast to the output shape {y_shape:?}",
                    r.shape()
                ));
            }
            Some(to_f64_array(OP, "residual", r)?)
        }
        None => None,
    };
    let acc = by_precision(
        x.dtype(),
        OP,
        || conv_acc::<f32>(&cs, x, w, nhwc),
        || conv_acc::<f64>(&cs, x, w, nhwc),
    )?;
    Ok(vec![epilogue(
        acc,
        1.0,
        bias.as_ref(),
        act,
        residual.as_ref(),
        order,
        dtype,
    )?])
}

/// `conv(X, W)` on the nn family's kernel in precision `R` (f32 for f16/bf16), in the
/// node's layout, as f64 for the epilogue.
fn conv_acc<R: Real>(cs: &ConvShape, x: &Tensor, w: &Tensor, nhwc: bool) -> Result<ArrayD<f64>> {
    let (xw, ww) = (R::widen(x)?, R::widen(w)?);
    let rank = xw.ndim();
    let xv = if nhwc {
        xw.view().permuted_axes(to_channels_first(rank))
    } else {
        xw.view()
    };
    let y = conv_array(cs, xv, ww.view(), None)?;
    let y = if nhwc {
        y.permuted_axes(to_channels_last(rank))
    } else {
        y
    };
    Ok(y.as_standard_layout().mapv(Elem::to_f64))
}

/// Output type: the convolution's shape in the node's layout, of dtype `output_dtype`
/// or X's.
pub(super) fn infer(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    check_arity(node, inputs.len(), 2, 4)?;
    let (x, w) = (in_ty(inputs, 0)?.ty, in_ty(inputs, 1)?.ty);
    check_operands(OP, ("X", "W"), x.dtype, w.dtype)?;
    Activation::from_node(node, ACTIVATIONS)?;
    EpilogueOrder::from_node(node)?;
    let nhwc = channels_last(node)?;
    let rank = x.shape.len();
    if rank < 3 {
        return rank_err(&fmt_shape(&x.shape));
    }
    let x_nchw: Vec<Dim> = if nhwc {
        permute(&x.shape, &to_channels_first(rank))
    } else {
        x.shape.clone()
    };
    let mut y = conv_dims(cx, node, &x_nchw, &w.shape)?;
    if nhwc {
        y = permute(&y, &to_channels_last(rank));
    }
    if let Some(b) = opt_in_ty(inputs, 2) {
        check_float(OP, "bias", b.ty.dtype)?;
        if b.ty.shape.len() != 1 {
            return shape_err(format!(
                "{OP} bias must be 1-D, got {}",
                fmt_shape(&b.ty.shape)
            ));
        }
    }
    if let Some(r) = opt_in_ty(inputs, 3) {
        check_float(OP, "residual", r.ty.dtype)?;
        if !matches!(broadcast_dims(&y, &r.ty.shape), Ok(d) if d.len() == y.len()) {
            return shape_err(format!(
                "{OP} residual {} does not broadcast to the output shape {}",
                fmt_shape(&r.ty.shape),
                fmt_shape(&y)
            ));
        }
    }
    Ok(vec![TensorType::new(output_dtype(node, x.dtype)?, y)])
}
