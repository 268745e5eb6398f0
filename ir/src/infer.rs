//! Shape and type inference over a whole graph: every node's family computes its output
//! types from its input types (and from input values where they are constants), in
//! topological order. Declared output types from the model are merged in, never trusted
//! over what inference proves.

use crate::attr::Attr;
use crate::dim::Dim;
use crate::error::{IrError, Result};
use crate::graph::{Graph, NodeId, TensorType};
use crate::ops::{InferCx, InferInput};
use std::collections::HashMap;

/// Infers the type of every node output. Input and constant types must be present.
pub fn infer_types(graph: &mut Graph) -> Result<()> {
    for &v in &graph.inputs {
        let val = graph.value(v);
        if let Some(ty) = &val.ty {
            crate::budget::check_type(ty).map_err(|e| IrError::Input {
                name: val.name.clone(),
                msg: e.to_string(),
            })?;
        }
    }
    let order = graph.topo_order()?;
    let mut cx = InferCx::default();
    for nid in order {
        type_captures(graph, nid);
        let node = graph.node(nid);
        let ins: Vec<Option<InferInput>> = node
            .inputs
            .iter()
            .map(|i| match i {
                None => Ok(None),
                Some(v) => Ok(Some(InferInput {
                    ty: graph.ty(*v)?,
                    value: graph.small_constant(*v),
                })),
            })
            .collect::<Result<_>>()
            .map_err(|e| node_err(graph, nid.index(), e))?;
        let tys = node
            .op
            .infer(&mut cx, node, &ins)
            .map_err(|e| node_err(graph, nid.index(), e))?;
        if tys.len() < node.outputs.len() {
            let e = IrError::Invalid(format!(
                "inference gave {} outputs, node has {}",
                tys.len(),
                node.outputs.len()
            ));
            return Err(node_err(graph, nid.index(), e));
        }
        let outs = node.outputs.clone();
        for (v, ty) in outs.into_iter().zip(tys) {
            let merged = match &graph.value(v).ty {
                Some(declared) => {
                    merge(declared, ty).map_err(|e| node_err(graph, nid.index(), e))?
                }
                None => ty,
            };
            // A declared dim may fill in a symbolic one: the result is checked again.
            crate::budget::check_type(&merged).map_err(|e| node_err(graph, nid.index(), e))?;
            graph.values[v.index()].ty = Some(merged);
        }
    }
    Ok(())
}

/// Gives the captures of node `nid`'s sub-graphs the current types of the outer values
/// they name, so that control-flow ops can infer their bodies on their own.
fn type_captures(graph: &mut Graph, nid: NodeId) {
    let node = graph.node(nid);
    if node.attrs.graphs().next().is_none() {
        return;
    }
    let by_name: HashMap<&str, &TensorType> = graph
        .values
        .iter()
        .filter_map(|v| v.ty.as_ref().map(|t| (v.name.as_str(), t)))
        .collect();
    let mut updates: Vec<(String, usize, TensorType)> = Vec::new();
    for (attr, sub) in node.attrs.graphs() {
        for &c in &sub.captures {
            if let Some(t) = by_name.get(sub.value(c).name.as_str()) {
                updates.push((attr.to_string(), c.index(), (*t).clone()));
            }
        }
    }
    let node = &mut graph.nodes[nid.index()];
    for (attr, c, t) in updates {
        if let Some(Attr::Graph(sub)) = node.attrs.0.get_mut(&attr) {
            sub.values[c].ty = Some(t);
        }
    }
}

/// Combines a declared type with an inferred one: dtypes must agree; a known dim wins
/// over a symbolic one; two different known dims are an error; between two symbolic
/// dims the declared one wins (it names what inference could only number).
fn merge(declared: &TensorType, inferred: TensorType) -> Result<TensorType> {
    if declared.dtype != inferred.dtype {
        return Err(IrError::Invalid(format!(
            "declared type {declared} but inference gives {inferred}"
        )));
    }
    if declared.shape.len() != inferred.shape.len() {
        // A declared shape of another rank is a model bug; the inferred one is right.
        return Ok(inferred);
    }
    let mut shape = Vec::with_capacity(inferred.shape.len());
    for (d, i) in declared.shape.iter().zip(inferred.shape) {
        shape.push(match (d, i) {
            (Dim::Known(a), Dim::Known(b)) if *a != b => {
                return Err(IrError::Invalid(format!(
                    "declared type {declared} conflicts with inferred dim {b}"
                )));
            }
            (Dim::Known(a), _) => Dim::Known(*a),
            (_, Dim::Known(b)) => Dim::Known(b),
            (d, _) => d.clone(),
        });
    }
    Ok(TensorType::new(inferred.dtype, shape))
}

fn node_err(graph: &Graph, i: usize, e: IrError) -> IrError {
    let n = &graph.nodes[i];
    match e {
        IrError::Node { .. } => e,
        e => IrError::Node {
            node: n.name.clone(),
            op: n.op.name().to_string(),
            source: Box::new(e),
        },
    }
}
