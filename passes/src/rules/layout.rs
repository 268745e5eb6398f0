//! Layout: GEMM dims aligned to the tensor-core tile. A weight whose output dim N is not
//! a multiple of 64 is padded with zero columns (and its bias with zeros) at compile time
//! and the result sliced back; a GEMM that reads such a slice on its K axis reads the
//! padded activation instead, against a weight padded with zero rows. Both are exact:
//! the extra columns are never read, and the extra rows multiply finite values by zero.
//! Whether padding pays is the cost model's call (unaligned GEMMs lose tile and
//! vector-load efficiency; the slice is one more pass over memory unless a consumer
//! absorbs it). The padded GEMM records the logical size in `pad_n` / `pad_k` (for the
//! report and the backends).
//!
//! Attention reads its heads in place: exporters move every head to `[batch, heads,
//! seq, head]` with a Transpose before attention and back after it, two copies of Q, K,
//! V and the output per layer. Attention over 3-D `[batch, seq, heads · head]` inputs
//! (ONNX's own form, `q_num_heads` / `kv_num_heads`) computes the same thing from the
//! untransposed tensors, so the transposes meet their inverses and vanish (algebra's
//! transpose and reshape rules); extraction keeps whichever form the cost model prices
//! lower (a transpose pays its bytes).

use super::{absent, add_const, add_op, attrs, konst, rule, shape, var, Rule};
use crate::analysis::{is_absent, Egraph};
use egg::{Id, Subst};
use gopt_ir::ops::{AttentionOp, FusedOp, ShapeOp};
use gopt_ir::{Attr, Attrs, Const, Op, Tensor};

/// GEMM dims are padded up to a multiple of this.
pub const ALIGN: usize = 64;

/// The layout table.
pub fn rules() -> Vec<Rule> {
    vec![
        // FusedMatMul(a, w[K,N], b) = Slice(FusedMatMul(a, w‖0, b‖0), N) when N % 64 ≠ 0
        rule("layout-pad-matmul-n", "(FusedMatMul ?f ?a ?w ?b ?r)", pad_n),
        // FusedMatMul(Slice(y, K), w[K,N]) = FusedMatMul(y, w ⊕ 0-rows) when y is padded
        rule(
            "layout-pad-matmul-k",
            "(FusedMatMul ?f (Slice ?p ?y ?st ?en ?ax) ?w ?b ?r)",
            pad_k,
        ),
        // Attention(T(q), T(k), T(v)) = T(R(Attention₃(R(q), R(k), R(v)))), T = perm [0,2,1,3]
        rule(
            "layout-attention-heads-in-place",
            "(Attention ?a (Transpose ?tq ?q) (Transpose ?tk ?k) (Transpose ?tv ?v) ?m)",
            heads_in_place,
        ),
    ]
}

/// True when the Transpose bound to `name` swaps heads and rows: perm `[0, 2, 1, 3]`.
fn swaps_heads(eg: &Egraph, s: &Subst, name: &str) -> bool {
    attrs(eg, s, name).is_some_and(|a| a.ints("perm").ok().flatten() == Some(&[0, 2, 1, 3][..]))
}

/// `x` (shape `[b, s, h, d]`) as `[b, s, h · d]`: a view.
fn merge_heads(eg: &mut Egraph, x: Id, sh: &[usize]) -> Id {
    let to = [sh[0], sh[1], sh[2] * sh[3]].map(|d| d as i64);
    let to = add_const(eg, Tensor::from_i64s(&to));
    add_op(
        eg,
        Op::Shape(ShapeOp::Reshape),
        Attrs::default(),
        &[Some(x), Some(to)],
    )
}

fn heads_in_place(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    if !["?tq", "?tk", "?tv"].iter().all(|t| swaps_heads(eg, s, t)) {
        return None;
    }
    let (q, k, v) = (var(s, "?q"), var(s, "?k"), var(s, "?v"));
    let (qs, ks, vs) = (shape(eg, q)?, shape(eg, k)?, shape(eg, v)?);
    if qs.len() != 4 || ks != vs || ks.len() != 4 || qs[3] != ks[3] || qs[0] != ks[0] {
        return None;
    }
    let mut a = attrs(eg, s, "?a")?;
    // Head counts already given must be these (they are for 4-D inputs).
    for (key, h) in [("q_num_heads", qs[2]), ("kv_num_heads", ks[2])] {
        match a.0.get(key) {
            None => {}
            Some(Attr::Int(n)) if *n == h as i64 => {}
            Some(_) => return None,
        }
        a.set(key, Attr::Int(h as i64));
    }
    let (q3, k3, v3) = (
        merge_heads(eg, q, &qs),
        merge_heads(eg, k, &ks),
        merge_heads(eg, v, &vs),
    );
    let m = var(s, "?m");
    let m = (!is_absent(eg, m)).then_some(m);
    let att = add_op(
        eg,
        Op::Attention(AttentionOp::Attention),
        a,
        &[Some(q3), Some(k3), Some(v3), m],
    );
    if eg[att].data.error.is_some() {
        return None;
    }
    let split = add_const(
        eg,
        Tensor::from_i64s(&qs.iter().map(|&d| d as i64).collect::<Vec<_>>()),
    );
    let heads = add_op(
        eg,
        Op::Shape(ShapeOp::Reshape),
        Attrs::default(),
        &[Some(att), Some(split)],
    );
    let mut p = Attrs::default();
    p.set("perm", Attr::Ints(vec![0, 2, 1, 3]));
    Some(add_op(eg, Op::Shape(ShapeOp::Transpose), p, &[Some(heads)]))
}

fn up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Pads a 2-D weight to `[k2, n2]` with zeros (and keeps its dtype): a lazy view,
/// computed when the plan's weights are written.
fn pad2(w: &Const, k2: usize, n2: usize) -> Option<Const> {
    w.pad_end(&[k2, n2]).ok()
}

fn pad_n(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let f = attrs(eg, s, "?f")?;
    let w = konst(eg, var(s, "?w"))?;
    if f.int_or("trans_b", 0).ok()? != 0
        || !absent(eg, s, "?r")
        || w.rank() != 2
        || !w.dtype().is_float()
    {
        return None;
    }
    let (k, n) = (w.shape()[0], w.shape()[1]);
    if n % ALIGN == 0 || n < ALIGN {
        return None;
    }
    let n2 = up(n);
    let wp = add_const(eg, pad2(&w, k, n2)?);
    let b = var(s, "?b");
    let bp = if is_absent(eg, b) {
        None
    } else {
        let bt = konst(eg, b)?;
        if bt.len() != n {
            return None;
        }
        let mut v = bt.decoded().to_f64_vec();
        v.resize(n2, 0.0);
        Some(add_const(
            eg,
            Tensor::from_f64s(bt.dtype(), &[n2], &v).ok()?,
        ))
    };
    let mut f = f;
    f.set("pad_n", gopt_ir::Attr::Int(n as i64));
    let mm = add_op(
        eg,
        Op::Fused(FusedOp::FusedMatMul),
        f,
        &[Some(var(s, "?a")), Some(wp), bp, None],
    );
    let st = add_const(eg, Tensor::from_i64s(&[0]));
    let en = add_const(eg, Tensor::from_i64s(&[n as i64]));
    let ax = add_const(eg, Tensor::from_i64s(&[-1]));
    Some(add_op(
        eg,
        Op::Shape(ShapeOp::Slice),
        Attrs::default(),
        &[Some(mm), Some(st), Some(en), Some(ax)],
    ))
}

fn pad_k(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let f = attrs(eg, s, "?f")?;
    let w = konst(eg, var(s, "?w"))?;
    let y = var(s, "?y");
    let ys = shape(eg, y)?;
    if f.int_or("trans_b", 0).ok()? != 0 || w.rank() != 2 || !w.dtype().is_float() {
        return None;
    }
    let st = konst(eg, var(s, "?st"))?.tensor().to_i64_vec();
    let en = konst(eg, var(s, "?en"))?.tensor().to_i64_vec();
    let ax = konst(eg, var(s, "?ax"))?.tensor().to_i64_vec();
    let (k, n) = (w.shape()[0], w.shape()[1]);
    let last = ys.len() as i64 - 1;
    let kp = *ys.last()?;
    if st != [0] || en != [k as i64] || !(ax == [-1] || ax == [last]) || kp <= k {
        return None;
    }
    let wp = add_const(eg, pad2(&w, kp, n)?);
    let b = var(s, "?b");
    let b = (!is_absent(eg, b)).then_some(b);
    let r = var(s, "?r");
    let r = (!is_absent(eg, r)).then_some(r);
    let mut f = f;
    f.set("pad_k", gopt_ir::Attr::Int(k as i64));
    Some(add_op(
        eg,
        Op::Fused(FusedOp::FusedMatMul),
        f,
        &[Some(y), Some(wp), b, r],
    ))
}
