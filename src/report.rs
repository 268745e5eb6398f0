//! What a graph holds, for `gopt compile`'s report and for tests that check what
//! specialization achieved: op histogram, weights, values whose dims are still symbolic,
//! and the shape computations that folding left behind.

use gopt_ir::{Dim, Graph, NodeId, ValueId};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// Ops that only compute shapes: once every dim is bound, none of them should remain.
pub const SHAPE_SOURCE_OPS: &[&str] = &["Shape", "Size"];

/// A summary of one graph.
#[derive(Clone, Debug, Serialize)]
pub struct GraphSummary {
    /// Number of nodes.
    pub nodes: usize,
    /// Nodes per op, most frequent first (ties by name).
    pub op_histogram: Vec<(String, usize)>,
    /// Elements of floating-point constants.
    pub params: usize,
    /// Bytes of all constants.
    pub weight_bytes: usize,
    /// Values whose type still has symbolic dims: `(name, type)`.
    pub symbolic_values: Vec<(String, String)>,
    /// The symbols those dims mention, sorted.
    pub symbols: Vec<String>,
    /// Shape computations still in the graph: `(node, op)`; see [`shape_computations`].
    pub shape_nodes: Vec<(String, String)>,
    /// Nodes whose inputs are all constants but that were not folded: `(node, op)`.
    pub constant_nodes: Vec<(String, String)>,
}

impl GraphSummary {
    /// Summarizes `graph` (whose values should be typed, i.e. verified).
    pub fn of(graph: &Graph) -> GraphSummary {
        let mut hist: BTreeMap<&str, usize> = BTreeMap::new();
        for n in &graph.nodes {
            *hist.entry(n.op.name()).or_default() += 1;
        }
        let mut op_histogram: Vec<(String, usize)> =
            hist.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        op_histogram.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let (params, weight_bytes) = graph.weight_stats();
        let mut symbolic_values = Vec::new();
        let mut syms = Vec::new();
        for v in &graph.values {
            if let Some(ty) = &v.ty {
                if ty.shape.iter().any(|d| d.known().is_none()) {
                    symbolic_values.push((v.name.clone(), ty.to_string()));
                    for d in &ty.shape {
                        d.symbols(&mut syms);
                    }
                }
            }
        }
        let mut symbols: Vec<String> = syms.iter().map(|s| s.to_string()).collect();
        symbols.sort();
        let describe = |ids: Vec<NodeId>| -> Vec<(String, String)> {
            ids.into_iter()
                .map(|n| {
                    let node = graph.node(n);
                    (node.name.clone(), node.op.name().to_string())
                })
                .collect()
        };
        GraphSummary {
            nodes: graph.nodes.len(),
            op_histogram,
            params,
            weight_bytes,
            symbolic_values,
            symbols,
            shape_nodes: describe(shape_computations(graph)),
            constant_nodes: describe(constant_nodes(graph)),
        }
    }
}

/// Nodes that compute shapes: `Shape`/`Size`, and every node whose non-constant inputs
/// all come from shape computations (Gather/Concat/Reshape/ConstantOfShape... over a
/// `Shape`). These fold away once the dims they depend on are bound.
pub fn shape_computations(graph: &Graph) -> Vec<NodeId> {
    let mut derived: HashSet<ValueId> = HashSet::new();
    let mut out = Vec::new();
    let order = graph
        .topo_order()
        .unwrap_or_else(|_| (0..graph.nodes.len() as u32).map(NodeId).collect());
    for nid in order {
        let node = graph.node(nid);
        let dynamic: Vec<ValueId> = node
            .inputs
            .iter()
            .flatten()
            .copied()
            .filter(|v| graph.konst(*v).is_none())
            .collect();
        let is_shape = SHAPE_SOURCE_OPS.contains(&node.op.name())
            || (!dynamic.is_empty() && dynamic.iter().all(|v| derived.contains(v)));
        if is_shape {
            derived.extend(node.outputs.iter().copied());
            out.push(nid);
        }
    }
    out
}

/// Nodes none of whose inputs is a run-time value (folding leaves those whose result is
/// too large to materialize, or that fail on their constants).
pub fn constant_nodes(graph: &Graph) -> Vec<NodeId> {
    graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            n.attrs.graphs().next().is_none()
                && n.inputs.iter().flatten().all(|v| graph.konst(*v).is_some())
        })
        .map(|(i, _)| NodeId(i as u32))
        .collect()
}

/// Symbols mentioned by the graph inputs' types, in order of first appearance.
pub fn input_symbols(graph: &Graph) -> Vec<String> {
    let mut syms = Vec::new();
    for &v in &graph.inputs {
        if let Some(ty) = &graph.value(v).ty {
            for d in &ty.shape {
                d.symbols(&mut syms);
            }
        }
    }
    syms.iter().map(|s| s.to_string()).collect()
}

/// `n` bytes in human units (`1.5 MiB`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// A count in human units (`1.23 M`).
pub fn human_count(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{:.1} k", n as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2} M", n as f64 / 1e6),
        _ => format!("{:.2} G", n as f64 / 1e9),
    }
}

/// Formats a symbolic dim list as `[batch, 3, 224, 224]`.
pub fn fmt_dims(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}
