//! Ops that cut or extend a tensor along its axes: Slice (Python slicing with the
//! spec's clamping, negative steps included), Pad (constant/reflect/edge/wrap, negative
//! pads crop), CenterCropPad and ReverseSequence.

use super::common::{
    check_size, const_ints, fresh_dims, ints_of, norm_axes, to_sizes, MAX_ELEMENTS,
};
use super::symbolic::sym_input;
use crate::dim::Dim;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::map_tensor;
use crate::ops::util::{in_ty, input, norm_axis, opt_in_ty, opt_input};
use crate::ops::{InferCx, InferInput, SymInt};
use crate::tensor::{Elem, Tensor};
use ndarray::{ArrayD, Axis, IxDyn, Slice};

/// One axis of a Slice, resolved: first index, step and element count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisSlice {
    /// First index taken.
    pub start: i64,
    /// Step (never 0).
    pub step: i64,
    /// Number of elements taken.
    pub len: usize,
}

impl AxisSlice {
    /// Resolves `start:end:step` on an axis of length `dim` as the ONNX spec does:
    /// negative bounds count from the end, then bounds are clamped to `[0, dim]`
    /// (`[-1, dim-1]` for the end of a negative step).
    pub fn resolve(start: i64, end: i64, step: i64, dim: usize) -> Result<AxisSlice> {
        if step == 0 {
            return Err(IrError::Shape("Slice step 0".into()));
        }
        // i128 keeps `end - start + step` exact for any i64 bounds and steps.
        let (d, k) = (dim as i128, step as i128);
        let wrap = |v: i64| if v < 0 { v as i128 + d } else { v as i128 };
        let (s, e) = (wrap(start), wrap(end));
        let (s, len) = if k > 0 {
            let (s, e) = (s.clamp(0, d), e.clamp(0, d));
            (s, if e > s { (e - s + k - 1) / k } else { 0 })
        } else {
            let (s, e) = (s.max(0).min(d - 1), e.max(-1).min(d - 1));
            (s, if s > e { (s - e - k - 1) / -k } else { 0 })
        };
        Ok(AxisSlice {
            start: s as i64,
            step,
            len: len as usize,
        })
    }

    /// The same selection as an ndarray `Slice` (whose negative steps walk a range
    /// backwards from its end).
    fn to_ndarray(self) -> Slice {
        let n = self.len as isize;
        let s = self.start as isize;
        // A step longer than the axis takes one element; clamping it keeps the
        // arithmetic in range.
        let k = self.step.clamp(-(isize::MAX as i64), isize::MAX as i64) as isize;
        match n {
            0 => Slice::new(0, Some(0), 1),
            1 => Slice::new(s, Some(s + 1), 1),
            _ if k > 0 => Slice::new(s, Some(s + (n - 1) * k + 1), k),
            _ => Slice::new(s + (n - 1) * k, Some(s + 1), k),
        }
    }
}

/// Slice's per-axis parameters: `(axis, start, end, step)`.
fn slice_params<S: Clone + std::fmt::Debug, E: Clone + std::fmt::Debug>(
    starts: &[S],
    ends: &[E],
    axes: Option<Vec<i64>>,
    steps: Option<Vec<i64>>,
    rank: usize,
) -> Result<Vec<(usize, S, E, i64)>> {
    let n = starts.len();
    let axes = axes.unwrap_or_else(|| (0..n as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return Err(IrError::Shape(format!(
            "Slice starts {starts:?}, ends {ends:?}, axes {axes:?}, steps {steps:?} differ in length"
        )));
    }
    let axes = norm_axes(&axes, rank)?;
    Ok((0..n)
        .map(|i| (axes[i], starts[i].clone(), ends[i].clone(), steps[i]))
        .collect())
}

/// `Slice(data, starts, ends, axes?, steps?)`.
pub fn slice(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let starts = ints_of(input(inputs, 1)?, "Slice starts")?;
    let ends = ints_of(input(inputs, 2)?, "Slice ends")?;
    let axes = opt_input(inputs, 3)
        .map(|t| ints_of(t, "Slice axes"))
        .transpose()?;
    let steps = opt_input(inputs, 4)
        .map(|t| ints_of(t, "Slice steps"))
        .transpose()?;
    let mut per_axis = vec![Slice::from(..); x.rank()];
    for (a, s, e, k) in slice_params(&starts, &ends, axes, steps, x.rank())? {
        per_axis[a] = AxisSlice::resolve(s, e, k, x.shape()[a])?.to_ndarray();
    }
    Ok(map_tensor!(x, t => t.slice_each_axis(|d| per_axis[d.axis.index()]).to_owned()))
}

/// Ends at or beyond this mean "to the end" for a symbolic dim.
const TO_END: i64 = i32::MAX as i64;

/// Slice's output type; exact on known dims and on the whole-axis forms (`0:END`,
/// `-1:-END:-1`, `0:dim`) of symbolic ones, fresh symbols where inputs are unknown.
pub fn infer_slice(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let rank = x.shape.len();
    // `Some(None)`: absent (the default applies); `None`: present but not constant.
    let optional = |i: usize| match opt_in_ty(inputs, i) {
        None => Some(None),
        Some(t) => const_ints(Some(t)).map(Some),
    };
    let starts = sym_input(cx, node, inputs, 1);
    let ends = sym_input(cx, node, inputs, 2);
    let (axes, steps) = (optional(3), optional(4));
    let mut shape = x.shape.clone();
    if let (Some(s), Some(e), Some(axes), Some(steps)) = (starts, ends, axes.clone(), steps) {
        for (a, s, e, k) in slice_params(&s, &e, axes, steps, rank)? {
            let s = match s {
                SymInt::Int(v) => Some(v),
                SymInt::Dim(_) => None,
            };
            // An end equal to the (symbolic) dim is the end of the axis.
            let e = match e {
                SymInt::Int(v) => Some(v),
                SymInt::Dim(d) if d == x.shape[a] => Some(i64::MAX),
                SymInt::Dim(_) => None,
            };
            shape[a] = match (&x.shape[a], s, e) {
                (Dim::Known(d), Some(s), Some(e)) => {
                    Dim::from(AxisSlice::resolve(s, e, k, *d as usize)?.len)
                }
                (d, Some(s), Some(e))
                    if (k == 1 && s == 0 && e >= TO_END)
                        || (k == -1 && (s == -1 || s >= TO_END) && e <= -TO_END) =>
                {
                    d.clone()
                }
                _ => cx.fresh_dim("slice"),
            };
        }
        return Ok(TensorType::new(x.dtype, shape));
    }
    let sliced: Vec<usize> = match axes {
        Some(Some(axes)) => norm_axes(&axes, rank)?,
        Some(None) => match in_ty(inputs, 1)?.ty.shape.first().and_then(Dim::known) {
            Some(n) => (0..(n as usize).min(rank)).collect(),
            None => (0..rank).collect(),
        },
        None => (0..rank).collect(),
    };
    for a in sliced {
        shape[a] = cx.fresh_dim("slice");
    }
    Ok(TensorType::new(x.dtype, shape))
}

/// How Pad fills the new border.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

/// Source index along an axis of length `d` for the position `p` (which may lie outside
/// `0..d`), or `None` for the constant border.
fn pad_source(p: i64, d: i64, mode: PadMode) -> Option<usize> {
    if (0..d).contains(&p) {
        return Some(p as usize);
    }
    let i = match mode {
        PadMode::Constant => return None,
        PadMode::Edge => p.clamp(0, d - 1),
        PadMode::Wrap => p.rem_euclid(d),
        PadMode::Reflect if d == 1 => 0,
        PadMode::Reflect => {
            let period = 2 * (d - 1);
            let q = p.rem_euclid(period);
            if q >= d {
                period - q
            } else {
                q
            }
        }
    };
    Some(i as usize)
}

/// Pads (or, for negative amounts, crops) `a` by `begin[i]`/`end[i]` on every axis.
fn pad_arr<T: Elem>(
    a: &ArrayD<T>,
    begin: &[i64],
    end: &[i64],
    mode: PadMode,
    cv: T,
) -> Result<ArrayD<T>> {
    let mut out_shape = Vec::with_capacity(a.ndim());
    for (ax, &d) in a.shape().iter().enumerate() {
        let n = d as i128 + begin[ax] as i128 + end[ax] as i128;
        if n < 0 || n > MAX_ELEMENTS as i128 || (mode != PadMode::Constant && d == 0 && n > 0) {
            return Err(IrError::Shape(format!(
                "Pad of {:?} by {begin:?}/{end:?} in {mode:?} mode",
                a.shape()
            )));
        }
        out_shape.push(n as usize);
    }
    check_size(&out_shape, "Pad")?;
    if mode == PadMode::Constant {
        let mut out = ArrayD::from_elem(IxDyn(&out_shape), cv);
        let mut src = Vec::with_capacity(a.ndim());
        let mut dst = Vec::with_capacity(a.ndim());
        for (ax, &d) in a.shape().iter().enumerate() {
            let (o, i) = (begin[ax].max(0), begin[ax].saturating_neg().max(0));
            let n = (d as i64).saturating_sub(i).min(out_shape[ax] as i64 - o);
            let (o, i, n) = if n > 0 { (o, i, n) } else { (0, 0, 0) };
            src.push(Slice::from(i as usize..(i + n) as usize));
            dst.push(Slice::from(o as usize..(o + n) as usize));
        }
        out.slice_each_axis_mut(|d| dst[d.axis.index()])
            .assign(&a.slice_each_axis(|d| src[d.axis.index()]));
        return Ok(out);
    }
    let mut out = a.clone();
    for (ax, &d) in a.shape().iter().enumerate() {
        if begin[ax] == 0 && end[ax] == 0 {
            continue;
        }
        let idx: Vec<usize> = (0..out_shape[ax] as i64)
            .map(|o| {
                pad_source(o.saturating_sub(begin[ax]), d as i64, mode).expect("non-constant mode")
            })
            .collect();
        out = out.select(Axis(ax), &idx);
    }
    Ok(out)
}

/// `Pad(data, pads, constant_value?, axes?)`.
pub fn pad(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let pads = ints_of(input(inputs, 1)?, "Pad pads")?;
    let mode = match node.attrs.str_or("mode", "constant")? {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        m => return Err(IrError::Unsupported(format!("Pad mode `{m}`"))),
    };
    let axes = match opt_input(inputs, 3) {
        Some(a) => norm_axes(&ints_of(a, "Pad axes")?, x.rank())?,
        None => (0..x.rank()).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(IrError::Shape(format!(
            "Pad pads {pads:?} for {} axes",
            axes.len()
        )));
    }
    let (mut begin, mut end) = (vec![0; x.rank()], vec![0; x.rank()]);
    for (i, &a) in axes.iter().enumerate() {
        begin[a] = pads[i];
        end[a] = pads[axes.len() + i];
    }
    let cv = opt_input(inputs, 2);
    Ok(map_tensor!(x, a => {
        let c = match cv {
            Some(c) => c.cast(x.dtype()).as_array()?.iter().next().copied().unwrap_or_default(),
            None => Default::default(),
        };
        pad_arr(a, &begin, &end, mode, c)?
    }))
}

/// Pad's output type.
pub fn infer_pad(cx: &mut InferCx, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let rank = x.shape.len();
    let axes = match opt_in_ty(inputs, 3) {
        None => Some((0..rank).collect()),
        Some(a) => const_ints(Some(a))
            .map(|a| norm_axes(&a, rank))
            .transpose()?,
    };
    let pads = const_ints(opt_in_ty(inputs, 1));
    let mut shape = x.shape.clone();
    match (axes, pads) {
        (Some(axes), Some(pads)) if pads.len() == 2 * axes.len() => {
            for (i, &a) in axes.iter().enumerate() {
                let p = pads[i].saturating_add(pads[axes.len() + i]);
                shape[a] = match &x.shape[a] {
                    Dim::Known(d) if (*d as i64).saturating_add(p) >= 0 => {
                        Dim::from((*d as i64 + p) as u64)
                    }
                    d if p >= 0 => d.add(&Dim::from(p as u64)),
                    _ => cx.fresh_dim("pad"),
                };
            }
        }
        (Some(axes), _) => axes.iter().for_each(|&a| shape[a] = cx.fresh_dim("pad")),
        (None, _) => shape = fresh_dims(cx, rank, "pad"),
    }
    Ok(TensorType::new(x.dtype, shape))
}

/// CenterCropPad's axes and target sizes.
fn crop_targets(node: &Node, rank: usize, shape: &[i64]) -> Result<Vec<(usize, i64)>> {
    let axes = match node.attrs.ints("axes")? {
        Some(a) => norm_axes(a, rank)?,
        None => (0..rank).collect(),
    };
    if axes.len() != shape.len() {
        return Err(IrError::Shape(format!(
            "CenterCropPad shape {shape:?} for axes {axes:?}"
        )));
    }
    Ok(axes.into_iter().zip(shape.iter().copied()).collect())
}

/// `CenterCropPad(input_data, shape)`: crops or zero-pads each axis around its centre.
pub fn center_crop_pad(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let target = ints_of(input(inputs, 1)?, "CenterCropPad shape")?;
    to_sizes(&target, "CenterCropPad shape")?;
    let (mut begin, mut end) = (vec![0; x.rank()], vec![0; x.rank()]);
    for (a, sh) in crop_targets(node, x.rank(), &target)? {
        let diff = sh - x.shape()[a] as i64;
        // The extra element of an odd difference goes to the end.
        begin[a] = diff.signum() * (diff.abs() / 2);
        end[a] = diff - begin[a];
    }
    Ok(map_tensor!(x, a => pad_arr(a, &begin, &end, PadMode::Constant, Default::default())?))
}

/// CenterCropPad's output type.
pub fn infer_center_crop_pad(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let rank = x.shape.len();
    let mut shape = x.shape.clone();
    match const_ints(opt_in_ty(inputs, 1)) {
        Some(target) => {
            let target_sizes = to_sizes(&target, "CenterCropPad shape")?;
            for ((a, _), n) in crop_targets(node, rank, &target)?
                .into_iter()
                .zip(target_sizes)
            {
                shape[a] = Dim::from(n);
            }
        }
        None => match node.attrs.ints("axes")? {
            Some(a) => norm_axes(a, rank)?
                .into_iter()
                .for_each(|a| shape[a] = cx.fresh_dim("crop")),
            None => shape = fresh_dims(cx, rank, "crop"),
        },
    }
    Ok(TensorType::new(x.dtype, shape))
}

fn reverse_seq<T: Elem>(a: &ArrayD<T>, lens: &[usize], batch: usize, time: usize) -> ArrayD<T> {
    let mut out = a.clone();
    // Inside one batch entry the time axis moves down if it came after the batch axis.
    let t_ax = Axis(if time > batch { time - 1 } else { time });
    for (b, &len) in lens.iter().enumerate() {
        let src = a.index_axis(Axis(batch), b);
        let mut dst = out.index_axis_mut(Axis(batch), b);
        for t in 0..len {
            dst.index_axis_mut(t_ax, t)
                .assign(&src.index_axis(t_ax, len - 1 - t));
        }
    }
    out
}

/// `ReverseSequence(input, sequence_lens)`.
pub fn reverse_sequence(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let lens = to_sizes(
        &ints_of(input(inputs, 1)?, "ReverseSequence sequence_lens")?,
        "ReverseSequence sequence_lens",
    )?;
    let batch = norm_axis(node.attrs.int_or("batch_axis", 1)?, x.rank())?;
    let time = norm_axis(node.attrs.int_or("time_axis", 0)?, x.rank())?;
    let (nb, nt) = (x.shape()[batch], x.shape()[time]);
    if batch == time || lens.len() != nb || lens.iter().any(|&l| l > nt) {
        return Err(IrError::Shape(format!(
            "ReverseSequence of {:?} (batch axis {batch}, time axis {time}) with lengths {lens:?}",
            x.shape()
        )));
    }
    Ok(map_tensor!(x, a => reverse_seq(a, &lens, batch, time)))
}
