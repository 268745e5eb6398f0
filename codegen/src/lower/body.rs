//! The computation of an element-wise node as a small graph, the same for every
//! backend: a `FusedElementwise` node's body, or a single element-wise op wrapped as a
//! one-node body. Single-element constants move into the body (they become literals);
//! the other inputs are the kernel's parameters.

use crate::{CodegenError, Result};
use gopt_ir::ops::FusedOp;
use gopt_ir::{Graph, Node, Op, ValueId};

fn plan_err(node: &Node, what: &str) -> CodegenError {
    CodegenError::Plan(format!("node `{}` ({}): {what}", node.name, node.op))
}

/// The body of element-wise node `node` of `g`, and the graph values its inputs come
/// from (the kernel's parameters, in order).
pub fn of(g: &Graph, node: &Node) -> Result<(Graph, Vec<ValueId>)> {
    match node.op {
        Op::Fused(FusedOp::FusedElementwise) => {
            let b = node
                .attrs
                .graph("body")
                .map_err(|e| plan_err(node, &e.to_string()))?
                .clone();
            let params = node
                .inputs
                .iter()
                .map(|i| i.ok_or_else(|| plan_err(node, "absent input")))
                .collect::<Result<_>>()?;
            Ok((b, params))
        }
        Op::Elementwise(_) => single(g, node),
        _ => Err(plan_err(node, "not an element-wise node")),
    }
}

/// A single element-wise node as a one-op body over its own inputs.
fn single(g: &Graph, node: &Node) -> Result<(Graph, Vec<ValueId>)> {
    let mut body = Graph::new(&node.name);
    let mut ins = Vec::new();
    let mut params = Vec::new();
    for (k, i) in node.inputs.iter().enumerate() {
        match i {
            None => ins.push(None),
            Some(v) => {
                let ty = g
                    .ty(*v)
                    .map_err(|e| plan_err(node, &e.to_string()))?
                    .clone();
                match g.constant(*v).filter(|t| t.len() == 1) {
                    Some(t) => ins.push(Some(body.add_const(&format!("c{k}"), t.clone()))),
                    None => {
                        ins.push(Some(body.add_input(&format!("x{k}"), ty)));
                        params.push(*v);
                    }
                }
            }
        }
    }
    let id = body.add_node(&node.name, node.op, node.attrs.clone(), ins, &["y"]);
    let o = body.nodes[id.index()].outputs[0];
    body.values[o.index()].ty = g.value(node.outputs[0]).ty.clone();
    body.outputs = vec![o];
    Ok((body, params))
}
