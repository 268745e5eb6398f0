//! Resize's one-axis resampling: each output coordinate maps to a source coordinate by
//! the `coordinate_transformation_mode`, and the filter (nearest, linear, cubic,
//! optionally antialiased) weighs the nearest source samples, clamped to the edges,
//! exactly as `_interpolate_1d_along_axis` does.

use super::{Coord, Mode, NearestMode, Params};
use crate::error::{IrError, Result};
use ndarray::{ArrayD, IxDyn};

/// Source coordinate of output index `y` along an axis of `in_w` samples, and whether
/// it falls outside the crop (tf_crop_and_resize only).
fn source_coord(
    coord: Coord,
    y: f64,
    scale: f64,
    in_w: usize,
    out_w: usize,
    roi: Option<(f64, f64)>,
) -> (f64, bool) {
    let in_wf = in_w as f64;
    let out_wf = scale * in_wf;
    match coord {
        Coord::AlignCorners => {
            if out_wf == 1.0 {
                (0.0, false)
            } else {
                (y * (in_wf - 1.0) / (out_wf - 1.0), false)
            }
        }
        Coord::Asymmetric => (y / scale, false),
        Coord::TfCropAndResize => {
            let (r0, r1) = roi.unwrap_or((0.0, 1.0));
            let x = if out_wf == 1.0 {
                (r1 - r0) * (in_wf - 1.0) / 2.0
            } else {
                y * (r1 - r0) * (in_wf - 1.0) / (out_wf - 1.0)
            };
            let x = x + r0 * (in_wf - 1.0);
            (x, x < 0.0 || x > in_wf - 1.0)
        }
        Coord::PytorchHalfPixel => {
            if out_wf == 1.0 {
                (-0.5, false)
            } else {
                ((y + 0.5) / scale - 0.5, false)
            }
        }
        Coord::HalfPixel => ((y + 0.5) / scale - 0.5, false),
        Coord::HalfPixelSymmetric => {
            let adjustment = out_w as f64 / out_wf;
            let center = in_wf / 2.0;
            let offset = center * (1.0 - adjustment);
            (offset + (y + 0.5) / scale - 0.5, false)
        }
    }
}

/// Filter weights for a source coordinate whose fractional part is `ratio` (in (0, 1],
/// 1 meaning an exact sample), over the samples `floor(x)+start .. ` (see `taps`).
fn coeffs(p: &Params, ratio: f64, scale: f64) -> Vec<f64> {
    match p.mode {
        Mode::Nearest(nm) => {
            if ratio == ratio.trunc() {
                return vec![0.0, 1.0];
            }
            let up = match nm {
                NearestMode::RoundPreferFloor => ratio > 0.5,
                NearestMode::RoundPreferCeil => ratio >= 0.5,
                NearestMode::Floor => false,
                NearestMode::Ceil => true,
            };
            if up {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        Mode::Linear if p.antialias => {
            let scale = scale.min(1.0);
            let start = (-1.0 / scale).floor() as i64 + 1;
            let footprint = 2 - 2 * start;
            let c: Vec<f64> = (start..start + footprint)
                .map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0))
                .collect();
            normalized(c)
        }
        Mode::Linear => vec![1.0 - ratio, ratio],
        Mode::Cubic if p.antialias => {
            let a = p.cubic_a;
            let scale = scale.min(1.0);
            let kernel = |x: f64| {
                let x = x.abs();
                let (x2, x3) = (x * x, x * x * x);
                if x <= 1.0 {
                    (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                } else if x < 2.0 {
                    a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                } else {
                    0.0
                }
            };
            let i_start = (-2.0 / scale).floor() as i64 + 1;
            let i_end = 2 - i_start;
            let c: Vec<f64> = (i_start..i_end)
                .map(|i| kernel(scale * (i as f64 - ratio)))
                .collect();
            normalized(c)
        }
        Mode::Cubic => {
            let a = p.cubic_a;
            let r = ratio;
            let q = 1.0 - ratio;
            vec![
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                ((a * (q + 1.0) - 5.0 * a) * (q + 1.0) + 8.0 * a) * (q + 1.0) - 4.0 * a,
            ]
        }
    }
}

fn normalized(mut c: Vec<f64>) -> Vec<f64> {
    let s: f64 = c.iter().sum();
    c.iter_mut().for_each(|v| *v /= s);
    c
}

/// Index of the first of the `n` samples nearest to `x` (ties to the smaller index),
/// the window `_get_neighbor` picks on the edge-padded axis.
fn first_tap(x: f64, n: usize) -> i64 {
    let pad = n.div_ceil(2) as i64;
    let xp = x + pad as f64;
    let p = xp.floor();
    let frac = xp - p;
    let half = (n / 2) as i64;
    let offset = if n.is_multiple_of(2) {
        if frac == 0.0 {
            -half
        } else {
            -half + 1
        }
    } else {
        let base = -(((n - 1) / 2) as i64);
        if frac <= 0.5 {
            base
        } else {
            base + 1
        }
    };
    p as i64 + offset - pad
}

/// Weights and clamped source indices for every output position along one axis.
struct AxisTaps {
    n: usize,
    weights: Vec<f64>,
    index: Vec<usize>,
    extrapolate: Vec<bool>,
}

fn taps(p: &Params, scale: f64, in_w: usize, out_w: usize, roi: Option<(f64, f64)>) -> AxisTaps {
    let mut t = AxisTaps {
        n: 0,
        weights: Vec::new(),
        index: Vec::new(),
        extrapolate: Vec::with_capacity(out_w),
    };
    for y in 0..out_w {
        let (x, extrap) = source_coord(p.coord, y as f64, scale, in_w, out_w, roi);
        let xi = x.floor();
        let ratio = if x == xi { 1.0 } else { x - xi };
        let mut c = coeffs(p, ratio, scale);
        let n = c.len();
        t.n = n;
        let first = first_tap(x, n);
        if p.exclude_outside {
            for (k, w) in c.iter_mut().enumerate() {
                let idx = first + k as i64;
                if idx < 0 || idx >= in_w as i64 {
                    *w = 0.0;
                }
            }
            let s: f64 = c.iter().sum();
            let s = if s == 0.0 { 1.0 } else { s };
            c.iter_mut().for_each(|w| *w /= s);
        }
        t.weights.extend_from_slice(&c);
        let last = in_w as i64 - 1;
        t.index
            .extend((0..n).map(|k| (first + k as i64).clamp(0, last) as usize));
        t.extrapolate.push(extrap);
    }
    t
}

/// Resamples `data` along `axis` to `out_w` samples.
pub(super) fn resample_axis(
    data: &ArrayD<f64>,
    axis: usize,
    scale: f64,
    out_w: usize,
    roi: Option<(f64, f64)>,
    p: &Params,
) -> Result<ArrayD<f64>> {
    let shape = data.shape();
    let in_w = shape[axis];
    let mut out_shape = shape.to_vec();
    out_shape[axis] = out_w;
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    if out_w == 0 || outer == 0 || inner == 0 {
        return Ok(ArrayD::zeros(IxDyn(&out_shape)));
    }
    if in_w == 0 {
        return Err(IrError::Shape(format!(
            "Resize cannot resample axis {axis} of size 0 to {out_w}"
        )));
    }
    let t = taps(p, scale, in_w, out_w, roi);
    let src: Vec<f64> = data.iter().copied().collect();
    let mut dst = vec![0.0; outer * out_w * inner];
    for o in 0..outer {
        let s_base = o * in_w * inner;
        let d_base = o * out_w * inner;
        for y in 0..out_w {
            let row = &mut dst[d_base + y * inner..d_base + (y + 1) * inner];
            if t.extrapolate[y] {
                row.iter_mut().for_each(|v| *v = p.extrapolation);
                continue;
            }
            for k in 0..t.n {
                let w = t.weights[y * t.n + k];
                let s = s_base + t.index[y * t.n + k] * inner;
                for (d, &v) in row.iter_mut().zip(&src[s..s + inner]) {
                    *d += w * v;
                }
            }
        }
    }
    Ok(ArrayD::from_shape_vec(IxDyn(&out_shape), dst).expect("sizes multiply to the length"))
}
