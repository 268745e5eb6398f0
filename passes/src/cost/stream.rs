//! What a streaming kernel touches, beyond "every input once, every output once": a
//! gather reads only the rows (or elements) it gathers, and kernels that run one thread
//! per output element, with index math for each (`gopt_codegen`'s scalar element-wise
//! kernel and its index-map kernels: transposes, gathers, broadcasts), are bound by
//! their threads per second before the bytes bind them. The rules follow the CUDA
//! backend's choice of kernel for each op.

use gopt_ir::ops::{FusedOp, ShapeOp};
use gopt_ir::{Op, TensorType};

/// Elements of `ty` (unknown dims count as 1).
pub(super) fn elems(ty: &TensorType) -> f64 {
    ty.shape
        .iter()
        .map(|d| d.known().unwrap_or(1) as f64)
        .product()
}

/// Elements `op` reads of each of its present `inputs`: all of them, except that a
/// gather reads at most one element of its data per output element (the gathered rows,
/// not the table: an embedding lookup of 128 tokens reads 128 rows of a 30 k-row table).
pub(super) fn reads(op: Op, inputs: &[&TensorType], out_elems: f64) -> Vec<f64> {
    let gathers = matches!(
        op,
        Op::Shape(ShapeOp::Gather | ShapeOp::GatherElements | ShapeOp::GatherND)
    );
    inputs
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            let n = elems(ty);
            if gathers && i == 0 {
                n.min(out_elems)
            } else {
                n
            }
        })
        .collect()
}

/// Whether the CUDA backend runs `op` as a kernel of one thread per output element.
/// An element-wise op (or group) does unless every tensor operand is a scalar or has
/// the output's shape and type and the output fills whole 16-byte vectors, as
/// `gopt_codegen`'s element-wise emitter decides; the index-map kernels always do.
pub(super) fn scalar(op: Op, inputs: &[&TensorType], outputs: &[TensorType]) -> bool {
    match op {
        Op::Elementwise(_) | Op::Fused(FusedOp::FusedElementwise) => {
            let Some(out) = outputs.first() else {
                return false;
            };
            let n = elems(out);
            let lanes = (16 / out.dtype.size().max(1)) as f64;
            let same =
                |t: &&TensorType| elems(t) == 1.0 || (t.shape == out.shape && t.dtype == out.dtype);
            !(n >= lanes && n % lanes == 0.0 && inputs.iter().all(same))
        }
        Op::Shape(s) => match s {
            ShapeOp::Transpose
            | ShapeOp::Expand
            | ShapeOp::Concat
            | ShapeOp::Gather
            | ShapeOp::GatherElements
            | ShapeOp::GatherND
            | ShapeOp::Tile
            | ShapeOp::DepthToSpace
            | ShapeOp::SpaceToDepth
            | ShapeOp::CenterCropPad
            | ShapeOp::ReverseSequence
            | ShapeOp::Trilu => true,
            // Views; Split and Pad (copied in whole runs); kernels that generate values
            // or count their output, and scatters: priced by their bytes.
            ShapeOp::Identity
            | ShapeOp::Reshape
            | ShapeOp::Flatten
            | ShapeOp::Squeeze
            | ShapeOp::Unsqueeze
            | ShapeOp::Shape
            | ShapeOp::Size
            | ShapeOp::Slice
            | ShapeOp::Split
            | ShapeOp::Pad
            | ShapeOp::ConstantOfShape
            | ShapeOp::Range
            | ShapeOp::EyeLike
            | ShapeOp::OneHot
            | ShapeOp::Compress
            | ShapeOp::NonZero
            | ShapeOp::Unique
            | ShapeOp::ScatterElements
            | ShapeOp::ScatterND
            | ShapeOp::Scatter => false,
        },
        // Row, reduction, pool and the other kernels of their own: by their bytes.
        Op::Fused(FusedOp::FusedMatMul | FusedOp::FusedConv)
        | Op::Nn(_)
        | Op::Reduce(_)
        | Op::Attention(_)
        | Op::Control(_)
        | Op::Image(_) => false,
        // Priced by the link (`super::link`), never as a kernel of threads.
        Op::Collective(_) => false,
    }
}
