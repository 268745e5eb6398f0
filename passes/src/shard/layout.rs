//! Where each value lives across the ranks, given the column-parallel products (the
//! seeds): a forward pass over the graph in topological order. A seed's output is split
//! along its last axis; the split flows through element-wise ops, reshapes (to the head
//! axis: `[b,s,H*d]` → `[b,s,H,d]`), transposes, softmax and normalizations over other
//! axes, batched products over the head axis, and splits and concatenations along other
//! axes; a product of a value split along its contracted axis by a constant weight is
//! row-parallel and gives every rank a partial sum (an AllReduce follows it). A split
//! value that reaches an op none of these rules covers is a [`Conflict`]: the seeds it
//! came from are dropped and the pass runs again.

use super::ShardError;
use gopt_ir::ops::{NnOp, ReduceOp, ShapeOp};
use gopt_ir::{Graph, NodeId, Op, ValueId};
use std::collections::{BTreeSet, HashMap};

/// How a value is laid out across the ranks (absent from [`Layouts::split`]: every rank
/// holds all of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The axis each rank holds a block of.
    pub axis: usize,
    /// Consecutive segments of the axis (sizes in the whole value); of each, rank `r`
    /// holds the `r`-th of N equal blocks. One segment unless a merged Q/K/V product.
    pub parts: Vec<u64>,
    /// The seeds this split came from.
    pub seeds: BTreeSet<NodeId>,
}

/// What the rank graphs change at one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// A column-parallel product: weight input 1 cut along `w_axis`, bias input 2 (if
    /// any) along its last axis.
    Column { w_axis: usize, parts: Vec<u64> },
    /// A row-parallel product: weight input 1 cut along `w_axis`; Gemm's bias kept on
    /// rank 0 only; an AllReduce of its output follows.
    Row { w_axis: usize, parts: Vec<u64> },
    /// Constant input `input` cut along `axis`.
    Operand {
        input: usize,
        axis: usize,
        parts: Vec<u64>,
    },
    /// Shape input 1 (Reshape, Expand) becomes the output's shape with `axis` divided.
    TargetShape { axis: usize },
    /// Split sizes (input 1) divided: the split runs along the split axis.
    SplitSizes,
}

/// The result of the analysis.
#[derive(Debug, Default)]
pub struct Layouts {
    /// Split values.
    pub split: HashMap<ValueId, Split>,
    /// Edits by node.
    pub edits: Vec<(NodeId, Edit)>,
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
}

type Res<T> = Result<T, ShardError>;

/// Runs the analysis of `g` split `ranks` ways with these seeds (column-parallel
/// products and their output segments).
pub fn analyze(g: &Graph, ranks: usize, seeds: &HashMap<NodeId, Vec<u64>>) -> Res<Outcome> {
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
        if let Some(parts) = seeds.get(&nid).filter(|_| split_ins.is_empty()) {
            let out = g.ty(node.outputs[0])?;
            let w_axis = match node.op {
                Op::Nn(NnOp::Gemm) if node.attrs.int_or("transB", 0)? != 0 => 0,
                _ => 1,
            };
            st.edits.push((
                nid,
                Edit::Column {
                    w_axis,
                    parts: parts.clone(),
                },
            ));
            st.split.insert(
                node.outputs[0],
                Split {
                    axis: out.shape.len() - 1,
                    parts: parts.clone(),
                    seeds: BTreeSet::from([nid]),
                },
            );
            continue;
        }
        if split_ins.is_empty() {
            continue;
        }
        match rule(g, nid, ranks, &split_ins, &mut st)? {
            Ok(outs) => {
                if outs.iter().any(|(v, _)| captured.contains(v)) {
                    return conflict("a sub-graph reads its split output".into());
                }
                for (v, mut s) in outs {
                    s.seeds = from.clone();
                    st.split.insert(v, s);
                }
            }
            Err(why) => return conflict(why),
        }
    }
    for &v in &g.outputs {
        if let Some(s) = st.split.get(&v) {
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

/// The split outputs of node `nid` whose split inputs are `ins`, recording its edits;
/// `Err(why)` when no rule covers it.
fn rule(
    g: &Graph,
    nid: NodeId,
    ranks: usize,
    ins: &[(usize, Split)],
    st: &mut Layouts,
) -> Res<Result<Vec<(ValueId, Split)>, String>> {
    let node = g.node(nid);
    let (i0, s0) = (ins[0].0, &ins[0].1);
    let out = node.outputs[0];
    let out_shape = known(g, out)?;
    let one = |axis: usize, parts: Vec<u64>| {
        Ok(Ok(vec![(
            out,
            Split {
                axis,
                parts,
                seeds: BTreeSet::new(),
            },
        )]))
    };
    let rank_of = |i: usize| -> Res<usize> {
        Ok(node.inputs[i].map_or(Ok(0), |v| g.ty(v).map(|t| t.shape.len()))?)
    };
    match node.op {
        Op::Elementwise(_) => {
            let r = out_shape.len();
            let axis = s0.axis + r - rank_of(i0)?;
            for (i, s) in ins {
                if s.axis + r - rank_of(*i)? != axis || s.parts != s0.parts {
                    return Ok(Err("its inputs are split differently".into()));
                }
            }
            if let Err(why) = whole_operands(g, nid, axis, r, &s0.parts, st)? {
                return Ok(Err(why));
            }
            one(axis, s0.parts.clone())
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
                return Ok(Err(format!(
                    "the split axis {} does not survive the reshape",
                    s0.axis
                )));
            };
            let same = out_shape[b] == in_shape[s0.axis]
                && out_shape[b + 1..].iter().product::<u64>()
                    == in_shape[s0.axis + 1..].iter().product::<u64>();
            let parts = if same {
                s0.parts.clone()
            } else if s0.parts.len() == 1 {
                if out_shape[b] % ranks as u64 != 0 {
                    return Err(indivisible(g, nid, &out_shape, b, ranks));
                }
                vec![out_shape[b]]
            } else {
                return Ok(Err(
                    "a merged Q/K/V product is reshaped across its parts".into()
                ));
            };
            if node.op == Op::Shape(ShapeOp::Reshape) {
                st.edits.push((nid, Edit::TargetShape { axis: b }));
            }
            one(b, parts)
        }
        Op::Shape(ShapeOp::Transpose) => {
            let r = out_shape.len();
            let perm: Vec<usize> = match node.attrs.ints("perm")? {
                Some(p) => p.iter().map(|&a| a as usize).collect(),
                None => (0..r).rev().collect(),
            };
            match perm.iter().position(|&a| a == s0.axis) {
                Some(b) => one(b, s0.parts.clone()),
                None => Ok(Err("bad perm".into())),
            }
        }
        Op::Shape(ShapeOp::Expand) if i0 == 0 => {
            let axis = s0.axis + out_shape.len() - rank_of(0)?;
            st.edits.push((nid, Edit::TargetShape { axis }));
            one(axis, s0.parts.clone())
        }
        Op::Shape(ShapeOp::Split) if i0 == 0 => {
            let axis = norm_axis(node.attrs.int_or("axis", 0)?, out_shape.len());
            let outs: Vec<u64> = node
                .outputs
                .iter()
                .map(|&v| known(g, v).map(|s| s[axis]))
                .collect::<Res<_>>()?;
            if axis != s0.axis {
                return Ok(Ok(node
                    .outputs
                    .iter()
                    .map(|&v| {
                        (
                            v,
                            Split {
                                axis: s0.axis,
                                parts: s0.parts.clone(),
                                seeds: BTreeSet::new(),
                            },
                        )
                    })
                    .collect()));
            }
            if outs != s0.parts || node.inputs.get(1).copied().flatten().is_none() {
                return Ok(Err(format!(
                    "a split along the split axis into {outs:?}, not the product's parts {:?}",
                    s0.parts
                )));
            }
            st.edits.push((nid, Edit::SplitSizes));
            Ok(Ok(node
                .outputs
                .iter()
                .zip(outs)
                .map(|(&v, p)| {
                    (
                        v,
                        Split {
                            axis,
                            parts: vec![p],
                            seeds: BTreeSet::new(),
                        },
                    )
                })
                .collect()))
        }
        Op::Shape(ShapeOp::Slice) if i0 == 0 => {
            let axes = match node.inputs.get(3).copied().flatten() {
                Some(a) => match g.small_constant(a) {
                    Some(t) => t.to_i64_vec(),
                    None => return Ok(Err("its axes are not constant".into())),
                },
                None => (0..out_shape.len() as i64).collect(),
            };
            let r = out_shape.len();
            if axes.iter().any(|&a| norm_axis(a, r) == s0.axis) {
                return Ok(Err("it slices the split axis".into()));
            }
            one(s0.axis, s0.parts.clone())
        }
        Op::Shape(ShapeOp::Concat) => {
            let r = out_shape.len();
            let axis = norm_axis(node.attrs.int_or("axis", 0)?, r);
            if axis == s0.axis
                || ins
                    .iter()
                    .any(|(_, s)| s.axis != s0.axis || s.parts != s0.parts)
            {
                return Ok(Err("it concatenates along the split axis".into()));
            }
            if let Err(why) = whole_operands(g, nid, s0.axis, r, &s0.parts, st)? {
                return Ok(Err(why));
            }
            one(s0.axis, s0.parts.clone())
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
                return Ok(Err("it reduces over the split axis".into()));
            }
            one(s0.axis, s0.parts.clone())
        }
        Op::Nn(NnOp::MatMul | NnOp::Gemm) => product(g, nid, ranks, ins, st),
        _ => Ok(Err("no sharding rule for this op".into())),
    }
}

/// MatMul and Gemm with a split input: row-parallel (the contracted axis of A split, B a
/// constant matrix), rows (a non-contracted axis of A), or batched over heads.
fn product(
    g: &Graph,
    nid: NodeId,
    _ranks: usize,
    ins: &[(usize, Split)],
    st: &mut Layouts,
) -> Res<Result<Vec<(ValueId, Split)>, String>> {
    let node = g.node(nid);
    let out = node.outputs[0];
    let r = known(g, out)?.len();
    let gemm = node.op == Op::Nn(NnOp::Gemm);
    let a_rank = known(g, node.inputs[0].ok_or_else(missing)?)?.len();
    let b = node.inputs.get(1).copied().flatten().ok_or_else(missing)?;
    let b_const = g.konst(b).is_some() && g.ty(b)?.shape.len() == 2;
    let only = |i: usize| ins.len() == 1 && ins[0].0 == i;
    let s = &ins[0].1;
    let same = |axis: usize| {
        Ok(Ok(vec![(
            out,
            Split {
                axis,
                parts: s.parts.clone(),
                seeds: BTreeSet::new(),
            },
        )]))
    };
    if gemm && node.attrs.int_or("transA", 0)? != 0 {
        return Ok(Err("Gemm with transA".into()));
    }
    if only(0) && b_const && s.axis == a_rank - 1 {
        let w_axis = match gemm && node.attrs.int_or("transB", 0)? != 0 {
            true => 1,
            false => 0,
        };
        st.edits.push((
            nid,
            Edit::Row {
                w_axis,
                parts: s.parts.clone(),
            },
        ));
        return Ok(Ok(Vec::new()));
    }
    if only(0) && b_const && s.axis + 1 < a_rank {
        if gemm
            && node.inputs.get(2).copied().flatten().is_some_and(|c| {
                g.ty(c)
                    .is_ok_and(|t| t.shape.len() == 2 && t.shape[0].known() != Some(1))
            })
        {
            return Ok(Err("a Gemm bias with rows".into()));
        }
        return same(s.axis + r - a_rank);
    }
    if gemm {
        return Ok(Err("Gemm with a split B".into()));
    }
    // Batched: the split axis is a batch axis of the output, and each operand is split
    // there or broadcasts over it.
    let out_axis = |i: usize, s: &Split| -> Res<usize> {
        let rank = known(g, node.inputs[i].ok_or_else(missing)?)?.len();
        Ok(s.axis + r - rank)
    };
    let axis = out_axis(ins[0].0, &ins[0].1)?;
    if axis + 2 >= r {
        return Ok(Err("a product split along a matrix axis".into()));
    }
    for (i, s2) in ins {
        if out_axis(*i, s2)? != axis || s2.parts != s.parts {
            return Ok(Err("its operands are split differently".into()));
        }
    }
    for i in 0..2 {
        if ins.iter().any(|(j, _)| *j == i) {
            continue;
        }
        let v = node.inputs[i].ok_or_else(missing)?;
        let shape = known(g, v)?;
        let off = r as i64 - shape.len() as i64;
        let at = axis as i64 - off;
        if at >= 0 && shape[at as usize] != 1 {
            return Ok(Err("a whole operand is batched along the split axis".into()));
        }
    }
    same(axis)
}

/// Checks the whole (unsplit) operands of `nid` against a split along output axis `axis`
/// of rank `r`: each broadcasts over it, or is a constant cut along it (an
/// [`Edit::Operand`]).
fn whole_operands(
    g: &Graph,
    nid: NodeId,
    axis: usize,
    r: usize,
    parts: &[u64],
    st: &mut Layouts,
) -> Res<Result<(), String>> {
    let node = g.node(nid);
    let full: u64 = parts.iter().sum();
    for (i, v) in node.inputs.iter().enumerate() {
        let Some(v) = *v else { continue };
        if st.split.contains_key(&v) {
            continue;
        }
        let shape = known(g, v)?;
        let at = axis as i64 - (r as i64 - shape.len() as i64);
        if at < 0 || shape[at as usize] == 1 {
            continue;
        }
        if g.konst(v).is_none() || shape[at as usize] != full {
            return Ok(Err(format!(
                "operand `{}` is neither split nor a constant along the split axis",
                g.value(v).name
            )));
        }
        st.edits.push((
            nid,
            Edit::Operand {
                input: i,
                axis: at as usize,
                parts: parts.to_vec(),
            },
        ));
    }
    Ok(Ok(()))
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

fn missing() -> ShardError {
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
