//! Helpers shared by the shape family: reading shape-like integer inputs, row-major
//! index arithmetic on flat buffers, reshaping owned arrays, and the symbolic-dim
//! arithmetic (factor cancellation, fresh dims) that shape inference of Reshape,
//! Flatten and friends needs.

use crate::dim::{shape_of, Dim};
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::shape::ShapeOp;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::{array_from, Elem, Tensor};
use ndarray::{ArrayD, IxDyn};

/// Reads a shape-like tensor (shapes, axes, starts, repeats...) as i64s; it must hold
/// integers.
pub fn ints_of(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    if !t.dtype().is_int() {
        return Err(IrError::DType {
            context: what.to_string(),
            expected: "an integer tensor".into(),
            found: t.dtype(),
        });
    }
    Ok(t.to_i64_vec())
}

/// The integer values of an inference input when it is a constant.
pub fn const_ints(i: Option<InferInput>) -> Option<Vec<i64>> {
    let t = i?.value?;
    t.dtype().is_int().then(|| t.to_i64_vec())
}

/// The one element of a scalar-like (single-element) tensor as i64.
pub fn scalar_i64(t: &Tensor, what: &str) -> Result<i64> {
    match t.to_i64_vec().as_slice() {
        [v] => Ok(*v),
        _ => Err(IrError::Shape(format!(
            "{what} must hold one element, found shape {:?}",
            t.shape()
        ))),
    }
}

/// An optional scalar integer input (Trilu's `k`...).
pub fn opt_scalar(inputs: &[Option<&Tensor>], i: usize, what: &str) -> Result<Option<i64>> {
    crate::ops::util::opt_input(inputs, i)
        .map(|t| scalar_i64(t, what))
        .transpose()
}

/// Converts i64 sizes to usize, rejecting negative ones.
pub fn to_sizes(v: &[i64], what: &str) -> Result<Vec<usize>> {
    v.iter()
        .map(|&x| {
            usize::try_from(x)
                .map_err(|_| IrError::Shape(format!("{what}: negative size {x} in {v:?}")))
        })
        .collect()
}

/// Most elements an op of this family materialises; a model asking for more (a huge
/// Pad, Expand or ConstantOfShape) gets an error instead of an allocation failure.
pub const MAX_ELEMENTS: usize = 1 << 32;

/// Checks that a result of `shape` can be allocated.
pub fn check_size(shape: &[usize], op: &str) -> Result<()> {
    let n = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if n.is_some_and(|n| !crate::budget::fits(n as u64)) {
        return Err(crate::budget::exhausted());
    }
    match n {
        Some(n) if n <= MAX_ELEMENTS => Ok(()),
        _ => Err(IrError::Shape(format!(
            "{op}: result of shape {shape:?} exceeds {MAX_ELEMENTS} elements"
        ))),
    }
}

/// Normalises a list of possibly negative axes against `rank`, rejecting repeats.
pub fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = crate::ops::util::norm_axis(a, rank)?;
        if out.contains(&n) {
            return Err(IrError::Shape(format!("axis {a} repeated in {axes:?}")));
        }
        out.push(n);
    }
    Ok(out)
}

/// Normalises an index into an axis of length `dim`, accepting `-dim..dim`.
pub fn norm_index(i: i64, dim: usize, what: &str) -> Result<usize> {
    let d = dim as i64;
    let j = if i < 0 { i + d } else { i };
    if (0..d).contains(&j) {
        Ok(j as usize)
    } else {
        Err(IrError::Shape(format!(
            "{what}: index {i} out of range for an axis of length {dim}"
        )))
    }
}

/// Row-major strides (in elements) of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The elements of `a` in row-major order.
pub fn flat<T: Elem>(a: &ArrayD<T>) -> Vec<T> {
    match a.as_slice() {
        Some(s) => s.to_vec(),
        None => a.iter().copied().collect(),
    }
}

/// Gives an owned array a new shape of equal element count.
pub fn reshape_arr<T: Elem>(a: ArrayD<T>, shape: &[usize]) -> Result<ArrayD<T>> {
    let n: usize = shape.iter().product();
    if n != a.len() {
        return Err(IrError::Shape(format!(
            "cannot reshape {:?} ({} elements) to {shape:?} ({n} elements)",
            a.shape(),
            a.len()
        )));
    }
    if a.is_standard_layout() {
        Ok(a.into_shape_with_order(IxDyn(shape))
            .expect("standard layout and element count checked"))
    } else {
        array_from(shape, a.iter().copied().collect())
    }
}

/// `n` fresh symbolic dims.
pub fn fresh_dims(cx: &mut InferCx, n: usize, hint: &str) -> Vec<Dim> {
    (0..n).map(|_| cx.fresh_dim(hint)).collect()
}

/// Splits a dim into its known factor and its symbolic factors (`Mul` nodes flattened).
fn factors(d: &Dim, k: &mut u64, syms: &mut Vec<Dim>) {
    match d {
        Dim::Known(n) => *k = k.saturating_mul(*n),
        Dim::Mul(a, b) => {
            factors(a, k, syms);
            factors(b, k, syms);
        }
        other => syms.push(other.clone()),
    }
}

/// `product(num) / product(den)` with common symbolic factors cancelled, so
/// `[batch,seq,96] / [96]` is `(batch*seq)` rather than a division node.
pub fn div_dims(num: &[Dim], den: &[Dim]) -> Dim {
    let (mut kn, mut sn) = (1u64, Vec::new());
    num.iter().for_each(|d| factors(d, &mut kn, &mut sn));
    let (mut kd, mut sd) = (1u64, Vec::new());
    den.iter().for_each(|d| factors(d, &mut kd, &mut sd));
    let mut left = Vec::new();
    for s in sd {
        match sn.iter().position(|x| *x == s) {
            Some(p) => {
                sn.remove(p);
            }
            None => left.push(s),
        }
    }
    if left.is_empty() && kd != 0 && kn % kd == 0 {
        Dim::product(&sn).mul(&Dim::Known(kn / kd))
    } else {
        let rest = Dim::product(&sn).mul(&Dim::Known(kn));
        rest.div(&Dim::product(&left).mul(&Dim::Known(kd)))
    }
}

/// The output types `op` gives when every input is a constant, computed by running it;
/// `None` when some input is not constant or running it passes the budget. Used by ops
/// whose output shape depends on input values (NonZero, Unique, Range...).
pub fn types_by_eval(
    op: ShapeOp,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Option<Result<Vec<TensorType>>> {
    let vals: Vec<Option<&Tensor>> = inputs
        .iter()
        .map(|i| match i {
            None => Some(None),
            Some(i) => i.value.map(Some),
        })
        .collect::<Option<_>>()?;
    let no_scope = |_: &str| None;
    let cx = EvalCx { lookup: &no_scope };
    // Inference evaluates within a budget; past it the shape is left to run time.
    let r = crate::budget::with_fuel(crate::budget::FOLD_FUEL, || {
        crate::budget::charge(vals.iter().flatten().map(|t| t.len() as u64).sum())?;
        op.eval(&cx, node, &vals)
    });
    match r {
        Err(e) if crate::budget::is_exhausted(&e) => None,
        r => Some(r.map(|ts| {
            ts.iter()
                .map(|t| TensorType::new(t.dtype(), shape_of(t.shape())))
                .collect()
        })),
    }
}

/// A dtype mismatch between inputs that must agree.
pub fn dtype_mismatch(context: &str, expected: crate::dtype::DType, found: &Tensor) -> IrError {
    IrError::DType {
        context: context.to_string(),
        expected: expected.name().to_string(),
        found: found.dtype(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn div_dims_cancels_symbols() {
        let (b, s) = (Dim::sym("batch"), Dim::sym("seq"));
        let num = [b.clone(), s.clone(), Dim::Known(96)];
        assert_eq!(div_dims(&num, &[Dim::Known(96)]).to_string(), "(batch*seq)");
        assert_eq!(
            div_dims(&num, &[Dim::Known(32)]).to_string(),
            "((batch*seq)*3)"
        );
        assert_eq!(div_dims(&num, &[s.clone(), Dim::Known(96)]), b);
        assert_eq!(div_dims(&[b.mul(&s)], std::slice::from_ref(&b)), s);
    }
}
