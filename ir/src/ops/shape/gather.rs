//! Ops that select elements by index or mask: Gather, GatherElements, GatherND,
//! Compress and NonZero. Indices may be negative (counted from the end); an index out
//! of range is an error, never a panic.

use super::common::{flat, fresh_dims, norm_index, reshape_arr, strides};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::map_tensor;
use crate::ops::util::{in_ty, input, norm_axis};
use crate::ops::{InferCx, InferInput};
use crate::tensor::{array_from, Elem, Tensor};
use ndarray::{ArrayD, Axis};

/// Reads an index tensor (int32 or int64) as i64s.
fn indices_of(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    match t.dtype() {
        DType::I32
        | DType::I64
        | DType::I16
        | DType::I8
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => Ok(t.to_i64_vec()),
        d => Err(IrError::DType {
            context: what.to_string(),
            expected: "int32 or int64 indices".into(),
            found: d,
        }),
    }
}

/// `Gather(data, indices)` along `axis`: `out = data[:axis] + indices + data[axis+1:]`.
pub fn gather(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let ind = input(inputs, 1)?;
    let axis = norm_axis(node.attrs.int_or("axis", 0)?, x.rank())?;
    let d = x.shape()[axis];
    let idx = indices_of(ind, "Gather indices")?
        .into_iter()
        .map(|i| norm_index(i, d, "Gather"))
        .collect::<Result<Vec<_>>>()?;
    let mut shape = x.shape()[..axis].to_vec();
    shape.extend_from_slice(ind.shape());
    shape.extend_from_slice(&x.shape()[axis + 1..]);
    Ok(map_tensor!(x, a => reshape_arr(a.select(Axis(axis), &idx), &shape)?))
}

/// Gather's output type.
pub fn infer_gather(node: &Node, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let ind = in_ty(inputs, 1)?.ty;
    let axis = norm_axis(node.attrs.int_or("axis", 0)?, x.shape.len())?;
    let mut shape = x.shape[..axis].to_vec();
    shape.extend(ind.shape.iter().cloned());
    shape.extend(x.shape[axis + 1..].iter().cloned());
    Ok(TensorType::new(x.dtype, shape))
}

fn gather_elements_arr<T: Elem>(
    a: &ArrayD<T>,
    ind_shape: &[usize],
    idx: &[i64],
    axis: usize,
) -> Result<ArrayD<T>> {
    let data = flat(a);
    let (ds, is) = (strides(a.shape()), strides(ind_shape));
    let d = a.shape()[axis];
    let mut out = Vec::with_capacity(idx.len());
    for (p, &i) in idx.iter().enumerate() {
        let mut off = 0;
        for ax in 0..ind_shape.len() {
            let c = (p / is[ax]) % ind_shape[ax];
            let c = if ax == axis {
                norm_index(i, d, "GatherElements")?
            } else {
                c
            };
            off += c * ds[ax];
        }
        out.push(data[off]);
    }
    array_from(ind_shape, out)
}

/// Checks that `ind` fits inside `data` on every axis but `axis` (GatherElements and
/// ScatterElements).
pub fn check_elementwise_shapes(
    data: &[usize],
    ind: &[usize],
    axis: usize,
    op: &str,
) -> Result<()> {
    let ok = data.len() == ind.len()
        && data
            .iter()
            .zip(ind)
            .enumerate()
            .all(|(i, (d, n))| i == axis || n <= d);
    if ok {
        Ok(())
    } else {
        Err(IrError::Shape(format!(
            "{op}: indices {ind:?} do not fit data {data:?} off axis {axis}"
        )))
    }
}

/// `GatherElements(data, indices)`: `out[p] = data[p with p[axis] = indices[p]]`.
pub fn gather_elements(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let ind = input(inputs, 1)?;
    let axis = norm_axis(node.attrs.int_or("axis", 0)?, x.rank())?;
    check_elementwise_shapes(x.shape(), ind.shape(), axis, "GatherElements")?;
    let idx = indices_of(ind, "GatherElements indices")?;
    Ok(map_tensor!(x, a => gather_elements_arr(a, ind.shape(), &idx, axis)?))
}

/// GatherND's geometry: batch dims `b`, index depth `k`, output shape.
fn gather_nd_shape<D: Clone>(data: &[D], ind: &[D], k: usize, b: usize) -> Result<Vec<D>> {
    if ind.is_empty() || b >= ind.len() || k == 0 || b + k > data.len() {
        return Err(IrError::Shape(format!(
            "GatherND: indices of rank {} with depth {k} and {b} batch dims on data of rank {}",
            ind.len(),
            data.len()
        )));
    }
    let mut shape = ind[..ind.len() - 1].to_vec();
    shape.extend_from_slice(&data[b + k..]);
    Ok(shape)
}

fn gather_nd_arr<T: Elem>(
    a: &ArrayD<T>,
    ind_shape: &[usize],
    idx: &[i64],
    b: usize,
) -> Result<ArrayD<T>> {
    let ds = a.shape();
    let k = *ind_shape.last().expect("rank checked");
    let out_shape = gather_nd_shape(ds, ind_shape, k, b)?;
    if ds[..b] != ind_shape[..b] {
        return Err(IrError::Shape(format!(
            "GatherND: batch dims of data {ds:?} and indices {ind_shape:?} differ"
        )));
    }
    let data = flat(a);
    let st = strides(ds);
    let batches: usize = ds[..b].iter().product();
    let batch_stride: usize = ds[b..].iter().product();
    let chunk: usize = ds[b + k..].iter().product();
    let rows = idx.len() / k;
    let per_batch = rows.checked_div(batches).unwrap_or(0);
    let mut out = Vec::with_capacity(rows * chunk);
    for r in 0..rows {
        let mut off = (r / per_batch) * batch_stride;
        for t in 0..k {
            off += norm_index(idx[r * k + t], ds[b + t], "GatherND")? * st[b + t];
        }
        out.extend_from_slice(&data[off..off + chunk]);
    }
    array_from(&out_shape, out)
}

/// `GatherND(data, indices)` with `batch_dims`.
pub fn gather_nd(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let ind = input(inputs, 1)?;
    let b = usize::try_from(node.attrs.int_or("batch_dims", 0)?)
        .map_err(|_| IrError::Shape("GatherND: negative batch_dims".into()))?;
    if ind.rank() == 0 {
        return Err(IrError::Shape("GatherND: scalar indices".into()));
    }
    let idx = indices_of(ind, "GatherND indices")?;
    Ok(map_tensor!(x, a => gather_nd_arr(a, ind.shape(), &idx, b)?))
}

/// GatherND's output type (the index depth must be known).
pub fn infer_gather_nd(node: &Node, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let ind = in_ty(inputs, 1)?.ty;
    let b = node.attrs.int_or("batch_dims", 0)?.max(0) as usize;
    let Some(k) = ind.shape.last().and_then(Dim::known) else {
        return Err(IrError::Unsupported(format!(
            "GatherND with indices {ind} of unknown depth"
        )));
    };
    let shape = gather_nd_shape(&x.shape, &ind.shape, k as usize, b)?;
    Ok(TensorType::new(x.dtype, shape))
}

/// The truth of each element of a mask-like tensor.
fn truth(t: &Tensor) -> Vec<bool> {
    crate::with_tensor!(t, a => a.iter().map(|v| *v != Default::default()).collect())
}

/// `Compress(input, condition)` along `axis`, or over the flattened input.
pub fn compress(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let cond = truth(input(inputs, 1)?);
    let (x, axis) = match node.attrs.int("axis")? {
        Some(a) => (x.clone(), norm_axis(a, x.rank())?),
        None => (x.reshape(&[x.len()])?, 0),
    };
    let d = x.shape()[axis];
    let idx: Vec<usize> = cond
        .iter()
        .enumerate()
        .filter(|(_, c)| **c)
        .map(|(i, _)| i)
        .collect();
    if let Some(&i) = idx.iter().find(|&&i| i >= d) {
        return Err(IrError::Shape(format!(
            "Compress: condition selects index {i} of an axis of length {d}"
        )));
    }
    Ok(map_tensor!(&x, a => a.select(Axis(axis), &idx)))
}

/// Compress's output type when the condition is not constant.
pub fn infer_compress(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let shape = match node.attrs.int("axis")? {
        Some(a) => {
            let mut s = x.shape.clone();
            let a = norm_axis(a, s.len())?;
            s[a] = cx.fresh_dim("compress");
            s
        }
        None => fresh_dims(cx, 1, "compress"),
    };
    Ok(TensorType::new(x.dtype, shape))
}

/// `NonZero(X)`: the coordinates of non-zero elements, `[rank, count]`, row-major order.
pub fn non_zero(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let t = truth(x);
    let st = strides(x.shape());
    let hits: Vec<usize> = (0..t.len()).filter(|&i| t[i]).collect();
    let rank = x.rank();
    let mut out = vec![0i64; rank * hits.len()];
    for (j, &p) in hits.iter().enumerate() {
        for ax in 0..rank {
            out[ax * hits.len() + j] = ((p / st[ax]) % x.shape()[ax]) as i64;
        }
    }
    Ok(Tensor::I64(array_from(&[rank, hits.len()], out)?))
}
