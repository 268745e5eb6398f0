//! Signal processing: `DFT` (opset 20, axis as an input), `STFT`, the Hann, Hamming
//! and Blackman windows, and `MelWeightMatrix`, mirroring `op_dft.py`, `op_stft.py`,
//! `op_*_window.py` and `op_mel_weight_matrix.py`. Complex tensors carry a trailing
//! dim of 2 (real, imaginary); real ones a trailing dim of 1.

use super::fft::{transform, C64};
use super::to_f64_array;
use super::{dtype_from_onnx_code, from_f64_array, require_float, scalar_f64, scalar_i64};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_in_ty, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::Tensor;
use ndarray::{ArrayD, IxDyn};
use std::f64::consts::PI;

/// The DFT axis: input 2 (opset 20), else the older `axis` attribute, else -2;
/// normalised against `rank`, and never the trailing complex dim.
fn dft_axis(node: &Node, axis_in: Option<&Tensor>, rank: usize) -> Result<usize> {
    let axis = match axis_in.filter(|t| !t.is_empty()) {
        Some(t) => scalar_i64(t, "DFT axis")?,
        None => node.attrs.int_or("axis", -2)?,
    };
    let r = rank as i64;
    if rank < 2 || axis < -r || axis >= r {
        return Err(IrError::Shape(format!(
            "DFT axis {axis} out of range for rank {rank}"
        )));
    }
    let a = axis.rem_euclid(r) as usize;
    if a == rank - 1 {
        return Err(IrError::Shape(format!(
            "DFT axis {axis} is the trailing complex dim of rank {rank}"
        )));
    }
    Ok(a)
}

/// Output length along the axis and the output's trailing dim.
fn dft_out(n_fft: usize, inverse: bool, onesided: bool) -> (usize, usize) {
    match (inverse, onesided) {
        (false, true) => (n_fft / 2 + 1, 2),
        (false, false) | (true, false) => (n_fft, 2),
        (true, true) => (n_fft, 1),
    }
}

/// Runs DFT.
pub(super) fn dft(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let xd = to_f64_array(x, "DFT input")?;
    let shape = xd.shape().to_vec();
    let rank = shape.len();
    let axis = dft_axis(node, opt_input(inputs, 2), rank)?;
    let inverse = node.attrs.int_or("inverse", 0)? != 0;
    let onesided = node.attrs.int_or("onesided", 0)? != 0;
    let comps = shape[rank - 1];
    if comps != 1 && comps != 2 {
        return Err(IrError::Shape(format!(
            "DFT input {shape:?} must end in 1 (real) or 2 (complex)"
        )));
    }
    let m = shape[axis];
    let n_fft = match opt_input(inputs, 1).filter(|t| !t.is_empty()) {
        Some(t) => {
            let v = scalar_i64(t, "DFT dft_length")?;
            if v < 1 {
                return Err(IrError::Shape(format!(
                    "DFT dft_length {v} must be positive"
                )));
            }
            v as usize
        }
        None if inverse && onesided => 2 * m.saturating_sub(1),
        None => m,
    };
    let (out_len, out_comps) = dft_out(n_fft, inverse, onesided);
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..rank - 1].iter().product();
    let mut out_shape = shape.clone();
    out_shape[axis] = out_len;
    out_shape[rank - 1] = out_comps;
    let xv: Vec<f64> = xd.iter().copied().collect();
    let mut out = vec![0.0; outer * out_len * inner * out_comps];
    let mut lane = vec![C64::default(); n_fft];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| {
                let base = ((o * m + j) * inner + i) * comps;
                C64::new(xv[base], if comps == 2 { xv[base + 1] } else { 0.0 })
            };
            lane.iter_mut().for_each(|c| *c = C64::default());
            if inverse && onesided {
                // Hermitian extension of the first n/2+1 bins (numpy's irfft).
                let half = n_fft / 2 + 1;
                for (k, c) in lane.iter_mut().enumerate().take(half.min(m)) {
                    *c = at(k);
                }
                for k in 1..n_fft.div_ceil(2) {
                    let c = lane[k];
                    lane[n_fft - k] = C64::new(c.re, -c.im);
                }
            } else {
                for (j, c) in lane.iter_mut().enumerate().take(m) {
                    *c = at(j);
                }
            }
            let y = transform(&lane, inverse);
            let norm = if inverse { 1.0 / n_fft as f64 } else { 1.0 };
            for (k, c) in y.iter().take(out_len).enumerate() {
                let base = ((o * out_len + k) * inner + i) * out_comps;
                out[base] = c.re * norm;
                if out_comps == 2 {
                    out[base + 1] = c.im * norm;
                }
            }
        }
    }
    let out = ArrayD::from_shape_vec(IxDyn(&out_shape), out).expect("output size");
    Ok(vec![from_f64_array(out, x.dtype())?])
}

/// DFT's output type.
pub(super) fn infer_dft(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    require_float(x.dtype, "DFT input")?;
    let rank = x.shape.len();
    let inverse = node.attrs.int_or("inverse", 0)? != 0;
    let onesided = node.attrs.int_or("onesided", 0)? != 0;
    let axis_in = opt_in_ty(inputs, 2);
    let len_in = opt_in_ty(inputs, 1);
    if axis_in.is_some_and(|t| t.value.is_none()) || len_in.is_some_and(|t| t.value.is_none()) {
        let mut shape: Vec<Dim> = (0..rank.saturating_sub(1))
            .map(|_| cx.fresh_dim("dft"))
            .collect();
        shape.push(Dim::from(dft_out(2, inverse, onesided).1));
        return Ok(vec![TensorType::new(x.dtype, shape)]);
    }
    let axis = dft_axis(node, axis_in.and_then(|t| t.value), rank)?;
    let mut shape = x.shape.clone();
    let n_fft = match len_in.and_then(|t| t.value).filter(|t| !t.is_empty()) {
        Some(t) => Some(scalar_i64(t, "DFT dft_length")?.max(1) as u64),
        None => x.shape[axis].known().map(|m| {
            if inverse && onesided {
                2 * m.saturating_sub(1)
            } else {
                m
            }
        }),
    };
    shape[axis] = match n_fft {
        Some(n) => Dim::from(dft_out(n as usize, inverse, onesided).0),
        None if !onesided => x.shape[axis].clone(),
        None => cx.fresh_dim("dft"),
    };
    shape[rank - 1] = Dim::from(dft_out(2, inverse, onesided).1);
    Ok(vec![TensorType::new(x.dtype, shape)])
}

/// STFT's frame geometry: (frame_length, frame_step, frames).
fn stft_geometry(len: usize, step: i64, frame_len: usize) -> Result<(usize, usize)> {
    if step < 1 || frame_len == 0 || frame_len > len {
        return Err(IrError::Shape(format!(
            "STFT: frame_step {step} and frame_length {frame_len} do not fit a signal of {len}"
        )));
    }
    Ok((step as usize, 1 + (len - frame_len) / step as usize))
}

/// Runs STFT.
pub(super) fn stft(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let xd = to_f64_array(x, "STFT signal")?;
    let step = scalar_i64(input(inputs, 1)?, "STFT frame_step")?;
    let window = opt_input(inputs, 2)
        .filter(|t| !t.is_empty())
        .map(|w| to_f64_array(w, "STFT window"))
        .transpose()?
        .map(|w| w.iter().copied().collect::<Vec<f64>>());
    let onesided = node.attrs.int_or("onesided", 1)? != 0;
    let s = xd.shape().to_vec();
    if s.len() != 3 || !(s[2] == 1 || s[2] == 2) {
        return Err(IrError::Shape(format!(
            "STFT signal {s:?} must be [batch, length, 1 or 2]"
        )));
    }
    let (batch, len, comps) = (s[0], s[1], s[2]);
    let frame_len = match opt_input(inputs, 3).filter(|t| !t.is_empty()) {
        Some(t) => scalar_i64(t, "STFT frame_length")?.max(0) as usize,
        None => window.as_ref().map_or(len, |w| w.len()),
    };
    let window = window.unwrap_or_else(|| vec![1.0; frame_len]);
    let (step, frames) = stft_geometry(len, step, frame_len)?;
    let bins = if onesided {
        frame_len / 2 + 1
    } else {
        frame_len
    };
    let xv: Vec<f64> = xd.iter().copied().collect();
    let mut out = Vec::with_capacity(batch * frames * bins * 2);
    let mut lane = vec![C64::default(); frame_len];
    for b in 0..batch {
        for f in 0..frames {
            lane.iter_mut().for_each(|c| *c = C64::default());
            for (j, &w) in window.iter().enumerate().take(frame_len) {
                let t = f * step + j;
                if t < len {
                    let base = (b * len + t) * comps;
                    let im = if comps == 2 { xv[base + 1] } else { 0.0 };
                    lane[j] = C64::new(xv[base] * w, im * w);
                }
            }
            for c in transform(&lane, false).iter().take(bins) {
                out.extend([c.re, c.im]);
            }
        }
    }
    let out = ArrayD::from_shape_vec(IxDyn(&[batch, frames, bins, 2]), out).expect("output size");
    Ok(vec![from_f64_array(out, x.dtype())?])
}

/// STFT's output type: `[batch, frames, bins, 2]`.
pub(super) fn infer_stft(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    require_float(x.dtype, "STFT signal")?;
    if x.shape.len() != 3 {
        return Err(IrError::Shape(format!("STFT signal {x} must be rank 3")));
    }
    let onesided = node.attrs.int_or("onesided", 1)? != 0;
    let val = |i| opt_in_ty(inputs, i).and_then(|t: InferInput| t.value);
    let step = val(1)
        .map(|t| scalar_i64(t, "STFT frame_step"))
        .transpose()?;
    let frame_len: Option<u64> = match (opt_in_ty(inputs, 3), opt_in_ty(inputs, 2)) {
        (Some(t), _) => t
            .value
            .map(|v| scalar_i64(v, "STFT frame_length").map(|v| v.max(0) as u64))
            .transpose()?,
        (None, Some(w)) => w.ty.shape.first().and_then(Dim::known),
        (None, None) => x.shape[1].known(),
    };
    let frames = match (x.shape[1].known(), step, frame_len) {
        (Some(len), Some(step), Some(fl)) => {
            Dim::from(stft_geometry(len as usize, step, fl as usize)?.1)
        }
        _ => cx.fresh_dim("stft_frames"),
    };
    let bins = match frame_len {
        Some(fl) if onesided => Dim::from(fl / 2 + 1),
        Some(fl) => Dim::from(fl),
        None => cx.fresh_dim("stft_bins"),
    };
    Ok(vec![TensorType::new(
        x.dtype,
        vec![x.shape[0].clone(), frames, bins, Dim::Known(2)],
    )])
}

/// The window functions.
#[derive(Clone, Copy, Debug)]
pub(super) enum Window {
    Hann,
    Hamming,
    Blackman,
}

/// Runs HannWindow, HammingWindow or BlackmanWindow.
pub(super) fn window(kind: Window, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let size = scalar_i64(input(inputs, 0)?, "window size")?;
    if size < 0 {
        return Err(IrError::Shape(format!("window size {size} is negative")));
    }
    let dtype = dtype_from_onnx_code(node, 1)?;
    let periodic = node.attrs.int_or("periodic", 1)? != 0;
    let denom = if periodic { size } else { size - 1 } as f64;
    let f: fn(f64) -> f64 = match kind {
        Window::Hann => |t| (PI * t).sin().powi(2),
        Window::Hamming => |t| {
            let a0 = 25.0 / 46.0;
            a0 - (1.0 - a0) * (2.0 * PI * t).cos()
        },
        Window::Blackman => |t| 0.42 - 0.5 * (2.0 * PI * t).cos() + 0.08 * (4.0 * PI * t).cos(),
    };
    let v: Vec<f64> = (0..size).map(|i| f(i as f64 / denom)).collect();
    let out = ArrayD::from_shape_vec(IxDyn(&[size as usize]), v).expect("1-D");
    Ok(vec![from_f64_array(out, dtype)?])
}

/// A window's output type: `[size]`.
pub(super) fn infer_window(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let dtype = dtype_from_onnx_code(node, 1)?;
    let size = match in_ty(inputs, 0)?.value {
        Some(v) => Dim::from(scalar_i64(v, "window size")?.max(0) as u64),
        None => cx.fresh_dim("window"),
    };
    Ok(vec![TensorType::new(dtype, vec![size])])
}

/// numpy's float `floor_divide` (via fmod, so `a // b` can differ from `floor(a / b)`
/// when the quotient rounds up to an integer).
fn np_floor_divide(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && (b < 0.0) != (m < 0.0) {
        div -= 1.0;
    }
    if div != 0.0 {
        let mut fd = div.floor();
        if div - fd > 0.5 {
            fd += 1.0;
        }
        fd
    } else {
        0f64.copysign(a / b)
    }
}

/// Runs MelWeightMatrix.
pub(super) fn mel_weight_matrix(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let bins = scalar_i64(input(inputs, 0)?, "num_mel_bins")?;
    let dft_len = scalar_i64(input(inputs, 1)?, "dft_length")?;
    let rate = scalar_i64(input(inputs, 2)?, "sample_rate")?;
    let lo_t = input(inputs, 3)?;
    let hi_t = input(inputs, 4)?;
    let dtype = dtype_from_onnx_code(node, 1)?;
    if bins < 0 || dft_len < 1 || rate == 0 {
        return Err(IrError::Shape(format!(
            "MelWeightMatrix: num_mel_bins {bins}, dft_length {dft_len}, sample_rate {rate}"
        )));
    }
    // Hz to mel, computed in the edges' own precision up to the division by ln 10.
    let mel = |t: &Tensor, what: &str| -> Result<f64> {
        let v = scalar_f64(t, what)?;
        Ok(match t.dtype() {
            DType::F64 => 2595.0 * (v / 700.0).ln_1p(),
            _ => (2595f32 * (v as f32 / 700f32).ln_1p()) as f64,
        } / 10f64.ln())
    };
    let lo = mel(lo_t, "lower_edge_hertz")?;
    let hi = mel(hi_t, "upper_edge_hertz")?;
    let n_spec = (dft_len / 2 + 1) as usize;
    let nb = bins as usize;
    let step = (hi - lo) / (nb + 2) as f64;
    let points: Vec<i64> = (0..nb + 2)
        .map(|i| {
            let m = i as f64 * step + lo;
            let hz = 700.0 * (m / 2595.0 * 10f64.ln()).exp_m1();
            np_floor_divide((dft_len + 1) as f64 * hz, rate as f64) as i64
        })
        .collect();
    let mut out = vec![0.0; n_spec * nb];
    let mut set = |j: i64, i: usize, v: f64| -> Result<()> {
        if j < 0 || j as usize >= n_spec {
            return Err(IrError::Shape(format!(
                "MelWeightMatrix: frequency bin {j} outside the {n_spec} spectrogram bins"
            )));
        }
        out[j as usize * nb + i] = v;
        Ok(())
    };
    for i in 0..nb {
        let (l, c, h) = (points[i], points[i + 1], points[i + 2]);
        if c == l {
            set(c, i, 1.0)?;
        } else {
            for j in l..=c {
                set(j, i, (j - l) as f64 / (c - l) as f64)?;
            }
        }
        if h > c {
            for j in c..h {
                set(j, i, (h - j) as f64 / (h - c) as f64)?;
            }
        }
    }
    let out = ArrayD::from_shape_vec(IxDyn(&[n_spec, nb]), out).expect("output size");
    if !dtype.is_float() {
        return unsupported(format!("MelWeightMatrix output_datatype {dtype}"));
    }
    Ok(vec![from_f64_array(out, dtype)?])
}

/// MelWeightMatrix's output type: `[dft_length/2 + 1, num_mel_bins]`.
pub(super) fn infer_mel(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let dtype = dtype_from_onnx_code(node, 1)?;
    let bins = match in_ty(inputs, 0)?.value {
        Some(v) => Dim::from(scalar_i64(v, "num_mel_bins")?.max(0) as u64),
        None => cx.fresh_dim("mel_bins"),
    };
    let spec = match in_ty(inputs, 1)?.value {
        Some(v) => Dim::from((scalar_i64(v, "dft_length")?.max(0) / 2 + 1) as u64),
        None => cx.fresh_dim("mel_spec"),
    };
    Ok(vec![TensorType::new(dtype, vec![spec, bins])])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Attr;
    use crate::ops::{ImageOp, Op};

    fn node(attrs: &[(&str, Attr)]) -> Node {
        let mut n = Node {
            name: "dft".into(),
            op: Op::Image(ImageOp::DFT),
            attrs: Default::default(),
            inputs: vec![],
            outputs: vec![],
        };
        for (k, v) in attrs {
            n.attrs.set(k, v.clone());
        }
        n
    }

    #[test]
    fn inverse_onesided_matches_numpy_irfft() {
        // numpy.fft.irfft([1+.5j, 2-1j, -.5+.25j, 3+2j], n) for n = 7, 4, and n = 8 on
        // the first three bins (zero-padded).
        let spec = [1.0, 0.5, 2.0, -1.0, -0.5, 0.25, 3.0, 2.0];
        let x = Tensor::from_f64s(crate::dtype::DType::F64, &[4, 2], &spec).unwrap();
        let n = node(&[("inverse", Attr::Int(1)), ("onesided", Attr::Int(1))]);
        let axis = Tensor::from_i64s(&[0]);
        let cases: [(i64, &[f64]); 2] = [
            (
                7,
                &[
                    1.4285714285714284,
                    -0.3355241448069071,
                    1.4351353667177296,
                    -1.0290741866377797,
                    -0.2744946354211617,
                    -0.0774713829378547,
                    -0.1471424454854545,
                ],
            ),
            (4, &[1.125, 0.875, -0.875, -0.125]),
        ];
        for (len, want) in cases {
            let l = Tensor::from_i64s(&[len]);
            let y = dft(&n, &[Some(&x), Some(&l), Some(&axis)]).unwrap();
            assert_eq!(y[0].shape(), &[len as usize, 1]);
            for (g, w) in y[0].to_f64_vec().iter().zip(want) {
                assert!((g - w).abs() < 1e-12, "n={len}: {g} vs {w}");
            }
        }
        let x3 = Tensor::from_f64s(crate::dtype::DType::F64, &[3, 2], &spec[..6]).unwrap();
        let l = Tensor::from_i64s(&[8]);
        let y = dft(&n, &[Some(&x3), Some(&l), Some(&axis)]).unwrap();
        let want = [0.5, 0.5928300858899106, 0.5, 0.010723304703363079, -0.5];
        for (g, w) in y[0].to_f64_vec().iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{g} vs {w}");
        }
    }
}
