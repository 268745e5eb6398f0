//! Weights larger than one storage binding, split so WGSL can bind them. WebGPU binds a
//! buffer to a shader only up to `maxStorageBufferBindingSize`: 128 MiB by default and
//! on lavapipe, so AlexNet's 144 MiB classifier or an LLM's embedding table could not
//! be bound at all. Before a graph is planned for WGSL, a matrix product (MatMul,
//! FusedMatMul, Gemm, MatMulNBits) whose constant B is above the limit becomes one
//! product per slice of B's output columns (MatMulNBits: its scales, zero points and
//! bias cut with them, its attribute N the slice's width), and a Gather from a
//! constant table above it one Gather per slice of a non-gathered axis; a Concat joins
//! the pieces into the original output. Every piece is an ordinary node (its own
//! shader, index checks included), so the answer is the same and only the pieces'
//! bindings change. Values computed at run time above the limit are still refused when
//! the plan is loaded, naming the kernel.

use crate::lower::support::plan;
use crate::Result;
use gopt_ir::ops::{FusedOp, NnOp, ShapeOp};
use gopt_ir::{Attr, Attrs, Const, Graph, Node, Op, Tensor, ValueId};
use ndarray::{Axis, Slice};

/// The storage binding size every WebGPU implementation allows (and lavapipe's).
pub const WEBGPU_MAX_BINDING: u64 = 128 << 20;

/// Splits every product and gather of `g` whose constant operand takes more than
/// `max_binding` bytes in WGSL storage; returns how many nodes were split. The graph
/// must be verified again afterwards.
pub fn split_large_weights(g: &mut Graph, max_binding: u64) -> Result<usize> {
    let mut split = 0;
    for i in 0..g.nodes.len() {
        let node = g.nodes[i].clone();
        let Some(cut) = cut_of(g, &node, max_binding)? else {
            continue;
        };
        g.nodes[i] = pieces(g, &node, &cut)?;
        split += 1;
    }
    Ok(split)
}

/// How one node is cut: its big constant input and the axis cut, the output axis the
/// pieces are joined along, and the piece boundaries along them.
struct Cut {
    /// Which input is the big constant.
    input: usize,
    /// The constant's axis that is cut.
    axis: usize,
    /// The output's axis the pieces are concatenated along.
    out_axis: usize,
    /// `[start, end)` of each piece along both.
    ranges: Vec<(usize, usize)>,
    /// Other inputs sliced along their last axis with the pieces (a bias or residual
    /// that spans the output columns).
    along: Vec<usize>,
}

/// Bytes of `v` in WGSL storage (sub-word integers and booleans take a word).
fn storage_bytes(g: &Graph, v: ValueId) -> Option<u64> {
    let c = g.konst(v)?;
    let (_, width) = super::storage_type(c.dtype())?;
    Some(c.shape().iter().product::<usize>() as u64 * width as u64)
}

/// The axis of the big operand (of the given rank) that is cut, if any.
type AxisOf = fn(&Node, usize) -> Result<Option<usize>>;

/// Whether and how `node` must be cut to bind under `max_binding`.
fn cut_of(g: &Graph, node: &Node, max_binding: u64) -> Result<Option<Cut>> {
    let (input, axis_of, along): (usize, AxisOf, &[usize]) = match node.op {
        Op::Nn(NnOp::MatMul) => (1, |_, r| Ok((r >= 2).then(|| r - 1)), &[]),
        Op::Fused(FusedOp::FusedMatMul) => (1, fused_axis, &[2, 3]),
        Op::Nn(NnOp::Gemm) => (1, gemm_axis, &[2]),
        // B is `[N, blocks, blob]`; the per-column operands are cut in `nbits_piece`.
        Op::Nn(NnOp::MatMulNBits) => (1, |_, r| Ok((r == 3).then_some(0)), &[]),
        Op::Shape(ShapeOp::Gather) => (0, gather_axis, &[]),
        _ => return Ok(None),
    };
    let Some(b) = node.inputs.get(input).copied().flatten() else {
        return Ok(None);
    };
    let Some(bytes) = storage_bytes(g, b).filter(|&n| n > max_binding) else {
        return Ok(None);
    };
    let shape = g.konst(b).map(|c| c.shape().to_vec()).unwrap_or_default();
    let Some(axis) = axis_of(node, shape.len())? else {
        return Ok(None);
    };
    let n = shape[axis];
    let per = bytes / n.max(1) as u64;
    // Pieces a multiple of 64 wide where they can be (the GEMM tiles' alignment).
    let mut width = (max_binding / per.max(1)) as usize;
    if width >= 64 {
        width -= width % 64;
    }
    if width == 0 || width >= n {
        return Ok(None);
    }
    let ranges = (0..n)
        .step_by(width)
        .map(|s| (s, (s + width).min(n)))
        .collect();
    let out_rank = out_rank(g, node)?;
    let out_axis = match node.op {
        Op::Shape(ShapeOp::Gather) => gather_out_axis(g, node, axis)?,
        _ => out_rank.saturating_sub(1),
    };
    let along = along
        .iter()
        .copied()
        .filter(|&k| spans(g, node, k, n))
        .collect();
    Ok(Some(Cut {
        input,
        axis,
        out_axis,
        ranges,
        along,
    }))
}

fn out_rank(g: &Graph, node: &Node) -> Result<usize> {
    let out = *node
        .outputs
        .first()
        .ok_or_else(|| plan(format!("node `{}` has no output", node.name)))?;
    Ok(g.ty(out).map_err(plan)?.shape.len())
}

/// FusedMatMul: B's output-column axis (the last, or the one before with `trans_b`).
fn fused_axis(node: &Node, rank: usize) -> Result<Option<usize>> {
    let tb = node.attrs.int_or("trans_b", 0).map_err(plan)? != 0;
    Ok(match (rank, tb) {
        (r, _) if r < 2 => None,
        (r, false) => Some(r - 1),
        (r, true) => Some(r - 2),
    })
}

/// Gemm: B's output-column axis (1, or 0 with `transB`).
fn gemm_axis(node: &Node, rank: usize) -> Result<Option<usize>> {
    let tb = node.attrs.int_or("transB", 0).map_err(plan)? != 0;
    Ok((rank == 2).then_some(if tb { 0 } else { 1 }))
}

/// Gather: the table's last axis, or its first when the last is the gathered one.
fn gather_axis(node: &Node, rank: usize) -> Result<Option<usize>> {
    if rank < 2 {
        return Ok(None);
    }
    let a = node.attrs.int_or("axis", 0).map_err(plan)?;
    let a = if a < 0 { a + rank as i64 } else { a } as usize;
    Ok(Some(if a == rank - 1 { 0 } else { rank - 1 }))
}

/// Where table axis `axis` lands in a Gather's output (the indices' axes replace the
/// gathered one).
fn gather_out_axis(g: &Graph, node: &Node, axis: usize) -> Result<usize> {
    let data = node.inputs.first().copied().flatten();
    let idx = node.inputs.get(1).copied().flatten();
    let (Some(data), Some(idx)) = (data, idx) else {
        return Err(plan(format!("Gather `{}` lacks an input", node.name)));
    };
    let rank = g.ty(data).map_err(plan)?.shape.len() as i64;
    let idx_rank = g.ty(idx).map_err(plan)?.shape.len();
    let a = node.attrs.int_or("axis", 0).map_err(plan)?;
    let a = if a < 0 { a + rank } else { a } as usize;
    Ok(if axis < a { axis } else { axis - 1 + idx_rank })
}

/// Whether input `k` of `node` spans the `n` output columns along its last axis (so
/// each piece takes its slice of it); one that broadcasts is shared as it is.
fn spans(g: &Graph, node: &Node, k: usize, n: usize) -> bool {
    node.inputs
        .get(k)
        .copied()
        .flatten()
        .and_then(|v| g.ty(v).ok())
        .and_then(|t| t.shape.last().and_then(|d| d.known()))
        .is_some_and(|last| last as usize == n && n > 1)
}

/// The pieces of `node` (pushed onto `g`) and the Concat that joins them into the
/// node's output, which replaces it.
fn pieces(g: &mut Graph, node: &Node, cut: &Cut) -> Result<Node> {
    let out = node.outputs[0];
    let b = node.inputs[cut.input].ok_or_else(|| plan("the cut input is absent"))?;
    let whole = g
        .konst(b)
        .ok_or_else(|| plan("the cut input is not a constant"))?
        .decoded()
        .into_owned();
    let mut parts = Vec::with_capacity(cut.ranges.len());
    for (p, &(s, e)) in cut.ranges.iter().enumerate() {
        let name = format!("{}.part{p}", node.name);
        let mut inputs = node.inputs.clone();
        let piece = slice(&whole, cut.axis, s, e);
        inputs[cut.input] = Some(g.add_const(&format!("{name}.w"), Const::from(piece)));
        for &k in &cut.along {
            if let Some(v) = inputs[k] {
                inputs[k] = Some(slice_last(g, v, s, e, &name)?);
            }
        }
        let mut attrs = node.attrs.clone();
        if node.op == Op::Nn(NnOp::MatMulNBits) {
            nbits_piece(g, &mut inputs, &mut attrs, (s, e, whole.shape()[0]), &name)?;
        }
        let outs = [format!("{name}.y")];
        let outs: Vec<&str> = outs.iter().map(String::as_str).collect();
        let id = g.add_node(&name, node.op, attrs, inputs, &outs);
        parts.push(Some(g.nodes[id.index()].outputs[0]));
    }
    let mut attrs = Attrs::default();
    attrs.set("axis", Attr::Int(cut.out_axis as i64));
    Ok(Node {
        name: format!("{}.join", node.name),
        op: Op::Shape(ShapeOp::Concat),
        attrs,
        inputs: parts,
        outputs: vec![out],
    })
}

/// The operands of MatMulNBits piece `name`, columns `[start, end)` of `n`: the scales,
/// zero points and bias hold `n` equal runs (one per column, `[n · run]` or `[n, run]`),
/// cut like B; attribute N becomes the piece's width.
fn nbits_piece(
    g: &mut Graph,
    inputs: &mut [Option<ValueId>],
    attrs: &mut Attrs,
    (start, end, n): (usize, usize, usize),
    name: &str,
) -> Result<()> {
    use gopt_ir::ops::nn::nbits::slot;
    for k in [slot::SCALES, slot::ZERO_POINTS, slot::BIAS] {
        let Some(v) = inputs.get(k).copied().flatten() else {
            continue;
        };
        let shape = g.ty(v).map_err(plan)?.shape.clone();
        let run = match shape.as_slice() {
            [d] => d.known().map(|len| len as usize / n.max(1)),
            [_, _] => Some(1),
            _ => None,
        }
        .ok_or_else(|| {
            plan(format!(
                "MatMulNBits `{name}`: operand {k} is not per column"
            ))
        })?;
        let piece = slice_along(g, v, 0, (start * run, end * run), &format!("{name}.in{k}"))?;
        inputs[k] = Some(piece);
    }
    attrs.set("N", Attr::Int((end - start) as i64));
    Ok(())
}

/// `[start, end)` of `t` along `axis`, as a tensor of its own.
fn slice(t: &Tensor, axis: usize, start: usize, end: usize) -> Tensor {
    gopt_ir::map_tensor!(t, a => a.slice_axis(Axis(axis), Slice::from(start..end)).to_owned())
}

/// `[start, end)` of `v` along its last axis: a constant of its own, or a Slice node.
fn slice_last(g: &mut Graph, v: ValueId, start: usize, end: usize, name: &str) -> Result<ValueId> {
    let rank = g.ty(v).map_err(plan)?.shape.len();
    slice_along(g, v, rank.saturating_sub(1), (start, end), name)
}

/// `[start, end)` of `v` along `axis`: a constant `<name>.operand`, or the output of
/// Slice node `<name>.slice`.
fn slice_along(
    g: &mut Graph,
    v: ValueId,
    axis: usize,
    (start, end): (usize, usize),
    name: &str,
) -> Result<ValueId> {
    if let Some(c) = g.konst(v) {
        let t = slice(&c.decoded(), axis, start, end);
        return Ok(g.add_const(&format!("{name}.operand"), Const::from(t)));
    }
    let starts = g.add_const(
        &format!("{name}.starts"),
        Tensor::from_i64s(&[start as i64]),
    );
    let ends = g.add_const(&format!("{name}.ends"), Tensor::from_i64s(&[end as i64]));
    let axes = g.add_const(&format!("{name}.axes"), Tensor::from_i64s(&[axis as i64]));
    let outs = [format!("{name}.operand")];
    let id = g.add_node(
        &format!("{name}.slice"),
        Op::Shape(ShapeOp::Slice),
        Attrs::default(),
        vec![Some(v), Some(starts), Some(ends), Some(axes)],
        &[outs[0].as_str()],
    );
    Ok(g.nodes[id.index()].outputs[0])
}
