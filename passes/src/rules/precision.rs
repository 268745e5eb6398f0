//! Precision: with `--precision bf16|fp16`, the ops on the allow list compute in the low
//! type on tensor cores with fp32 accumulation (the IR's fused ops round once, at the
//! end), their weights cast once at compile time; everything else keeps fp32.
//!
//! - Allow (low-precision inputs, fp32 accumulation): `FusedMatMul`, `MatMul` (but for
//!   outer products, whose reduction has length 1: rotary angles `inv_freq ⊗ positions`),
//!   `FusedConv` except grouped/depthwise ones and those with under 8 input channels
//!   (CUDA cores or too short a reduction: no tensor-core gain),
//!   `Attention` (its softmax runs in fp32 inside the kernel).
//! - Deny (always fp32): softmax, LayerNorm, RMSNorm and every other normalization,
//!   reductions, exp/log/pow/erf/tanh and other element-wise math, biases and residuals
//!   (they are added in the fp32 epilogue), except a convolution's residual added
//!   before its activation (ResNet's skip stream), read in the low type.
//!
//! The op that computes a graph output stays fp32 (standard mixed-precision practice:
//! its rounding would go straight into the result).
//!
//! Graph inputs and outputs keep their declared types: a rewrite never changes a
//! class's type, so a lowered op is wrapped in casts or writes fp32 from its epilogue.
//! Casts move through data movement (transpose, reshape, slice: exact, each element
//! rounds the same wherever it moves) toward where they cancel or fold, so Q/K/V slices
//! of a fused GEMM carry the low type and the GEMM writes it. Cast pairs that
//! round-trip exactly (low → fp32 → low) cancel, and a cast to the low
//! type of a fused op's fp32 output becomes that op writing the low type directly (one
//! rounding either way). Tolerance: relative L2 error 2e-2 against fp32 (bf16 keeps 8
//! mantissa bits; fp16 10 but a narrower range).

use super::{add_op, attrs, dtype, rule, var, Rule};
use crate::analysis::{is_absent, Egraph};
use egg::{Id, Subst};
use gopt_ir::ops::{ElementwiseOp, FusedOp, ShapeOp};
use gopt_ir::{Attr, Attrs, DType, Op};

/// The precision table for low type `low` (bf16 or f16).
pub fn rules(low: DType) -> Vec<Rule> {
    let (mm, conv, att, cast_out): (super::Build, super::Build, super::Build, super::Build) =
        match low {
            DType::F16 => (
                |e, id, s| lower_fused(e, id, s, DType::F16, FusedOp::FusedMatMul),
                |e, id, s| lower_fused(e, id, s, DType::F16, FusedOp::FusedConv),
                |e, _, s| lower_attention(e, s, DType::F16),
                |e, _, s| cast_output(e, s, DType::F16),
            ),
            _ => (
                |e, id, s| lower_fused(e, id, s, DType::BF16, FusedOp::FusedMatMul),
                |e, id, s| lower_fused(e, id, s, DType::BF16, FusedOp::FusedConv),
                |e, _, s| lower_attention(e, s, DType::BF16),
                |e, _, s| cast_output(e, s, DType::BF16),
            ),
        };
    let plain: super::Build = match low {
        DType::F16 => |e, _, s| lower_matmul(e, s, DType::F16),
        _ => |e, _, s| lower_matmul(e, s, DType::BF16),
    };
    vec![
        // FusedMatMul(a, w, ..) ≈ FusedMatMul(low(a), low(w), .., output fp32)
        rule("precision-matmul", "(FusedMatMul ?f ?a ?w ?b ?r)", mm),
        // MatMul(a, b) ≈ FusedMatMul(low(a), low(b), output fp32)
        rule("precision-matmul-plain", "(MatMul ?f ?a ?w)", plain),
        // FusedConv(x, w, ..) ≈ FusedConv(low(x), low(w), .., output fp32)
        rule("precision-conv", "(FusedConv ?f ?a ?w ?b ?r)", conv),
        // Attention(q, k, v, m) ≈ fp32(Attention(low(q), low(k), low(v), m))
        rule("precision-attention", "(Attention ?f ?q ?k ?v ?m)", att),
        // low(fp32(x)) = x for x in the low type (exact round trip)
        rule("precision-cast-pair", "(Cast ?a (Cast ?b ?x))", cast_pair),
        // cast(transpose(x)) = transpose(cast(x)): casts move to where they cancel or
        // fold into a GEMM's output, and data movement carries the narrower type.
        rule(
            "precision-cast-transpose",
            "(Cast ?c (Transpose ?f ?x))",
            |e, _, s| cast_through(e, s, Op::Shape(ShapeOp::Transpose), &[]),
        ),
        // cast(reshape(x, s)) = reshape(cast(x), s)
        rule(
            "precision-cast-reshape",
            "(Cast ?c (Reshape ?f ?x ?s))",
            |e, _, s| cast_through(e, s, Op::Shape(ShapeOp::Reshape), &["?s"]),
        ),
        // cast(slice(x, b, e, a)) = slice(cast(x), b, e, a)
        rule(
            "precision-cast-slice",
            "(Cast ?c (Slice ?f ?x ?s ?e ?a))",
            |e, _, s| cast_through(e, s, Op::Shape(ShapeOp::Slice), &["?s", "?e", "?a"]),
        ),
        // cast(relu(x)) = relu(cast(x)): rounding is monotonic and keeps 0
        rule(
            "precision-cast-relu",
            "(Cast ?c (Relu ?f ?x))",
            |e, _, s| cast_through(e, s, Op::Elementwise(ElementwiseOp::Relu), &[]),
        ),
        // cast(split(x, s)[k]) = split(cast(x), s)[k]: the Q/K/V split of a fused GEMM
        rule(
            "precision-cast-split",
            "(Cast ?c (out ?k (Split:3 ?f ?x ?s)))",
            |e, _, s| cast_split(e, s, 3),
        ),
        // low(FusedConv(.., output fp32)) = FusedConv(.., output low)
        rule(
            "precision-conv-output",
            "(Cast ?c (FusedConv ?f ?a ?w ?b ?r))",
            conv_out,
        ),
        // low(FusedMatMul(.., output fp32)) = FusedMatMul(.., output low)
        rule(
            "precision-matmul-output",
            "(Cast ?c (FusedMatMul ?f ?a ?w ?b ?r))",
            cast_out,
        ),
        // act(conv(low(x), low(w)) + b + r) ≈ act(conv(low(x), low(w)) + b + low(r)):
        // ResNet's skip stream read in the low type, so the conv that computes it
        // writes that type (precision-conv-output) and no fp32 copy is kept
        rule(
            "precision-conv-residual",
            "(FusedConv ?f ?a ?w ?b ?r)",
            match low {
                DType::F16 => |e, _, s| residual_low(e, s, DType::F16),
                _ => |e, _, s| residual_low(e, s, DType::BF16),
            },
        ),
    ]
}

/// `FusedConv(a, w, b, low(r))` for a matched convolution with low-type operands that
/// adds an fp32 residual (not a constant) before its activation.
fn residual_low(eg: &mut Egraph, s: &Subst, low: DType) -> Option<Id> {
    let (a, r) = (var(s, "?a"), var(s, "?r"));
    if is_absent(eg, r) || dtype(eg, a)? != low || dtype(eg, r)? != DType::F32 {
        return None;
    }
    let f = attrs(eg, s, "?f")?;
    if super::is_const(eg, r) || f.str_or("epilogue", "").ok()? != "bias_residual_act" {
        return None;
    }
    let lr = cast(eg, r, low);
    let b = opt(eg, var(s, "?b"));
    Some(add_op(
        eg,
        Op::Fused(FusedOp::FusedConv),
        f,
        &[Some(a), Some(var(s, "?w")), b, Some(lr)],
    ))
}

fn cast(eg: &mut Egraph, x: Id, to: DType) -> Id {
    let mut a = Attrs::default();
    a.set("to", Attr::DType(to));
    add_op(eg, Op::Elementwise(ElementwiseOp::Cast), a, &[Some(x)])
}

fn opt(eg: &Egraph, id: Id) -> Option<Id> {
    (!is_absent(eg, id)).then_some(id)
}

fn lower_fused(eg: &mut Egraph, id: Id, s: &Subst, low: DType, op: FusedOp) -> Option<Id> {
    if produces_output(eg, id) {
        return None;
    }
    let (a, w) = (var(s, "?a"), var(s, "?w"));
    if dtype(eg, a)? != DType::F32 || dtype(eg, w)? != DType::F32 {
        return None;
    }
    if op == FusedOp::FusedMatMul && outer_product(eg, a) {
        return None;
    }
    let mut f = attrs(eg, s, "?f")?;
    // Depthwise convolutions run on CUDA cores in fp32 either way: rounding their
    // inputs would cost accuracy for no tensor-core gain.
    // Neither do convolutions with fewer than 8 input channels (an image's 3): their
    // reduction is too short for tensor-core tiles.
    if op == FusedOp::FusedConv {
        let ws = super::shape(eg, w)?;
        if f.int_or("group", 1).ok()? > 1 || ws.get(1).is_none_or(|&c| c < 8) {
            return None;
        }
    }
    let out = f.dtype("output_dtype").ok()?.unwrap_or(DType::F32);
    f.set("output_dtype", Attr::DType(out));
    let (la, lw) = (cast(eg, a, low), cast(eg, w, low));
    let (b, r) = (opt(eg, var(s, "?b")), opt(eg, var(s, "?r")));
    Some(add_op(eg, Op::Fused(op), f, &[Some(la), Some(lw), b, r]))
}

/// The op computing a graph output stays fp32: its rounding would go straight into the
/// result, with no later fp32 op to average it out.
fn produces_output(eg: &Egraph, id: Id) -> bool {
    let c = eg.find(id);
    eg.analysis.roots.iter().any(|r| eg.find(*r) == c)
}

/// Whether a product of `a` by something has a reduction of length 1 (an outer
/// product): no tensor-core gain, and exporters compute rotary angles this way
/// (`inv_freq ⊗ positions`), where rounding the positions to 8 bits would move every
/// position past 256.
fn outer_product(eg: &Egraph, a: Id) -> bool {
    super::shape(eg, a).is_some_and(|s| s.last() == Some(&1))
}

fn lower_matmul(eg: &mut Egraph, s: &Subst, low: DType) -> Option<Id> {
    let (a, w) = (var(s, "?a"), var(s, "?w"));
    if dtype(eg, a)? != DType::F32 || dtype(eg, w)? != DType::F32 || outer_product(eg, a) {
        return None;
    }
    let mut f = Attrs::default();
    f.set("output_dtype", Attr::DType(DType::F32));
    let (la, lw) = (cast(eg, a, low), cast(eg, w, low));
    Some(add_op(
        eg,
        Op::Fused(FusedOp::FusedMatMul),
        f,
        &[Some(la), Some(lw), None, None],
    ))
}

fn lower_attention(eg: &mut Egraph, s: &Subst, low: DType) -> Option<Id> {
    let (q, k, v) = (var(s, "?q"), var(s, "?k"), var(s, "?v"));
    if dtype(eg, q)? != DType::F32 {
        return None;
    }
    let mut f = attrs(eg, s, "?f")?;
    // The softmax stays fp32 (the policy's deny list): said on the node, so that its
    // reference semantics (ONNX's softmax_precision) are what the kernels compute.
    if f.get("softmax_precision").is_none() {
        f.set("softmax_precision", Attr::DType(DType::F32));
    }
    let (lq, lk, lv) = (cast(eg, q, low), cast(eg, k, low), cast(eg, v, low));
    let m = opt(eg, var(s, "?m"));
    let att = add_op(
        eg,
        Op::Attention(gopt_ir::ops::AttentionOp::Attention),
        f,
        &[Some(lq), Some(lk), Some(lv), m],
    );
    Some(cast(eg, att, DType::F32))
}

fn cast_pair(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let x = var(s, "?x");
    let outer = attrs(eg, s, "?a")?.dtype("to").ok()??;
    let inner = attrs(eg, s, "?b")?.dtype("to").ok()??;
    let xd = dtype(eg, x)?;
    let widens = matches!(
        (xd, inner),
        (DType::BF16 | DType::F16, DType::F32 | DType::F64)
    );
    (xd == outer && widens).then_some(x)
}

/// `op(cast(x), rest..)` for a matched `cast(op(x, rest..))`: casts commute with data
/// movement (exactly: each element is rounded the same way wherever it moves).
fn cast_through(eg: &mut Egraph, s: &Subst, op: Op, rest: &[&str]) -> Option<Id> {
    let to = attrs(eg, s, "?c")?.dtype("to").ok()??;
    let f = attrs(eg, s, "?f")?;
    let x = cast(eg, var(s, "?x"), to);
    let mut inputs = vec![Some(x)];
    inputs.extend(rest.iter().map(|v| opt(eg, var(s, v))));
    Some(add_op(eg, op, f, &inputs))
}

/// `split(cast(x), s)[k]` for a matched `cast(split(x, s)[k])` (a split of `n` outputs).
fn cast_split(eg: &mut Egraph, s: &Subst, n: u32) -> Option<Id> {
    let to = attrs(eg, s, "?c")?.dtype("to").ok()??;
    let f = attrs(eg, s, "?f")?;
    let x = cast(eg, var(s, "?x"), to);
    let a = eg.analysis.intern_attrs(f);
    let leaf = eg.add(crate::lang::Term::Leaf(a));
    let sizes = var(s, "?s");
    let split = eg.add(crate::lang::Term::Op(
        crate::lang::OpKey(Op::Shape(ShapeOp::Split), n),
        vec![leaf, x, sizes],
    ));
    Some(eg.add(crate::lang::Term::Out([var(s, "?k"), split])))
}

/// `FusedConv(.., output low)` for a matched cast to the low type of an fp32 output.
fn conv_out(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let to = attrs(eg, s, "?c")?.dtype("to").ok()??;
    let mut f = attrs(eg, s, "?f")?;
    let x = dtype(eg, var(s, "?a"))?;
    if !matches!(to, DType::BF16 | DType::F16) || x != to {
        return None;
    }
    if f.dtype("output_dtype").ok()? != Some(DType::F32) {
        return None;
    }
    f.set("output_dtype", Attr::DType(to));
    let (b, r) = (opt(eg, var(s, "?b")), opt(eg, var(s, "?r")));
    Some(add_op(
        eg,
        Op::Fused(FusedOp::FusedConv),
        f,
        &[Some(var(s, "?a")), Some(var(s, "?w")), b, r],
    ))
}

fn cast_output(eg: &mut Egraph, s: &Subst, low: DType) -> Option<Id> {
    let to = attrs(eg, s, "?c")?.dtype("to").ok()??;
    let mut f = attrs(eg, s, "?f")?;
    if to != low || f.dtype("output_dtype").ok()? != Some(DType::F32) {
        return None;
    }
    f.set("output_dtype", Attr::DType(low));
    let (b, r) = (opt(eg, var(s, "?b")), opt(eg, var(s, "?r")));
    Some(add_op(
        eg,
        Op::Fused(FusedOp::FusedMatMul),
        f,
        &[Some(var(s, "?a")), Some(var(s, "?w")), b, r],
    ))
}
