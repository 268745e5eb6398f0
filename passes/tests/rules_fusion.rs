//! Each fusion, layout and precision rule alone: it fires on the exported pattern (the
//! extracted graph holds the fused op and computes the same numbers) and does not fire
//! where its side condition fails.

mod common;
use common::{check_not_applicable, check_rewrite, check_rules, vals};
use gopt_ir::Verified;

/// Runs `rule` alone; asserts the extracted graph has `op` (with `attr` text) and still
/// computes the input graph's numbers.
#[track_caller]
fn fires(rule: &str, src: &str, op: &str) -> Verified {
    let g = check_rewrite(rule, src, src);
    assert!(
        g.nodes.iter().any(|n| n.op.name() == op),
        "{rule}: no {op} in\n{}",
        gopt_ir::text::print(&g)
    );
    g
}

fn mm_bias(k: usize, n: usize) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[2,5,{k}]) -> (%4) {{
  %1 "w": f32[{k},{n}] = const {w}
  %2 "b": f32[{n}] = const {b}
  %3 "m": f32[2,5,{n}] = MatMul "m"(%0, %1)
  %4 "y": f32[2,5,{n}] = Add "a"(%3, %2)
}}"#,
        w = vals(k * n, 3),
        b = vals(n, 4)
    )
}

#[test]
fn matmul_bias() {
    fires("fuse-matmul-bias", &mm_bias(6, 7), "FusedMatMul");
    // A bias over another axis is not a GEMM epilogue.
    check_not_applicable(
        "fuse-matmul-bias",
        &format!(
            r#"graph "g"(%0 "x": f32[5,3]) -> (%4) {{
  %1 "w": f32[3,2] = const {w}
  %2 "b": f32[5,1] = const [1.0, 2.0, 3.0, 4.0, 5.0]
  %3 "m": f32[5,2] = MatMul "m"(%0, %1)
  %4 "y": f32[5,2] = Add "a"(%3, %2)
}}"#,
            w = vals(6, 5)
        ),
    );
}

fn fused_then(act: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[4,6]) -> (%4) {{
  %1 "w": f32[6,3] = const {w}
  %2 "b": f32[3] = const [0.1, -0.2, 0.3]
  %3 "m": f32[4,3] = FusedMatMul "m"(%0, %1, %2)
  %4 "y": f32[4,3] = {act} "act"(%3)
}}"#,
        w = vals(18, 6)
    )
}

#[test]
fn matmul_activations() {
    let g = fires("fuse-matmul-relu", &fused_then("Relu"), "FusedMatMul");
    assert_eq!(g.nodes.len(), 1);
    let g = fires("fuse-matmul-gelu", &fused_then("Gelu"), "FusedMatMul");
    assert_eq!(g.nodes[0].attrs.str_or("activation", "").unwrap(), "gelu");
    fires("fuse-matmul-tanh", &fused_then("Tanh"), "FusedMatMul");
    check_not_applicable("fuse-matmul-relu", &fused_then("Sigmoid"));
}

#[test]
fn matmul_residual() {
    let src = format!(
        r#"graph "g"(%0 "x": f32[4,6], %1 "r": f32[4,3]) -> (%5) {{
  %2 "w": f32[6,3] = const {w}
  %3 "b": f32[3] = const [0.1, -0.2, 0.3]
  %4 "m": f32[4,3] = FusedMatMul "m"(%0, %2, %3)
  %5 "y": f32[4,3] = Add "a"(%1, %4)
}}"#,
        w = vals(18, 7)
    );
    let g = fires("fuse-matmul-residual-left", &src, "FusedMatMul");
    assert_eq!(g.nodes.len(), 1);
    // A broadcast "residual" is not one.
    check_not_applicable(
        "fuse-matmul-residual-left",
        &src.replace("\"r\": f32[4,3]", "\"r\": f32[3]"),
    );
}

#[test]
fn gemm_and_unflatten() {
    let src = format!(
        r#"graph "g"(%0 "x": f32[2,5,6]) -> (%7) {{
  %1 "w": f32[6,3] = const {w}
  %2 "b": f32[3] = const [0.1, -0.2, 0.3]
  %3 "s1": i64[2] = const [-1, 6]
  %4 "s2": i64[3] = const [2, 5, 3]
  %5 "f": f32[10,6] = Reshape "f"(%0, %3)
  %6 "g": f32[10,3] = Gemm "g"(%5, %1, %2)
  %7 "y": f32[2,5,3] = Reshape "u"(%6, %4)
}}"#,
        w = vals(18, 8)
    );
    fires("fuse-gemm", &src, "FusedMatMul");
    check_not_applicable(
        "fuse-gemm",
        &src.replace(
            "Gemm \"g\"(%5, %1, %2)",
            "Gemm \"g\"(%5, %1, %2) {beta=2.0}",
        ),
    );
    let fused = src.replace("Gemm \"g\"(%5, %1, %2)", "FusedMatMul \"g\"(%5, %1, %2)");
    let g = fires("fuse-matmul-unflatten", &fused, "FusedMatMul");
    assert!(
        g.nodes.iter().all(|n| n.op.name() != "Reshape"),
        "{}",
        gopt_ir::text::print(&g)
    );
}

fn gelu_erf() -> &'static str {
    r#"graph "g"(%0 "x": f32[3,7]) -> (%8) {
  %1 "s": f32[] = const [1.4142135]
  %2 "one": f32[] = const [1.0]
  %3 "half": f32[] = const [0.5]
  %4 "d": f32[3,7] = Div "d"(%0, %1)
  %5 "e": f32[3,7] = Erf "e"(%4)
  %6 "a": f32[3,7] = Add "a"(%5, %2)
  %7 "m": f32[3,7] = Mul "m"(%0, %6)
  %8 "y": f32[3,7] = Mul "m2"(%7, %3)
}"#
}

#[test]
fn gelu_forms() {
    fires("fuse-gelu-erf", gelu_erf(), "Gelu");
    check_not_applicable("fuse-gelu-erf", &gelu_erf().replace("[0.5]", "[0.6]"));
    let tanh = r#"graph "g"(%0 "x": f32[3,7]) -> (%13) {
  %1 "half": f32[] = const [0.5]
  %2 "three": f32[] = const [3.0]
  %3 "c": f32[] = const [0.044715]
  %4 "k": f32[] = const [0.7978846]
  %5 "one": f32[] = const [1.0]
  %6 "h": f32[3,7] = Mul "h"(%0, %1)
  %7 "p": f32[3,7] = Pow "p"(%0, %2)
  %8 "pc": f32[3,7] = Mul "pc"(%7, %3)
  %9 "s": f32[3,7] = Add "s"(%0, %8)
  %10 "sk": f32[3,7] = Mul "sk"(%9, %4)
  %11 "t": f32[3,7] = Tanh "t"(%10)
  %12 "t1": f32[3,7] = Add "t1"(%11, %5)
  %13 "y": f32[3,7] = Mul "y"(%6, %12)
}"#;
    let g = fires("fuse-gelu-tanh", tanh, "Gelu");
    assert_eq!(g.nodes.len(), 1);
    check_not_applicable("fuse-gelu-tanh", &tanh.replace("[3.0]", "[2.0]"));
}

fn layernorm() -> String {
    format!(
        r#"graph "g"(%0 "x": f32[2,3,8]) -> (%16) {{
  %1 "ax": i64[1] = const [-1]
  %2 "two": f32[] = const [2.0]
  %3 "eps": f32[] = const [1e-5]
  %4 "gamma": f32[8] = const {g}
  %5 "beta": f32[8] = const {b}
  %6 "mu": f32[2,3,1] = ReduceMean "mu"(%0, %1)
  %7 "d": f32[2,3,8] = Sub "d"(%0, %6)
  %8 "p": f32[2,3,8] = Pow "p"(%7, %2)
  %9 "var": f32[2,3,1] = ReduceMean "var"(%8, %1)
  %10 "ve": f32[2,3,1] = Add "ve"(%9, %3)
  %11 "sd": f32[2,3,1] = Sqrt "sd"(%10)
  %12 "n": f32[2,3,8] = Div "n"(%7, %11)
  %13 "sc": f32[2,3,8] = Mul "sc"(%12, %4)
  %16 "y": f32[2,3,8] = Add "y"(%13, %5)
}}"#,
        g = vals(8, 9),
        b = vals(8, 10)
    )
}

#[test]
fn layernorm_and_rmsnorm() {
    let g = fires("fuse-layernorm", &layernorm(), "LayerNormalization");
    assert_eq!(g.nodes.len(), 1);
    // Over the middle axis it is not a LayerNorm over the last axis.
    let mid = layernorm()
        .replace("const [-1]", "const [1]")
        .replace("f32[2,3,1]", "f32[2,1,8]");
    check_not_applicable("fuse-layernorm", &mid);
    let rms = format!(
        r#"graph "g"(%0 "x": f32[2,8]) -> (%10) {{
  %1 "ax": i64[1] = const [-1]
  %2 "two": f32[] = const [2.0]
  %3 "eps": f32[] = const [1e-6]
  %4 "gamma": f32[8] = const {g}
  %5 "p": f32[2,8] = Pow "p"(%0, %2)
  %6 "ms": f32[2,1] = ReduceMean "ms"(%5, %1)
  %7 "e": f32[2,1] = Add "e"(%6, %3)
  %8 "r": f32[2,1] = Sqrt "r"(%7)
  %9 "n": f32[2,8] = Div "n"(%0, %8)
  %10 "y": f32[2,8] = Mul "y"(%9, %4)
}}"#,
        g = vals(8, 11)
    );
    fires("fuse-rmsnorm", &rms, "RMSNormalization");
    check_not_applicable("fuse-rmsnorm", &rms.replace("[2.0]", "[3.0]"));
}

#[test]
fn softmax() {
    let src = r#"graph "g"(%0 "x": f32[3,5]) -> (%6) {
  %1 "ax": i64[1] = const [1]
  %2 "mx": f32[3,1] = ReduceMax "mx"(%0, %1)
  %3 "d": f32[3,5] = Sub "d"(%0, %2)
  %4 "e": f32[3,5] = Exp "e"(%3)
  %5 "s": f32[3,1] = ReduceSum "s"(%4, %1)
  %6 "y": f32[3,5] = Div "y"(%4, %5)
}"#;
    fires("fuse-softmax", src, "Softmax");
    check_not_applicable(
        "fuse-softmax",
        &src.replace("ReduceSum \"s\"(%4, %1)", "ReduceSum \"s\"(%3, %1)"),
    );
}

fn attention(mask: &str) -> String {
    format!(
        r#"graph "g"(%0 "q": f32[1,2,4,3], %1 "k": f32[1,4,2,3], %2 "v": f32[1,2,4,3]) -> (%9) {{
  %3 "c": f32[] = const [0.57735026]
  %4 "mask": f32[1,1,4,4] = const {mask}
  %5 "kt": f32[1,2,3,4] = Transpose "kt"(%1) {{perm=ints[0,2,3,1]}}
  %6 "s": f32[1,2,4,4] = MatMul "s"(%0, %5)
  %7 "sc": f32[1,2,4,4] = Mul "sc"(%6, %3)
  %8 "p": f32[1,2,4,4] = Add "p"(%7, %4)
  %10 "sm": f32[1,2,4,4] = Softmax "sm"(%8) {{axis=-1}}
  %9 "o": f32[1,2,4,3] = MatMul "o"(%10, %2)
}}"#
    )
}

#[test]
fn attention_with_masks() {
    let causal = "[0.0, -10000.0, -10000.0, -10000.0, 0.0, 0.0, -10000.0, -10000.0, 0.0, 0.0, 0.0, -10000.0, 0.0, 0.0, 0.0, 0.0]";
    let g = fires("fuse-attention", &attention(causal), "Attention");
    let att = g.nodes.iter().find(|n| n.op.name() == "Attention").unwrap();
    assert_eq!(
        att.attrs.int_or("is_causal", 0).unwrap(),
        1,
        "a causal mask becomes is_causal"
    );
    // An export specialized to a batch spells the mask out per row: still causal.
    let expanded = attention(&format!(
        "[{causal}, {causal}]",
        causal = &causal[1..causal.len() - 1]
    ))
    .replace("f32[1,", "f32[2,");
    let g = fires("fuse-attention", &expanded, "Attention");
    let att = g.nodes.iter().find(|n| n.op.name() == "Attention").unwrap();
    assert_eq!(att.attrs.int_or("is_causal", 0).unwrap(), 1);
    let padding = "[0.0, 0.0, 0.0, -10000.0, 0.0, 0.0, 0.0, -10000.0, 0.0, 0.0, 0.0, -10000.0, 0.0, 0.0, 0.0, -10000.0]";
    let g = fires("fuse-attention", &attention(padding), "Attention");
    let att = g.nodes.iter().find(|n| n.op.name() == "Attention").unwrap();
    assert_eq!(att.attrs.int_or("is_causal", 0).unwrap(), 0);
    assert!(att.inputs[3].is_some(), "a padding mask stays an input");
    // Softmax over another axis is not attention.
    check_not_applicable(
        "fuse-attention",
        &attention(padding).replace("{axis=-1}", "{axis=2}"),
    );
}

#[test]
fn sibling_gemms_merge() {
    let src = format!(
        r#"graph "g"(%0 "x": f32[5,6]) -> (%7, %8, %9) {{
  %1 "wq": f32[6,4] = const {a}
  %2 "wk": f32[6,4] = const {b}
  %3 "wv": f32[6,4] = const {c}
  %4 "bq": f32[4] = const [0.1, 0.2, 0.3, 0.4]
  %5 "bk": f32[4] = const [0.5, 0.6, 0.7, 0.8]
  %6 "bv": f32[4] = const [0.9, 1.0, 1.1, 1.2]
  %7 "q": f32[5,4] = FusedMatMul "q"(%0, %1, %4)
  %8 "k": f32[5,4] = FusedMatMul "k"(%0, %2, %5)
  %9 "v": f32[5,4] = FusedMatMul "v"(%0, %3, %6)
}}"#,
        a = vals(24, 12),
        b = vals(24, 13),
        c = vals(24, 14)
    );
    let g = fires("fuse-sibling-matmul", &src, "Slice");
    let gemms = g
        .nodes
        .iter()
        .filter(|n| n.op.name() == "FusedMatMul")
        .count();
    assert_eq!(gemms, 1, "{}", gopt_ir::text::print(&g));
    // Different activations do not merge.
    let mixed = src
        .replace(
            "\"k\"(%0, %2, %5)",
            "\"k\"(%0, %2, %5) {activation=\"relu\"}",
        )
        .replace(
            "\"v\"(%0, %3, %6)",
            "\"v\"(%0, %3, %6) {activation=\"tanh\"}",
        );
    check_not_applicable("fuse-sibling-matmul", &mixed);
}

/// Llama's MLP gate: `silu(x·Wg) · (x·Wu)`, the gate with its silu epilogue fused.
fn swiglu_src(product: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[5,6]) -> (%5) {{
  %1 "wg": f32[6,4] = const {a}
  %2 "wu": f32[6,4] = const {b}
  %3 "gate": f32[5,4] = FusedMatMul "gate"(%0, %1) {{activation="silu"}}
  %4 "up": f32[5,4] = FusedMatMul "up"(%0, %2)
  %5 "y": f32[5,4] = Mul "y"({product})
}}"#,
        a = vals(24, 16),
        b = vals(24, 17)
    )
}

#[test]
fn swiglu_gate() {
    let want = format!(
        r#"graph "g"(%0 "x": f32[5,6]) -> (%5) {{
  %1 "wg": f32[6,4] = const {a}
  %2 "wu": f32[6,4] = const {b}
  %3 "gate": f32[5,4] = FusedMatMul "gate"(%0, %1)
  %4 "up": f32[5,4] = FusedMatMul "up"(%0, %2)
  %5 "y": f32[5,4] = SwiGLU "y"(%3, %4)
}}"#,
        a = vals(24, 16),
        b = vals(24, 17)
    );
    check_rewrite("fuse-swiglu", &swiglu_src("%3, %4"), &want);
    check_rewrite("fuse-swiglu-left", &swiglu_src("%4, %3"), &want);
    // Another activation, a residual, or half-precision data (where SwiGLU rounds
    // more often than the epilogue) do not become SwiGLU.
    let gelu = swiglu_src("%3, %4").replace("\"silu\"", "\"gelu\"");
    check_not_applicable("fuse-swiglu", &gelu);
    check_not_applicable("fuse-swiglu-left", &gelu.replace("%3, %4)", "%4, %3)"));
    let residual = swiglu_src("%3, %4")
        .replace("-> (%5)", ", %6 \"r\": f32[5,4]) -> (%5)")
        .replace("f32[5,6]) ,", "f32[5,6],")
        .replace("\"gate\"(%0, %1)", "\"gate\"(%0, %1, _, %6)");
    check_not_applicable("fuse-swiglu", &residual);
    let half = swiglu_src("%3, %4").replace("f32", "bf16");
    check_not_applicable("fuse-swiglu", &half);
}

/// With the sibling merge, the gate and up projections become one GEMM whose halves
/// SwiGLU reads: extraction takes it (one launch fewer) although neither half alone
/// is cheaper as a slice.
#[test]
fn swiglu_reads_one_merged_gemm() {
    let g = check_rules(
        &["fuse-swiglu", "fuse-sibling-matmul"],
        &swiglu_src("%3, %4"),
    );
    let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    let gemms = ops.iter().filter(|o| **o == "FusedMatMul").count();
    assert!(
        gemms == 1 && ops.contains(&"SwiGLU"),
        "{}",
        gopt_ir::text::print(&g)
    );
}

fn conv(after: &str, extra: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[1,3,6,6]{extra}) -> (%9) {{
  %1 "w": f32[4,3,3,3] = const {w}
  %2 "b": f32[4] = const [0.1, -0.1, 0.2, -0.2]
  %3 "lo": f32[] = const [0.0]
  %4 "hi": f32[] = const [6.0]
  %5 "c": f32[1,4,6,6] = FusedConv "c"(%0, %1, %2) {{pads=ints[1,1,1,1]}}
  {after}
}}"#,
        w = vals(108, 15)
    )
}

#[test]
fn conv_epilogues() {
    let src = r#"graph "g"(%0 "x": f32[1,3,6,6]) -> (%3) {
  %1 "w": f32[4,3,1,1] = const [1.0, 0.5, -0.5, 0.25, 0.0, 1.0, -1.0, 2.0, 0.5, 0.5, 0.5, 0.5]
  %2 "b": f32[4] = const [0.1, -0.1, 0.2, -0.2]
  %3 "c": f32[1,4,6,6] = Conv "c"(%0, %1, %2)
}"#;
    fires("fuse-conv", src, "FusedConv");
    let clip = conv(r#"%9 "y": f32[1,4,6,6] = Clip "relu6"(%5, %3, %4)"#, "");
    let g = fires("fuse-conv-clip", &clip, "FusedConv");
    assert_eq!(g.nodes.len(), 1);
    check_not_applicable(
        "fuse-conv-clip",
        &conv(r#"%9 "y": f32[1,4,6,6] = Clip "c2"(%0, %3, %4)"#, "")
            .replace("f32[1,4,6,6] = Clip", "f32[1,3,6,6] = Clip")
            .replace("-> (%9)", "-> (%9)"),
    );
    let res = conv(
        r#"%9 "y": f32[1,4,6,6] = Add "res"(%5, %8)"#,
        ", %8 \"r\": f32[1,4,6,6]",
    );
    let g = fires("fuse-conv-residual", &res, "FusedConv");
    assert_eq!(g.nodes.len(), 1);
}

#[test]
fn layout_padding() {
    let pad = |n: usize| {
        format!(
            r#"graph "g"(%0 "x": f32[2,5,64]) -> (%3) {{
  %1 "w": f32[64,{n}] = const {w}
  %2 "b": f32[{n}] = const {b}
  %3 "y": f32[2,5,{n}] = FusedMatMul "m"(%0, %1, %2)
}}"#,
            w = vals(64 * n, 16),
            b = vals(n, 17)
        )
    };
    let g = fires("layout-pad-matmul-n", &pad(100), "Slice");
    let mm = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "FusedMatMul")
        .unwrap();
    assert_eq!(mm.attrs.int("pad_n").unwrap(), Some(100));
    check_not_applicable("layout-pad-matmul-n", &pad(128));
}

#[test]
fn precision_rules() {
    // Precision rules change rounding: bf16 inputs, fp32 accumulation, stated tolerance
    // relative L2 <= 2e-2.
    let src = fused_then("Relu");
    let g = common::check_rewrite_within("precision-matmul", &src, &src, Some(2e-2));
    let mm = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "FusedMatMul")
        .unwrap();
    let a = g.ty(mm.inputs[0].unwrap()).unwrap();
    assert_eq!(
        a.dtype,
        gopt_ir::DType::BF16,
        "lowered: {}",
        gopt_ir::text::print(&g)
    );
    assert_eq!(
        g.ty(g.outputs[0]).unwrap().dtype,
        gopt_ir::DType::F32,
        "output type kept"
    );
    check_not_applicable(
        "precision-cast-pair",
        r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "a": bf16[3] = Cast "a"(%0) {to=dtype bf16}
  %2 "b": f32[3] = Cast "b"(%1) {to=dtype f32}
}"#,
    );
    check_rewrite(
        "precision-cast-pair",
        r#"graph "g"(%0 "x": bf16[3]) -> (%3) {
  %1 "a": f32[3] = Cast "a"(%0) {to=dtype f32}
  %2 "b": bf16[3] = Cast "b"(%1) {to=dtype bf16}
  %3 "y": bf16[3] = Relu "r"(%2)
}"#,
        r#"graph "g"(%0 "x": bf16[3]) -> (%1) {
  %1 "y": bf16[3] = Relu "r"(%0)
}"#,
    );
}

/// transformers' LlamaRMSNorm after the f32 -> f32 casts are gone:
/// `γ · (rsqrt(mean(x²) + ε) · x)` with the rsqrt first.
fn rmsnorm_rsqrt_first(two: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[2,3,8]) -> (%11) {{
  %1 "ax": i64[1] = const [-1]
  %2 "two": f32[] = const [{two}]
  %3 "eps": f32[] = const [1e-6]
  %4 "gamma": f32[8] = const {g}
  %5 "p": f32[2,3,8] = Pow "p"(%0, %2)
  %6 "ms": f32[2,3,1] = ReduceMean "ms"(%5, %1)
  %7 "e": f32[2,3,1] = Add "e"(%6, %3)
  %8 "r": f32[2,3,1] = Sqrt "r"(%7)
  %9 "inv": f32[2,3,1] = Reciprocal "inv"(%8)
  %10 "n": f32[2,3,8] = Mul "n"(%9, %0)
  %11 "y": f32[2,3,8] = Mul "y"(%10, %4)
}}"#,
        g = vals(8, 21)
    )
}

#[test]
fn rmsnorm_with_the_rsqrt_first() {
    let g = fires(
        "fuse-rmsnorm-reciprocal-first",
        &rmsnorm_rsqrt_first("2.0"),
        "RMSNormalization",
    );
    assert_eq!(g.nodes.len(), 1, "{}", gopt_ir::text::print(&g));
    check_not_applicable("fuse-rmsnorm-reciprocal-first", &rmsnorm_rsqrt_first("3.0"));
}

/// Grouped-query attention as transformers' eager Llama attention exports it: K and V
/// with `kv` heads go through repeat_kv (Unsqueeze(2), Expand, Reshape) to 4 heads.
/// `axis` is the Unsqueeze axis, `rep_v` V's repeat factor.
fn gqa(kv: usize, axis: i64, rep_v: usize) -> String {
    let n = 4 / kv;
    let (ex_k, ex_v) = if axis == 2 {
        (format!("[1,{kv},{n},5,3]"), format!("[1,{kv},{rep_v},5,3]"))
    } else {
        (format!("[1,{kv},5,{n},3]"), format!("[1,{kv},5,{rep_v},3]"))
    };
    let un = if axis == 2 {
        format!("[1,{kv},1,5,3]")
    } else {
        format!("[1,{kv},5,1,3]")
    };
    let heads_v = kv * rep_v;
    format!(
        r#"graph "g"(%0 "q": f32[1,4,5,3], %1 "k": f32[1,{kv},5,3], %2 "v": f32[1,{kv},5,3]) -> (%14) {{
  %3 "ax": i64[1] = const [{axis}]
  %4 "ek": i64[5] = const {ek}
  %5 "ev": i64[5] = const {ev}
  %6 "rk": i64[4] = const [1, 4, 5, 3]
  %7 "rv": i64[4] = const [1, {heads_v}, 5, 3]
  %8 "uk": f32{un} = Unsqueeze "uk"(%1, %3)
  %9 "xk": f32{ex_k} = Expand "xk"(%8, %4)
  %10 "kk": f32[1,4,5,3] = Reshape "kk"(%9, %6)
  %11 "uv": f32{un} = Unsqueeze "uv"(%2, %3)
  %12 "xv": f32{ex_v} = Expand "xv"(%11, %5)
  %13 "vv": f32[1,{heads_v},5,3] = Reshape "vv"(%12, %7)
  %14 "o": f32[1,4,5,3] = Attention "att"(%0, %10, %13) {{scale=0.5}}
}}"#,
        ek = ex_k.replace(',', ", "),
        ev = ex_v.replace(',', ", "),
    )
}

#[test]
fn grouped_query_attention_reads_the_shared_heads() {
    let g = check_rewrite(
        "fuse-attention-gqa",
        &gqa(2, 2, 2),
        r#"graph "g"(%0 "q": f32[1,4,5,3], %1 "k": f32[1,2,5,3], %2 "v": f32[1,2,5,3]) -> (%3) {
  %3 "o": f32[1,4,5,3] = Attention "att"(%0, %1, %2) {scale=0.5}
}"#,
    );
    assert_eq!(g.nodes.len(), 1, "{}", gopt_ir::text::print(&g));
    fires("fuse-attention-gqa", &gqa(1, 2, 4), "Attention");
    // Repeating after the rows (axis 3) interleaves rows, not heads.
    check_not_applicable("fuse-attention-gqa", &gqa(2, 3, 2));
    // K repeated, V not: V already has 2 heads of 4, so the pattern does not match.
    check_not_applicable("fuse-attention-gqa", &gqa(2, 2, 1));
}

/// Sibling GEMMs as the precision rules leave them: low-type input and weights, fp32
/// biases (added in the fp32 epilogue), writing the low type.
fn low_siblings(bias_k: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": bf16[5,6]) -> (%7, %8, %9) {{
  %1 "wq": bf16[6,4] = const {a}
  %2 "wk": bf16[6,4] = const {b}
  %3 "wv": bf16[6,4] = const {c}
  %4 "bq": f32[4] = const [0.1, 0.2, 0.3, 0.4]
  %5 "bk": {bias_k}[4] = const [0.5, 0.6, 0.7, 0.8]
  %7 "q": bf16[5,4] = FusedMatMul "q"(%0, %1, %4) {{output_dtype=dtype bf16}}
  %8 "k": bf16[5,4] = FusedMatMul "k"(%0, %2, %5) {{output_dtype=dtype bf16}}
  %9 "v": bf16[5,4] = FusedMatMul "v"(%0, %3) {{output_dtype=dtype bf16}}
}}"#,
        a = vals(24, 12),
        b = vals(24, 13),
        c = vals(24, 14)
    )
}

#[test]
fn low_precision_sibling_gemms_merge_with_fp32_biases() {
    // V has no bias: it gets zeros of the others' type (f32), not of the weights' (bf16).
    let g = fires("fuse-sibling-matmul", &low_siblings("f32"), "Slice");
    let mm: Vec<_> = g
        .nodes
        .iter()
        .filter(|n| n.op.name() == "FusedMatMul")
        .collect();
    assert_eq!(mm.len(), 1, "{}", gopt_ir::text::print(&g));
    let b = g.ty(mm[0].inputs[2].expect("merged bias")).unwrap();
    assert_eq!(b.dtype, gopt_ir::DType::F32, "{}", gopt_ir::text::print(&g));
    // f32 and f64 biases have no exact common type.
    check_not_applicable("fuse-sibling-matmul", &low_siblings("f64"));
}

/// Rotary's rotate_half on a head-split projection, as transformers exports it:
/// `Concat(Neg(Slice(q, d/2:)), Slice(q, :d/2))` on the last axis of
/// `q = Transpose(Reshape(x·W + b, [b, s, h, d]), [0,2,1,3])`.
fn rotate_half_src(first_half_end: i64) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[1,3,8]) -> (%16) {{
  %1 "w": f32[8,8] = const {w}
  %2 "b": f32[8] = const {b}
  %3 "split": i64[4] = const [1, 3, -1, 4]
  %4 "zero": i64[1] = const [0]
  %5 "half": i64[1] = const [2]
  %6 "end": i64[1] = const [9223372036854775807]
  %7 "ax": i64[1] = const [-1]
  %8 "one": i64[1] = const [1]
  %9 "he": i64[1] = const [{first_half_end}]
  %10 "m": f32[1,3,8] = FusedMatMul "m"(%0, %1, %2)
  %11 "r": f32[1,3,2,4] = Reshape "r"(%10, %3)
  %12 "q": f32[1,2,3,4] = Transpose "q"(%11) {{perm=ints[0,2,1,3]}}
  %13 "x2": f32[1,2,3,2] = Slice "x2"(%12, %5, %6, %7, %8)
  %14 "n": f32[1,2,3,2] = Neg "n"(%13)
  %15 "x1": f32[1,2,3,{w1}] = Slice "x1"(%12, %4, %9, %7, %8)
  %16 "y": f32[1,2,3,{wy}] = Concat "y"(%14, %15) {{axis=-1}}
}}"#,
        w = vals(64, 41),
        b = vals(8, 42),
        w1 = first_half_end.min(4),
        wy = 2 + first_half_end.min(4),
    )
}

#[test]
fn rotate_half_folds_into_the_weight() {
    let g = fires(
        "fuse-rotate-half-into-weight",
        &rotate_half_src(2),
        "FusedMatMul",
    );
    assert!(
        g.nodes
            .iter()
            .all(|n| !matches!(n.op.name(), "Neg" | "Concat" | "Slice")),
        "{}",
        gopt_ir::text::print(&g)
    );
    // Concat(-x[2:], x[:3]) is not a rotation by half.
    check_not_applicable("fuse-rotate-half-into-weight", &rotate_half_src(3));
}

/// torch's SDPA export: Q and Kᵀ scaled by √c each, a float mask added, the softmax's
/// NaN rows (fully masked) set to 0, then ·V.
fn sdpa_export(mask: &str) -> String {
    format!(
        r#"graph "g"(%0 "q": f32[1,2,3,4], %1 "k": f32[1,2,5,4], %2 "v": f32[1,2,5,4]) -> (%15) {{
  %3 "c": f32[] = const [0.70710677]
  %4 "qs": f32[1,2,3,4] = Mul "qs"(%0, %3)
  %5 "ks": f32[1,2,5,4] = Mul "ks"(%1, %3)
  %6 "kt": f32[1,2,4,5] = Transpose "kt"(%5) {{perm=ints[0,1,3,2]}}
  %7 "s": f32[1,2,3,5] = MatMul "s"(%4, %6)
  %8 "m": f32[1,1,1,5] = const {mask}
  %9 "a": f32[1,2,3,5] = Add "a"(%7, %8)
  %10 "p": f32[1,2,3,5] = Softmax "p"(%9) {{axis=-1}}
  %11 "nan": bool[1,2,3,5] = IsNaN "nan"(%10)
  %12 "zero": f32[] = const [0.0]
  %13 "pz": f32[1,2,3,5] = Where "pz"(%11, %12, %10)
  %15 "o": f32[1,2,3,4] = MatMul "o"(%13, %2)
}}"#
    )
}

#[test]
fn sdpa_exports_fuse_into_attention() {
    let src = sdpa_export("[0.0, 0.0, -1.0e4, 0.0, -1.0e4]");
    // Each rule alone: the scale moves past the transpose, the two scales meet after
    // the product, and the guarded softmax becomes Attention once both have.
    fires("fuse-transpose-scalar-mul", &src, "Transpose");
    fires(
        "fuse-matmul-scaled-operands",
        r#"graph "g"(%0 "a": f32[2,3], %1 "b": f32[3,4]) -> (%6) {
  %2 "c1": f32[] = const [0.5]
  %3 "c2": f32[] = const [0.25]
  %4 "x": f32[2,3] = Mul "x"(%0, %2)
  %5 "y": f32[3,4] = Mul "y"(%1, %3)
  %6 "p": f32[2,4] = MatMul "p"(%4, %5)
}"#,
        "MatMul",
    );
    let all = [
        "fuse-transpose-scalar-mul",
        "fuse-matmul-scaled-operands",
        "fuse-attention-nan-guard",
    ];
    let g = common::check_rules(&all, &src);
    let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert!(
        ops.contains(&"Attention") && !ops.contains(&"Softmax"),
        "{}",
        gopt_ir::text::print(&g)
    );
    // A scale that is not one number does not commute with the transpose or the product.
    let vector_scale = src.replace(
        r#"%5 "ks": f32[1,2,5,4] = Mul "ks"(%1, %3)"#,
        r#"%16 "cv": f32[4] = const [0.5, 0.25, 1.0, 2.0]
  %5 "ks": f32[1,2,5,4] = Mul "ks"(%1, %16)"#,
    );
    check_not_applicable("fuse-transpose-scalar-mul", &vector_scale);
    check_not_applicable("fuse-matmul-scaled-operands", &vector_scale);
    // A half type rounds each step where the product would round once.
    check_not_applicable("fuse-matmul-scaled-operands", &src.replace("f32", "f16"));
    // A guard that writes anything but 0 is not Attention's.
    check_not_applicable(
        "fuse-attention-nan-guard",
        &src.replace(
            r#"%12 "zero": f32[] = const [0.0]"#,
            r#"%12 "zero": f32[] = const [1.0]"#,
        ),
    );
}
