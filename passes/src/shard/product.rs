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
    ranks: usize,
    ins: &[(usize, Split)],
    st: &mut Layouts,
) -> Res<Found> {
    let node = g.node(nid);
    let out = node.outputs[0];
    let r = known(g, out)?.len();
    let gemm = node.op == Op::Nn(NnOp::Gemm);
    let a_rank = known(g, node.inputs[0].ok_or_else(missing)?)?.len();
    let b = node.inputs.get(1).copied().flatten().ok_or_else(missing)?;
    let b_const = weight(g, b)?.is_some();
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
        // Quantized: each rank's rows of K are whole groups of the scales, or lie in
        // one group (whose scales it then takes).
        if let Some(Weight::Dequantized { block, .. }) = weight(g, b)? {
            let k: u64 = s.parts.iter().sum();
            if s.parts.len() != 1 || quantized_rows(k, block, ranks).is_none() {
                return Ok(Found::No(format!(
                    "its quantized weight's groups of {block} rows do not divide its \
                     {k} rows {ranks} ways"
                )));
            }
        }
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

/// A product's weight the pass can cut: a constant matrix, or a `DequantizeLinear` of
/// constants blocked along K (`axis` 0, `block_size`), read by that product alone: its
/// integers, scales and zero points are cut together.
pub(super) enum Weight {
    /// A constant matrix.
    Plain,
    /// The output of `DequantizeLinear` node `node`, `block` rows per scale.
    Dequantized { node: NodeId, block: u64 },
}

/// How `k` rows quantized in groups of `block` split `ranks` ways: the scale rows
/// (groups) and how many ranks share each group's scales (1: each rank holds whole
/// groups; more: the ranks' rows lie inside one group). `None` when a rank's rows
/// would straddle groups.
pub(super) fn quantized_rows(k: u64, block: u64, ranks: usize) -> Option<(u64, u64)> {
    let ranks = ranks as u64;
    if block == 0 || ranks == 0 || k % ranks != 0 {
        return None;
    }
    let (rows, groups) = (k / ranks, k.div_ceil(block));
    if rows.is_multiple_of(block) {
        Some((groups, 1))
    } else if block.is_multiple_of(rows) && (k.is_multiple_of(block) || k < block) {
        Some((groups, ranks / groups))
    } else {
        None
    }
}

/// What weight `b` is, or `None` when the pass cannot cut it.
pub(super) fn weight(g: &Graph, b: ValueId) -> Res<Option<Weight>> {
    if g.konst(b).is_some() {
        return Ok((g.ty(b)?.shape.len() == 2).then_some(Weight::Plain));
    }
    let readers = g
        .nodes
        .iter()
        .filter(|n| n.inputs.contains(&Some(b)))
        .count();
    let Some(i) = g.nodes.iter().position(|n| n.outputs.contains(&b)) else {
        return Ok(None);
    };
    let n = &g.nodes[i];
    let block = n.attrs.int_or("block_size", 0)?;
    let all_const = n.inputs.iter().flatten().all(|v| g.konst(*v).is_some());
    let fits = n.op == Op::Nn(NnOp::DequantizeLinear)
        && n.attrs.int_or("axis", 1)? == 0
        && block > 0
        && all_const
        && readers == 1
        && !g.outputs.contains(&b)
        && g.ty(b)?.shape.len() == 2;
    Ok(fits.then_some(Weight::Dequantized {
        node: NodeId(i as u32),
        block: block as u64,
    }))
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

#[cfg(test)]
mod tests {
    use super::quantized_rows;

    #[test]
    fn quantized_rows_split_by_whole_groups_or_inside_one() {
        // TinyLlama's down projection: 5632 rows in groups of 128.
        assert_eq!(quantized_rows(5632, 128, 2), Some((44, 1)));
        assert_eq!(quantized_rows(5632, 128, 4), Some((44, 1)));
        // 704 rows a rank straddle groups of 128.
        assert_eq!(quantized_rows(5632, 128, 8), None);
        // 64 rows, one short group: every rank takes its scales.
        assert_eq!(quantized_rows(64, 128, 2), Some((1, 2)));
        // 256 rows over 4: 64 a rank, two ranks a group.
        assert_eq!(quantized_rows(256, 128, 4), Some((2, 2)));
        // 176 rows (a 128 group and a 48 one) over 2: 88 straddles.
        assert_eq!(quantized_rows(176, 128, 2), None);
        assert_eq!(quantized_rows(10, 4, 3), None);
    }
}
