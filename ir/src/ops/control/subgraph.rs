//! What the control-flow ops share: reading scalar conditions and trip counts, slicing
//! and stacking tensors along an axis (scan inputs and outputs), and typing sub-graph
//! outputs for inference, from their declared types or by inferring a typed copy.

use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Graph, TensorType};
use crate::ops::InferCx;
use crate::tensor::{Elem, Tensor};
use ndarray::{ArrayD, Axis};

/// The value of a one-element bool tensor.
pub(super) fn scalar_bool(t: &Tensor, what: &str) -> Result<bool> {
    match t {
        Tensor::Bool(a) if a.len() == 1 => Ok(*a.iter().next().expect("one element")),
        t => Err(IrError::Invalid(format!(
            "{what} must be a single bool, got {} {:?}",
            t.dtype(),
            t.shape()
        ))),
    }
}

/// The value of a one-element integer tensor.
pub(super) fn scalar_i64(t: &Tensor, what: &str) -> Result<i64> {
    match t.to_i64_vec().as_slice() {
        [v] if t.dtype().is_int() => Ok(*v),
        _ => Err(IrError::Invalid(format!(
            "{what} must be a single integer, got {} {:?}",
            t.dtype(),
            t.shape()
        ))),
    }
}

/// Slice `i` of `t` along `axis` (the axis removed).
pub(super) fn index_axis(t: &Tensor, axis: usize, i: usize) -> Tensor {
    crate::map_tensor!(t, a => a.index_axis(Axis(axis), i).to_owned())
}

fn stack_as<T: Elem>(first: &ArrayD<T>, rest: &[Tensor], axis: usize) -> Result<Tensor> {
    let mut views = vec![first.view()];
    for t in rest {
        views.push(t.as_array::<T>()?.view());
    }
    ndarray::stack(Axis(axis), &views)
        .map(T::wrap)
        .map_err(|e| IrError::Shape(format!("cannot stack scan outputs: {e}")))
}

/// Stacks equally shaped tensors along a new axis `axis`.
pub(super) fn stack(ts: &[Tensor], axis: usize) -> Result<Tensor> {
    let (first, rest) = ts
        .split_first()
        .ok_or_else(|| IrError::Invalid("nothing to stack".into()))?;
    crate::with_tensor!(first, a => stack_as(a, rest, axis))
}

/// An empty stack (zero iterations) of values of type `ty`, along a new `axis`.
pub(super) fn empty_stack(ty: Option<&TensorType>, axis: usize, what: &str) -> Result<Tensor> {
    let ty = ty.ok_or_else(|| {
        IrError::Unsupported(format!("{what}: zero iterations and no declared type"))
    })?;
    let mut shape: Vec<usize> = ty
        .shape
        .iter()
        .map(|d| d.known().unwrap_or(0) as usize)
        .collect();
    shape.insert(axis.min(shape.len()), 0);
    Ok(Tensor::zeros(ty.dtype, &shape))
}

/// Output types of a sub-graph run on inputs of types `inputs`: the declared types
/// when every output has one, otherwise those inferred on a copy whose untyped inputs
/// take `inputs`.
pub(super) fn body_types(g: &Graph, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
    let declared: Option<Vec<TensorType>> =
        g.outputs.iter().map(|&o| g.value(o).ty.clone()).collect();
    if let Some(tys) = declared {
        return Ok(tys);
    }
    let mut copy = g.clone();
    for (&v, ty) in g.inputs.iter().zip(inputs) {
        if copy.values[v.index()].ty.is_none() {
            copy.values[v.index()].ty = Some(ty.clone());
        }
    }
    crate::infer::infer_types(&mut copy).map_err(|e| {
        let msg = format!("cannot type the outputs of sub-graph `{}`: {e}", g.name);
        if is_unsupported(&e) {
            IrError::Unsupported(msg)
        } else {
            IrError::Invalid(msg)
        }
    })?;
    copy.outputs.iter().map(|&o| copy.ty(o).cloned()).collect()
}

/// True when the root cause of `e` is something gopt does not support (as opposed to
/// a broken model), so that wrapping keeps the distinction.
fn is_unsupported(e: &IrError) -> bool {
    match e {
        IrError::Unsupported(_) => true,
        IrError::Node { source, .. } => is_unsupported(source),
        _ => false,
    }
}

/// A type both `a` and `b` fit: dims that differ become fresh symbols. Different
/// dtypes or ranks are an error.
pub(super) fn join(
    cx: &mut InferCx,
    a: &TensorType,
    b: &TensorType,
    what: &str,
) -> Result<TensorType> {
    if a.dtype != b.dtype || a.shape.len() != b.shape.len() {
        return Err(IrError::Unsupported(format!(
            "{what}: types {a} and {b} differ in dtype or rank"
        )));
    }
    let shape = a
        .shape
        .iter()
        .zip(&b.shape)
        .map(|(x, y)| {
            if x == y {
                x.clone()
            } else {
                cx.fresh_dim(what)
            }
        })
        .collect();
    Ok(TensorType::new(a.dtype, shape))
}

/// The type of a scalar of `dtype`.
pub(super) fn scalar_ty(dtype: DType) -> TensorType {
    TensorType::new(dtype, Vec::<Dim>::new())
}
