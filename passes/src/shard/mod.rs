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
mod product;
mod rank;
pub mod slice;

use gopt_ir::ops::{CollectiveOp, NnOp};
use gopt_ir::{Graph, IrError, NodeId, Op, ValueId, Verified};
use layout::{analyze, known, Edit, Outcome, Seed, Split};
use rank::rank_graph;
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

/// How one graph input or output of the unsharded graph is laid out over the ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Every rank holds all of it.
    Whole,
    /// Cut along `axis` into `blocks` equal blocks, rank `r` holding block
    /// `r * blocks / ranks` (with fewer blocks than ranks, as replicated K/V heads,
    /// consecutive ranks hold the same block). An input is scattered so; an output
    /// (a KV cache) stays on its ranks.
    Split {
        /// The axis.
        axis: usize,
        /// How many distinct blocks.
        blocks: usize,
    },
    /// Computed split and gathered (AllGather) inside the rank graphs: every rank
    /// outputs all of it.
    Gathered,
}

impl Placement {
    fn of(s: &Split, ranks: usize) -> Placement {
        Placement::Split {
            axis: s.axis,
            blocks: ranks / s.rep as usize,
        }
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
    /// Each graph input's placement, in the graph's input order.
    pub inputs: Vec<Placement>,
    /// Each graph output's placement, in the graph's output order.
    pub outputs: Vec<Placement>,
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

/// Splits `g` (specialized: every shape known) `ranks` ways. One rank keeps the
/// structure: the same products marked, each collective over one rank (NCCL's
/// identity), so the multi-GPU path can be built and run on one GPU.
pub fn shard(g: &Verified, ranks: usize) -> Result<Sharded, ShardError> {
    shard_keeping(g, ranks, &HashSet::new())
}

/// [`shard`], the outputs in `per_rank` left with their ranks when split (a
/// generation step's presents, which the next step reads on the same rank) rather
/// than gathered.
pub fn shard_keeping(
    g: &Verified,
    ranks: usize,
    per_rank: &HashSet<ValueId>,
) -> Result<Sharded, ShardError> {
    if ranks == 0 {
        return Err(ShardError::NoRanks);
    }
    let mut seeds = choose_seeds(g, ranks)?;
    let mut dropped = Vec::new();
    let layouts = loop {
        match analyze(g, ranks, &seeds, per_rank)? {
            Outcome::Done(l) => break l,
            Outcome::Replicate { seeds: which, rep } => {
                for s in &which {
                    match seeds.get_mut(s) {
                        Some(seed) if seed.rep == 1 => seed.rep = rep,
                        _ => {
                            return Err(IrError::Invalid(format!(
                                "sharding: `{}` replicated twice",
                                g.node(*s).name
                            ))
                            .into())
                        }
                    }
                }
            }
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
        .filter(|v| layouts.split.get(v).is_some_and(|s| !s.cache))
        .map(|v| g.value(*v).name.clone())
        .collect();
    let inputs = g
        .inputs
        .iter()
        .map(|v| match layouts.inputs.get(v) {
            Some(s) => Placement::of(s, ranks),
            None => Placement::Whole,
        })
        .collect();
    let outputs = g
        .outputs
        .iter()
        .map(|v| match layouts.split.get(v) {
            Some(s) if s.cache => Placement::of(s, ranks),
            Some(_) => Placement::Gathered,
            None => Placement::Whole,
        })
        .collect();
    let graphs = (0..ranks)
        .map(|r| rank_graph(g, &layouts, r, ranks))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Sharded {
        ranks: graphs,
        column,
        row,
        gathered,
        inputs,
        outputs,
    })
}

/// Products of a whole activation by a constant matrix, with their output segments
/// (a product read only through a Split along its columns, as a merged Q/K/V, has the
/// Split's pieces). A column count that does not divide is an error, unless the product
/// feeds a graph output (an LM head over an odd vocabulary), which then stays whole.
fn choose_seeds(g: &Graph, ranks: usize) -> Result<HashMap<NodeId, Seed>, ShardError> {
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
        // A constant matrix, or (MatMul only) a quantized one.
        let usable = match product::weight(g, *b)? {
            Some(product::Weight::Plain) => true,
            Some(product::Weight::Dequantized { .. }) => !gemm,
            None => false,
        };
        if g.konst(*a).is_some() || !usable || !bias_ok {
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
        seeds.insert(NodeId(i as u32), Seed { parts, rep: 1 });
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
