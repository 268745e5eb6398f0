//! Linear algebra, convolution, pooling and quantization.

use crate::error::{unsupported, Result};
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;

op_family! {
    /// Linear algebra, convolution, pooling and quantization.
    NnOp { MatMul }
}

impl NnOp {
    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        _node: &Node,
        _inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        match self {
            NnOp::MatMul => unsupported("MatMul is not implemented yet"),
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
            NnOp::MatMul => unsupported("MatMul is not implemented yet"),
        }
    }
}
