//! ONNX `CausalConvWithState` (opset 27): a depthwise causal 1-D convolution that
//! carries its last `k-1` input positions between calls (Mamba, Gated DeltaNet), with
//! an optional fused SiLU. Mirrors `onnx/reference/ops/op_causal_conv_with_state.py`.

use super::real::{from_real, rounder, to_real, wide, Real};
use crate::dim::Dim;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::Tensor;
use ndarray::{concatenate, s, Array3, Axis, Ix3};

/// Runs the op.
pub(super) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let silu = match node.attrs.str_or("activation", "none")? {
        "none" => false,
        "silu" | "swish" => true,
        a => {
            return Err(IrError::Attr {
                name: "activation".into(),
                msg: format!("expected none, silu or swish, got {a:?}"),
            })
        }
    };
    let dtype = input(inputs, 0)?.dtype();
    if wide(dtype, "CausalConvWithState")? {
        run::<f64>(inputs, silu)
    } else {
        run::<f32>(inputs, silu)
    }
}

fn run<F: Real>(inputs: &[Option<&Tensor>], silu: bool) -> Result<Vec<Tensor>> {
    let x_t = input(inputs, 0)?;
    let dtype = x_t.dtype();
    let rt = rounder::<F>(dtype);
    let three = |t: &Tensor, what: &str| -> Result<Array3<F>> {
        to_real::<F>(t, what)?
            .into_dimensionality::<Ix3>()
            .map_err(|_| IrError::Shape(format!("{what} must be 3-D, got {:?}", t.shape())))
    };
    let x = three(x_t, "input")?;
    let w = three(input(inputs, 1)?, "weight")?;
    let (b, c, len) = x.dim();
    let (wc, one, k) = w.dim();
    if wc != c || one != 1 || k == 0 {
        return Err(IrError::Shape(format!(
            "weight {:?} must be [{c}, 1, k] with k >= 1",
            w.dim()
        )));
    }
    let bias = opt_input(inputs, 2)
        .map(|t| to_real::<F>(t, "bias"))
        .transpose()?;
    if let Some(bs) = &bias {
        if bs.shape() != [c] {
            return Err(IrError::Shape(format!(
                "bias {:?} must be [{c}]",
                bs.shape()
            )));
        }
    }
    let past = match opt_input(inputs, 3) {
        Some(p) => {
            let p = three(p, "past_state")?;
            if p.dim() != (b, c, k - 1) {
                return Err(IrError::Shape(format!(
                    "past_state {:?}, expected {:?}",
                    p.dim(),
                    (b, c, k - 1)
                )));
            }
            p
        }
        None => Array3::zeros((b, c, k - 1)),
    };
    let padded = concatenate(Axis(2), &[past.view(), x.view()]).expect("shapes checked");
    let mut y = Array3::<F>::zeros((b, c, len));
    for bi in 0..b {
        for ci in 0..c {
            let taps = w.slice(s![ci, 0, ..]);
            let base = bias.as_ref().map_or(F::zero(), |bs| bs[[ci]]);
            for t in 0..len {
                let window = padded.slice(s![bi, ci, t..t + k]);
                let acc = window.dot(&taps) + base;
                let v = rt(acc);
                y[[bi, ci, t]] = if silu {
                    rt(v * (F::one() / (F::one() + (-v).exp())))
                } else {
                    v
                };
            }
        }
    }
    let state = padded.slice(s![.., .., len..]).to_owned();
    Ok(vec![
        from_real(y.into_dyn(), dtype),
        from_real(state.into_dyn(), dtype),
    ])
}

/// Output types.
pub(super) fn infer(cx: &mut InferCx, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let w = in_ty(inputs, 1)?.ty;
    if x.shape.len() != 3 || w.shape.len() != 3 {
        return Err(IrError::Shape(format!(
            "input and weight must be 3-D, got {x} and {w}"
        )));
    }
    let carry = match w.shape[2].known() {
        Some(k) if k >= 1 => Dim::Known(k - 1),
        _ => cx.fresh_dim("conv_state"),
    };
    Ok(vec![
        x.clone(),
        TensorType::new(x.dtype, vec![x.shape[0].clone(), x.shape[1].clone(), carry]),
    ])
}
