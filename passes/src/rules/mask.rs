//! Attention masks read at the size they were built. Exporters build a padding mask
//! `[B,1,1,S]` and then materialize it as `[B,1,S,S]` (an `And` with an all-true
//! constant, an `Expand`, a `Where` to the additive form) before attention, which
//! broadcasts its mask anyway: the full form costs a kernel that writes B·S² values and
//! an attention that reads them again for every head. These rules move the broadcast
//! outward until attention absorbs it. Each is exact: a broadcast commutes with
//! element-wise math, and `Attention` broadcasts its mask to `[B, H, Sq, Skv]`.

use super::{add_const, add_op, attrs, dtype, konst, rule, scalar_of, shape, var, Rule};
use crate::analysis::{is_absent, Egraph};
use egg::{Id, Subst};
use gopt_ir::ops::{AttentionOp, ElementwiseOp, ShapeOp};
use gopt_ir::{Attrs, DType, Op, Tensor};

/// The mask table (a fusion topic).
pub fn rules() -> Vec<Rule> {
    vec![
        // And(x, true) = Expand(x, shape): an all-true constant only broadcasts
        rule("mask-and-true", "(And ?a ?x ?c)", |eg, id, s| {
            and_true(eg, id, var(s, "?x"), var(s, "?c"))
        }),
        rule("mask-true-and", "(And ?a ?c ?x)", |eg, id, s| {
            and_true(eg, id, var(s, "?x"), var(s, "?c"))
        }),
        // Expand(Expand(x, s1), s2) = Expand(x, shape of the result)
        rule(
            "mask-expand-expand",
            "(Expand ?a (Expand ?b ?x ?s1) ?s2)",
            |eg, id, s| expand_to(eg, var(s, "?x"), &shape(eg, id)?),
        ),
        // Where(Expand(c, s), a, b) = Expand(Where(c, a, b), s) for scalar a, b
        rule(
            "mask-where-of-expand",
            "(Where ?w (Expand ?e ?c ?s) ?t ?f)",
            where_of_expand,
        ),
        // Attention(q, k, v, Expand(m, s)) = Attention(q, k, v, m): it broadcasts its mask
        rule(
            "mask-attention-unexpand",
            "(Attention ?a ?q ?k ?v (Expand ?e ?m ?s))",
            attention_unexpand,
        ),
    ]
}

/// `Expand(x, to)`, or `x` when it already has that shape.
fn expand_to(eg: &mut Egraph, x: Id, to: &[usize]) -> Option<Id> {
    if shape(eg, x)? == to {
        return Some(x);
    }
    let dims: Vec<i64> = to
        .iter()
        .map(|&d| i64::try_from(d).ok())
        .collect::<Option<_>>()?;
    let s = add_const(eg, Tensor::from_i64s(&dims));
    Some(add_op(
        eg,
        Op::Shape(ShapeOp::Expand),
        Attrs::default(),
        &[Some(x), Some(s)],
    ))
}

/// True for a bool constant whose every element is true.
fn all_true(eg: &Egraph, c: Id) -> bool {
    match konst(eg, c) {
        Some(k) if k.dtype() == DType::Bool => k.tensor().to_i64_vec().iter().all(|&v| v != 0),
        _ => false,
    }
}

fn and_true(eg: &mut Egraph, id: Id, x: Id, c: Id) -> Option<Id> {
    if !all_true(eg, c) || dtype(eg, x)? != DType::Bool {
        return None;
    }
    let out = shape(eg, id)?;
    expand_to(eg, x, &out)
}

fn where_of_expand(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    let (c, t, f) = (var(s, "?c"), var(s, "?t"), var(s, "?f"));
    // Scalars only: a branch of its own shape would broadcast the result too.
    scalar_of(eg, t)?;
    scalar_of(eg, f)?;
    let out = shape(eg, id)?;
    let a = attrs(eg, s, "?w")?;
    let w = add_op(
        eg,
        Op::Elementwise(ElementwiseOp::Where),
        a,
        &[Some(c), Some(t), Some(f)],
    );
    expand_to(eg, w, &out)
}

fn attention_unexpand(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let m = var(s, "?m");
    // Attention broadcasts masks of rank 2 to 4 (numpy rules, aligned at the right).
    let rank = shape(eg, m)?.len();
    if !(2..=4).contains(&rank) || is_absent(eg, m) {
        return None;
    }
    let a = attrs(eg, s, "?a")?;
    Some(add_op(
        eg,
        Op::Attention(AttentionOp::Attention),
        a,
        &[
            Some(var(s, "?q")),
            Some(var(s, "?k")),
            Some(var(s, "?v")),
            Some(m),
        ],
    ))
}
