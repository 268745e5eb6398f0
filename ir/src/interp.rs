//! The CPU reference interpreter: executes a graph node by node in topological order.
//! It is the oracle every backend is compared with, so it favours exactness; tensors are
//! dropped after their last use so whole models run in bounded memory.
//!
//! That memory is bounded by a [`MemoryLimit`] too: before a node runs, the bytes of
//! its outputs are predicted (from their inferred types, or by inferring the node on its
//! actual inputs) and added to the bytes the run holds; above the limit the run stops
//! with an error naming the node, instead of the allocator aborting the process.

mod memory;

use crate::dim::{Bindings, Dim};
use crate::error::{IrError, Result};
use crate::graph::{Graph, ValueId};
use crate::limit::{self, MemoryLimit};
use crate::ops::EvalCx;
use crate::tensor::Tensor;
use memory::{describe, predict, scratch, tensor_bytes, with_budget, Held};
use std::collections::HashMap;

/// Runs `graph` on `inputs` (one per graph input, in order) and returns its outputs,
/// within the machine's available memory.
pub fn run(graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    run_limited(graph, inputs, MemoryLimit::host(None))
}

/// [`run`] refusing, before it allocates, any node whose outputs would take the bytes
/// the run holds above `limit`.
pub fn run_limited(graph: &Graph, inputs: &[Tensor], limit: MemoryLimit) -> Result<Vec<Tensor>> {
    let bind = check_inputs(graph, inputs)?;
    with_budget(limit, || run_in(graph, inputs, &|_| None, &bind))
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

/// Runs a graph whose captured values are resolved by `outer` (for sub-graphs): within
/// the enclosing run's memory limit, or the machine's available memory outside a run.
pub fn run_scoped(
    graph: &Graph,
    inputs: &[Tensor],
    outer: &dyn Fn(&str) -> Option<Tensor>,
) -> Result<Vec<Tensor>> {
    if memory::active() {
        run_in(graph, inputs, outer, &Bindings::new())
    } else {
        with_budget(MemoryLimit::host(None), || {
            run_in(graph, inputs, outer, &Bindings::new())
        })
    }
}

/// Runs a graph within this thread's budget; `bind` sizes the symbols of its types.
fn run_in(
    graph: &Graph,
    inputs: &[Tensor],
    outer: &dyn Fn(&str) -> Option<Tensor>,
    bind: &Bindings,
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
    // Outputs nothing reads are dropped as soon as they are made.
    for (step, n) in order.iter().enumerate() {
        for v in &graph.node(*n).outputs {
            if !last_use.contains_key(v) {
                frees[step].push(*v);
            }
        }
    }
    let mut held = Held(0);
    let copies = inputs.iter().map(tensor_bytes).sum::<u128>();
    held.check(copies, || {
        (
            format!("graph `{}`", graph.name),
            "for the copies of its inputs".into(),
        )
    })?;
    held.add(copies);
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
        held.add(tensor_bytes(&t));
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
            if let Some(out) = predict(graph, node, &ins, bind) {
                let work = scratch(node, &ins, out);
                held.check(out.saturating_add(work), || {
                    let mut what = describe(graph, node, &ins, bind);
                    if work > 0 {
                        what += &format!(
                            " ({}) and working memory ({})",
                            limit::fmt_short(out),
                            limit::fmt_short(work)
                        );
                    }
                    (format!("node `{}` ({})", node.name, node.op.name()), what)
                })?;
            }
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
            held.add(tensor_bytes(&t));
            env[v.index()] = Some(t);
        }
        for v in &frees[step] {
            if let Some(t) = env[v.index()].take() {
                held.sub(tensor_bytes(&t));
            }
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
