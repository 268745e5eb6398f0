//! Folding the slice back from a padded GEMM (the layout rule pads N to a multiple of
//! 64 and slices the result back) into the GEMM itself, which then computes only the
//! first columns straight into the slice's output. The memory plan must know, since the
//! slice's output is then written at the GEMM's step.
//!
//! Where the sliced width is not 16-byte aligned (GPT-2's 50257 logits) the GEMM
//! computes the padded width, and a slice that makes a graph output is not run at all:
//! the output stays in the padded rows and the copy back keeps each row's first
//! columns ([`padded_outputs`], `Io::row_pitch`).

use super::plan::Step;
use super::Kernel;
use crate::lower::Lowered;
use crate::plan::concrete;
use gopt_ir::ops::ShapeOp;
use gopt_ir::{Graph, Op, ValueId};

/// Folds a slice back from a padded GEMM (`Y[.., :n]` of a GEMM computing `N > n`
/// columns, the layout rule's padding) into the GEMM: it computes the first `n`
/// columns straight into the slice's output, so the padded matrix is never copied.
pub(super) fn fold_slices(
    g: &Graph,
    steps: &mut Vec<Step>,
    kernels: &[Kernel],
    early: &std::collections::HashMap<ValueId, usize>,
) {
    let mut consumers: std::collections::HashMap<ValueId, usize> = std::collections::HashMap::new();
    for n in &g.nodes {
        for v in n.inputs.iter().flatten() {
            *consumers.entry(*v).or_default() += 1;
        }
    }
    let mut drop = Vec::new();
    for (si, s) in steps.iter().enumerate() {
        let Step::Kernel(k) = s else { continue };
        let Some(node) = g
            .nodes
            .iter()
            .find(|n| n.name == kernels[*k].node && n.op == Op::Shape(ShapeOp::Slice))
        else {
            continue;
        };
        let Some(n_new) = leading_columns(g, node) else {
            continue;
        };
        let (Some(Some(src)), Some(out)) = (node.inputs.first(), node.outputs.first()) else {
            continue;
        };
        if consumers.get(src) != Some(&1) || g.outputs.contains(src) || !early.contains_key(out) {
            continue;
        }
        // Rows of the sliced width must stay 16-byte aligned: cuBLASLt's fast kernels
        // need it (GPT-2's 50257-wide logits written directly took 2.4 ms, padded to
        // 50304 and sliced back 0.5 + 1.0 ms, on the H200).
        let Some(gi) = steps.iter().position(|s| {
            matches!(s, Step::Gemm(gm) if gm.out == src.0 && gm.post.is_none()
                && gm.residual.is_none() && gm.batch == 1 && (n_new as u64) < gm.n
                && (n_new * gm.d_dtype.size()) % 16 == 0)
        }) else {
            continue;
        };
        drop.push((si, gi, out.0, n_new as u64));
    }
    for &(_, gi, out, n_new) in &drop {
        if let Step::Gemm(gm) = &mut steps[gi] {
            if !gm.trans_b {
                gm.ld_b = Some(gm.n);
            }
            gm.out = out;
            gm.n = n_new;
            gm.stride_d = (gm.m * n_new) as i64;
        }
    }
    let gone: Vec<usize> = drop.iter().map(|d| d.0).collect();
    let mut i = 0;
    steps.retain(|_| {
        i += 1;
        !gone.contains(&(i - 1))
    });
}

/// Slices that may fold into the GEMM producing their input: their output is then
/// written at the GEMM's step, which the memory plan must know.
pub(super) fn slice_candidates(
    g: &Graph,
    lowered: &[Lowered],
) -> std::collections::HashMap<ValueId, usize> {
    let mut producer = std::collections::HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for &o in &n.outputs {
            producer.insert(o, i);
        }
    }
    let mut early = std::collections::HashMap::new();
    for n in &g.nodes {
        if n.op != Op::Shape(ShapeOp::Slice) || leading_columns(g, n).is_none() {
            continue;
        }
        let (Some(Some(src)), Some(out)) = (n.inputs.first(), n.outputs.first()) else {
            continue;
        };
        if let Some(&i) = producer.get(src) {
            if matches!(lowered.get(i), Some(Lowered::Gemm(_))) {
                early.insert(*out, i);
            }
        }
    }
    early
}

/// `Some(n)` when `node` slices the first `n` elements of its input's last axis (and
/// nothing else).
fn leading_columns(g: &Graph, node: &gopt_ir::Node) -> Option<usize> {
    let c = |k: usize| -> Option<Vec<i64>> {
        let v = node.inputs.get(k).copied().flatten()?;
        Some(
            g.constant(v)?
                .to_f64_vec()
                .iter()
                .map(|x| *x as i64)
                .collect(),
        )
    };
    let (_, shape) = concrete(g, node.inputs.first().copied().flatten()?).ok()?;
    let rank = shape.len() as i64;
    let (starts, ends) = (c(1)?, c(2)?);
    let axes = if node.inputs.len() > 3 && node.inputs[3].is_some() {
        c(3)?
    } else {
        (0..starts.len() as i64).collect()
    };
    if node.inputs.len() > 4 && node.inputs[4].is_some() && c(4)?.iter().any(|&s| s != 1) {
        return None;
    }
    let [s] = starts.as_slice() else { return None };
    let [e] = ends.as_slice() else { return None };
    let [a] = axes.as_slice() else { return None };
    let a = if *a < 0 { a + rank } else { *a };
    let last = *shape.last()? as i64;
    (a == rank - 1 && *s == 0 && *e > 0 && *e < last).then_some(*e as usize)
}

/// Slices that make a graph output from the first columns of a value only they read:
/// node index → the device row pitch (the source's last dim). No step runs for them;
/// the output aliases its source's bytes and is read back row by row.
pub(super) fn padded_outputs(
    g: &Graph,
    lowered: &[Lowered],
) -> std::collections::HashMap<usize, usize> {
    let mut out = std::collections::HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if n.op != Op::Shape(ShapeOp::Slice) || !matches!(lowered.get(i), Some(Lowered::Kernel(_)))
        {
            continue;
        }
        let (Some(Some(src)), [y]) = (n.inputs.first(), n.outputs.as_slice()) else {
            continue;
        };
        if !g.outputs.contains(y) || g.outputs.contains(src) || g.inputs.contains(src) {
            continue;
        }
        if g.constants.contains_key(src) || g.outputs.iter().filter(|o| *o == y).count() != 1 {
            continue;
        }
        let readers = g
            .nodes
            .iter()
            .filter(|m| m.inputs.iter().flatten().any(|v| v == src))
            .count();
        let Ok((dt, shape)) = concrete(g, *src) else {
            continue;
        };
        // Aligned widths fold into the GEMM instead (fold_slices): compact rows.
        if let (1, Some(cols), Some(&pitch)) = (readers, leading_columns(g, n), shape.last()) {
            if (cols * dt.size()) % 16 != 0 {
                out.insert(i, pitch);
            }
        }
    }
    out
}
