//! Resampling, image and signal processing.

use crate::error::{unsupported, Result};
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;

op_family! {
    /// Resampling, image and signal processing.
    ImageOp { Resize }
}

impl ImageOp {
    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        _node: &Node,
        _inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        match self {
            ImageOp::Resize => unsupported("Resize is not implemented yet"),
        }
    }

    /// Output types.
    pub fn infer(
        self,
        _cx: &mut InferCx,
        _node: &Node,
        _inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        match self {
            ImageOp::Resize => unsupported("Resize is not implemented yet"),
        }
    }
}
