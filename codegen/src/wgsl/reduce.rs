//! Reductions in WGSL: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare,
//! ReduceL1, ReduceL2, ReduceProd, ReduceLogSum over any set of constant axes (the
//! `axes` input or the older attribute, `keepdims`, `noop_with_empty_axes`), and
//! GlobalAveragePool / GlobalMaxPool (the same reductions over every spatial axis),
//! f32 or f16 data with f32 accumulation and one rounding at the store. As in the
//! CUDA emitter, adjacent
//! axes of the same kind are merged first; when each output's elements are one
//! contiguous run (trailing axes, a CNN head's mean over H x W), segments of 32 (short
//! runs) or 256 (long runs) invocations reduce each through workgroup memory, so loads
//! are coalesced; otherwise one invocation per output loops over its elements. Max and
//! min propagate NaN like the reference interpreter.

use super::unsupported;
use super::WgslKernel;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::{NnOp, ReduceOp};
use gopt_ir::{DType, Graph, Node, Op, ValueId};

const TEMPLATE: &str = include_str!("reduce.wgsl");

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(
        op,
        Op::Reduce(
            ReduceOp::ReduceSum
                | ReduceOp::ReduceMean
                | ReduceOp::ReduceMax
                | ReduceOp::ReduceMin
                | ReduceOp::ReduceSumSquare
                | ReduceOp::ReduceL1
                | ReduceOp::ReduceL2
                | ReduceOp::ReduceProd
                | ReduceOp::ReduceLogSum
        ) | Op::Nn(NnOp::GlobalAveragePool | NnOp::GlobalMaxPool)
    )
}

fn plan(e: impl std::fmt::Display) -> CodegenError {
    CodegenError::Plan(e.to_string())
}

fn typed(g: &Graph, node: &Node, v: ValueId) -> Result<(DType, Vec<usize>)> {
    let t = g.ty(v).map_err(plan)?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
    Ok((t.dtype, s))
}

/// (identity, combine of `a` and `b`, map of element `v`, finish of `acc` over `n`).
fn parts(op: Op, n: usize) -> Option<(&'static str, &'static str, &'static str, String)> {
    const SUM: &str = "a + b";
    const MAX: &str = "select(a, b, b != b || b > a)";
    const MIN: &str = "select(a, b, b != b || b < a)";
    const NEG_INF: &str = "bitcast<f32>(0xff800000u)";
    const POS_INF: &str = "bitcast<f32>(0x7f800000u)";
    let mean = format!("acc / {n}.0");
    Some(match op {
        Op::Reduce(ReduceOp::ReduceSum) => ("0.0", SUM, "v", "acc".into()),
        Op::Reduce(ReduceOp::ReduceMean) | Op::Nn(NnOp::GlobalAveragePool) => {
            ("0.0", SUM, "v", mean)
        }
        Op::Reduce(ReduceOp::ReduceMax) | Op::Nn(NnOp::GlobalMaxPool) => {
            (NEG_INF, MAX, "v", "acc".into())
        }
        Op::Reduce(ReduceOp::ReduceMin) => (POS_INF, MIN, "v", "acc".into()),
        Op::Reduce(ReduceOp::ReduceSumSquare) => ("0.0", SUM, "v * v", "acc".into()),
        Op::Reduce(ReduceOp::ReduceL1) => ("0.0", SUM, "abs(v)", "acc".into()),
        Op::Reduce(ReduceOp::ReduceL2) => ("0.0", SUM, "v * v", "sqrt(acc)".into()),
        Op::Reduce(ReduceOp::ReduceProd) => ("1.0", "a * b", "v", "acc".into()),
        Op::Reduce(ReduceOp::ReduceLogSum) => ("0.0", SUM, "v", "gopt_log(acc)".into()),
        _ => return None,
    })
}

/// The reduced axes, read by [`crate::lower::reduce::axes`] (one
/// reading of `axes` for both backends), its refusals relabelled as WGSL's.
fn axes(g: &Graph, node: &Node, rank: usize) -> Result<Vec<usize>> {
    crate::lower::reduce::axes(g, node, rank).map_err(|e| match e {
        CodegenError::Unsupported { what, .. } => unsupported(node, what),
        e => e,
    })
}

/// Emits the shader for a reduction node.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let x = node
        .inputs
        .first()
        .copied()
        .flatten()
        .ok_or_else(|| unsupported(node, "a missing input"))?;
    let (dt, xs) = typed(g, node, x)?;
    let (out_dt, ys) = typed(g, node, node.outputs[0])?;
    let t = match dt {
        DType::F32 => "f32",
        DType::F16 => "f16",
        other => return Err(unsupported(node, format!("{other} reductions"))),
    };
    if out_dt != dt || node.outputs.len() != 1 {
        return Err(unsupported(node, "an output of another dtype"));
    }
    if xs.iter().product::<usize>() >= 1 << 31 {
        return Err(unsupported(node, "inputs of 2^31 elements or more"));
    }
    let axes = axes(g, node, xs.len())?;
    let runs = crate::lower::reduce::runs(&xs, &axes);
    let inner: usize = runs.iter().filter(|r| r.1).map(|r| r.0).product();
    let outer: usize = runs.iter().filter(|r| !r.1).map(|r| r.0).product();
    if outer != ys.iter().product::<usize>() {
        return Err(plan(format!(
            "{}: output {ys:?} does not match axes {axes:?}",
            node.name
        )));
    }
    if xs.contains(&0) {
        return Err(unsupported(node, "empty inputs"));
    }
    let (identity, combine, map, finish) =
        parts(node.op, inner).ok_or_else(|| unsupported(node, "this reduction"))?;
    let n_red = runs.iter().filter(|r| r.1).count();
    let contiguous = n_red == 1 && runs.last().is_some_and(|r| r.1);
    let (body, groups) = if contiguous {
        // Segments of `tpr` invocations per output row, `256 / tpr` rows per workgroup.
        let tpr = if inner >= 1024 { 256 } else { 32 };
        let per = 256 / tpr;
        let blocks = outer.div_ceil(per);
        let body = format!(
            "    let lane = lid % {tpr}u;
    for (var blk: u32 = wid.x; blk < {blocks}u; blk = blk + nwg.x) {{
        let row = blk * {per}u + lid / {tpr}u;
        var acc: f32 = identity;
        if (row < {outer}u) {{
            for (var j: u32 = lane; j < {inner}u; j = j + {tpr}u) {{
                let v = f32(x[row * {inner}u + j]);
                acc = comb(acc, {map});
            }}
        }}
        red[lid] = acc;
        workgroupBarrier();
        for (var s: u32 = {half}u; s > 0u; s = s >> 1u) {{
            if (lane < s) {{
                red[lid] = comb(red[lid], red[lid + s]);
            }}
            workgroupBarrier();
        }}
        if (lane == 0u && row < {outer}u) {{
            let acc = red[lid];
            y[row] = {t}({finish});
        }}
        workgroupBarrier();
    }}
",
            half = tpr / 2
        );
        (body, blocks)
    } else {
        // Strides of the merged runs in x; kept runs decode the output index, reduced
        // runs the loop index.
        let sizes: Vec<usize> = runs.iter().map(|r| r.0).collect();
        let st = crate::lower::index::strides(&sizes);
        let decode = |red: bool, var: &str, off: &str| -> String {
            let mut code = format!("var r_{off}: u32 = {var}; var {off}: u32 = 0u;");
            for (k, &(s, r)) in runs.iter().enumerate().rev() {
                if r == red {
                    code += &format!(
                        " {off} = {off} + (r_{off} % {s}u) * {}u; r_{off} = r_{off} / {s}u;",
                        st[k]
                    );
                }
            }
            code
        };
        let body = format!(
            "    for (var i: u32 = wid.x * 256u + lid; i < {outer}u; i = i + nwg.x * 256u) {{
        {}
        var acc: f32 = identity;
        for (var j: u32 = 0u; j < {inner}u; j = j + 1u) {{
            {}
            let v = f32(x[base + off]);
            acc = comb(acc, {map});
        }}
        y[i] = {t}({finish});
    }}
",
            decode(false, "i", "base"),
            decode(true, "j", "off")
        );
        (body, outer.div_ceil(256))
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", node.op.name()),
            (
                "how",
                if contiguous {
                    "segments of invocations per output row, combined through workgroup memory"
                } else {
                    "one invocation per output (grid-stride) looping over its elements"
                },
            ),
            ("t", t),
            ("combine", combine),
            ("identity", identity),
            ("helpers", &super::types::helpers_for(&finish)),
            ("body", &body),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [groups.clamp(1, 65535) as u32, 1, 1],
        inputs: vec![x.0],
        outputs: vec![node.outputs[0].0],
        index_check: None,
    })
}
