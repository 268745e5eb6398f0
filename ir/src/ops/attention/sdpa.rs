//! ONNX `Attention` (opsets 23-25): scaled dot-product attention over 3-D (heads packed
//! in the hidden dim) or 4-D inputs, with grouped-query heads, an optional boolean or
//! additive mask, offset-aware causal and sliding-window masks, a KV cache concatenated
//! inside (`past_*`/`present_*`) or padded outside (`nonpad_kv_seqlen`), softcap, a
//! softmax precision, and the debug output `qk_matmul_output`. Mirrors
//! `onnx/reference/ops/op_attention.py`, including its fully-masked-row guard (such rows
//! give zeros, never NaN).

use super::real::{dtype_attr, from_real, real, rounder, sum_as, to_real, wide, Real};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_in_ty, opt_input};
use crate::ops::InferInput;
use crate::tensor::Tensor;
use ndarray::{concatenate, s, Array2, Array4, ArrayD, ArrayView2, Axis, Ix4, IxDyn, Zip};

/// The node's attributes with ONNX defaults applied.
struct Params {
    scale: Option<f64>,
    is_causal: bool,
    q_heads: Option<usize>,
    kv_heads: Option<usize>,
    softcap: f64,
    qk_mode: i64,
    softmax_dtype: Option<DType>,
    left_window: i64,
    right_window: i64,
}

impl Params {
    fn read(node: &Node) -> Result<Params> {
        let a = &node.attrs;
        let heads = |name: &str| -> Result<Option<usize>> {
            match a.int(name)? {
                None => Ok(None),
                Some(h) if h > 0 => Ok(Some(h as usize)),
                Some(h) => Err(attr_err(name, format!("must be positive, got {h}"))),
            }
        };
        let window = |name: &str| -> Result<i64> {
            match a.int_or(name, -1)? {
                w if w >= -1 => Ok(w),
                w => Err(attr_err(name, format!("must be -1 or >= 0, got {w}"))),
            }
        };
        let qk_mode = a.int_or("qk_matmul_output_mode", 0)?;
        if !(0..=3).contains(&qk_mode) {
            return Err(attr_err(
                "qk_matmul_output_mode",
                format!("must be 0..=3, got {qk_mode}"),
            ));
        }
        Ok(Params {
            scale: a.float("scale")?.map(f64::from),
            is_causal: a.int_or("is_causal", 0)? != 0,
            q_heads: heads("q_num_heads")?,
            kv_heads: heads("kv_num_heads")?,
            softcap: f64::from(a.float_or("softcap", 0.0)?),
            qk_mode,
            softmax_dtype: dtype_attr(a, "softmax_precision")?,
            left_window: window("left_window_size")?,
            right_window: window("right_window_size")?,
        })
    }
}

fn attr_err(name: &str, msg: String) -> IrError {
    IrError::Attr {
        name: name.into(),
        msg,
    }
}

/// Runs the op.
pub(super) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let p = Params::read(node)?;
    let dtype = input(inputs, 0)?.dtype();
    let mut outs = if wide(dtype, "Attention")? {
        run::<f64>(&p, inputs, dtype)?
    } else {
        run::<f32>(&p, inputs, dtype)?
    };
    outs.truncate(node.outputs.len().max(1));
    Ok(outs)
}

/// Q, K, V as `[batch, heads, seq, head_size]`.
fn to_4d<F: Real>(t: &Tensor, heads: Option<usize>, what: &str) -> Result<Array4<F>> {
    let a = to_real::<F>(t, what)?;
    match (a.ndim(), heads) {
        (4, _) => Ok(a.into_dimensionality::<Ix4>().expect("rank checked")),
        (3, Some(h)) => {
            let (b, s, hidden) = (a.shape()[0], a.shape()[1], a.shape()[2]);
            if hidden % h != 0 {
                return Err(IrError::Shape(format!(
                    "{what}: hidden size {hidden} is not a multiple of {h} heads"
                )));
            }
            let a = a
                .into_shape_with_order((b, s, h, hidden / h))
                .map_err(|e| IrError::Shape(format!("{what}: {e}")))?;
            Ok(a.permuted_axes([0, 2, 1, 3])
                .as_standard_layout()
                .into_owned())
        }
        (3, None) => Err(attr_err(
            "q_num_heads",
            "q_num_heads and kv_num_heads are required for 3-D inputs".into(),
        )),
        (r, _) => Err(IrError::Shape(format!(
            "{what} must be 3-D or 4-D, got rank {r}"
        ))),
    }
}

/// The mask as an additive bias: booleans become 0 (attend) or -inf, and a last dim
/// shorter than `total` is padded with -inf.
fn additive_mask<F: Real>(m: &Tensor, total: usize) -> Result<ArrayD<F>> {
    let neg = F::neg_infinity();
    let a: ArrayD<F> = match m {
        Tensor::Bool(b) => b.mapv(|x| if x { F::zero() } else { neg }),
        t => to_real::<F>(t, "attn_mask")?,
    };
    let Some(&last) = a.shape().last() else {
        return Err(IrError::Shape("attn_mask must have rank >= 1".into()));
    };
    if last >= total {
        return Ok(a);
    }
    let mut shape = a.shape().to_vec();
    *shape.last_mut().expect("rank >= 1") = total;
    let mut padded = ArrayD::from_elem(IxDyn(&shape), neg);
    padded
        .slice_axis_mut(Axis(a.ndim() - 1), (0..last).into())
        .assign(&a);
    Ok(padded)
}

/// Everything that shapes the additive bias of one `(batch, head)` score matrix.
struct Bias<'a, F> {
    p: &'a Params,
    mask: Option<ndarray::ArrayViewD<'a, F>>,
    nonpad: Option<Vec<i64>>,
    has_past: bool,
    past_len: usize,
    q_len: usize,
    kv_len: usize,
}

impl<F: Real> Bias<'_, F> {
    /// Number of valid keys before the query block of batch `b`.
    fn offset(&self, b: usize) -> i64 {
        match (&self.nonpad, self.has_past) {
            (_, true) => self.past_len as i64,
            (Some(n), false) => n[b] - self.q_len as i64,
            (None, false) => 0,
        }
    }

    fn at(&self, b: usize, h: usize) -> Array2<F> {
        let neg = F::neg_infinity();
        let off = self.offset(b);
        let (left, right) = (self.p.left_window, self.p.right_window);
        Array2::from_shape_fn((self.q_len, self.kv_len), |(i, j)| {
            let mut x = self.mask.as_ref().map_or(F::zero(), |m| m[[b, h, i, j]]);
            let pos = off + i as i64;
            let j = j as i64;
            if self.p.is_causal && j > pos {
                x = x + neg;
            }
            let diff = pos - j;
            if (left >= 0 && diff > left) || (right >= 0 && -diff > right) {
                x = x + neg;
            }
            if let Some(n) = &self.nonpad {
                if j >= n[b] {
                    x = x + neg;
                }
            }
            x
        })
    }
}

fn run<F: Real>(p: &Params, inputs: &[Option<&Tensor>], dtype: DType) -> Result<Vec<Tensor>> {
    let rt = rounder::<F>(dtype);
    let (q, k, v) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
    if q.rank() != k.rank() || q.rank() != v.rank() {
        return Err(IrError::Shape(format!(
            "Q, K and V must have the same rank, got {:?}, {:?}, {:?}",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    }
    let three_d = q.rank() == 3;
    let q4 = to_4d::<F>(q, p.q_heads, "Q")?;
    let k4 = to_4d::<F>(k, p.kv_heads, "K")?;
    let v4 = to_4d::<F>(v, p.kv_heads, "V")?;
    let (b, hq, q_len, d) = q4.dim();
    let (kb, hk, kv_new, kd) = k4.dim();
    let (vb, hv, kv_new_v, dv) = v4.dim();
    if kb != b || vb != b || hv != hk || kd != d || kv_new_v != kv_new {
        return Err(IrError::Shape(format!(
            "Q {:?}, K {:?}, V {:?} (as batch, heads, seq, head_size) do not agree",
            q4.dim(),
            k4.dim(),
            v4.dim()
        )));
    }
    if hk == 0 || hq % hk != 0 {
        return Err(IrError::Shape(format!(
            "{hq} query heads are not a multiple of {hk} key/value heads"
        )));
    }

    let (past_k, past_v) = (opt_input(inputs, 4), opt_input(inputs, 5));
    let nonpad = opt_input(inputs, 6).map(|t| t.to_i64_vec());
    let (keys, values, past_len) = match (past_k, past_v) {
        (Some(pk), Some(pv)) => {
            if nonpad.is_some() {
                return Err(IrError::Invalid(
                    "nonpad_kv_seqlen cannot be combined with past_key/past_value".into(),
                ));
            }
            let pk = to_real::<F>(pk, "past_key")?;
            let pv = to_real::<F>(pv, "past_value")?;
            let cat = |past: &ArrayD<F>, new: &Array4<F>, what: &str| {
                let past = past.view().into_dimensionality::<Ix4>().map_err(|_| {
                    IrError::Shape(format!("{what} must be 4-D, got {:?}", past.shape()))
                })?;
                concatenate(Axis(2), &[past, new.view()]).map_err(|_| {
                    IrError::Shape(format!(
                        "{what} {:?} does not extend keys/values {:?}",
                        past.dim(),
                        new.dim()
                    ))
                })
            };
            let (ck, cv) = (cat(&pk, &k4, "past_key")?, cat(&pv, &v4, "past_value")?);
            if ck.dim().2 != cv.dim().2 {
                return Err(IrError::Shape(
                    "past_key and past_value have different lengths".into(),
                ));
            }
            let past_len = pk.shape()[2];
            (ck, cv, Some(past_len))
        }
        (None, None) => (k4, v4, None),
        _ => {
            return Err(IrError::Invalid(
                "past_key and past_value must be given together".into(),
            ))
        }
    };
    let kv_len = keys.dim().2;
    if let Some(n) = &nonpad {
        if n.len() != b {
            return Err(IrError::Shape(format!(
                "nonpad_kv_seqlen has {} entries for batch {b}",
                n.len()
            )));
        }
    }

    let mask = opt_input(inputs, 3)
        .map(|m| additive_mask::<F>(m, kv_len))
        .transpose()?;
    let full = [b, hq, q_len, kv_len];
    let mask_view = match &mask {
        Some(m) => Some(m.broadcast(IxDyn(&full)).ok_or_else(|| {
            IrError::Shape(format!(
                "attn_mask {:?} does not broadcast to {full:?}",
                m.shape()
            ))
        })?),
        None => None,
    };
    let bias = Bias {
        p,
        mask: mask_view,
        nonpad,
        has_past: past_len.is_some(),
        past_len: past_len.unwrap_or(0),
        q_len,
        kv_len,
    };

    let scale = p.scale.unwrap_or(1.0 / (d as f64).sqrt());
    let sqrt_scale: F = rt(real(scale.sqrt()));
    let cap: F = real(p.softcap);
    let sm_dtype = p.softmax_dtype.unwrap_or(dtype);
    let group = hq / hk;
    let mut y = Array4::<F>::zeros((b, hq, q_len, dv));
    let mut qk_out = Array4::<F>::zeros((b, hq, q_len, kv_len));
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / group;
            let qs = q4.slice(s![bi, h, .., ..]).mapv(|x| rt(x * sqrt_scale));
            let ks = keys.slice(s![bi, kh, .., ..]).mapv(|x| rt(x * sqrt_scale));
            let raw = qs.dot(&ks.t()).mapv(rt);
            let capped = if p.softcap > 0.0 {
                raw.mapv(|x| rt(rt(rt(x / cap).tanh()) * cap))
            } else {
                raw.clone()
            };
            let bias_bh = bias.at(bi, h);
            let scores = Zip::from(&capped)
                .and(&bias_bh)
                .map_collect(|&x, &m| rt(x + m));
            let mut probs = softmax_rows(scores.view(), sm_dtype);
            for (mut row, brow) in probs.rows_mut().into_iter().zip(bias_bh.rows()) {
                if !brow.is_empty() && brow.iter().all(|&x| x == F::neg_infinity()) {
                    row.fill(F::zero());
                }
            }
            probs.mapv_inplace(rt);
            let debug = match p.qk_mode {
                0 => raw,
                1 => capped,
                2 => scores,
                _ => probs.clone(),
            };
            qk_out.slice_mut(s![bi, h, .., ..]).assign(&debug);
            let out = probs.dot(&values.slice(s![bi, kh, .., ..])).mapv(rt);
            y.slice_mut(s![bi, h, .., ..]).assign(&out);
        }
    }

    let y = if three_d {
        y.permuted_axes([0, 2, 1, 3])
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&[b, q_len, hq * dv]))
            .expect("element count unchanged")
    } else {
        y.into_dyn()
    };
    Ok(vec![
        from_real(y, dtype),
        from_real(keys.into_dyn(), k.dtype()),
        from_real(values.into_dyn(), v.dtype()),
        from_real(qk_out.into_dyn(), dtype),
    ])
}

/// Softmax over each row as the reference computes it, rounding every step with
/// in precision `dtype`; an all `-inf` row gives zeros.
fn softmax_rows<F: Real>(x: ArrayView2<F>, dtype: DType) -> Array2<F> {
    let round = rounder::<F>(dtype);
    let mut out = x.mapv(round);
    for mut row in out.rows_mut() {
        let max = row.iter().fold(F::neg_infinity(), |m, &v| {
            if v.is_nan() || m.is_nan() {
                F::nan()
            } else {
                m.max(v)
            }
        });
        let safe = if max == F::neg_infinity() {
            F::zero()
        } else {
            max
        };
        row.mapv_inplace(|v| round(round(v - safe).exp()));
        let mut sum = sum_as(row.iter().copied(), dtype);
        if sum == F::zero() {
            sum = F::one();
        }
        row.mapv_inplace(|v| round(v / sum));
    }
    out
}

/// Output types.
pub(super) fn infer(node: &Node, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let p = Params::read(node)?;
    let (q, k, v) = (
        in_ty(inputs, 0)?.ty,
        in_ty(inputs, 1)?.ty,
        in_ty(inputs, 2)?.ty,
    );
    let rank = q.shape.len();
    if k.shape.len() != rank || v.shape.len() != rank || !(rank == 3 || rank == 4) {
        return Err(IrError::Shape(format!(
            "Q, K, V must all be 3-D or all 4-D, got {q}, {k}, {v}"
        )));
    }
    let sh = |t: &TensorType, i: usize| t.shape[i].clone();
    let (b, hq, q_len, hk, kv_len, dk, dv) = if rank == 3 {
        let (Some(nq), Some(nk)) = (p.q_heads, p.kv_heads) else {
            return Err(attr_err(
                "q_num_heads",
                "q_num_heads and kv_num_heads are required for 3-D inputs".into(),
            ));
        };
        let (nq, nk) = (Dim::from(nq), Dim::from(nk));
        (
            sh(q, 0),
            nq,
            sh(q, 1),
            nk.clone(),
            sh(k, 1),
            sh(k, 2).div(&nk),
            sh(v, 2).div(&nk),
        )
    } else {
        (
            sh(q, 0),
            sh(q, 1),
            sh(q, 2),
            sh(k, 1),
            sh(k, 2),
            sh(k, 3),
            sh(v, 3),
        )
    };
    let total = match opt_in_ty(inputs, 4) {
        Some(pk) if pk.ty.shape.len() == 4 => pk.ty.shape[2].add(&kv_len),
        _ => kv_len,
    };
    let y = if rank == 3 {
        vec![b.clone(), q_len.clone(), hq.mul(&dv)]
    } else {
        vec![b.clone(), hq.clone(), q_len.clone(), dv.clone()]
    };
    Ok(vec![
        TensorType::new(q.dtype, y),
        TensorType::new(k.dtype, vec![b.clone(), hk.clone(), total.clone(), dk]),
        TensorType::new(v.dtype, vec![b.clone(), hk, total.clone(), dv]),
        TensorType::new(q.dtype, vec![b, hq, q_len, total]),
    ])
}
