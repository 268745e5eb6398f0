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

    /// Narrows value `v`'s type to `ty`: the same dtype and rank, each known dim kept,
    /// symbolic dims made known (a GPU plan lays a data-dependent size out at its
    /// bound). The structure is untouched and every value stays typed, so the graph
    /// stays verified; anything else is an error.
    pub fn refine_type(&mut self, v: ValueId, ty: crate::graph::TensorType) -> Result<()> {
        let name = &self.0.value(v).name;
        let old = self.0.ty(v)?;
        let kept = old.dtype == ty.dtype
            && old.shape.len() == ty.shape.len()
            && old
                .shape
                .iter()
                .zip(&ty.shape)
                .all(|(was, now)| match (was, now) {
                    (crate::dim::Dim::Known(a), crate::dim::Dim::Known(b)) => a == b,
                    (crate::dim::Dim::Known(_), _) => false,
                    (_, crate::dim::Dim::Known(_)) => true,
                    (_, _) => was == now,
                });
        if !kept {
            return Err(IrError::Invalid(format!(
                "value `{name}`: type {old} cannot be narrowed to {ty} (only symbolic \
                 dims may become known)"
            )));
        }
        self.0.values[v.index()].ty = Some(ty);
        Ok(())
    }
}

/// A verified graph lends its graph wherever one is borrowed (the rank graphs a
/// tensor-parallel simulation runs).
impl std::borrow::Borrow<Graph> for Verified {
    fn borrow(&self) -> &Graph {
        &self.0
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
/// visible from enclosing scopes, which sub-graph captures must resolve to; it is empty
/// for a top-level graph, whose inputs must be typed (a sub-graph's inputs may be
/// untyped: ONNX bodies often leave loop-carried values to the enclosing node).
pub fn check_structure(g: &Graph, outer: &[&str]) -> Result<()> {
    check_graph(g, outer, outer.is_empty())
}

fn check_graph(g: &Graph, outer: &[&str], top_level: bool) -> Result<()> {
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
        if top_level && g.value(v).ty.is_none() {
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
            check_graph(sub, &visible, false).map_err(|e| IrError::Node {
                node: node.name.clone(),
                op: node.op.name().to_string(),
                source: Box::new(e),
            })?;
        }
    }
    Ok(())
}
