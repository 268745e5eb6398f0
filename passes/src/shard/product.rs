//! The sharding rules of matrix products ([`product`]: row-parallel, rows, or batched
//! over heads) and the check of a split node's whole operands ([`whole_operands`]),
//! apart from the walk that applies them ([`super::layout`]).

use super::layout::{known, missing, Edit, Found, Layouts, Res, Split};
use gopt_ir::ops::NnOp;
use gopt_ir::{Graph, NodeId, Op, ValueId};

/// MatMul and Gemm with a split input: row-parallel (the contracted axis of A split, B a
/// constant matrix), rows (a non-contracted axis of A), or batched over heads.
pub(super) fn product(
    g: &Graph,
    nid: NodeId,
    _ranks: usize,
    ins: &[(usize, Split)],
    st: &mut Layouts,
) -> Res<Found> {
    let node = g.node(nid);
    let out = node.outputs[0];
    let r = known(g, out)?.len();
    let gemm = node.op == Op::Nn(NnOp::Gemm);
    let a_rank = known(g, node.inputs[0].ok_or_else(missing)?)?.len();
    let b = node.inputs.get(1).copied().flatten().ok_or_else(missing)?;
    let b_const = g.konst(b).is_some() && g.ty(b)?.shape.len() == 2;
    let only = |i: usize| ins.len() == 1 && ins[0].0 == i;
    let s = &ins[0].1;
    let same = |axis: usize| Ok(Found::Outs(vec![(out, s.moved(axis))]));
    if gemm && node.attrs.int_or("transA", 0)? != 0 {
        return Ok(Found::No("Gemm with transA".into()));
    }
    if only(0) && b_const && s.axis == a_rank - 1 {
        if s.rep > 1 {
            return Ok(Found::No(
                "a row-parallel product of replicated heads".into(),
            ));
        }
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
        return Ok(Found::Outs(Vec::new()));
    }
    if only(0) && b_const && s.axis + 1 < a_rank {
        if gemm
            && node.inputs.get(2).copied().flatten().is_some_and(|c| {
                g.ty(c)
                    .is_ok_and(|t| t.shape.len() == 2 && t.shape[0].known() != Some(1))
            })
        {
            return Ok(Found::No("a Gemm bias with rows".into()));
        }
        return same(s.axis + r - a_rank);
    }
    if gemm {
        return Ok(Found::No("Gemm with a split B".into()));
    }
    // Batched: the split axis is a batch axis of the output, and each operand is split
    // there or broadcasts over it.
    let out_axis = |i: usize, s: &Split| -> Res<usize> {
        let rank = known(g, node.inputs[i].ok_or_else(missing)?)?.len();
        Ok(s.axis + r - rank)
    };
    let axis = out_axis(ins[0].0, &ins[0].1)?;
    if axis + 2 >= r {
        return Ok(Found::No("a product split along a matrix axis".into()));
    }
    for (i, s2) in ins {
        if out_axis(*i, s2)? != axis || !s2.same_cut(s) {
            return Ok(Found::No("its operands are split differently".into()));
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
            return Ok(Found::No(
                "a whole operand is batched along the split axis".into(),
            ));
        }
    }
    same(axis)
}

/// Checks the whole (unsplit) operands of `nid` against split `s` along output axis
/// `axis` of rank `r`: each broadcasts over it, or is a constant cut along it (an
/// [`Edit::Operand`]), or, where `inputs` allows (a Concat: the past KV cache), a
/// graph input read only here, which then arrives split ([`Layouts::inputs`]).
/// Whether anything was cut.
pub(super) fn whole_operands(
    g: &Graph,
    nid: NodeId,
    axis: usize,
    r: usize,
    s: &Split,
    inputs: bool,
    st: &mut Layouts,
) -> Res<Result<bool, String>> {
    let node = g.node(nid);
    let full: u64 = s.parts.iter().sum();
    let mut cut = false;
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
        if shape[at as usize] == full && inputs && sole_input(g, v, nid) {
            let mut split = s.moved(at as usize);
            split.span = 1;
            split.seeds = s.seeds.clone();
            st.inputs.insert(v, split.clone());
            st.split.insert(v, split);
            cut = true;
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
                parts: s.parts.clone(),
                rep: s.rep,
            },
        ));
        cut = true;
    }
    Ok(Ok(cut))
}

/// Whether `v` is a graph input that node `nid` alone reads.
fn sole_input(g: &Graph, v: ValueId, nid: NodeId) -> bool {
    g.inputs.contains(&v)
        && g.nodes
            .iter()
            .enumerate()
            .all(|(i, n)| i == nid.index() || !n.inputs.contains(&Some(v)))
}
