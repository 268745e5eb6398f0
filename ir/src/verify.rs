//! The verifier. Later stages take a `Verified` graph, which only `verify` can make, so
//! emitting or optimizing an unchecked graph does not type-check (naga's `valid`).

use crate::error::{IrError, Result};
use crate::graph::{Graph, ValueId};
use crate::infer::infer_types;
use std::collections::HashSet;
use std::ops::Deref;

/// A graph that passed verification: handles in range, every value defined once, every
/// read defined, acyclic with nodes in topological order, every value typed.
#[derive(Clone, Debug, PartialEq)]
pub struct Verified(Graph);

impl Verified {
    /// Gives the graph back for rewriting (it must be verified again afterwards).
    pub fn into_inner(self) -> Graph {
        self.0
    }
}

impl Deref for Verified {
    type Target = Graph;
    fn deref(&self) -> &Graph {
        &self.0
    }
}

/// Checks structure, sorts nodes topologically and infers every type.
pub fn verify(mut graph: Graph) -> Result<Verified> {
    check_structure(&graph, &[])?;
    graph.sort_nodes()?;
    infer_types(&mut graph)?;
    for (i, v) in graph.values.iter().enumerate() {
        if v.ty.is_none() {
            return Err(IrError::Invalid(format!(
                "value `{}` (%{i}) has no type after inference",
                v.name
            )));
        }
    }
    Ok(Verified(graph))
}

/// Structural checks only (no types), recursing into sub-graphs. `outer` holds the names
/// visible from enclosing scopes, which sub-graph captures must resolve to.
pub fn check_structure(g: &Graph, outer: &[&str]) -> Result<()> {
    let n = g.values.len();
    let in_range = |v: ValueId, what: &str| -> Result<()> {
        if v.index() < n {
            Ok(())
        } else {
            Err(IrError::Invalid(format!(
                "{what} refers to value %{} but the graph has {n} values",
                v.0
            )))
        }
    };
    let mut defined: HashSet<ValueId> = HashSet::new();
    let mut define = |v: ValueId, what: &str| -> Result<()> {
        in_range(v, what)?;
        if !defined.insert(v) {
            return Err(IrError::Invalid(format!(
                "value `{}` ({v}) is defined twice ({what})",
                g.value(v).name
            )));
        }
        Ok(())
    };
    for &v in &g.inputs {
        define(v, "graph input")?;
        // Only the main graph (no enclosing scope) must type its inputs; a sub-graph's
        // inputs are typed by its op (Loop, Scan) from the op's own inputs.
        if outer.is_empty() && g.value(v).ty.is_none() {
            return Err(IrError::Invalid(format!(
                "graph input `{}` has no type",
                g.value(v).name
            )));
        }
    }
    for &v in g.constants.keys() {
        define(v, "constant")?;
    }
    for &v in &g.captures {
        define(v, "capture")?;
        let name = g.value(v).name.as_str();
        if !outer.contains(&name) {
            return Err(IrError::Invalid(format!(
                "sub-graph `{}` reads `{name}`, which no enclosing scope defines",
                g.name
            )));
        }
    }
    for node in &g.nodes {
        for &o in &node.outputs {
            define(o, &format!("output of node `{}`", node.name))?;
        }
    }
    for node in &g.nodes {
        for &i in node.inputs.iter().flatten() {
            in_range(i, &format!("input of node `{}`", node.name))?;
            if !defined.contains(&i) {
                return Err(IrError::Invalid(format!(
                    "node `{}` ({}) reads `{}`, which nothing produces",
                    node.name,
                    node.op,
                    g.value(i).name
                )));
            }
        }
    }
    for &o in &g.outputs {
        in_range(o, "graph output")?;
        if !defined.contains(&o) {
            return Err(IrError::Invalid(format!(
                "graph output `{}` is never produced",
                g.value(o).name
            )));
        }
    }
    g.topo_order()?;
    let mut visible: Vec<&str> = outer.to_vec();
    visible.extend(g.values.iter().map(|v| v.name.as_str()));
    for node in &g.nodes {
        for (_, sub) in node.attrs.graphs() {
            check_structure(sub, &visible).map_err(|e| IrError::Node {
                node: node.name.clone(),
                op: node.op.name().to_string(),
                source: Box::new(e),
            })?;
        }
    }
    Ok(())
}
