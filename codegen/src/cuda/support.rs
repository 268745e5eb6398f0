//! Small helpers the convolution, pooling, reduction and split/pad emitters share:
//! reading a node's typed, static operands and constant integer inputs, and writing
//! CUDA expressions (float literals, stores that round once to the storage type,
//! activations). They exist so each emitter reports a missing or unsupported operand
//! the same way, as `CodegenError::Unsupported` naming what, instead of panicking.

use super::elementwise::storage;
use crate::{CodegenError, Result};
use gopt_ir::ops::fused::Activation;
use gopt_ir::{DType, Graph, Node, Tensor, ValueId};

/// The error for a mode or operand `node` has that the CUDA backend cannot run.
pub fn unsupported(node: &Node, what: &str) -> CodegenError {
    CodegenError::Unsupported {
        node: node.name.clone(),
        op: node.op.name().into(),
        backend: "CUDA",
        what: what.into(),
    }
}

/// A plan error (a graph that was not verified or typed).
pub fn plan(e: impl std::fmt::Display) -> CodegenError {
    CodegenError::Plan(e.to_string())
}

/// Input `k` of `node`, which must be present.
pub fn input(node: &Node, k: usize) -> Result<ValueId> {
    node.inputs
        .get(k)
        .copied()
        .flatten()
        .ok_or_else(|| unsupported(node, &format!("a missing input {k}")))
}

/// Input `k` of `node` when present.
pub fn opt_input(node: &Node, k: usize) -> Option<ValueId> {
    node.inputs.get(k).copied().flatten()
}

/// Output `k` of `node`.
pub fn output(node: &Node, k: usize) -> Result<ValueId> {
    node.outputs
        .get(k)
        .copied()
        .ok_or_else(|| unsupported(node, &format!("a missing output {k}")))
}

/// The dtype and static shape of `v`.
pub fn typed(g: &Graph, node: &Node, v: ValueId) -> Result<(DType, Vec<usize>)> {
    let t = g.ty(v).map_err(plan)?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
    Ok((t.dtype, s))
}

/// Input `k` as a constant tensor (`None` when the input is absent).
pub fn const_input<'g>(
    g: &'g Graph,
    node: &Node,
    k: usize,
    what: &str,
) -> Result<Option<&'g Tensor>> {
    match opt_input(node, k) {
        None => Ok(None),
        Some(v) => g
            .constant(v)
            .map(Some)
            .ok_or_else(|| unsupported(node, &format!("{what} that is not a constant"))),
    }
}

pub use crate::index::strides;

/// A float literal of `v` as CUDA `float` (infinities and NaN by bit pattern).
pub fn flit(v: f32) -> String {
    if v.is_nan() {
        "__int_as_float(0x7fc00000)".into()
    } else if v == f32::INFINITY {
        "__int_as_float(0x7f800000)".into()
    } else if v == f32::NEG_INFINITY {
        "__int_as_float(0xff800000)".into()
    } else {
        format!("{v:e}f")
    }
}

/// The float dtypes these kernels compute in f32.
pub fn check_float(node: &Node, dt: DType, what: &str) -> Result<()> {
    match dt {
        DType::F32 | DType::F16 | DType::BF16 => Ok(()),
        other => Err(unsupported(node, &format!("{other} {what}"))),
    }
}

/// `v` (an f32 expression) rounded once to the storage type of `dt`.
pub fn store(dt: DType, v: &str) -> String {
    match dt {
        DType::F16 => format!("__float2half_rn({v})"),
        DType::BF16 => format!("__float2bfloat16_rn({v})"),
        DType::F32 => v.to_string(),
        other => format!("({})({v})", storage(other)),
    }
}

/// An activation applied to the f32 variable `v`, as an expression (NaN stays NaN
/// through relu and clip, as in the IR's `Activation::apply`).
pub fn activation(act: Activation, v: &str) -> String {
    match act {
        Activation::None => v.to_string(),
        Activation::Relu => format!("({v} <= 0.0f ? 0.0f : {v})"),
        Activation::Clip { lo, hi } => format!(
            "({v} < {lo} ? {lo} : ({v} > {hi} ? {hi} : {v}))",
            lo = flit(lo as f32),
            hi = flit(hi as f32)
        ),
        Activation::Silu => format!("({v} * gopt_sigmoid({v}))"),
        Activation::Sigmoid => format!("gopt_sigmoid({v})"),
        Activation::Tanh => format!("tanhf({v})"),
        Activation::Gelu => format!("gopt_gelu({v})"),
        Activation::GeluTanh => format!("gopt_gelu_tanh({v})"),
    }
}

/// Blocks for `n` threads in blocks of `block` (grid-stride loops cover the rest).
pub fn blocks(n: usize, block: u32) -> u32 {
    u32::try_from(n.div_ceil(block as usize).clamp(1, 65_535 * 32)).unwrap_or(u32::MAX)
}
