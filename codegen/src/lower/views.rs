//! Which nodes are views (their output is their input's bytes under another shape, or
//! a contiguous run of them) and where a backend's memory plan lets them alias
//! ([`Views`]): decided from the graph alone, before any kernel is written.

use super::index;
use gopt_ir::ops::ShapeOp;
use gopt_ir::{Graph, Node, Op, ValueId};

/// How views are placed by the backend's memory plan.
#[derive(Clone, Copy, Debug)]
pub struct Views {
    /// Whether a graph output may alias another value's bytes (an arena: yes; a pool
    /// whose outputs are read back from their own buffers: no).
    pub alias_outputs: bool,
    /// Whether attention, element-wise, SwiGLU and rotary kernels read their inputs
    /// with any row stride and column offset, so a Split or Slice that cuts them from
    /// one tensor is absorbed ([`absorb`]).
    pub strided_reads: bool,
    /// Whether row kernels store a Cast's type next to (or instead of) their own, and
    /// SwiGLU and rotary kernels instead of theirs, so the Cast after a LayerNorm,
    /// RMSNorm, softmax, SwiGLU or RotaryEmbedding is absorbed ([`absorb`]).
    pub stores_casts: bool,
    /// Whether a value may start inside another's bytes (an arena: yes; a pool that
    /// binds whole buffers: no), so a Slice that cuts one contiguous, aligned run out
    /// of its input is a [`Lowered::Window`] instead of a copy.
    pub offset_views: bool,
}

/// Whether `op` is a view op: its output is its input's bytes under another shape.
pub fn is_view_op(op: Op) -> bool {
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

/// Whether node `n` of `g` is a view: a view op, or a Transpose that moves only axes
/// of length 1 (the others keep their order, so the elements' order is the input's:
/// a decode step's `[batch, 1, heads, head] -> [batch, heads, 1, head]`).
pub fn is_view(g: &Graph, n: &Node) -> bool {
    is_view_op(n.op) || order_kept(g, n)
}

/// Whether Transpose node `n` keeps its input's element order.
fn order_kept(g: &Graph, n: &Node) -> bool {
    if n.op != Op::Shape(ShapeOp::Transpose) {
        return false;
    }
    let Some(Some(x)) = n.inputs.first() else {
        return false;
    };
    let Some(shape) = g.ty(*x).ok().and_then(|t| gopt_ir::dim::concrete(&t.shape)) else {
        return false;
    };
    let perm: Vec<usize> = match n.attrs.ints("perm") {
        Ok(Some(p)) => p.iter().map(|&a| a as usize).collect(),
        Ok(None) => (0..shape.len()).rev().collect(),
        Err(_) => return false,
    };
    let moved: Vec<usize> = perm
        .into_iter()
        .filter(|&a| shape.get(a).is_some_and(|&d| d != 1))
        .collect();
    moved.windows(2).all(|w| w[0] < w[1])
}

/// The byte offset of Slice node `n`'s output in its input, when the output is one
/// contiguous run of the input starting at a multiple of [`crate::memory::ALIGN`]
/// bytes: steps of 1, every axis before the one it cuts of length 1 and every axis
/// after it whole (a decode step's Q, K and V cut from one GEMM output).
pub fn window(g: &Graph, n: &Node) -> Option<usize> {
    if n.op != Op::Shape(ShapeOp::Slice) {
        return None;
    }
    let (x, y) = (n.inputs.first().copied().flatten()?, *n.outputs.first()?);
    let xt = g.ty(x).ok()?;
    let xs = gopt_ir::dim::concrete(&xt.shape)?;
    let ys = gopt_ir::dim::concrete(&g.ty(y).ok()?.shape)?;
    let (start, step) = index::slice_window(g, n, &xs).ok()?;
    if step.iter().any(|&s| s != 1) || xs.len() != ys.len() {
        return None;
    }
    let cut = (0..xs.len()).find(|&a| start[a] != 0 || ys[a] != xs[a])?;
    let before_unit = xs[..cut].iter().all(|&d| d == 1);
    let after_whole = (cut + 1..xs.len()).all(|a| start[a] == 0 && ys[a] == xs[a]);
    let inner: usize = xs[cut + 1..].iter().product();
    let offset = start[cut] as usize * inner * xt.dtype.size();
    (before_unit && after_whole && offset.is_multiple_of(crate::memory::ALIGN)).then_some(offset)
}

/// Whether view node `n` of `g` aliases its input under `views`: its source is not a
/// constant (constants live in the weights), and its output may alias.
pub fn aliases(g: &Graph, n: &Node, views: Views) -> bool {
    let (Some(Some(src)), [out]) = (n.inputs.first(), n.outputs.as_slice()) else {
        return false;
    };
    is_view(g, n) && may_alias(g, *src, *out, views)
}

/// Whether `out` may live in `src`'s bytes: `src` is not a constant and `out` is not
/// an input, nor an output where outputs may not alias.
pub(super) fn may_alias(g: &Graph, src: ValueId, out: ValueId, views: Views) -> bool {
    !is_const_root(g, src)
        && (views.alias_outputs || !g.outputs.contains(&out))
        && !g.inputs.contains(&out)
}

/// Whether `v`, followed back through view nodes, is a constant.
fn is_const_root(g: &Graph, mut v: ValueId) -> bool {
    loop {
        if g.constants.contains_key(&v) {
            return true;
        }
        match g
            .nodes
            .iter()
            .find(|n| is_view(g, n) && n.outputs.first() == Some(&v))
            .and_then(|n| n.inputs.first().copied().flatten())
        {
            Some(src) => v = src,
            None => return false,
        }
    }
}
