//! Fusion: the patterns exporters emit, recognized as the fused ops the backends have
//! kernels for. GEMM + bias (+ activation) (+ residual) becomes one `FusedMatMul`;
//! Conv + bias (+ ReLU / ReLU6-as-Clip / SiLU) (+ residual) (+ ReLU / ReLU6 after the
//! residual) one `FusedConv`;
//! decomposed LayerNorm, RMSNorm (transformers' `x · rsqrt(..)` in both operand orders),
//! softmax and both GELU forms their ops; scaled dot-product attention one `Attention`
//! (causal when its constant mask is), reading grouped-query K/V heads in place instead
//! of their `repeat_kv` copies; rotary's `rotate_half` of a projection folded into the
//! projection's weight (so rotary becomes element-wise math on GEMM outputs); sibling
//! GEMMs reading one input (Q/K/V) one GEMM whose output is sliced; a GEMM's silu times
//! another value one `SwiGLU` (Llama's MLP gate, whose gate and up GEMMs then merge as
//! siblings). Operand order is
//! canonical (constants right, see algebra), so each pattern is written once, plus the
//! residual's two sides.

use super::{
    absent, add_const, add_op, attrs, dtype, is_const, konst, rule, scalar_of, shape, var, Rule,
};
use crate::analysis::{attrs_of, is_absent, Egraph};
use crate::lang::{OpKey, Term};
use egg::{Id, Subst};
use gopt_ir::ops::{AttentionOp, ElementwiseOp, FusedOp, ReduceOp, ShapeOp};
use gopt_ir::{Attr, Attrs, Op, Tensor};

/// The fusion table.
pub fn rules() -> Vec<Rule> {
    vec![
        // MatMul(a, w) + b = FusedMatMul(a, w, b) for a bias over the last axis
        rule("fuse-matmul-bias", "(Add ?p (MatMul ?m ?a ?w) ?b)", matmul_bias),
        // MatMul(a, w) = FusedMatMul(a, w) for a constant 2-D weight (so siblings can merge)
        rule("fuse-matmul", "(MatMul ?m ?a ?w)", matmul_plain),
        // Gemm(a, b, c) = FusedMatMul(a, b, c) (transB, alpha kept; beta = 1)
        rule("fuse-gemm", "(Gemm ?g ?a ?w ?c)", gemm),
        // Reshape(FusedMatMul(Reshape(x, [-1, K]), w, b), [.., N]) = FusedMatMul(x, w, b)
        rule(
            "fuse-matmul-unflatten",
            "(Reshape ?r2 (FusedMatMul ?f (Reshape ?r1 ?x ?s1) ?w ?b ?res) ?s2)",
            matmul_unflatten,
        ),
        // act(FusedMatMul(..)) = FusedMatMul(.., activation = act)
        rule("fuse-matmul-relu", "(Relu ?p (FusedMatMul ?f ?a ?w ?b ?r))", |eg, _, s| mm_act(eg, s, "relu")),
        rule("fuse-matmul-gelu", "(Gelu ?p (FusedMatMul ?f ?a ?w ?b ?r))", mm_gelu),
        rule("fuse-matmul-tanh", "(Tanh ?p (FusedMatMul ?f ?a ?w ?b ?r))", |eg, _, s| mm_act(eg, s, "tanh")),
        rule("fuse-matmul-sigmoid", "(Sigmoid ?p (FusedMatMul ?f ?a ?w ?b ?r))", |eg, _, s| mm_act(eg, s, "sigmoid")),
        rule(
            "fuse-matmul-silu",
            "(Mul ?p (FusedMatMul ?f ?a ?w ?b ?r) (Sigmoid ?q (FusedMatMul ?f ?a ?w ?b ?r)))",
            |eg, _, s| mm_act(eg, s, "silu"),
        ),
        // FusedMatMul(.., silu) · u = SwiGLU(FusedMatMul(..), u): Llama's MLP gate, whose
        // plain gate GEMM then merges with the up projection's (fuse-sibling-matmul)
        rule("fuse-swiglu", "(Mul ?p (FusedMatMul ?f ?a ?w ?b ?r) ?u)", swiglu),
        rule("fuse-swiglu-left", "(Mul ?p ?u (FusedMatMul ?f ?a ?w ?b ?r))", swiglu),
        // FusedMatMul(..) + r = FusedMatMul(.., residual = r)
        rule("fuse-matmul-residual", "(Add ?p (FusedMatMul ?f ?a ?w ?b ?r) ?x)", |eg, id, s| mm_residual(eg, id, s)),
        rule("fuse-matmul-residual-left", "(Add ?p ?x (FusedMatMul ?f ?a ?w ?b ?r))", |eg, id, s| mm_residual(eg, id, s)),
        // Conv(x, w, b) = FusedConv(x, w, b)
        rule("fuse-conv", "(Conv ?c ?x ?w ?b)", conv),
        // act(FusedConv(..)) = FusedConv(.., activation = act)
        rule("fuse-conv-relu", "(Relu ?p (FusedConv ?f ?x ?w ?b ?r))", |eg, _, s| conv_act(eg, s, "relu", None)),
        rule("fuse-conv-clip", "(Clip ?p (FusedConv ?f ?x ?w ?b ?r) ?lo ?hi)", conv_clip),
        rule(
            "fuse-conv-silu",
            "(Mul ?p (FusedConv ?f ?x ?w ?b ?r) (Sigmoid ?q (FusedConv ?f ?x ?w ?b ?r)))",
            |eg, _, s| conv_act(eg, s, "silu", None),
        ),
        // FusedConv(..) + r = FusedConv(.., residual = r)
        rule("fuse-conv-residual", "(Add ?p (FusedConv ?f ?x ?w ?b ?r) ?y)", conv_residual),
        rule("fuse-conv-residual-left", "(Add ?p ?y (FusedConv ?f ?x ?w ?b ?r))", conv_residual),
        // act(FusedConv(.., residual = r)) = FusedConv(.., residual = r, activation = act,
        // epilogue = bias_residual_act): ResNet's relu(conv(x) + b + identity)
        rule("fuse-conv-residual-relu", "(Relu ?p (FusedConv ?f ?x ?w ?b ?r))", |eg, _, s| conv_residual_act(eg, s, "relu", None)),
        rule("fuse-conv-residual-clip", "(Clip ?p (FusedConv ?f ?x ?w ?b ?r) ?lo ?hi)", conv_residual_clip),
        // x·½·(1 + erf(x/√2)) = Gelu(x), in the orders exporters use
        rule(
            "fuse-gelu-erf",
            "(Mul ?p (Mul ?q ?x (Add ?t (Erf ?e (Div ?d ?x ?s)) ?one)) ?half)",
            |eg, _, s| gelu_erf(eg, s, true),
        ),
        rule(
            "fuse-gelu-erf-half-first",
            "(Mul ?p (Mul ?q ?x ?half) (Add ?t (Erf ?e (Div ?d ?x ?s)) ?one))",
            |eg, _, s| gelu_erf(eg, s, true),
        ),
        rule(
            "fuse-gelu-erf-mul",
            "(Mul ?p (Mul ?q ?x (Add ?t (Erf ?e (Mul ?d ?x ?s)) ?one)) ?half)",
            |eg, _, s| gelu_erf(eg, s, false),
        ),
        // ½x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) = Gelu(x, approximate = tanh)
        rule(
            "fuse-gelu-tanh",
            "(Mul ?p (Mul ?q ?x ?half) (Add ?t (Tanh ?h (Mul ?m (Add ?u ?x (Mul ?v (Pow ?w ?x ?three) ?c)) ?k)) ?one))",
            gelu_tanh,
        ),
        // γ·(x-μ)/√(σ²+ε) + β = LayerNormalization(x, γ, β) over the last axis
        rule(
            "fuse-layernorm",
            "(Add ?p (Mul ?q (Div ?d (Sub ?s ?x (ReduceMean ?r1 ?x ?ax)) (Sqrt ?t (Add ?u (ReduceMean ?r2 (Pow ?w (Sub ?s ?x (ReduceMean ?r1 ?x ?ax)) ?two) ?ax) ?eps))) ?gamma) ?beta)",
            layernorm,
        ),
        // γ·x/√(mean(x²)+ε) = RMSNormalization(x, γ) over the last axis
        rule(
            "fuse-rmsnorm",
            "(Mul ?q (Div ?d ?x (Sqrt ?t (Add ?u (ReduceMean ?r2 (Pow ?w ?x ?two) ?ax) ?eps))) ?gamma)",
            rmsnorm,
        ),
        rule(
            "fuse-rmsnorm-reciprocal",
            "(Mul ?q (Mul ?d ?x (Reciprocal ?v (Sqrt ?t (Add ?u (ReduceMean ?r2 (Pow ?w ?x ?two) ?ax) ?eps)))) ?gamma)",
            rmsnorm,
        ),
        // γ·(rsqrt(mean(x²)+ε)·x) = RMSNormalization(x, γ): the rsqrt on the left
        rule(
            "fuse-rmsnorm-reciprocal-first",
            "(Mul ?q (Mul ?d (Reciprocal ?v (Sqrt ?t (Add ?u (ReduceMean ?r2 (Pow ?w ?x ?two) ?ax) ?eps))) ?x) ?gamma)",
            rmsnorm,
        ),
        // exp(x - max x) / Σ exp(x - max x) = Softmax(x)
        rule(
            "fuse-softmax",
            "(Div ?d (Exp ?e (Sub ?s ?x (ReduceMax ?m ?x ?ax))) (ReduceSum ?r (Exp ?e (Sub ?s ?x (ReduceMax ?m ?x ?ax))) ?ax))",
            softmax,
        ),
        // Softmax(Q·Kᵀ·c + M)·V = Attention(Q, K, V, M, scale = c); causal M → is_causal
        rule(
            "fuse-attention",
            "(MatMul ?o (Softmax ?sm (Add ?p (Mul ?q (MatMul ?m ?qq ?kt) ?c) ?mask)) ?v)",
            |eg, _, s| attention(eg, s, Scale::Mul, true),
        ),
        rule(
            "fuse-attention-div",
            "(MatMul ?o (Softmax ?sm (Add ?p (Div ?q (MatMul ?m ?qq ?kt) ?c) ?mask)) ?v)",
            |eg, _, s| attention(eg, s, Scale::Div, true),
        ),
        rule(
            "fuse-attention-nomask",
            "(MatMul ?o (Softmax ?sm (Mul ?q (MatMul ?m ?qq ?kt) ?c)) ?v)",
            |eg, _, s| attention(eg, s, Scale::Mul, false),
        ),
        // Where(IsNaN(Softmax(Q·Kᵀ·c + M)), 0, Softmax(..))·V = Attention(Q, K, V, M, scale = c):
        // torch's SDPA export guards fully masked rows to 0, as Attention does
        rule(
            "fuse-attention-nan-guard",
            "(MatMul ?o (Where ?w (IsNaN ?n (Softmax ?sm (Add ?p (Mul ?q (MatMul ?m ?qq ?kt) ?c) ?mask))) ?z (Softmax ?sm (Add ?p (Mul ?q (MatMul ?m ?qq ?kt) ?c) ?mask))) ?v)",
            attention_nan_guard,
        ),
        // (a·c₁)·(b·c₂) = (a·b)·(c₁c₂) for scalars: SDPA's export scales Q and Kᵀ by √c each
        rule(
            "fuse-matmul-scaled-operands",
            "(MatMul ?m (Mul ?p ?a ?c1) (Mul ?q ?b ?c2))",
            scaled_operands,
        ),
        // Transpose(x·c) = Transpose(x)·c for a scalar c (the scale moves to where it folds)
        rule("fuse-transpose-scalar-mul", "(Transpose ?t (Mul ?p ?x ?c))", transpose_scalar),
        // rotate_half(T(R(x·W + b))) = T(R(x·W' + b')), W' = W's columns per head rotated by
        // half and the moved-down half negated: rotary's rotate_half folded into a GEMM
        rule(
            "fuse-rotate-half-into-weight",
            "(Concat ?c (Neg ?n (Slice ?s1 (Transpose ?t (Reshape ?r (FusedMatMul ?f ?x ?w ?b ?res) ?shape)) ?st1 ?en1 ?ax1 ?sp1)) (Slice ?s2 (Transpose ?t (Reshape ?r (FusedMatMul ?f ?x ?w ?b ?res) ?shape)) ?st2 ?en2 ?ax2 ?sp2))",
            super::rotary::rotate_half,
        ),
        // Attention(q, repeat_kv(k), repeat_kv(v), m) = Attention(q, k, v, m): grouped-query
        // heads (query head i reads key/value head i / n_rep) read in place
        rule(
            "fuse-attention-gqa",
            "(Attention ?a ?q (Reshape ?rk (Expand ?ek (Unsqueeze ?uk ?k ?xk) ?sk) ?tk) (Reshape ?rv (Expand ?ev (Unsqueeze ?uv ?v ?xv) ?sv) ?tv) ?m)",
            attention_gqa,
        ),
        // FusedMatMul(x, w1, b1), FusedMatMul(x, w2, b2), … = slices of FusedMatMul(x, [w1 w2 …], [b1 b2 …])
        rule("fuse-sibling-matmul", "(FusedMatMul ?f ?x ?w ?b ?r)", sibling_matmul),
    ]
}

fn fused(f: FusedOp) -> Op {
    Op::Fused(f)
}

fn act_of(a: &Attrs) -> String {
    a.str_or("activation", "none").unwrap_or("none").to_string()
}

/// True for a bias that broadcasts along the last axis only (`[N]`, `[1, N]`, …).
fn is_row_bias(eg: &Egraph, b: Id, n: usize) -> bool {
    match shape(eg, b) {
        Some(s) => s.last() == Some(&n) && s[..s.len() - 1].iter().all(|&d| d == 1) && s.len() <= 2,
        None => false,
    }
}

fn matmul_bias(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    let (a, w, b) = (var(s, "?a"), var(s, "?w"), var(s, "?b"));
    let ws = shape(eg, w)?;
    let out = shape(eg, id)?;
    if ws.len() != 2 || !is_const(eg, w) || !is_const(eg, b) || !dtype(eg, a)?.is_float() {
        return None;
    }
    if !is_row_bias(eg, b, ws[1]) || dtype(eg, b)? != dtype(eg, a)? || out.len() < 2 {
        return None;
    }
    Some(add_op(
        eg,
        fused(FusedOp::FusedMatMul),
        Attrs::default(),
        &[Some(a), Some(w), Some(b), None],
    ))
}

fn matmul_plain(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let (a, w) = (var(s, "?a"), var(s, "?w"));
    let ws = shape(eg, w)?;
    if ws.len() != 2 || !is_const(eg, w) || !dtype(eg, a)?.is_float() || shape(eg, a)?.len() < 2 {
        return None;
    }
    Some(add_op(
        eg,
        fused(FusedOp::FusedMatMul),
        Attrs::default(),
        &[Some(a), Some(w), None, None],
    ))
}

fn gemm(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let g = attrs(eg, s, "?g")?;
    if g.int_or("transA", 0).ok()? != 0 || g.float_or("beta", 1.0).ok()? != 1.0 {
        return None;
    }
    let (a, w, c) = (var(s, "?a"), var(s, "?w"), var(s, "?c"));
    let trans_b = g.int_or("transB", 0).ok()?;
    let ws = shape(eg, w)?;
    let n = *ws.get(if trans_b != 0 { 0 } else { 1 })?;
    if ws.len() != 2 {
        return None;
    }
    let bias = if is_absent(eg, c) {
        None
    } else if is_row_bias(eg, c, n) {
        Some(c)
    } else {
        return None;
    };
    let mut a2 = Attrs::default();
    let alpha = g.float_or("alpha", 1.0).ok()?;
    if alpha != 1.0 {
        a2.set("alpha", Attr::Float(alpha));
    }
    if trans_b != 0 {
        a2.set("trans_b", Attr::Int(1));
    }
    Some(add_op(
        eg,
        fused(FusedOp::FusedMatMul),
        a2,
        &[Some(a), Some(w), bias, None],
    ))
}

fn matmul_unflatten(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    let (x, w) = (var(s, "?x"), var(s, "?w"));
    let xs = shape(eg, x)?;
    let out = shape(eg, id)?;
    let ws = shape(eg, w)?;
    let f = attrs(eg, s, "?f")?;
    let trans_b = f.int_or("trans_b", 0).ok()? != 0;
    if ws.len() != 2 || !absent(eg, s, "?res") || xs.len() < 2 {
        return None;
    }
    let n = if trans_b { ws[0] } else { ws[1] };
    let mut expect = xs[..xs.len() - 1].to_vec();
    expect.push(n);
    if out != expect {
        return None;
    }
    let b = var(s, "?b");
    let b = (!is_absent(eg, b)).then_some(b);
    Some(add_op(
        eg,
        fused(FusedOp::FusedMatMul),
        f,
        &[Some(x), Some(w), b, None],
    ))
}

/// Rebuilds the matched FusedMatMul with extra attributes and a residual.
fn remake_mm(eg: &mut Egraph, s: &Subst, f: Attrs, residual: Option<Id>) -> Option<Id> {
    let b = var(s, "?b");
    let b = (!is_absent(eg, b)).then_some(b);
    Some(add_op(
        eg,
        fused(FusedOp::FusedMatMul),
        f,
        &[Some(var(s, "?a")), Some(var(s, "?w")), b, residual],
    ))
}

fn mm_act(eg: &mut Egraph, s: &Subst, act: &str) -> Option<Id> {
    let mut f = attrs(eg, s, "?f")?;
    if act_of(&f) != "none" || !absent(eg, s, "?r") {
        return None;
    }
    f.set("activation", Attr::Str(act.into()));
    remake_mm(eg, s, f, None)
}

/// `SwiGLU(FusedMatMul(..), u)` for a matched product of a FusedMatMul with a silu
/// epilogue and no residual and a `u` of its type, f32 or f64: `silu(g) · u` is
/// SwiGLU's `g · sigmoid(g) · u` (alpha 1), one kernel that reads both halves. Not for
/// f16/bf16, where SwiGLU rounds the GEMM's result, the sigmoid and `g · sigmoid(g)`
/// each to the half type: two roundings more than the epilogue's one.
fn swiglu(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    let mut f = attrs(eg, s, "?f")?;
    let u = var(s, "?u");
    if act_of(&f) != "silu" || !absent(eg, s, "?r") || is_const(eg, u) {
        return None;
    }
    let ty = eg[id].data.ty()?.clone();
    let wide = matches!(ty.dtype, gopt_ir::DType::F32 | gopt_ir::DType::F64);
    if eg[u].data.ty()? != &ty || !wide {
        return None;
    }
    f.0.remove("activation");
    let gate = remake_mm(eg, s, f, None)?;
    Some(add_op(
        eg,
        Op::Attention(AttentionOp::SwiGLU),
        Attrs::default(),
        &[Some(gate), Some(u)],
    ))
}

fn mm_gelu(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let p = attrs(eg, s, "?p")?;
    match p.str_or("approximate", "none").ok()? {
        "tanh" => mm_act(eg, s, "gelu_tanh"),
        "none" => mm_act(eg, s, "gelu"),
        _ => None,
    }
}

fn mm_residual(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    let f = attrs(eg, s, "?f")?;
    if !absent(eg, s, "?r")
        || is_const(eg, x)
        || shape(eg, x)? != shape(eg, id)?
        || dtype(eg, x)? != dtype(eg, id)?
    {
        return None;
    }
    remake_mm(eg, s, f, Some(x))
}

fn conv(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let c = attrs(eg, s, "?c")?;
    let b = var(s, "?b");
    let b = (!is_absent(eg, b)).then_some(b);
    if !is_const(eg, var(s, "?w")) {
        return None;
    }
    Some(add_op(
        eg,
        fused(FusedOp::FusedConv),
        c,
        &[Some(var(s, "?x")), Some(var(s, "?w")), b, None],
    ))
}

fn remake_conv(eg: &mut Egraph, s: &Subst, f: Attrs, residual: Option<Id>) -> Option<Id> {
    let b = var(s, "?b");
    let b = (!is_absent(eg, b)).then_some(b);
    Some(add_op(
        eg,
        fused(FusedOp::FusedConv),
        f,
        &[Some(var(s, "?x")), Some(var(s, "?w")), b, residual],
    ))
}

fn conv_act(eg: &mut Egraph, s: &Subst, act: &str, clip: Option<(f32, f32)>) -> Option<Id> {
    let mut f = attrs(eg, s, "?f")?;
    if act_of(&f) != "none" || !absent(eg, s, "?r") {
        return None;
    }
    f.set("activation", Attr::Str(act.into()));
    if let Some((lo, hi)) = clip {
        f.set("clip_min", Attr::Float(lo));
        f.set("clip_max", Attr::Float(hi));
    }
    remake_conv(eg, s, f, None)
}

/// Clip's bounds `?lo` and `?hi` (absent: -inf and +inf), when constant scalars.
fn clip_bounds(eg: &Egraph, s: &Subst) -> Option<(f32, f32)> {
    let bound = |name: &str, d: f32| -> Option<f32> {
        let id = var(s, name);
        if is_absent(eg, id) {
            Some(d)
        } else {
            scalar_of(eg, id).map(|v| v as f32)
        }
    };
    Some((
        bound("?lo", f32::NEG_INFINITY)?,
        bound("?hi", f32::INFINITY)?,
    ))
}

fn conv_clip(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let bounds = clip_bounds(eg, s)?;
    conv_act(eg, s, "clip", Some(bounds))
}

/// The matched FusedConv with a residual and no activation, taking activation `act`
/// after its residual.
fn conv_residual_act(
    eg: &mut Egraph,
    s: &Subst,
    act: &str,
    clip: Option<(f32, f32)>,
) -> Option<Id> {
    let mut f = attrs(eg, s, "?f")?;
    let r = var(s, "?r");
    if act_of(&f) != "none" || is_absent(eg, r) {
        return None;
    }
    f.set("activation", Attr::Str(act.into()));
    f.set("epilogue", Attr::Str("bias_residual_act".into()));
    if let Some((lo, hi)) = clip {
        f.set("clip_min", Attr::Float(lo));
        f.set("clip_max", Attr::Float(hi));
    }
    remake_conv(eg, s, f, Some(r))
}

fn conv_residual_clip(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let bounds = clip_bounds(eg, s)?;
    conv_residual_act(eg, s, "clip", Some(bounds))
}

fn conv_residual(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    let y = var(s, "?y");
    let f = attrs(eg, s, "?f")?;
    if !absent(eg, s, "?r")
        || is_const(eg, y)
        || shape(eg, y)? != shape(eg, id)?
        || dtype(eg, y)? != dtype(eg, id)?
    {
        return None;
    }
    remake_conv(eg, s, f, Some(y))
}

fn near(eg: &Egraph, s: &Subst, name: &str, want: f64) -> bool {
    scalar_of(eg, var(s, name)).is_some_and(|v| (v - want).abs() <= 1e-4 * want.abs().max(1.0))
}

fn gelu_erf(eg: &mut Egraph, s: &Subst, div: bool) -> Option<Id> {
    let want = if div {
        std::f64::consts::SQRT_2
    } else {
        std::f64::consts::FRAC_1_SQRT_2
    };
    if !near(eg, s, "?s", want) || !near(eg, s, "?one", 1.0) || !near(eg, s, "?half", 0.5) {
        return None;
    }
    let x = var(s, "?x");
    dtype(eg, x)?.is_float().then_some(())?;
    Some(add_op(
        eg,
        Op::Elementwise(ElementwiseOp::Gelu),
        Attrs::default(),
        &[Some(x)],
    ))
}

fn gelu_tanh(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    if !near(eg, s, "?half", 0.5) || !near(eg, s, "?one", 1.0) || !near(eg, s, "?three", 3.0) {
        return None;
    }
    if !near(eg, s, "?c", 0.044715) || !near(eg, s, "?k", k) {
        return None;
    }
    let mut a = Attrs::default();
    a.set("approximate", Attr::Str("tanh".into()));
    Some(add_op(
        eg,
        Op::Elementwise(ElementwiseOp::Gelu),
        a,
        &[Some(var(s, "?x"))],
    ))
}

/// The reduction axes bound to `?ax` are the last axis of `x`, kept.
fn last_axis_kept(eg: &Egraph, s: &Subst, x: Id, reductions: &[&str]) -> bool {
    let Some(rank) = eg[x].data.ty().map(|t| t.shape.len() as i64) else {
        return false;
    };
    let axes = konst(eg, var(s, "?ax")).map(|t| t.tensor().to_i64_vec());
    let last = matches!(axes.as_deref(), Some([a]) if *a == -1 || *a == rank - 1);
    last && reductions
        .iter()
        .all(|r| attrs(eg, s, r).is_some_and(|a| a.int_or("keepdims", 1).ok() == Some(1)))
}

fn norm_params(eg: &Egraph, s: &Subst, x: Id, gamma: &[&str]) -> Option<Attrs> {
    let eps = scalar_of(eg, var(s, "?eps"))?;
    let d = *shape(eg, x)?.last()?;
    if !near(eg, s, "?two", 2.0) || !dtype(eg, x)?.is_float() {
        return None;
    }
    for g in gamma {
        let gs = shape(eg, var(s, g))?;
        if gs != [d] {
            return None;
        }
    }
    let mut a = Attrs::default();
    a.set("axis", Attr::Int(-1));
    a.set("epsilon", Attr::Float(eps as f32));
    Some(a)
}

fn layernorm(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    if !last_axis_kept(eg, s, x, &["?r1", "?r2"]) {
        return None;
    }
    let a = norm_params(eg, s, x, &["?gamma", "?beta"])?;
    let (g, b) = (var(s, "?gamma"), var(s, "?beta"));
    Some(add_op(
        eg,
        Op::Reduce(ReduceOp::LayerNormalization),
        a,
        &[Some(x), Some(g), Some(b)],
    ))
}

fn rmsnorm(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    if !last_axis_kept(eg, s, x, &["?r2"]) {
        return None;
    }
    let a = norm_params(eg, s, x, &["?gamma"])?;
    Some(add_op(
        eg,
        Op::Reduce(ReduceOp::RMSNormalization),
        a,
        &[Some(x), Some(var(s, "?gamma"))],
    ))
}

fn softmax(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    let rank = eg[x].data.ty()?.shape.len() as i64;
    let axes = konst(eg, var(s, "?ax"))?.tensor().to_i64_vec();
    let [axis] = axes.as_slice() else { return None };
    let keep = |r: &str| attrs(eg, s, r).is_some_and(|a| a.int_or("keepdims", 1).ok() == Some(1));
    if !(keep("?m") && keep("?r")) || !(-rank..rank).contains(axis) {
        return None;
    }
    let mut a = Attrs::default();
    a.set("axis", Attr::Int(*axis));
    Some(add_op(eg, Op::Reduce(ReduceOp::Softmax), a, &[Some(x)]))
}

#[derive(Clone, Copy)]
enum Scale {
    Mul,
    Div,
}

/// True when `m` (broadcast to `[.., s, s]`) is a causal additive mask: every `[s, s]`
/// matrix of it (one per batch and head it spells out, as an export specialized to a
/// batch expands it) is 0 on and below the diagonal, at most -1e4 above (exp
/// underflows to exactly 0 in fp32 there).
fn is_causal_mask(m: &Tensor, s: usize) -> bool {
    let sh = m.shape();
    if sh.len() < 2 || sh[sh.len() - 1] != s || sh[sh.len() - 2] != s || sh.len() > 4 {
        return false;
    }
    if s == 0 || !m.dtype().is_float() {
        return false;
    }
    let v = m.to_f64_vec();
    v.chunks(s * s).all(|c| {
        c.len() == s * s
            && (0..s).all(|i| {
                (0..s).all(|j| {
                    if j <= i {
                        c[i * s + j] == 0.0
                    } else {
                        c[i * s + j] <= -1e4
                    }
                })
            })
    })
}

fn attention(eg: &mut Egraph, s: &Subst, scale: Scale, masked: bool) -> Option<Id> {
    let sm = attrs(eg, s, "?sm")?;
    let (q, kt, v) = (var(s, "?qq"), var(s, "?kt"), var(s, "?v"));
    let (qs, ks, vs) = (shape(eg, q)?, shape(eg, kt)?, shape(eg, v)?);
    if qs.len() != 4 || ks.len() != 4 || vs.len() != 4 || !dtype(eg, q)?.is_float() {
        return None;
    }
    let axis = sm.int_or("axis", -1).ok()?;
    if axis != -1 && axis != 3 {
        return None;
    }
    let c = scalar_of(eg, var(s, "?c"))?;
    let c = match scale {
        Scale::Mul => c,
        Scale::Div => 1.0 / c,
    };
    let mut a = Attrs::default();
    a.set("scale", Attr::Float(c as f32));
    let mut mask = None;
    if masked {
        let m = var(s, "?mask");
        let ms = shape(eg, m)?;
        let (sq, skv) = (qs[2], ks[3]);
        match konst(eg, m) {
            Some(t) if sq == skv && is_causal_mask(&t.decoded(), sq) => {
                a.set("is_causal", Attr::Int(1));
            }
            _ => {
                // The kernels broadcast masks of rank 1 to 4.
                if ms.is_empty() || ms.len() > 4 || !dtype(eg, m)?.is_float() {
                    return None;
                }
                mask = Some(m);
            }
        }
    }
    // K from Kᵀ: swap the last two axes back (composes with the export's transpose).
    let mut p = Attrs::default();
    p.set("perm", Attr::Ints(vec![0, 1, 3, 2]));
    let k = add_op(eg, Op::Shape(ShapeOp::Transpose), p, &[Some(kt)]);
    Some(add_op(
        eg,
        Op::Attention(AttentionOp::Attention),
        a,
        &[Some(q), Some(k), Some(v), mask],
    ))
}

/// Attention for a matched softmax guarded to 0 on NaN rows, in f32 (a half-precision
/// graph rounds each step where the fused op rounds once: ONNX's own expanded
/// `Attention` functions, in fp16, are held to the step-by-step result).
fn attention_nan_guard(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    if scalar_of(eg, var(s, "?z")) != Some(0.0) || dtype(eg, var(s, "?qq"))? != gopt_ir::DType::F32
    {
        return None;
    }
    attention(eg, s, Scale::Mul, true)
}

/// `Mul(MatMul(a, b), c₁·c₂)` for a matched `MatMul(Mul(a, c₁), Mul(b, c₂))` of f32
/// scalars (one rounding fewer than scaling each operand: below f32's own error, which
/// a half type's would not be).
fn scaled_operands(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let (c1, c2) = (scalar_of(eg, var(s, "?c1"))?, scalar_of(eg, var(s, "?c2"))?);
    let dt = dtype(eg, var(s, "?a"))?;
    if dt != gopt_ir::DType::F32
        || dtype(eg, var(s, "?b"))? != dt
        || dtype(eg, var(s, "?c1"))? != dt
    {
        return None;
    }
    let m = attrs(eg, s, "?m")?;
    let mm = add_op(
        eg,
        Op::Nn(gopt_ir::ops::NnOp::MatMul),
        m,
        &[Some(var(s, "?a")), Some(var(s, "?b"))],
    );
    let c = add_const(eg, Tensor::from_f64s(dt, &[], &[c1 * c2]).ok()?);
    Some(add_op(
        eg,
        Op::Elementwise(ElementwiseOp::Mul),
        Attrs::default(),
        &[Some(mm), Some(c)],
    ))
}

/// `Mul(Transpose(x), c)` for a matched `Transpose(Mul(x, c))` of a float scalar `c`.
fn transpose_scalar(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let c = var(s, "?c");
    if scalar_of(eg, c).is_none()
        || shape(eg, c)?.iter().product::<usize>() != 1
        || shape(eg, c)?.len() > 1
    {
        return None;
    }
    let t = attrs(eg, s, "?t")?;
    let x = add_op(eg, Op::Shape(ShapeOp::Transpose), t, &[Some(var(s, "?x"))]);
    Some(add_op(
        eg,
        Op::Elementwise(ElementwiseOp::Mul),
        Attrs::default(),
        &[Some(x), Some(c)],
    ))
}

/// The class of an existing op node with these children (attribute class first), if the
/// e-graph holds one.
pub(super) fn lookup(eg: &Egraph, op: ShapeOp, children: &[Id]) -> Option<Id> {
    let ch = children.iter().map(|&c| eg.find(c)).collect();
    eg.lookup(Term::Op(OpKey::one(Op::Shape(op)), ch))
}

/// How many times `repeat_kv` repeats the heads of `x` (`[b, h, s, d]`) in the matched
/// `Reshape(Expand(Unsqueeze(x, axes), shape), target)` whose variables end in `t`
/// (`?uk ?xk ?ek ?sk ?rk ?tk` for `t = "k"`): the unsqueeze adds an axis after the heads,
/// the expand repeats it `n` times and the reshape merges it into the heads, so head
/// `i` of the result is head `i / n` of `x`.
fn repeat_kv_factor(eg: &Egraph, s: &Subst, x: Id, t: &str) -> Option<usize> {
    let v = |p: &str| var(s, &format!("?{p}{t}"));
    let [b, h, sq, d] = shape(eg, x)?[..] else {
        return None;
    };
    let un = lookup(eg, ShapeOp::Unsqueeze, &[v("u"), x, v("x")])?;
    let ex = lookup(eg, ShapeOp::Expand, &[v("e"), un, v("s")])?;
    let re = lookup(eg, ShapeOp::Reshape, &[v("r"), ex, v("t")])?;
    let n = *shape(eg, ex)?.get(2)?;
    let ok = shape(eg, un)? == [b, h, 1, sq, d]
        && shape(eg, ex)? == [b, h, n, sq, d]
        && shape(eg, re)? == [b, h * n, sq, d];
    ok.then_some(n)
}

fn attention_gqa(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let (k, v) = (var(s, "?k"), var(s, "?v"));
    let n = repeat_kv_factor(eg, s, k, "k")?;
    if n < 2 || repeat_kv_factor(eg, s, v, "v")? != n {
        return None;
    }
    let (ks, vs) = (shape(eg, k)?, shape(eg, v)?);
    if ks[..3] != vs[..3] {
        return None;
    }
    let mut a = attrs(eg, s, "?a")?;
    if a.0.contains_key("kv_num_heads") {
        a.set("kv_num_heads", Attr::Int(ks[1] as i64));
    }
    let m = var(s, "?m");
    let m = (!is_absent(eg, m)).then_some(m);
    Some(add_op(
        eg,
        Op::Attention(AttentionOp::Attention),
        a,
        &[Some(var(s, "?q")), Some(k), Some(v), m],
    ))
}

/// The matched Slice `?s{k}` of data `[.., d]` (rank `rank`) takes `[from, to)` of the
/// last axis with step 1 (an end past `d` when `to` is `d`: exporters' "to the end").
pub(super) fn slices_last(
    eg: &Egraph,
    s: &Subst,
    k: u8,
    (rank, d): (usize, i64),
    (from, to): (i64, i64),
) -> bool {
    let c = |p: &str| konst(eg, var(s, &format!("?{p}{k}"))).map(|t| t.tensor().to_i64_vec());
    let last = rank as i64 - 1;
    let axis_ok = matches!(c("ax").as_deref(), Some([a]) if *a == -1 || *a == last);
    let step_ok = matches!(c("sp").as_deref(), Some([1]));
    let start_ok = c("st").as_deref() == Some(&[from][..]);
    let end_ok = match c("en").as_deref() {
        Some([e]) => *e == to || (to == d && *e > d),
        _ => false,
    };
    axis_ok && step_ok && start_ok && end_ok
}

/// Merges every FusedMatMul that reads the same input with the same attributes, no
/// residual and constant 2-D weights of the same K into one GEMM over the concatenated
/// weights; each member becomes a slice of its output.
fn sibling_matmul(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    let (x, f) = (var(s, "?x"), var(s, "?f"));
    let attrs_f = attrs_of(eg, f)?.clone();
    if attrs_f.int_or("trans_b", 0).ok()? != 0 {
        return None;
    }
    let key = OpKey::one(Op::Fused(FusedOp::FusedMatMul));
    let mut members: Vec<(Id, Id, Option<Id>)> = Vec::new();
    let parents: Vec<Id> = eg[x].parents().collect();
    for p in parents {
        let p = eg.find(p);
        if members.iter().any(|m| m.0 == p) {
            continue;
        }
        for n in &eg[p].nodes {
            let Term::Op(k, ch) = n else { continue };
            if *k != key
                || ch.len() != 5
                || eg.find(ch[0]) != eg.find(f)
                || eg.find(ch[1]) != eg.find(x)
            {
                continue;
            }
            if !is_absent(eg, ch[4]) || !is_const(eg, ch[2]) {
                continue;
            }
            let b = (!is_absent(eg, ch[3])).then_some(ch[3]);
            if b.is_some_and(|b| !is_const(eg, b)) {
                continue;
            }
            members.push((p, ch[2], b));
            break;
        }
    }
    // A GEMM whose slices already stand for other candidates is their merge (made by
    // this rule or reached through casts moved into the slices), not a sibling.
    let all = members.clone();
    members.retain(|m| !is_merge_of(eg, m.0, &all));
    // The same weight twice is one GEMM seen with and without its bias (the bare form
    // is a child of the biased one): keep the biased form only.
    let weights: Vec<Id> = members.iter().map(|m| eg.find(m.1)).collect();
    let mut keep = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let dup_with_bias = members.iter().enumerate().any(|(j, o)| {
            j != i
                && weights[j] == weights[i]
                && (o.2.is_some() > m.2.is_some() || (o.2.is_some() == m.2.is_some() && j < i))
        });
        if !dup_with_bias {
            keep.push(*m);
        }
    }
    let mut members = keep;
    if members.len() < 2 {
        return None;
    }
    members.sort_by_key(|m| m.0);
    let me = eg.find(id);
    if members[0].0 != me {
        return None;
    }
    let ws: Vec<_> = members
        .iter()
        .map(|m| konst(eg, m.1))
        .collect::<Option<_>>()?;
    let dt = ws[0].dtype();
    let k = *ws[0].shape().first()?;
    if ws
        .iter()
        .any(|w| w.rank() != 2 || w.shape()[0] != k || w.dtype() != dt)
    {
        return None;
    }
    let ns: Vec<usize> = ws.iter().map(|w| w.shape()[1]).collect();
    let present: Vec<_> = members
        .iter()
        .filter_map(|m| m.2)
        .map(|b| konst(eg, b))
        .collect::<Option<_>>()?;
    let bdt = match present.is_empty() {
        true => dt,
        false => bias_dtype(&present)?,
    };
    let mut biases = Vec::with_capacity(members.len());
    for (i, m) in members.iter().enumerate() {
        let b = match m.2.and_then(|b| konst(eg, b)) {
            Some(b) if b.len() == ns[i] => b.cast(bdt).reshape(&[ns[i]]).ok()?,
            Some(_) => return None,
            None => Tensor::zeros(bdt, &[ns[i]]).into(),
        };
        biases.push(b);
    }
    let wcat = super::concat(&ws, 1)?;
    let any_bias = members.iter().any(|m| m.2.is_some());
    let w = add_const(eg, wcat);
    let b = if any_bias {
        Some(add_const(eg, super::concat(&biases, 0)?))
    } else {
        None
    };
    let merged = add_op(
        eg,
        Op::Fused(FusedOp::FusedMatMul),
        attrs_f,
        &[Some(x), Some(w), b, None],
    );
    if eg[merged].data.error.is_some() {
        return None;
    }
    let classes: Vec<Id> = members.iter().map(|m| m.0).collect();
    slice_members(eg, merged, &classes, &ns)
}

/// Each of `classes` (in order, `ns[i]` columns each) as a slice of the last axis of
/// `merged`, merged into its class but the first, whose slice is returned (the rule's
/// result); the group is recorded for extraction's group moves. `None` when a slice's
/// type differs from its member's.
pub(super) fn slice_members(
    eg: &mut Egraph,
    merged: Id,
    classes: &[Id],
    ns: &[usize],
) -> Option<Id> {
    let mut off = 0i64;
    let mut mine = None;
    let mut group = Vec::new();
    for (i, &class) in classes.iter().enumerate() {
        let st = add_const(eg, Tensor::from_i64s(&[off]));
        let en = add_const(eg, Tensor::from_i64s(&[off + ns[i] as i64]));
        let ax = add_const(eg, Tensor::from_i64s(&[-1]));
        let sl = add_op(
            eg,
            Op::Shape(ShapeOp::Slice),
            Attrs::default(),
            &[Some(merged), Some(st), Some(en), Some(ax)],
        );
        off += ns[i] as i64;
        if eg[sl].data.ty() != eg[class].data.ty() {
            return None;
        }
        let term = eg[sl]
            .nodes
            .iter()
            .find(|n| matches!(n, Term::Op(..)))
            .cloned()?;
        group.push((class, term));
        if i == 0 {
            mine = Some(sl);
        } else {
            eg.union(class, sl);
        }
    }
    eg.analysis.groups.push(group);
    mine
}

/// True when a class of `members` other than `p` holds a slice of `p`.
pub(super) fn is_merge_of(eg: &Egraph, p: Id, members: &[(Id, Id, Option<Id>)]) -> bool {
    let slice = Op::Shape(ShapeOp::Slice);
    members.iter().any(|m| {
        m.0 != p
            && eg[m.0].nodes.iter().any(|n| match n {
                Term::Op(k, ch) => k.0 == slice && ch.get(1).is_some_and(|&d| eg.find(d) == p),
                Term::Out(_) | Term::Leaf(_) => false,
            })
    })
}

/// The dtype of the merged bias: the members' own (biases stay in the epilogue's type
/// when precision rules lower the weights), or f32 for a mix of f32/f16/bf16 (exact
/// widening); `None` for another mix.
fn bias_dtype(biases: &[gopt_ir::Const]) -> Option<gopt_ir::DType> {
    use gopt_ir::DType;
    let first = biases.first()?.dtype();
    if biases.iter().all(|b| b.dtype() == first) {
        return Some(first);
    }
    let narrow = |d: DType| matches!(d, DType::F32 | DType::F16 | DType::BF16);
    biases
        .iter()
        .all(|b| narrow(b.dtype()))
        .then_some(DType::F32)
}
