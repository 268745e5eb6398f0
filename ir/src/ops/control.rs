//! Control flow (If, Loop, Scan) and recurrent networks.

use crate::error::{unsupported, Result};
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;

op_family! {
    /// Control flow (If, Loop, Scan) and recurrent networks.
    ControlOp { If }
}

impl ControlOp {
    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        _node: &Node,
        _inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        match self {
            ControlOp::If => unsupported("If is not implemented yet"),
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
            ControlOp::If => unsupported("If is not implemented yet"),
        }
    }
}
