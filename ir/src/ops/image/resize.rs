//! `Resize` (opset 19), mirroring `onnx/reference/ops/op_resize.py`: the output shape
//! comes from `scales` or `sizes` (with `axes` and `keep_aspect_ratio_policy`), then the
//! tensor is resampled one axis at a time (the filters are separable) in f64 and cast
//! back with saturation. Each output coordinate maps to a source coordinate by the
//! `coordinate_transformation_mode`, and the filter (nearest, linear, cubic, optionally
//! antialiased) gives weights over the nearest source samples, clamped to the edges.

use super::saturate_from_f64;
use super::to_f64_array;
use crate::dim::Dim;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, norm_axis, opt_in_ty, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::Tensor;
use ndarray::{ArrayD, IxDyn};

/// Interpolation filter.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Nearest(NearestMode),
    Linear,
    Cubic,
}

/// How `nearest` rounds a fractional source coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// How an output coordinate maps back to the input.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// The attributes of one Resize node, defaults applied.
#[derive(Clone, Debug)]
struct Params {
    mode: Mode,
    coord: Coord,
    cubic_a: f64,
    exclude_outside: bool,
    extrapolation: f64,
    antialias: bool,
}

fn params(node: &Node) -> Result<Params> {
    let a = &node.attrs;
    let nearest = match a.str_or("nearest_mode", "round_prefer_floor")? {
        "round_prefer_floor" => NearestMode::RoundPreferFloor,
        "round_prefer_ceil" => NearestMode::RoundPreferCeil,
        "floor" => NearestMode::Floor,
        "ceil" => NearestMode::Ceil,
        m => return unsupported(format!("Resize nearest_mode `{m}`")),
    };
    let mode = match a.str_or("mode", "nearest")? {
        "nearest" => Mode::Nearest(nearest),
        "linear" | "bilinear" | "trilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        m => return unsupported(format!("Resize mode `{m}`")),
    };
    let coord = match a.str_or("coordinate_transformation_mode", "half_pixel")? {
        "half_pixel" => Coord::HalfPixel,
        "half_pixel_symmetric" => Coord::HalfPixelSymmetric,
        "pytorch_half_pixel" => Coord::PytorchHalfPixel,
        "align_corners" => Coord::AlignCorners,
        "asymmetric" => Coord::Asymmetric,
        "tf_crop_and_resize" => Coord::TfCropAndResize,
        m => return unsupported(format!("Resize coordinate_transformation_mode `{m}`")),
    };
    Ok(Params {
        mode,
        coord,
        cubic_a: a.float_or("cubic_coeff_a", -0.75)? as f64,
        exclude_outside: a.int_or("exclude_outside", 0)? != 0,
        extrapolation: a.float_or("extrapolation_value", 0.0)? as f64,
        antialias: a.int_or("antialias", 0)? != 0,
    })
}

/// What the output shape depends on: resize `axes` and either per-axis `scales` or
/// target `sizes`.
enum Target {
    Scales(Vec<f64>),
    Sizes(Vec<i64>),
}

/// Resolved geometry: per full-rank axis, its scale and output size; the axes to
/// resample, in order.
#[derive(Clone, Debug, PartialEq)]
struct Plan {
    axes: Vec<usize>,
    scales: Vec<f64>,
    out: Vec<usize>,
}

fn resize_axes(node: &Node, rank: usize) -> Result<Vec<usize>> {
    match node.attrs.ints("axes")? {
        None => Ok((0..rank).collect()),
        Some(ax) => {
            let axes: Vec<usize> = ax
                .iter()
                .map(|&a| norm_axis(a, rank))
                .collect::<Result<_>>()?;
            for (i, a) in axes.iter().enumerate() {
                if axes[..i].contains(a) {
                    return Err(IrError::Shape(format!("Resize axes {ax:?} repeat an axis")));
                }
            }
            Ok(axes)
        }
    }
}

/// Computes scales and output sizes, as `_interpolate_nd` does.
fn plan(node: &Node, in_shape: &[usize], target: Target) -> Result<Plan> {
    let rank = in_shape.len();
    let axes = resize_axes(node, rank)?;
    let mut scales = vec![1.0; rank];
    let mut out = in_shape.to_vec();
    match target {
        Target::Scales(s) => {
            if s.len() != axes.len() {
                return Err(IrError::Shape(format!(
                    "Resize scales has {} values for {} axes",
                    s.len(),
                    axes.len()
                )));
            }
            for (&a, &v) in axes.iter().zip(&s) {
                if v.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !v.is_finite() {
                    return Err(IrError::Shape(format!("Resize scale {v} is not positive")));
                }
                scales[a] = v;
                out[a] = (v * in_shape[a] as f64) as usize;
            }
        }
        Target::Sizes(z) => {
            if z.len() != axes.len() {
                return Err(IrError::Shape(format!(
                    "Resize sizes has {} values for {} axes",
                    z.len(),
                    axes.len()
                )));
            }
            for (&a, &v) in axes.iter().zip(&z) {
                if v < 0 {
                    return Err(IrError::Shape(format!("Resize size {v} is negative")));
                }
                if in_shape[a] == 0 {
                    return Err(IrError::Shape("Resize of an empty axis by sizes".into()));
                }
                out[a] = v as usize;
                scales[a] = v as f64 / in_shape[a] as f64;
            }
            let policy = node.attrs.str_or("keep_aspect_ratio_policy", "stretch")?;
            let pick = match policy {
                "stretch" => None,
                "not_larger" => Some(f64::min as fn(f64, f64) -> f64),
                "not_smaller" => Some(f64::max as fn(f64, f64) -> f64),
                p => return unsupported(format!("Resize keep_aspect_ratio_policy `{p}`")),
            };
            if let (Some(pick), Some(&first)) = (pick, axes.first()) {
                let s = axes
                    .iter()
                    .fold(scales[first], |acc, &a| pick(acc, scales[a]));
                for &a in &axes {
                    scales[a] = s;
                    out[a] = (s * in_shape[a] as f64 + 0.5) as usize;
                }
            }
        }
    }
    Ok(Plan { axes, scales, out })
}

/// Reads the target from the `scales` (input 2) or `sizes` (input 3) tensors; empty
/// tensors count as absent.
fn target_of(scales: Option<&Tensor>, sizes: Option<&Tensor>) -> Result<Target> {
    let scales = scales.filter(|t| !t.is_empty());
    let sizes = sizes.filter(|t| !t.is_empty());
    match (scales, sizes) {
        (Some(s), None) => Ok(Target::Scales(s.to_f64_vec())),
        (None, Some(z)) => {
            if !z.dtype().is_int() {
                return Err(IrError::DType {
                    context: "Resize sizes".into(),
                    expected: "i64".into(),
                    found: z.dtype(),
                });
            }
            Ok(Target::Sizes(z.to_i64_vec()))
        }
        (Some(_), Some(_)) => Err(IrError::Invalid(
            "Resize takes scales or sizes, not both".into(),
        )),
        (None, None) => Err(IrError::Invalid("Resize needs scales or sizes".into())),
    }
}

/// Region of interest per full-rank axis as `(start, end)`, when given.
fn roi_of(node: &Node, roi: Option<&Tensor>, rank: usize) -> Result<Option<Vec<(f64, f64)>>> {
    let Some(roi) = roi.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let axes = resize_axes(node, rank)?;
    let v = roi.to_f64_vec();
    if v.len() != 2 * axes.len() {
        return Err(IrError::Shape(format!(
            "Resize roi has {} values, expected {} (2 per axis)",
            v.len(),
            2 * axes.len()
        )));
    }
    let mut full = vec![(0.0, 1.0); rank];
    for (i, &a) in axes.iter().enumerate() {
        full[a] = (v[i], v[axes.len() + i]);
    }
    Ok(Some(full))
}

/// Runs Resize.
pub(super) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = crate::ops::util::input(inputs, 0)?;
    if x.dtype() == crate::dtype::DType::Bool {
        return unsupported("Resize of bool data");
    }
    let p = params(node)?;
    let target = target_of(opt_input(inputs, 2), opt_input(inputs, 3))?;
    let plan = plan(node, x.shape(), target)?;
    let roi = roi_of(node, opt_input(inputs, 1), x.rank())?;
    if p.coord == Coord::TfCropAndResize && roi.is_none() {
        return Err(IrError::Invalid(
            "Resize with tf_crop_and_resize needs roi".into(),
        ));
    }
    let mut data = match x {
        Tensor::F32(_) | Tensor::F64(_) | Tensor::F16(_) | Tensor::BF16(_) => {
            to_f64_array(x, "Resize input")?
        }
        t => crate::with_tensor!(t, a => a.mapv(crate::tensor::Elem::to_f64)),
    };
    for &axis in &plan.axes {
        let scale = plan.scales[axis];
        let out = plan.out[axis];
        let axis_roi = roi.as_ref().map(|r| r[axis]);
        let identity = (scale - 1.0).abs() <= 1e-9 * scale.abs().max(1.0)
            && out == data.shape()[axis]
            && axis_roi.is_none_or(|(s, e)| s.abs() <= 1e-9 && (e - 1.0).abs() <= 1e-9);
        if identity {
            continue;
        }
        data = resample_axis(&data, axis, scale, out, axis_roi, &p)?;
    }
    Ok(vec![saturate_from_f64(data, x.dtype())?])
}

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
fn resample_axis(
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

/// Output type: the input's dtype; sizes from constant scales/sizes where the input
/// dims are known, fresh symbols otherwise.
pub(super) fn infer(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let rank = x.shape.len();
    let axes = resize_axes(node, rank)?;
    // Per target input: absent, present with an unknown value, or a known value. An
    // empty tensor counts as absent (older exporters pass empty scales with sizes).
    let slot = |i| -> Option<Option<&Tensor>> {
        let t: InferInput = opt_in_ty(inputs, i)?;
        match t.value {
            Some(v) if v.is_empty() => None,
            None if t.ty.shape == [Dim::Known(0)] => None,
            v => Some(v),
        }
    };
    let known: Option<Vec<usize>> = crate::dim::concrete(&x.shape);
    let mut shape = x.shape.clone();
    let target = match (slot(2), slot(3)) {
        (Some(Some(s)), None) => Some(target_of(Some(s), None)?),
        (None, Some(Some(z))) => Some(target_of(None, Some(z))?),
        (None, None) => return Err(IrError::Invalid("Resize needs scales or sizes".into())),
        _ => None,
    };
    match (target, known) {
        (Some(target), Some(dims)) => {
            let plan = plan(node, &dims, target)?;
            shape = plan.out.iter().map(|&d| Dim::from(d)).collect();
        }
        (Some(Target::Sizes(z)), None)
            if node.attrs.str_or("keep_aspect_ratio_policy", "stretch")? == "stretch" =>
        {
            for (&a, &v) in axes.iter().zip(&z) {
                shape[a] = Dim::from(v.max(0) as u64);
            }
        }
        (Some(Target::Scales(s)), None) => {
            for (&a, &v) in axes.iter().zip(&s) {
                shape[a] = match x.shape[a].known() {
                    Some(d) => Dim::from((v * d as f64) as u64),
                    None if v == 1.0 => x.shape[a].clone(),
                    None => cx.fresh_dim("resize"),
                };
            }
        }
        _ => {
            for &a in &axes {
                shape[a] = cx.fresh_dim("resize");
            }
        }
    }
    Ok(vec![TensorType::new(x.dtype, shape)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Attr;
    use crate::ops::{ImageOp, Op};

    fn node(attrs: &[(&str, Attr)]) -> Node {
        let mut n = Node {
            name: "r".into(),
            op: Op::Image(ImageOp::Resize),
            attrs: Default::default(),
            inputs: vec![],
            outputs: vec![],
        };
        for (k, v) in attrs {
            n.attrs.set(k, v.clone());
        }
        n
    }

    fn run(attrs: &[(&str, Attr)], x: Tensor, roi: Option<Tensor>, target: Target) -> Vec<f64> {
        let n = node(attrs);
        let (s, z) = match target {
            Target::Scales(s) => (
                Some(Tensor::F32(
                    ArrayD::from_shape_vec(
                        IxDyn(&[s.len()]),
                        s.iter().map(|&v| v as f32).collect(),
                    )
                    .unwrap(),
                )),
                None,
            ),
            Target::Sizes(z) => (None, Some(Tensor::from_i64s(&z))),
        };
        let out = eval(&n, &[Some(&x), roi.as_ref(), s.as_ref(), z.as_ref()]).unwrap();
        out[0].to_f64_vec()
    }

    fn row(v: &[f32]) -> Tensor {
        Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[1, v.len()]), v.to_vec()).unwrap())
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
        }
    }

    fn s(v: &str) -> Attr {
        Attr::Str(v.into())
    }

    // Expected values below come from onnx.reference's Resize (onnx 1.23).

    #[test]
    fn linear_half_pixel_downsample_by_point_six() {
        let x = row(&[1.0, 2.0, 3.0, 4.0]);
        let y = run(
            &[("mode", s("linear"))],
            x,
            None,
            Target::Scales(vec![1.0, 0.6]),
        );
        close(&y, &[1.3333333, 3.0]);
    }

    #[test]
    fn align_corners_uses_the_unrounded_output_width() {
        // 4 -> 2 with scale 0.6: x = y * 3 / (2.4 - 1).
        let x = row(&[1.0, 2.0, 3.0, 4.0]);
        let y = run(
            &[
                ("mode", s("linear")),
                ("coordinate_transformation_mode", s("align_corners")),
            ],
            x,
            None,
            Target::Scales(vec![1.0, 0.6]),
        );
        close(&y, &[1.0, 3.142857]);
    }

    #[test]
    fn half_pixel_symmetric_recentres_a_truncated_output() {
        let x = row(&[0.0, 1.0, 2.0, 3.0, 4.0]);
        let y = run(
            &[
                ("mode", s("linear")),
                ("coordinate_transformation_mode", s("half_pixel_symmetric")),
            ],
            x,
            None,
            Target::Scales(vec![1.0, 0.7]),
        );
        close(&y, &[0.57142854, 2.0, 3.4285715]);
    }

    #[test]
    fn nearest_modes_on_awkward_sizes() {
        let x = row(&[10.0, 20.0, 30.0]);
        // 3 -> 7, asymmetric: x = y * 3/7.
        let asym = |nm: &str| {
            run(
                &[
                    ("coordinate_transformation_mode", s("asymmetric")),
                    ("nearest_mode", s(nm)),
                ],
                x.clone(),
                None,
                Target::Sizes(vec![1, 7]),
            )
        };
        close(&asym("floor"), &[10.0, 10.0, 10.0, 20.0, 20.0, 30.0, 30.0]);
        close(&asym("ceil"), &[10.0, 20.0, 20.0, 30.0, 30.0, 30.0, 30.0]);
        close(
            &asym("round_prefer_floor"),
            &[10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 30.0],
        );
        close(
            &asym("round_prefer_ceil"),
            &[10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 30.0],
        );
        // 3 -> 2 with half_pixel: x = (y+.5)*1.5-.5 = 0.25, 1.75.
        let y = run(&[], x.clone(), None, Target::Sizes(vec![1, 2]));
        close(&y, &[10.0, 30.0]);
        // pytorch_half_pixel with one output sample reads x = -0.5 -> clamped to 0.
        let y = run(
            &[("coordinate_transformation_mode", s("pytorch_half_pixel"))],
            x,
            None,
            Target::Sizes(vec![1, 1]),
        );
        close(&y, &[10.0]);
    }

    #[test]
    fn tf_crop_and_resize_extrapolates_outside_the_crop() {
        let x = row(&[1.0, 2.0, 3.0, 4.0]);
        let roi =
            Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[4]), vec![0.0, 0.5, 1.0, 1.5]).unwrap());
        let y = run(
            &[
                ("mode", s("linear")),
                ("coordinate_transformation_mode", s("tf_crop_and_resize")),
                ("extrapolation_value", Attr::Float(-1.0)),
            ],
            x,
            Some(roi),
            Target::Sizes(vec![1, 3]),
        );
        // x = 1.5 + y * 1.0 * 3 / 2 -> 1.5, 3.0, 4.5 (outside).
        close(&y, &[2.5, 4.0, -1.0]);
    }

    #[test]
    fn cubic_exclude_outside_renormalises() {
        let x = row(&[1.0, 2.0, 4.0, 8.0]);
        let y = run(
            &[
                ("mode", s("cubic")),
                ("cubic_coeff_a", Attr::Float(-0.5)),
                ("exclude_outside", Attr::Int(1)),
            ],
            x,
            None,
            Target::Sizes(vec![1, 3]),
        );
        close(&y, &[1.0919032, 2.8125, 7.5667405]);
    }

    #[test]
    fn antialias_widens_the_filter_when_downsampling() {
        let x = row(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        let y = run(
            &[("mode", s("linear")), ("antialias", Attr::Int(1))],
            x.clone(),
            None,
            Target::Sizes(vec![1, 3]),
        );
        close(&y, &[1.75, 4.0, 6.25]);
        let y = run(
            &[
                ("mode", s("cubic")),
                ("antialias", Attr::Int(1)),
                ("coordinate_transformation_mode", s("pytorch_half_pixel")),
            ],
            x,
            None,
            Target::Sizes(vec![1, 3]),
        );
        close(&y, &[1.6296076, 4.0, 6.370393]);
    }

    #[test]
    fn keep_aspect_ratio_rounds_half_up() {
        let n = node(&[
            ("keep_aspect_ratio_policy", s("not_larger")),
            ("axes", Attr::Ints(vec![2, 3])),
        ]);
        let p = plan(&n, &[1, 1, 3, 5], Target::Sizes(vec![7, 7])).unwrap();
        // scale = min(7/3, 7/5) = 1.4: 3*1.4 = 4.2 -> 4, 5*1.4 = 7.
        assert_eq!(p.out, vec![1, 1, 4, 7]);
        let n = node(&[
            ("keep_aspect_ratio_policy", s("not_smaller")),
            ("axes", Attr::Ints(vec![3, 2])),
        ]);
        let p = plan(&n, &[1, 1, 3, 5], Target::Sizes(vec![7, 7])).unwrap();
        assert_eq!(p.out, vec![1, 1, 7, 12]);
    }

    #[test]
    fn u8_input_rounds_half_to_even_and_saturates() {
        let x = Tensor::U8(ArrayD::from_shape_vec(IxDyn(&[1, 2]), vec![0, 255]).unwrap());
        let n = node(&[("mode", s("cubic"))]);
        let z = Tensor::from_i64s(&[1, 5]);
        let y = eval(&n, &[Some(&x), None, None, Some(&z)]).unwrap();
        assert_eq!(y[0].to_f64_vec(), vec![0.0, 21.0, 128.0, 234.0, 255.0]);
    }
}
