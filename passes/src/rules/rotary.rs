//! Rotary embeddings. transformers' `x·cos + rotate_half(x)·sin` over heads
//! `[batch, heads, seq, head]`, with constant cos/sin tables whose two halves are equal
//! (`cat(freqs, freqs)`), is ONNX `RotaryEmbedding(x, cos', sin')` over the tables'
//! first halves, and one over a head view of a projection reads the projection as
//! `[batch, seq, heads · head]` instead: one kernel reading `x` once, where
//! `fuse-rotate-half-into-weight` computes `rotate_half(x)` by a second GEMM over a
//! rotated weight (twice the projection's FLOPs) and the sum element-wise. That rule
//! (in the fusion table; its builder lives here) remains the form for tables known
//! only at run time (generation's `position_ids`).

use super::fusion::{lookup, slices_last};
use super::{absent, add_const, add_op, attrs, dtype, konst, rule, shape, var, Rule};
use crate::analysis::{is_absent, Egraph};
use crate::lang::{OpKey, Term};
use egg::{Id, Subst};
use gopt_ir::ops::{AttentionOp, FusedOp, ShapeOp};
use gopt_ir::{Attr, Attrs, Op, Tensor};

/// The rotary table.
pub fn rules() -> Vec<Rule> {
    vec![
        // x·cos + Concat(-x[.., h:], x[.., :h])·sin = RotaryEmbedding(x, cos[.., :h], sin[.., :h])
        // for x [b, heads, s, 2h] and constant tables of equal halves
        rule(
            "fuse-rotary",
            "(Add ?p (Mul ?m1 ?x ?cos) (Mul ?m2 (Concat ?c (Neg ?n (Slice ?s1 ?x ?st1 ?en1 ?ax1 ?sp1)) (Slice ?s2 ?x ?st2 ?en2 ?ax2 ?sp2)) ?sin))",
            rotary,
        ),
        // RotaryEmbedding(Transpose(Reshape(y, [b, s, h, d]))) = Transpose(Reshape(
        // RotaryEmbedding(y, num_heads = h), [b, s, h, d])): heads read from y's rows
        rule(
            "fuse-rotary-rows",
            "(RotaryEmbedding ?r (Transpose ?t (Reshape ?q ?y ?shape)) ?cos ?sin)",
            rotary_rows,
        ),
    ]
}

/// The first half (along the last axis, of `d`) of a constant table that broadcasts to
/// `[b, heads, s, d]` without varying over heads (`[.., 1, s, d]`, `[s, d]`), as
/// `[1 or b, s, d / 2]`; `None` when its two halves differ anywhere.
fn half_table(t: &Tensor, b: usize, s: usize, d: usize) -> Option<Tensor> {
    let sh = t.shape();
    let mut s4 = vec![1usize; 4usize.checked_sub(sh.len())?];
    s4.extend_from_slice(sh);
    let [tb, th, ts, td] = s4[..] else {
        return None;
    };
    if th != 1 || ts != s || td != d || (tb != 1 && tb != b) || !d.is_multiple_of(2) {
        return None;
    }
    let h = d / 2;
    let v = t.to_f64_vec();
    let mut out = Vec::with_capacity(v.len() / 2);
    for row in v.chunks(d) {
        let (lo, hi) = row.split_at(h);
        if lo.iter().zip(hi).any(|(a, b)| a.to_bits() != b.to_bits()) {
            return None;
        }
        out.extend_from_slice(lo);
    }
    Tensor::from_f64s(t.dtype(), &[tb, s, h], &out).ok()
}

fn rotary(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    let [b, _, sq, d] = shape(eg, x)?[..] else {
        return None;
    };
    let dt = dtype(eg, x)?;
    if !dt.is_float() || d == 0 || !d.is_multiple_of(2) {
        return None;
    }
    let axis = attrs(eg, s, "?c")?.int_or("axis", 0).ok()?;
    let h = d as i64 / 2;
    if (axis != -1 && axis != 3)
        || !slices_last(eg, s, 1, (4, d as i64), (h, 2 * h))
        || !slices_last(eg, s, 2, (4, d as i64), (0, h))
    {
        return None;
    }
    let (cos, sin) = (konst(eg, var(s, "?cos"))?, konst(eg, var(s, "?sin"))?);
    if cos.dtype() != dt || sin.dtype() != dt {
        return None;
    }
    let cos = half_table(&cos.decoded(), b, sq, d)?;
    let sin = half_table(&sin.decoded(), b, sq, d)?;
    let (c, sn) = (add_const(eg, cos), add_const(eg, sin));
    Some(add_op(
        eg,
        Op::Attention(AttentionOp::RotaryEmbedding),
        Attrs::default(),
        &[Some(x), Some(c), Some(sn)],
    ))
}

fn rotary_rows(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let r = attrs(eg, s, "?r")?;
    if !r.0.is_empty() {
        return None;
    }
    let (y, shape_id) = (var(s, "?y"), var(s, "?shape"));
    let t = attrs(eg, s, "?t")?;
    if t.ints("perm").ok()?? != [0, 2, 1, 3] {
        return None;
    }
    let reshaped = lookup(eg, ShapeOp::Reshape, &[var(s, "?q"), y, shape_id])?;
    let [b, sq, n] = shape(eg, y)?[..] else {
        return None;
    };
    let [b2, s2, heads, d] = shape(eg, reshaped)?[..] else {
        return None;
    };
    if (b2, s2) != (b, sq) || heads * d != n {
        return None;
    }
    let mut a = Attrs::default();
    a.set("num_heads", Attr::Int(i64::try_from(heads).ok()?));
    let rot = add_op(
        eg,
        Op::Attention(AttentionOp::RotaryEmbedding),
        a,
        &[Some(y), Some(var(s, "?cos")), Some(var(s, "?sin"))],
    );
    let q = attrs(eg, s, "?q")?;
    let heads_view = add_op(
        eg,
        Op::Shape(ShapeOp::Reshape),
        q,
        &[Some(rot), Some(shape_id)],
    );
    Some(add_op(
        eg,
        Op::Shape(ShapeOp::Transpose),
        t,
        &[Some(heads_view)],
    ))
}

/// `t` with the last axis, in blocks of `d`, rotated by half: column `i < d/2` of a block
/// is minus column `i + d/2`, column `i >= d/2` is column `i - d/2` (exact in any dtype).
/// [`rotate_half_columns`] as a lazy view of the weight (computed when the plan's
/// weights are written), for the float types it handles.
fn rotate_half_lazy(k: &gopt_ir::Const, d: usize) -> Option<gopt_ir::Const> {
    let dt = k.dtype();
    let ok = matches!(
        dt,
        gopt_ir::DType::F32 | gopt_ir::DType::F16 | gopt_ir::DType::BF16 | gopt_ir::DType::F64
    );
    if !ok || d == 0 || !d.is_multiple_of(2) || !k.shape().last()?.is_multiple_of(d) {
        return None;
    }
    Some(k.map(
        "rotate-half",
        &[d as u64],
        dt,
        k.shape().to_vec(),
        move |t| rotate_half_columns(t, d).unwrap_or_else(|| t.clone()),
    ))
}

fn rotate_half_columns(t: &Tensor, d: usize) -> Option<Tensor> {
    use ndarray::{ArrayD, Axis};
    fn go<T: Clone + std::ops::Neg<Output = T>>(a: &ArrayD<T>, d: usize) -> Option<ArrayD<T>> {
        let axis = Axis(a.ndim().checked_sub(1)?);
        let n = a.len_of(axis);
        let h = d / 2;
        let src: Vec<usize> = (0..n)
            .map(|j| j - j % d + if j % d < h { j % d + h } else { j % d - h })
            .collect();
        let mut out = a.select(axis, &src);
        for (j, mut col) in out.axis_iter_mut(axis).enumerate() {
            if j % d < h {
                col.mapv_inplace(|v| -v);
            }
        }
        Some(out)
    }
    if d == 0 || !d.is_multiple_of(2) || !t.shape().last()?.is_multiple_of(d) {
        return None;
    }
    match t {
        Tensor::F32(a) => go(a, d).map(Tensor::F32),
        Tensor::F16(a) => go(a, d).map(Tensor::F16),
        Tensor::BF16(a) => go(a, d).map(Tensor::BF16),
        Tensor::F64(a) => go(a, d).map(Tensor::F64),
        _ => None,
    }
}

pub(super) fn rotate_half(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    // One rotated GEMM per rotate_half: its GEMM's class holds the same product in
    // other forms (fp32, and with low-precision operands), and a rotated weight built
    // from each would give equal GEMMs the e-graph cannot tell equal, which no sibling
    // merge then covers at once.
    let once = (
        egg::Symbol::from("fuse-rotate-half-into-weight"),
        eg.find(id),
        Vec::new(),
    );
    if eg.analysis.applied.contains(&once) {
        return None;
    }
    let built = rotate_half_build(eg, s)?;
    eg.analysis.applied.insert(once);
    Some(built)
}

fn rotate_half_build(eg: &mut Egraph, s: &Subst) -> Option<Id> {
    let f = attrs(eg, s, "?f")?;
    let (x, w, b) = (var(s, "?x"), var(s, "?w"), var(s, "?b"));
    let wt = konst(eg, w)?;
    let plain = f.str_or("activation", "none").ok()? == "none" && f.int_or("trans_b", 0).ok()? == 0;
    if !plain || !absent(eg, s, "?res") || wt.rank() != 2 {
        return None;
    }
    // The reshape splits the GEMM's last axis [.., n] into [.., heads, d]; the transpose
    // keeps the last axis last.
    let mm_id = lookup_fused_matmul(eg, s)?;
    let mm = shape(eg, mm_id)?;
    let shape_id = var(s, "?shape");
    let split = shape(
        eg,
        lookup(eg, ShapeOp::Reshape, &[var(s, "?r"), mm_id, shape_id])?,
    )?;
    let (d, heads) = (*split.last()?, *split.get(split.len().checked_sub(2)?)?);
    let n = *mm.last()?;
    if split.len() != mm.len() + 1 || split[..mm.len() - 1] != mm[..mm.len() - 1] || heads * d != n
    {
        return None;
    }
    let t = attrs(eg, s, "?t")?;
    let perm = t.ints("perm").ok()??.to_vec();
    let last = split.len() as i64 - 1;
    let h = d as i64 / 2;
    if perm.last() != Some(&last)
        || !slices_last(eg, s, 1, (split.len(), d as i64), (h, 2 * h))
        || !slices_last(eg, s, 2, (split.len(), d as i64), (0, h))
    {
        return None;
    }
    let w2 = add_const(eg, rotate_half_lazy(&wt, d)?);
    let b2 = if is_absent(eg, b) {
        None
    } else {
        let bt = konst(eg, b)?;
        if bt.shape().last() != Some(&n) {
            return None;
        }
        Some(add_const(eg, rotate_half_lazy(&bt, d)?))
    };
    let r = attrs(eg, s, "?r")?;
    let g = add_op(
        eg,
        Op::Fused(FusedOp::FusedMatMul),
        f,
        &[Some(x), Some(w2), b2, None],
    );
    let rs = add_op(
        eg,
        Op::Shape(ShapeOp::Reshape),
        r,
        &[Some(g), Some(shape_id)],
    );
    Some(add_op(eg, Op::Shape(ShapeOp::Transpose), t, &[Some(rs)]))
}

/// The class of the matched `(FusedMatMul ?f ?x ?w ?b ?res)`.
fn lookup_fused_matmul(eg: &Egraph, s: &Subst) -> Option<Id> {
    let ch = ["?f", "?x", "?w", "?b", "?res"].map(|v| eg.find(var(s, v)));
    eg.lookup(Term::Op(
        OpKey::one(Op::Fused(FusedOp::FusedMatMul)),
        ch.to_vec(),
    ))
}
