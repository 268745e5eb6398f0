//! Normalizations that standardise contiguous blocks of a row-major tensor: Layer and
//! RMS normalization (the trailing axes from `axis`), Group and Instance normalization
//! (per sample and channel group) and BatchNormalization (per channel, with running
//! statistics in training mode). Statistics use two passes (mean, then squared
//! deviations) in the compute type.

use super::common::{float_as, stash_dtype, to_dtype, with_float, Real};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, norm_axis, opt_in_ty, opt_input};
use crate::ops::InferInput;
use crate::tensor::{array_from, Tensor};
use ndarray::{ArrayD, ArrayViewD, Zip};

/// Mean and (population) variance of a block; the mean is taken as 0 for RMS.
fn stats<F: Real>(block: &[F], centred: bool) -> (F, F) {
    let n = F::lit(block.len() as f64);
    let mean = if centred {
        block.iter().copied().sum::<F>() / n
    } else {
        F::zero()
    };
    let var = block.iter().map(|&v| (v - mean) * (v - mean)).sum::<F>() / n;
    (mean, var)
}

/// Multiplies (`mul`) or adds `p`, broadcast numpy-style to `y`'s shape, into `y`.
fn apply_param<F: Real>(y: &mut ArrayD<F>, p: &Tensor, what: &str, mul: bool) -> Result<()> {
    let p = float_as::<F>(p, what)?;
    let pb = p.broadcast(y.raw_dim()).ok_or_else(|| {
        IrError::Shape(format!(
            "{what} of shape {:?} does not broadcast to {:?}",
            p.shape(),
            y.shape()
        ))
    })?;
    Zip::from(y)
        .and(&pb)
        .for_each(|y, &p| *y = if mul { *y * p } else { *y + p });
    Ok(())
}

/// The row-major data of `x` as one slice (copied only if `x` is not standard layout).
fn with_slice<F: Real, R>(x: ArrayViewD<F>, f: impl FnOnce(&[F]) -> R) -> R {
    let std = x.as_standard_layout();
    f(std.as_slice().expect("standard layout is contiguous"))
}

/// LayerNormalization (`rms` false: outputs Y, Mean, InvStdDev) or RMSNormalization
/// (`rms` true: output Y, in the scale's dtype).
pub fn eval_layer_norm(node: &Node, inputs: &[Option<&Tensor>], rms: bool) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let scale = input(inputs, 1)?;
    let bias = if rms { None } else { opt_input(inputs, 2) };
    let axis = norm_axis(node.attrs.int_or("axis", -1)?, x.rank())?;
    let eps = node.attrs.float_or("epsilon", 1e-5)? as f64;
    let stash = stash_dtype(node)?;
    let y_dtype = if rms { scale.dtype() } else { x.dtype() };
    let dtypes = [y_dtype, stash, stash];
    let params = (scale, bias);
    with_float!(x, node.op.name(), a => layer_norm(a.view(), axis, eps, rms, params, dtypes))
}

/// LayerNormalization's Y, Mean and InvStdDev (the mean is 0 for RMS), in `dtypes`.
fn layer_norm<F: Real>(
    a: ArrayViewD<F>,
    axis: usize,
    eps: f64,
    rms: bool,
    (scale, bias): (&Tensor, Option<&Tensor>),
    dtypes: [DType; 3],
) -> Result<Vec<Tensor>> {
    let shape = a.shape().to_vec();
    let cols: usize = shape[axis..].iter().product();
    let rows: usize = shape[..axis].iter().product();
    let mut y = Vec::with_capacity(a.len());
    let mut means = Vec::with_capacity(rows);
    let mut invs = Vec::with_capacity(rows);
    if cols == 0 {
        means.resize(rows, F::nan());
        invs.resize(rows, F::nan());
    } else {
        with_slice(a.view(), |data| {
            for row in data.chunks_exact(cols) {
                let (mean, var) = stats(row, !rms);
                let inv = (var + F::lit(eps)).sqrt().recip();
                y.extend(row.iter().map(|&v| (v - mean) * inv));
                means.push(mean);
                invs.push(inv);
            }
        });
    }
    let mut y = array_from(&shape, y)?;
    apply_param(&mut y, scale, "Scale", true)?;
    if let Some(b) = bias {
        apply_param(&mut y, b, "B", false)?;
    }
    let stat_shape = stat_shape(&shape, axis);
    Ok(vec![
        to_dtype(y, dtypes[0]),
        to_dtype(array_from(&stat_shape, means)?, dtypes[1]),
        to_dtype(array_from(&stat_shape, invs)?, dtypes[2]),
    ])
}

/// `shape[..axis]` followed by ones: the shape of LayerNormalization's statistics.
fn stat_shape<D: Clone + From<usize>>(shape: &[D], axis: usize) -> Vec<D> {
    let mut s = shape[..axis].to_vec();
    s.extend((axis..shape.len()).map(|_| D::from(1usize)));
    s
}

/// Output types of LayerNormalization / RMSNormalization.
pub fn infer_layer_norm(
    node: &Node,
    inputs: &[Option<InferInput>],
    rms: bool,
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?;
    let scale = in_ty(inputs, 1)?;
    let axis = norm_axis(node.attrs.int_or("axis", -1)?, x.ty.shape.len())?;
    if rms {
        return Ok(vec![TensorType::new(scale.ty.dtype, x.ty.shape.clone())]);
    }
    let stash = stash_dtype(node)?;
    let s: Vec<Dim> = stat_shape(&x.ty.shape, axis);
    Ok(vec![
        x.ty.clone(),
        TensorType::new(stash, s.clone()),
        TensorType::new(stash, s),
    ])
}

/// `(N, C, spatial size)` of an `[N, C, ...]` input.
fn ncs(shape: &[usize], op: &str) -> Result<(usize, usize, usize)> {
    match shape {
        [n, c, rest @ ..] => Ok((*n, *c, rest.iter().product())),
        _ => Err(IrError::Shape(format!(
            "{op} needs an input of rank at least 2 ([N, C, ...]), found {shape:?}"
        ))),
    }
}

/// A per-channel parameter as a vector of `c` values.
fn per_channel<F: Real>(t: &Tensor, c: usize, what: &str) -> Result<Vec<F>> {
    let v: Vec<F> = float_as::<F>(t, what)?.iter().copied().collect();
    if v.len() != c {
        return Err(IrError::Shape(format!(
            "{what} must hold one value per channel ({c}), found shape {:?}",
            t.shape()
        )));
    }
    Ok(v)
}

/// Standardises each group of `c / groups` channels of each sample, then applies the
/// per-channel `scale` and `bias`.
fn group_norm<F: Real>(
    x: ArrayViewD<F>,
    groups: usize,
    scale: &[F],
    bias: &[F],
    eps: f64,
) -> Result<ArrayD<F>> {
    let shape = x.shape().to_vec();
    let (_, c, s) = ncs(&shape, "group normalization")?;
    if groups == 0 || c % groups != 0 {
        return Err(IrError::Shape(format!(
            "{c} channels cannot be split into {groups} groups"
        )));
    }
    let per_group = c / groups;
    let len = per_group * s;
    let mut out = Vec::with_capacity(x.len());
    if len > 0 {
        with_slice(x, |data| {
            for (gi, block) in data.chunks_exact(len).enumerate() {
                let (mean, var) = stats(block, true);
                let inv = (var + F::lit(eps)).sqrt().recip();
                let first = (gi % groups) * per_group;
                for (j, &v) in block.iter().enumerate() {
                    let ch = first + j / s;
                    out.push((v - mean) * inv * scale[ch] + bias[ch]);
                }
            }
        });
    }
    array_from(&shape, out)
}

/// GroupNormalization (`instance` false; scale and bias per channel, or per group as
/// before opset 21) or InstanceNormalization (one group per channel).
pub fn eval_group_norm(node: &Node, inputs: &[Option<&Tensor>], instance: bool) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let (_, c, _) = ncs(x.shape(), node.op.name())?;
    let groups = if instance {
        c
    } else {
        let g = node.attrs.req_int("num_groups")?;
        usize::try_from(g).map_err(|_| IrError::Attr {
            name: "num_groups".into(),
            msg: format!("must be positive, found {g}"),
        })?
    };
    let eps = node.attrs.float_or("epsilon", 1e-5)? as f64;
    let (scale, bias) = (input(inputs, 1)?, input(inputs, 2)?);
    with_float!(x, node.op.name(), a => {
        let expand = |t: &Tensor, what: &str| -> Result<Vec<_>> {
            if !instance && t.len() == groups && groups != c && groups > 0 && c % groups == 0 {
                let g = per_channel(t, groups, what)?;
                Ok((0..c).map(|ch| g[ch / (c / groups).max(1)]).collect())
            } else {
                per_channel(t, c, what)
            }
        };
        let (sc, bi) = (expand(scale, "scale")?, expand(bias, "bias")?);
        let y = group_norm(a.view(), groups, &sc, &bi, eps)?;
        Ok(to_dtype(y, x.dtype()))
    })
}

/// BatchNormalization: with stored statistics, or (`training_mode` = 1) with the
/// batch's own, returning the updated running mean and variance as well.
pub fn eval_batch_norm(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let eps = node.attrs.float_or("epsilon", 1e-5)? as f64;
    let momentum = node.attrs.float_or("momentum", 0.9)? as f64;
    let training = node.attrs.int_or("training_mode", 0)? != 0;
    let params: Vec<&Tensor> = (1..5).map(|i| input(inputs, i)).collect::<Result<_>>()?;
    with_float!(x, "BatchNormalization", a => {
        batch_norm(a.view(), &params, [eps, momentum], training, x.dtype())
    })
}

/// BatchNormalization on `[N, C, ...]` data with `params` = scale, B, input_mean,
/// input_var and `[epsilon, momentum]`.
fn batch_norm<F: Real>(
    a: ArrayViewD<F>,
    params: &[&Tensor],
    [eps, momentum]: [f64; 2],
    training: bool,
    dtype: DType,
) -> Result<Vec<Tensor>> {
    let (_, c, s) = ncs(a.shape(), "BatchNormalization")?;
    let [scale, bias, mean_in, var_in] = params else {
        return Err(IrError::Invalid("BatchNormalization takes 5 inputs".into()));
    };
    let stat_dtype = mean_in.dtype();
    let scale = per_channel::<F>(scale, c, "scale")?;
    let bias = per_channel::<F>(bias, c, "B")?;
    let mut mean = per_channel::<F>(mean_in, c, "input_mean")?;
    let mut var = per_channel::<F>(var_in, c, "input_var")?;
    let std = a.as_standard_layout();
    let data = std.as_slice().expect("standard layout is contiguous");
    let mut running = Vec::new();
    if training {
        if s > 0 && !data.is_empty() {
            let (batch_mean, batch_var) = channel_stats(data, c, s);
            let m = F::lit(momentum);
            let update = |old: &[F], new: &[F]| -> Vec<F> {
                old.iter()
                    .zip(new)
                    .map(|(&o, &n)| o * m + n * (F::one() - m))
                    .collect()
            };
            running.push(update(&mean, &batch_mean));
            running.push(update(&var, &batch_var));
            (mean, var) = (batch_mean, batch_var);
        } else {
            running.push(mean.clone());
            running.push(var.clone());
        }
    }
    let mut y = Vec::with_capacity(data.len());
    if s > 0 {
        for (r, block) in data.chunks_exact(s).enumerate() {
            let ch = r % c;
            let k = scale[ch] / (var[ch] + F::lit(eps)).sqrt();
            y.extend(block.iter().map(|&v| (v - mean[ch]) * k + bias[ch]));
        }
    }
    let mut outs = vec![to_dtype(array_from(a.shape(), y)?, dtype)];
    for r in running {
        outs.push(to_dtype(array_from(&[c], r)?, stat_dtype));
    }
    Ok(outs)
}

/// Per-channel mean and population variance over the batch and spatial positions.
fn channel_stats<F: Real>(data: &[F], c: usize, s: usize) -> (Vec<F>, Vec<F>) {
    let count = F::lit((data.len() / c) as f64);
    let mut mean = vec![F::zero(); c];
    for (r, block) in data.chunks_exact(s).enumerate() {
        mean[r % c] = mean[r % c] + block.iter().copied().sum::<F>();
    }
    mean.iter_mut().for_each(|m| *m = *m / count);
    let mut var = vec![F::zero(); c];
    for (r, block) in data.chunks_exact(s).enumerate() {
        let m = mean[r % c];
        var[r % c] = var[r % c] + block.iter().map(|&v| (v - m) * (v - m)).sum::<F>();
    }
    var.iter_mut().for_each(|v| *v = *v / count);
    (mean, var)
}

/// Output types of BatchNormalization (running statistics only in training mode).
pub fn infer_batch_norm(node: &Node, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?;
    let mut out = vec![x.ty.clone()];
    if node.attrs.int_or("training_mode", 0)? != 0 {
        let m = opt_in_ty(inputs, 3).map_or(x.ty.dtype, |m| m.ty.dtype);
        let c = x.ty.shape.get(1).cloned().unwrap_or(Dim::Known(1));
        out.push(TensorType::new(m, vec![c.clone()]));
        out.push(TensorType::new(m, vec![c]));
    }
    Ok(out)
}
