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

impl super::Placement {
    /// Rank `rank`'s part of a whole `t` placed so (of `ranks`): all of it, or its
    /// block along the axis (the input a rank reads).
    pub fn part(&self, t: &Tensor, rank: usize, ranks: usize) -> Result<Tensor> {
        match *self {
            super::Placement::Whole | super::Placement::Gathered => Ok(t.clone()),
            super::Placement::Split { axis, blocks } => {
                let len = self.axis_len(t.shape(), axis)?;
                piece(t, axis, &[len], rank * blocks / ranks, blocks)
            }
        }
    }

    /// The whole tensor from every rank's output placed so (`parts[r]`: rank r's):
    /// rank 0's, or the blocks concatenated along the axis in order, each from the
    /// first rank holding it.
    pub fn assemble(&self, parts: &[Tensor]) -> Result<Tensor> {
        let ranks = parts.len();
        let first = parts
            .first()
            .ok_or_else(|| gopt_ir::IrError::Invalid("no rank's output to assemble".into()))?;
        match *self {
            super::Placement::Whole | super::Placement::Gathered => Ok(first.clone()),
            super::Placement::Split { axis, blocks } => {
                if blocks == 0 || !ranks.is_multiple_of(blocks) {
                    return Err(gopt_ir::IrError::Invalid(format!(
                        "{blocks} blocks over {ranks} ranks"
                    )));
                }
                let owners: Vec<&Tensor> =
                    (0..blocks).map(|b| &parts[b * ranks / blocks]).collect();
                if owners.len() == 1 {
                    return Ok(first.clone());
                }
                let mut attrs = Attrs::default();
                attrs.set("axis", Attr::Int(axis as i64));
                run(
                    &EvalCx { lookup: &|_| None },
                    ShapeOp::Concat,
                    attrs,
                    &owners,
                )
            }
        }
    }

    /// The length of `axis` in `shape`, which must divide into this placement's blocks.
    fn axis_len(&self, shape: &[usize], axis: usize) -> Result<u64> {
        let super::Placement::Split { blocks, .. } = *self else {
            return Ok(0);
        };
        match shape.get(axis) {
            Some(&n) if blocks > 0 && n.is_multiple_of(blocks) => Ok(n as u64),
            _ => Err(gopt_ir::IrError::Invalid(format!(
                "axis {axis} of {shape:?} does not split into {blocks} blocks"
            ))),
        }
    }
}
