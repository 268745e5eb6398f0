//! Symbolic values of shape-like tensors. Exporters compute target shapes at run time
//! (`Shape → Gather → Unsqueeze → Concat → Reshape`); inference follows the contents
//! of those small integer tensors as `SymInt`s in the `InferCx`, so the Reshape at the
//! end gets `[batch, seq, 2, 3]` instead of fresh symbols. Constants read as known
//! integers; a value nobody tracked reads as unknown.

use super::common::norm_index;
use super::slice::AxisSlice;
use super::ShapeOp;
use crate::dim::Dim;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{norm_axis, opt_in_ty};
use crate::ops::{InferCx, InferInput, SymInt};

/// Longest shape-like value tracked (a shape has one element per dim).
const MAX_TRACKED: u64 = 64;

/// A dim as a tracked element: known dims become integers.
pub fn from_dim(d: &Dim) -> SymInt {
    match d {
        Dim::Known(n) => SymInt::Int(*n as i64),
        d => SymInt::Dim(d.clone()),
    }
}

/// A tracked element as a dim, when it is one (not negative).
pub fn to_dim(s: &SymInt) -> Option<Dim> {
    match s {
        SymInt::Int(n) => u64::try_from(*n).ok().map(Dim::Known),
        SymInt::Dim(d) => Some(d.clone()),
    }
}

/// A tracked shape as dims; a negative element is an error naming `what`.
pub fn sym_dims(v: &[SymInt], what: &str) -> Result<Vec<Dim>> {
    v.iter()
        .map(|s| to_dim(s).ok_or_else(|| IrError::Shape(format!("{what}: negative size in {v:?}"))))
        .collect()
}

/// The known integers of a tracked value, if none is symbolic.
pub fn to_ints(v: &[SymInt]) -> Option<Vec<i64>> {
    v.iter()
        .map(|s| match s {
            SymInt::Int(n) => Some(*n),
            SymInt::Dim(_) => None,
        })
        .collect()
}

/// The elements of input `i`: its data when it is an integer constant, else what
/// inference tracked for it.
pub fn sym_input(
    cx: &InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
    i: usize,
) -> Option<Vec<SymInt>> {
    let inp = opt_in_ty(inputs, i)?;
    if let Some(t) = inp.value {
        return (t.dtype().is_int() && t.len() as u64 <= MAX_TRACKED)
            .then(|| t.to_i64_vec().into_iter().map(SymInt::Int).collect());
    }
    let v = (*node.inputs.get(i)?)?;
    cx.sym_value(v).map(<[SymInt]>::to_vec)
}

/// Records the contents of `node`'s first output when `op` computes it from tracked
/// or constant inputs (only rank-0/1 integer results of at most `MAX_TRACKED` elements).
pub fn propagate(
    op: ShapeOp,
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
    tys: &[TensorType],
) {
    let (Some(&out), Some(ty)) = (node.outputs.first(), tys.first()) else {
        return;
    };
    let n = match ty.shape.as_slice() {
        [] => 1,
        [Dim::Known(n)] if *n <= MAX_TRACKED => *n as usize,
        _ => return,
    };
    if !ty.dtype.is_int() {
        return;
    }
    if let Some(v) = contents(op, cx, node, inputs).filter(|v| v.len() == n) {
        cx.set_sym_value(out, v);
    }
}

fn contents(
    op: ShapeOp,
    cx: &InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Option<Vec<SymInt>> {
    let x = opt_in_ty(inputs, 0)?;
    match op {
        ShapeOp::Shape => {
            let (s, e) = super::shape_range(node, x.ty.shape.len()).ok()?;
            Some(x.ty.shape[s..e].iter().map(from_dim).collect())
        }
        ShapeOp::Size => Some(vec![from_dim(&Dim::product(&x.ty.shape))]),
        ShapeOp::Identity
        | ShapeOp::Reshape
        | ShapeOp::Flatten
        | ShapeOp::Squeeze
        | ShapeOp::Unsqueeze => sym_input(cx, node, inputs, 0),
        ShapeOp::Gather => {
            let data = sym_input(cx, node, inputs, 0)?;
            let axis = norm_axis(node.attrs.int_or("axis", 0).ok()?, x.ty.shape.len()).ok()?;
            let idx = to_ints(&sym_input(cx, node, inputs, 1)?)?;
            if axis != 0 || x.ty.shape.len() != 1 {
                return None;
            }
            idx.iter()
                .map(|&i| {
                    norm_index(i, data.len(), "Gather")
                        .ok()
                        .map(|j| data[j].clone())
                })
                .collect()
        }
        ShapeOp::Concat => {
            let mut v = Vec::new();
            for i in 0..inputs.len() {
                v.extend(sym_input(cx, node, inputs, i)?);
            }
            Some(v)
        }
        ShapeOp::Slice => {
            let data = sym_input(cx, node, inputs, 0)?;
            let param = |i| to_ints(&sym_input(cx, node, inputs, i)?);
            let (starts, ends) = (param(1)?, param(2)?);
            let steps = match opt_in_ty(inputs, 4) {
                Some(_) => param(4)?,
                None => vec![1],
            };
            if x.ty.shape.len() != 1 || starts.len() != 1 || ends.len() != 1 {
                return None;
            }
            let s = AxisSlice::resolve(starts[0], ends[0], *steps.first()?, data.len()).ok()?;
            Some(
                (0..s.len)
                    .map(|k| data[(s.start + k as i64 * s.step) as usize].clone())
                    .collect(),
            )
        }
        ShapeOp::Expand
        | ShapeOp::Tile
        | ShapeOp::Transpose
        | ShapeOp::Split
        | ShapeOp::DepthToSpace
        | ShapeOp::SpaceToDepth
        | ShapeOp::Pad
        | ShapeOp::CenterCropPad
        | ShapeOp::ReverseSequence
        | ShapeOp::GatherElements
        | ShapeOp::GatherND
        | ShapeOp::Compress
        | ShapeOp::NonZero
        | ShapeOp::ScatterElements
        | ShapeOp::ScatterND
        | ShapeOp::Scatter
        | ShapeOp::ConstantOfShape
        | ShapeOp::Range
        | ShapeOp::EyeLike
        | ShapeOp::OneHot
        | ShapeOp::Trilu
        | ShapeOp::Unique => None,
    }
}
