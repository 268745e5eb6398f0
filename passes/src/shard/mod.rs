//! Tensor parallelism (`--tensor-parallel N`), Megatron-style: a graph becomes N rank
//! graphs that together compute it, each holding 1/N of the attention heads and of the
//! MLP's intermediate columns.
//!
//! It runs on the specialized graph (shapes bound, shape arithmetic folded, verified),
//! before the optimizer: there the head count is a constant in a Reshape's target, the
//! products are plain MatMul/Gemm with their bias a separate Add (so the bias lands
//! after the AllReduce and is added once), and the optimizer then fuses each rank's
//! graph with the collectives in sight (it never moves work across them, and the cost
//! model prices them by link bandwidth).
//!
//! Which products split is found, not assumed ([`layout`]): every product of a whole
//! activation by a constant matrix is tried column-parallel (Q/K/V, merged Q/K/V cut per
//! part, up and gate, and the LM head); the split follows the data through the block
//! to a row-parallel product (the output projection, down), after which an AllReduce
//! sums the ranks' partial results. A column split that reaches anything else (a
//! residual Add, a LayerNorm over the split axis) is dropped; one that reaches a graph
//! output is gathered there (AllGather). A head count or column count that does not
//! divide by N is an error naming the node and the dim.

mod layout;
pub mod slice;

use gopt_ir::ops::{CollectiveOp, NnOp};
use gopt_ir::{Attr, Attrs, Graph, IrError, Node, NodeId, Op, Tensor, ValueId, Verified};
use layout::{analyze, known, Edit, Layouts, Outcome};
use std::collections::{HashMap, HashSet};

/// Errors of the sharding pass.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// A dim that must split N ways does not divide by N.
    #[error("tensor parallelism: node `{node}`: {what} does not divide into {ranks} ranks")]
    Indivisible {
        /// The node whose output or weight has the dim.
        node: String,
        /// Which dim, and its size.
        what: String,
        /// The rank count asked for.
        ranks: usize,
    },
    /// No attention or MLP block could be split.
    #[error("tensor parallelism: nothing in the model splits {ranks} ways{}", fmt_reasons(.reasons))]
    NothingToShard {
        /// The rank count asked for.
        ranks: usize,
        /// Why the candidate products were left whole (the first few).
        reasons: Vec<String>,
    },
    /// The graph has symbolic dims: it must be specialized first.
    #[error("tensor parallelism needs concrete shapes; {0} is symbolic")]
    Symbolic(String),
    /// A rank count of 0.
    #[error("--tensor-parallel must be at least 1")]
    NoRanks,
    /// An IR error while rewriting or verifying a rank graph.
    #[error(transparent)]
    Ir(#[from] IrError),
}

fn fmt_reasons(r: &[String]) -> String {
    if r.is_empty() {
        " (no product of an activation by a constant matrix)".into()
    } else {
        format!(": {}", r.join("; "))
    }
}

/// The result: one graph per rank, and what was split.
#[derive(Debug)]
pub struct Sharded {
    /// Rank `r`'s graph at `r`.
    pub ranks: Vec<Verified>,
    /// Column-parallel products, by node name.
    pub column: Vec<String>,
    /// Row-parallel products (each followed by an AllReduce), by node name.
    pub row: Vec<String>,
    /// Graph outputs gathered from a split (AllGather), by name.
    pub gathered: Vec<String>,
}

/// The collectives of one rank graph: each one's op and output bytes, in node order.
pub fn collectives(g: &Graph) -> Vec<(CollectiveOp, u64)> {
    g.nodes
        .iter()
        .filter_map(|n| match n.op {
            Op::Collective(c) => {
                let bytes = n
                    .outputs
                    .iter()
                    .filter_map(|v| g.value(*v).ty.as_ref())
                    .map(|t| {
                        t.shape
                            .iter()
                            .map(|d| d.known().unwrap_or(0))
                            .product::<u64>()
                            * t.dtype.size() as u64
                    })
                    .sum();
                Some((c, bytes))
            }
            _ => None,
        })
        .collect()
}

/// Splits `g` (specialized: every shape known) `ranks` ways. One rank is the identity.
pub fn shard(g: &Verified, ranks: usize) -> Result<Sharded, ShardError> {
    if ranks == 0 {
        return Err(ShardError::NoRanks);
    }
    if ranks == 1 {
        return Ok(Sharded {
            ranks: vec![g.clone()],
            column: Vec::new(),
            row: Vec::new(),
            gathered: Vec::new(),
        });
    }
    let mut seeds = choose_seeds(g, ranks)?;
    let mut dropped = Vec::new();
    let layouts = loop {
        match analyze(g, ranks, &seeds)? {
            Outcome::Done(l) => break l,
            Outcome::Conflict(c) => {
                if c.seeds.is_empty() {
                    return Err(IrError::Invalid(format!("sharding: {}", c.reason)).into());
                }
                for s in &c.seeds {
                    seeds.remove(s);
                }
                dropped.push(c.reason);
            }
        }
    };
    let name = |n: &NodeId| g.node(*n).name.clone();
    let row: Vec<String> = layouts
        .edits
        .iter()
        .filter(|(_, e)| matches!(e, Edit::Row { .. }))
        .map(|(n, _)| name(n))
        .collect();
    if row.is_empty() {
        dropped.truncate(3);
        return Err(ShardError::NothingToShard {
            ranks,
            reasons: dropped,
        });
    }
    let column: Vec<String> = layouts
        .edits
        .iter()
        .filter(|(_, e)| matches!(e, Edit::Column { .. }))
        .map(|(n, _)| name(n))
        .collect();
    let gathered = g
        .outputs
        .iter()
        .filter(|v| layouts.split.contains_key(v))
        .map(|v| g.value(*v).name.clone())
        .collect();
    let graphs = (0..ranks)
        .map(|r| rank_graph(g, &layouts, r, ranks))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Sharded {
        ranks: graphs,
        column,
        row,
        gathered,
    })
}

/// Products of a whole activation by a constant matrix, with their output segments
/// (a product read only through a Split along its columns, as a merged Q/K/V, has the
/// Split's pieces). A column count that does not divide is an error, unless the product
/// feeds a graph output (an LM head over an odd vocabulary), which then stays whole.
fn choose_seeds(g: &Graph, ranks: usize) -> Result<HashMap<NodeId, Vec<u64>>, ShardError> {
    let consumers = g.consumers();
    let outputs: HashSet<ValueId> = g.outputs.iter().copied().collect();
    let mut seeds = HashMap::new();
    for (i, node) in g.nodes.iter().enumerate() {
        let gemm = match node.op {
            Op::Nn(NnOp::MatMul) => false,
            Op::Nn(NnOp::Gemm) if node.attrs.int_or("transA", 0)? == 0 => true,
            _ => continue,
        };
        let (Some(Some(a)), Some(Some(b))) = (node.inputs.first(), node.inputs.get(1)) else {
            continue;
        };
        let bias_ok = node
            .inputs
            .get(2)
            .copied()
            .flatten()
            .is_none_or(|c| g.konst(c).is_some());
        if g.konst(*a).is_some() || g.konst(*b).is_none() || g.ty(*b)?.shape.len() != 2 || !bias_ok
        {
            continue;
        }
        let out = node.outputs[0];
        let shape = known(g, out)?;
        let cols = *shape.last().unwrap_or(&1);
        let parts = merged_parts(g, &consumers, out).unwrap_or_else(|| vec![cols]);
        if let Some(p) = parts.iter().find(|p| *p % ranks as u64 != 0) {
            if reaches_output(g, &consumers, &outputs, out, 4) {
                continue;
            }
            return Err(ShardError::Indivisible {
                node: node.name.clone(),
                what: format!(
                    "its {p} output columns ({} {})",
                    if gemm { "Gemm" } else { "MatMul" },
                    fmt_shape(&shape)
                ),
                ranks,
            });
        }
        seeds.insert(NodeId(i as u32), parts);
    }
    Ok(seeds)
}

fn fmt_shape(s: &[u64]) -> String {
    format!("{s:?}")
}

/// The pieces of a product's output columns when all it feeds (through a bias Add or
/// reshapes that keep the last axis) is one Split along the last axis.
fn merged_parts(
    g: &Graph,
    consumers: &HashMap<ValueId, Vec<NodeId>>,
    mut v: ValueId,
) -> Option<Vec<u64>> {
    let cols = *known(g, v).ok()?.last()?;
    for _ in 0..4 {
        let users = consumers.get(&v)?;
        let [n] = users.as_slice() else { return None };
        let node = g.node(*n);
        let out = *node.outputs.first()?;
        let out_shape = known(g, out).ok()?;
        match node.op {
            Op::Shape(gopt_ir::ops::ShapeOp::Split) => {
                let r = out_shape.len() as i64;
                let axis = node.attrs.int_or("axis", 0).ok()?;
                if axis != r - 1 && axis != -1 {
                    return None;
                }
                let parts: Vec<u64> = node
                    .outputs
                    .iter()
                    .map(|&o| known(g, o).ok().and_then(|s| s.last().copied()))
                    .collect::<Option<_>>()?;
                return (parts.iter().sum::<u64>() == cols).then_some(parts);
            }
            _ if out_shape.last() != Some(&cols) => return None,
            Op::Elementwise(gopt_ir::ops::ElementwiseOp::Add)
            | Op::Shape(gopt_ir::ops::ShapeOp::Reshape) => v = out,
            _ => return None,
        }
    }
    None
}

fn reaches_output(
    g: &Graph,
    consumers: &HashMap<ValueId, Vec<NodeId>>,
    outputs: &HashSet<ValueId>,
    v: ValueId,
    depth: usize,
) -> bool {
    outputs.contains(&v)
        || (depth > 0
            && consumers.get(&v).is_some_and(|ns| {
                ns.iter().any(|n| {
                    g.node(*n)
                        .outputs
                        .iter()
                        .any(|o| reaches_output(g, consumers, outputs, *o, depth - 1))
                })
            }))
}

/// Rank `rank`'s graph: its pieces of the split constants, retargeted reshapes and
/// splits, an AllReduce after each row-parallel product, an AllGather before each split
/// graph output; then verified (types inferred anew).
fn rank_graph(g: &Graph, l: &Layouts, rank: usize, ranks: usize) -> Result<Verified, ShardError> {
    let mut h = Graph::clone(g);
    let cut = |h: &mut Graph,
               nid: NodeId,
               input: usize,
               axis: usize,
               parts: &[u64]|
     -> Result<(), ShardError> {
        let Some(v) = h.nodes[nid.index()].inputs.get(input).copied().flatten() else {
            return Ok(());
        };
        let t = h
            .constant(v)
            .ok_or_else(|| IrError::Invalid(format!("`{}` is not a constant", h.value(v).name)))?;
        let p = slice::piece(t, axis, parts, rank, ranks)?;
        let name = format!("{}/rank{rank}", h.value(v).name);
        let c = h.add_const(&name, p);
        h.nodes[nid.index()].inputs[input] = Some(c);
        Ok(())
    };
    let group = |extra: Option<i64>| {
        let mut a = Attrs::default();
        a.set("ranks", Attr::Int(ranks as i64));
        a.set("group", Attr::Int(0));
        if let Some(axis) = extra {
            a.set("axis", Attr::Int(axis));
        }
        a
    };
    for (nid, edit) in &l.edits {
        let node = g.node(*nid);
        match edit {
            Edit::Column { w_axis, parts } => {
                cut(&mut h, *nid, 1, *w_axis, parts)?;
                if let Some(c) = node.inputs.get(2).copied().flatten() {
                    let shape = known(g, c)?;
                    if shape.last() == Some(&parts.iter().sum::<u64>()) {
                        cut(&mut h, *nid, 2, shape.len() - 1, parts)?;
                    }
                }
            }
            Edit::Row { w_axis, parts } => {
                cut(&mut h, *nid, 1, *w_axis, parts)?;
                if rank != 0 && node.inputs.len() > 2 {
                    h.nodes[nid.index()].inputs[2] = None;
                }
                let out = node.outputs[0];
                let partial = h.add_value(&format!("{}/partial", g.value(out).name), None);
                h.nodes[nid.index()].outputs[0] = partial;
                h.nodes.push(Node {
                    name: format!("{}/allreduce", node.name),
                    op: Op::Collective(CollectiveOp::AllReduce),
                    attrs: group(None),
                    inputs: vec![Some(partial)],
                    outputs: vec![out],
                });
            }
            Edit::Operand { input, axis, parts } => cut(&mut h, *nid, *input, *axis, parts)?,
            Edit::TargetShape { axis } => {
                let mut shape: Vec<i64> = known(g, node.outputs[0])?
                    .iter()
                    .map(|&d| d as i64)
                    .collect();
                shape[*axis] /= ranks as i64;
                let c = h.add_const(
                    &format!("{}/shape/rank{rank}", node.name),
                    Tensor::from_i64s(&shape),
                );
                h.nodes[nid.index()].inputs[1] = Some(c);
            }
            Edit::SplitSizes => {
                let sizes: Vec<i64> = node
                    .outputs
                    .iter()
                    .map(|&o| {
                        let s = known(g, o)?;
                        let axis = l.split.get(&o).map_or(0, |s| s.axis);
                        Ok(s[axis] as i64 / ranks as i64)
                    })
                    .collect::<Result<_, ShardError>>()?;
                let c = h.add_const(
                    &format!("{}/sizes/rank{rank}", node.name),
                    Tensor::from_i64s(&sizes),
                );
                h.nodes[nid.index()].inputs[1] = Some(c);
            }
        }
    }
    let mut gathered: HashMap<ValueId, ValueId> = HashMap::new();
    for i in 0..h.outputs.len() {
        let v = h.outputs[i];
        let Some(s) = l.split.get(&v) else { continue };
        let w = match gathered.get(&v) {
            Some(w) => *w,
            None => {
                let name = h.value(v).name.clone();
                h.values[v.index()].name = format!("{name}/shard");
                let w = h.add_value(&name, None);
                h.nodes.push(Node {
                    name: format!("{name}/allgather"),
                    op: Op::Collective(CollectiveOp::AllGather),
                    attrs: group(Some(s.axis as i64)),
                    inputs: vec![Some(v)],
                    outputs: vec![w],
                });
                gathered.insert(v, w);
                w
            }
        };
        h.outputs[i] = w;
    }
    let outs: Vec<ValueId> = h.nodes.iter().flat_map(|n| n.outputs.clone()).collect();
    for v in outs {
        h.values[v.index()].ty = None;
    }
    h.name = format!("{} (rank {rank} of {ranks})", g.name);
    Ok(gopt_ir::verify(h)?)
}
