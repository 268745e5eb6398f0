//! Attention and related sequence-model blocks: scaled dot-product attention (`Attention`,
//! `FlexAttention`), rotary position embeddings, KV-cache updates (`TensorScatter`),
//! linear attention and the stateful causal convolution of recurrent LLM layers, and the
//! SwiGLU gate. One submodule per op; `real` holds the float plumbing they share.

use crate::error::Result;
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;

mod cache;
mod conv_state;
mod flex;
mod linear;
pub(crate) mod real;
mod rotary;
mod sdpa;
mod swiglu;

op_family! {
    /// Attention and related sequence-model blocks.
    AttentionOp {
        Attention,
        FlexAttention,
        RotaryEmbedding,
        TensorScatter,
        LinearAttention,
        CausalConvWithState,
        SwiGLU,
    }
}

impl AttentionOp {
    /// Reference semantics.
    pub fn eval(self, cx: &EvalCx, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        match self {
            AttentionOp::Attention => sdpa::eval(node, inputs),
            AttentionOp::FlexAttention => flex::eval(cx, node, inputs),
            AttentionOp::RotaryEmbedding => rotary::eval(node, inputs),
            AttentionOp::TensorScatter => cache::eval(node, inputs),
            AttentionOp::LinearAttention => linear::eval(node, inputs),
            AttentionOp::CausalConvWithState => conv_state::eval(node, inputs),
            AttentionOp::SwiGLU => swiglu::eval(node, inputs),
        }
    }

    /// Output types.
    pub fn infer(
        self,
        cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        match self {
            AttentionOp::Attention => sdpa::infer(node, inputs),
            AttentionOp::FlexAttention => flex::infer(inputs),
            AttentionOp::RotaryEmbedding => rotary::infer(inputs),
            AttentionOp::TensorScatter => cache::infer(inputs),
            AttentionOp::LinearAttention => linear::infer(node, inputs),
            AttentionOp::CausalConvWithState => conv_state::infer(cx, inputs),
            AttentionOp::SwiGLU => swiglu::infer(inputs),
        }
    }
}
