//! DeformConv (2-D): a convolution whose taps sample the input at learned fractional
//! offsets (bilinear, zero outside the image), optionally scaled by a mask. Per image,
//! the sampled values fill an im2col-style buffer, then one GEMM per group.

use super::conv::{add_bias, check_bias};
use super::gemm::{by_precision, gemm, Mat, Real};
use super::spatial::Window;
use crate::error::{shape_err, unsupported, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_input};
use crate::ops::InferInput;
use crate::tensor::{array_from, Elem, Tensor};
use rayon::prelude::*;

/// Bilinear sample of the `h x w` plane at `(y, x)`, zero for corners outside it.
fn bilinear<R: Real>(p: &[R], h: usize, w: usize, y: R, x: R) -> R {
    let (hf, wf) = (R::of(h as f64), R::of(w as f64));
    if y <= -R::ONE || y >= hf || x <= -R::ONE || x >= wf {
        return R::ZERO;
    }
    let (y0, x0) = (y.floor(), x.floor());
    let (ly, lx) = (y - y0, x - x0);
    let (yi, xi) = (Elem::to_i64(y0), Elem::to_i64(x0));
    let at = |r: i64, c: i64| -> R {
        if r >= 0 && c >= 0 && (r as usize) < h && (c as usize) < w {
            p[r as usize * w + c as usize]
        } else {
            R::ZERO
        }
    };
    let one = R::ONE;
    at(yi, xi) * (one - ly) * (one - lx)
        + at(yi, xi + 1) * (one - ly) * lx
        + at(yi + 1, xi) * ly * (one - lx)
        + at(yi + 1, xi + 1) * ly * lx
}

/// Evaluates DeformConv.
pub(crate) fn eval_deform_conv(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    by_precision(
        x.dtype(),
        "DeformConv",
        || run::<f32>(node, inputs),
        || run::<f64>(node, inputs),
    )
}

fn run<R: Real>(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (xt, wt, ot) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
    let (bt, mt) = (opt_input(inputs, 3), opt_input(inputs, 4));
    let (xs, ws, os) = (xt.shape(), wt.shape(), ot.shape());
    if xs.len() != 4 || ws.len() != 4 || os.len() != 4 {
        return unsupported(format!("DeformConv on X {xs:?}, W {ws:?} (2-D only)"));
    }
    let group = node.attrs.int_or("group", 1)?.max(1) as usize;
    let og = node.attrs.int_or("offset_group", 1)?.max(1) as usize;
    let (n, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    let m = ws[0];
    if c != ws[1] * group || m % group != 0 || c % og != 0 {
        return shape_err(format!(
            "DeformConv channels: X {xs:?}, W {ws:?}, group {group}, offset_group {og}"
        ));
    }
    let kernel = Window::kernel_attr(node, Some(ws[2..].to_vec()))?;
    let g = Window::from_node(node, kernel)?.resolve(&xs[2..])?;
    let (oh, ow, kh, kw) = (g.out[0], g.out[1], g.kernel[0], g.kernel[1]);
    let taps = kh * kw;
    if os != [n, og * taps * 2, oh, ow] {
        return shape_err(format!(
            "DeformConv offset {os:?}, expected {:?}",
            [n, og * taps * 2, oh, ow]
        ));
    }
    if let Some(mk) = mt {
        if mk.shape() != [n, og * taps, oh, ow] {
            return shape_err(format!(
                "DeformConv mask {:?}, expected {:?}",
                mk.shape(),
                [n, og * taps, oh, ow]
            ));
        }
    }
    let xw = R::widen(xt)?;
    let ww = R::widen(wt)?;
    let ow_ = R::widen(ot)?;
    let mw = mt.map(R::widen).transpose()?;
    let (xv, wv, ov) = (
        xw.as_standard_layout(),
        ww.as_standard_layout(),
        ow_.as_standard_layout(),
    );
    let mv = mw.as_ref().map(|m| m.as_standard_layout());
    let (xd, wd, od) = (
        xv.as_slice().expect("standard layout"),
        wv.as_slice().expect("standard layout"),
        ov.as_slice().expect("standard layout"),
    );
    let md = mv.as_ref().map(|m| m.as_slice().expect("standard layout"));
    let p = oh * ow;
    let (cg, mg) = (c / group, m / group);
    let kdim = cg * taps;
    let mut out = vec![R::ZERO; n * m * p];
    let mut col = vec![R::ZERO; c * taps * p];
    for ni in 0..n {
        col.par_chunks_mut(taps * p)
            .enumerate()
            .for_each(|(ci, rows)| {
                let plane = &xd[(ni * c + ci) * h * w..][..h * w];
                let ogi = ci / (c / og);
                for t in 0..taps {
                    let (ki, kj) = (t / kw, t % kw);
                    let off_y = &od[((ni * og + ogi) * taps * 2 + 2 * t) * p..][..p];
                    let off_x = &od[((ni * og + ogi) * taps * 2 + 2 * t + 1) * p..][..p];
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let q = oy * ow + ox;
                            let y = (oy * g.strides[0] + ki * g.dilations[0]) as f64
                                - g.pad_begin[0] as f64;
                            let x = (ox * g.strides[1] + kj * g.dilations[1]) as f64
                                - g.pad_begin[1] as f64;
                            let mut v =
                                bilinear(plane, h, w, R::of(y) + off_y[q], R::of(x) + off_x[q]);
                            if let Some(md) = md {
                                v = v * md[((ni * og + ogi) * taps + t) * p + q];
                            }
                            rows[t * p + q] = v;
                        }
                    }
                }
            });
        for gi in 0..group {
            let wg = Mat::rows(&wd[gi * mg * kdim..][..mg * kdim], kdim);
            let cgm = Mat::rows(&col[gi * kdim * p..][..kdim * p], p);
            let o = &mut out[(ni * m + gi * mg) * p..][..mg * p];
            gemm(mg, kdim, p, R::ONE, wg, cgm, R::ZERO, o);
        }
    }
    if let Some(b) = bt {
        check_bias(b, m, "DeformConv")?;
        let bv: Vec<R> = R::widen(b)?.iter().copied().collect();
        add_bias(&mut out, &bv, p);
    }
    Ok(R::narrow(array_from(&[n, m, oh, ow], out)?, xt.dtype()))
}

/// Output type of DeformConv: `[N, M, *offset spatial dims]`.
pub(crate) fn infer_deform_conv(inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let w = in_ty(inputs, 1)?.ty;
    let o = in_ty(inputs, 2)?.ty;
    if x.shape.len() < 3 || w.shape.is_empty() || o.shape.len() != x.shape.len() {
        return shape_err("DeformConv needs X, W and offset of the same rank");
    }
    let mut shape = vec![x.shape[0].clone(), w.shape[0].clone()];
    shape.extend(o.shape[2..].iter().cloned());
    Ok(vec![TensorType::new(x.dtype, shape)])
}
