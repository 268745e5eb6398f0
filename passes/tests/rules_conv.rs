//! The convolution epilogue rules that move an activation after a fused residual
//! (`fuse-conv-residual-relu`, `fuse-conv-residual-clip`) and the precision rule that
//! reads such a residual in bf16 (`precision-conv-residual`), each alone, and the whole
//! fusion table on ResNet's bottleneck tail `relu(conv(x) + b + identity)`.

mod common;
use common::{check_not_applicable, check_rewrite, check_rewrite_within, inputs, vals};
use gopt_ir::text::{parse, print};
use gopt_ir::{interp, verify, Verified};
use gopt_passes::{optimize, Config};

/// A 3x3 pad-1 FusedConv with attributes `attrs` reading `%0` with residual `%8`, and
/// `after` (reading `%5`, writing `%9`).
fn conv(attrs: &str, after: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[1,3,6,6], %8 "r": f32[1,4,6,6]) -> (%9) {{
  %1 "w": f32[4,3,3,3] = const {w}
  %2 "b": f32[4] = const [0.1, -0.1, 0.2, -0.2]
  %3 "lo": f32[] = const [0.0]
  %4 "hi": f32[] = const [6.0]
  %5 "c": f32[1,4,6,6] = FusedConv "c"(%0, %1, %2, %8) {{{attrs}pads=ints[1,1,1,1]}}
  {after}
}}"#,
        w = vals(108, 15)
    )
}

fn fused(attrs: &str) -> String {
    conv(attrs, "").replace(" -> (%9)", " -> (%5)")
}

#[test]
fn relu_after_residual() {
    let src = conv("", r#"%9 "y": f32[1,4,6,6] = Relu "relu"(%5)"#);
    let want = fused(r#"activation="relu", epilogue="bias_residual_act", "#);
    let g = check_rewrite("fuse-conv-residual-relu", &src, &want);
    assert_eq!(g.nodes.len(), 1, "{}", print(&g));
    // An activation already fused, or no residual: nothing to move.
    check_not_applicable(
        "fuse-conv-residual-relu",
        &conv(
            r#"activation="relu", "#,
            r#"%9 "y": f32[1,4,6,6] = Relu "relu"(%5)"#,
        ),
    );
    check_not_applicable(
        "fuse-conv-residual-relu",
        &conv("", r#"%9 "y": f32[1,4,6,6] = Relu "relu"(%5)"#).replace("%2, %8)", "%2, _)"),
    );
}

#[test]
fn relu6_after_residual() {
    let src = conv("", r#"%9 "y": f32[1,4,6,6] = Clip "relu6"(%5, %3, %4)"#);
    let want =
        fused(r#"activation="clip", clip_max=6.0, clip_min=0.0, epilogue="bias_residual_act", "#);
    check_rewrite("fuse-conv-residual-clip", &src, &want);
    // Bounds that are not constants stay a Clip.
    let var = conv("", r#"%9 "y": f32[1,4,6,6] = Clip "relu6"(%5, %3, %10)"#).replace(
        r#"%8 "r": f32[1,4,6,6])"#,
        r#"%8 "r": f32[1,4,6,6], %10 "h": f32[])"#,
    );
    check_not_applicable("fuse-conv-residual-clip", &var);
}

/// A bf16 convolution (fp32 output) adding fp32 residual `%8` in order `epilogue`;
/// `res` replaces the residual argument.
fn low_conv(epilogue: &str, res: &str, extra: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": bf16[1,8,6,6], %8 "r": f32[1,4,6,6]) -> (%5) {{
  %1 "w": bf16[4,8,3,3] = const {w}
  %2 "b": f32[4] = const [0.1, -0.1, 0.2, -0.2]
  {extra}
  %5 "c": f32[1,4,6,6] = FusedConv "c"(%0, %1, %2, {res}) {{activation="relu", epilogue="{epilogue}", output_dtype=dtype f32, pads=ints[1,1,1,1]}}
}}"#,
        w = vals(288, 16)
    )
}

#[test]
fn residual_before_relu_reads_bf16() {
    // Rounds the residual to bf16 once: within the precision rules' 2e-2.
    let cast = r#"%6 "rl": bf16[1,4,6,6] = Cast "rc"(%8) {to=dtype bf16}"#;
    check_rewrite_within(
        "precision-conv-residual",
        &low_conv("bias_residual_act", "%8", ""),
        &low_conv("bias_residual_act", "%6", cast),
        Some(2e-2),
    );
    // A residual added after the activation stays fp32 (MobileNetV2's order).
    check_not_applicable(
        "precision-conv-residual",
        &low_conv("bias_act_residual", "%8", ""),
    );
}

/// ResNet's bottleneck tail from the exporter's ops: Conv, Add of the block input,
/// Relu.
fn bottleneck_tail() -> String {
    format!(
        r#"graph "tail"(%0 "x": f32[2,8,5,5]) -> (%6) {{
  %1 "w": f32[8,8,3,3] = const {w}
  %2 "b": f32[8] = const {b}
  %3 "c": f32[2,8,5,5] = Conv "conv"(%0, %1, %2) {{kernel_shape=ints[3,3], pads=ints[1,1,1,1]}}
  %4 "s": f32[2,8,5,5] = Add "add"(%3, %0)
  %6 "y": f32[2,8,5,5] = Relu "relu"(%4)
}}"#,
        w = vals(576, 31),
        b = vals(8, 32),
    )
}

fn load(src: &str) -> Verified {
    verify(parse(src).expect("parses")).expect("verifies")
}

#[test]
fn bottleneck_tail_is_one_conv() {
    let before = load(&bottleneck_tail());
    let out = optimize(before.clone(), &Config::default()).expect("optimizes");
    let g = &out.graph;
    assert_eq!(g.nodes.len(), 1, "{}", print(g));
    let n = &g.nodes[0];
    assert_eq!(n.op.name(), "FusedConv");
    assert_eq!(n.attrs.str_or("activation", "none").unwrap(), "relu");
    assert_eq!(
        n.attrs.str_or("epilogue", "bias_act_residual").unwrap(),
        "bias_residual_act"
    );
    let ins = inputs(&before);
    let want = interp::run(&before, &ins).expect("runs")[0].to_f64_vec();
    let got = interp::run(g, &ins).expect("runs")[0].to_f64_vec();
    for (a, b) in want.iter().zip(&got) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "{a} vs {b}");
    }
}
