//! FusedConv's `epilogue` attribute against the compositions it stands for, both run
//! through the interpreter: `"bias_residual_act"` is `act(conv(X, W) + B + residual)`
//! (ResNet's `relu(conv(x) + b + identity)`), the default `"bias_act_residual"` is
//! `act(conv(X, W) + B) + residual`; NCHW and NHWC, relu and clip, a broadcast residual.
//! An unknown order is an error naming the attribute, in inference and evaluation.

use gopt_ir::text::parse;
use gopt_ir::{infer_types, interp, DType, Tensor};

/// Deterministic pseudo-random values in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn tensor(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f64s(DType::F32, shape, &data(n, seed)).expect("shape matches")
}

fn run(src: &str, inputs: &[Tensor]) -> Vec<f64> {
    let g = parse(src).unwrap_or_else(|e| panic!("does not parse: {e}\n{src}"));
    let mut out = interp::run(&g, inputs).unwrap_or_else(|e| panic!("fails: {e}\n{src}"));
    out.remove(0).to_f64_vec()
}

#[track_caller]
fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "element {k}: {g} vs {w}"
        );
    }
}

/// `[X, W, B, residual]` for a 3x3 pad-1 convolution of 2x5x5x5 (NCHW) to 4 channels
/// with a residual of shape `res` (`[2, 4, 5, 5]` or one that broadcasts to it).
fn inputs(res: &[usize]) -> Vec<Tensor> {
    vec![
        tensor(&[2, 5, 5, 5], 1),
        tensor(&[4, 5, 3, 3], 2),
        tensor(&[4], 3),
        tensor(res, 4),
    ]
}

fn ty(shape: &[usize]) -> String {
    let d: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("f32[{}]", d.join(","))
}

/// The fused node with attributes `attrs` (besides the padding).
fn fused(res: &[usize], attrs: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[2,5,5,5], %1 "w": f32[4,5,3,3], %2 "b": f32[4], %3 "r": {}) -> (%4) {{
  %4 "y" = FusedConv "cv"(%0, %1, %2, %3) {{{attrs}, pads=ints[1,1,1,1]}}
}}
"#,
        ty(res)
    )
}

const RELU: &str = r#"Relu "relu"({in})"#;
const CLIP: &str = r#"Clip "clip"({in}, %8, %9)"#;

/// The primitive composition: activation `act` (an op reading `{in}`) before or after
/// the residual's Add.
fn composed(res: &[usize], act_then_res: bool, act: &str) -> String {
    let (a, b) = if act_then_res {
        (
            format!(r#"%6 "a" = {}"#, act.replace("{in}", "%5")),
            r#"%7 "y" = Add "add"(%6, %3)"#.to_string(),
        )
    } else {
        (
            r#"%6 "a" = Add "add"(%5, %3)"#.to_string(),
            format!(r#"%7 "y" = {}"#, act.replace("{in}", "%6")),
        )
    };
    format!(
        r#"graph "g"(%0 "x": f32[2,5,5,5], %1 "w": f32[4,5,3,3], %2 "b": f32[4], %3 "r": {}) -> (%7) {{
  %8 "lo": f32[] = const [-0.25]
  %9 "hi": f32[] = const [0.5]
  %5 "c" = Conv "conv"(%0, %1, %2) {{pads=ints[1,1,1,1]}}
  {a}
  {b}
}}
"#,
        ty(res)
    )
}

#[test]
fn residual_before_activation() {
    for res in [&[2, 4, 5, 5][..], &[4, 1, 1], &[1, 4, 5, 5]] {
        let ins = inputs(res);
        let want = run(&composed(res, false, RELU), &ins);
        let got = run(
            &fused(res, r#"activation="relu", epilogue="bias_residual_act""#),
            &ins,
        );
        assert_close(&got, &want);
        // The default order is the other composition, and they differ here.
        let other = run(&composed(res, true, RELU), &ins);
        let default = run(&fused(res, r#"activation="relu""#), &ins);
        assert_close(&default, &other);
        assert!(got.iter().zip(&default).any(|(a, b)| (a - b).abs() > 1e-3));
        let explicit = run(
            &fused(res, r#"activation="relu", epilogue="bias_act_residual""#),
            &ins,
        );
        assert_close(&explicit, &other);
    }
}

#[test]
fn residual_before_clip() {
    let res = [2, 4, 5, 5];
    let ins = inputs(&res);
    let want = run(&composed(&res, false, CLIP), &ins);
    let got = run(
        &fused(
            &res,
            r#"activation="clip", clip_min=-0.25, clip_max=0.5, epilogue="bias_residual_act""#,
        ),
        &ins,
    );
    assert_close(&got, &want);
}

#[test]
fn residual_before_activation_channels_last() {
    // The same numbers through the NHWC layout: transposes around the fused node.
    let res = [2, 4, 5, 5];
    let ins = inputs(&res);
    let want = run(&composed(&res, false, RELU), &ins);
    let src = r#"graph "g"(%0 "x": f32[2,5,5,5], %1 "w": f32[4,5,3,3], %2 "b": f32[4], %3 "r": f32[2,4,5,5]) -> (%7) {
  %4 "xt" = Transpose "tx"(%0) {perm=ints[0,2,3,1]}
  %5 "rt" = Transpose "tr"(%3) {perm=ints[0,2,3,1]}
  %6 "yt" = FusedConv "cv"(%4, %1, %2, %5) {activation="relu", epilogue="bias_residual_act", layout="NHWC", pads=ints[1,1,1,1]}
  %7 "y" = Transpose "ty"(%6) {perm=ints[0,3,1,2]}
}
"#;
    assert_close(&run(src, &ins), &want);
}

#[test]
fn order_without_activation_or_residual() {
    // With no activation, or no residual, the two orders are the same op.
    let res = [2, 4, 5, 5];
    let ins = inputs(&res);
    let plain = run(&fused(&res, r#"activation="none""#), &ins);
    let first = run(
        &fused(&res, r#"activation="none", epilogue="bias_residual_act""#),
        &ins,
    );
    assert_close(&first, &plain);
    let no_res = |attrs: &str| {
        format!(
            r#"graph "g"(%0 "x": f32[2,5,5,5], %1 "w": f32[4,5,3,3], %2 "b": f32[4]) -> (%4) {{
  %4 "y" = FusedConv "cv"(%0, %1, %2) {{activation="relu"{attrs}, pads=ints[1,1,1,1]}}
}}
"#
        )
    };
    let a = run(&no_res(""), &ins[..3]);
    let b = run(&no_res(r#", epilogue="bias_residual_act""#), &ins[..3]);
    assert_close(&b, &a);
}

#[test]
fn unknown_order_is_an_error() {
    let src = fused(
        &[2, 4, 5, 5],
        r#"activation="relu", epilogue="residual_first""#,
    );
    let g = parse(&src).expect("parses");
    let e = infer_types(&mut g.clone())
        .expect_err("unknown order")
        .to_string();
    assert!(
        e.contains("epilogue") && e.contains("residual_first"),
        "{e}"
    );
    let e = interp::run(&g, &inputs(&[2, 4, 5, 5]))
        .expect_err("unknown order")
        .to_string();
    assert!(
        e.contains("epilogue") && e.contains("residual_first"),
        "{e}"
    );
}
