//! The interpreter's memory guard: the bytes a run holds (its values, sub-graphs'
//! included) and, before each node runs, the bytes it will allocate — its outputs,
//! from their types or by inferring the node on its actual inputs, and the working
//! memory its reference implementation takes — checked against the run's
//! [`MemoryLimit`], so a node that would not fit is an error naming it instead of an
//! allocator abort.

use crate::dim::{Bindings, Dim};
use crate::error::{IrError, Result};
use crate::graph::{Graph, Node, TensorType};
use crate::limit::{self, MemoryError, MemoryLimit};
use crate::ops::{AttentionOp, InferCx, InferInput, Op};
use crate::tensor::Tensor;
use std::cell::Cell;

thread_local! {
    /// The limit of the run on this thread and the bytes it holds (sub-graphs count
    /// against their enclosing run).
    static BUDGET: Cell<Option<(MemoryLimit, u128)>> = const { Cell::new(None) };
}

/// Runs `f` with `limit` as this thread's budget (restoring the previous one after).
pub(super) fn with_budget<R>(limit: MemoryLimit, f: impl FnOnce() -> R) -> R {
    let outer = BUDGET.with(|b| b.replace(Some((limit, 0))));
    let r = f();
    BUDGET.with(|b| b.set(outer));
    r
}

/// Bytes one scope of a run holds, added to the thread's budget and given back when
/// the scope ends (on error paths too).
pub(super) struct Held(pub(super) u128);

impl Held {
    pub(super) fn add(&mut self, n: u128) {
        self.0 += n;
        BUDGET.with(|b| b.set(b.get().map(|(l, live)| (l, live.saturating_add(n)))));
    }

    pub(super) fn sub(&mut self, n: u128) {
        let n = n.min(self.0);
        self.0 -= n;
        BUDGET.with(|b| b.set(b.get().map(|(l, live)| (l, live.saturating_sub(n)))));
    }

    /// `Err` when `more` bytes on top of what the run holds pass its limit.
    pub(super) fn check(&self, more: u128, what: impl FnOnce() -> (String, String)) -> Result<()> {
        let Some((limit, live)) = BUDGET.with(Cell::get) else {
            return Ok(());
        };
        if live.saturating_add(more) <= u128::from(limit.bytes) {
            return Ok(());
        }
        let (what, detail) = what();
        Err(IrError::Memory(MemoryError {
            what,
            detail,
            bytes: more,
            live,
            limit,
        }))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.sub(self.0);
    }
}

pub(super) fn tensor_bytes(t: &Tensor) -> u128 {
    t.len() as u128 * t.dtype().size() as u128
}

/// The bytes of `node`'s outputs, when their shapes are known before it runs: from
/// their types (symbols bound by `bind`), else by inferring the node on its actual
/// inputs; `None` for data-dependent shapes (NonZero, Unique).
pub(super) fn predict(
    graph: &Graph,
    node: &Node,
    ins: &[Option<&Tensor>],
    bind: &Bindings,
) -> Option<u128> {
    let mut total = 0u128;
    for v in &node.outputs {
        let Some(ty) = &graph.value(*v).ty else {
            return inferred_bytes(node, ins);
        };
        let mut bytes = ty.dtype.size() as u128;
        for d in ty.shape.iter() {
            let n = match d {
                Dim::Known(n) => *n,
                d => match d.bind(bind).known() {
                    Some(n) => n,
                    None => return inferred_bytes(node, ins),
                },
            };
            bytes = bytes.saturating_mul(u128::from(n));
        }
        total = total.saturating_add(bytes);
    }
    Some(total)
}

fn inferred_bytes(node: &Node, ins: &[Option<&Tensor>]) -> Option<u128> {
    let tys = infer_on(node, ins)?;
    Some(
        tys.iter()
            .map(|(dt, s)| limit::bytes_of(s.iter().copied(), dt.size()))
            .fold(0u128, u128::saturating_add),
    )
}

/// What a node allocates besides its outputs while it runs, as the reference
/// implementations do it, given `out` bytes of outputs: element-wise and control-flow
/// ops next to nothing (a sub-graph's values count as they are made); data movement a
/// standard-layout copy of its output; attention its score matrices and working copies
/// of Q, K, V and of its outputs (in f32, or f64); any other op a working copy of its
/// inputs (a standard-layout or widened copy) and of its outputs.
pub(super) fn scratch(node: &Node, ins: &[Option<&Tensor>], out: u128) -> u128 {
    let inputs: u128 = ins.iter().flatten().map(|t| tensor_bytes(t)).sum();
    match node.op {
        Op::Elementwise(_) | Op::Control(_) => 0,
        Op::Attention(AttentionOp::Attention) => {
            let elem: u128 = match ins.first().copied().flatten().map(Tensor::dtype) {
                Some(crate::DType::F64) => 8,
                _ => 4,
            };
            let elems: u128 = ins.iter().flatten().map(|t| t.len() as u128).sum();
            let dims = |i: usize| ins.get(i).copied().flatten().map(Tensor::shape);
            let (q, k) = (dims(0).unwrap_or(&[]), dims(1).unwrap_or(&[]));
            let (b, hq, q_len) = match *q {
                [b, h, s, _] => (b, h, s),
                [b, s, _] => (
                    b,
                    node.attrs.int_or("q_num_heads", 1).unwrap_or(1).max(1) as usize,
                    s,
                ),
                _ => (0, 0, 0),
            };
            let past = dims(4).and_then(|p| p.get(2).copied()).unwrap_or(0);
            let kv = match *k {
                [_, _, s, _] | [_, s, _] => s + past,
                _ => 0,
            };
            let scores = [b, hq, q_len, kv]
                .iter()
                .fold(elem, |a, &d| a.saturating_mul(d as u128));
            (2 * elems * elem)
                .saturating_add(scores.saturating_mul(2))
                .saturating_add(out)
        }
        Op::Shape(_) => out,
        Op::Attention(_)
        | Op::Reduce(_)
        | Op::Nn(_)
        | Op::Image(_)
        | Op::Fused(_)
        | Op::Collective(_) => inputs.saturating_add(out),
    }
}

/// What `node` would allocate, for an error: "for its output f32[2,3]".
pub(super) fn describe(
    graph: &Graph,
    node: &Node,
    ins: &[Option<&Tensor>],
    bind: &Bindings,
) -> String {
    let statik: Option<Vec<(crate::DType, Vec<u64>)>> = node
        .outputs
        .iter()
        .map(|v| {
            let ty = graph.value(*v).ty.as_ref()?;
            let s = ty
                .shape
                .iter()
                .map(|d| d.bind(bind).known())
                .collect::<Option<_>>()?;
            Some((ty.dtype, s))
        })
        .collect();
    let Some(tys) = statik.or_else(|| infer_on(node, ins)) else {
        return String::new();
    };
    let largest = tys
        .iter()
        .max_by_key(|(dt, s)| limit::bytes_of(s.iter().copied(), dt.size()));
    let Some((dt, s)) = largest else {
        return String::new();
    };
    let ty = format!("{dt}{s:?}").replace(", ", ",");
    if tys.len() == 1 {
        format!("for its output {ty}")
    } else {
        format!("for its {} outputs (the largest {ty})", tys.len())
    }
}

/// The outputs' dtypes and shapes inferred from the node's actual inputs.
fn infer_on(node: &Node, ins: &[Option<&Tensor>]) -> Option<Vec<(crate::DType, Vec<u64>)>> {
    if node.attrs.graphs().next().is_some() {
        return None;
    }
    let tys: Vec<Option<TensorType>> = ins
        .iter()
        .map(|t| t.map(|t| TensorType::new(t.dtype(), crate::dim::shape_of(t.shape()))))
        .collect();
    let views: Vec<Option<InferInput>> = tys
        .iter()
        .zip(ins)
        .map(|(ty, t)| ty.as_ref().map(|ty| InferInput { ty, value: *t }))
        .collect();
    let outs = node.op.infer(&mut InferCx::default(), node, &views).ok()?;
    outs.iter()
        .take(node.outputs.len())
        .map(|t| {
            Some((
                t.dtype,
                t.shape.iter().map(Dim::known).collect::<Option<_>>()?,
            ))
        })
        .collect()
}

/// True while a run's budget is set on this thread.
pub(super) fn active() -> bool {
    BUDGET.with(Cell::get).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{run, run_limited};
    use crate::limit::host_available;

    fn graph(src: &str) -> Graph {
        let mut g = crate::text::parse(src).expect("parses");
        crate::infer_types(&mut g).expect("infers");
        g
    }

    fn f32s(n: usize) -> Tensor {
        Tensor::from_f64s(crate::DType::F32, &[n], &vec![1.0; n]).expect("tensor")
    }

    /// An Expand of one element to `dims` (a constant shape, so its type is known).
    fn expand(dims: &str) -> Graph {
        let n = dims.split(',').count();
        graph(&format!(
            r#"graph "g"(%0 "x": f32[1]) -> (%2) {{
  %1 "s": i64[{n}] = const [{dims}]
  %2 "y" = Expand "big"(%0, %1)
}}
"#
        ))
    }

    #[test]
    fn a_node_above_the_limit_is_refused_before_it_allocates() {
        let g = expand("1024, 1024");
        let e = run_limited(&g, &[f32s(1)], MemoryLimit::new(1 << 20))
            .expect_err("4 MiB is above 1 MiB")
            .to_string();
        assert_eq!(
            e,
            "node `big` (Expand) would allocate 8.00 MiB (8388608 bytes) for its output \
             f32[1024,1024] (4.00 MiB) and working memory (4.00 MiB) with 4 bytes already \
             live (8.00 MiB (8388612 bytes) together); the memory limit is 1.00 MiB \
             (1048576 bytes) (--memory-limit)"
        );
        let out = run_limited(&g, &[f32s(1)], MemoryLimit::new(9 << 20)).expect("fits");
        assert_eq!(out[0].shape(), &[1024, 1024]);
    }

    #[test]
    fn the_default_limit_is_the_available_memory() {
        // 640 GB: past any machine this runs on, and under the 1 TiB a tensor may have,
        // so only the memory guard stands between it and the allocator.
        let g = expand("400000, 400000");
        let need = 400_000u64 * 400_000 * 4;
        if host_available().is_some_and(|a| a < need) {
            let e = run(&g, &[f32s(1)]).expect_err("refused").to_string();
            assert!(
                e.contains("`big` (Expand)") && e.contains("available on this machine"),
                "{e}"
            );
        }
    }

    #[test]
    fn live_values_count_toward_the_limit() {
        // Each value is 4 MB, but x, a and b are all live when c is made: 16 MB.
        let src = r#"graph "g"(%0 "x": f32[1000000]) -> (%4) {
  %1 "a" = Neg "n1"(%0)
  %2 "b" = Neg "n2"(%1)
  %3 "c" = Neg "n3"(%2)
  %4 "y" = Sum "s"(%0, %1, %2, %3)
}
"#;
        let g = graph(src);
        let e = run_limited(&g, &[f32s(1_000_000)], MemoryLimit::new(14_000_000))
            .expect_err("16 MB live")
            .to_string();
        assert!(
            e.starts_with("node `n3` (Neg) would allocate") && e.contains("12000000 bytes"),
            "{e}"
        );
        run_limited(&g, &[f32s(1_000_000)], MemoryLimit::new(20_000_000)).expect("fits");
    }

    #[test]
    fn dead_values_are_given_back() {
        // A chain of eight 4 MB values never holds more than two of them at once.
        let mut src = String::from("graph \"g\"(%0 \"x\": f32[1000000]) -> (%8) {\n");
        for i in 1..=8 {
            src += &format!("  %{i} \"v{i}\" = Neg \"n{i}\"(%{})\n", i - 1);
        }
        src += "}\n";
        let g = graph(&src);
        run_limited(&g, &[f32s(1_000_000)], MemoryLimit::new(9_000_000)).expect("fits");
        // Outputs nothing reads are dropped at once too.
        let g = graph(
            r#"graph "g"(%0 "x": f32[1000000]) -> (%3) {
  %1 "unused1" = Neg "u1"(%0)
  %2 "unused2" = Neg "u2"(%0)
  %3 "y" = Neg "n"(%0)
}
"#,
        );
        run_limited(&g, &[f32s(1_000_000)], MemoryLimit::new(13_000_000)).expect("fits");
    }

    #[test]
    fn shapes_known_only_at_run_time_are_inferred_before_the_node_runs() {
        // The shape is a graph input: the output's type is unknown until the run.
        let g = graph(
            r#"graph "g"(%0 "x": f32[1], %1 "s": i64[2]) -> (%2) {
  %2 "y" = Expand "dyn"(%0, %1)
}
"#,
        );
        let shape = Tensor::from_i64s(&[100_000, 100_000]);
        let e = run_limited(&g, &[f32s(1), shape], MemoryLimit::new(1 << 30))
            .expect_err("40 GB is above 1 GiB")
            .to_string();
        assert!(
            e.contains("`dyn` (Expand)") && e.contains("f32[100000,100000]"),
            "{e}"
        );
    }

    #[test]
    fn the_inputs_copies_count() {
        let g = graph(
            r#"graph "g"(%0 "x": f32[1000000]) -> (%1) {
  %1 "y" = Neg "n"(%0)
}
"#,
        );
        let e = run_limited(&g, &[f32s(1_000_000)], MemoryLimit::new(1_000_000))
            .expect_err("the copy of x is 4 MB")
            .to_string();
        assert!(e.contains("copies of its inputs"), "{e}");
    }
}
