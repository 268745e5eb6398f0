//! Unique, matching `numpy.unique(x, True, True, True, axis)` as the ONNX reference
//! does: a stable sort groups equal elements (or equal slices along `axis`, compared
//! lexicographically), so each group's first member is the first occurrence; with
//! `sorted=0` the groups are put back in order of first occurrence.

use super::common::fresh_dims;
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, norm_axis};
use crate::ops::{InferCx, InferInput};
use crate::tensor::{array_from, Elem, Tensor};
use crate::with_tensor;
use ndarray::{ArrayD, Axis};
use std::cmp::Ordering;

/// A total order on elements: NaN after everything, all NaNs equal (numpy's
/// `equal_nan=True`).
fn cmp_elem<T: Elem>(a: &T, b: &T) -> Ordering {
    a.partial_cmp(b).unwrap_or_else(|| {
        #[allow(clippy::eq_op)]
        let (an, bn) = (a != a, b != b);
        an.cmp(&bn)
    })
}

fn cmp_rows<T: Elem>(a: &[T], b: &[T]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| cmp_elem(x, y))
        .find(|o| *o != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
}

/// The groups of equal rows: for each group its first row index and size, and for
/// each row its group; groups in sorted order or in order of first occurrence.
fn group_rows<T: Elem>(rows: &[Vec<T>], sorted: bool) -> (Vec<usize>, Vec<i64>, Vec<i64>) {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&i, &j| cmp_rows(&rows[i], &rows[j]));
    let mut first = Vec::new();
    let mut counts = Vec::new();
    let mut inverse = vec![0i64; rows.len()];
    for (pos, &r) in order.iter().enumerate() {
        let new_group = pos == 0 || cmp_rows(&rows[order[pos - 1]], &rows[r]) != Ordering::Equal;
        if new_group {
            first.push(r);
            counts.push(0i64);
        }
        let g = first.len() - 1;
        counts[g] += 1;
        inverse[r] = g as i64;
    }
    if !sorted {
        let mut by_first: Vec<usize> = (0..first.len()).collect();
        by_first.sort_by_key(|&g| first[g]);
        let mut rank = vec![0i64; first.len()];
        for (new, &g) in by_first.iter().enumerate() {
            rank[g] = new as i64;
        }
        first = by_first.iter().map(|&g| first[g]).collect();
        counts = by_first.iter().map(|&g| counts[g]).collect();
        inverse.iter_mut().for_each(|g| *g = rank[*g as usize]);
    }
    (first, counts, inverse)
}

fn unique_arr<T: Elem>(a: &ArrayD<T>, axis: Option<usize>, sorted: bool) -> Result<Vec<Tensor>> {
    let (rows, ax, src) = match axis {
        None => {
            let v: Vec<T> = a.iter().copied().collect();
            let src = array_from(&[v.len()], v.clone())?;
            (v.into_iter().map(|x| vec![x]).collect::<Vec<_>>(), 0, src)
        }
        Some(ax) => {
            let rows = a
                .axis_iter(Axis(ax))
                .map(|r| r.iter().copied().collect())
                .collect();
            (rows, ax, a.clone())
        }
    };
    let (first, counts, inverse) = group_rows(&rows, sorted);
    let y = src.select(Axis(ax), &first);
    let u = first.len();
    let idx: Vec<i64> = first.iter().map(|&i| i as i64).collect();
    Ok(vec![
        T::wrap(y),
        Tensor::I64(array_from(&[u], idx)?),
        Tensor::I64(array_from(&[rows.len()], inverse)?),
        Tensor::I64(array_from(&[u], counts)?),
    ])
}

fn unique_axis(node: &Node, rank: usize) -> Result<Option<usize>> {
    node.attrs
        .int("axis")?
        .map(|a| norm_axis(a, rank))
        .transpose()
}

/// `Unique(X)`: outputs `Y`, `indices`, `inverse_indices`, `counts`.
pub fn unique(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let axis = unique_axis(node, x.rank())?;
    let sorted = node.attrs.int_or("sorted", 1)? != 0;
    with_tensor!(x, a => unique_arr(a, axis, sorted))
}

/// Unique's output types when the input is not constant: the number of unique
/// elements is a fresh symbol.
pub fn infer_unique(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let u = fresh_dims(cx, 1, "unique").remove(0);
    let (y, n) = match unique_axis(node, x.shape.len())? {
        None => (vec![u.clone()], Dim::product(&x.shape)),
        Some(a) => {
            let mut s = x.shape.clone();
            s[a] = u.clone();
            (s, x.shape[a].clone())
        }
    };
    let i64s = |d: Dim| TensorType::new(DType::I64, vec![d]);
    Ok(vec![
        TensorType::new(x.dtype, y),
        i64s(u.clone()),
        i64s(n),
        i64s(u),
    ])
}
