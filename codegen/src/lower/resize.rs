//! Resize (every mode of ONNX Resize, and Upsample, which the importer turns into it),
//! read once for every backend as the interpreter (`ir/src/ops/image/resize/`) reads
//! it: the output shape from constant `scales` or `sizes` (with `axes` and
//! `keep_aspect_ratio_policy`), and, per axis that is resampled, the affine map from an
//! output index to a source coordinate and the filter that weighs the samples around
//! it. The interpreter resamples one axis after another; the kernels compute each
//! output element at once as the separable product of the axes' weights, which is the
//! same sum. What the writers spell, per resampled axis `a` (in the order the
//! interpreter resamples them) and output index `y`, in f32:
//!
//! - the source coordinate `x = ((y + pre) * mul) / div + add` ([`Coord`]), with
//!   `ratio = x - floor(x)`, or 1 where `x` is a sample;
//! - the first of the axis' taps, [`Weights::taps`] samples nearest `x` (the
//!   interpreter's `first_tap`), and their weights ([`Weights`]), zeroed off the axis
//!   and renormalized with `exclude_outside`; tap indices are clamped to the axis;
//! - with `tf_crop_and_resize`, whether `x` falls outside `[0, in - 1]`: the element
//!   is then the extrapolation value times the weight sums of the axes resampled after
//!   the last such axis (what resampling a row of extrapolated values gives).
//!
//! Nearest resampling picks one tap per axis and copies it as stored (any dtype);
//! linear and cubic resampling sum in f32 and are refused for integer data, whose
//! rounding the interpreter's f64 sums decide.

use super::index::strides;
use super::support::{const_input, input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, Tensor, ValueId};

/// How nearest resampling rounds a fractional source coordinate (`nearest_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// Halfway rounds down.
    RoundPreferFloor,
    /// Halfway rounds up.
    RoundPreferCeil,
    /// Always down.
    Floor,
    /// Always up.
    Ceil,
}

/// The filter of one resampled axis: its taps and their weights for a fractional
/// source position `ratio` in (0, 1] (1 for an exact sample).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Weights {
    /// Two taps around `x`, one of them taken whole (weights 0 and 1).
    Nearest(Rounding),
    /// Two taps: `1 - ratio`, `ratio`.
    Linear,
    /// Four taps of the cubic convolution kernel with coefficient `a`.
    Cubic {
        /// `cubic_coeff_a`.
        a: f32,
    },
    /// Antialiased linear (downsampling): the triangle stretched by `1 / scale`,
    /// weights `clamp(1 - |(i - ratio) * scale|, 0, 1)` for `i` in
    /// `start .. start + taps`, normalized to sum 1.
    WideLinear {
        /// The first tap's offset `i`.
        start: i64,
        /// Taps.
        taps: usize,
        /// The axis' scale, at most 1.
        scale: f32,
    },
    /// Antialiased cubic (downsampling): the cubic kernel of `scale * (i - ratio)` for
    /// `i` in `start .. start + taps`, normalized to sum 1.
    WideCubic {
        /// `cubic_coeff_a`.
        a: f32,
        /// The first tap's offset `i`.
        start: i64,
        /// Taps.
        taps: usize,
        /// The axis' scale, at most 1.
        scale: f32,
    },
}

impl Weights {
    /// How many samples the filter spans (the window `first_tap` places).
    pub fn taps(&self) -> usize {
        match *self {
            Weights::Nearest(_) | Weights::Linear => 2,
            Weights::Cubic { .. } => 4,
            Weights::WideLinear { taps, .. } | Weights::WideCubic { taps, .. } => taps,
        }
    }
}

/// The source coordinate of output index `y` on one axis: `((y + pre) * mul) / div +
/// add`, in f32, the interpreter's f64 formula for the axis'
/// `coordinate_transformation_mode` with its constants folded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coord {
    /// Added to the output index first.
    pub pre: f32,
    /// Then the product by this.
    pub mul: f32,
    /// Then the quotient by this (never 0).
    pub div: f32,
    /// Then this is added.
    pub add: f32,
}

/// One axis the interpreter resamples (one it leaves as it is has none).
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The axis.
    pub axis: usize,
    /// Its input length (at least 1, below 2^24).
    pub in_len: usize,
    /// Its output length (below 2^24).
    pub out_len: usize,
    /// The input's stride along it.
    pub stride: usize,
    /// Output index to source coordinate.
    pub coord: Coord,
    /// The filter.
    pub weights: Weights,
}

/// A Resize node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeSpec {
    /// The node.
    pub site: Site,
    /// The data.
    pub x: ValueId,
    /// The output (the data's dtype).
    pub out: ValueId,
    /// The data's dtype.
    pub dtype: DType,
    /// The output's shape.
    pub out_shape: Vec<usize>,
    /// The input's strides.
    pub in_strides: Vec<usize>,
    /// Input elements.
    pub in_len: usize,
    /// Output elements (at least 1).
    pub n: usize,
    /// The resampled axes, in the order the interpreter resamples them.
    pub axes: Vec<Axis>,
    /// Taps off the axis get weight 0 and the rest are renormalized.
    pub exclude_outside: bool,
    /// With `tf_crop_and_resize`: the value of elements whose source coordinate on
    /// some axis lies outside it (`extrapolation_value`).
    pub extrapolation: Option<f32>,
}

impl ResizeSpec {
    /// Whether every axis picks one tap (nearest): elements are copied as stored.
    pub fn nearest(&self) -> bool {
        self.axes
            .iter()
            .all(|a| matches!(a.weights, Weights::Nearest(_)))
    }

    /// Whether output axis `d` is resampled (else its index is the input's).
    pub fn resampled(&self, d: usize) -> bool {
        self.axes.iter().any(|a| a.axis == d)
    }

    /// The largest finite value of the float dtype, which the interpreter clamps its
    /// results to before rounding to the dtype (`None` for f64, which it does not clamp,
    /// and for integers).
    pub fn float_max(&self) -> Option<f32> {
        match self.dtype {
            DType::F32 => Some(f32::MAX),
            DType::F16 => Some(65504.0),
            // bf16's largest finite value, 0x7f7f, widened to f32.
            DType::BF16 => Some(f32::from_bits(0x7f7f_0000)),
            DType::F64
            | DType::Bool
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::U64 => None,
        }
    }

    /// The extrapolation value as an integer of the dtype: rounded half to even and
    /// clamped to its range, as the interpreter saturates its f64 results (integer
    /// data only).
    pub fn int_extrapolation(&self) -> Option<i128> {
        let v = self.extrapolation?;
        let (lo, hi): (i128, i128) = match self.dtype {
            DType::I8 => (i8::MIN.into(), i8::MAX.into()),
            DType::I16 => (i16::MIN.into(), i16::MAX.into()),
            DType::I32 => (i32::MIN.into(), i32::MAX.into()),
            DType::I64 => (i64::MIN.into(), i64::MAX.into()),
            DType::U8 => (0, u8::MAX.into()),
            DType::U16 => (0, u16::MAX.into()),
            DType::U32 => (0, u32::MAX.into()),
            DType::U64 => (0, u64::MAX.into()),
            DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::Bool => return None,
        };
        let r = f64::from(v).round_ties_even();
        // NaN becomes 0, as the interpreter's saturating float-to-integer conversion.
        Some(if r.is_nan() {
            0
        } else {
            (r as i128).clamp(lo, hi)
        })
    }
}

/// The filter family, before each axis' scale widens it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Nearest(Rounding),
    Linear,
    Cubic,
}

/// How an output index maps back to the input (`coordinate_transformation_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transform {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// The attributes, defaults applied.
#[derive(Clone, Copy, Debug)]
struct Attrs {
    mode: Mode,
    transform: Transform,
    cubic_a: f32,
    exclude_outside: bool,
    extrapolation: f32,
    antialias: bool,
}

fn attrs(node: &Node) -> Result<Attrs> {
    let a = &node.attrs;
    let rounding = match a
        .str_or("nearest_mode", "round_prefer_floor")
        .map_err(plan)?
    {
        "round_prefer_floor" => Rounding::RoundPreferFloor,
        "round_prefer_ceil" => Rounding::RoundPreferCeil,
        "floor" => Rounding::Floor,
        "ceil" => Rounding::Ceil,
        m => return Err(unsupported(node, &format!("nearest_mode `{m}`"))),
    };
    let mode = match a.str_or("mode", "nearest").map_err(plan)? {
        "nearest" => Mode::Nearest(rounding),
        "linear" | "bilinear" | "trilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        m => return Err(unsupported(node, &format!("mode `{m}`"))),
    };
    let transform = match a
        .str_or("coordinate_transformation_mode", "half_pixel")
        .map_err(plan)?
    {
        "half_pixel" => Transform::HalfPixel,
        "half_pixel_symmetric" => Transform::HalfPixelSymmetric,
        "pytorch_half_pixel" => Transform::PytorchHalfPixel,
        "align_corners" => Transform::AlignCorners,
        "asymmetric" => Transform::Asymmetric,
        "tf_crop_and_resize" => Transform::TfCropAndResize,
        m => {
            return Err(unsupported(
                node,
                &format!("coordinate_transformation_mode `{m}`"),
            ))
        }
    };
    Ok(Attrs {
        mode,
        transform,
        cubic_a: a.float_or("cubic_coeff_a", -0.75).map_err(plan)?,
        exclude_outside: a.int_or("exclude_outside", 0).map_err(plan)? != 0,
        extrapolation: a.float_or("extrapolation_value", 0.0).map_err(plan)?,
        antialias: a.int_or("antialias", 0).map_err(plan)? != 0,
    })
}

/// The output size from `scales` or `sizes` (the interpreter's `Target`).
#[derive(Clone, Debug, PartialEq)]
enum Target {
    Scales(Vec<f64>),
    Sizes(Vec<i64>),
}

/// `keep_aspect_ratio_policy` with `sizes`: one scale for every axis, the smallest
/// (`not_larger`) or the largest (`not_smaller`), or each its own (`stretch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    Stretch,
    NotLarger,
    NotSmaller,
}

/// Per axis of the input, its scale and output length; the interpreter's `plan`.
fn geometry(
    in_shape: &[usize],
    axes: &[usize],
    target: &Target,
    policy: Policy,
) -> std::result::Result<(Vec<f64>, Vec<usize>), String> {
    let mut scales = vec![1.0; in_shape.len()];
    let mut out = in_shape.to_vec();
    let size = |v: f64| {
        if v.is_finite() && v >= 0.0 && v < u64::MAX as f64 {
            Ok(v as usize)
        } else {
            Err(format!("an output size of {v}"))
        }
    };
    match target {
        Target::Scales(s) => {
            if s.len() != axes.len() {
                return Err(format!("{} scales for {} axes", s.len(), axes.len()));
            }
            for (&a, &v) in axes.iter().zip(s) {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(format!("a scale of {v}"));
                }
                scales[a] = v;
                out[a] = size(v * in_shape[a] as f64)?;
            }
        }
        Target::Sizes(z) => {
            if z.len() != axes.len() {
                return Err(format!("{} sizes for {} axes", z.len(), axes.len()));
            }
            for (&a, &v) in axes.iter().zip(z) {
                if v < 0 || in_shape[a] == 0 {
                    return Err(format!("a size of {v} for an axis of {}", in_shape[a]));
                }
                out[a] = v as usize;
                scales[a] = v as f64 / in_shape[a] as f64;
            }
            let pick = match policy {
                Policy::Stretch => None,
                Policy::NotLarger => Some(f64::min as fn(f64, f64) -> f64),
                Policy::NotSmaller => Some(f64::max as fn(f64, f64) -> f64),
            };
            if let (Some(pick), Some(&first)) = (pick, axes.first()) {
                let s = axes
                    .iter()
                    .fold(scales[first], |acc, &a| pick(acc, scales[a]));
                for &a in axes {
                    scales[a] = s;
                    out[a] = size(s * in_shape[a] as f64 + 0.5)?;
                }
            }
        }
    }
    Ok((scales, out))
}

/// The resized axes (`axes`, all by default), normalized.
fn resize_axes(node: &Node, rank: usize) -> Result<Vec<usize>> {
    let Some(ax) = node.attrs.ints("axes").map_err(plan)? else {
        return Ok((0..rank).collect());
    };
    let mut axes = Vec::with_capacity(ax.len());
    for &a in ax {
        let a = gopt_ir::ops::util::norm_axis(a, rank).map_err(plan)?;
        if axes.contains(&a) {
            return Err(plan(format!(
                "{}: Resize axes {ax:?} repeat an axis",
                node.name
            )));
        }
        axes.push(a);
    }
    Ok(axes)
}

/// A constant input that is present and not empty (older exporters pass empty
/// tensors for absent ones, constant or not).
fn given<'g>(g: &'g Graph, node: &Node, k: usize, what: &str) -> Result<Option<&'g Tensor>> {
    if let Some(v) = opt_input(node, k) {
        if typed(g, node, v)?.1.contains(&0) {
            return Ok(None);
        }
    }
    Ok(const_input(g, node, k, what)?.filter(|t| !t.is_empty()))
}

/// The target: `scales` (input 2) or `sizes` (input 3), constants.
fn target(g: &Graph, node: &Node) -> Result<Target> {
    let scales = given(g, node, 2, "scales")?;
    let sizes = given(g, node, 3, "sizes")?;
    match (scales, sizes) {
        (Some(s), None) => Ok(Target::Scales(s.to_f64_vec())),
        (None, Some(z)) if z.dtype().is_int() => Ok(Target::Sizes(z.to_i64_vec())),
        (None, Some(z)) => Err(unsupported(node, &format!("{} sizes", z.dtype()))),
        (Some(_), Some(_)) | (None, None) => {
            Err(plan(format!("{}: Resize takes scales or sizes", node.name)))
        }
    }
}

/// The region of interest per input axis, `(start, end)`, when given.
fn roi(g: &Graph, node: &Node, axes: &[usize], rank: usize) -> Result<Option<Vec<(f64, f64)>>> {
    let Some(t) = given(g, node, 1, "roi")? else {
        return Ok(None);
    };
    let v = t.to_f64_vec();
    if v.len() != 2 * axes.len() {
        return Err(plan(format!(
            "{}: Resize roi has {} values for {} axes",
            node.name,
            v.len(),
            axes.len()
        )));
    }
    let mut full = vec![(0.0, 1.0); rank];
    for (i, &a) in axes.iter().enumerate() {
        full[a] = (v[i], v[axes.len() + i]);
    }
    Ok(Some(full))
}

/// The interpreter's `source_coord` for one axis as `((y + pre) * mul) / div + add`.
fn coord(
    t: Transform,
    scale: f64,
    in_len: usize,
    out_len: usize,
    roi: Option<(f64, f64)>,
) -> Coord {
    let in_f = in_len as f64;
    let out_f = scale * in_f;
    // (pre, mul, div, add), folded in f64 as the interpreter computes them.
    let (pre, mul, div, add) = match t {
        Transform::AlignCorners if out_f == 1.0 => (0.0, 0.0, 1.0, 0.0),
        Transform::AlignCorners => (0.0, in_f - 1.0, out_f - 1.0, 0.0),
        Transform::Asymmetric => (0.0, 1.0, scale, 0.0),
        Transform::TfCropAndResize => {
            let (r0, r1) = roi.unwrap_or((0.0, 1.0));
            let start = r0 * (in_f - 1.0);
            if out_f == 1.0 {
                (0.0, 0.0, 1.0, (r1 - r0) * (in_f - 1.0) / 2.0 + start)
            } else {
                (0.0, (r1 - r0) * (in_f - 1.0), out_f - 1.0, start)
            }
        }
        Transform::PytorchHalfPixel if out_f == 1.0 => (0.0, 0.0, 1.0, -0.5),
        Transform::PytorchHalfPixel | Transform::HalfPixel => (0.5, 1.0, scale, -0.5),
        Transform::HalfPixelSymmetric => {
            let adjustment = out_len as f64 / out_f;
            let offset = in_f / 2.0 * (1.0 - adjustment);
            (0.5, 1.0, scale, offset - 0.5)
        }
    };
    Coord {
        pre: pre as f32,
        mul: mul as f32,
        div: div as f32,
        add: add as f32,
    }
}

/// The filter of an axis of scale `scale` (the interpreter's `coeffs`).
fn weights(at: &Attrs, scale: f64) -> Weights {
    let wide = |reach: f64| {
        let s = scale.min(1.0);
        let start = (-reach / s).floor() as i64 + 1;
        (start, (2 - 2 * start) as usize, s as f32)
    };
    match at.mode {
        Mode::Nearest(r) => Weights::Nearest(r),
        Mode::Linear if at.antialias => {
            let (start, taps, scale) = wide(1.0);
            Weights::WideLinear { start, taps, scale }
        }
        Mode::Linear => Weights::Linear,
        Mode::Cubic if at.antialias => {
            let (start, taps, scale) = wide(2.0);
            Weights::WideCubic {
                a: at.cubic_a,
                start,
                taps,
                scale,
            }
        }
        Mode::Cubic => Weights::Cubic { a: at.cubic_a },
    }
}

/// Whether the interpreter leaves axis `a` as it is (its `identity` test).
fn identity(scale: f64, in_len: usize, out_len: usize, roi: Option<(f64, f64)>) -> bool {
    (scale - 1.0).abs() <= 1e-9 * scale.abs().max(1.0)
        && out_len == in_len
        && roi.is_none_or(|(s, e)| s.abs() <= 1e-9 && (e - 1.0).abs() <= 1e-9)
}

/// Axes this long or longer are refused: their indices are not all exact in f32.
const MAX_AXIS: usize = 1 << 24;

/// The most taps a wide (antialiased) filter may have on one axis.
const MAX_TAPS: usize = 1024;

/// Reads Resize node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<ResizeSpec> {
    let x = input(node, 0)?;
    let out = output(node, 0)?;
    let (dtype, in_shape) = typed(g, node, x)?;
    let (_, out_shape) = typed(g, node, out)?;
    let at = attrs(node)?;
    check_dtype(node, dtype, at.mode)?;
    let rank = in_shape.len();
    let axes = resize_axes(node, rank)?;
    let policy = match node
        .attrs
        .str_or("keep_aspect_ratio_policy", "stretch")
        .map_err(plan)?
    {
        "stretch" => Policy::Stretch,
        "not_larger" => Policy::NotLarger,
        "not_smaller" => Policy::NotSmaller,
        p => {
            return Err(unsupported(
                node,
                &format!("keep_aspect_ratio_policy `{p}`"),
            ))
        }
    };
    let target = target(g, node)?;
    let (scales, sizes) = geometry(&in_shape, &axes, &target, policy)
        .map_err(|e| plan(format!("{}: Resize with {e}", node.name)))?;
    if sizes != out_shape {
        return Err(plan(format!(
            "{}: Resize output is {out_shape:?}, its scales or sizes give {sizes:?}",
            node.name
        )));
    }
    let roi = roi(g, node, &axes, rank)?;
    let crop = at.transform == Transform::TfCropAndResize;
    if crop && roi.is_none() {
        return Err(plan(format!(
            "{}: Resize with tf_crop_and_resize needs roi",
            node.name
        )));
    }
    let n: usize = out_shape.iter().product();
    if n == 0 {
        return Err(unsupported(node, "an empty output"));
    }
    let in_strides = strides(&in_shape);
    let mut resampled = Vec::new();
    for &a in &axes {
        let axis_roi = roi.as_ref().map(|r| r[a]);
        let (in_len, out_len) = (in_shape[a], out_shape[a]);
        if identity(scales[a], in_len, out_len, axis_roi) {
            continue;
        }
        if in_len == 0 {
            return Err(plan(format!("{}: Resize of an empty axis", node.name)));
        }
        if in_len >= MAX_AXIS || out_len >= MAX_AXIS {
            return Err(unsupported(node, "an axis of 2^24 elements or more"));
        }
        let w = weights(&at, scales[a]);
        if w.taps() > MAX_TAPS {
            return Err(unsupported(
                node,
                &format!("an antialiased filter of {} taps", w.taps()),
            ));
        }
        resampled.push(Axis {
            axis: a,
            in_len,
            out_len,
            stride: in_strides[a],
            coord: coord(at.transform, scales[a], in_len, out_len, axis_roi),
            weights: w,
        });
    }
    Ok(ResizeSpec {
        site: Site::of(node),
        x,
        out,
        dtype,
        out_shape,
        in_strides,
        in_len: in_shape.iter().product(),
        n,
        axes: resampled,
        exclude_outside: at.exclude_outside,
        extrapolation: crop.then_some(at.extrapolation),
    })
}

/// Refuses data the kernels cannot resample as the interpreter does: bool (which it
/// refuses too), and integers or f64 summed by a linear or cubic filter (the
/// interpreter's f64 sums decide their rounding; the kernels sum in f32).
fn check_dtype(node: &Node, dt: DType, mode: Mode) -> Result<()> {
    let summed = !matches!(mode, Mode::Nearest(_));
    match dt {
        DType::Bool => Err(unsupported(node, "bool data")),
        DType::F32 | DType::F16 | DType::BF16 => Ok(()),
        DType::F64
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64
            if summed =>
        {
            Err(unsupported(
                node,
                &format!("linear or cubic resampling of {dt} data"),
            ))
        }
        DType::F64
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_keep_the_aspect_ratio_as_asked() {
        let z = Target::Sizes(vec![7, 8]);
        let (s, out) = geometry(&[1, 1, 2, 2], &[2, 3], &z, Policy::NotLarger).unwrap();
        assert_eq!(out, vec![1, 1, 7, 7]);
        assert_eq!(s, vec![1.0, 1.0, 3.5, 3.5]);
        let (_, out) = geometry(&[1, 1, 2, 2], &[2, 3], &z, Policy::NotSmaller).unwrap();
        assert_eq!(out, vec![1, 1, 8, 8]);
        let (s, out) = geometry(&[1, 1, 2, 2], &[3, 2], &z, Policy::Stretch).unwrap();
        assert_eq!(out, vec![1, 1, 8, 7]);
        assert_eq!(s, vec![1.0, 1.0, 4.0, 3.5]);
        let sc = Target::Scales(vec![0.6, 0.6]);
        let (_, out) = geometry(&[1, 1, 2, 4], &[2, 3], &sc, Policy::Stretch).unwrap();
        assert_eq!(out, vec![1, 1, 1, 2]);
        assert!(geometry(&[2], &[0], &Target::Scales(vec![0.0]), Policy::Stretch).is_err());
    }

    #[test]
    fn coordinates_fold_the_modes() {
        let c = coord(Transform::HalfPixel, 2.0, 4, 8, None);
        assert_eq!((c.pre, c.mul, c.div, c.add), (0.5, 1.0, 2.0, -0.5));
        let c = coord(Transform::AlignCorners, 2.0, 4, 8, None);
        assert_eq!((c.pre, c.mul, c.div, c.add), (0.0, 3.0, 7.0, 0.0));
        let c = coord(Transform::PytorchHalfPixel, 0.25, 4, 1, None);
        assert_eq!((c.mul, c.add), (0.0, -0.5));
        let c = coord(Transform::TfCropAndResize, 0.75, 4, 3, Some((0.4, 0.6)));
        assert_eq!(c.add, (0.4 * 3.0) as f32);
        assert_eq!(c.div, 2.0);
    }

    #[test]
    fn antialiasing_widens_downsampling_filters() {
        let at = |mode, antialias| Attrs {
            mode,
            transform: Transform::HalfPixel,
            cubic_a: -0.75,
            exclude_outside: false,
            extrapolation: 0.0,
            antialias,
        };
        assert_eq!(weights(&at(Mode::Linear, false), 0.5), Weights::Linear);
        assert_eq!(
            weights(&at(Mode::Linear, true), 0.6),
            Weights::WideLinear {
                start: -1,
                taps: 4,
                scale: 0.6
            }
        );
        assert_eq!(weights(&at(Mode::Cubic, true), 0.6).taps(), 8);
        assert_eq!(weights(&at(Mode::Cubic, true), 2.0).taps(), 4);
        assert!(identity(1.0, 3, 3, None));
        assert!(!identity(1.0, 3, 3, Some((0.0, 0.5))));
    }
}
