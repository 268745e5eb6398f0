//! Shape computations and data movement: Shape, Reshape, Transpose, Concat, Slice,
//! Gather, Scatter, Pad, Expand, and the other ops that move or select elements
//! without arithmetic. Every op here is written once, generically over the element
//! type; inference does exact symbolic arithmetic on dims (`batch*seq`) and falls back
//! to fresh symbols where a shape depends on a value that is not constant.

use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::util::{in_ty, input};
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;
use crate::{dim::Dim, dtype::DType};

mod common;
mod gather;
mod generate;
pub(crate) mod layout;
mod reshape;
mod scatter;
mod slice;
mod symbolic;
mod unique;

op_family! {
    /// Shape computations and data movement.
    ShapeOp {
        Identity, Shape, Size,
        Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile,
        Transpose, Concat, Split, DepthToSpace, SpaceToDepth,
        Slice, Pad, CenterCropPad, ReverseSequence,
        Gather, GatherElements, GatherND, Compress, NonZero,
        ScatterElements, ScatterND, Scatter,
        ConstantOfShape, Range, EyeLike, OneHot, Trilu,
        Unique,
    }
}

impl ShapeOp {
    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        node: &Node,
        inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        let one = |t: Result<Tensor>| t.map(|t| vec![t]);
        match self {
            ShapeOp::Identity => Ok(vec![input(inputs, 0)?.clone()]),
            ShapeOp::Shape | ShapeOp::Size => {
                Ok(vec![shape_of_dims(node, input(inputs, 0)?.shape())?])
            }
            ShapeOp::Reshape => one(reshape::reshape(node, inputs)),
            ShapeOp::Flatten => one(reshape::flatten(node, inputs)),
            ShapeOp::Squeeze => one(reshape::squeeze(inputs)),
            ShapeOp::Unsqueeze => one(reshape::unsqueeze(inputs)),
            ShapeOp::Expand => one(reshape::expand(inputs)),
            ShapeOp::Tile => one(reshape::tile(inputs)),
            ShapeOp::Transpose => one(layout::transpose(node, inputs)),
            ShapeOp::Concat => one(layout::concat(node, inputs)),
            ShapeOp::Split => layout::split(node, inputs),
            ShapeOp::DepthToSpace => one(layout::depth_to_space(node, inputs)),
            ShapeOp::SpaceToDepth => one(layout::space_to_depth(node, inputs)),
            ShapeOp::Slice => one(slice::slice(inputs)),
            ShapeOp::Pad => one(slice::pad(node, inputs)),
            ShapeOp::CenterCropPad => one(slice::center_crop_pad(node, inputs)),
            ShapeOp::ReverseSequence => one(slice::reverse_sequence(node, inputs)),
            ShapeOp::Gather => one(gather::gather(node, inputs)),
            ShapeOp::GatherElements => one(gather::gather_elements(node, inputs)),
            ShapeOp::GatherND => one(gather::gather_nd(node, inputs)),
            ShapeOp::Compress => one(gather::compress(node, inputs)),
            ShapeOp::NonZero => one(gather::non_zero(inputs)),
            ShapeOp::ScatterElements | ShapeOp::Scatter => {
                one(scatter::scatter_elements(node, inputs))
            }
            ShapeOp::ScatterND => one(scatter::scatter_nd(node, inputs)),
            ShapeOp::ConstantOfShape => one(generate::constant_of_shape(node, inputs)),
            ShapeOp::Range => one(generate::range(node, inputs)),
            ShapeOp::EyeLike => one(generate::eye_like(node, inputs)),
            ShapeOp::OneHot => one(generate::one_hot(node, inputs)),
            ShapeOp::Trilu => one(generate::trilu(node, inputs)),
            ShapeOp::Unique => unique::unique(node, inputs),
        }
    }

    /// Output types; also records the symbolic contents of shape-like outputs.
    pub fn infer(
        self,
        cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        let tys = self.infer_types(cx, node, inputs)?;
        symbolic::propagate(self, cx, node, inputs, &tys);
        Ok(tys)
    }

    fn infer_types(
        self,
        cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        let one = |t: Result<TensorType>| t.map(|t| vec![t]);
        let same = || in_ty(inputs, 0).map(|i| vec![i.ty.clone()]);
        match self {
            ShapeOp::Identity
            | ShapeOp::ReverseSequence
            | ShapeOp::ScatterElements
            | ShapeOp::Scatter
            | ShapeOp::ScatterND
            | ShapeOp::Trilu => same(),
            ShapeOp::Shape => {
                let rank = in_ty(inputs, 0)?.ty.shape.len();
                let (s, e) = shape_range(node, rank)?;
                Ok(vec![TensorType::new(
                    DType::I64,
                    vec![Dim::from(e.saturating_sub(s))],
                )])
            }
            ShapeOp::Size => Ok(vec![TensorType::new(DType::I64, vec![])]),
            ShapeOp::Reshape => one(reshape::infer_reshape(cx, node, inputs)),
            ShapeOp::Flatten => one(reshape::infer_flatten(node, inputs)),
            ShapeOp::Squeeze => one(reshape::infer_squeeze(cx, inputs)),
            ShapeOp::Unsqueeze => one(reshape::infer_unsqueeze(cx, inputs)),
            ShapeOp::Expand => one(reshape::infer_expand(cx, node, inputs)),
            ShapeOp::Tile => one(reshape::infer_tile(cx, inputs)),
            ShapeOp::Transpose => one(layout::infer_transpose(node, inputs)),
            ShapeOp::Concat => one(layout::infer_concat(node, inputs)),
            ShapeOp::Split => layout::infer_split(cx, node, inputs),
            ShapeOp::DepthToSpace | ShapeOp::SpaceToDepth => {
                one(layout::infer_depth_space(self, node, inputs))
            }
            ShapeOp::Slice => one(slice::infer_slice(cx, node, inputs)),
            ShapeOp::Pad => one(slice::infer_pad(cx, inputs)),
            ShapeOp::CenterCropPad => one(slice::infer_center_crop_pad(cx, node, inputs)),
            ShapeOp::Gather => one(gather::infer_gather(node, inputs)),
            ShapeOp::GatherElements => {
                let data = in_ty(inputs, 0)?.ty;
                let idx = in_ty(inputs, 1)?.ty;
                Ok(vec![TensorType::new(data.dtype, idx.shape.clone())])
            }
            ShapeOp::GatherND => one(gather::infer_gather_nd(node, inputs)),
            // Data-dependent shapes: exact when the inputs are constants.
            ShapeOp::Compress => common::types_by_eval(self, node, inputs)
                .unwrap_or_else(|| one(gather::infer_compress(cx, node, inputs))),
            ShapeOp::NonZero => common::types_by_eval(self, node, inputs).unwrap_or_else(|| {
                let rank = in_ty(inputs, 0)?.ty.shape.len();
                let n = cx.fresh_dim("nonzero");
                Ok(vec![TensorType::new(DType::I64, vec![Dim::from(rank), n])])
            }),
            ShapeOp::Range => common::types_by_eval(self, node, inputs)
                .unwrap_or_else(|| one(generate::infer_range(cx, node, inputs))),
            ShapeOp::Unique => common::types_by_eval(self, node, inputs)
                .unwrap_or_else(|| unique::infer_unique(cx, node, inputs)),
            ShapeOp::ConstantOfShape => one(generate::infer_constant_of_shape(cx, node, inputs)),
            ShapeOp::EyeLike => {
                let x = in_ty(inputs, 0)?.ty;
                let dtype = node.attrs.dtype("dtype")?.unwrap_or(x.dtype);
                Ok(vec![TensorType::new(dtype, x.shape.clone())])
            }
            ShapeOp::OneHot => one(generate::infer_one_hot(cx, node, inputs)),
        }
    }
}

/// The `[start, end)` range of dims `Shape` reports (its `start`/`end` attributes,
/// clamped like Python slicing).
fn shape_range(node: &Node, rank: usize) -> Result<(usize, usize)> {
    let r = rank as i64;
    let clamp = |v: i64| -> usize { (if v < 0 { v + r } else { v }).clamp(0, r) as usize };
    let s = clamp(node.attrs.int_or("start", 0)?);
    let e = clamp(node.attrs.int_or("end", r)?);
    Ok((s, e.max(s)))
}

/// `Shape` or `Size` of a tensor with concrete dims `dims` (used by constant folding,
/// which knows the dims without having the data).
pub fn shape_of_dims(node: &Node, dims: &[usize]) -> Result<Tensor> {
    match node.op {
        crate::ops::Op::Shape(ShapeOp::Size) => Ok(Tensor::I64(
            ndarray::arr0(dims.iter().product::<usize>() as i64).into_dyn(),
        )),
        crate::ops::Op::Shape(ShapeOp::Shape) => {
            let (s, e) = shape_range(node, dims.len())?;
            Ok(Tensor::from_i64s(
                &dims[s..e].iter().map(|&d| d as i64).collect::<Vec<_>>(),
            ))
        }
        op => Err(IrError::Invalid(format!("shape_of_dims called on {op}"))),
    }
}
