//! The counted kernels in CUDA ([`crate::lower::counted`]): NonZero here, Compress,
//! Unique and NonMaxSuppression in their own files. Each takes the run's status buffer
//! as its last parameter and writes the size of each counted output to the output's
//! word. The WGSL kernels (`wgsl/counted.rs`) are the same algorithms line by line.

use super::elementwise::storage;
use super::Kernel;
use crate::lower::counted::count_slot;
use crate::lower::support::{input, output, plan, typed, unsupported};
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::{ImageOp, ShapeOp};
use gopt_ir::{DType, Graph, Node, Op, ValueId};

const NONZERO: &str = include_str!("counted_nonzero.cu");

/// Emits the kernel of counted node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
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

/// Whether an element read as `x[i]` of dtype `dt` is nonzero, in CUDA C (NaN is).
pub fn nonzero_test(dt: DType, at: &str) -> String {
    match dt {
        DType::F16 | DType::BF16 => format!("gopt_ld(x[{at}]) != 0.0f"),
        _ => format!("x[{at}] != 0"),
    }
}

fn nonzero(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let x = input(node, 0)?;
    let y = output(node, 0)?;
    let (dt, dims) = typed(g, node, x)?;
    let (_, ys) = typed(g, node, y)?;
    let n: usize = dims.iter().product();
    if u32::try_from(n).is_err() {
        return Err(unsupported(node, "more than 2^32 elements"));
    }
    let bound = ys.get(1).copied().unwrap_or(0);
    let mut coords = String::new();
    for (d, &len) in dims.iter().enumerate().rev() {
        coords.push_str(&format!(
            "            y[{d}LL * {bound}LL + pos] = r % {len}LL;\n            r /= {len}LL;\n",
            len = len.max(1)
        ));
    }
    let source = fill(
        NONZERO,
        &[
            ("name", name),
            ("t", storage(dt)),
            ("n", &n.to_string()),
            ("dims", &format!("{dims:?}")),
            ("rank", &dims.len().to_string()),
            ("bound", &bound.to_string()),
            ("slot", &slot(g, node, y)?.to_string()),
            ("nonzero", &nonzero_test(dt, "i")),
            ("coords", &coords),
        ],
    )?;
    let mut k = Kernel::flat(name, &node.name, source, 1024, vec![x.0], vec![y.0]);
    k.grid = 1;
    k.block = 1024;
    Ok(k)
}
