//! Sampling grids: `GridSample` reads an image at normalized coordinates (any number of
//! spatial dims, modes nearest/linear/cubic, padding zeros/border/reflection) and
//! `AffineGrid` builds such coordinates from affine matrices. Both mirror
//! `onnx/reference/ops/op_grid_sample.py` and `op_affine_grid.py`, including the f32
//! rounding of denormalized coordinates.

use super::{from_f64_array, require_float, to_f64_array};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::Tensor;
use ndarray::{ArrayD, IxDyn};

#[derive(Clone, Copy, PartialEq)]
enum Interp {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// Reflects `x` into `[lo, hi]` by folding at the borders.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if rng <= 0.0 {
        return lo;
    }
    if x < lo {
        let dx = lo - x;
        let n = (dx / rng) as i64;
        let r = dx - n as f64 * rng;
        if n % 2 == 0 {
            lo + r
        } else {
            hi - r
        }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / rng) as i64;
        let r = dx - n as f64 * rng;
        if n % 2 == 0 {
            hi - r
        } else {
            lo + r
        }
    } else {
        x
    }
}

/// Keys cubic convolution weights (a = -0.75) for taps at -1, 0, 1, 2 around a sample
/// at fractional offset `t`.
fn cubic_weights(t: f64) -> [f64; 4] {
    let a = -0.75;
    let x = t.abs();
    [
        ((a * (x + 1.0) - 5.0 * a) * (x + 1.0) + 8.0 * a) * (x + 1.0) - 4.0 * a,
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
        ((a + 2.0) * (1.0 - x) - (a + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0,
        ((a * (2.0 - x) - 5.0 * a) * (2.0 - x) + 8.0 * a) * (2.0 - x) - 4.0 * a,
    ]
}

/// Runs GridSample.
pub(super) fn grid_sample(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let grid = input(inputs, 1)?;
    let interp = match node.attrs.str_or("mode", "linear")? {
        "nearest" => Interp::Nearest,
        "linear" | "bilinear" => Interp::Linear,
        "cubic" | "bicubic" => Interp::Cubic,
        m => return unsupported(format!("GridSample mode `{m}`")),
    };
    let padding = match node.attrs.str_or("padding_mode", "zeros")? {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        m => return unsupported(format!("GridSample padding_mode `{m}`")),
    };
    let align = node.attrs.int_or("align_corners", 0)? != 0;
    let xd = to_f64_array(x, "GridSample X")?;
    let grid_is_f32 = grid.dtype() != DType::F64;
    let gd = to_f64_array(grid, "GridSample grid")?;
    let xs = xd.shape();
    let gs = gd.shape();
    let k = xs.len().saturating_sub(2);
    if xs.len() < 3 || gs.len() != xs.len() || gs[0] != xs[0] || gs[gs.len() - 1] != k {
        return Err(IrError::Shape(format!(
            "GridSample: X {xs:?} needs a grid [N, spatial..., {k}] of the same rank, found {gs:?}"
        )));
    }
    let (n_batch, chans) = (xs[0], xs[1]);
    let dims: Vec<usize> = xs[2..].to_vec();
    if dims.contains(&0) && !gd.is_empty() {
        return Err(IrError::Shape(format!(
            "GridSample of an empty image {xs:?}"
        )));
    }
    let out_sp: Vec<usize> = gs[1..gs.len() - 1].to_vec();
    let n_out: usize = out_sp.iter().product();
    let plane: usize = dims.iter().product();
    let mut out_shape = vec![n_batch, chans];
    out_shape.extend(&out_sp);
    let (lo, hi): (Vec<f64>, Vec<f64>) = dims
        .iter()
        .map(|&d| {
            if align {
                (0.0, d as f64 - 1.0)
            } else {
                (-0.5, d as f64 - 0.5)
            }
        })
        .unzip();
    let xv: Vec<f64> = xd.iter().copied().collect();
    let gv: Vec<f64> = gd.iter().copied().collect();
    let mut out = vec![0.0; n_batch * chans * n_out];
    // Per output point: the taps (flat index into one plane) and their weights.
    let mut taps: Vec<(usize, f64)> = Vec::new();
    let mut coord = vec![0f32; k];
    for n in 0..n_batch {
        for o in 0..n_out {
            let g = &gv[(n * n_out + o) * k..(n * n_out + o + 1) * k];
            for i in 0..k {
                // Grid components run x, y, (z): the reverse of the spatial dims.
                let v = g[k - 1 - i];
                let len = dims[i];
                coord[i] = if grid_is_f32 {
                    let v = v as f32;
                    if align {
                        (v + 1.0) / 2.0 * (len as f32 - 1.0)
                    } else {
                        ((v + 1.0) * len as f32 - 1.0) / 2.0
                    }
                } else if align {
                    ((v + 1.0) / 2.0 * (len as f64 - 1.0)) as f32
                } else {
                    (((v + 1.0) * len as f64 - 1.0) / 2.0) as f32
                };
                if interp == Interp::Nearest {
                    coord[i] = coord[i].round_ties_even();
                }
                let c = coord[i] as f64;
                if c < lo[i] || c > hi[i] {
                    match padding {
                        Padding::Border => coord[i] = c.clamp(0.0, len as f64 - 1.0) as f32,
                        Padding::Reflection => coord[i] = reflect(c, lo[i], hi[i]) as f32,
                        Padding::Zeros => {}
                    }
                }
            }
            taps.clear();
            gather_taps(interp, padding, &coord, &dims, &lo, &hi, &mut taps);
            for c in 0..chans {
                let base = (n * chans + c) * plane;
                let v: f64 = taps.iter().map(|&(idx, w)| w * xv[base + idx]).sum();
                out[(n * chans + c) * n_out + o] = v;
            }
        }
    }
    let out = ArrayD::from_shape_vec(IxDyn(&out_shape), out).expect("output size");
    Ok(vec![from_f64_array(out, x.dtype())?])
}

/// Maps an integer tap index into the image by the padding rule; `None` reads zero.
fn pad_index(i: i64, d: usize, padding: Padding, lo: f64, hi: f64) -> Option<usize> {
    match padding {
        Padding::Zeros => (i >= 0 && (i as usize) < d).then_some(i as usize),
        Padding::Border => Some(i.clamp(0, d as i64 - 1) as usize),
        Padding::Reflection => {
            let r = reflect(i as f64, lo, hi) as i64;
            Some(r.clamp(0, d as i64 - 1) as usize)
        }
    }
}

/// The separable filter's taps at `coord`: per dim a list of (index, weight), combined
/// as a tensor product into flat plane indices.
fn gather_taps(
    interp: Interp,
    padding: Padding,
    coord: &[f32],
    dims: &[usize],
    lo: &[f64],
    hi: &[f64],
    out: &mut Vec<(usize, f64)>,
) {
    let mut per_dim: Vec<Vec<(Option<usize>, f64)>> = Vec::with_capacity(dims.len());
    for (i, &c) in coord.iter().enumerate() {
        let d = dims[i];
        let pad = |j: i64| pad_index(j, d, padding, lo[i], hi[i]);
        let c = c as f64;
        per_dim.push(match interp {
            Interp::Nearest => vec![(pad(c as i64), 1.0)],
            Interp::Linear => {
                let x0 = c.floor();
                let t = c - x0;
                let x0 = x0 as i64;
                vec![(pad(x0), 1.0 - t), (pad(x0 + 1), t)]
            }
            Interp::Cubic => {
                let x0 = c.floor();
                let w = cubic_weights(c - x0);
                let x0 = x0 as i64;
                (0..4).map(|j| (pad(x0 - 1 + j as i64), w[j])).collect()
            }
        });
    }
    // Tensor product over dims, dropping taps that read the zero padding.
    out.push((0, 1.0));
    for (i, taps) in per_dim.iter().enumerate() {
        let stride: usize = dims[i + 1..].iter().product();
        let prev = std::mem::take(out);
        for &(base, w) in &prev {
            for &(idx, tw) in taps {
                if let Some(idx) = idx {
                    out.push((base + idx * stride, w * tw));
                }
            }
        }
    }
}

/// GridSample's output type: `[N, C, grid spatial dims...]`.
pub(super) fn infer_grid_sample(
    _node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let g = in_ty(inputs, 1)?.ty;
    require_float(x.dtype, "GridSample X")?;
    if x.shape.len() < 3 || g.shape.len() != x.shape.len() {
        return Err(IrError::Shape(format!(
            "GridSample: X {x} and grid {g} must have the same rank, at least 3"
        )));
    }
    let mut shape = vec![x.shape[0].clone(), x.shape[1].clone()];
    shape.extend(g.shape[1..g.shape.len() - 1].iter().cloned());
    Ok(vec![TensorType::new(x.dtype, shape)])
}

/// Normalized base-grid coordinates along one dim of `size` samples.
fn base_coords(size: usize, align: bool) -> Vec<f64> {
    if align {
        if size == 1 {
            return vec![-1.0];
        }
        let step = 2.0 / (size as f64 - 1.0);
        (0..size).map(|i| -1.0 + i as f64 * step).collect()
    } else {
        let step = 2.0 / size as f64;
        (0..size)
            .map(|i| -1.0 + step / 2.0 + i as f64 * step)
            .collect()
    }
}

/// Runs AffineGrid.
pub(super) fn affine_grid(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let theta = input(inputs, 0)?;
    let size = input(inputs, 1)?.to_i64_vec();
    let align = node.attrs.int_or("align_corners", 0)? != 0;
    let th = to_f64_array(theta, "AffineGrid theta")?;
    let k = size.len().saturating_sub(2);
    let ts = th.shape();
    if !(k == 2 || k == 3) || ts.len() != 3 || ts[1] != k || ts[2] != k + 1 {
        return Err(IrError::Shape(format!(
            "AffineGrid: size {size:?} needs theta [N, {k}, {}], found {ts:?}",
            k + 1
        )));
    }
    if size.iter().any(|&s| s < 0) || size[0] as usize != ts[0] {
        return Err(IrError::Shape(format!(
            "AffineGrid: size {size:?} does not fit theta {ts:?}"
        )));
    }
    let n = ts[0];
    let sp: Vec<usize> = size[2..].iter().map(|&s| s as usize).collect();
    let axes: Vec<Vec<f64>> = sp.iter().map(|&s| base_coords(s, align)).collect();
    let npts: usize = sp.iter().product();
    let tv: Vec<f64> = th.iter().copied().collect();
    let mut out = Vec::with_capacity(n * npts * k);
    let mut idx = vec![0usize; k];
    let mut homo = vec![0.0; k + 1];
    for b in 0..n {
        let t = &tv[b * k * (k + 1)..(b + 1) * k * (k + 1)];
        for p in 0..npts {
            let mut rem = p;
            for i in (0..k).rev() {
                idx[i] = rem % sp[i];
                rem /= sp[i];
            }
            // Homogeneous point: x (last dim) first, then y, (z), then 1.
            for i in 0..k {
                homo[i] = axes[k - 1 - i][idx[k - 1 - i]];
            }
            homo[k] = 1.0;
            for r in 0..k {
                let row = &t[r * (k + 1)..(r + 1) * (k + 1)];
                out.push(row.iter().zip(&homo).map(|(a, b)| a * b).sum());
            }
        }
    }
    let mut shape = vec![n];
    shape.extend(&sp);
    shape.push(k);
    let out = ArrayD::from_shape_vec(IxDyn(&shape), out).expect("output size");
    Ok(vec![from_f64_array(out, theta.dtype())?])
}

/// AffineGrid's output type: `[N, spatial..., k]`, spatial sizes from a constant
/// `size`, fresh symbols otherwise.
pub(super) fn infer_affine_grid(
    cx: &mut InferCx,
    _node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let theta = in_ty(inputs, 0)?.ty;
    require_float(theta.dtype, "AffineGrid theta")?;
    let size = in_ty(inputs, 1)?;
    let n = theta.shape.first().cloned().unwrap_or(Dim::Known(1));
    let shape = match size.value {
        Some(v) => {
            let s = v.to_i64_vec();
            let mut shape = vec![n];
            shape.extend(s.iter().skip(2).map(|&d| Dim::from(d.max(0) as u64)));
            shape.push(Dim::from(s.len().saturating_sub(2)));
            shape
        }
        None => {
            let k = match (
                theta.shape.get(1).and_then(Dim::known),
                size.ty.shape.first(),
            ) {
                (Some(k), _) => crate::budget::rank_from(k, "AffineGrid theta")?,
                (None, Some(Dim::Known(r))) => {
                    crate::budget::rank_from(*r, "AffineGrid size")?.saturating_sub(2)
                }
                _ => return unsupported("AffineGrid with unknown spatial rank"),
            };
            let mut shape = vec![n];
            shape.extend((0..k).map(|_| cx.fresh_dim("affine_grid")));
            shape.push(Dim::from(k));
            shape
        }
    };
    Ok(vec![TensorType::new(theta.dtype, shape)])
}
