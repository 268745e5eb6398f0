//! Memory planning from value lifetimes, one analysis ([`lifetimes`]) and two
//! strategies. Views (the nodes [`crate::lower`] lowers to `View`) alias their input
//! and extend its lifetime; constants are not planned (they live in the weights,
//! uploaded once and shared by every bucket).
//!
//! - [`arena`] (CUDA): every activation gets an offset in one device arena, so values
//!   whose lifetimes do not overlap share bytes (TFLite's greedy-by-size: largest
//!   first, each at the lowest offset no overlapping-in-time buffer occupies). Graph
//!   inputs live for the whole run (a plan may execute again on inputs copied in once),
//!   outputs to the end.
//! - [`pool`] (WGSL, which binds whole buffers or 256-byte-aligned ranges): values
//!   share a pool of buffers, each taking the smallest free buffer that fits (else the
//!   largest free one, grown) when first written and giving it back after its last
//!   reader; graph inputs and outputs own their buffers.

use crate::lower::{absorb, lower, Fold, Kind, Lowered, Views};
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

fn bytes_of(g: &Graph, v: ValueId) -> Result<usize> {
    let ty = g.ty(v).map_err(|e| CodegenError::Plan(e.to_string()))?;
    let dims =
        gopt_ir::dim::concrete(&ty.shape).ok_or_else(|| CodegenError::dynamic_shape(g, v, ty))?;
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

/// Plans the arena for `g` (nodes in execution order), views as the CUDA plan lowers
/// them.
pub fn plan(g: &gopt_ir::Verified) -> Result<Layout> {
    let views = Views {
        alias_outputs: true,
        strided_reads: true,
        stores_casts: true,
        offset_views: true,
    };
    let lowered: Vec<Lowered> = g
        .nodes
        .iter()
        .map(|n| lower(g, n, views))
        .collect::<Result<_>>()?;
    arena(
        g,
        &aliasing(g, &lowered, views),
        &absorb::early_writes(g, views),
    )
}

/// Which nodes alias their input's bytes as lowered: views, the Splits and Slices
/// attention reads in place (nothing reads their pieces as buffers, but the source must
/// live as long as they do), and the cache updates written in place
/// ([`crate::lower::scatter::in_place`]).
pub fn aliasing(g: &Graph, lowered: &[Lowered], views: Views) -> Vec<bool> {
    g.nodes
        .iter()
        .zip(lowered)
        .map(|(n, l)| match l {
            Lowered::View | Lowered::Window(_) => true,
            // A padded output stays in its source's rows; a Slice folded into a GEMM is
            // written by it into its own bytes.
            Lowered::Folded(Fold::PaddedRows { .. }) => true,
            Lowered::Folded(Fold::IntoGemm { .. }) => false,
            Lowered::Absorbed => matches!(n.op, Op::Shape(ShapeOp::Split | ShapeOp::Slice)),
            Lowered::Kernel(spec) if spec.kind() == Kind::Scatter => {
                crate::lower::scatter::in_place(g, n, views)
            }
            Lowered::Gemm(_)
            | Lowered::ConvGemm(_)
            | Lowered::PackedGemm(_)
            | Lowered::Kernel(_)
            | Lowered::Collective(_)
            | Lowered::Unsupported(_) => false,
        })
        .collect()
}

/// Value lifetimes in steps (node indices): which value owns each value's bytes (views
/// resolve to their source's owner) and, for every owner that is not a constant, the
/// first and last step that touch it, in order of first touch.
#[derive(Clone, Debug, Default)]
pub struct Lifetimes {
    /// The owner of each aliasing value (absent: the value owns its bytes).
    pub owner: HashMap<ValueId, ValueId>,
    /// Owners in order of first touch.
    pub order: Vec<ValueId>,
    /// (first, last) step of each owner.
    pub life: HashMap<ValueId, (usize, usize)>,
}

impl Lifetimes {
    /// The value that owns `v`'s bytes.
    pub fn root(&self, v: ValueId) -> ValueId {
        *self.owner.get(&v).unwrap_or(&v)
    }
}

/// The lifetimes of `g`'s values: `views[i]` says node `i` is an aliasing view, and
/// `early[v]` the step that writes `v` when it is earlier than its node (a slice
/// folded into the GEMM before it). Graph inputs live from step 0 to the end
/// (`nodes.len()`), outputs to the end.
pub fn lifetimes(g: &Graph, views: &[bool], early: &HashMap<ValueId, usize>) -> Lifetimes {
    let steps = g.nodes.len();
    let mut owner: HashMap<ValueId, ValueId> = HashMap::new();
    for (n, _) in g.nodes.iter().zip(views).filter(|(_, &v)| v) {
        if let Some(Some(src)) = n.inputs.first() {
            let root = *owner.get(src).unwrap_or(src);
            for out in &n.outputs {
                owner.insert(*out, root);
            }
        }
    }
    let root = |v: ValueId| *owner.get(&v).unwrap_or(&v);
    let mut life: HashMap<ValueId, (usize, usize)> = HashMap::new();
    let mut order: Vec<ValueId> = Vec::new();
    let mut touch = |v: ValueId, at: usize| {
        if g.constants.contains_key(&v) {
            return;
        }
        let e = life.entry(v).or_insert_with(|| {
            order.push(v);
            (at, at)
        });
        e.0 = e.0.min(at);
        e.1 = e.1.max(at);
    };
    for &v in &g.inputs {
        touch(v, 0);
        touch(v, steps);
    }
    for (i, n) in g.nodes.iter().enumerate() {
        for v in n.inputs.iter().flatten() {
            touch(root(*v), i);
        }
        for &o in &n.outputs {
            touch(root(o), i);
            if let Some(&e) = early.get(&o) {
                touch(root(o), e);
            }
        }
    }
    for &v in &g.outputs {
        touch(root(v), steps);
    }
    Lifetimes { owner, order, life }
}

/// [`plan`] with the views and early writes given: the arena strategy.
pub fn arena(g: &Graph, views: &[bool], early: &HashMap<ValueId, usize>) -> Result<Layout> {
    let lt = lifetimes(g, views, early);
    let (order, life) = (&lt.order, &lt.life);
    let mut buffers: Vec<Slot> = Vec::with_capacity(order.len());
    let mut index: HashMap<ValueId, usize> = HashMap::new();
    for v in order {
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
        if let Some(&k) = index.get(&lt.root(id)) {
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

/// A pool of buffers: each buffer's size, and the buffer of each planned value.
#[derive(Clone, Debug, Default)]
pub struct Pool {
    /// Size in bytes of each buffer.
    pub buffers: Vec<usize>,
    /// The buffer each value (owner or alias) lives in.
    pub slots: HashMap<ValueId, usize>,
    /// What one buffer per value would take.
    pub unplanned: usize,
}

/// The pool strategy over `lt`: graph inputs and outputs own a buffer each; every other
/// owner takes, at its first step, the smallest free buffer that fits (else the
/// largest free one, grown; else a new one) and gives it back after its last step (so
/// an output never shares a buffer with an input of its own step). `bytes` is a value's
/// size in the backend's storage layout.
pub fn pool(g: &Graph, lt: &Lifetimes, bytes: impl Fn(ValueId) -> Result<usize>) -> Result<Pool> {
    let mut p = Pool::default();
    let pinned: Vec<ValueId> = g
        .inputs
        .iter()
        .chain(&g.outputs)
        .map(|&v| lt.root(v))
        .collect();
    for &v in &pinned {
        if p.slots.contains_key(&v) || g.constants.contains_key(&v) {
            continue;
        }
        p.buffers.push(bytes(v)?.max(4));
        p.slots.insert(v, p.buffers.len() - 1);
    }
    let mut starts: Vec<(usize, usize, ValueId)> = Vec::new();
    for (k, &v) in lt.order.iter().enumerate() {
        if !pinned.contains(&v) {
            starts.push((lt.life[&v].0, k, v));
        }
    }
    starts.sort_unstable();
    let mut ends: Vec<(usize, usize, ValueId)> = starts
        .iter()
        .map(|&(_, k, v)| (lt.life[&v].1, k, v))
        .collect();
    ends.sort_unstable();
    let (mut s, mut e) = (0, 0);
    let mut free: Vec<usize> = Vec::new();
    let steps = g.nodes.len();
    for step in 0..=steps {
        while let Some(&(_, _, v)) = starts.get(s).filter(|x| x.0 == step) {
            s += 1;
            let n = bytes(v)?;
            p.unplanned = p.unplanned.saturating_add(n);
            let pick = free
                .iter()
                .enumerate()
                .filter(|(_, &b)| p.buffers[b] >= n)
                .min_by_key(|(_, &b)| p.buffers[b])
                .or_else(|| free.iter().enumerate().max_by_key(|(_, &b)| p.buffers[b]))
                .map(|(j, _)| j);
            let b = match pick {
                Some(j) => {
                    let b = free.swap_remove(j);
                    p.buffers[b] = p.buffers[b].max(n);
                    b
                }
                None => {
                    p.buffers.push(n.max(4));
                    p.buffers.len() - 1
                }
            };
            p.slots.insert(v, b);
        }
        while let Some(&(_, _, v)) = ends.get(e).filter(|x| x.0 == step) {
            e += 1;
            if let Some(&b) = p.slots.get(&v) {
                free.push(b);
            }
        }
    }
    for i in 0..g.values.len() {
        let id = ValueId(i as u32);
        let r = lt.root(id);
        if r != id {
            if let Some(&b) = p.slots.get(&r) {
                p.slots.insert(id, b);
            }
        }
    }
    Ok(p)
}
