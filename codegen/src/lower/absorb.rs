//! Nodes that run inside their neighbours instead of as kernels of their own, decided
//! here once so that the node's lowering ([`super::Lowered::Absorbed`]), the kernel
//! that does its work and the memory plan agree.
//!
//! - **A Split or Slice of Q, K and V read in place by attention.** When one fused
//!   GEMM computes Q, K and V side by side (`[batch, seq, (hq + 2·hkv) · head]`) and a
//!   Split or Slices cut it into the three inputs of one 3-D attention, the attention
//!   kernel reads its heads straight from the GEMM's output with a wider row stride and
//!   a column offset, so the copies are never made. Only where the backend's kernels
//!   take strides ([`super::Views::strided_reads`]).
//! - **Columns read in place by element-wise, SwiGLU and rotary kernels.** A Slice or
//!   Split of the last axis whose every reader (past views of it) is an element-wise or
//!   SwiGLU kernel, or a RotaryEmbedding's X, is not copied: each reader indexes the
//!   source's rows with its pitch and the cut's first column ([`column_reads`]): a
//!   merged Q/K/V GEMM's pieces going into RotaryEmbedding and casts, a merged gate/up
//!   GEMM's halves into SwiGLU. Only where the backend's kernels take strides
//!   ([`super::Views::strided_reads`]).
//! - **A Cast stored by the row kernel before it.** A LayerNorm, RMSNorm or softmax
//!   read by a Cast to another float type stores the cast's type itself (fp32 math
//!   inside, one rounding at the store): instead of its own output when the Cast is its
//!   only reader, next to it otherwise (BERT's LayerNorm feeds the next GEMMs in bf16
//!   and the residual in fp32). A SwiGLU or RotaryEmbedding stores a Cast that is its
//!   only reader. The cast's output is then written at the kernel's step
//!   ([`early_writes`]). Only where the backend's row, SwiGLU and rotary kernels have
//!   the store ([`super::Views::stores_casts`]).

use gopt_ir::ops::{AttentionOp, ElementwiseOp, ReduceOp, ShapeOp};
use gopt_ir::{Attr, DType, Graph, Node, Op, ValueId};
use std::collections::HashMap;

/// Where attention finds Q, K and V in one wider tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InPlace {
    /// The tensor Q, K and V are columns of (`[batch, seq, width]`, contiguous).
    pub source: ValueId,
    /// Its last dim: the row stride of Q, K and V.
    pub width: usize,
    /// The first column of Q, K and V.
    pub offsets: [usize; 3],
}

/// The nodes reading each value.
fn readers(g: &Graph, v: ValueId) -> Vec<&Node> {
    g.nodes
        .iter()
        .filter(|n| n.inputs.iter().flatten().any(|i| *i == v))
        .collect()
}

/// The node writing `v`, and which of its outputs `v` is.
fn writer(g: &Graph, v: ValueId) -> Option<(&Node, usize)> {
    g.nodes
        .iter()
        .find_map(|n| n.outputs.iter().position(|o| *o == v).map(|k| (n, k)))
}

fn shape(g: &Graph, v: ValueId) -> Option<Vec<usize>> {
    gopt_ir::dim::concrete(&g.ty(v).ok()?.shape)
}

fn ints(g: &Graph, n: &Node, k: usize) -> Option<Vec<i64>> {
    let v = n.inputs.get(k).copied().flatten()?;
    Some(g.constant(v)?.to_i64_vec())
}

/// `(source, first column)` when `v` is a run of whole rows' columns of its source:
/// output `k` of a Split along the last axis, or a unit-step Slice of the last axis only.
fn columns_of(g: &Graph, v: ValueId) -> Option<(ValueId, usize)> {
    let (n, k) = writer(g, v)?;
    let src = n.inputs.first().copied().flatten()?;
    let ss = shape(g, src)?;
    let last = ss.len().checked_sub(1)?;
    if g.outputs.contains(&v) || g.constants.contains_key(&src) {
        return None;
    }
    let on_last = |a: i64| a == -1 || a == last as i64;
    // A Split along the last axis, or a unit-step Slice of the last axis only.
    if n.op == Op::Shape(ShapeOp::Split) {
        let axis = match n.attrs.0.get("axis") {
            Some(Attr::Int(a)) => *a,
            None => 0,
            Some(_) => return None,
        };
        if !on_last(axis) {
            return None;
        }
        let before: Option<usize> = n.outputs[..k]
            .iter()
            .map(|o| shape(g, *o).and_then(|s| s.last().copied()))
            .sum();
        return Some((src, before?));
    }
    if n.op != Op::Shape(ShapeOp::Slice) {
        return None;
    }
    let (starts, ends) = (ints(g, n, 1)?, ints(g, n, 2)?);
    let axes = match n.inputs.get(3).copied().flatten() {
        Some(_) => ints(g, n, 3)?,
        None => vec![0],
    };
    let unit = match n.inputs.get(4).copied().flatten() {
        Some(_) => ints(g, n, 4)? == [1],
        None => true,
    };
    let ([s], [_], [a]) = (starts.as_slice(), ends.as_slice(), axes.as_slice()) else {
        return None;
    };
    let w = *ss.last()? as i64;
    let s = if *s < 0 { s + w } else { *s };
    (unit && on_last(*a) && (0..w).contains(&s)).then_some((src, s as usize))
}

/// Where attention node `n` can read Q, K and V in place: each is columns of the same
/// 3-D tensor, cut by Splits or Slices whose every output this node alone reads.
pub fn attention_in_place(g: &Graph, n: &Node) -> Option<InPlace> {
    if n.op != Op::Attention(AttentionOp::Attention) {
        return None;
    }
    let qkv: Vec<ValueId> = (0..3)
        .map(|k| n.inputs.get(k).copied().flatten())
        .collect::<Option<_>>()?;
    let mut cols = Vec::with_capacity(3);
    for &v in &qkv {
        let (src, off) = columns_of(g, v)?;
        let (cutter, _) = writer(g, v)?;
        // Every piece the Split/Slice makes is one of Q, K, V of this node, read by it
        // only: the cut then has no other reader that would need the copies.
        for o in &cutter.outputs {
            if !qkv.contains(o) || readers(g, *o).iter().any(|r| r.name != n.name) {
                return None;
            }
        }
        cols.push((src, off));
    }
    let source = cols[0].0;
    if cols.iter().any(|c| c.0 != source) || g.outputs.contains(&source) {
        return None;
    }
    let ss = shape(g, source)?;
    let qs = shape(g, qkv[0])?;
    if qs.len() != 3 || qs[..2] != ss[..2] {
        return None;
    }
    Some(InPlace {
        source,
        width: ss[2],
        offsets: [cols[0].1, cols[1].1, cols[2].1],
    })
}

/// Whether Split/Slice node `n` needs no copy: attention reads each of its outputs in
/// place, or element-wise and SwiGLU kernels do ([`column_reads`]).
pub fn cut_read_in_place(g: &Graph, n: &Node, views: super::Views) -> bool {
    if !matches!(n.op, Op::Shape(ShapeOp::Split | ShapeOp::Slice)) {
        return false;
    }
    let by_attention = n.outputs.iter().all(|o| {
        let rs = readers(g, *o);
        !rs.is_empty() && rs.iter().all(|r| attention_in_place(g, r).is_some())
    });
    by_attention || n.outputs.iter().all(|o| read_as_columns(g, *o, views))
}

/// Where a kernel finds an input that is columns of a wider tensor (a Slice or Split
/// of its last axis that the kernel reads in place, [`column_reads`]): element `i` of
/// the input (in its own row-major order, which views of it keep) is element
/// `(i / cols) · width + offset + i % cols` of `source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Columns {
    /// The tensor the columns are cut from.
    pub source: ValueId,
    /// Its last dim: the row pitch.
    pub width: usize,
    /// The first column.
    pub offset: usize,
    /// The columns per row.
    pub cols: usize,
}

impl Columns {
    /// The source's element for the input's element `i` (a C expression).
    pub fn index(&self, i: &str) -> String {
        if self.cols == self.width {
            return format!("{} + ({i})", self.offset);
        }
        format!(
            "(({i}) / {c}LL) * {w}LL + {o}LL + ({i}) % {c}LL",
            c = self.cols,
            w = self.width,
            o = self.offset
        )
    }

    /// Whether runs of `vec` elements of the input are runs of the source that start
    /// at multiples of `vec`, so both can be read `vec` at a time.
    pub fn vectors(&self, vec: usize) -> bool {
        self.cols.is_multiple_of(vec)
            && self.width.is_multiple_of(vec)
            && self.offset.is_multiple_of(vec)
    }
}

/// Whether every reader of cut output `v` (past the views of it that alias it) is an
/// element-wise or SwiGLU kernel, or a RotaryEmbedding reading it as X, which reads it
/// as columns of its source in place; none of those values is a graph output.
fn read_as_columns(g: &Graph, v: ValueId, views: super::Views) -> bool {
    if columns_of(g, v).is_none() {
        return false;
    }
    let mut todo = vec![v];
    let mut any = false;
    while let Some(x) = todo.pop() {
        if g.outputs.contains(&x) {
            return false;
        }
        for r in readers(g, x) {
            // RotaryEmbedding reads its X (input 0) in place; its tables are buffers.
            let as_x = r.inputs.iter().skip(1).all(|i| *i != Some(x));
            let Ok(low) = super::shallow(g, r, views) else {
                return false;
            };
            if let ([o], super::Lowered::View) = (r.outputs.as_slice(), &low) {
                if super::aliases(g, r, views) {
                    todo.push(*o);
                    continue;
                }
            }
            let kind = if let super::Lowered::Kernel(spec) = &low {
                Some(spec.kind())
            } else {
                None
            };
            let in_place = matches!(kind, Some(super::Kind::Elementwise | super::Kind::Glu))
                || (kind == Some(super::Kind::Rotary) && as_x);
            if !in_place {
                return false;
            }
            any = true;
        }
    }
    any
}

/// Where the kernel reading `v` finds it when `v` (or the value a chain of aliasing
/// views of it starts from) is a cut that element-wise and SwiGLU kernels read in place
/// ([`cut_read_in_place`]); `None` when `v` is a buffer of its own.
pub fn column_reads(g: &Graph, v: ValueId, views: super::Views) -> Option<Columns> {
    if !views.strided_reads {
        return None;
    }
    let mut at = v;
    loop {
        let (n, _) = writer(g, at)?;
        if matches!(n.op, Op::Shape(ShapeOp::Split | ShapeOp::Slice)) {
            if !n.outputs.iter().all(|o| read_as_columns(g, *o, views)) {
                return None;
            }
            let (source, offset) = columns_of(g, at)?;
            let width = *shape(g, source)?.last()?;
            let cols = *shape(g, at)?.last()?;
            return Some(Columns {
                source,
                width,
                offset,
                cols,
            });
        }
        if !(super::is_view(g, n) && super::aliases(g, n, views)) {
            return None;
        }
        at = n.inputs.first().copied().flatten()?;
    }
}

/// Whether `op` is a row op whose kernels may store another float type (next to its
/// own or instead of it).
fn is_row_op(op: Op) -> bool {
    matches!(
        op,
        Op::Reduce(
            ReduceOp::LayerNormalization
                | ReduceOp::RMSNormalization
                | ReduceOp::Softmax
                | ReduceOp::LogSoftmax
        )
    )
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16)
}

/// The Cast that row node `n` stores for, and whether it is the only reader of `n`'s
/// first output: the first of its readers that is a Cast between float types (the
/// cast's output not a graph output). A SwiGLU or RotaryEmbedding stores a Cast that
/// is its only reader (instead of its own output).
pub fn stored_cast<'g>(g: &'g Graph, n: &Node) -> Option<(&'g Node, bool)> {
    let glu = matches!(
        n.op,
        Op::Attention(AttentionOp::SwiGLU | AttentionOp::RotaryEmbedding)
    );
    if !is_row_op(n.op) && !glu {
        return None;
    }
    let y = *n.outputs.first()?;
    let float = |v: ValueId| g.ty(v).is_ok_and(|t| is_float(t.dtype));
    // The readers past views of y (which keep its element order), and whether any
    // value on the way is a graph output.
    let mut rs: Vec<&Node> = Vec::new();
    let mut exposed = false;
    let mut todo = vec![y];
    while let Some(v) = todo.pop() {
        exposed |= g.outputs.contains(&v);
        for r in readers(g, v) {
            match r.outputs.as_slice() {
                [o] if super::is_view(g, r) => todo.push(*o),
                [_] | [] | [_, _, ..] => rs.push(r),
            }
        }
    }
    let cast = rs.iter().find(|c| {
        c.op == Op::Elementwise(ElementwiseOp::Cast)
            && c.outputs
                .first()
                .is_some_and(|o| float(*o) && !g.outputs.contains(o))
    })?;
    let only = rs.len() == 1 && !exposed;
    (float(y) && (only || !glu)).then_some((*cast, only))
}

/// Whether Cast node `n` is stored by the row kernel before it.
pub fn cast_stored_by_producer(g: &Graph, n: &Node) -> bool {
    if n.op != Op::Elementwise(ElementwiseOp::Cast) {
        return false;
    }
    // Back through views to the node that computes the cast's input.
    let mut at = n
        .inputs
        .first()
        .copied()
        .flatten()
        .and_then(|x| writer(g, x));
    while let Some((p, 0)) = at {
        if !super::is_view(g, p) {
            break;
        }
        at = p
            .inputs
            .first()
            .copied()
            .flatten()
            .and_then(|x| writer(g, x));
    }
    matches!(at, Some((p, 0)) if stored_cast(g, p).is_some_and(|(c, _)| c.name == n.name))
}

/// Values written before their node's turn: an absorbed Cast's output, by the row
/// kernel at node index `i` (the memory plan keeps them alive from there).
pub fn early_writes(g: &Graph, views: super::Views) -> HashMap<ValueId, usize> {
    let mut early = HashMap::new();
    if !views.stores_casts {
        return early;
    }
    for (i, n) in g.nodes.iter().enumerate() {
        if let Some((c, _)) = stored_cast(g, n) {
            if let Some(&out) = c.outputs.first() {
                early.insert(out, i);
            }
        }
    }
    early
}
