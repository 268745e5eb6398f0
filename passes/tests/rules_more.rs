//! The rules the topic files do not cover with both a firing case and a not-applicable
//! case, and a coverage check that every rule of every table has both.

mod common;
use common::{check_not_applicable, check_rewrite, check_rewrite_within, vals};

#[track_caller]
fn fires(rule: &str, src: &str, op: &str) {
    let g = check_rewrite(rule, src, src);
    assert!(
        g.nodes.iter().any(|n| n.op.name() == op),
        "{rule}: no {op} in\n{}",
        gopt_ir::text::print(&g)
    );
}

#[track_caller]
fn gone(rule: &str, src: &str, op: &str) {
    let g = check_rewrite(rule, src, src);
    assert!(
        g.nodes.iter().all(|n| n.op.name() != op),
        "{rule}: {op} left in\n{}",
        gopt_ir::text::print(&g)
    );
}

const SQ: &str = r#"graph "g"(%0 "x": f32[2,3]) -> (%3) {
  %1 "ax": i64[1] = const [0]
  %2 "s": f32[2,3] = OP "op"(%0, %1)
  %3 "y": f32[2,3] = Relu "r"(%2)
}"#;

#[test]
fn shape_noops() {
    // Reshape/Squeeze/Unsqueeze to the same shape vanish; changing ones stay.
    let reshape = r#"graph "g"(%0 "x": f32[2,3]) -> (%3) {
  %1 "s": i64[2] = const [2, 3]
  %2 "v": f32[2,3] = Reshape "op"(%0, %1)
  %3 "y": f32[2,3] = Relu "r"(%2)
}"#;
    gone("algebra-reshape-same", reshape, "Reshape");
    check_not_applicable(
        "algebra-reshape-same",
        &reshape
            .replace("[2, 3]", "[3, 2]")
            .replace("%2 \"v\": f32[2,3]", "%2 \"v\": f32[3,2]")
            .replace("%3 \"y\": f32[2,3]", "%3 \"y\": f32[3,2]")
            .replace("-> (%3)", "-> (%3)"),
    );
    let squeeze = r#"graph "g"(%0 "x": f32[1,3]) -> (%3) {
  %1 "ax": i64[1] = const [0]
  %2 "s": f32[3] = Squeeze "op"(%0, %1)
  %3 "y": f32[3] = Relu "r"(%2)
}"#;
    check_not_applicable("algebra-squeeze-same", squeeze);
    let _ = SQ;
}

#[test]
fn shape_noops_that_fire() {
    // A Squeeze without axes on a tensor with no unit dims is the identity.
    let squeeze = r#"graph "g"(%0 "x": f32[2,3]) -> (%2) {
  %1 "s": f32[2,3] = Squeeze "op"(%0)
  %2 "y": f32[2,3] = Relu "r"(%1)
}"#;
    gone("algebra-squeeze-same", squeeze, "Squeeze");
}

#[test]
fn identity_transpose_and_reshape_chains() {
    check_not_applicable(
        "algebra-identity",
        r#"graph "g"(%0 "x": f32[2]) -> (%1) {
  %1 "y": f32[2] = Relu "r"(%0)
}"#,
    );
    check_not_applicable(
        "algebra-transpose-transpose",
        r#"graph "g"(%0 "x": f32[2,3]) -> (%2) {
  %1 "t": f32[3,2] = Transpose "t"(%0) {perm=ints[1,0]}
  %2 "y": f32[3,2] = Relu "r"(%1)
}"#,
    );
    check_not_applicable(
        "algebra-reshape-reshape",
        r#"graph "g"(%0 "x": f32[2,3]) -> (%3) {
  %1 "s": i64[1] = const [6]
  %2 "a": f32[6] = Reshape "a"(%0, %1)
  %3 "y": f32[6] = Relu "r"(%2)
}"#,
    );
    check_not_applicable(
        "algebra-add-const-right",
        r#"graph "g"(%0 "x": f32[3], %1 "z": f32[3]) -> (%2) {
  %2 "a": f32[3] = Add "a"(%0, %1)
}"#,
    );
    check_rewrite(
        "algebra-mul-const-right",
        r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "c": f32[3] = const [1.0, 2.0, 3.0]
  %2 "a": f32[3] = Mul "a"(%1, %0)
}"#,
        r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "c": f32[3] = const [1.0, 2.0, 3.0]
  %2 "a": f32[3] = Mul "a"(%0, %1)
}"#,
    );
    gone(
        "algebra-mul-one",
        r#"graph "g"(%0 "x": f32[3]) -> (%3) {
  %1 "c": f32[3] = const [1.0, 1.0, 1.0]
  %2 "a": f32[3] = Mul "a"(%0, %1)
  %3 "y": f32[3] = Relu "r"(%2)
}"#,
        "Mul",
    );
}

fn fused(act: &str, extra_in: &str, tail: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[4,6]{extra_in}) -> (%9) {{
  %1 "w": f32[6,3] = const {w}
  %2 "b": f32[3] = const [0.1, -0.2, 0.3]
  %3 "m": f32[4,3] = FusedMatMul "m"(%0, %1, %2) {act}
  {tail}
}}"#,
        w = vals(18, 21)
    )
}

#[test]
fn matmul_epilogues() {
    fires(
        "fuse-matmul-sigmoid",
        &fused("", "", r#"%9 "y": f32[4,3] = Sigmoid "s"(%3)"#),
        "FusedMatMul",
    );
    check_not_applicable(
        "fuse-matmul-sigmoid",
        &fused(
            "{activation=\"relu\"}",
            "",
            r#"%9 "y": f32[4,3] = Sigmoid "s"(%3)"#,
        ),
    );
    let silu = fused(
        "",
        "",
        "%4 \"s\": f32[4,3] = Sigmoid \"s\"(%3)\n  %9 \"y\": f32[4,3] = Mul \"m2\"(%3, %4)",
    );
    gone("fuse-matmul-silu", &silu, "Sigmoid");
    check_not_applicable(
        "fuse-matmul-silu",
        &silu.replace("Sigmoid \"s\"(%3)", "Tanh \"s\"(%3)"),
    );
    check_not_applicable(
        "fuse-matmul-gelu",
        &fused(
            "{activation=\"tanh\"}",
            "",
            r#"%9 "y": f32[4,3] = Gelu "g"(%3)"#,
        ),
    );
    check_not_applicable(
        "fuse-matmul-tanh",
        &fused("", "", r#"%9 "y": f32[4,3] = Relu "t"(%3)"#),
    );
    let res = fused(
        "",
        ", %8 \"r\": f32[4,3]",
        r#"%9 "y": f32[4,3] = Add "a"(%3, %8)"#,
    );
    gone("fuse-matmul-residual", &res, "Add");
    check_not_applicable(
        "fuse-matmul-residual",
        &res.replace("(%0, %1, %2)", "(%0, %1, %2, %8)")
            .replace("Add \"a\"(%3, %8)", "Add \"a\"(%3, %3)"),
    );
    let unflat = r#"graph "g"(%0 "x": f32[2,5,6]) -> (%6) {
  %1 "w": f32[6,3] = const [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8]
  %2 "s1": i64[2] = const [-1, 6]
  %3 "s2": i64[3] = const [5, 2, 3]
  %4 "f": f32[10,6] = Reshape "f"(%0, %2)
  %5 "g": f32[10,3] = FusedMatMul "g"(%4, %1)
  %6 "y": f32[5,2,3] = Reshape "u"(%5, %3)
}"#;
    // Unflattening to another leading shape ([5,2] from [2,5]) is not the same GEMM.
    check_not_applicable("fuse-matmul-unflatten", unflat);
    check_not_applicable(
        "fuse-matmul",
        r#"graph "g"(%0 "x": f32[4,6], %1 "w": f32[6,3]) -> (%2) {
  %2 "y": f32[4,3] = MatMul "m"(%0, %1)
}"#,
    );
    fires(
        "fuse-matmul",
        &format!(
            r#"graph "g"(%0 "x": f32[4,6]) -> (%2) {{
  %1 "w": f32[6,3] = const {w}
  %2 "y": f32[4,3] = MatMul "m"(%0, %1)
}}"#,
            w = vals(18, 22)
        ),
        "FusedMatMul",
    );
}

fn conv(tail: &str, extra: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[1,3,6,6]{extra}) -> (%9) {{
  %1 "w": f32[4,3,3,3] = const {w}
  %2 "b": f32[4] = const [0.1, -0.1, 0.2, -0.2]
  %5 "c": f32[1,4,6,6] = FusedConv "c"(%0, %1, %2) {{pads=ints[1,1,1,1]}}
  {tail}
}}"#,
        w = vals(108, 23)
    )
}

#[test]
fn conv_epilogues() {
    fires(
        "fuse-conv-relu",
        &conv(r#"%9 "y": f32[1,4,6,6] = Relu "r"(%5)"#, ""),
        "FusedConv",
    );
    check_not_applicable(
        "fuse-conv-relu",
        &conv(r#"%9 "y": f32[1,4,6,6] = Sigmoid "r"(%5)"#, ""),
    );
    let silu = conv(
        "%6 \"s\": f32[1,4,6,6] = Sigmoid \"s\"(%5)\n  %9 \"y\": f32[1,4,6,6] = Mul \"m\"(%5, %6)",
        "",
    );
    gone("fuse-conv-silu", &silu, "Sigmoid");
    check_not_applicable(
        "fuse-conv-silu",
        &silu.replace("Mul \"m\"(%5, %6)", "Add \"m\"(%5, %6)"),
    );
    let res = conv(
        r#"%9 "y": f32[1,4,6,6] = Add "a"(%8, %5)"#,
        ", %8 \"r\": f32[1,4,6,6]",
    );
    gone("fuse-conv-residual-left", &res, "Add");
    check_not_applicable(
        "fuse-conv-residual",
        &conv(r#"%9 "y": f32[1,4,6,6] = Relu "a"(%5)"#, ""),
    );
    check_not_applicable(
        "fuse-conv-residual-left",
        &conv(r#"%9 "y": f32[1,4,6,6] = Relu "a"(%5)"#, ""),
    );
    check_not_applicable(
        "fuse-conv",
        r#"graph "g"(%0 "x": f32[1,3,6,6], %1 "w": f32[4,3,1,1]) -> (%2) {
  %2 "y": f32[1,4,6,6] = Conv "c"(%0, %1)
}"#,
    );
}

#[test]
fn gelu_variants_rmsnorm_reciprocal_and_attention_forms() {
    let half_first = r#"graph "g"(%0 "x": f32[3,7]) -> (%8) {
  %1 "s": f32[] = const [1.4142135]
  %2 "one": f32[] = const [1.0]
  %3 "half": f32[] = const [0.5]
  %4 "d": f32[3,7] = Div "d"(%0, %1)
  %5 "e": f32[3,7] = Erf "e"(%4)
  %6 "a": f32[3,7] = Add "a"(%5, %2)
  %7 "h": f32[3,7] = Mul "h"(%0, %3)
  %8 "y": f32[3,7] = Mul "y"(%7, %6)
}"#;
    fires("fuse-gelu-erf-half-first", half_first, "Gelu");
    check_not_applicable(
        "fuse-gelu-erf-half-first",
        &half_first.replace("[1.4142135]", "[2.0]"),
    );
    let mul = r#"graph "g"(%0 "x": f32[3,7]) -> (%8) {
  %1 "s": f32[] = const [0.70710677]
  %2 "one": f32[] = const [1.0]
  %3 "half": f32[] = const [0.5]
  %4 "d": f32[3,7] = Mul "d"(%0, %1)
  %5 "e": f32[3,7] = Erf "e"(%4)
  %6 "a": f32[3,7] = Add "a"(%5, %2)
  %7 "m": f32[3,7] = Mul "m"(%0, %6)
  %8 "y": f32[3,7] = Mul "y"(%7, %3)
}"#;
    fires("fuse-gelu-erf-mul", mul, "Gelu");
    check_not_applicable(
        "fuse-gelu-erf-mul",
        &mul.replace("[0.70710677]", "[1.4142135]"),
    );
    let recip = format!(
        r#"graph "g"(%0 "x": f32[2,8]) -> (%10) {{
  %1 "ax": i64[1] = const [-1]
  %2 "two": f32[] = const [2.0]
  %3 "eps": f32[] = const [1e-6]
  %4 "gamma": f32[8] = const {g}
  %5 "p": f32[2,8] = Pow "p"(%0, %2)
  %6 "ms": f32[2,1] = ReduceMean "ms"(%5, %1)
  %7 "e": f32[2,1] = Add "e"(%6, %3)
  %8 "r": f32[2,1] = Sqrt "r"(%7)
  %11 "i": f32[2,1] = Reciprocal "i"(%8)
  %9 "n": f32[2,8] = Mul "n"(%0, %11)
  %10 "y": f32[2,8] = Mul "y"(%9, %4)
}}"#,
        g = vals(8, 24)
    );
    fires("fuse-rmsnorm-reciprocal", &recip, "RMSNormalization");
    check_not_applicable("fuse-rmsnorm-reciprocal", &recip.replace("[2.0]", "[3.0]"));
    let att = |scale_op: &str, c: &str, masked: bool| {
        let (mask_line, add, sm_in) = if masked {
            (
                "%4 \"mask\": f32[1,1,4,4] = const [0.0, 0.0, 0.0, -10000.0, 0.0, 0.0, 0.0, -10000.0, 0.0, 0.0, 0.0, -10000.0, 0.0, 0.0, 0.0, -10000.0]\n  ",
                "%8 \"p\": f32[1,2,4,4] = Add \"p\"(%7, %4)\n  ",
                "%8",
            )
        } else {
            ("", "", "%7")
        };
        format!(
            r#"graph "g"(%0 "q": f32[1,2,4,3], %1 "k": f32[1,4,2,3], %2 "v": f32[1,2,4,3]) -> (%9) {{
  %3 "c": f32[] = const [{c}]
  {mask_line}%5 "kt": f32[1,2,3,4] = Transpose "kt"(%1) {{perm=ints[0,2,3,1]}}
  %6 "s": f32[1,2,4,4] = MatMul "s"(%0, %5)
  %7 "sc": f32[1,2,4,4] = {scale_op} "sc"(%6, %3)
  {add}%10 "sm": f32[1,2,4,4] = Softmax "sm"({sm_in}) {{axis=-1}}
  %9 "o": f32[1,2,4,3] = MatMul "o"(%10, %2)
}}"#
        )
    };
    fires(
        "fuse-attention-div",
        &att("Div", "1.7320508", true),
        "Attention",
    );
    check_not_applicable("fuse-attention-div", &att("Mul", "0.57735026", true));
    fires(
        "fuse-attention-nomask",
        &att("Mul", "0.57735026", false),
        "Attention",
    );
    check_not_applicable("fuse-attention-nomask", &att("Div", "1.7320508", false));
}

#[test]
fn layout_k_padding() {
    // A GEMM that reads the padded activation through a slice on K reads it directly.
    let src = format!(
        r#"graph "g"(%0 "x": f32[4,8]) -> (%9) {{
  %1 "wp": f32[8,128] = const {a}
  %2 "w2": f32[100,5] = const {b}
  %3 "st": i64[1] = const [0]
  %4 "en": i64[1] = const [100]
  %5 "ax": i64[1] = const [-1]
  %6 "m": f32[4,128] = FusedMatMul "m"(%0, %1)
  %7 "s": f32[4,100] = Slice "s"(%6, %3, %4, %5)
  %9 "y": f32[4,5] = FusedMatMul "m2"(%7, %2)
}}"#,
        a = vals(8 * 128, 25),
        b = vals(500, 26)
    );
    gone("layout-pad-matmul-k", &src, "Slice");
    check_not_applicable(
        "layout-pad-matmul-k",
        &src.replace("const [0]", "const [1]")
            .replace("const [100]", "const [101]"),
    );
}

#[test]
fn precision_forms() {
    let l2 = Some(2e-2);
    let mm = format!(
        r#"graph "g"(%0 "x": f32[4,6]) -> (%3) {{
  %1 "w": f32[6,3] = const {w}
  %2 "m": f32[4,3] = MatMul "m"(%0, %1)
  %3 "y": f32[4,3] = Relu "r"(%2)
}}"#,
        w = vals(18, 27)
    );
    check_rewrite_within("precision-matmul-plain", &mm, &mm, l2);
    check_not_applicable(
        "precision-matmul-plain",
        &mm.replace("f32[4,6]", "bf16[4,6]")
            .replace("f32[6,3] = const", "bf16[6,3] = const")
            .replace("%2 \"m\": f32", "%2 \"m\": bf16")
            .replace("%3 \"y\": f32", "%3 \"y\": bf16"),
    );
    let cv = conv(r#"%9 "y": f32[1,4,6,6] = Relu "r"(%5)"#, "")
        .replace("f32[1,3,6,6]", "f32[1,8,6,6]")
        .replace("f32[4,3,3,3]", "f32[4,8,3,3]")
        .replace(&vals(108, 23), &vals(288, 28));
    check_rewrite_within("precision-conv", &cv, &cv, l2);
    check_not_applicable(
        "precision-conv",
        &conv(r#"%9 "y": f32[1,4,6,6] = Relu "r"(%5)"#, ""),
    );
    let att = r#"graph "g"(%0 "q": f32[1,2,4,3], %1 "k": f32[1,2,4,3], %2 "v": f32[1,2,4,3]) -> (%4) {
  %3 "a": f32[1,2,4,3] = Attention "a"(%0, %1, %2)
  %4 "y": f32[1,2,4,3] = Relu "r"(%3)
}"#;
    check_rewrite_within("precision-attention", att, att, l2);
    check_not_applicable("precision-attention", &att.replace("f32", "bf16"));
    check_not_applicable(
        "precision-matmul",
        &format!(
            r#"graph "g"(%0 "x": bf16[4,6]) -> (%3) {{
  %1 "w": bf16[6,3] = const {w}
  %3 "y": bf16[4,3] = FusedMatMul "m"(%0, %1)
}}"#,
            w = vals(18, 29)
        ),
    );
    let out = format!(
        r#"graph "g"(%0 "x": bf16[4,6]) -> (%4) {{
  %1 "w": bf16[6,3] = const {w}
  %2 "m": f32[4,3] = FusedMatMul "m"(%0, %1) {{output_dtype=dtype f32}}
  %3 "c": bf16[4,3] = Cast "c"(%2) {{to=dtype bf16}}
  %4 "y": bf16[4,3] = Relu "r"(%3)
}}"#,
        w = vals(18, 30)
    );
    gone("precision-matmul-output", &out, "Cast");
    check_not_applicable(
        "precision-matmul-output",
        &out.replace("{to=dtype bf16}", "{to=dtype f16}")
            .replace("%3 \"c\": bf16", "%3 \"c\": f16")
            .replace("%4 \"y\": bf16", "%4 \"y\": f16")
            .replace("-> (%4)", "-> (%4)"),
    );
}

/// Every rule of every table is named in the rule tests at least twice: once where it
/// fires and once where it must not (a crude but honest coverage check).
#[test]
fn every_rule_has_a_firing_and_a_not_applicable_test() {
    let tests = [
        include_str!("rules_algebra.rs"),
        include_str!("rules_fusion.rs"),
        include_str!("rules_more.rs"),
        include_str!("rules_conv.rs"),
        include_str!("rules_layout.rs"),
        include_str!("rules_quantized.rs"),
        include_str!("rules_rotary.rs"),
        include_str!("rules_mask.rs"),
    ]
    .concat();
    let mut missing = Vec::new();
    for name in gopt_passes::rules::names() {
        let quoted = format!("\"{name}\"");
        let na = tests
            .matches(&format!("check_not_applicable(\n        {quoted}"))
            .count()
            + tests
                .matches(&format!("check_not_applicable({quoted}"))
                .count();
        let all = tests.matches(&quoted).count();
        if na == 0 || all < 2 {
            missing.push(format!("{name} (mentions {all}, not-applicable {na})"));
        }
    }
    assert!(missing.is_empty(), "rules without both tests: {missing:#?}");
}

#[test]
fn casts_move_through_data_movement() {
    // Exact: each element rounds the same wherever it moves.
    check_rewrite(
        "precision-cast-transpose",
        r#"graph "g"(%0 "x": f32[2,3]) -> (%2) {
  %1 "t": f32[3,2] = Transpose "t"(%0) {perm=ints[1,0]}
  %2 "c": bf16[3,2] = Cast "c"(%1) {to=dtype bf16}
}"#,
        r#"graph "g"(%0 "x": f32[2,3]) -> (%2) {
  %1 "c": bf16[2,3] = Cast "c"(%0) {to=dtype bf16}
  %2 "t": bf16[3,2] = Transpose "t"(%1) {perm=ints[1,0]}
}"#,
    );
    check_not_applicable(
        "precision-cast-transpose",
        r#"graph "g"(%0 "x": f32[2,3]) -> (%2) {
  %1 "c": bf16[2,3] = Cast "c"(%0) {to=dtype bf16}
  %2 "t": bf16[3,2] = Transpose "t"(%1) {perm=ints[1,0]}
}"#,
    );
    check_rewrite(
        "precision-cast-reshape",
        r#"graph "g"(%0 "x": f32[2,3]) -> (%3) {
  %1 "s": i64[1] = const [6]
  %2 "r": f32[6] = Reshape "r"(%0, %1)
  %3 "c": bf16[6] = Cast "c"(%2) {to=dtype bf16}
}"#,
        r#"graph "g"(%0 "x": f32[2,3]) -> (%3) {
  %1 "s": i64[1] = const [6]
  %2 "c": bf16[2,3] = Cast "c"(%0) {to=dtype bf16}
  %3 "r": bf16[6] = Reshape "r"(%2, %1)
}"#,
    );
    check_not_applicable(
        "precision-cast-reshape",
        r#"graph "g"(%0 "x": f32[2,3]) -> (%1) {
  %1 "c": bf16[2,3] = Cast "c"(%0) {to=dtype bf16}
}"#,
    );
    check_rewrite(
        "precision-cast-slice",
        r#"graph "g"(%0 "x": f32[2,6]) -> (%5) {
  %1 "b": i64[1] = const [2]
  %2 "e": i64[1] = const [4]
  %3 "a": i64[1] = const [1]
  %4 "s": f32[2,2] = Slice "s"(%0, %1, %2, %3)
  %5 "c": bf16[2,2] = Cast "c"(%4) {to=dtype bf16}
}"#,
        r#"graph "g"(%0 "x": f32[2,6]) -> (%5) {
  %1 "b": i64[1] = const [2]
  %2 "e": i64[1] = const [4]
  %3 "a": i64[1] = const [1]
  %4 "c": bf16[2,6] = Cast "c"(%0) {to=dtype bf16}
  %5 "s": bf16[2,2] = Slice "s"(%4, %1, %2, %3)
}"#,
    );
    check_not_applicable(
        "precision-cast-slice",
        r#"graph "g"(%0 "x": f32[2,6]) -> (%1) {
  %1 "c": bf16[2,6] = Cast "c"(%0) {to=dtype bf16}
}"#,
    );
}

#[test]
fn casts_move_through_relu_and_split_and_into_convs() {
    check_rewrite(
        "precision-cast-relu",
        r#"graph "g"(%0 "x": f32[4]) -> (%2) {
  %1 "r": f32[4] = Relu "r"(%0)
  %2 "c": bf16[4] = Cast "c"(%1) {to=dtype bf16}
}"#,
        r#"graph "g"(%0 "x": f32[4]) -> (%2) {
  %1 "c": bf16[4] = Cast "c"(%0) {to=dtype bf16}
  %2 "r": bf16[4] = Relu "r"(%1)
}"#,
    );
    check_not_applicable(
        "precision-cast-relu",
        r#"graph "g"(%0 "x": f32[4]) -> (%2) {
  %1 "c": bf16[4] = Cast "c"(%0) {to=dtype bf16}
  %2 "r": bf16[4] = Relu "r"(%1)
}"#,
    );
    check_rewrite(
        "precision-cast-split",
        r#"graph "g"(%0 "x": f32[2,6]) -> (%5, %6, %7) {
  %1 "s": i64[3] = const [2, 2, 2]
  %2 "a": f32[2,2], %3 "b": f32[2,2], %4 "c": f32[2,2] = Split "sp"(%0, %1) {axis=1}
  %5 "ca": bf16[2,2] = Cast "ca"(%2) {to=dtype bf16}
  %6 "cb": bf16[2,2] = Cast "cb"(%3) {to=dtype bf16}
  %7 "cc": bf16[2,2] = Cast "cc"(%4) {to=dtype bf16}
}"#,
        r#"graph "g"(%0 "x": f32[2,6]) -> (%3, %4, %5) {
  %1 "s": i64[3] = const [2, 2, 2]
  %2 "cx": bf16[2,6] = Cast "cx"(%0) {to=dtype bf16}
  %3 "a": bf16[2,2], %4 "b": bf16[2,2], %5 "c": bf16[2,2] = Split "sp"(%2, %1) {axis=1}
}"#,
    );
    check_not_applicable(
        "precision-cast-split",
        r#"graph "g"(%0 "x": f32[2,6]) -> (%3, %4) {
  %1 "s": i64[2] = const [3, 3]
  %2 "cx": bf16[2,6] = Cast "cx"(%0) {to=dtype bf16}
  %3 "a": bf16[2,3], %4 "b": bf16[2,3] = Split "sp"(%2, %1) {axis=1}
}"#,
    );
    let conv = |out: &str, tail: &str| {
        let root = if tail.is_empty() { "%2" } else { "%3" };
        format!(
            r#"graph "g"(%0 "x": bf16[1,8,4,4]) -> ({root}) {{
  %1 "w": bf16[8,8,1,1] = const [{w}]
  %2 "y": {out}[1,8,4,4] = FusedConv "conv"(%0, %1, _, _) {{output_dtype=dtype {out}}}
{tail}}}"#,
            w = (0..64)
                .map(|i| format!("{}", (i % 5) as f64 * 0.25 - 0.5))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    check_rewrite(
        "precision-conv-output",
        &conv(
            "f32",
            "  %3 \"c\": bf16[1,8,4,4] = Cast \"c\"(%2) {to=dtype bf16}\n",
        ),
        &conv("bf16", ""),
    );
    check_not_applicable(
        "precision-conv-output",
        &conv("f32", "  %3 \"c\": f32[1,8,4,4] = Relu \"c\"(%2)\n"),
    );
}
