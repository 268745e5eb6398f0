//! Convolution: Conv, ConvInteger and QLinearConv over 1-D, 2-D and 3-D (any rank)
//! inputs, with groups, strides, dilations and padding. Each (image, group) pair is one
//! task: im2col into a `[C/g * taps, out]` buffer then one GEMM with the group's
//! weights (pointwise convolutions skip im2col; convolutions with one input channel
//! per group, e.g. depthwise, run a direct shifted-accumulate loop instead).
//! Integer convolutions (see `qlinear`) reuse the same core in f64.

use super::gemm::{by_precision, gemm, Mat, MatElem, Real};
use super::spatial::{for_each_line, Geometry, Window};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{shape_err, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::{array_from, Tensor};
use ndarray::{ArrayD, ArrayViewD};
use rayon::prelude::*;

/// im2col buffers at least this large are filled in parallel.
const PAR_IM2COL: usize = 1 << 16;

/// Sizes of one convolution.
#[derive(Clone, Debug)]
pub(crate) struct ConvShape {
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Output channels.
    pub m: usize,
    /// Groups.
    pub group: usize,
    /// Spatial geometry.
    pub geo: Geometry,
}

impl ConvShape {
    /// Checks `x` (`[N, C, *S]`) against `w` (`[M, C/group, *K]`) and resolves the window.
    pub fn new(node: &Node, x: &[usize], w: &[usize]) -> Result<ConvShape> {
        if x.len() < 3 || w.len() != x.len() {
            return shape_err(format!(
                "Conv needs X [N, C, spatial...] and W of the same rank, got {x:?} and {w:?}"
            ));
        }
        let group = node.attrs.int_or("group", 1)?;
        if group < 1 {
            return shape_err(format!("group must be >= 1, got {group}"));
        }
        let group = group as usize;
        let (c, m) = (x[1], w[0]);
        if c != w[1] * group || m % group != 0 {
            return shape_err(format!(
                "Conv channels do not match: X {x:?}, W {w:?}, group {group}"
            ));
        }
        let kernel = Window::kernel_attr(node, Some(w[2..].to_vec()))?;
        if kernel != w[2..] {
            return shape_err(format!(
                "kernel_shape {kernel:?} differs from W's {:?}",
                &w[2..]
            ));
        }
        let geo = Window::from_node(node, kernel)?.resolve(&x[2..])?;
        Ok(ConvShape {
            n: x[0],
            c,
            m,
            group,
            geo,
        })
    }

    /// The output shape `[N, M, *out]`.
    pub fn out_shape(&self) -> Vec<usize> {
        let mut s = vec![self.n, self.m];
        s.extend(&self.geo.out);
        s
    }
}

/// Fills `col` (`[channels * taps, out]`) with the input elements each tap reads,
/// zeros where it reads padding.
pub(crate) fn im2col<R: MatElem>(x: &[R], channels: usize, g: &Geometry, col: &mut [R]) {
    let (pin, pout, taps) = (g.in_size(), g.out_size(), g.taps());
    let tap_idx: Vec<Vec<usize>> = (0..taps).map(|t| g.tap(t)).collect();
    let fill = |(row, dst): (usize, &mut [R])| {
        dst.fill(R::ZERO);
        let (ci, t) = (row / taps, row % taps);
        let src = &x[ci * pin..(ci + 1) * pin];
        for_each_line(g, &tap_idx[t], |l| {
            let d = &mut dst[l.out..l.out + l.len];
            if l.step == 1 {
                d.copy_from_slice(&src[l.inp..l.inp + l.len]);
            } else {
                for (v, &e) in d.iter_mut().zip(src[l.inp..].iter().step_by(l.step)) {
                    *v = e;
                }
            }
        });
    };
    let col = &mut col[..channels * taps * pout];
    if col.len() >= PAR_IM2COL {
        col.par_chunks_mut(pout).enumerate().for_each(fill);
    } else {
        col.chunks_mut(pout).enumerate().for_each(fill);
    }
}

/// The convolution of contiguous `x` (`[N, C, *S]`) with `w` (`[M, C/g, *K]`) plus an
/// optional per-channel bias, as a contiguous `[N, M, *out]` buffer.
pub(crate) fn conv_core<R: MatElem>(
    x: &[R],
    w: &[R],
    bias: Option<&[R]>,
    cs: &ConvShape,
) -> Vec<R> {
    let g = &cs.geo;
    let (pin, pout, taps) = (g.in_size(), g.out_size(), g.taps());
    let (cg, mg) = (cs.c / cs.group, cs.m / cs.group);
    let mut out = vec![R::ZERO; cs.n * cs.m * pout];
    if out.is_empty() {
        return out;
    }
    if cg == 1 && cs.group > 1 {
        // One input channel per group: accumulate shifted input planes.
        let tap_idx: Vec<Vec<usize>> = (0..taps).map(|t| g.tap(t)).collect();
        out.par_chunks_mut(pout).enumerate().for_each(|(plane, o)| {
            let (ni, oc) = (plane / cs.m, plane % cs.m);
            let src = &x[(ni * cs.c + oc / mg) * pin..][..pin];
            for (t, tap) in tap_idx.iter().enumerate() {
                let wv = w[oc * taps + t];
                for_each_line(g, tap, |l| {
                    let d = &mut o[l.out..l.out + l.len];
                    if l.step == 1 {
                        for (v, &e) in d.iter_mut().zip(&src[l.inp..l.inp + l.len]) {
                            *v = R::madd(*v, wv, e);
                        }
                    } else {
                        for (v, &e) in d.iter_mut().zip(src[l.inp..].iter().step_by(l.step)) {
                            *v = R::madd(*v, wv, e);
                        }
                    }
                });
            }
        });
    } else {
        let pointwise = g.kernel.iter().all(|&k| k == 1)
            && g.strides.iter().all(|&s| s == 1)
            && g.pad_begin.iter().chain(&g.pad_end).all(|&p| p == 0);
        let kdim = cg * taps;
        out.par_chunks_mut(mg * pout)
            .enumerate()
            .for_each(|(task, o)| {
                let (ni, gi) = (task / cs.group, task % cs.group);
                let xg = &x[(ni * cs.c + gi * cg) * pin..][..cg * pin];
                let wg = Mat::rows(&w[gi * mg * kdim..][..mg * kdim], kdim);
                if pointwise {
                    gemm(mg, kdim, pout, R::ONE, wg, Mat::rows(xg, pout), R::ZERO, o);
                } else {
                    let mut col = vec![R::ZERO; kdim * pout];
                    im2col(xg, cg, g, &mut col);
                    gemm(
                        mg,
                        kdim,
                        pout,
                        R::ONE,
                        wg,
                        Mat::rows(&col, pout),
                        R::ZERO,
                        o,
                    );
                }
            });
    }
    if let Some(b) = bias {
        add_bias(&mut out, b, pout);
    }
    out
}

/// Adds `b[channel]` to each `plane`-sized channel plane of `out` (`[N, M, plane]`).
pub(crate) fn add_bias<R: MatElem>(out: &mut [R], b: &[R], plane: usize) {
    if plane == 0 || b.is_empty() {
        return;
    }
    out.par_chunks_mut(plane).enumerate().for_each(|(i, p)| {
        let bv = b[i % b.len()];
        p.iter_mut().for_each(|v| *v = R::wadd(*v, bv));
    });
}

/// Checks a bias has one value per output channel.
pub(crate) fn check_bias(b: &Tensor, m: usize, op: &str) -> Result<()> {
    if b.len() != m || b.rank() != 1 {
        return shape_err(format!(
            "{op} bias must be 1-D of {m} values, got {:?}",
            b.shape()
        ));
    }
    Ok(())
}

/// The convolution `cs` (from [`ConvShape::new`]) of `x` (`[N, C, *S]`, any layout)
/// by `w` (`[M, C/g, *K]`) plus an optional per-channel bias of `cs.m` values, as a
/// `[N, M, *out]` array. Conv and the fused convolution (`ops::fused`) run on this.
pub(crate) fn conv_array<R: MatElem>(
    cs: &ConvShape,
    x: ArrayViewD<R>,
    w: ArrayViewD<R>,
    bias: Option<&[R]>,
) -> Result<ArrayD<R>> {
    let mut want_x = vec![cs.n, cs.c];
    want_x.extend(&cs.geo.input);
    let mut want_w = vec![cs.m, cs.c / cs.group];
    want_w.extend(&cs.geo.kernel);
    if x.shape() != want_x.as_slice() || w.shape() != want_w.as_slice() {
        return shape_err(format!(
            "conv operands X {:?} and W {:?} do not match the planned convolution (X {want_x:?}, W {want_w:?})",
            x.shape(),
            w.shape()
        ));
    }
    if let Some(b) = bias {
        if b.len() != cs.m {
            return shape_err(format!(
                "conv bias must hold {} values, got {}",
                cs.m,
                b.len()
            ));
        }
    }
    let (xs, ws) = (x.as_standard_layout(), w.as_standard_layout());
    let out = conv_core(
        xs.as_slice().expect("standard layout"),
        ws.as_slice().expect("standard layout"),
        bias,
        cs,
    );
    array_from(&cs.out_shape(), out)
}

/// Evaluates Conv.
pub(crate) fn eval_conv(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (x, w) = (input(inputs, 0)?, input(inputs, 1)?);
    let b = opt_input(inputs, 2);
    fn run<R: Real>(node: &Node, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
        let cs = ConvShape::new(node, x.shape(), w.shape())?;
        let (xw, ww) = (R::widen(x)?, R::widen(w)?);
        let bw = match b {
            Some(b) => {
                check_bias(b, cs.m, "Conv")?;
                Some(R::widen(b)?.iter().copied().collect::<Vec<R>>())
            }
            None => None,
        };
        let out = conv_array(&cs, xw.view(), ww.view(), bw.as_deref())?;
        Ok(R::narrow(out, x.dtype()))
    }
    by_precision(
        x.dtype(),
        "Conv",
        || run::<f32>(node, x, w, b),
        || run::<f64>(node, x, w, b),
    )
}

/// Output shape `[N, M, *out]` of a convolution of `x` by weights `w` (symbolic).
pub(crate) fn conv_dims(cx: &mut InferCx, node: &Node, x: &[Dim], w: &[Dim]) -> Result<Vec<Dim>> {
    if x.len() < 3 || w.len() != x.len() {
        return shape_err(format!(
            "Conv needs X [N, C, spatial...] and W of the same rank, got {} and {}",
            crate::dim::fmt_shape(x),
            crate::dim::fmt_shape(w)
        ));
    }
    let wk: Option<Vec<usize>> = w[2..]
        .iter()
        .map(|d| d.known().map(|v| v as usize))
        .collect();
    let mut out = vec![x[0].clone(), w[0].clone()];
    match Window::kernel_attr(node, wk) {
        Ok(k) => out.extend(Window::from_node(node, k)?.out_dims(cx, &x[2..])?),
        Err(_) => out.extend((2..x.len()).map(|_| cx.fresh_dim("spatial"))),
    }
    Ok(out)
}

/// Output types of Conv, ConvInteger and QLinearConv.
pub(crate) fn infer_conv(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
    w_input: usize,
    dtype: impl FnOnce(DType) -> DType,
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let w = in_ty(inputs, w_input)?.ty;
    let shape = conv_dims(cx, node, &x.shape, &w.shape)?;
    Ok(vec![TensorType::new(dtype(x.dtype), shape)])
}
