//! ONNX `FlexAttention` (domain `ai.onnx.preview`): 4-D attention whose scores and
//! probabilities pass through user sub-graphs (`score_mod` after `Q·Kᵀ`, `prob_mod`
//! after softmax), as PyTorch's `flex_attention`. Mirrors
//! `onnx/reference/ops/aionnx_preview/op_flex_attention.py`.

use super::real::{dtype_attr, from_real, real, rounder, sum_as, to_real, wide, Real};
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Graph, Node, TensorType};
use crate::ops::util::{in_ty, input};
use crate::ops::{EvalCx, InferInput};
use crate::tensor::Tensor;
use ndarray::{s, Array4, Ix4};

/// Runs the op.
pub(super) fn eval(cx: &EvalCx, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let dtype = input(inputs, 0)?.dtype();
    let y = if wide(dtype, "FlexAttention")? {
        run::<f64>(cx, node, inputs, dtype)?
    } else {
        run::<f32>(cx, node, inputs, dtype)?
    };
    Ok(vec![y])
}

fn four<F: Real>(t: &Tensor, what: &str) -> Result<Array4<F>> {
    to_real::<F>(t, what)?
        .into_dimensionality::<Ix4>()
        .map_err(|_| IrError::Shape(format!("{what} must be 4-D, got {:?}", t.shape())))
}

/// Applies a modifier sub-graph to the whole score or probability tensor.
fn modify<F: Real>(
    cx: &EvalCx,
    g: &Graph,
    x: Array4<F>,
    cdt: DType,
    what: &str,
) -> Result<Array4<F>> {
    let shape = x.dim();
    let outs = cx.run_subgraph(g, &[from_real(x.into_dyn(), cdt)])?;
    let [out] = outs.as_slice() else {
        return Err(IrError::Invalid(format!(
            "{what} must produce exactly one output, got {}",
            outs.len()
        )));
    };
    let y = four::<F>(out, what)?;
    if y.dim() != shape {
        return Err(IrError::Shape(format!(
            "{what} changed the shape {shape:?} to {:?}",
            y.dim()
        )));
    }
    Ok(y.mapv(rounder::<F>(cdt)))
}

fn run<F: Real>(
    cx: &EvalCx,
    node: &Node,
    inputs: &[Option<&Tensor>],
    dtype: DType,
) -> Result<Tensor> {
    let rt = rounder::<F>(dtype);
    let v_t = input(inputs, 2)?;
    let q = four::<F>(input(inputs, 0)?, "Q")?;
    let k = four::<F>(input(inputs, 1)?, "K")?;
    let v = four::<F>(v_t, "V")?;
    let (b, hq, l, e) = q.dim();
    let (kb, hk, sk, ek) = k.dim();
    let (vb, hv, sv, ev) = v.dim();
    if kb != b || vb != b || hv != hk || sv != sk || ek != e || hk == 0 || hq % hk != 0 {
        return Err(IrError::Shape(format!(
            "Q {:?}, K {:?}, V {:?} do not agree",
            q.dim(),
            k.dim(),
            v.dim()
        )));
    }
    let scale = match node.attrs.float("scale")? {
        Some(s) => s,
        None => (1.0 / (e as f64).sqrt()) as f32,
    };
    let sqrt_scale: F = rt(real(f64::from(scale.sqrt())));
    let cdt = match dtype_attr(&node.attrs, "softmax_precision")? {
        Some(d) => d,
        None if dtype == DType::F64 => DType::F64,
        None => DType::F32,
    };
    let cr = rounder::<F>(cdt);
    let group = hq / hk;
    let mut scores = Array4::<F>::zeros((b, hq, l, sk));
    for bi in 0..b {
        for h in 0..hq {
            let qs = q.slice(s![bi, h, .., ..]).mapv(|x| rt(x * sqrt_scale));
            let ks = k
                .slice(s![bi, h / group, .., ..])
                .mapv(|x| rt(x * sqrt_scale));
            let sc = qs.dot(&ks.t()).mapv(|x| cr(rt(x)));
            scores.slice_mut(s![bi, h, .., ..]).assign(&sc);
        }
    }
    if node.attrs.has("score_mod") {
        scores = modify(cx, node.attrs.graph("score_mod")?, scores, cdt, "score_mod")?;
    }
    for mut row in scores.rows_mut() {
        let max = row.iter().fold(F::neg_infinity(), |m, &x| {
            if m.is_nan() || x.is_nan() {
                F::nan()
            } else {
                m.max(x)
            }
        });
        row.mapv_inplace(|x| cr(cr(x - max).exp()));
        let sum = sum_as(row.iter().copied(), cdt);
        row.mapv_inplace(|x| cr(x / sum));
    }
    let probs = if node.attrs.has("prob_mod") {
        modify(cx, node.attrs.graph("prob_mod")?, scores, cdt, "prob_mod")?
    } else {
        scores
    };
    let mut y = Array4::<F>::zeros((b, hq, l, ev));
    for bi in 0..b {
        for h in 0..hq {
            let vs = v.slice(s![bi, h / group, .., ..]).mapv(cr);
            let o = probs.slice(s![bi, h, .., ..]).dot(&vs).mapv(cr);
            y.slice_mut(s![bi, h, .., ..]).assign(&o);
        }
    }
    Ok(from_real(y.into_dyn(), v_t.dtype()))
}

/// Output types: `[batch, q_heads, q_len, v_head_size]`.
pub(super) fn infer(inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let (q, v) = (in_ty(inputs, 0)?.ty, in_ty(inputs, 2)?.ty);
    if q.shape.len() != 4 || v.shape.len() != 4 {
        return Err(IrError::Shape(format!(
            "Q and V must be 4-D, got {q} and {v}"
        )));
    }
    let mut shape = q.shape.clone();
    shape[3] = v.shape[3].clone();
    Ok(vec![TensorType::new(q.dtype, shape)])
}
