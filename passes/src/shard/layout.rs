//! Where each value lives across the ranks, given the column-parallel products (the
//! seeds): a forward pass over the graph in topological order. A seed's output is split
//! along its last axis; the split flows through element-wise ops, reshapes (to the head
//! axis: `[b,s,H*d]` → `[b,s,H,d]`), transposes, softmax and normalizations over other
//! axes, batched products over the head axis, and splits and concatenations along other
//! axes; a product of a value split along its contracted axis by a constant weight is
//! row-parallel and gives every rank a partial sum (an AllReduce follows it). A split
//! value that reaches an op none of these rules covers is a [`Conflict`]: the seeds it
//! came from are dropped and the pass runs again.

use super::product::{product, whole_operands};
use super::ShardError;
use gopt_ir::ops::{AttentionOp, NnOp, ReduceOp, ShapeOp};
use gopt_ir::{Graph, NodeId, Op, ValueId};
use std::collections::{BTreeSet, HashMap, HashSet};

/// How a value is laid out across the ranks (absent from [`Layouts::split`]: every rank
/// holds all of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The axis each rank holds a block of.
    pub axis: usize,
    /// Consecutive segments of the axis (sizes in the whole value); of each, rank `r`
    /// holds the `r`-th of N equal blocks. One segment unless a merged Q/K/V product.
    pub parts: Vec<u64>,
    /// How many ranks hold the same block (replicated K/V heads): the axis is cut into
    /// N/rep blocks and rank `r` holds block `r / rep`. 1 for a plain split.
    pub rep: u64,
    /// How many axes from `axis` on the split covers, taken as one merged axis: 2 after
    /// an Expand that repeats replicated K/V heads (the rank keeps 1/rep of the
    /// repeats), until the Reshape that merges the two.
    pub span: usize,
    /// The Reshape (and its output axis) that made the head axis replicated, for the
    /// error when the replication reaches anything but K/V repetition.
    pub origin: Option<(NodeId, usize)>,
    /// A KV cache (a Concat of a past cache with the new K/V, a `TensorScatter` into
    /// one, or an output the caller keeps per rank): kept per rank at a graph output,
    /// not gathered.
    pub cache: bool,
    /// The seeds this split came from.
    pub seeds: BTreeSet<NodeId>,
}

impl Split {
    /// A plain split along `axis`.
    pub fn along(axis: usize, parts: Vec<u64>) -> Split {
        Split {
            axis,
            parts,
            rep: 1,
            span: 1,
            origin: None,
            cache: false,
            seeds: BTreeSet::new(),
        }
    }

    /// The same layout moved to `axis` (a value computed from this one).
    pub(super) fn moved(&self, axis: usize) -> Split {
        Split {
            axis,
            cache: false,
            seeds: BTreeSet::new(),
            ..self.clone()
        }
    }

    /// Whether two splits cut their axis the same way (axis aside).
    pub(super) fn same_cut(&self, o: &Split) -> bool {
        self.parts == o.parts && self.rep == o.rep && self.span == o.span
    }
}

/// A column-parallel product and how its output columns split: `parts` as in
/// [`Split::parts`], `rep` as in [`Split::rep`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seed {
    /// Output column segments.
    pub parts: Vec<u64>,
    /// Ranks per block (1 unless its heads are replicated).
    pub rep: u64,
}

/// What the rank graphs change at one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// A column-parallel product: weight input 1 cut along `w_axis`, bias input 2 (if
    /// any) along its last axis, into N/rep blocks.
    Column {
        w_axis: usize,
        parts: Vec<u64>,
        rep: u64,
    },
    /// A row-parallel product: weight input 1 cut along `w_axis`; Gemm's bias kept on
    /// rank 0 only; an AllReduce of its output follows.
    Row { w_axis: usize, parts: Vec<u64> },
    /// Constant input `input` cut along `axis` into N/rep blocks.
    Operand {
        input: usize,
        axis: usize,
        parts: Vec<u64>,
        rep: u64,
    },
    /// Shape input 1 (Reshape, Expand) becomes the output's shape with each listed
    /// axis divided by its divisor.
    TargetShape { divide: Vec<(usize, u64)> },
    /// Split sizes (input 1) divided by `ways`: the split runs along the split axis.
    SplitSizes { ways: u64 },
    /// A 3-D ONNX `Attention`'s `q_num_heads` and `kv_num_heads`: the rank's share.
    HeadCounts { q: i64, kv: i64 },
}

/// The result of the analysis.
#[derive(Debug, Default)]
pub struct Layouts {
    /// Split values.
    pub split: HashMap<ValueId, Split>,
    /// Edits by node.
    pub edits: Vec<(NodeId, Edit)>,
    /// Graph inputs that arrive split (a past KV cache): each rank reads its shard.
    pub inputs: HashMap<ValueId, Split>,
}

/// A split value reached an op it cannot pass; `seeds` are to be dropped.
#[derive(Debug)]
pub struct Conflict {
    /// The seeds whose split reached the op.
    pub seeds: BTreeSet<NodeId>,
    /// Why, naming the node.
    pub reason: String,
}

/// The outcome of one analysis: the layouts, a conflict, or a hard error.
pub enum Outcome {
    /// Consistent.
    Done(Layouts),
    /// Retry without some seeds.
    Conflict(Conflict),
    /// Retry with these seeds' heads replicated `rep` ways (fewer K/V heads than ranks).
    Replicate {
        /// The seeds to replicate.
        seeds: BTreeSet<NodeId>,
        /// Ranks per head.
        rep: u64,
    },
}

/// What a rule found at one node.
pub(super) enum Found {
    /// Its split outputs.
    Outs(Vec<(ValueId, Split)>),
    /// No rule covers it; why.
    No(String),
    /// Its seeds must be replicated this many ways.
    Replicate(u64),
}

pub(super) type Res<T> = Result<T, ShardError>;

/// Runs the analysis of `g` split `ranks` ways with these seeds (column-parallel
/// products and their output segments); the outputs in `per_rank` stay with their
/// ranks when split (caches a generation step hands to the next), as a cache does.
pub fn analyze(
    g: &Graph,
    ranks: usize,
    seeds: &HashMap<NodeId, Seed>,
    per_rank: &HashSet<ValueId>,
) -> Res<Outcome> {
    let mut st = Layouts::default();
    let captured: BTreeSet<ValueId> = g.capture_uses().into_iter().flatten().collect();
    for nid in g.topo_order()? {
        let node = g.node(nid);
        let split_ins: Vec<(usize, Split)> = node
            .inputs
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.and_then(|v| st.split.get(&v)).map(|s| (i, s.clone())))
            .collect();
        let from: BTreeSet<NodeId> = split_ins
            .iter()
            .flat_map(|(_, s)| s.seeds.clone())
            .collect();
        let conflict = |why: String| {
            Ok(Outcome::Conflict(Conflict {
                seeds: from.clone(),
                reason: format!("node `{}` ({}): {why}", node.name, node.op),
            }))
        };
        // A candidate whose input is split already is row-parallel (or batched), not a
        // column-parallel product.
        if let Some(seed) = seeds.get(&nid).filter(|_| split_ins.is_empty()) {
            let out = g.ty(node.outputs[0])?;
            let w_axis = match node.op {
                Op::Nn(NnOp::Gemm) if node.attrs.int_or("transB", 0)? != 0 => 0,
                _ => 1,
            };
            st.edits.push((
                nid,
                Edit::Column {
                    w_axis,
                    parts: seed.parts.clone(),
                    rep: seed.rep,
                },
            ));
            let mut s = Split::along(out.shape.len() - 1, seed.parts.clone());
            s.rep = seed.rep;
            s.seeds = BTreeSet::from([nid]);
            st.split.insert(node.outputs[0], s);
            continue;
        }
        if split_ins.is_empty() {
            continue;
        }
        if let Some((_, s)) = split_ins
            .iter()
            .find(|(i, s)| s.span > 1 && !(*i == 0 && node.op == Op::Shape(ShapeOp::Reshape)))
        {
            return replicated_or(g, s, ranks, conflict("repeated K/V heads reach it".into()));
        }
        match rule(g, nid, ranks, &split_ins, &mut st)? {
            Found::Replicate(rep) => {
                return Ok(Outcome::Replicate { seeds: from, rep });
            }
            Found::Outs(outs) => {
                if outs.iter().any(|(v, _)| captured.contains(v)) {
                    return conflict("a sub-graph reads its split output".into());
                }
                for (v, mut s) in outs {
                    s.seeds = from.clone();
                    st.split.insert(v, s);
                }
            }
            Found::No(why) => {
                let c = conflict(why);
                match split_ins.iter().find(|(_, s)| s.origin.is_some()) {
                    Some((_, s)) => return replicated_or(g, s, ranks, c),
                    None => return c,
                }
            }
        }
    }
    for &v in &g.outputs {
        if per_rank.contains(&v) {
            if let Some(s) = st.split.get_mut(&v) {
                s.cache = true;
            }
        }
        if let Some(s) = st.split.get(&v) {
            if s.rep > 1 && !s.cache {
                let c = Ok(Outcome::Conflict(Conflict {
                    seeds: s.seeds.clone(),
                    reason: format!("output `{}` has replicated heads", g.value(v).name),
                }));
                return replicated_or(g, s, ranks, c);
            }
            if s.parts.len() != 1 {
                return Ok(Outcome::Conflict(Conflict {
                    seeds: s.seeds.clone(),
                    reason: format!("output `{}` is a merged Q/K/V product", g.value(v).name),
                }));
            }
        }
    }
    Ok(Outcome::Done(st))
}

/// `otherwise`, unless `s` is a replicated head axis, whose reaching anything but K/V
/// repetition is the error of its head count not dividing.
fn replicated_or(g: &Graph, s: &Split, ranks: usize, otherwise: Res<Outcome>) -> Res<Outcome> {
    let Some((origin, axis)) = s.origin else {
        return otherwise;
    };
    let shape = known(g, g.node(origin).outputs[0])?;
    Err(indivisible(g, origin, &shape, axis, ranks))
}

/// The split outputs of node `nid` whose split inputs are `ins`, recording its edits;
/// `Err(why)` when no rule covers it.
fn rule(
    g: &Graph,
    nid: NodeId,
    ranks: usize,
    ins: &[(usize, Split)],
    st: &mut Layouts,
) -> Res<Found> {
    let node = g.node(nid);
    let (i0, s0) = (ins[0].0, &ins[0].1);
    let out = node.outputs[0];
    let out_shape = known(g, out)?;
    let one = |s: Split| Ok(Found::Outs(vec![(out, s)]));
    let rank_of = |i: usize| -> Res<usize> {
        Ok(node.inputs[i].map_or(Ok(0), |v| g.ty(v).map(|t| t.shape.len()))?)
    };
    // Blocks along the split axis: rank r holds block r / rep of N / rep.
    let ways = ranks as u64 / s0.rep;
    match node.op {
        Op::Elementwise(_) => {
            let r = out_shape.len();
            let axis = s0.axis + r - rank_of(i0)?;
            for (i, s) in ins {
                if s.axis + r - rank_of(*i)? != axis || !s.same_cut(s0) {
                    return Ok(Found::No("its inputs are split differently".into()));
                }
            }
            if let Err(why) = whole_operands(g, nid, axis, r, s0, false, st)? {
                return Ok(Found::No(why));
            }
            one(s0.moved(axis))
        }
        Op::Shape(
            ShapeOp::Reshape
            | ShapeOp::Squeeze
            | ShapeOp::Unsqueeze
            | ShapeOp::Flatten
            | ShapeOp::Identity,
        ) if i0 == 0 => {
            let in_shape = known(g, node.inputs[0].ok_or_else(missing)?)?;
            let Some(b) = regroup(&in_shape, &out_shape, s0.axis) else {
                return Ok(Found::No(format!(
                    "the split axis {} does not survive the reshape",
                    s0.axis
                )));
            };
            let end = s0.axis + s0.span;
            let same = out_shape[b] == in_shape[s0.axis..end].iter().product::<u64>()
                && out_shape[b + 1..].iter().product::<u64>()
                    == in_shape[end..].iter().product::<u64>();
            let mut split = s0.moved(b);
            split.span = 1;
            if same {
                if out_shape[b] % ways != 0 {
                    return Err(indivisible(g, nid, &out_shape, b, ranks));
                }
            } else if s0.parts.len() == 1 && s0.span == 1 {
                let heads = out_shape[b];
                if heads % ways != 0 {
                    // Fewer heads than ranks, and the ranks a multiple of them: each
                    // head computed on N/heads ranks (K/V heads of grouped-query
                    // attention; query heads reaching a product are refused later).
                    if s0.rep == 1 && heads > 0 && ranks as u64 % heads == 0 {
                        return Ok(Found::Replicate(ranks as u64 / heads));
                    }
                    return Err(indivisible(g, nid, &out_shape, b, ranks));
                }
                split.parts = vec![heads];
                if s0.rep > 1 {
                    split.origin = Some((nid, b));
                }
            } else {
                return Ok(Found::No(
                    "a merged Q/K/V product or repeated heads reshaped across their parts".into(),
                ));
            }
            if node.op == Op::Shape(ShapeOp::Reshape) {
                st.edits.push((
                    nid,
                    Edit::TargetShape {
                        divide: vec![(b, ways)],
                    },
                ));
            }
            one(split)
        }
        Op::Shape(ShapeOp::Transpose) => {
            let r = out_shape.len();
            let perm: Vec<usize> = match node.attrs.ints("perm")? {
                Some(p) => p.iter().map(|&a| a as usize).collect(),
                None => (0..r).rev().collect(),
            };
            match perm.iter().position(|&a| a == s0.axis) {
                Some(b) => one(s0.moved(b)),
                None => Ok(Found::No("bad perm".into())),
            }
        }
        Op::Shape(ShapeOp::Expand) if i0 == 0 => {
            let axis = s0.axis + out_shape.len() - rank_of(0)?;
            let in_shape = known(g, node.inputs[0].ok_or_else(missing)?)?;
            let next_in = (s0.axis + 1 < in_shape.len()).then(|| in_shape[s0.axis + 1]);
            let next_out = out_shape.get(axis + 1).copied().unwrap_or(0);
            if s0.rep > 1 && next_in == Some(1) && next_out % s0.rep == 0 {
                // Replicated K/V heads repeated for the query heads: each rank keeps
                // 1/rep of the repeats, so the head axis and the repeats together are
                // one plain N-way split.
                st.edits.push((
                    nid,
                    Edit::TargetShape {
                        divide: vec![(axis, ways), (axis + 1, s0.rep)],
                    },
                ));
                let mut split = Split::along(axis, vec![out_shape[axis] * next_out]);
                split.span = 2;
                return one(split);
            }
            st.edits.push((
                nid,
                Edit::TargetShape {
                    divide: vec![(axis, ways)],
                },
            ));
            one(s0.moved(axis))
        }
        Op::Shape(ShapeOp::Split) if i0 == 0 => {
            let axis = norm_axis(node.attrs.int_or("axis", 0)?, out_shape.len());
            let outs: Vec<u64> = node
                .outputs
                .iter()
                .map(|&v| known(g, v).map(|s| s[axis]))
                .collect::<Res<_>>()?;
            if axis != s0.axis {
                return Ok(Found::Outs(
                    node.outputs
                        .iter()
                        .map(|&v| (v, s0.moved(s0.axis)))
                        .collect(),
                ));
            }
            if outs != s0.parts || node.inputs.get(1).copied().flatten().is_none() {
                return Ok(Found::No(format!(
                    "a split along the split axis into {outs:?}, not the product's parts {:?}",
                    s0.parts
                )));
            }
            st.edits.push((nid, Edit::SplitSizes { ways }));
            Ok(Found::Outs(
                node.outputs
                    .iter()
                    .zip(outs)
                    .map(|(&v, p)| {
                        let mut split = s0.moved(axis);
                        split.parts = vec![p];
                        (v, split)
                    })
                    .collect(),
            ))
        }
        Op::Shape(ShapeOp::Slice) if i0 == 0 => {
            let axes = match node.inputs.get(3).copied().flatten() {
                Some(a) => match g.small_constant(a) {
                    Some(t) => t.to_i64_vec(),
                    None => return Ok(Found::No("its axes are not constant".into())),
                },
                None => (0..out_shape.len() as i64).collect(),
            };
            let r = out_shape.len();
            if axes.iter().any(|&a| norm_axis(a, r) == s0.axis) {
                return Ok(Found::No("it slices the split axis".into()));
            }
            one(s0.moved(s0.axis))
        }
        Op::Shape(ShapeOp::Concat) => {
            let r = out_shape.len();
            let axis = norm_axis(node.attrs.int_or("axis", 0)?, r);
            if axis == s0.axis
                || ins
                    .iter()
                    .any(|(_, s)| s.axis != s0.axis || !s.same_cut(s0))
            {
                return Ok(Found::No("it concatenates along the split axis".into()));
            }
            // A past cache (a constant or an input) joined with the new K/V.
            cache_or_split(g, nid, r, s0, st)
        }
        Op::Reduce(
            ReduceOp::Softmax
            | ReduceOp::LogSoftmax
            | ReduceOp::LayerNormalization
            | ReduceOp::RMSNormalization,
        ) if i0 == 0 && ins.len() == 1 => {
            let r = out_shape.len();
            let axis = norm_axis(node.attrs.int_or("axis", -1)?, r);
            let over_rest = !matches!(
                node.op,
                Op::Reduce(ReduceOp::Softmax | ReduceOp::LogSoftmax)
            );
            if s0.axis == axis || (over_rest && s0.axis > axis) {
                return Ok(Found::No("it reduces over the split axis".into()));
            }
            one(s0.moved(s0.axis))
        }
        Op::Attention(AttentionOp::TensorScatter) if ins.iter().all(|(i, _)| *i < 2) => {
            // A cache written in place (a lowered decode step, or the opset-24 form):
            // the cache and the new entries split alike, along an axis other than the
            // one written (the heads, not the sequence); the write positions are whole.
            let r = out_shape.len();
            let written = norm_axis(node.attrs.int_or("axis", -2)?, r);
            if s0.axis == written
                || ins
                    .iter()
                    .any(|(_, s)| s.axis != s0.axis || !s.same_cut(s0))
            {
                return Ok(Found::No(
                    "it writes along the split axis, or its cache and update split differently"
                        .into(),
                ));
            }
            cache_or_split(g, nid, r, s0, st)
        }
        Op::Attention(AttentionOp::Attention) => attention(g, nid, ranks, ins, st),
        Op::Nn(NnOp::MatMul | NnOp::Gemm) => product(g, nid, ranks, ins, st),
        _ => Ok(Found::No("no sharding rule for this op".into())),
    }
}

/// The output of node `nid` (a Concat or a TensorScatter) split as `s0`, its unsplit
/// operands cut to match (or refused): a cache when one of them is a past cache (a
/// constant or a graph input it alone reads, then split on input).
fn cache_or_split(g: &Graph, nid: NodeId, r: usize, s0: &Split, st: &mut Layouts) -> Res<Found> {
    let past = match whole_operands(g, nid, s0.axis, r, s0, true, st)? {
        Ok(cut) => cut,
        Err(why) => return Ok(Found::No(why)),
    };
    let mut split = s0.moved(s0.axis);
    split.cache = past;
    Ok(Found::Outs(vec![(g.node(nid).outputs[0], split)]))
}

/// ONNX `Attention` on Q, K, V each split by head, 4-D (`[b, heads, s, d]`, the head
/// axis 1) or 3-D (`[b, s, heads * d]` with `q_num_heads` and `kv_num_heads`, the last
/// axis, each rank's block whole heads): every rank attends with its query heads to
/// its K/V heads (query block r reads K/V block r, or r / rep when 4-D K/V heads are
/// replicated: grouped-query attention keeps its groups contiguous). A mask with a head
/// axis, a past cache and the extra outputs stay unsplit inputs this rule does not
/// cut, so they are refused.
fn attention(
    g: &Graph,
    nid: NodeId,
    ranks: usize,
    ins: &[(usize, Split)],
    st: &mut Layouts,
) -> Res<Found> {
    let node = g.node(nid);
    let split = |i: usize| ins.iter().find(|(k, _)| *k == i).map(|(_, s)| s);
    let (Some(q), Some(k), Some(v)) = (split(0), split(1), split(2)) else {
        return Ok(Found::No("Q, K and V are not all split by head".into()));
    };
    let rank_of = |i: usize| {
        node.inputs[i]
            .and_then(|x| g.ty(x).ok())
            .map(|t| t.shape.len())
    };
    let dims = rank_of(0);
    let head_axis = match dims {
        Some(4) => 1,
        Some(3) => 2,
        _ => return Ok(Found::No("Q is neither 3-D nor 4-D".into())),
    };
    if (0..3).any(|i| rank_of(i) != dims)
        || [q, k, v]
            .iter()
            .any(|s| s.axis != head_axis || s.parts.len() != 1 || s.span != 1)
    {
        return Ok(Found::No(
            "Q, K and V are not split alike along their head axis".into(),
        ));
    }
    if q.rep != 1 || !k.same_cut(v) {
        return Ok(Found::No(
            "its query heads are replicated, or K and V split differently".into(),
        ));
    }
    if head_axis == 2 {
        let (qh, kvh) = (
            node.attrs.int_or("q_num_heads", 0)?,
            node.attrs.int_or("kv_num_heads", 0)?,
        );
        let n = ranks as i64;
        if k.rep != 1 || qh <= 0 || kvh <= 0 || qh % n != 0 || kvh % n != 0 {
            return Ok(Found::No(format!(
                "3-D attention with {qh} query and {kvh} K/V heads does not split into {ranks} \
                 ranks of whole heads"
            )));
        }
        st.edits.push((
            nid,
            Edit::HeadCounts {
                q: qh / n,
                kv: kvh / n,
            },
        ));
    }
    if ins.iter().any(|(i, _)| *i > 2) {
        return Ok(Found::No("a split mask or past cache".into()));
    }
    let mask_per_head = node
        .inputs
        .get(3)
        .copied()
        .flatten()
        .and_then(|m| g.ty(m).ok())
        .is_some_and(|t| t.shape.len() == 4 && t.shape[1].known() != Some(1));
    let past = (4..6).any(|i| node.inputs.get(i).copied().flatten().is_some());
    let read =
        |o: ValueId| g.outputs.contains(&o) || g.nodes.iter().any(|n| n.inputs.contains(&Some(o)));
    let extra = node.outputs.iter().skip(1).any(|&o| read(o));
    if mask_per_head || past || extra {
        return Ok(Found::No(
            "a mask per head, a past cache input or a present output of the Attention node".into(),
        ));
    }
    let mut out = q.moved(head_axis);
    out.parts = vec![*known(g, node.outputs[0])?
        .get(head_axis)
        .ok_or_else(missing)?];
    Ok(Found::Outs(vec![(node.outputs[0], out)]))
}

/// The output axis that `axis` of `from` becomes in a reshape to `to`: the first
/// non-unit axis after the same outer elements.
pub fn regroup(from: &[u64], to: &[u64], axis: usize) -> Option<usize> {
    let outer: u64 = from[..axis].iter().product();
    let mut p = 1u64;
    for (b, &d) in to.iter().enumerate() {
        if p == outer && d > 1 {
            return Some(b);
        }
        p *= d;
        if p > outer {
            return None;
        }
    }
    None
}

fn norm_axis(a: i64, r: usize) -> usize {
    if a < 0 {
        (a + r as i64).max(0) as usize
    } else {
        a as usize
    }
}

/// The concrete shape of `v` (a prepared graph's shapes are all known).
pub fn known(g: &Graph, v: ValueId) -> Res<Vec<u64>> {
    let ty = g.ty(v)?;
    ty.shape
        .iter()
        .map(|d| d.known())
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| ShardError::Symbolic(format!("`{}` {ty}", g.value(v).name)))
}

pub(super) fn missing() -> ShardError {
    ShardError::Ir(gopt_ir::IrError::Invalid(
        "a product without its operands".into(),
    ))
}

fn indivisible(g: &Graph, nid: NodeId, shape: &[u64], axis: usize, ranks: usize) -> ShardError {
    let node = g.node(nid);
    ShardError::Indivisible {
        node: node.name.clone(),
        what: format!(
            "dim {axis} ({}) of its output {shape:?}, the head count",
            shape[axis]
        ),
        ranks,
    }
}
