//! Memory planning: every activation of a specialized graph gets an offset in one device
//! arena, chosen from value lifetimes so buffers whose lifetimes do not overlap share
//! bytes (TFLite's greedy-by-size: largest first, each at the lowest offset that no
//! overlapping-in-time buffer occupies). Views (reshape, squeeze, unsqueeze, flatten,
//! identity) alias their input and extend its lifetime. Graph inputs live for the whole
//! run (a plan may execute again on inputs copied in once), outputs to the end;
//! weights are not in the arena (uploaded once, shared by every bucket).

use crate::{CodegenError, Result};
use gopt_ir::ops::ShapeOp;
use gopt_ir::{Graph, Op, ValueId};
use serde::Serialize;
use std::collections::HashMap;

/// Every buffer starts at a multiple of this many bytes (16-byte vector loads, and the
/// 256-byte alignment CUDA allocations have).
pub const ALIGN: usize = 256;

/// One arena buffer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Slot {
    /// Byte offset in the arena.
    pub offset: usize,
    /// Size in bytes (rounded up to [`ALIGN`]).
    pub bytes: usize,
    /// First step (node index) that writes it; 0 for graph inputs.
    pub first: usize,
    /// Last step that reads it; the step count for graph outputs.
    pub last: usize,
}

/// The arena layout of a graph.
#[derive(Clone, Debug, Serialize)]
pub struct Layout {
    /// The slot of each activation (views map to their source's slot).
    #[serde(skip)]
    pub slots: HashMap<ValueId, usize>,
    /// Distinct buffers.
    pub buffers: Vec<Slot>,
    /// Arena size: the highest end offset.
    pub peak_bytes: usize,
    /// What separate allocations would take: the sum of all buffers.
    pub total_bytes: usize,
}

/// Whether `op` is a view: its output aliases its input's bytes.
pub(crate) fn is_view(op: Op) -> bool {
    matches!(
        op,
        Op::Shape(
            ShapeOp::Reshape
                | ShapeOp::Squeeze
                | ShapeOp::Unsqueeze
                | ShapeOp::Flatten
                | ShapeOp::Identity
        )
    )
}

fn bytes_of(g: &Graph, v: ValueId) -> Result<usize> {
    let ty = g.ty(v).map_err(|e| CodegenError::Plan(e.to_string()))?;
    let dims = gopt_ir::dim::concrete(&ty.shape).ok_or_else(|| {
        CodegenError::Plan(format!(
            "value `{}` has symbolic shape {ty}: plans need a specialized graph",
            g.value(v).name
        ))
    })?;
    let too_big = || {
        CodegenError::Plan(format!(
            "value `{}` ({ty}) is too big to place in an arena",
            g.value(v).name
        ))
    };
    let n = gopt_ir::budget::bytes(&dims, ty.dtype.size())
        .filter(|&b| b <= gopt_ir::budget::MAX_TENSOR_BYTES)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(too_big)?;
    Ok(n.div_ceil(ALIGN).max(1) * ALIGN)
}

/// Plans the arena for `g` (nodes in execution order).
pub fn plan(g: &Graph) -> Result<Layout> {
    plan_with(g, &HashMap::new())
}

/// [`plan`], with some values written earlier than their node (`early[v]` = the step
/// that writes `v`: a slice folded into the GEMM before it).
pub fn plan_with(g: &Graph, early: &HashMap<ValueId, usize>) -> Result<Layout> {
    let steps = g.nodes.len();
    // Resolve views to the value that owns the bytes.
    let mut owner: HashMap<ValueId, ValueId> = HashMap::new();
    for n in &g.nodes {
        if is_view(n.op) {
            if let (Some(Some(src)), [out]) = (n.inputs.first(), n.outputs.as_slice()) {
                let root = *owner.get(src).unwrap_or(src);
                if !g.constants.contains_key(&root) {
                    owner.insert(*out, root);
                }
            }
        }
    }
    let root = |v: ValueId| *owner.get(&v).unwrap_or(&v);
    let mut life: HashMap<ValueId, (usize, usize)> = HashMap::new();
    let mut order: Vec<ValueId> = Vec::new();
    let mut touch = |v: ValueId, at: usize, life: &mut HashMap<ValueId, (usize, usize)>| {
        let e = life.entry(v).or_insert_with(|| {
            order.push(v);
            (at, at)
        });
        e.0 = e.0.min(at);
        e.1 = e.1.max(at);
    };
    // Graph inputs live for the whole run: a plan may execute again (a benchmark, a
    // replayed CUDA graph) on the inputs copied in once.
    for &v in &g.inputs {
        touch(v, 0, &mut life);
        touch(v, steps, &mut life);
    }
    for (i, n) in g.nodes.iter().enumerate() {
        for v in n.inputs.iter().flatten() {
            let r = root(*v);
            if !g.constants.contains_key(&r) {
                touch(r, i, &mut life);
            }
        }
        for &o in &n.outputs {
            touch(root(o), i, &mut life);
            if let Some(&e) = early.get(&o) {
                touch(root(o), e, &mut life);
            }
        }
    }
    for &v in &g.outputs {
        let r = root(v);
        if !g.constants.contains_key(&r) {
            touch(r, steps, &mut life);
        }
    }
    let mut buffers: Vec<Slot> = Vec::with_capacity(order.len());
    let mut index: HashMap<ValueId, usize> = HashMap::new();
    for v in &order {
        let (first, last) = life[v];
        index.insert(*v, buffers.len());
        buffers.push(Slot {
            offset: 0,
            bytes: bytes_of(g, *v)?,
            first,
            last,
        });
    }
    // Greedy by size: largest first, lowest free offset among time-overlapping buffers.
    let mut by_size: Vec<usize> = (0..buffers.len()).collect();
    by_size.sort_by(|&a, &b| buffers[b].bytes.cmp(&buffers[a].bytes).then(a.cmp(&b)));
    let mut placed: Vec<usize> = Vec::new();
    for i in by_size {
        let mut taken: Vec<(usize, usize)> = placed
            .iter()
            .map(|&j| &buffers[j])
            .filter(|s| s.first <= buffers[i].last && buffers[i].first <= s.last)
            .map(|s| (s.offset, s.offset.saturating_add(s.bytes)))
            .collect();
        taken.sort_unstable();
        let mut offset: usize = 0;
        for (start, end) in taken {
            if offset.saturating_add(buffers[i].bytes) <= start {
                break;
            }
            offset = offset.max(end);
        }
        if offset.checked_add(buffers[i].bytes).is_none() {
            return Err(CodegenError::Plan(
                "the arena's size overflows the address space".into(),
            ));
        }
        buffers[i].offset = offset;
        placed.push(i);
    }
    let peak_bytes = buffers
        .iter()
        .map(|s| s.offset + s.bytes)
        .max()
        .unwrap_or(0);
    let total_bytes = buffers
        .iter()
        .try_fold(0usize, |acc, s| acc.checked_add(s.bytes))
        .ok_or_else(|| CodegenError::Plan("the buffers' total size overflows".into()))?;
    let mut slots = HashMap::new();
    for i in 0..g.values.len() {
        let id = ValueId(i as u32);
        if let Some(&k) = index.get(&root(id)) {
            slots.insert(id, k);
        }
    }
    Ok(Layout {
        slots,
        buffers,
        peak_bytes,
        total_bytes,
    })
}
