//! Cutting one rank's piece out of a constant: along one axis, of each of its parts
//! (consecutive segments, as a merged Q/K/V weight has three), the rank's block of N.
//! Exact for every dtype: the pieces are cut by the IR's own Slice and Concat.

use gopt_ir::ops::{EvalCx, ShapeOp};
use gopt_ir::{Attr, Attrs, Node, Op, Result, Tensor};

/// Rank `rank`'s piece of `t` along `axis`: of each segment of `parts` (sizes along
/// the axis, summing to its length), the `rank`-th of `ranks` equal blocks, in order.
pub fn piece(t: &Tensor, axis: usize, parts: &[u64], rank: usize, ranks: usize) -> Result<Tensor> {
    let cx = EvalCx { lookup: &|_| None };
    let mut blocks = Vec::new();
    let mut start = 0u64;
    for &p in parts {
        let b = p / ranks as u64;
        let lo = (start + b * rank as u64) as i64;
        blocks.push(run(
            &cx,
            ShapeOp::Slice,
            Attrs::default(),
            &[
                t,
                &Tensor::from_i64s(&[lo]),
                &Tensor::from_i64s(&[lo + b as i64]),
                &Tensor::from_i64s(&[axis as i64]),
            ],
        )?);
        start += p;
    }
    if blocks.len() == 1 {
        return Ok(blocks.remove(0));
    }
    let mut attrs = Attrs::default();
    attrs.set("axis", Attr::Int(axis as i64));
    let refs: Vec<&Tensor> = blocks.iter().collect();
    run(&cx, ShapeOp::Concat, attrs, &refs)
}

fn run(cx: &EvalCx, op: ShapeOp, attrs: Attrs, inputs: &[&Tensor]) -> Result<Tensor> {
    let node = Node {
        name: format!("shard/{}", op.name()),
        op: Op::Shape(op),
        attrs,
        inputs: Vec::new(),
        outputs: Vec::new(),
    };
    let ins: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
    let mut out = Op::Shape(op).eval(cx, &node, &ins)?;
    out.pop()
        .ok_or_else(|| gopt_ir::IrError::Invalid(format!("{} gave no output", op.name())))
}
