//! ONNX `RotaryEmbedding` (opset 23): rotates the first `rotary_embedding_dim` channels
//! of each head by position-dependent angles, pairing channel `i` with `i + dim/2`
//! (halves) or `2i` with `2i+1` (interleaved). Mirrors
//! `onnx/reference/ops/op_rotary_embedding.py`.

use super::real::{from_real, rounder, to_real, wide, Real};
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_input};
use crate::ops::InferInput;
use crate::tensor::Tensor;
use ndarray::{Array3, Array4, ArrayD, Ix3, Ix4, IxDyn};

/// Runs the op.
pub(super) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let dtype = input(inputs, 0)?.dtype();
    let y = if wide(dtype, "RotaryEmbedding")? {
        run::<f64>(node, inputs)?
    } else {
        run::<f32>(node, inputs)?
    };
    Ok(vec![y])
}

/// Output types: those of `X`.
pub(super) fn infer(inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    Ok(vec![in_ty(inputs, 0)?.ty.clone()])
}

/// The cos or sin cache as `[batch, seq, dim/2]`, gathered by `position_ids` if given.
fn cache<F: Real>(
    t: &Tensor,
    pos: Option<&Tensor>,
    (b, s): (usize, usize),
    what: &str,
) -> Result<Array3<F>> {
    let c = to_real::<F>(t, what)?;
    match pos {
        Some(pos) => {
            let c = c.into_dimensionality::<ndarray::Ix2>().map_err(|_| {
                IrError::Shape(format!(
                    "{what} must be 2-D with position_ids, got {:?}",
                    t.shape()
                ))
            })?;
            if pos.shape() != [b, s] {
                return Err(IrError::Shape(format!(
                    "position_ids shape {:?}, expected [{b}, {s}]",
                    pos.shape()
                )));
            }
            let (rows, half) = c.dim();
            let ids = pos.to_i64_vec();
            let mut out = Array3::zeros((b, s, half));
            for (n, &id) in ids.iter().enumerate() {
                let r = if id < 0 { id + rows as i64 } else { id };
                if r < 0 || r >= rows as i64 {
                    return Err(IrError::Shape(format!(
                        "position id {id} out of range for {what} with {rows} rows"
                    )));
                }
                out.slice_mut(ndarray::s![n / s, n % s, ..])
                    .assign(&c.row(r as usize));
            }
            Ok(out)
        }
        None => {
            let half = *c.shape().last().unwrap_or(&0);
            let v = c.broadcast(IxDyn(&[b, s, half])).ok_or_else(|| {
                IrError::Shape(format!(
                    "{what} {:?} does not broadcast to [{b}, {s}, {half}]",
                    t.shape()
                ))
            })?;
            Ok(v.to_owned().into_dimensionality::<Ix3>().expect("3-D"))
        }
    }
}

fn run<F: Real>(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x_t = input(inputs, 0)?;
    let dtype = x_t.dtype();
    let rt = rounder::<F>(dtype);
    let x = to_real::<F>(x_t, "X")?;
    let interleaved = node.attrs.int_or("interleaved", 0)? != 0;
    // Work in [batch, seq, heads, head_size].
    let x4: Array4<F> = match x.ndim() {
        4 => x
            .into_dimensionality::<Ix4>()
            .expect("4-D")
            .permuted_axes([0, 2, 1, 3]),
        3 => {
            let heads = node.attrs.int_or("num_heads", 0)?;
            let (b, s, hidden) = (x.shape()[0], x.shape()[1], x.shape()[2]);
            if heads <= 0 || hidden % heads as usize != 0 {
                return Err(IrError::Attr {
                    name: "num_heads".into(),
                    msg: format!("3-D input needs num_heads dividing {hidden}, got {heads}"),
                });
            }
            let h = heads as usize;
            x.into_shape_with_order((b, s, h, hidden / h))
                .map_err(|e| IrError::Shape(e.to_string()))?
        }
        r => {
            return Err(IrError::Shape(format!(
                "X must be 3-D or 4-D, got rank {r}"
            )));
        }
    };
    let (b, s, h, d) = x4.dim();
    let rd = match node.attrs.int_or("rotary_embedding_dim", 0)? {
        0 => d,
        r if r > 0 && r as usize <= d && r % 2 == 0 => r as usize,
        r => {
            return Err(IrError::Attr {
                name: "rotary_embedding_dim".into(),
                msg: format!("must be even and at most head size {d}, got {r}"),
            })
        }
    };
    let half = rd / 2;
    let pos = opt_input(inputs, 3);
    let cos = cache::<F>(input(inputs, 1)?, pos, (b, s), "cos_cache")?;
    let sin = cache::<F>(input(inputs, 2)?, pos, (b, s), "sin_cache")?;
    for (c, what) in [(&cos, "cos_cache"), (&sin, "sin_cache")] {
        if c.dim().2 != half {
            return Err(IrError::Shape(format!(
                "last dim of {what} is {}, expected rotary_embedding_dim/2 = {half}",
                c.dim().2
            )));
        }
    }
    let mut y = x4.to_owned();
    for bi in 0..b {
        for si in 0..s {
            for hi in 0..h {
                for i in 0..half {
                    let (i1, i2) = if interleaved {
                        (2 * i, 2 * i + 1)
                    } else {
                        (i, i + half)
                    };
                    let (x1, x2) = (x4[[bi, si, hi, i1]], x4[[bi, si, hi, i2]]);
                    let (c, sn) = (cos[[bi, si, i]], sin[[bi, si, i]]);
                    y[[bi, si, hi, i1]] = rt(rt(c * x1) - rt(sn * x2));
                    y[[bi, si, hi, i2]] = rt(rt(sn * x1) + rt(c * x2));
                }
            }
        }
    }
    let out: ArrayD<F> = if x_t.rank() == 4 {
        y.permuted_axes([0, 2, 1, 3])
            .as_standard_layout()
            .into_owned()
            .into_dyn()
    } else {
        y.into_shape_with_order(IxDyn(x_t.shape()))
            .map_err(|e| IrError::Shape(e.to_string()))?
    };
    Ok(from_real(out, dtype))
}
