//! ONNX `LinearAttention` (opset 27): recurrent linear attention with a per-head
//! `d_k x d_v` state, under one of four update rules (`linear`, `gated`, `delta`,
//! `gated_delta`), with grouped-query heads. Runs the recurrence token by token in f32
//! as `onnx/reference/ops/op_linear_attention.py` does.

use crate::dim::Dim;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_in_ty, opt_input};
use crate::ops::InferInput;
use crate::tensor::Tensor;
use ndarray::{Array2, Array3, Array4, Ix3, Ix4};

/// Update-rule flags and head counts.
struct Rule {
    gating: bool,
    delta: bool,
    q_heads: usize,
    kv_heads: usize,
}

fn read_rule(node: &Node) -> Result<Rule> {
    let a = &node.attrs;
    let (gating, delta) = match a.str_or("update_rule", "gated_delta")? {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        r => {
            return Err(IrError::Attr {
                name: "update_rule".into(),
                msg: format!("unknown rule {r:?}"),
            })
        }
    };
    let (q, kv) = (a.req_int("q_num_heads")?, a.req_int("kv_num_heads")?);
    if q <= 0 || kv <= 0 || q % kv != 0 {
        return Err(IrError::Attr {
            name: "q_num_heads".into(),
            msg: format!("q_num_heads ({q}) must be a positive multiple of kv_num_heads ({kv})"),
        });
    }
    Ok(Rule {
        gating,
        delta,
        q_heads: q as usize,
        kv_heads: kv as usize,
    })
}

fn rank3(t: &Tensor, what: &str) -> Result<Array3<f32>> {
    if !t.dtype().is_float() {
        return Err(IrError::DType {
            context: what.into(),
            expected: "a float type".into(),
            found: t.dtype(),
        });
    }
    t.cast(crate::dtype::DType::F32)
        .as_array::<f32>()?
        .clone()
        .into_dimensionality::<Ix3>()
        .map_err(|_| IrError::Shape(format!("{what} must be 3-D, got {:?}", t.shape())))
}

/// Runs the op.
pub(super) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let rule = read_rule(node)?;
    let q_t = input(inputs, 0)?;
    let (q, k, v) = (
        rank3(q_t, "query")?,
        rank3(input(inputs, 1)?, "key")?,
        rank3(input(inputs, 2)?, "value")?,
    );
    let decay = opt_input(inputs, 4)
        .map(|t| rank3(t, "decay"))
        .transpose()?;
    let beta = opt_input(inputs, 5).map(|t| rank3(t, "beta")).transpose()?;
    if rule.gating != decay.is_some() || rule.delta != beta.is_some() {
        return Err(IrError::Invalid(format!(
            "update rule needs decay: {}, beta: {}; given decay: {}, beta: {}",
            rule.gating,
            rule.delta,
            decay.is_some(),
            beta.is_some()
        )));
    }
    let (b, t, qh) = q.dim();
    let (hq, hk) = (rule.q_heads, rule.kv_heads);
    let (dk, dv) = (qh / hq, v.dim().2 / hk);
    if qh % hq != 0
        || v.dim().2 % hk != 0
        || k.dim() != (b, t, hk * dk)
        || v.dim().0 != b
        || v.dim().1 != t
    {
        return Err(IrError::Shape(format!(
            "query {:?}, key {:?}, value {:?} do not fit {hq} query / {hk} kv heads",
            q.dim(),
            k.dim(),
            v.dim()
        )));
    }
    if let Some(d) = &decay {
        if d.dim() != (b, t, hk) && d.dim() != (b, t, hk * dk) {
            return Err(IrError::Shape(format!(
                "decay {:?} must be [{b}, {t}, {hk}] or [{b}, {t}, {}]",
                d.dim(),
                hk * dk
            )));
        }
    }
    if let Some(be) = &beta {
        if be.dim() != (b, t, hk) && be.dim() != (b, t, 1) {
            return Err(IrError::Shape(format!(
                "beta {:?} must be [{b}, {t}, {hk}] or [{b}, {t}, 1]",
                be.dim()
            )));
        }
    }
    let past = opt_input(inputs, 3);
    let mut state: Array4<f32> = match past {
        Some(p) => {
            let s = p
                .cast(crate::dtype::DType::F32)
                .as_array::<f32>()?
                .clone()
                .into_dimensionality::<Ix4>()
                .map_err(|_| IrError::Shape("past_state must be 4-D".into()))?;
            if s.dim() != (b, hk, dk, dv) {
                return Err(IrError::Shape(format!(
                    "past_state {:?}, expected {:?}",
                    s.dim(),
                    (b, hk, dk, dv)
                )));
            }
            s
        }
        None => Array4::zeros((b, hk, dk, dv)),
    };
    let scale = match node.attrs.float_or("scale", 0.0)? {
        0.0 => 1.0 / (dk as f64).sqrt(),
        s => f64::from(s),
    };
    let group = hq / hk;
    let mut out = Array3::<f32>::zeros((b, t, hq * dv));
    for bi in 0..b {
        for g in 0..hk {
            let mut s: Array2<f32> = state.slice(ndarray::s![bi, g, .., ..]).to_owned();
            for ti in 0..t {
                let kt = k.slice(ndarray::s![bi, ti, g * dk..(g + 1) * dk]);
                let mut vt = v
                    .slice(ndarray::s![bi, ti, g * dv..(g + 1) * dv])
                    .to_owned();
                if let Some(d) = &decay {
                    for (di, mut row) in s.rows_mut().into_iter().enumerate() {
                        let col = if d.dim().2 == hk { g } else { g * dk + di };
                        let e = d[[bi, ti, col]].exp();
                        row.mapv_inplace(|x| x * e);
                    }
                }
                if let Some(be) = &beta {
                    let bt = be[[bi, ti, if be.dim().2 == 1 { 0 } else { g }]];
                    let retrieved = s.t().dot(&kt);
                    vt = (&vt - &retrieved).mapv(|x| bt * x);
                }
                for (di, mut row) in s.rows_mut().into_iter().enumerate() {
                    let kd = kt[di];
                    row.zip_mut_with(&vt, |x, &y| *x += kd * y);
                }
                for r in 0..group {
                    let h = g * group + r;
                    let qt = q.slice(ndarray::s![bi, ti, h * dk..(h + 1) * dk]);
                    let o = qt.dot(&s);
                    out.slice_mut(ndarray::s![bi, ti, h * dv..(h + 1) * dv])
                        .assign(&o.mapv(|x| (scale * f64::from(x)) as f32));
                }
            }
            state.slice_mut(ndarray::s![bi, g, .., ..]).assign(&s);
        }
    }
    let state_dtype = past.map_or(q_t.dtype(), |p| p.dtype());
    Ok(vec![
        Tensor::F32(out.into_dyn()).cast(q_t.dtype()),
        Tensor::F32(state.into_dyn()).cast(state_dtype),
    ])
}

/// Output types.
pub(super) fn infer(node: &Node, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let rule = read_rule(node)?;
    let (q, v) = (in_ty(inputs, 0)?.ty, in_ty(inputs, 2)?.ty);
    if q.shape.len() != 3 || v.shape.len() != 3 {
        return Err(IrError::Shape(format!(
            "query and value must be 3-D, got {q} and {v}"
        )));
    }
    let (hq, hk) = (Dim::from(rule.q_heads), Dim::from(rule.kv_heads));
    let dk = q.shape[2].div(&hq);
    let dv = v.shape[2].div(&hk);
    let b = q.shape[0].clone();
    let state_dtype = opt_in_ty(inputs, 3).map_or(q.dtype, |p| p.ty.dtype);
    Ok(vec![
        TensorType::new(q.dtype, vec![b.clone(), q.shape[1].clone(), hq.mul(&dv)]),
        TensorType::new(state_dtype, vec![b, hk, dk, dv]),
    ])
}
