//! `FusedElementwise(x...)`: runs the sub-graph `body` (attribute, a graph) on its
//! inputs. It exists because chains of element-wise ops (a bias add, an activation, a
//! scale, a cast) are memory-bound: fused, a backend runs the chain as one kernel that
//! reads each input and writes the output once, instead of one pass per op.
//!
//! The body takes exactly as many inputs as the node and has exactly one output; its
//! nodes are element-wise ops only (the element-wise family, Cast included, random
//! generators excluded) and it captures nothing. Broadcasting happens inside the
//! body's ops, so running it on the full tensors is exact, and the output has the
//! broadcast shape of all inputs and the dtype the body declares for its output.

use crate::dtype::DType;
use crate::error::{shape_err, IrError, Result};
use crate::graph::{Graph, Node, TensorType};
use crate::ops::util::{broadcast_shape, broadcast_types, in_ty, input};
use crate::ops::{EvalCx, InferInput, Op};
use crate::tensor::Tensor;

const OP: &str = "FusedElementwise";

/// The node's `body`, checked against the node's input count `n_inputs`.
fn body(node: &Node, n_inputs: usize) -> Result<&Graph> {
    let g = node.attrs.graph("body")?;
    let invalid = |msg: String| Err(IrError::Invalid(format!("{OP} body `{}`: {msg}", g.name)));
    if n_inputs == 0 {
        return Err(IrError::Invalid(format!(
            "{OP} takes at least one input, got none"
        )));
    }
    if g.inputs.len() != n_inputs {
        return invalid(format!(
            "takes {} inputs but the node has {n_inputs}",
            g.inputs.len()
        ));
    }
    if g.outputs.len() != 1 {
        return invalid(format!(
            "must have exactly one output, has {}",
            g.outputs.len()
        ));
    }
    if !g.captures.is_empty() {
        return invalid(format!(
            "must not capture outer values (captures {})",
            g.captures.len()
        ));
    }
    for n in &g.nodes {
        match n.op {
            Op::Elementwise(o) if o.is_deterministic() => {}
            op => {
                return invalid(format!(
                    "node `{}` is {op}, not a deterministic element-wise op",
                    n.name
                ))
            }
        }
    }
    Ok(g)
}

/// Fails when body input `i` declares a dtype other than the node input's.
fn check_input_dtype(g: &Graph, i: usize, found: DType) -> Result<()> {
    match &g.value(g.inputs[i]).ty {
        Some(t) if t.dtype != found => Err(IrError::DType {
            context: format!("{OP} input {i} (body `{}` declares it)", g.name),
            expected: t.dtype.name().into(),
            found,
        }),
        _ => Ok(()),
    }
}

/// Runs the op.
pub(super) fn eval(cx: &EvalCx, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let g = body(node, inputs.len())?;
    let mut args = Vec::with_capacity(inputs.len());
    let mut shape: Vec<usize> = Vec::new();
    for i in 0..inputs.len() {
        let t = input(inputs, i)?;
        check_input_dtype(g, i, t.dtype())?;
        shape = broadcast_shape(&shape, t.shape())?;
        args.push(t.clone());
    }
    let y = cx
        .run_subgraph(g, &args)?
        .pop()
        .ok_or_else(|| IrError::Invalid(format!("{OP} body `{}` returned nothing", g.name)))?;
    if y.shape() != shape.as_slice() {
        return shape_err(format!(
            "{OP} body `{}` produced shape {:?}, not the inputs' broadcast shape {shape:?}",
            g.name,
            y.shape()
        ));
    }
    if let Some(t) = &g.value(g.outputs[0]).ty {
        if t.dtype != y.dtype() {
            return Err(IrError::DType {
                context: format!("{OP} body `{}` output (declared)", g.name),
                expected: t.dtype.name().into(),
                found: y.dtype(),
            });
        }
    }
    Ok(vec![y])
}

/// Output type: the broadcast shape of all inputs, of the dtype the body declares for
/// its output.
pub(super) fn infer(node: &Node, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let g = body(node, inputs.len())?;
    let mut tys = Vec::with_capacity(inputs.len());
    for i in 0..inputs.len() {
        let t = in_ty(inputs, i)?.ty;
        check_input_dtype(g, i, t.dtype)?;
        tys.push(t);
    }
    let out = g.value(g.outputs[0]);
    let dtype = out.ty.as_ref().map(|t| t.dtype).ok_or_else(|| {
        IrError::Invalid(format!(
            "{OP} body `{}` output `{}` has no declared type",
            g.name, out.name
        ))
    })?;
    let shape = broadcast_types(&tys)?.shape;
    Ok(vec![TensorType::new(dtype, shape)])
}
