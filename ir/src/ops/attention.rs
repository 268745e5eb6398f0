//! Attention and related sequence-model blocks.

use crate::error::{unsupported, Result};
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;

op_family! {
    /// Attention and related sequence-model blocks.
    AttentionOp { Attention }
}

impl AttentionOp {
    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        _node: &Node,
        _inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        match self {
            AttentionOp::Attention => unsupported("Attention is not implemented yet"),
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
            AttentionOp::Attention => unsupported("Attention is not implemented yet"),
        }
    }
}
