//! Small helpers every op family uses: fetching inputs with good errors, axis
//! normalisation and broadcasting of concrete and symbolic shapes.

use crate::dim::Dim;
use crate::error::{IrError, Result};
use crate::graph::TensorType;
use crate::ops::InferInput;
use crate::tensor::Tensor;

/// Input `i`, which must be present.
pub fn input<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Result<&'a Tensor> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| IrError::Invalid(format!("input {i} is required but missing")))
}

/// Input `i` if present.
pub fn opt_input<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Option<&'a Tensor> {
    inputs.get(i).copied().flatten()
}

/// Inference view of input `i`, which must be present.
pub fn in_ty<'a>(inputs: &[Option<InferInput<'a>>], i: usize) -> Result<InferInput<'a>> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| IrError::Invalid(format!("input {i} is required but missing")))
}

/// Inference view of input `i` if present.
pub fn opt_in_ty<'a>(inputs: &[Option<InferInput<'a>>], i: usize) -> Option<InferInput<'a>> {
    inputs.get(i).copied().flatten()
}

/// Normalises a possibly negative axis against `rank`.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(IrError::Shape(format!(
            "axis {axis} out of range for rank {rank}"
        )));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// Numpy-style broadcast of two concrete shapes.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let y = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(IrError::Shape(format!(
                    "shapes {a:?} and {b:?} do not broadcast"
                )));
            }
        };
    }
    Ok(out)
}

/// Numpy-style broadcast of two symbolic shapes. Two different symbols broadcast to the
/// first (ONNX models assume they agree; the run-time check catches it if not).
pub fn broadcast_dims(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>> {
    let n = a.len().max(b.len());
    let one = Dim::Known(1);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let x = if i + a.len() >= n {
            &a[i + a.len() - n]
        } else {
            &one
        };
        let y = if i + b.len() >= n {
            &b[i + b.len() - n]
        } else {
            &one
        };
        out.push(match (x, y) {
            (x, y) if x == y => x.clone(),
            (Dim::Known(1), y) => y.clone(),
            (x, Dim::Known(1)) => x.clone(),
            (Dim::Known(p), Dim::Known(q)) => {
                return Err(IrError::Shape(format!(
                    "shapes {} and {} do not broadcast ({p} vs {q})",
                    crate::dim::fmt_shape(a),
                    crate::dim::fmt_shape(b)
                )));
            }
            (Dim::Known(_), _) => x.clone(),
            _ => y.clone().min(x.clone()),
        });
    }
    Ok(out)
}

/// Broadcast of many types' shapes; the dtype is the first one's.
pub fn broadcast_types(tys: &[&TensorType]) -> Result<TensorType> {
    let first = tys
        .first()
        .ok_or_else(|| IrError::Invalid("no inputs".into()))?;
    let mut shape = first.shape.clone();
    for t in &tys[1..] {
        shape = broadcast_dims(&shape, &t.shape)?;
    }
    Ok(TensorType::new(first.dtype, shape))
}
