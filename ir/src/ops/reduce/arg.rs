//! Index-selecting ops along one axis: ArgMax, ArgMin, Hardmax and TopK. NaN counts as
//! larger than every number (numpy's `argmax` and `lexsort` order); ties go to the
//! lower index unless ArgMax/ArgMin's `select_last_index` asks for the higher one.

use super::common::{is_nan, scalar_int};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, norm_axis};
use crate::ops::{InferCx, InferInput};
use crate::tensor::{Elem, Tensor};
use crate::{map_tensor, with_tensor};
use ndarray::{ArrayD, ArrayView1, Axis, Zip};
use std::cmp::Ordering;

/// Total order on values with NaN above everything (and equal to itself).
fn nan_last<T: PartialOrd>(a: &T, b: &T) -> Ordering {
    a.partial_cmp(b)
        .unwrap_or_else(|| is_nan(a).cmp(&is_nan(b)))
}

/// Index of the largest (`max`) or smallest element of a lane; `last` picks the last of
/// equal candidates. NaN is the largest value, and numpy's argmin also stops at the first
/// NaN, so a NaN wins in both directions.
fn arg_of<T: PartialOrd + Copy>(lane: ArrayView1<T>, max: bool, last: bool) -> Option<usize> {
    let mut best: Option<(usize, T)> = None;
    for (i, &x) in lane.iter().enumerate() {
        let take = match best {
            None => true,
            Some((_, b)) if is_nan(b) => last && is_nan(x),
            Some(_) if is_nan(x) => true,
            Some((_, b)) => {
                let ord = x.partial_cmp(&b).unwrap_or(Ordering::Equal);
                let want = if max {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
                ord == want || (last && ord == Ordering::Equal)
            }
        };
        if take {
            best = Some((i, x));
        }
    }
    best.map(|(i, _)| i)
}

fn non_bool(x: &Tensor, op: &str) -> Result<()> {
    if x.dtype() == DType::Bool {
        return unsupported(format!("{op} does not take bool data"));
    }
    Ok(())
}

/// ArgMax (`max`) or ArgMin.
pub fn eval_arg(node: &Node, inputs: &[Option<&Tensor>], max: bool) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    non_bool(x, node.op.name())?;
    let axis = norm_axis(node.attrs.int_or("axis", 0)?, x.rank())?;
    let keep = node.attrs.int_or("keepdims", 1)? != 0;
    let last = node.attrs.int_or("select_last_index", 0)? != 0;
    if x.shape()[axis] == 0 {
        return Err(IrError::Shape(format!(
            "{} over an empty axis {axis} of shape {:?}",
            node.op.name(),
            x.shape()
        )));
    }
    let idx: ArrayD<i64> = with_tensor!(x, a => Zip::from(a.lanes(Axis(axis)))
        .map_collect(|l| arg_of(l, max, last).unwrap_or(0) as i64));
    Ok(Tensor::I64(if keep {
        idx.insert_axis(Axis(axis))
    } else {
        idx
    }))
}

/// Output type of ArgMax/ArgMin.
pub fn infer_arg(node: &Node, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?;
    let axis = norm_axis(node.attrs.int_or("axis", 0)?, x.ty.shape.len())?;
    let keep = node.attrs.int_or("keepdims", 1)? != 0;
    let shape = super::common::reduced_dims(&x.ty.shape, &[axis], keep);
    Ok(TensorType::new(DType::I64, shape))
}

/// Hardmax: 1 at the first maximum of each lane along `axis` (default -1), 0 elsewhere.
pub fn eval_hardmax(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    if !x.dtype().is_float() {
        return unsupported(format!("Hardmax takes float data, found {}", x.dtype()));
    }
    let axis = norm_axis(node.attrs.int_or("axis", -1)?, x.rank())?;
    Ok(map_tensor!(x, a => hardmax(a, axis)))
}

fn hardmax<T: Elem>(a: &ArrayD<T>, axis: usize) -> ArrayD<T> {
    let (zero, one) = (T::from_f64(0.0), T::from_f64(1.0));
    let mut out = ArrayD::from_elem(a.raw_dim(), zero);
    Zip::from(out.lanes_mut(Axis(axis)))
        .and(a.lanes(Axis(axis)))
        .for_each(|mut o, l| {
            if let Some(i) = arg_of(l, true, false) {
                o[i] = one;
            }
        });
    out
}

/// TopK: the `k` largest (or smallest) elements along `axis` and their indices, sorted
/// (an unsorted request gets sorted output, which the spec allows).
pub fn eval_topk(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    non_bool(x, "TopK")?;
    let k = scalar_int(input(inputs, 1)?, "TopK's k")?;
    let axis = norm_axis(node.attrs.int_or("axis", -1)?, x.rank())?;
    let largest = node.attrs.int_or("largest", 1)? != 0;
    let n = x.shape()[axis];
    let k = usize::try_from(k).ok().filter(|&k| k <= n).ok_or_else(|| {
        IrError::Shape(format!(
            "TopK's k = {k} is outside [0, {n}] (axis {axis} of {:?})",
            x.shape()
        ))
    })?;
    let (vals, idx) = with_tensor!(x, a => {
        let (v, i) = topk(a, axis, k, largest);
        (Elem::wrap(v), i)
    });
    Ok(vec![vals, Tensor::I64(idx)])
}

fn topk<T: Elem>(a: &ArrayD<T>, axis: usize, k: usize, largest: bool) -> (ArrayD<T>, ArrayD<i64>) {
    let mut shape = a.shape().to_vec();
    shape[axis] = k;
    let mut vals = ArrayD::from_elem(shape.clone(), T::default());
    let mut idx = ArrayD::from_elem(shape, 0i64);
    let mut order: Vec<usize> = Vec::new();
    Zip::from(vals.lanes_mut(Axis(axis)))
        .and(idx.lanes_mut(Axis(axis)))
        .and(a.lanes(Axis(axis)))
        .for_each(|mut v, mut ix, l| {
            order.clear();
            order.extend(0..l.len());
            // A stable sort keeps equal values in index order, for either direction.
            if largest {
                order.sort_by(|&i, &j| nan_last(&l[j], &l[i]));
            } else {
                order.sort_by(|&i, &j| nan_last(&l[i], &l[j]));
            }
            for (slot, &i) in order.iter().take(k).enumerate() {
                v[slot] = l[i];
                ix[slot] = i as i64;
            }
        });
    (vals, idx)
}

/// Output types of TopK: the axis dim becomes `k` when `k` is a constant.
pub fn infer_topk(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?;
    let axis = norm_axis(node.attrs.int_or("axis", -1)?, x.ty.shape.len())?;
    let k =
        match in_ty(inputs, 1)?.value {
            Some(t) => {
                let k = scalar_int(t, "TopK's k")?;
                Dim::Known(u64::try_from(k).map_err(|_| {
                    IrError::Shape(format!("TopK's k must not be negative, found {k}"))
                })?)
            }
            None => cx.fresh_dim("topk"),
        };
    let mut shape = x.ty.shape.clone();
    shape[axis] = k;
    Ok(vec![
        TensorType::new(x.ty.dtype, shape.clone()),
        TensorType::new(DType::I64, shape),
    ])
}
