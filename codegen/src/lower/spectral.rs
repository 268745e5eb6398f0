//! DFT and STFT, read once for every backend as one windowed discrete Fourier
//! transform: each output bin `k` of each transformed lane is
//! `scale * sum_j lane(j) * exp(sign * 2 pi i j k / n)`, computed directly (one
//! invocation per output bin, `n` terms; these ops are small in the models that have
//! them, and a direct sum needs no scratch memory or passes). The lanes are read from
//! the input in place: DFT's along `axis` (zero-padded or cut to `dft_length`, or for
//! an inverse one-sided transform the Hermitian extension of the first `n/2 + 1` bins,
//! as numpy's irfft), STFT's as frames `frame_step` apart, times the window. The
//! sizes that decide shapes (`dft_length`, `axis`, `frame_step`, `frame_length`) must
//! be constants, which a specialized graph makes them.

use super::support::{check_float, input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// Which transform a node is, as [`super::lower`] maps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpectralOp {
    /// DFT.
    Dft,
    /// STFT.
    Stft,
}

/// A DFT or STFT node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct SpectralSpec {
    /// The node.
    pub site: Site,
    /// The signal.
    pub x: ValueId,
    /// STFT's window (one weight per lane element), when given.
    pub window: Option<(ValueId, DType)>,
    /// The output.
    pub out: ValueId,
    /// The signal's and the output's dtype.
    pub dtype: DType,
    /// Transforms in the outer dims (before the axis; STFT: the batch).
    pub outer: usize,
    /// Frames per outer index (1 for DFT).
    pub frames: usize,
    /// Output bins per lane.
    pub bins: usize,
    /// Lanes side by side after the axis (DFT), 1 for STFT.
    pub inner: usize,
    /// The input's components per element: 1 (real) or 2 (complex).
    pub comps: usize,
    /// The output's components: 2, or 1 for an inverse one-sided DFT (real output).
    pub out_comps: usize,
    /// The transform length.
    pub n: usize,
    /// Lane elements read from the input (the rest are zero).
    pub valid: usize,
    /// Input elements (complex units) between outer indices.
    pub outer_stride: usize,
    /// Input elements between frames (STFT's step; 0 for DFT).
    pub frame_stride: usize,
    /// Input elements between a lane's consecutive elements.
    pub lane_stride: usize,
    /// The sign of the exponent: +1 for the inverse transform.
    pub inverse: bool,
    /// An inverse one-sided DFT: the lane is the Hermitian extension of `valid` bins.
    pub hermitian: bool,
    /// `1/n` for the inverse transform, else 1.
    pub scale: f32,
}

impl SpectralSpec {
    /// Output bins in all (each `out_comps` elements).
    pub fn bins_total(&self) -> usize {
        self.outer * self.frames * self.bins * self.inner
    }
}

/// A scalar integer input that must be a constant, if present.
fn const_int(g: &Graph, node: &Node, k: usize, what: &str) -> Result<Option<i64>> {
    let Some(v) = opt_input(node, k) else {
        return Ok(None);
    };
    let t = g
        .small_constant(v)
        .ok_or_else(|| unsupported(node, &format!("{what} that is not a constant")))?;
    if t.is_empty() {
        return Ok(None);
    }
    match t.to_i64_vec()[..] {
        [x] => Ok(Some(x)),
        [] | [_, _, ..] => Err(unsupported(
            node,
            &format!("{what} of more than one element"),
        )),
    }
}

/// Reads DFT or STFT node `node` (of op `op`) of `g`.
pub fn spec(g: &Graph, node: &Node, op: SpectralOp) -> Result<SpectralSpec> {
    match op {
        SpectralOp::Dft => dft(g, node),
        SpectralOp::Stft => stft(g, node),
    }
}

fn dft(g: &Graph, node: &Node) -> Result<SpectralSpec> {
    let x = input(node, 0)?;
    let out = output(node, 0)?;
    let (dtype, shape) = typed(g, node, x)?;
    check_float(node, dtype, "data")?;
    let rank = shape.len();
    let comps = shape.last().copied().unwrap_or(0);
    if rank < 2 || !(comps == 1 || comps == 2) {
        return Err(unsupported(node, "an input that does not end in 1 or 2"));
    }
    let axis = match const_int(g, node, 2, "an axis")? {
        Some(a) => a,
        None => node.attrs.int_or("axis", -2).map_err(plan)?,
    };
    let axis = axis.rem_euclid(rank as i64) as usize;
    if axis == rank - 1 {
        return Err(unsupported(
            node,
            "the trailing complex axis as the DFT axis",
        ));
    }
    let inverse = node.attrs.int_or("inverse", 0).map_err(plan)? != 0;
    let onesided = node.attrs.int_or("onesided", 0).map_err(plan)? != 0;
    let m = shape[axis];
    let n = match const_int(g, node, 1, "a dft_length")? {
        Some(v) if v >= 1 => v as usize,
        Some(v) => return Err(unsupported(node, &format!("dft_length {v}"))),
        None if inverse && onesided => 2 * m.saturating_sub(1),
        None => m,
    };
    let (bins, out_comps) = match (inverse, onesided) {
        (false, true) => (n / 2 + 1, 2),
        (false, false) | (true, false) => (n, 2),
        (true, true) => (n, 1),
    };
    let (_, out_shape) = typed(g, node, out)?;
    if out_shape[axis] != bins || out_shape[rank - 1] != out_comps {
        return Err(plan(format!(
            "DFT `{}`: output {out_shape:?} does not match {bins} bins",
            node.name
        )));
    }
    let inner: usize = shape[axis + 1..rank - 1].iter().product();
    let hermitian = inverse && onesided;
    Ok(SpectralSpec {
        site: Site::of(node),
        x,
        window: None,
        out,
        dtype,
        outer: shape[..axis].iter().product(),
        frames: 1,
        bins,
        inner,
        comps,
        out_comps,
        n,
        valid: if hermitian { m } else { m.min(n) },
        outer_stride: m * inner,
        frame_stride: 0,
        lane_stride: inner,
        inverse,
        hermitian,
        scale: if inverse { 1.0 / n as f32 } else { 1.0 },
    })
}

fn stft(g: &Graph, node: &Node) -> Result<SpectralSpec> {
    let x = input(node, 0)?;
    let out = output(node, 0)?;
    let (dtype, shape) = typed(g, node, x)?;
    check_float(node, dtype, "signal")?;
    let [batch, len, comps] = shape[..] else {
        return Err(unsupported(
            node,
            "a signal that is not [batch, length, 1 or 2]",
        ));
    };
    if !(comps == 1 || comps == 2) {
        return Err(unsupported(node, "a signal that does not end in 1 or 2"));
    }
    let step = const_int(g, node, 1, "a frame_step")?
        .ok_or_else(|| unsupported(node, "a missing frame_step"))?;
    let window = match opt_input(node, 2) {
        Some(w) => {
            let (wdt, ws) = typed(g, node, w)?;
            check_float(node, wdt, "window")?;
            (ws.iter().product::<usize>() > 0).then_some((w, wdt, ws[0]))
        }
        None => None,
    };
    let frame_len = match const_int(g, node, 3, "a frame_length")? {
        Some(v) => v.max(0) as usize,
        None => window.map_or(len, |(_, _, wl)| wl),
    };
    if step < 1 || frame_len == 0 || frame_len > len {
        return Err(unsupported(node, "frames that do not fit the signal"));
    }
    let frames = 1 + (len - frame_len) / step as usize;
    let onesided = node.attrs.int_or("onesided", 1).map_err(plan)? != 0;
    let bins = if onesided {
        frame_len / 2 + 1
    } else {
        frame_len
    };
    Ok(SpectralSpec {
        site: Site::of(node),
        x,
        window: window.map(|(w, wdt, _)| (w, wdt)),
        out,
        dtype,
        outer: batch,
        frames,
        bins,
        inner: 1,
        comps,
        out_comps: 2,
        n: frame_len,
        valid: window.map_or(frame_len, |(_, _, wl)| wl.min(frame_len)),
        outer_stride: len,
        frame_stride: step as usize,
        lane_stride: 1,
        inverse: false,
        hermitian: false,
        scale: 1.0,
    })
}
