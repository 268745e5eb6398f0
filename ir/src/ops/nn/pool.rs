//! Pooling: AveragePool, MaxPool (with its Indices output), LpPool, the three global
//! pools and MaxUnpool. Window positions are computed once per spatial dim and shared
//! by every (image, channel) plane; planes run in parallel.

use super::gemm::{by_precision, Real};
use super::spatial::{Geometry, Window};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{shape_err, unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_in_ty, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::{array_from, Elem, Tensor};
use rayon::prelude::*;

/// The pooling flavours sharing the window walk.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    /// Mean of the window (`count_include_pad` picks the divisor).
    Avg {
        /// Divide by the taps inside the padded input rather than the valid ones.
        count_pad: bool,
    },
    /// `(sum |x|^p)^(1/p)`.
    Lp(f64),
}

/// For one spatial dim: per output position, the valid input coordinates and the
/// number of taps inside the explicitly padded input.
fn dim_windows(g: &Geometry, i: usize) -> Vec<(Vec<usize>, usize)> {
    (0..g.out[i])
        .map(|o| {
            let start = (o * g.strides[i]) as i64 - g.pad_begin[i] as i64;
            let end = (g.input[i] + g.pad_end[i]) as i64;
            let mut valid = Vec::with_capacity(g.kernel[i]);
            let mut padded = 0;
            for t in 0..g.kernel[i] {
                let c = start + (t * g.dilations[i]) as i64;
                if c < end {
                    padded += 1;
                }
                if c >= 0 && c < g.input[i] as i64 {
                    valid.push(c as usize);
                }
            }
            (valid, padded)
        })
        .collect()
}

/// Calls `f(out_index, input_indices, padded_count)` for every output position of one
/// plane; `buf` is reused for the indices.
fn for_each_window(
    g: &Geometry,
    wins: &[Vec<(Vec<usize>, usize)>],
    buf: &mut Vec<usize>,
    mut f: impl FnMut(usize, &[usize], usize),
) {
    let d = g.input.len();
    if d <= 3 {
        // Pad to three dims with unit dims in front: a fixed loop nest.
        let unit = [(vec![0usize], 1usize)];
        let lead = 3 - d;
        let w: Vec<&[(Vec<usize>, usize)]> = (0..3)
            .map(|i| {
                if i < lead {
                    &unit[..]
                } else {
                    &wins[i - lead][..]
                }
            })
            .collect();
        let size = |i: usize| if i < lead { 1 } else { g.input[i - lead] };
        let (in1, in2) = (size(1), size(2));
        let mut flat = 0;
        for (v0, p0) in w[0] {
            for (v1, p1) in w[1] {
                for (v2, p2) in w[2] {
                    buf.clear();
                    for &c0 in v0 {
                        for &c1 in v1 {
                            let base = (c0 * in1 + c1) * in2;
                            buf.extend(v2.iter().map(|&c2| base + c2));
                        }
                    }
                    f(flat, buf, p0 * p1 * p2);
                    flat += 1;
                }
            }
        }
        return;
    }
    let total = g.out_size();
    let mut o = vec![0usize; d];
    for flat in 0..total {
        buf.clear();
        buf.push(0);
        let mut padded = 1;
        for i in 0..d {
            let (valid, p) = &wins[i][o[i]];
            padded *= p;
            let n = buf.len();
            for k in 0..n {
                let base = buf[k] * g.input[i];
                for &c in valid {
                    buf.push(base + c);
                }
            }
            buf.drain(..n);
        }
        f(flat, buf, padded);
        for i in (0..d).rev() {
            o[i] += 1;
            if o[i] < g.out[i] {
                break;
            }
            o[i] = 0;
        }
    }
}

/// Resolves a pool's window for input shape `x` (`[N, C, *S]`).
fn pool_geometry(node: &Node, x: &[usize]) -> Result<Geometry> {
    if x.len() < 3 {
        return shape_err(format!("pooling needs [N, C, spatial...], got {x:?}"));
    }
    let kernel = Window::kernel_attr(node, None)?;
    Window::from_node(node, kernel)?.resolve(&x[2..])
}

fn out_shape(x: &[usize], g: &Geometry) -> Vec<usize> {
    let mut s = x[..2].to_vec();
    s.extend(&g.out);
    s
}

/// Evaluates AveragePool or LpPool.
pub(crate) fn eval_avg_lp(node: &Node, inputs: &[Option<&Tensor>], kind: Kind) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    fn run<R: Real>(node: &Node, x: &Tensor, kind: Kind) -> Result<Tensor> {
        let g = pool_geometry(node, x.shape())?;
        let xw = R::widen(x)?;
        let xs = xw.as_standard_layout();
        let xd = xs.as_slice().expect("standard layout");
        let (pin, pout) = (g.in_size(), g.out_size());
        let wins: Vec<_> = (0..g.input.len()).map(|i| dim_windows(&g, i)).collect();
        let mut out = vec![R::ZERO; x.shape()[0] * x.shape()[1] * pout];
        if pout > 0 {
            out.par_chunks_mut(pout).enumerate().for_each(|(plane, o)| {
                let src = &xd[plane * pin..][..pin];
                let mut buf = Vec::new();
                for_each_window(&g, &wins, &mut buf, |i, idx, padded| {
                    o[i] = match kind {
                        Kind::Avg { count_pad } => {
                            let sum: R = idx.iter().map(|&j| src[j]).sum();
                            let n = if count_pad { padded } else { idx.len() };
                            sum / R::of(n as f64)
                        }
                        Kind::Lp(p) => {
                            let p = R::of(p);
                            let sum: R = idx.iter().map(|&j| src[j].abs().powf(p)).sum();
                            sum.powf(R::ONE / p)
                        }
                    }
                });
            });
        }
        Ok(R::narrow(
            array_from(&out_shape(x.shape(), &g), out)?,
            x.dtype(),
        ))
    }
    by_precision(
        x.dtype(),
        node.op.name(),
        || run::<f32>(node, x, kind),
        || run::<f64>(node, x, kind),
    )
}

/// MaxPool over one element type; also returns the flat argmax indices.
fn max_pool<T: Elem>(node: &Node, x: &ndarray::ArrayD<T>) -> Result<(Tensor, Tensor)> {
    let g = pool_geometry(node, x.shape())?;
    let col_major = node.attrs.int_or("storage_order", 0)? != 0;
    let xs = x.as_standard_layout();
    let xd = xs.as_slice().expect("standard layout");
    let (pin, pout) = (g.in_size(), g.out_size());
    let wins: Vec<_> = (0..g.input.len()).map(|i| dim_windows(&g, i)).collect();
    let planes = x.shape()[0] * x.shape()[1];
    let mut vals = vec![T::default(); planes * pout];
    let mut idxs = vec![-1i64; planes * pout];
    if pout > 0 {
        vals.par_chunks_mut(pout)
            .zip(idxs.par_chunks_mut(pout))
            .enumerate()
            .for_each(|(plane, (ov, oi))| {
                let src = &xd[plane * pin..][..pin];
                let mut buf = Vec::new();
                for_each_window(&g, &wins, &mut buf, |i, idx, _| {
                    let mut best: Option<(T, usize)> = None;
                    for &j in idx {
                        if best.is_none_or(|(b, _)| src[j] > b) {
                            best = Some((src[j], j));
                        }
                    }
                    if let Some((v, j)) = best {
                        ov[i] = v;
                        let j = if col_major {
                            transpose_index(j, &g.input)
                        } else {
                            j
                        };
                        oi[i] = (plane * pin + j) as i64;
                    }
                });
            });
    }
    let shape = out_shape(x.shape(), &g);
    Ok((
        T::wrap(array_from(&shape, vals)?),
        Tensor::I64(array_from(&shape, idxs)?),
    ))
}

/// The column-major flat index of the element at row-major index `j` in `dims`.
fn transpose_index(mut j: usize, dims: &[usize]) -> usize {
    let mut coords = vec![0; dims.len()];
    for i in (0..dims.len()).rev() {
        coords[i] = j % dims[i];
        j /= dims[i];
    }
    let (mut idx, mut stride) = (0, 1);
    for (c, d) in coords.iter().zip(dims) {
        idx += c * stride;
        stride *= d;
    }
    idx
}

/// Evaluates MaxPool (values and, when asked for, indices).
pub(crate) fn eval_max_pool(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let (y, i) = match x {
        Tensor::F32(a) => max_pool(node, a)?,
        Tensor::F64(a) => max_pool(node, a)?,
        Tensor::F16(a) => max_pool(node, a)?,
        Tensor::BF16(a) => max_pool(node, a)?,
        Tensor::I8(a) => max_pool(node, a)?,
        Tensor::U8(a) => max_pool(node, a)?,
        _ => return unsupported(format!("MaxPool on {}", x.dtype())),
    };
    Ok(if node.outputs.len() > 1 {
        vec![y, i]
    } else {
        vec![y]
    })
}

/// Evaluates GlobalAveragePool, GlobalMaxPool or GlobalLpPool (`kind` None = max).
pub(crate) fn eval_global(
    node: &Node,
    inputs: &[Option<&Tensor>],
    kind: Option<Kind>,
) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    fn run<R: Real>(x: &Tensor, kind: Option<Kind>) -> Result<Tensor> {
        let s = x.shape();
        if s.len() < 2 {
            return shape_err(format!("global pooling needs [N, C, ...], got {s:?}"));
        }
        let xw = R::widen(x)?;
        let xs = xw.as_standard_layout();
        let xd = xs.as_slice().expect("standard layout");
        let plane: usize = s[2..].iter().product();
        let out: Vec<R> = (0..s[0] * s[1])
            .into_par_iter()
            .map(|p| {
                let v = &xd[p * plane..][..plane];
                match kind {
                    Some(Kind::Avg { .. }) => v.iter().copied().sum::<R>() / R::of(plane as f64),
                    Some(Kind::Lp(pw)) => {
                        let pw = R::of(pw);
                        v.iter()
                            .map(|e| e.abs().powf(pw))
                            .sum::<R>()
                            .powf(R::ONE / pw)
                    }
                    None => v
                        .iter()
                        .copied()
                        .fold(R::neg_infinity(), |a, b| if b > a { b } else { a }),
                }
            })
            .collect();
        let mut shape = s[..2].to_vec();
        shape.extend(std::iter::repeat_n(1, s.len() - 2));
        Ok(R::narrow(array_from(&shape, out)?, x.dtype()))
    }
    by_precision(
        x.dtype(),
        node.op.name(),
        || run::<f32>(x, kind),
        || run::<f64>(x, kind),
    )
}

/// MaxUnpool's default output spatial dims: `(in - 1) * stride - pads + kernel`.
fn unpool_dims(node: &Node, spatial: &[usize]) -> Result<Vec<usize>> {
    let kernel = Window::kernel_attr(node, None)?;
    let win = Window::from_node(node, kernel)?;
    let d = spatial.len();
    if win.kernel.len() != d {
        return shape_err(format!(
            "MaxUnpool kernel {:?} vs {d} spatial dims",
            win.kernel
        ));
    }
    (0..d)
        .map(|i| {
            // i128: products of i64 attributes and sizes cannot wrap there.
            let v = (spatial[i] as i128 - 1) * win.strides[i] as i128 + win.kernel[i] as i128
                - (win.pads[i] as i128 + win.pads[d + i] as i128);
            if v <= 0 {
                shape_err(format!("MaxUnpool output dim {i} would be {v}"))
            } else {
                usize::try_from(v).map_err(|_| {
                    IrError::Shape(format!("MaxUnpool output dim {i} ({v}) overflows 64 bits"))
                })
            }
        })
        .collect()
}

/// Evaluates MaxUnpool: scatters X to the flat positions in I of the default-sized
/// output, which is then placed at the start of `output_shape` when that is given.
pub(crate) fn eval_max_unpool(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (x, ix) = (input(inputs, 0)?, input(inputs, 1)?);
    if x.rank() < 3 || ix.shape() != x.shape() {
        return shape_err(format!(
            "MaxUnpool X {:?} and I {:?} must match, rank >= 3",
            x.shape(),
            ix.shape()
        ));
    }
    let mut inferred = x.shape()[..2].to_vec();
    inferred.extend(unpool_dims(node, &x.shape()[2..])?);
    let total: usize = inferred.iter().product();
    let target: Vec<usize> = match opt_input(inputs, 2) {
        Some(s) => s.to_i64_vec().iter().map(|&v| v.max(0) as usize).collect(),
        None => inferred.clone(),
    };
    if target.len() != inferred.len() {
        return shape_err(format!(
            "MaxUnpool output_shape {target:?} has the wrong rank"
        ));
    }
    let idx = ix.to_i64_vec();
    let vals = x.to_f64_vec();
    let mut flat = vec![0.0f64; total];
    for (&i, &v) in idx.iter().zip(&vals) {
        let slot = usize::try_from(i)
            .ok()
            .and_then(|i| flat.get_mut(i))
            .ok_or_else(|| {
                IrError::Shape(format!(
                    "MaxUnpool index {i} outside an output of {total} elements"
                ))
            })?;
        *slot = v;
    }
    let src = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&inferred), flat)
        .map_err(|e| IrError::Shape(e.to_string()))?;
    let mut out = ndarray::ArrayD::<f64>::zeros(ndarray::IxDyn(&target));
    let common: Vec<usize> = inferred
        .iter()
        .zip(&target)
        .map(|(a, b)| *a.min(b))
        .collect();
    let mut dst = out.view_mut();
    let mut srcv = src.view();
    for (ax, &n) in common.iter().enumerate() {
        dst.slice_axis_inplace(ndarray::Axis(ax), ndarray::Slice::from(0..n));
        srcv.slice_axis_inplace(ndarray::Axis(ax), ndarray::Slice::from(0..n));
    }
    dst.assign(&srcv);
    Ok(Tensor::F64(out).cast(x.dtype()))
}

/// Output types of the windowed pools (MaxPool also gets its i64 Indices type).
pub(crate) fn infer_pool(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    if x.shape.len() < 3 {
        return shape_err("pooling needs [N, C, spatial...]");
    }
    let win = Window::from_node(node, Window::kernel_attr(node, None)?)?;
    let mut shape = x.shape[..2].to_vec();
    shape.extend(win.out_dims(cx, &x.shape[2..])?);
    let mut out = vec![TensorType::new(x.dtype, shape.clone())];
    if node.outputs.len() > 1 {
        out.push(TensorType::new(DType::I64, shape));
    }
    Ok(out)
}

/// Output types of the global pools: `[N, C, 1, ...]`.
pub(crate) fn infer_global(inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    if x.shape.len() < 2 {
        return shape_err("global pooling needs [N, C, ...]");
    }
    let mut shape = x.shape[..2].to_vec();
    shape.extend(std::iter::repeat_n(Dim::Known(1), x.shape.len() - 2));
    Ok(vec![TensorType::new(x.dtype, shape)])
}

/// Output types of MaxUnpool.
pub(crate) fn infer_max_unpool(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let rank = x.shape.len();
    if rank < 3 {
        return shape_err("MaxUnpool needs [N, C, spatial...]");
    }
    let shape = match opt_in_ty(inputs, 2) {
        Some(s) => match s.value {
            Some(v) => v
                .to_i64_vec()
                .iter()
                .map(|&d| Dim::Known(d.max(0) as u64))
                .collect(),
            None => (0..rank).map(|_| cx.fresh_dim("unpool")).collect(),
        },
        None => {
            let known: Option<Vec<usize>> = x.shape[2..]
                .iter()
                .map(|d| d.known().map(|v| v as usize))
                .collect();
            let mut s = x.shape[..2].to_vec();
            match known {
                Some(k) => s.extend(unpool_dims(node, &k)?.into_iter().map(Dim::from)),
                None => s.extend((2..rank).map(|_| cx.fresh_dim("unpool"))),
            }
            s
        }
    };
    Ok(vec![TensorType::new(x.dtype, shape)])
}
