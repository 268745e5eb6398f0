//! Weights larger than one storage binding, split so a backend can bind them: a graph
//! rewrite, run for wgpu before the graph is planned. WebGPU binds a buffer to a shader
//! only up to `maxStorageBufferBindingSize`: 128 MiB by default and on lavapipe, so
//! AlexNet's 144 MiB classifier or an LLM's embedding table could not be bound at all.
//! A matrix product (MatMul,
//! FusedMatMul, Gemm, MatMulNBits) whose constant B is above the limit becomes one
//! product per slice of B's output columns (MatMulNBits: its scales, zero points and
//! bias cut with them, its attribute N the slice's width), and a Gather from a
//! constant table above it one Gather per slice of a non-gathered axis; a Concat joins
//! the pieces into the original output. Every piece is an ordinary node (its own
//! shader, index checks included), so the answer is the same and only the pieces'
//! bindings change. The backend's storage (bytes per element of each dtype) is the
//! caller's [`Storage`]; values computed at run time above the limit are still refused
//! when the plan is loaded, naming the kernel.

use crate::{PassError, Result};
use gopt_ir::ops::{FusedOp, NnOp, ShapeOp};
use gopt_ir::{Attr, Attrs, Const, DType, Graph, IrError, Node, Op, Tensor, ValueId};
use ndarray::{Axis, Slice};

/// What one binding holds: its size limit, and the bytes an element of each dtype takes
/// in the backend's storage (`None`: a dtype the backend does not store, never split).
#[derive(Clone, Copy, Debug)]
pub struct Storage {
    /// The most bytes one binding may hold.
    pub max_binding: u64,
    /// Bytes per element of a dtype in storage.
    pub elem_bytes: fn(DType) -> Option<u64>,
}

/// Splits every product and gather of `g` whose constant operand takes more than
/// `storage.max_binding` bytes; returns how many nodes were split. The graph must be
/// verified again afterwards.
pub fn split_large_weights(g: &mut Graph, storage: Storage) -> Result<usize> {
    let mut split = 0;
    for i in 0..g.nodes.len() {
        let node = g.nodes[i].clone();
        let Some(cut) = cut_of(g, &node, storage)? else {
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

/// Bytes of constant `v` in the backend's storage.
fn storage_bytes(g: &Graph, v: ValueId, storage: Storage) -> Option<u64> {
    let c = g.konst(v)?;
    let width = (storage.elem_bytes)(c.dtype())?;
    Some(c.shape().iter().product::<usize>() as u64 * width)
}

/// The error for a graph the split cannot read (a node without the operands its op
/// has).
fn invalid(msg: impl Into<String>) -> PassError {
    PassError::Ir(IrError::Invalid(msg.into()))
}

/// The axis of the big operand (of the given rank) that is cut, if any.
type AxisOf = fn(&Node, usize) -> Result<Option<usize>>;

/// Whether and how `node` must be cut to bind under `storage.max_binding`.
fn cut_of(g: &Graph, node: &Node, storage: Storage) -> Result<Option<Cut>> {
    let Some((input, axis_of, along)) = weight_of(node.op) else {
        return Ok(None);
    };
    let Some(b) = node.inputs.get(input).copied().flatten() else {
        return Ok(None);
    };
    let max_binding = storage.max_binding;
    let Some(bytes) = storage_bytes(g, b, storage).filter(|&n| n > max_binding) else {
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
    let out_axis = if node.op == Op::Shape(ShapeOp::Gather) {
        gather_out_axis(g, node, axis)?
    } else {
        out_rank.saturating_sub(1)
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

/// The products and gathers that can be cut: which input is the weight, the axis of it
/// that is cut, and the other inputs cut with it (`None`: an op never split).
fn weight_of(op: Op) -> Option<(usize, AxisOf, &'static [usize])> {
    match op {
        Op::Nn(nn) => match nn {
            NnOp::MatMul => Some((1, |_, r| Ok((r >= 2).then(|| r - 1)), &[])),
            NnOp::Gemm => Some((1, gemm_axis, &[2])),
            // B is `[N, blocks, blob]`; the per-column operands are cut in `nbits_piece`.
            NnOp::MatMulNBits => Some((1, |_, r| Ok((r == 3).then_some(0)), &[])),
            NnOp::MatMulInteger
            | NnOp::QLinearMatMul
            | NnOp::Conv
            | NnOp::ConvTranspose
            | NnOp::ConvInteger
            | NnOp::QLinearConv
            | NnOp::DeformConv
            | NnOp::QuantizeLinear
            | NnOp::DequantizeLinear
            | NnOp::DynamicQuantizeLinear
            | NnOp::AveragePool
            | NnOp::MaxPool
            | NnOp::LpPool
            | NnOp::GlobalAveragePool
            | NnOp::GlobalMaxPool
            | NnOp::GlobalLpPool
            | NnOp::MaxUnpool
            | NnOp::Einsum
            | NnOp::Det => None,
        },
        Op::Fused(f) => match f {
            FusedOp::FusedMatMul => Some((1, fused_axis, &[2, 3])),
            FusedOp::FusedConv | FusedOp::FusedElementwise => None,
        },
        Op::Shape(s) => match s {
            ShapeOp::Gather => Some((0, gather_axis, &[])),
            ShapeOp::Identity
            | ShapeOp::Shape
            | ShapeOp::Size
            | ShapeOp::Reshape
            | ShapeOp::Flatten
            | ShapeOp::Squeeze
            | ShapeOp::Unsqueeze
            | ShapeOp::Expand
            | ShapeOp::Tile
            | ShapeOp::Transpose
            | ShapeOp::Concat
            | ShapeOp::Split
            | ShapeOp::DepthToSpace
            | ShapeOp::SpaceToDepth
            | ShapeOp::Slice
            | ShapeOp::Pad
            | ShapeOp::CenterCropPad
            | ShapeOp::ReverseSequence
            | ShapeOp::GatherElements
            | ShapeOp::GatherND
            | ShapeOp::Compress
            | ShapeOp::NonZero
            | ShapeOp::ScatterElements
            | ShapeOp::ScatterND
            | ShapeOp::Scatter
            | ShapeOp::ConstantOfShape
            | ShapeOp::Range
            | ShapeOp::EyeLike
            | ShapeOp::OneHot
            | ShapeOp::Trilu
            | ShapeOp::Unique => None,
        },
        // Element-wise ops, reductions, image ops, control flow and attention read
        // weights no product reads: none is split.
        Op::Elementwise(_)
        | Op::Reduce(_)
        | Op::Image(_)
        | Op::Control(_)
        | Op::Attention(_)
        | Op::Collective(_) => None,
    }
}

fn out_rank(g: &Graph, node: &Node) -> Result<usize> {
    let out = *node
        .outputs
        .first()
        .ok_or_else(|| invalid(format!("node `{}` has no output", node.name)))?;
    Ok(g.ty(out)?.shape.len())
}

/// FusedMatMul: B's output-column axis (the last, or the one before with `trans_b`).
fn fused_axis(node: &Node, rank: usize) -> Result<Option<usize>> {
    let tb = node.attrs.int_or("trans_b", 0)? != 0;
    Ok(match (rank, tb) {
        (r, _) if r < 2 => None,
        (r, false) => Some(r - 1),
        (r, true) => Some(r - 2),
    })
}

/// Gemm: B's output-column axis (1, or 0 with `transB`).
fn gemm_axis(node: &Node, rank: usize) -> Result<Option<usize>> {
    let tb = node.attrs.int_or("transB", 0)? != 0;
    Ok((rank == 2).then_some(if tb { 0 } else { 1 }))
}

/// Gather: the table's last axis, or its first when the last is the gathered one.
fn gather_axis(node: &Node, rank: usize) -> Result<Option<usize>> {
    if rank < 2 {
        return Ok(None);
    }
    let a = node.attrs.int_or("axis", 0)?;
    let a = if a < 0 { a + rank as i64 } else { a } as usize;
    Ok(Some(if a == rank - 1 { 0 } else { rank - 1 }))
}

/// Where table axis `axis` lands in a Gather's output (the indices' axes replace the
/// gathered one).
fn gather_out_axis(g: &Graph, node: &Node, axis: usize) -> Result<usize> {
    let data = node.inputs.first().copied().flatten();
    let idx = node.inputs.get(1).copied().flatten();
    let (Some(data), Some(idx)) = (data, idx) else {
        return Err(invalid(format!("Gather `{}` lacks an input", node.name)));
    };
    let rank = g.ty(data)?.shape.len() as i64;
    let idx_rank = g.ty(idx)?.shape.len();
    let a = node.attrs.int_or("axis", 0)?;
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
    let b = node.inputs[cut.input].ok_or_else(|| invalid("the cut input is absent"))?;
    let whole = g
        .konst(b)
        .ok_or_else(|| invalid("the cut input is not a constant"))?
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
        let shape = g.ty(v)?.shape.clone();
        let run = match shape.as_slice() {
            [d] => d.known().map(|len| len as usize / n.max(1)),
            [_, _] => Some(1),
            [] | [_, _, _, ..] => None,
        }
        .ok_or_else(|| {
            invalid(format!(
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
    let rank = g.ty(v)?.shape.len();
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

#[cfg(test)]
mod tests {
    use super::*;
    use gopt_ir::dim::shape_of;
    use gopt_ir::TensorType;

    /// f32 and i64 as WGSL stores them (4 and 8 bytes).
    fn storage(max_binding: u64) -> Storage {
        Storage {
            max_binding,
            elem_bytes: |dt| match dt {
                DType::I64 => Some(8),
                _ => Some(4),
            },
        }
    }

    fn values(n: usize, seed: f64) -> Vec<f64> {
        (0..n).map(|i| (i as f64 * 0.37 + seed).sin()).collect()
    }

    /// `x [3, 50] @ w [50, 70]` (14,000 bytes) and a Gather from a `[40, 30]` table (4,800
    /// bytes), each with its own node.
    fn graph() -> Graph {
        let mut g = Graph::new("split");
        let x = g.add_input("x", TensorType::new(DType::F32, shape_of(&[3, 50])));
        let ids = g.add_input("ids", TensorType::new(DType::I64, shape_of(&[4])));
        let w = Tensor::from_f64s(DType::F32, &[50, 70], &values(3500, 1.0)).expect("w");
        let w = g.add_const("w", w);
        let t = Tensor::from_f64s(DType::F32, &[40, 30], &values(1200, 2.0)).expect("t");
        let t = g.add_const("t", t);
        let mm = g.add_node(
            "mm",
            Op::Nn(NnOp::MatMul),
            Attrs::default(),
            vec![Some(x), Some(w)],
            &["y"],
        );
        let ga = g.add_node(
            "embed",
            Op::Shape(ShapeOp::Gather),
            Attrs::default(),
            vec![Some(t), Some(ids)],
            &["e"],
        );
        g.outputs = vec![
            g.nodes[mm.index()].outputs[0],
            g.nodes[ga.index()].outputs[0],
        ];
        g
    }

    #[test]
    fn weights_above_the_binding_are_cut_and_the_answer_stays() {
        let g = gopt_ir::verify(graph()).expect("verifies").into_inner();
        let inputs = [
            Tensor::from_f64s(DType::F32, &[3, 50], &values(150, 3.0)).expect("x"),
            Tensor::from_i64s(&[0, 39, 7, -1]),
        ];
        let want = gopt_ir::interp::run(&g, &inputs).expect("runs");
        let mut split = g.clone();
        assert_eq!(
            split_large_weights(&mut split, storage(4096)).expect("splits"),
            2
        );
        let joins = split
            .nodes
            .iter()
            .filter(|n| n.name.ends_with(".join") && n.op == Op::Shape(ShapeOp::Concat))
            .count();
        assert_eq!(joins, 2);
        let split = gopt_ir::verify(split).expect("verifies again").into_inner();
        let got = gopt_ir::interp::run(&split, &inputs).expect("runs split");
        for (a, b) in want.iter().zip(&got) {
            assert_eq!(a.shape(), b.shape());
            assert_eq!(a.to_f64_vec(), b.to_f64_vec());
        }
        let mut kept = g.clone();
        assert_eq!(
            split_large_weights(&mut kept, storage(1 << 20)).expect("runs"),
            0
        );
    }
}
