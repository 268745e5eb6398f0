//! Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare, ReduceL1,
//! ReduceL2 over any set of constant axes (the `axes` input or the older attribute,
//! `keepdims`, `noop_with_empty_axes`), and GlobalAveragePool / GlobalMaxPool (the same
//! reductions over every spatial axis). Accumulation is in f32 with one rounding at the
//! store. Adjacent axes of the same kind are merged first; when the reduced elements of
//! each output are one contiguous run (trailing axes, the CNN head's mean over H x W)
//! a warp (short runs) or a block (long runs) reduces each with shuffles, so loads are
//! coalesced; otherwise one thread per output loops over its elements. Max and min
//! propagate NaN like the reference interpreter.

use super::elementwise::storage;
use super::support::{
    blocks, check_float, input, output, plan, store, typed, unsupported,
};
use super::Kernel;
use crate::lower::reduce::{axes, runs};
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::{NnOp, ReduceOp};
use gopt_ir::{Graph, Node, Op};

const ROWS: &str = include_str!("reduce_rows.cu");
const LOOP: &str = include_str!("reduce_loop.cu");

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
        ) | Op::Nn(NnOp::GlobalAveragePool | NnOp::GlobalMaxPool)
    )
}

/// (identity, combine of `a` and `b`, map of element `v`, finish of `acc` over `n`).
fn parts(op: Op, n: usize) -> Option<(&'static str, &'static str, &'static str, String)> {
    const SUM: &str = "a + b";
    const MAX: &str = "(b != b || b > a) ? b : a";
    const MIN: &str = "(b != b || b < a) ? b : a";
    const NEG_INF: &str = "__int_as_float(0xff800000)";
    const POS_INF: &str = "__int_as_float(0x7f800000)";
    let mean = format!("acc / {n}.0f");
    Some(match op {
        Op::Reduce(ReduceOp::ReduceSum) => ("0.0f", SUM, "v", "acc".into()),
        Op::Reduce(ReduceOp::ReduceMean) | Op::Nn(NnOp::GlobalAveragePool) => {
            ("0.0f", SUM, "v", mean)
        }
        Op::Reduce(ReduceOp::ReduceMax) | Op::Nn(NnOp::GlobalMaxPool) => {
            (NEG_INF, MAX, "v", "acc".into())
        }
        Op::Reduce(ReduceOp::ReduceMin) => (POS_INF, MIN, "v", "acc".into()),
        Op::Reduce(ReduceOp::ReduceSumSquare) => ("0.0f", SUM, "v * v", "acc".into()),
        Op::Reduce(ReduceOp::ReduceL1) => ("0.0f", SUM, "fabsf(v)", "acc".into()),
        Op::Reduce(ReduceOp::ReduceL2) => ("0.0f", SUM, "v * v", "sqrtf(acc)".into()),
        _ => return None,
    })
}

/// Emits the kernel for a reduction node.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let x = input(node, 0)?;
    let (dt, xs) = typed(g, node, x)?;
    let (out_dt, ys) = typed(g, node, output(node, 0)?)?;
    check_float(node, dt, "reductions")?;
    if out_dt != dt || node.outputs.len() != 1 {
        return Err(unsupported(node, "an output of another dtype"));
    }
    let axes = axes(g, node, xs.len())?;
    let runs = runs(&xs, &axes);
    let inner: usize = runs.iter().filter(|r| r.1).map(|r| r.0).product();
    let outer: usize = runs.iter().filter(|r| !r.1).map(|r| r.0).product();
    if outer != ys.iter().product::<usize>() {
        return Err(plan(format!(
            "{}: output {ys:?} does not match axes {axes:?}",
            node.name
        )));
    }
    let (identity, combine, map, finish) =
        parts(node.op, inner).ok_or_else(|| unsupported(node, "this reduction"))?;
    let t = storage(dt);
    let params = format!("const {t}* __restrict__ x, {t}* __restrict__ out");
    let n_red = runs.iter().filter(|r| r.1).count();
    let contiguous = n_red == 1 && runs.last().is_some_and(|r| r.1);
    let common = |what: &'static str| -> Vec<(&'static str, String)> {
        vec![
            ("what", what.to_string()),
            ("name", name.to_string()),
            ("params", params.clone()),
            ("identity", identity.to_string()),
            ("combine", combine.to_string()),
            ("map", map.to_string()),
            ("store", store(dt, &finish)),
        ]
    };
    let (source, grid, block) = if contiguous {
        let tpr = if inner >= 1024 { 256 } else { 32 };
        let mut v = common(node.op.name());
        v.extend([
            ("tpr", tpr.to_string()),
            ("rows", outer.to_string()),
            ("len", inner.to_string()),
        ]);
        let v: Vec<(&str, &str)> = v.iter().map(|(k, s)| (*k, s.as_str())).collect();
        (fill(ROWS, &v)?, blocks(outer, 256 / tpr as u32), 256)
    } else {
        // Strides of the merged runs in x; kept runs decode the output index, reduced
        // runs the loop index.
        let sizes: Vec<usize> = runs.iter().map(|r| r.0).collect();
        let st = super::support::strides(&sizes);
        let decode = |red: bool, var: &str| -> String {
            let mut code = format!("long long r_ = {var}; long long off_ = 0;");
            for (k, &(s, r)) in runs.iter().enumerate().rev() {
                if r == red {
                    code += &format!(" off_ += (r_ % {s}LL) * {}LL; r_ /= {s}LL;", st[k]);
                }
            }
            code
        };
        let mut v = common(node.op.name());
        v.extend([
            ("total", outer.to_string()),
            ("inner", inner.to_string()),
            ("base", decode(false, "i")),
            ("offset", decode(true, "j")),
        ]);
        let v: Vec<(&str, &str)> = v.iter().map(|(k, s)| (*k, s.as_str())).collect();
        (fill(LOOP, &v)?, blocks(outer, 256), 256)
    };
    Ok(Kernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        threads: grid as usize * block as usize,
        vectorized: false,
        inputs: vec![x.0],
        outputs: vec![output(node, 0)?.0],
        shared_mem: 0,
        grid,
        block,
        index_check: None,
    })
}
