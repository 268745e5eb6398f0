//! One rank's graph from the layouts ([`super::layout`]): the rank's pieces of the split
//! constants, reshapes and splits retargeted to its share, its shard of each split
//! input, an AllReduce after each row-parallel product and an AllGather before each
//! split output that is not a KV cache.

use super::layout::{known, Edit, Layouts};
use super::product::{quantized_rows, weight, Weight};
use super::{slice, ShardError};
use gopt_ir::ops::CollectiveOp;
use gopt_ir::{Attr, Attrs, Graph, IrError, Node, NodeId, Op, Tensor, ValueId, Verified};
use std::collections::HashMap;

/// Rank `rank`'s graph: its pieces of the split constants, retargeted reshapes and
/// splits, an AllReduce after each row-parallel product, an AllGather before each split
/// graph output; then verified (types inferred anew).
pub fn rank_graph(
    g: &Graph,
    l: &Layouts,
    rank: usize,
    ranks: usize,
) -> Result<Verified, ShardError> {
    let mut h = Graph::clone(g);
    // Of N/rep blocks, rank r holds block r/rep.
    let cut = |h: &mut Graph,
               nid: NodeId,
               input: usize,
               axis: usize,
               parts: &[u64],
               rep: u64|
     -> Result<(), ShardError> {
        let rep = rep as usize;
        let Some(v) = h.nodes[nid.index()].inputs.get(input).copied().flatten() else {
            return Ok(());
        };
        let t = h
            .constant(v)
            .ok_or_else(|| IrError::Invalid(format!("`{}` is not a constant", h.value(v).name)))?;
        let p = slice::piece(t, axis, parts, rank / rep, ranks / rep)?;
        let name = format!("{}/rank{rank}", h.value(v).name);
        let c = h.add_const(&name, p);
        h.nodes[nid.index()].inputs[input] = Some(c);
        Ok(())
    };
    // A product's weight (input 1): the constant, or, when quantized, the integers,
    // scales and zero points of its DequantizeLinear (scales per `block` rows of K).
    let cut_weight = |h: &mut Graph,
                      nid: NodeId,
                      axis: usize,
                      parts: &[u64],
                      rep: u64|
     -> Result<(), ShardError> {
        let Some(w) = g.node(nid).inputs.get(1).copied().flatten() else {
            return Ok(());
        };
        match weight(g, w)? {
            Some(Weight::Dequantized { node, block }) => {
                // Along K (row-parallel): the groups' scale rows, shared by the ranks
                // whose rows lie in one group; along N: the same columns.
                let (groups, scale_rep) = match axis {
                    0 => {
                        let k: u64 = parts.iter().sum();
                        let (groups, shared) =
                            quantized_rows(k, block, ranks).ok_or_else(|| {
                                IrError::Invalid(format!(
                                    "{k} quantized rows in groups of {block} over {ranks} ranks"
                                ))
                            })?;
                        (vec![groups], shared)
                    }
                    _ => (parts.to_vec(), rep),
                };
                cut(h, node, 0, axis, parts, rep)?;
                cut(h, node, 1, axis, &groups, scale_rep)?;
                cut(h, node, 2, axis, &groups, scale_rep)
            }
            Some(Weight::Plain) | None => cut(h, nid, 1, axis, parts, rep),
        }
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
            Edit::Column { w_axis, parts, rep } => {
                cut_weight(&mut h, *nid, *w_axis, parts, *rep)?;
                if let Some(c) = node.inputs.get(2).copied().flatten() {
                    let shape = known(g, c)?;
                    if shape.last() == Some(&parts.iter().sum::<u64>()) {
                        cut(&mut h, *nid, 2, shape.len() - 1, parts, *rep)?;
                    }
                }
            }
            Edit::Row { w_axis, parts } => {
                cut_weight(&mut h, *nid, *w_axis, parts, 1)?;
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
            Edit::Operand {
                input,
                axis,
                parts,
                rep,
            } => cut(&mut h, *nid, *input, *axis, parts, *rep)?,
            Edit::TargetShape { divide } => {
                let mut shape: Vec<i64> = known(g, node.outputs[0])?
                    .iter()
                    .map(|&d| d as i64)
                    .collect();
                for &(axis, by) in divide {
                    shape[axis] /= by as i64;
                }
                let c = h.add_const(
                    &format!("{}/shape/rank{rank}", node.name),
                    Tensor::from_i64s(&shape),
                );
                h.nodes[nid.index()].inputs[1] = Some(c);
            }
            Edit::HeadCounts { q, kv } => {
                let attrs = &mut h.nodes[nid.index()].attrs;
                attrs.set("q_num_heads", Attr::Int(*q));
                attrs.set("kv_num_heads", Attr::Int(*kv));
            }
            Edit::SplitSizes { ways } => {
                let sizes: Vec<i64> = node
                    .outputs
                    .iter()
                    .map(|&o| {
                        let s = known(g, o)?;
                        let axis = l.split.get(&o).map_or(0, |s| s.axis);
                        Ok(s[axis] as i64 / *ways as i64)
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
        let Some(s) = l.split.get(&v).filter(|s| !s.cache) else {
            continue;
        };
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
    for (v, s) in &l.inputs {
        let ty = g.ty(*v)?;
        let mut shape = ty.shape.clone();
        let d = known(g, *v)?[s.axis];
        shape[s.axis] = gopt_ir::Dim::from(d * s.rep / ranks as u64);
        h.values[v.index()].ty = Some(gopt_ir::TensorType::new(ty.dtype, shape));
    }
    let outs: Vec<ValueId> = h.nodes.iter().flat_map(|n| n.outputs.clone()).collect();
    for v in outs {
        h.values[v.index()].ty = None;
    }
    h.name = format!("{} (rank {rank} of {ranks})", g.name);
    Ok(gopt_ir::verify(h)?)
}
