//! The counted kernels in WGSL ([`crate::lower::counted`]): NonZero here, Compress,
//! Unique and NonMaxSuppression in their own files. Each binds the run's status buffer
//! last (`array<u32>`) and writes the size of each counted output to the output's word.
//! The CUDA kernels (`cuda/counted.rs`) are the same algorithms line by line. f64 data
//! is refused: WGSL stores it as f32, which rounds small values to zero and so would
//! change which elements count.

use super::{storage_type, unsupported, WgslKernel};
use crate::lower::counted::count_slot;
use crate::lower::support::{input, output, plan, typed};
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::{ImageOp, ShapeOp};
use gopt_ir::{DType, Graph, Node, Op, ValueId};

const NONZERO: &str = include_str!("counted_nonzero.wgsl");

/// Emits the shader of counted node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    match &node.op {
        Op::Shape(ShapeOp::NonZero) => nonzero(g, node, name),
        Op::Shape(ShapeOp::Compress) => super::compress::emit(g, node, name),
        Op::Shape(ShapeOp::Unique) => super::unique::emit(g, node, name),
        Op::Image(ImageOp::NonMaxSuppression) => super::nms::emit(g, node, name),
        op => Err(plan(format!(
            "{}: {} is not a counted op",
            node.name,
            op.name()
        ))),
    }
}

/// The status word of counted output `v` of `node`.
pub fn slot(g: &Graph, node: &Node, v: ValueId) -> Result<u32> {
    count_slot(g, v).ok_or_else(|| unsupported(node, "a counted output that is not a graph output"))
}

/// The storage type of counted data of dtype `dt` (f64 and bf16 refused).
pub fn data_type(node: &Node, dt: DType) -> Result<&'static str> {
    match (dt, storage_type(dt)) {
        (DType::F64, _) | (_, None) => Err(unsupported(node, format!("{dt} data"))),
        (_, Some((t, _))) => Ok(t),
    }
}

/// Whether the storage element `e` of dtype `dt` is nonzero, in WGSL (NaN is).
pub fn nonzero_test(dt: DType, e: &str) -> String {
    match dt {
        DType::F32 => format!("({e} != 0.0)"),
        DType::F16 => format!("(f32({e}) != 0.0)"),
        DType::I64 | DType::U64 => format!("any({e} != vec2<u32>(0u, 0u))"),
        DType::I8 | DType::I16 | DType::I32 => format!("({e} != 0i)"),
        _ => format!("({e} != 0u)"),
    }
}

fn nonzero(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let x = input(node, 0)?;
    let y = output(node, 0)?;
    let (dt, dims) = typed(g, node, x)?;
    let (_, ys) = typed(g, node, y)?;
    let t = data_type(node, dt)?;
    let n: usize = dims.iter().product();
    if u32::try_from(n).is_err() {
        return Err(unsupported(node, "more than 2^32 elements"));
    }
    let bound = ys.get(1).copied().unwrap_or(0);
    let mut coords = String::new();
    for (d, &len) in dims.iter().enumerate().rev() {
        coords.push_str(&format!(
            "            y[{d}u * {bound}u + pos] = vec2<u32>(r % {len}u, 0u);\n            r = r / {len}u;\n",
            len = len.max(1)
        ));
    }
    let source = fill(
        NONZERO,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("n", &n.to_string()),
            ("dims", &format!("{dims:?}")),
            ("rank", &dims.len().to_string()),
            ("bound", &bound.to_string()),
            ("slot", &slot(g, node, y)?.to_string()),
            ("t", t),
            ("nonzero", &nonzero_test(dt, "x[i]")),
            ("coords", &coords),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [1, 1, 1],
        inputs: vec![x.0],
        outputs: vec![y.0],
        index_check: None,
        // Chunks of 256, each a flag and 8 scan steps.
        loop_iterations: Some(n.div_ceil(256) as u64 * 9),
    })
}
