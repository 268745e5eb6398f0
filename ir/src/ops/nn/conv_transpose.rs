//! ConvTranspose: the adjoint of Conv. Each (image, group) pair is one task: one GEMM
//! `W_g^T * X_g` gives every tap's contribution at every input position, and col2im
//! scatters them into the output (the same tap walk as Conv's im2col, run backwards).
//! Output size comes from `output_shape`, `auto_pad` or explicit `pads`, with
//! `output_padding` extending the end.

use super::conv::{add_bias, check_bias};
use super::gemm::{by_precision, gemm, Mat, MatElem, Real};
use super::spatial::{for_each_line, AutoPad, Geometry, Window};
use crate::dim::Dim;
use crate::error::{shape_err, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::{array_from, Tensor};
use rayon::prelude::*;

/// Sizes of one transposed convolution.
#[derive(Clone, Debug)]
struct Plan {
    n: usize,
    c: usize,
    m: usize,
    group: usize,
    /// `input` is the output image, `out` the input grid (the Conv this is the adjoint of).
    geo: Geometry,
}

/// Reads an optional integer list of `d` entries (the last `d` when longer, as some
/// exporters write full shapes).
fn tail_ints(node: &Node, name: &str, d: usize) -> Result<Option<Vec<i64>>> {
    match node.attrs.ints(name)? {
        None => Ok(None),
        Some(v) if v.len() >= d => Ok(Some(v[v.len() - d..].to_vec())),
        Some(v) => Err(IrError::Attr {
            name: name.into(),
            msg: format!("expected {d} values, found {v:?}"),
        }),
    }
}

/// Output size and begin pad of each spatial dim, from the window attributes, the input
/// sizes and `output_padding`/`output_shape`.
fn out_and_pads(node: &Node, win: &Window, input: &[usize]) -> Result<(Vec<usize>, Vec<usize>)> {
    let d = input.len();
    if win.kernel.len() != d {
        return shape_err(format!(
            "ConvTranspose kernel {:?} does not fit {d} spatial dims",
            win.kernel
        ));
    }
    let adj = tail_ints(node, "output_padding", d)?.unwrap_or(vec![0; d]);
    let out_shape = tail_ints(node, "output_shape", d)?;
    let explicit_pads = node.attrs.has("pads");
    let mut out = Vec::with_capacity(d);
    let mut begin = Vec::with_capacity(d);
    // i128 holds every product of i64 attributes and sizes below, so nothing wraps;
    // results that do not fit a size are errors.
    for i in 0..d {
        let s = win.strides[i] as i128;
        let full = s * (input[i] as i128 - 1)
            + adj[i] as i128
            + ((win.kernel[i] as i128 - 1) * win.dilations[i] as i128 + 1);
        let same = matches!(win.auto_pad, AutoPad::SameUpper | AutoPad::SameLower);
        let (o, b) = match (&out_shape, same) {
            (Some(os), _) if !explicit_pads || same => {
                let total = (full - os[i] as i128).max(0);
                let b = if win.auto_pad == AutoPad::SameUpper {
                    total / 2
                } else {
                    total - total / 2
                };
                (os[i] as i128, b)
            }
            (Some(os), _) => (os[i] as i128, win.pads[i] as i128),
            (None, true) => {
                let o = input[i] as i128 * s;
                let total = (full - o).max(0);
                let b = if win.auto_pad == AutoPad::SameUpper {
                    total / 2
                } else {
                    total - total / 2
                };
                (o, b)
            }
            (None, false) => {
                let (pb, pe) = if win.auto_pad == AutoPad::Valid {
                    (0, 0)
                } else {
                    (win.pads[i] as i128, win.pads[d + i] as i128)
                };
                (full - pb - pe, pb)
            }
        };
        if o <= 0 {
            return shape_err(format!("ConvTranspose output dim {i} would be {o}"));
        }
        let size = |v: i128, what: &str| {
            usize::try_from(v).map_err(|_| {
                IrError::Shape(format!(
                    "ConvTranspose {what} of dim {i} ({v}) overflows 64 bits"
                ))
            })
        };
        out.push(size(o, "output size")?);
        begin.push(size(b, "begin pad")?);
    }
    Ok((out, begin))
}

impl Plan {
    fn new(node: &Node, x: &[usize], w: &[usize]) -> Result<Plan> {
        if x.len() < 3 || w.len() != x.len() {
            return shape_err(format!(
                "ConvTranspose needs X [N, C, spatial...] and W of the same rank, got {x:?} and {w:?}"
            ));
        }
        let group = node.attrs.int_or("group", 1)?.max(1) as usize;
        let c = x[1];
        if w[0] != c || !c.is_multiple_of(group) {
            return shape_err(format!(
                "ConvTranspose channels do not match: X {x:?}, W {w:?}, group {group}"
            ));
        }
        let kernel = Window::kernel_attr(node, Some(w[2..].to_vec()))?;
        if kernel != w[2..] {
            return shape_err(format!(
                "kernel_shape {kernel:?} differs from W's {:?}",
                &w[2..]
            ));
        }
        let win = Window::from_node(node, kernel.clone())?;
        let (out, pad_begin) = out_and_pads(node, &win, &x[2..])?;
        let d = kernel.len();
        Ok(Plan {
            n: x[0],
            c,
            m: w[1] * group,
            group,
            geo: Geometry {
                input: out,
                out: x[2..].to_vec(),
                kernel,
                strides: win.strides,
                dilations: win.dilations,
                pad_begin,
                pad_end: vec![0; d],
            },
        })
    }

    fn out_shape(&self) -> Vec<usize> {
        let mut s = vec![self.n, self.m];
        s.extend(&self.geo.input);
        s
    }
}

/// The transposed convolution of contiguous `x` with `w` (`[C, M/g, *K]`).
fn conv_transpose_core<R: MatElem>(x: &[R], w: &[R], bias: Option<&[R]>, p: &Plan) -> Vec<R> {
    let g = &p.geo;
    let (pin, pout, taps) = (g.out_size(), g.in_size(), g.taps());
    let (cg, mg) = (p.c / p.group, p.m / p.group);
    let tap_idx: Vec<Vec<usize>> = (0..taps).map(|t| g.tap(t)).collect();
    let mut out = vec![R::ZERO; p.n * p.m * pout];
    if out.is_empty() {
        return out;
    }
    let rows = mg * taps;
    out.par_chunks_mut(mg * pout)
        .enumerate()
        .for_each(|(task, o)| {
            let (ni, gi) = (task / p.group, task % p.group);
            let xg = Mat::rows(&x[(ni * p.c + gi * cg) * pin..][..cg * pin], pin);
            let wg = Mat::rows(&w[gi * cg * rows..][..cg * rows], rows).t();
            let mut cols = vec![R::ZERO; rows * pin];
            gemm(rows, cg, pin, R::ONE, wg, xg, R::ZERO, &mut cols);
            for (mo, plane) in o.chunks_mut(pout).enumerate() {
                for (t, tap) in tap_idx.iter().enumerate() {
                    let src = &cols[(mo * taps + t) * pin..][..pin];
                    for_each_line(g, tap, |l| {
                        for (j, &v) in src[l.out..l.out + l.len].iter().enumerate() {
                            let d = &mut plane[l.inp + j * l.step];
                            *d = R::wadd(*d, v);
                        }
                    });
                }
            }
        });
    if let Some(b) = bias {
        add_bias(&mut out, b, pout);
    }
    out
}

/// Evaluates ConvTranspose.
pub(crate) fn eval_conv_transpose(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (x, w) = (input(inputs, 0)?, input(inputs, 1)?);
    let b = opt_input(inputs, 2);
    fn run<R: Real>(node: &Node, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
        let p = Plan::new(node, x.shape(), w.shape())?;
        let (xw, ww) = (R::widen(x)?, R::widen(w)?);
        let (xs, ws) = (xw.as_standard_layout(), ww.as_standard_layout());
        let bw = match b {
            Some(b) => {
                check_bias(b, p.m, "ConvTranspose")?;
                Some(R::widen(b)?.iter().copied().collect::<Vec<R>>())
            }
            None => None,
        };
        let out = conv_transpose_core(
            xs.as_slice().expect("standard layout"),
            ws.as_slice().expect("standard layout"),
            bw.as_deref(),
            &p,
        );
        Ok(R::narrow(array_from(&p.out_shape(), out)?, x.dtype()))
    }
    by_precision(
        x.dtype(),
        "ConvTranspose",
        || run::<f32>(node, x, w, b),
        || run::<f64>(node, x, w, b),
    )
}

/// Output types of ConvTranspose: `[N, W[1] * group, *out]`.
pub(crate) fn infer_conv_transpose(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let w = in_ty(inputs, 1)?.ty;
    if x.shape.len() < 3 || w.shape.len() != x.shape.len() {
        return shape_err("ConvTranspose needs X [N, C, spatial...] and W of the same rank");
    }
    let group = node.attrs.int_or("group", 1)?.max(1) as u64;
    let m = w.shape[1].mul(&Dim::Known(group));
    let mut shape = vec![x.shape[0].clone(), m];
    let known = |s: &[Dim]| -> Option<Vec<usize>> {
        s.iter().map(|d| d.known().map(|v| v as usize)).collect()
    };
    let d = x.shape.len() - 2;
    match (known(&x.shape[2..]), known(&w.shape[2..])) {
        (Some(xs), wk) => {
            let kernel = Window::kernel_attr(node, wk)?;
            let win = Window::from_node(node, kernel)?;
            shape.extend(out_and_pads(node, &win, &xs)?.0.into_iter().map(Dim::from));
        }
        (None, _) => match tail_ints(node, "output_shape", d)? {
            Some(os) => shape.extend(os.iter().map(|&v| Dim::Known(v.max(0) as u64))),
            None => shape.extend((0..d).map(|_| cx.fresh_dim("spatial"))),
        },
    }
    Ok(vec![TensorType::new(x.dtype, shape)])
}
