//! Control flow (`If`, `Loop`, `Scan`), whose bodies are sub-graphs run through
//! `EvalCx::run_subgraph`, and the recurrent networks (`RNN`, `GRU`, `LSTM`), which are
//! loops over time with fixed bodies.

use crate::error::Result;
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;

mod activation;
mod branch;
mod loops;
mod rnn;
mod subgraph;

use rnn::Cell;

op_family! {
    /// Control flow (If, Loop, Scan) and recurrent networks.
    ControlOp { If, Loop, Scan, RNN, GRU, LSTM }
}

impl ControlOp {
    /// Reference semantics.
    pub fn eval(self, cx: &EvalCx, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        match self {
            ControlOp::If => branch::eval(cx, node, inputs),
            ControlOp::Loop => loops::eval_loop(cx, node, inputs),
            ControlOp::Scan => loops::eval_scan(cx, node, inputs),
            ControlOp::RNN => rnn::eval(Cell::Rnn, node, inputs),
            ControlOp::GRU => rnn::eval(Cell::Gru, node, inputs),
            ControlOp::LSTM => rnn::eval(Cell::Lstm, node, inputs),
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
            ControlOp::If => branch::infer(cx, node, inputs),
            ControlOp::Loop => loops::infer_loop(cx, node, inputs),
            ControlOp::Scan => loops::infer_scan(cx, node, inputs),
            ControlOp::RNN => rnn::infer(Cell::Rnn, node, inputs),
            ControlOp::GRU => rnn::infer(Cell::Gru, node, inputs),
            ControlOp::LSTM => rnn::infer(Cell::Lstm, node, inputs),
        }
    }
}
