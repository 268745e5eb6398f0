//! `Resize` (opset 19), mirroring `onnx/reference/ops/op_resize.py`: the output shape
//! comes from `scales` or `sizes` (with `axes` and `keep_aspect_ratio_policy`), then the
//! tensor is resampled one axis at a time (the filters are separable, see `filter.rs`)
//! in f64 and cast back with saturation.

mod filter;
#[cfg(test)]
mod tests;

use super::saturate_from_f64;
use super::to_f64_array;
use crate::dim::Dim;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, norm_axis, opt_in_ty, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::Tensor;
use filter::resample_axis;

/// Interpolation filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Mode {
    Nearest(NearestMode),
    Linear,
    Cubic,
}

/// How `nearest` rounds a fractional source coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// How an output coordinate maps back to the input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// The attributes of one Resize node, defaults applied.
#[derive(Clone, Debug)]
pub(super) struct Params {
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
                out[a] = f64_size(v * in_shape[a] as f64)?;
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
                    out[a] = f64_size(s * in_shape[a] as f64 + 0.5)?;
                }
            }
        }
    }
    Ok(Plan { axes, scales, out })
}

/// An output size computed in f64, truncated; an error when it is not a finite size
/// that fits 64 bits (`as` would saturate or turn NaN into 0).
fn f64_size(v: f64) -> Result<usize> {
    if v.is_finite() && v >= 0.0 && v < u64::MAX as f64 {
        Ok(v as usize)
    } else {
        Err(IrError::Shape(format!(
            "Resize output size {v} is not a 64-bit size"
        )))
    }
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
                if v.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !v.is_finite() {
                    return Err(IrError::Shape(format!("Resize scale {v} is not positive")));
                }
                shape[a] = match x.shape[a].known() {
                    Some(d) => Dim::from(f64_size(v * d as f64)?),
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
