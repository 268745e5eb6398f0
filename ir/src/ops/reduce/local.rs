//! Normalizations over arbitrary axes or windows: LpNormalization (one axis),
//! MeanVarianceNormalization (a set of axes, default N, H, W) and LRN (a window of
//! neighbouring channels).

use super::common::{norm_axes, reduce_rows, to_dtype, with_float, Real};
use crate::error::{IrError, Result};
use crate::graph::Node;
use crate::ops::util::{input, norm_axis};
use crate::tensor::Tensor;
use ndarray::{ArrayD, ArrayViewD, Axis, Zip};

/// LpNormalization: each lane along `axis` (default -1) divided by its L1 or L2 norm;
/// a zero norm gives zeros.
pub fn eval_lp_norm(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let axis = norm_axis(node.attrs.int_or("axis", -1)?, x.rank())?;
    let p = node.attrs.int_or("p", 2)?;
    if p != 1 && p != 2 {
        return Err(IrError::Attr {
            name: "p".into(),
            msg: format!("must be 1 or 2, found {p}"),
        });
    }
    with_float!(x, "LpNormalization", a => Ok(to_dtype(lp_norm(a.into_owned(), axis, p == 1), x.dtype())))
}

fn lp_norm<F: Real>(mut y: ArrayD<F>, axis: usize, l1: bool) -> ArrayD<F> {
    for mut lane in y.lanes_mut(Axis(axis)) {
        let norm: F = if l1 {
            lane.iter().map(|v| v.abs()).sum()
        } else {
            lane.iter().map(|&v| v * v).sum::<F>().sqrt()
        };
        lane.mapv_inplace(|v| if norm == F::zero() { norm } else { v / norm });
    }
    y
}

/// MeanVarianceNormalization: `(x - mean) / (std + 1e-9)` with the statistics taken
/// over `axes` (default `[0, 2, 3]`) and `std = sqrt(E[x²] - E[x]²)`.
pub fn eval_mvn(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let axes = node.attrs.ints("axes")?.unwrap_or(&[0, 2, 3]);
    let axes = norm_axes(axes, x.rank())?;
    with_float!(x, "MeanVarianceNormalization", a => Ok(to_dtype(mvn(a.view(), &axes)?, x.dtype())))
}

fn mvn<F: Real>(a: ArrayViewD<F>, axes: &[usize]) -> Result<ArrayD<F>> {
    let stats = reduce_rows(a.view(), axes, |r| {
        let n = F::lit(r.len() as f64);
        let mean = r.iter().copied().sum::<F>() / n;
        let sq = r.iter().map(|&v| v * v).sum::<F>() / n;
        (mean, (sq - mean * mean).sqrt() + F::lit(1e-9))
    })?;
    let stats = stats.broadcast(a.raw_dim()).ok_or_else(|| {
        IrError::Shape("MeanVarianceNormalization statistics do not broadcast".into())
    })?;
    Ok(Zip::from(&a)
        .and(&stats)
        .map_collect(|&v, &(m, d)| (v - m) / d))
}

/// LRN: `x / (bias + alpha / size * sum of x² over the channel window) ^ beta`, the
/// window covering channels `c - floor((size-1)/2) ..= c + ceil((size-1)/2)`.
pub fn eval_lrn(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    if x.rank() < 2 {
        return Err(IrError::Shape(format!(
            "LRN needs an input of rank at least 2 ([N, C, ...]), found {:?}",
            x.shape()
        )));
    }
    let size = node.attrs.req_int("size")?;
    if size < 1 {
        return Err(IrError::Attr {
            name: "size".into(),
            msg: format!("must be positive, found {size}"),
        });
    }
    let alpha = node.attrs.float_or("alpha", 1e-4)? as f64;
    let beta = node.attrs.float_or("beta", 0.75)? as f64;
    let bias = node.attrs.float_or("bias", 1.0)? as f64;
    let size = size as usize;
    let (before, after) = ((size - 1) / 2, size / 2);
    let params = [bias, alpha / size as f64, beta];
    with_float!(x, "LRN", a => Ok(to_dtype(lrn(a.view(), before, after, params), x.dtype())))
}

/// LRN with a window of `before` channels below and `after` above; `[k, alpha / size,
/// beta]` in `params`.
fn lrn<F: Real>(a: ArrayViewD<F>, before: usize, after: usize, params: [f64; 3]) -> ArrayD<F> {
    let [k, scale, beta] = params.map(F::lit);
    let mut y = a.to_owned();
    Zip::from(y.lanes_mut(Axis(1)))
        .and(a.lanes(Axis(1)))
        .for_each(|mut out, lane| {
            let c = lane.len();
            for i in 0..c {
                let lo = i.saturating_sub(before);
                let hi = (i + after + 1).min(c);
                let sq: F = (lo..hi).map(|j| lane[j] * lane[j]).sum();
                out[i] = lane[i] / (k + scale * sq).powf(beta);
            }
        });
    y
}
