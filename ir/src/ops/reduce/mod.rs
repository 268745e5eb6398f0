//! Reductions, softmax, normalizations, cumulative ops and losses: the ops that combine
//! many elements of a tensor along axes. Each submodule owns a group of related ops;
//! this module maps op names to them.

mod arg;
mod basic;
mod common;
mod local;
mod loss;
mod norm;
mod softmax;
#[cfg(test)]
mod tests;

use crate::error::Result;
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::util::in_ty;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;
use basic::Kind;

op_family! {
    /// Reductions, softmax, normalizations, cumulative ops and losses.
    ReduceOp {
        ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
        ReduceLogSum, ReduceLogSumExp, ReduceSumSquare,
        ArgMax, ArgMin, TopK, Hardmax,
        Softmax, LogSoftmax, CumSum, CumProd,
        LayerNormalization, RMSNormalization, GroupNormalization, InstanceNormalization,
        BatchNormalization, LpNormalization, MeanVarianceNormalization, LRN,
        NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss,
    }
}

impl ReduceOp {
    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        node: &Node,
        inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        let one = |t: Result<Tensor>| t.map(|t| vec![t]);
        let reduce = |kind: Kind| one(basic::eval(kind, node, inputs));
        match self {
            ReduceOp::ReduceSum => reduce(Kind::Sum),
            ReduceOp::ReduceMean => reduce(Kind::Mean),
            ReduceOp::ReduceMax => reduce(Kind::Max),
            ReduceOp::ReduceMin => reduce(Kind::Min),
            ReduceOp::ReduceProd => reduce(Kind::Prod),
            ReduceOp::ReduceL1 => reduce(Kind::L1),
            ReduceOp::ReduceL2 => reduce(Kind::L2),
            ReduceOp::ReduceLogSum => reduce(Kind::LogSum),
            ReduceOp::ReduceLogSumExp => reduce(Kind::LogSumExp),
            ReduceOp::ReduceSumSquare => reduce(Kind::SumSquare),
            ReduceOp::ArgMax => one(arg::eval_arg(node, inputs, true)),
            ReduceOp::ArgMin => one(arg::eval_arg(node, inputs, false)),
            ReduceOp::TopK => arg::eval_topk(node, inputs),
            ReduceOp::Hardmax => one(arg::eval_hardmax(node, inputs)),
            ReduceOp::Softmax => one(softmax::eval_softmax(node, inputs, false)),
            ReduceOp::LogSoftmax => one(softmax::eval_softmax(node, inputs, true)),
            ReduceOp::CumSum => one(softmax::eval_cumulative(node, inputs, false)),
            ReduceOp::CumProd => one(softmax::eval_cumulative(node, inputs, true)),
            ReduceOp::LayerNormalization => norm::eval_layer_norm(node, inputs, false),
            ReduceOp::RMSNormalization => norm::eval_layer_norm(node, inputs, true),
            ReduceOp::GroupNormalization => one(norm::eval_group_norm(node, inputs, false)),
            ReduceOp::InstanceNormalization => one(norm::eval_group_norm(node, inputs, true)),
            ReduceOp::BatchNormalization => norm::eval_batch_norm(node, inputs),
            ReduceOp::LpNormalization => one(local::eval_lp_norm(node, inputs)),
            ReduceOp::MeanVarianceNormalization => one(local::eval_mvn(node, inputs)),
            ReduceOp::LRN => one(local::eval_lrn(node, inputs)),
            ReduceOp::NegativeLogLikelihoodLoss => one(loss::eval_nll(node, inputs)),
            ReduceOp::SoftmaxCrossEntropyLoss => loss::eval_sce(node, inputs),
        }
    }

    /// Output types.
    pub fn infer(
        self,
        cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        let same = || Ok(vec![in_ty(inputs, 0)?.ty.clone()]);
        match self {
            ReduceOp::ReduceSum
            | ReduceOp::ReduceMean
            | ReduceOp::ReduceMax
            | ReduceOp::ReduceMin
            | ReduceOp::ReduceProd
            | ReduceOp::ReduceL1
            | ReduceOp::ReduceL2
            | ReduceOp::ReduceLogSum
            | ReduceOp::ReduceLogSumExp
            | ReduceOp::ReduceSumSquare => Ok(vec![basic::infer(cx, node, inputs)?]),
            ReduceOp::ArgMax | ReduceOp::ArgMin => Ok(vec![arg::infer_arg(node, inputs)?]),
            ReduceOp::TopK => arg::infer_topk(cx, node, inputs),
            ReduceOp::Hardmax
            | ReduceOp::Softmax
            | ReduceOp::LogSoftmax
            | ReduceOp::CumSum
            | ReduceOp::CumProd
            | ReduceOp::GroupNormalization
            | ReduceOp::InstanceNormalization
            | ReduceOp::LpNormalization
            | ReduceOp::MeanVarianceNormalization
            | ReduceOp::LRN => same(),
            ReduceOp::LayerNormalization => norm::infer_layer_norm(node, inputs, false),
            ReduceOp::RMSNormalization => norm::infer_layer_norm(node, inputs, true),
            ReduceOp::BatchNormalization => norm::infer_batch_norm(node, inputs),
            ReduceOp::NegativeLogLikelihoodLoss | ReduceOp::SoftmaxCrossEntropyLoss => {
                loss::infer_loss(node, inputs)
            }
        }
    }
}
