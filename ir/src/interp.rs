//! The CPU reference interpreter: executes a graph node by node in topological order.
//! It is the oracle every backend is compared with, so it favours exactness; tensors are
//! dropped after their last use so whole models run in bounded memory.

use crate::dim::{Bindings, Dim};
use crate::error::{IrError, Result};
use crate::graph::{Graph, ValueId};
use crate::ops::EvalCx;
use crate::tensor::Tensor;
use std::collections::HashMap;

/// Runs `graph` on `inputs` (one per graph input, in order) and returns its outputs.
pub fn run(graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    check_inputs(graph, inputs)?;
    run_scoped(graph, inputs, &|_| None)
}

/// Checks run-time inputs against the declared input types: count, dtype, rank, known
/// dims, and that each symbol takes one size throughout.
pub fn check_inputs(graph: &Graph, inputs: &[Tensor]) -> Result<Bindings> {
    if inputs.len() != graph.inputs.len() {
        return Err(IrError::Input {
            name: graph.name.clone(),
            msg: format!(
                "expected {} inputs, got {}",
                graph.inputs.len(),
                inputs.len()
            ),
        });
    }
    let mut bind = Bindings::new();
    for (&v, t) in graph.inputs.iter().zip(inputs) {
        let val = graph.value(v);
        let Some(ty) = &val.ty else { continue };
        let err = |msg: String| IrError::Input {
            name: val.name.clone(),
            msg,
        };
        if ty.dtype != t.dtype() {
            return Err(err(format!(
                "expected dtype {}, got {}",
                ty.dtype,
                t.dtype()
            )));
        }
        if ty.shape.len() != t.rank() {
            return Err(err(format!(
                "expected rank {} {}, got shape {:?}",
                ty.shape.len(),
                crate::dim::fmt_shape(&ty.shape),
                t.shape()
            )));
        }
        for (i, (d, &n)) in ty.shape.iter().zip(t.shape()).enumerate() {
            match d {
                Dim::Known(k) if *k as usize != n => {
                    return Err(err(format!(
                        "dim {i} must be {k} (declared {}), got shape {:?}",
                        crate::dim::fmt_shape(&ty.shape),
                        t.shape()
                    )));
                }
                Dim::Sym(s) => match bind.get(&**s) {
                    Some(&prev) if prev as usize != n => {
                        return Err(err(format!(
                            "dim {i} (`{s}`) is {n} here but {prev} in an earlier input"
                        )));
                    }
                    _ => {
                        bind.insert(s.to_string(), n as u64);
                    }
                },
                _ => {}
            }
        }
    }
    Ok(bind)
}

/// Runs a graph whose captured values are resolved by `outer` (for sub-graphs).
pub fn run_scoped(
    graph: &Graph,
    inputs: &[Tensor],
    outer: &dyn Fn(&str) -> Option<Tensor>,
) -> Result<Vec<Tensor>> {
    if inputs.len() != graph.inputs.len() {
        return Err(IrError::Invalid(format!(
            "graph `{}` takes {} inputs, got {}",
            graph.name,
            graph.inputs.len(),
            inputs.len()
        )));
    }
    let order = graph.topo_order()?;
    // Last use of each value, so its tensor can be dropped early.
    let mut last_use: HashMap<ValueId, usize> = HashMap::new();
    let by_name: HashMap<&str, ValueId> = graph
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.as_str(), ValueId(i as u32)))
        .collect();
    for (step, n) in order.iter().enumerate() {
        let node = graph.node(*n);
        for v in node.inputs.iter().flatten() {
            last_use.insert(*v, step);
        }
        // Values a sub-graph captures are read at this step too.
        for (_, sub) in node.attrs.graphs() {
            for c in &sub.captures {
                if let Some(&v) = by_name.get(sub.value(*c).name.as_str()) {
                    last_use.insert(v, step);
                }
            }
        }
    }
    for o in &graph.outputs {
        last_use.insert(*o, usize::MAX);
    }
    let mut frees: Vec<Vec<ValueId>> = vec![Vec::new(); order.len()];
    for (&v, &last) in &last_use {
        if last != usize::MAX {
            frees[last].push(v);
        }
    }
    let mut env: Vec<Option<Tensor>> = vec![None; graph.values.len()];
    for (&v, t) in graph.inputs.iter().zip(inputs) {
        env[v.index()] = Some(t.clone());
    }
    for &c in &graph.captures {
        let name = &graph.value(c).name;
        let t = outer(name).ok_or_else(|| {
            IrError::Invalid(format!(
                "graph `{}` captures `{name}`, which no enclosing scope defines",
                graph.name
            ))
        })?;
        env[c.index()] = Some(t);
    }
    for (step, &nid) in order.iter().enumerate() {
        let node = graph.node(nid);
        let outs = {
            let ins: Vec<Option<&Tensor>> = node
                .inputs
                .iter()
                .map(|i| match i {
                    None => Ok(None),
                    Some(v) => lookup(graph, &env, *v).map(Some),
                })
                .collect::<Result<_>>()
                .map_err(|e| wrap(node, e))?;
            let scope = |name: &str| -> Option<Tensor> {
                match by_name.get(name) {
                    Some(&v) => env[v.index()]
                        .clone()
                        .or_else(|| graph.constant(v).cloned()),
                    None => outer(name),
                }
            };
            let cx = EvalCx { lookup: &scope };
            node.op.eval(&cx, node, &ins).map_err(|e| wrap(node, e))?
        };
        if outs.len() < node.outputs.len() {
            return Err(wrap(
                node,
                IrError::Invalid(format!(
                    "produced {} outputs, graph expects {}",
                    outs.len(),
                    node.outputs.len()
                )),
            ));
        }
        for (v, t) in node.outputs.iter().zip(outs) {
            env[v.index()] = Some(t);
        }
        for v in &frees[step] {
            env[v.index()] = None;
        }
    }
    graph
        .outputs
        .iter()
        .map(|&o| lookup(graph, &env, o).cloned())
        .collect()
}

fn lookup<'a>(graph: &'a Graph, env: &'a [Option<Tensor>], v: ValueId) -> Result<&'a Tensor> {
    env[v.index()]
        .as_ref()
        .or_else(|| graph.constant(v))
        .ok_or_else(|| {
            IrError::Invalid(format!(
                "value `{}` ({v}) is read before it is defined",
                graph.value(v).name
            ))
        })
}

fn wrap(node: &crate::graph::Node, e: IrError) -> IrError {
    match e {
        IrError::Node { .. } => e,
        e => IrError::Node {
            node: node.name.clone(),
            op: node.op.name().to_string(),
            source: Box::new(e),
        },
    }
}
