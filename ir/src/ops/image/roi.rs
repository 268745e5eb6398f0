//! Region and patch ops over NCHW images: `RoiAlign` (bilinear sampling of regions of
//! interest, average or max pooled, as `op_roi_align.py` and ONNX Runtime do) and
//! `Col2Im` (summing sliding-window columns back into an image, `op_col2im.py`).

use super::{from_f64_array, require_float, to_f64_array};
use crate::dim::Dim;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::Tensor;
use ndarray::{ArrayD, IxDyn};

/// One bilinear sample: four plane offsets and their weights.
#[derive(Clone, Copy, Default)]
struct Sample {
    pos: [usize; 4],
    w: [f64; 4],
}

/// The bilinear sample at `(y, x)` in an `h` x `w` plane; outside the plane by more
/// than one pixel it reads nothing (all weights zero).
fn bilinear(y: f64, x: f64, h: usize, w: usize) -> Sample {
    let (hf, wf) = (h as f64, w as f64);
    if y < -1.0 || y > hf || x < -1.0 || x > wf {
        return Sample::default();
    }
    let (mut y, mut x) = (y.max(0.0), x.max(0.0));
    let (mut y_low, mut x_low) = (y as usize, x as usize);
    let y_high = if y_low >= h - 1 {
        y_low = h - 1;
        y = y_low as f64;
        y_low
    } else {
        y_low + 1
    };
    let x_high = if x_low >= w - 1 {
        x_low = w - 1;
        x = x_low as f64;
        x_low
    } else {
        x_low + 1
    };
    let (ly, lx) = (y - y_low as f64, x - x_low as f64);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    Sample {
        pos: [
            y_low * w + x_low,
            y_low * w + x_high,
            y_high * w + x_low,
            y_high * w + x_high,
        ],
        w: [hy * hx, hy * lx, ly * hx, ly * lx],
    }
}

/// Runs RoiAlign.
pub(super) fn roi_align(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let xd = to_f64_array(x, "RoiAlign X")?;
    let rois = to_f64_array(input(inputs, 1)?, "RoiAlign rois")?;
    let bidx = input(inputs, 2)?.to_i64_vec();
    let a = &node.attrs;
    let half_pixel = match a.str_or("coordinate_transformation_mode", "half_pixel")? {
        "half_pixel" => true,
        "output_half_pixel" => false,
        m => return unsupported(format!("RoiAlign coordinate_transformation_mode `{m}`")),
    };
    let max_mode = match a.str_or("mode", "avg")? {
        "avg" => false,
        "max" => true,
        m => return unsupported(format!("RoiAlign mode `{m}`")),
    };
    let ph_n = a.int_or("output_height", 1)?.max(0) as usize;
    let pw_n = a.int_or("output_width", 1)?.max(0) as usize;
    let ratio = a.int_or("sampling_ratio", 0)?;
    let scale = a.float_or("spatial_scale", 1.0)? as f64;
    let xs = xd.shape();
    let rs = rois.shape();
    if xs.len() != 4 || rs.len() != 2 || rs[1] != 4 || rs[0] != bidx.len() {
        return Err(IrError::Shape(format!(
            "RoiAlign: X {xs:?} must be NCHW, rois [R, 4] and batch_indices [R]; found rois \
             {rs:?}, batch_indices of {}",
            bidx.len()
        )));
    }
    let (n, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    let xv: Vec<f64> = xd.iter().copied().collect();
    let rv: Vec<f64> = rois.iter().copied().collect();
    let n_rois = bidx.len();
    let mut out = vec![0.0; n_rois * c * ph_n * pw_n];
    let offset = if half_pixel { 0.5 } else { 0.0 };
    for r in 0..n_rois {
        let b = bidx[r];
        if b < 0 || b as usize >= n {
            return Err(IrError::Shape(format!(
                "RoiAlign batch index {b} out of range for batch {n}"
            )));
        }
        if h == 0 || w == 0 {
            continue;
        }
        let roi = &rv[r * 4..r * 4 + 4];
        let start_w = roi[0] * scale - offset;
        let start_h = roi[1] * scale - offset;
        let mut roi_w = roi[2] * scale - offset - start_w;
        let mut roi_h = roi[3] * scale - offset - start_h;
        if !half_pixel {
            roi_w = roi_w.max(1.0);
            roi_h = roi_h.max(1.0);
        }
        let bin_h = roi_h / ph_n as f64;
        let bin_w = roi_w / pw_n as f64;
        let grid_h = if ratio > 0 {
            ratio as usize
        } else {
            (roi_h / ph_n as f64).ceil().max(0.0) as usize
        };
        let grid_w = if ratio > 0 {
            ratio as usize
        } else {
            (roi_w / pw_n as f64).ceil().max(0.0) as usize
        };
        let count = (grid_h * grid_w).max(1) as f64;
        let mut samples = Vec::with_capacity(ph_n * pw_n * grid_h * grid_w);
        for ph in 0..ph_n {
            for pw in 0..pw_n {
                for iy in 0..grid_h {
                    let yy =
                        start_h + ph as f64 * bin_h + (iy as f64 + 0.5) * bin_h / grid_h as f64;
                    for ix in 0..grid_w {
                        let xx =
                            start_w + pw as f64 * bin_w + (ix as f64 + 0.5) * bin_w / grid_w as f64;
                        samples.push(bilinear(yy, xx, h, w));
                    }
                }
            }
        }
        let per_bin = grid_h * grid_w;
        for ch in 0..c {
            let plane = &xv[(b as usize * c + ch) * h * w..(b as usize * c + ch + 1) * h * w];
            for bin in 0..ph_n * pw_n {
                let bin_samples = &samples[bin * per_bin..(bin + 1) * per_bin];
                let v = if max_mode {
                    bin_samples
                        .iter()
                        .map(|s| {
                            (0..4)
                                .map(|k| s.w[k] * plane[s.pos[k]])
                                .fold(f64::NEG_INFINITY, f64::max)
                        })
                        .fold(None, |acc: Option<f64>, v| {
                            Some(acc.map_or(v, |a| a.max(v)))
                        })
                        .unwrap_or(0.0)
                } else {
                    let sum: f64 = bin_samples
                        .iter()
                        .map(|s| (0..4).map(|k| s.w[k] * plane[s.pos[k]]).sum::<f64>())
                        .sum();
                    sum / count
                };
                out[(r * c + ch) * ph_n * pw_n + bin] = v;
            }
        }
    }
    let out = ArrayD::from_shape_vec(IxDyn(&[n_rois, c, ph_n, pw_n]), out).expect("output size");
    Ok(vec![from_f64_array(out, x.dtype())?])
}

/// RoiAlign's output type: `[num_rois, C, output_height, output_width]`.
pub(super) fn infer_roi_align(
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let rois = in_ty(inputs, 1)?.ty;
    require_float(x.dtype, "RoiAlign X")?;
    if x.shape.len() != 4 || rois.shape.len() != 2 {
        return Err(IrError::Shape(format!(
            "RoiAlign: X {x} must be NCHW and rois {rois} rank 2"
        )));
    }
    let oh = node.attrs.int_or("output_height", 1)?.max(0) as u64;
    let ow = node.attrs.int_or("output_width", 1)?.max(0) as u64;
    Ok(vec![TensorType::new(
        x.dtype,
        vec![
            rois.shape[0].clone(),
            x.shape[1].clone(),
            Dim::Known(oh),
            Dim::Known(ow),
        ],
    )])
}

/// Col2Im's geometry attributes, defaults applied, for `k` spatial dims.
fn col2im_attrs(node: &Node, k: usize) -> Result<(Vec<i64>, Vec<i64>, Vec<i64>)> {
    let get = |name: &str, default: i64, len: usize| -> Result<Vec<i64>> {
        match node.attrs.ints(name)? {
            None => Ok(vec![default; len]),
            Some(v) if v.len() == len => Ok(v.to_vec()),
            Some(v) => Err(IrError::Attr {
                name: name.into(),
                msg: format!("expected {len} values, found {}", v.len()),
            }),
        }
    };
    Ok((
        get("dilations", 1, k)?,
        get("pads", 0, 2 * k)?,
        get("strides", 1, k)?,
    ))
}

/// Runs Col2Im.
pub(super) fn col2im(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let xd = to_f64_array(x, "Col2Im input")?;
    let image = input(inputs, 1)?.to_i64_vec();
    let block = input(inputs, 2)?.to_i64_vec();
    let k = image.len();
    if block.len() != k || image.iter().chain(&block).any(|&v| v <= 0) {
        return Err(IrError::Shape(format!(
            "Col2Im: image_shape {image:?} and block_shape {block:?} must be positive and of \
             equal length"
        )));
    }
    let (dil, pads, strides) = col2im_attrs(node, k)?;
    if dil.iter().chain(&strides).any(|&v| v <= 0) {
        return Err(IrError::Shape(
            "Col2Im: dilations and strides must be positive".into(),
        ));
    }
    let xs = xd.shape();
    let bl: i64 = block.iter().product();
    if xs.len() != 3 || xs[1] as i64 % bl != 0 {
        return Err(IrError::Shape(format!(
            "Col2Im: input {xs:?} must be [N, C*{bl}, L]"
        )));
    }
    let (n, c) = (xs[0], xs[1] / bl as usize);
    let dim_col: Vec<i64> = (0..k)
        .map(|i| {
            (image[i] + pads[i] + pads[i + k] - (dil[i] * (block[i] - 1) + 1)) / strides[i] + 1
        })
        .collect();
    let l: i64 = dim_col.iter().product();
    if dim_col.iter().any(|&d| d < 1) || l != xs[2] as i64 {
        return Err(IrError::Shape(format!(
            "Col2Im: input has {} blocks, the geometry gives {dim_col:?}",
            xs[2]
        )));
    }
    let img: Vec<usize> = image.iter().map(|&v| v as usize).collect();
    let plane: usize = img.iter().product();
    let xv: Vec<f64> = xd.iter().copied().collect();
    let mut out = vec![0.0; n * c * plane];
    let l = l as usize;
    let mut off = vec![0i64; k];
    let mut col = vec![0i64; k];
    for kk in 0..bl as usize {
        unravel(kk, &block, &mut off);
        for ci in 0..l {
            unravel(ci, &dim_col, &mut col);
            let mut flat = 0usize;
            let mut inside = true;
            for i in 0..k {
                let p = col[i] * strides[i] - pads[i] + off[i] * dil[i];
                if p < 0 || p >= image[i] {
                    inside = false;
                    break;
                }
                flat = flat * img[i] + p as usize;
            }
            if !inside {
                continue;
            }
            for b in 0..n {
                for ch in 0..c {
                    let src = ((b * c + ch) * bl as usize + kk) * l + ci;
                    out[(b * c + ch) * plane + flat] += xv[src];
                }
            }
        }
    }
    let mut shape = vec![n, c];
    shape.extend(&img);
    let out = ArrayD::from_shape_vec(IxDyn(&shape), out).expect("output size");
    Ok(vec![from_f64_array(out, x.dtype())?])
}

/// Row-major multi-index of `i` in `dims`.
fn unravel(mut i: usize, dims: &[i64], out: &mut [i64]) {
    for d in (0..dims.len()).rev() {
        out[d] = (i % dims[d] as usize) as i64;
        i /= dims[d] as usize;
    }
}

/// Col2Im's output type: `[N, C, image_shape...]`, from constant shapes where known.
pub(super) fn infer_col2im(
    cx: &mut InferCx,
    _node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    require_float(x.dtype, "Col2Im input")?;
    let image = in_ty(inputs, 1)?;
    let block = in_ty(inputs, 2)?;
    if x.shape.len() != 3 {
        return Err(IrError::Shape(format!("Col2Im: input {x} must be rank 3")));
    }
    let c = match block.value {
        Some(b) => {
            let n = b
                .to_i64_vec()
                .iter()
                .try_fold(1i64, |acc, &v| acc.checked_mul(v));
            let n = n.ok_or_else(|| {
                IrError::Shape(format!("Col2Im: block shape {b:?} overflows 64 bits"))
            })?;
            x.shape[1].div(&Dim::from(n.max(1) as u64))
        }
        None => cx.fresh_dim("col2im_c"),
    };
    let mut shape = vec![x.shape[0].clone(), c];
    match image.value {
        Some(v) => shape.extend(v.to_i64_vec().iter().map(|&d| Dim::from(d.max(0) as u64))),
        None => match image.ty.shape.first().and_then(Dim::known) {
            Some(k) => {
                let k = crate::budget::rank_from(k, "Col2Im image_shape")?;
                shape.extend((0..k).map(|_| cx.fresh_dim("col2im")))
            }
            None => return unsupported("Col2Im with an image_shape of unknown length"),
        },
    }
    Ok(vec![TensorType::new(x.dtype, shape)])
}
