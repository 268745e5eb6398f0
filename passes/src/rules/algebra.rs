//! Algebra: identities and no-ops removed, transposes and reshapes composed, transposes
//! moved out of element-wise math (toward where they cancel), constants moved to the
//! right of commutative ops (so fusion patterns need one form), `1 / x` as `Reciprocal`,
//! and BatchNorm or exact (power-of-two) scalings folded into weights. Folding of
//! weight-only sub-graphs is the analysis's job; CSE is the e-graph's.

use super::{
    add_const, add_op, attrs, dtype, is_const, konst, pattern_rule, rule, scalar_of, shape, var,
    Rule,
};
use crate::analysis::Egraph;
use egg::{Id, Subst};
use gopt_ir::ops::{ElementwiseOp, NnOp, ShapeOp};
use gopt_ir::{Attr, Attrs, Op, Tensor};

/// The algebra table.
pub fn rules() -> Vec<Rule> {
    vec![
        // Identity(x) = x
        pattern_rule("algebra-identity", "(Identity ?a ?x)", "?x"),
        // Cast(x, dtype(x)) = x
        rule("algebra-cast-same", "(Cast ?a ?x)", cast_same),
        // Reshape(x, shape(x)) = x (also a Squeeze that changes nothing)
        rule("algebra-reshape-same", "(Reshape ?a ?x ?s)", same_shape),
        rule("algebra-squeeze-same", "(Squeeze ?a ?x ?s)", same_shape),
        // Transpose(x, identity) = x
        rule(
            "algebra-transpose-identity",
            "(Transpose ?a ?x)",
            transpose_identity,
        ),
        // Transpose(Transpose(x, p), q) = Transpose(x, p∘q)
        rule(
            "algebra-transpose-transpose",
            "(Transpose ?a (Transpose ?b ?x))",
            transpose_transpose,
        ),
        // Reshape(Reshape(x, s1), s2) = Reshape(x, s2)
        rule(
            "algebra-reshape-reshape",
            "(Reshape ?a (Reshape ?b ?x ?s1) ?s2)",
            reshape_reshape,
        ),
        // x + 0 = x, x * 1 = x (when the constant does not broadcast x)
        rule("algebra-add-zero", "(Add ?a ?x ?c)", |eg, id, s| {
            neutral(eg, id, s, 0.0)
        }),
        rule("algebra-mul-one", "(Mul ?a ?x ?c)", |eg, id, s| {
            neutral(eg, id, s, 1.0)
        }),
        // 1 / x = Reciprocal(x) (torch exports rsqrt as Div(1, Sqrt(x)))
        rule("algebra-div-one", "(Div ?a ?c ?x)", div_one),
        // c + x = x + c, c * x = x * c for constant c (one form for fusion to match)
        rule("algebra-add-const-right", "(Add ?a ?c ?x)", |eg, _, s| {
            const_right(eg, s, "Add")
        }),
        rule("algebra-mul-const-right", "(Mul ?a ?c ?x)", |eg, _, s| {
            const_right(eg, s, "Mul")
        }),
        // Tᵖ(x) · c = Tᵖ(x · Tᵖ⁻¹(c)) for constant c: transposes move out of element-wise
        // math (rotary's q·cos), toward where they cancel or attention reads heads in place
        rule(
            "algebra-transpose-out-of-mul",
            "(Mul ?m (Transpose ?t ?x) ?c)",
            transpose_out_of_mul,
        ),
        // Tᵖ(a) + Tᵖ(b) = Tᵖ(a + b): one transpose instead of two
        rule(
            "algebra-transpose-out-of-add",
            "(Add ?p (Transpose ?t ?a) (Transpose ?t ?b))",
            transpose_out_of_add,
        ),
        // BatchNorm(Conv(x, w, b)) = Conv(x, w·g, (b-m)·g + β), g = γ/√(σ²+ε)
        rule(
            "algebra-batchnorm-into-conv",
            "(BatchNormalization ?n (Conv ?c ?x ?w ?b) ?g ?beta ?m ?v)",
            batchnorm_into_conv,
        ),
        // MatMul(a, w) · 2^k = MatMul(a, w · 2^k): exact for a power of two
        rule(
            "algebra-mul-pow2-into-weight",
            "(Mul ?m (MatMul ?a ?x ?w) ?c)",
            pow2_into_weight,
        ),
    ]
}

fn cast_same(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let to = attrs(eg, s, "?a")?.dtype("to").ok()??;
    let x = var(s, "?x");
    (dtype(eg, x)? == to).then_some(x)
}

fn same_shape(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    let (a, b) = (eg[x].data.ty()?, eg[id].data.ty()?);
    (a.shape == b.shape && a.dtype == b.dtype).then_some(x)
}

fn perm(eg: &Egraph, s: &Subst, name: &str, rank: usize) -> Option<Vec<usize>> {
    let a = attrs(eg, s, name)?;
    match a.ints("perm").ok()? {
        Some(p) => p.iter().map(|&i| usize::try_from(i).ok()).collect(),
        None => Some((0..rank).rev().collect()),
    }
}

fn transpose_identity(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    let rank = eg[x].data.ty()?.shape.len();
    let p = perm(eg, s, "?a", rank)?;
    p.iter().enumerate().all(|(i, &j)| i == j).then_some(x)
}

fn transpose_transpose(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    let rank = eg[x].data.ty()?.shape.len();
    let inner = perm(eg, s, "?b", rank)?;
    let outer = perm(eg, s, "?a", rank)?;
    // out[i] = mid[outer[i]] = x[inner[outer[i]]]
    let composed: Vec<i64> = outer
        .iter()
        .map(|&o| inner.get(o).map(|&v| v as i64))
        .collect::<Option<_>>()?;
    let mut a = Attrs::default();
    a.set("perm", Attr::Ints(composed));
    Some(add_op(eg, Op::Shape(ShapeOp::Transpose), a, &[Some(x)]))
}

fn transpose_out_of_mul(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let (x, c) = (var(s, "?x"), var(s, "?c"));
    let xs = shape(eg, x)?;
    let cs = shape(eg, c)?;
    // The product keeps the transpose's shape (c broadcasts into it, not the reverse).
    if !is_const(eg, c) || is_const(eg, x) || cs.len() > xs.len() {
        return None;
    }
    let t = attrs(eg, s, "?t")?;
    let perm = perm(eg, s, "?t", xs.len())?;
    let mut inv = vec![0i64; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        *inv.get_mut(p)? = i as i64;
    }
    // c with x's rank, then in x's axis order (both fold to constants).
    let mut full = vec![1i64; xs.len() - cs.len()];
    full.extend(cs.iter().map(|&d| d as i64));
    let to = add_const(eg, Tensor::from_i64s(&full));
    let c = add_op(
        eg,
        Op::Shape(ShapeOp::Reshape),
        Attrs::default(),
        &[Some(c), Some(to)],
    );
    let mut a = Attrs::default();
    a.set("perm", Attr::Ints(inv));
    let c = add_op(eg, Op::Shape(ShapeOp::Transpose), a, &[Some(c)]);
    if !is_const(eg, c) {
        return None;
    }
    let m = attrs(eg, s, "?m")?;
    let prod = add_op(
        eg,
        Op::Elementwise(ElementwiseOp::Mul),
        m,
        &[Some(x), Some(c)],
    );
    if shape(eg, prod)? != xs {
        return None;
    }
    Some(add_op(eg, Op::Shape(ShapeOp::Transpose), t, &[Some(prod)]))
}

fn transpose_out_of_add(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let (a, b) = (var(s, "?a"), var(s, "?b"));
    if eg[a].data.ty()? != eg[b].data.ty()? {
        return None;
    }
    let p = attrs(eg, s, "?p")?;
    let sum = add_op(
        eg,
        Op::Elementwise(ElementwiseOp::Add),
        p,
        &[Some(a), Some(b)],
    );
    let t = attrs(eg, s, "?t")?;
    Some(add_op(eg, Op::Shape(ShapeOp::Transpose), t, &[Some(sum)]))
}

fn reshape_reshape(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    let out = shape(eg, id)?;
    let target = add_const(
        eg,
        Tensor::from_i64s(&out.iter().map(|&d| d as i64).collect::<Vec<_>>()),
    );
    Some(add_op(
        eg,
        Op::Shape(ShapeOp::Reshape),
        Attrs::default(),
        &[Some(x), Some(target)],
    ))
}

fn neutral(eg: &mut Egraph, id: Id, s: &Subst, unit: f64) -> Option<Id> {
    let x = var(s, "?x");
    let c = konst(eg, var(s, "?c"))?;
    if !c.dtype().is_float() && !c.dtype().is_int() {
        return None;
    }
    let same = eg[x].data.ty()? == eg[id].data.ty()?;
    (same && c.decoded().to_f64_vec().iter().all(|&v| v == unit)).then_some(x)
}

fn div_one(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    let c = konst(eg, var(s, "?c"))?;
    let float = c.dtype().is_float() && dtype(eg, x)?.is_float();
    // The constant must not broadcast x to a larger shape.
    let same = eg[x].data.ty()? == eg[id].data.ty()?;
    let ones = c.decoded().to_f64_vec().iter().all(|&v| v == 1.0);
    (float && same && ones).then(|| {
        add_op(
            eg,
            Op::Elementwise(ElementwiseOp::Reciprocal),
            Attrs::default(),
            &[Some(x)],
        )
    })
}

fn const_right(eg: &mut Egraph, s: &Subst, op: &str) -> Option<Id> {
    let (c, x) = (var(s, "?c"), var(s, "?x"));
    if !is_const(eg, c) || is_const(eg, x) {
        return None;
    }
    let op = Op::from_name(op)?;
    Some(add_op(eg, op, Attrs::default(), &[Some(x), Some(c)]))
}

fn batchnorm_into_conv(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let w = konst(eg, var(s, "?w"))?;
    let (g, beta, m, v) = (
        konst(eg, var(s, "?g"))?,
        konst(eg, var(s, "?beta"))?,
        konst(eg, var(s, "?m"))?,
        konst(eg, var(s, "?v"))?,
    );
    let eps = f64::from(attrs(eg, s, "?n")?.float_or("epsilon", 1e-5).ok()?);
    let wshape = w.shape().to_vec();
    let cout = *wshape.first()?;
    if [&g, &beta, &m, &v].iter().any(|t| t.len() != cout) || !w.dtype().is_float() {
        return None;
    }
    let bias = match konst(eg, var(s, "?b")) {
        Some(b) if b.len() == cout => b.decoded().to_f64_vec(),
        Some(_) => return None,
        None if super::is_absent(eg, var(s, "?b")) => vec![0.0; cout],
        None => return None,
    };
    let (g, beta, m, v) = (
        g.decoded().to_f64_vec(),
        beta.decoded().to_f64_vec(),
        m.decoded().to_f64_vec(),
        v.decoded().to_f64_vec(),
    );
    let scale: Vec<f64> = (0..cout).map(|o| g[o] / (v[o] + eps).sqrt()).collect();
    let per = w.len() / cout;
    let wv: Vec<f64> = w
        .decoded()
        .to_f64_vec()
        .iter()
        .enumerate()
        .map(|(i, x)| x * scale[i / per])
        .collect();
    let bv: Vec<f64> = (0..cout)
        .map(|o| (bias[o] - m[o]) * scale[o] + beta[o])
        .collect();
    let w2 = add_const(eg, Tensor::from_f64s(w.dtype(), &wshape, &wv).ok()?);
    let b2 = add_const(eg, Tensor::from_f64s(w.dtype(), &[cout], &bv).ok()?);
    let conv = attrs(eg, s, "?c")?;
    Some(add_op(
        eg,
        Op::Nn(NnOp::Conv),
        conv,
        &[Some(var(s, "?x")), Some(w2), Some(b2)],
    ))
}

fn pow2_into_weight(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let c = scalar_of(eg, var(s, "?c"))?;
    let w = konst(eg, var(s, "?w"))?;
    let (m, e) = frexp(c);
    if m != 0.5 || !w.dtype().is_float() || !(-60..60).contains(&e) {
        return None;
    }
    let scaled: Vec<f64> = w.decoded().to_f64_vec().iter().map(|x| x * c).collect();
    let w2 = add_const(eg, Tensor::from_f64s(w.dtype(), w.shape(), &scaled).ok()?);
    Some(add_op(
        eg,
        Op::Nn(NnOp::MatMul),
        Attrs::default(),
        &[Some(var(s, "?x")), Some(w2)],
    ))
}

/// Mantissa in [0.5, 1) and exponent: `c = m · 2^e`.
fn frexp(c: f64) -> (f64, i32) {
    if c == 0.0 || !c.is_finite() {
        return (0.0, 0);
    }
    let e = c.abs().log2().floor() as i32 + 1;
    (c.abs() / 2f64.powi(e), e)
}
