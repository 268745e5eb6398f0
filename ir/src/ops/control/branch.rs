//! ONNX `If`: runs one of two sub-graphs (which read outer values by capture) on a
//! scalar condition. Its output types are the branches' when they agree; dims on which
//! they differ become fresh symbols, unless the condition is a known constant.

use super::subgraph::{body_types, join, scalar_bool};
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input};
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;

fn branch(cond: bool) -> &'static str {
    if cond {
        "then_branch"
    } else {
        "else_branch"
    }
}

/// Runs the branch the condition selects.
pub(super) fn eval(cx: &EvalCx, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let cond = scalar_bool(input(inputs, 0)?, "If condition")?;
    cx.run_subgraph(node.attrs.graph(branch(cond))?, &[])
}

/// Output types.
pub(super) fn infer(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    if let Some(c) = in_ty(inputs, 0)?.value {
        let cond = scalar_bool(c, "If condition")?;
        return body_types(node.attrs.graph(branch(cond))?, &[]);
    }
    let then_tys = body_types(node.attrs.graph("then_branch")?, &[])?;
    let else_tys = body_types(node.attrs.graph("else_branch")?, &[])?;
    if then_tys.len() != else_tys.len() {
        return Err(IrError::Invalid(format!(
            "then_branch has {} outputs, else_branch {}",
            then_tys.len(),
            else_tys.len()
        )));
    }
    then_tys
        .iter()
        .zip(&else_tys)
        .map(|(a, b)| join(cx, a, b, "if_out"))
        .collect()
}
