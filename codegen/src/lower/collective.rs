//! A collective node, lowered ([`spec`]): an AllReduce or AllGather between the ranks
//! of a tensor-parallel model, with its values, dtype, bytes and (for an AllGather) the
//! row layout, read from the node once. It is no kernel: the CUDA plan runs it as a
//! step the executor makes one NCCL call of on the rank's stream between its
//! neighbours' steps (inside the captured CUDA graph), reading and writing the values'
//! places like any step; other backends refuse it. An
//! AllGather along an inner axis gathers each rank's rows whole (NCCL concatenates
//! along the outermost axis) and then interleaves them: `outer` rows of `chunk_bytes`
//! per rank.

use crate::plan::concrete;
use crate::{CodegenError, Result};
use gopt_ir::ops::collective::Group;
use gopt_ir::ops::CollectiveOp;
use gopt_ir::{DType, Graph, Node};
use serde::{Deserialize, Serialize};

/// Which collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CollectiveKind {
    /// The sum of every rank's input, on every rank.
    AllReduce,
    /// Every rank's input, concatenated along an axis, on every rank.
    AllGather,
}

/// One collective step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Collective {
    /// The IR node (for messages).
    pub node: String,
    /// Which collective.
    pub kind: CollectiveKind,
    /// Input value id.
    pub input: u32,
    /// Output value id.
    pub output: u32,
    /// Element type.
    pub dtype: DType,
    /// Ranks taking part.
    pub ranks: usize,
    /// Bytes of the output.
    pub bytes: usize,
    /// AllGather: the rows before the gathered axis (1 along the outermost axis).
    pub outer: usize,
    /// AllGather: bytes of one rank's part of one row.
    pub chunk_bytes: usize,
}

impl Collective {
    /// Bytes each rank sends over its link (a ring: 2(N-1)/N of the buffer for an
    /// all-reduce, (N-1)/N of the output for an all-gather;
    /// `gopt_passes::cost::link` prices the same bytes).
    pub fn link_bytes(&self) -> f64 {
        let n = self.ranks as f64;
        let share = match self.kind {
            CollectiveKind::AllReduce => 2.0 * (n - 1.0) / n,
            CollectiveKind::AllGather => (n - 1.0) / n,
        };
        share * self.bytes as f64
    }
}

/// The collective of node `n`, op `op`.
pub fn spec(g: &Graph, n: &Node, op: CollectiveOp) -> Result<Collective> {
    let bad = |m: String| CodegenError::Plan(format!("collective `{}`: {m}", n.name));
    let group = Group::of(&n.attrs).map_err(|e| bad(e.to_string()))?;
    let (Some(Some(input)), Some(output)) = (n.inputs.first(), n.outputs.first()) else {
        return Err(bad("needs one input and one output".into()));
    };
    let (dtype, shape) = concrete(g, *output)?;
    let elem = dtype.size();
    let bytes = shape.iter().product::<usize>() * elem;
    let (kind, outer, chunk_bytes) = match op {
        CollectiveOp::AllReduce => (CollectiveKind::AllReduce, 1, bytes),
        CollectiveOp::AllGather => {
            let (_, in_shape) = concrete(g, *input)?;
            let a = n.attrs.req_int("axis").map_err(|e| bad(e.to_string()))?;
            let r = in_shape.len() as i64;
            let axis = if a < 0 { a + r } else { a };
            if !(0..r).contains(&axis) {
                return Err(bad(format!("axis {a} out of range for rank {r}")));
            }
            let axis = axis as usize;
            let outer: usize = in_shape[..axis].iter().product();
            let chunk: usize = in_shape[axis..].iter().product::<usize>() * elem;
            (CollectiveKind::AllGather, outer, chunk)
        }
    };
    Ok(Collective {
        node: n.name.clone(),
        kind,
        input: input.0,
        output: output.0,
        dtype,
        ranks: group.ranks,
        bytes,
        outer,
        chunk_bytes,
    })
}
