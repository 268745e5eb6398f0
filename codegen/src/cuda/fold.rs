//! Folding Slices into the steps around them, decided from the graph and its lowering
//! before any kernel is written ([`decide`]): a folded Slice is
//! [`Lowered::Folded`], so no kernel of its own is written, counted or compiled.
//!
//! The slice back from a padded GEMM (the layout rule pads N to a multiple of 64 and
//! slices the result back) folds into the GEMM itself ([`Fold::IntoGemm`]), which then
//! computes only the first columns straight into the slice's output. The memory plan
//! must know, since the slice's output is then written at the GEMM's step
//! ([`slice_candidates`]).
//!
//! Where the sliced width is not 16-byte aligned (GPT-2's 50257 logits) the GEMM
//! computes the padded width, and a slice that makes a graph output is not run at all
//! ([`Fold::PaddedRows`]): the output stays in the padded rows and the copy back keeps
//! each row's first columns (`Io::row_pitch`).

use super::gemm::{self, Gemm};
use super::plan::PlanOptions;
use crate::lower::{Fold, Lowered};
use crate::plan::concrete;
use gopt_ir::ops::ShapeOp;
use gopt_ir::{Graph, Op, ValueId};
use std::collections::HashMap;

/// Marks the Slices of `g` the CUDA plan does without a step of their own
/// ([`Lowered::Folded`]): padded graph outputs first, then slices back from a padded
/// GEMM whose library call can write the kept columns directly. Only Slices lowered to
/// a kernel change.
pub(super) fn decide(g: &Graph, lowered: &mut [Lowered], opts: PlanOptions) {
    for (i, pitch) in padded_outputs(g, lowered) {
        lowered[i] = Lowered::Folded(Fold::PaddedRows { pitch });
    }
    let early = slice_candidates(g, lowered);
    let mut consumers: HashMap<ValueId, usize> = HashMap::new();
    for n in &g.nodes {
        for v in n.inputs.iter().flatten() {
            *consumers.entry(*v).or_default() += 1;
        }
    }
    let mut producer = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if let Some(o) = n.outputs.first() {
            producer.insert(*o, i);
        }
    }
    for (si, node) in g.nodes.iter().enumerate() {
        if node.op != Op::Shape(ShapeOp::Slice) || !matches!(lowered[si], Lowered::Kernel(_)) {
            continue;
        }
        let Some(columns) = leading_columns(g, node) else {
            continue;
        };
        let (Some(Some(src)), Some(out)) = (node.inputs.first(), node.outputs.first()) else {
            continue;
        };
        if consumers.get(src) != Some(&1) || g.outputs.contains(src) || !early.contains_key(out) {
            continue;
        }
        let Some(&gi) = producer.get(src) else {
            continue;
        };
        let Lowered::Gemm(sp) = &lowered[gi] else {
            continue;
        };
        if opts.gemv && super::gemv::applies(sp) {
            continue;
        }
        // Rows of the sliced width must stay 16-byte aligned: cuBLASLt's fast kernels
        // need it (GPT-2's 50257-wide logits written directly took 2.4 ms, padded to
        // 50304 and sliced back 0.5 + 1.0 ms, on the H200).
        let direct = match gemm::library_only(sp) {
            Ok(Some(gm)) => {
                gm.residual.is_none()
                    && gm.batch == 1
                    && (columns as u64) < gm.n
                    && (columns * gm.d_dtype.size()) % 16 == 0
            }
            Ok(None) | Err(_) => false,
        };
        if direct {
            lowered[si] = Lowered::Folded(Fold::IntoGemm { into: gi, columns });
        }
    }
}

/// The GEMM step `gm` as it is once the Slice writing `out` (`columns` wide) folded into
/// it: the first columns of B, straight into the Slice's output.
pub(super) fn into_gemm(gm: &mut Gemm, out: ValueId, columns: usize) {
    if !gm.trans_b {
        gm.ld_b = Some(gm.n);
    }
    gm.out = out.0;
    gm.n = columns as u64;
    gm.stride_d = (gm.m * columns as u64) as i64;
}

/// Slices that may fold into the GEMM producing their input: their output is then
/// written at the GEMM's step, which the memory plan must know.
pub(super) fn slice_candidates(g: &Graph, lowered: &[Lowered]) -> HashMap<ValueId, usize> {
    let mut producer = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for &o in &n.outputs {
            producer.insert(o, i);
        }
    }
    let mut early = HashMap::new();
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
fn padded_outputs(g: &Graph, lowered: &[Lowered]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
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
        // Aligned widths fold into the GEMM instead (Fold::IntoGemm): compact rows.
        if let (1, Some(cols), Some(&pitch)) = (readers, leading_columns(g, n), shape.last()) {
            if (cols * dt.size()) % 16 != 0 {
                out.push((i, pitch));
            }
        }
    }
    out
}
