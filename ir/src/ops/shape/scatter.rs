//! Ops that write updates into a copy of their data: ScatterElements (and the
//! deprecated Scatter, the same op without reductions) and ScatterND. Updates are
//! applied in row-major order of the indices, so duplicates resolve as the reference
//! implementation does (last write wins, or all are combined by the reduction).

use super::common::{flat, norm_index, strides};
use super::gather::check_elementwise_shapes;
use crate::error::{IrError, Result};
use crate::graph::Node;
use crate::ops::util::{input, norm_axis};
use crate::tensor::{array_from, Elem, Tensor};
use crate::with_tensor;
use ndarray::ArrayD;

/// How an update combines with the value already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

impl Reduction {
    fn of(node: &Node) -> Result<Reduction> {
        Ok(match node.attrs.str_or("reduction", "none")? {
            "none" => Reduction::None,
            "add" => Reduction::Add,
            "mul" => Reduction::Mul,
            "max" => Reduction::Max,
            "min" => Reduction::Min,
            r => return Err(IrError::Unsupported(format!("scatter reduction `{r}`"))),
        })
    }

    /// Combines `old` with `new`; integers wrap, floats compute in f64 and round back.
    fn apply<T: Elem>(self, old: T, new: T) -> T {
        let int = T::DTYPE.is_int() || T::DTYPE == crate::dtype::DType::Bool;
        match self {
            Reduction::None => new,
            Reduction::Add if int => T::from_i64(old.to_i64().wrapping_add(new.to_i64())),
            Reduction::Mul if int => T::from_i64(old.to_i64().wrapping_mul(new.to_i64())),
            Reduction::Add => T::from_f64(old.to_f64() + new.to_f64()),
            Reduction::Mul => T::from_f64(old.to_f64() * new.to_f64()),
            Reduction::Max => {
                if new > old {
                    new
                } else {
                    old
                }
            }
            Reduction::Min => {
                if new < old {
                    new
                } else {
                    old
                }
            }
        }
    }
}

fn scatter_elements_arr<T: Elem>(
    a: &ArrayD<T>,
    ind_shape: &[usize],
    idx: &[i64],
    upd: &Tensor,
    axis: usize,
    red: Reduction,
) -> Result<ArrayD<T>> {
    let upd = flat(upd.as_array::<T>()?);
    let mut data = flat(a);
    let (ds, is) = (strides(a.shape()), strides(ind_shape));
    let d = a.shape()[axis];
    for (p, (&i, &u)) in idx.iter().zip(&upd).enumerate() {
        let mut off = 0;
        for ax in 0..ind_shape.len() {
            let c = if ax == axis {
                norm_index(i, d, "ScatterElements")?
            } else {
                (p / is[ax]) % ind_shape[ax]
            };
            off += c * ds[ax];
        }
        data[off] = red.apply(data[off], u);
    }
    array_from(a.shape(), data)
}

/// `ScatterElements(data, indices, updates)` (also the deprecated `Scatter`).
pub fn scatter_elements(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (x, ind, upd) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
    let axis = norm_axis(node.attrs.int_or("axis", 0)?, x.rank())?;
    let red = Reduction::of(node)?;
    check_elementwise_shapes(x.shape(), ind.shape(), axis, "ScatterElements")?;
    if ind.shape() != upd.shape() {
        return Err(IrError::Shape(format!(
            "ScatterElements: indices {:?} and updates {:?} differ",
            ind.shape(),
            upd.shape()
        )));
    }
    let idx = ind.to_i64_vec();
    with_tensor!(x, a => Ok(Elem::wrap(scatter_elements_arr(a, ind.shape(), &idx, upd, axis, red)?)))
}

fn scatter_nd_arr<T: Elem>(
    a: &ArrayD<T>,
    ind_shape: &[usize],
    idx: &[i64],
    upd: &Tensor,
    red: Reduction,
) -> Result<ArrayD<T>> {
    let ds = a.shape();
    let (k, rows_shape) = match ind_shape.split_last() {
        Some((&k, rows)) if k <= ds.len() => (k, rows),
        _ => {
            return Err(IrError::Shape(format!(
                "ScatterND: indices {ind_shape:?} on data {ds:?}"
            )))
        }
    };
    let mut want = rows_shape.to_vec();
    want.extend_from_slice(&ds[k..]);
    if upd.shape() != want.as_slice() {
        return Err(IrError::Shape(format!(
            "ScatterND: updates {:?}, expected {want:?}",
            upd.shape()
        )));
    }
    let upd = flat(upd.as_array::<T>()?);
    let mut data = flat(a);
    let st = strides(ds);
    let chunk: usize = ds[k..].iter().product();
    let rows: usize = rows_shape.iter().product();
    for r in 0..rows {
        let mut off = 0;
        for t in 0..k {
            off += norm_index(idx[r * k + t], ds[t], "ScatterND")? * st[t];
        }
        for j in 0..chunk {
            data[off + j] = red.apply(data[off + j], upd[r * chunk + j]);
        }
    }
    array_from(ds, data)
}

/// `ScatterND(data, indices, updates)`.
pub fn scatter_nd(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (x, ind, upd) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
    let red = Reduction::of(node)?;
    let idx = ind.to_i64_vec();
    with_tensor!(x, a => Ok(Elem::wrap(scatter_nd_arr(a, ind.shape(), &idx, upd, red)?)))
}
