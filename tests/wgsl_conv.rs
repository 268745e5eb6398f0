//! CNN shaders of the WGSL emitter (convolutions, pools, reductions) on a real wgpu
//! adapter against the CPU reference interpreter. CI runs them on Mesa's lavapipe; a
//! machine without any adapter fails here with the reason, never skips. Every Conv /
//! FusedConv, pool and reduction kernel of MobileNetV2 (optimized in fp32 and fp16,
//! batch 1: channels-last convolutions) runs on pseudo-random inputs, then the CUDA
//! test matrix (tests/cuda_conv/cases.rs, f32 and f16) and a few hand-built graphs
//! (NCHW groups with dilation, stride and padding, convolutions sized for each
//! register tile of the implicit GEMM (NHWC vec4 and scalar gathers, NCHW, groups), MaxPool with ceil_mode and pads,
//! AveragePool counting pads both ways, ReduceMean over leading axes without keepdims).
//! Sums (convolutions, averages, sums) compare by relative L2 error, 1e-5 for f32
//! outputs (GPU and CPU add in other orders) and 1e-2 for f16 outputs; max / min pick
//! an element, so they compare element-wise (rtol 1e-5, atol 1e-6; f16 1e-2 / 1e-3).

use gopt::codegen::lower::{lower, Kind, Lowered};
use gopt::codegen::wgsl::{self, emit_kernels, WgslKernel};
use gopt::ir::{DType, Graph, Node, Tensor};
use gopt::pipeline::{specialize, Options};
use gopt::runtime::wgpu::WgpuDevice;
use std::collections::BTreeMap;
use std::path::Path;

mod common;
use common::{node_inputs, reference};

#[path = "cuda_conv/cases.rs"]
#[allow(dead_code)]
mod cases;
use cases::{conv as conv_case, conv_cases, one_d, other_cases, shape, Conv};

fn is_cnn(g: &gopt::ir::Verified, node: &Node) -> bool {
    match lower(g, node, wgsl::VIEWS) {
        Ok(Lowered::ConvGemm(_)) => true,
        Ok(Lowered::Kernel(spec)) => matches!(spec.kind(), Kind::Conv | Kind::Pool | Kind::Reduce),
        _ => false,
    }
}

/// Runs `k` on `dev` and compares with the interpreter; returns the error and what it
/// measures (output dtype, relative L2 or element-wise).
fn check(dev: &WgpuDevice, g: &Graph, k: &WgslKernel, seed: u64) -> Result<(f64, String), String> {
    let node = g
        .nodes
        .iter()
        .find(|n| n.name == k.node)
        .expect("kernel's node");
    let values = node_inputs(g, node, seed);
    let want = reference(node, &values);
    let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
    let ty = g.ty(node.outputs[0]).expect("typed");
    let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
    let got = dev
        .run_kernel(k, &params, &[(ty.dtype, shape)])
        .map_err(|e| e.to_string())?;
    if got[0].dtype() != want[0].dtype() || got[0].shape() != want[0].shape() {
        return Err(format!("{:?} vs {:?}", got[0].shape(), want[0].shape()));
    }
    let (a, w) = (got[0].to_f64_vec(), want[0].to_f64_vec());
    let f16 = want[0].dtype() == DType::F16;
    let picks = matches!(
        node.op.name(),
        "MaxPool" | "GlobalMaxPool" | "ReduceMax" | "ReduceMin"
    );
    if picks {
        let (atol, rtol) = if f16 { (1e-3, 1e-2) } else { (1e-6, 1e-5) };
        let mut worst = 0.0f64;
        for (i, (x, y)) in a.iter().zip(&w).enumerate() {
            let d = (x - y).abs();
            if d > atol + rtol * y.abs() {
                return Err(format!("element {i}: wgpu {x}, interpreter {y}"));
            }
            worst = worst.max(d / (atol + rtol * y.abs()) * rtol);
        }
        return Ok((worst, format!("{:?} max/min relative", want[0].dtype())));
    }
    let num: f64 = a.iter().zip(&w).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = w.iter().map(|y| y * y).sum();
    let l2 = (num / den.max(1e-30)).sqrt();
    let bound = if f16 { 1e-2 } else { 1e-5 };
    if !(l2 <= bound) {
        return Err(format!("relative L2 error {l2:.3e} (bound {bound:e})"));
    }
    Ok((l2, format!("{:?} relative L2", want[0].dtype())))
}

fn fmt(worst: &BTreeMap<String, f64>) -> String {
    let v: Vec<String> = worst.iter().map(|(k, e)| format!("{k} {e:.2e}")).collect();
    v.join(", ")
}

/// The worst error per kind of measure, for the report.
fn note(worst: &mut BTreeMap<String, f64>, (e, what): (f64, String)) {
    let w = worst.entry(what).or_insert(0.0);
    *w = w.max(e);
}

fn open() -> WgpuDevice {
    let dev = WgpuDevice::open(None).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "wgsl: adapter {} ({}, {}), f16 {}",
        dev.adapter.name, dev.adapter.kind, dev.adapter.backend, dev.adapter.f16
    );
    dev
}

#[test]
fn mobilenet_cnn_shaders_match_the_interpreter_on_an_adapter() {
    let dev = open();
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models/mobilenet_v2/model.onnx");
    let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{e}"));
    let b: BTreeMap<String, u64> = [("batch".to_string(), 1u64)].into();
    let mut checked = 0;
    for precision in ["fp32", "fp16"] {
        let opts =
            Options::new().precision(gopt::Precision::from_name(precision).expect("precision"));
        let v = specialize(&model.model, &b, &opts).unwrap_or_else(|e| panic!("{e}"));
        let g = &v.graph;
        let (kernels, others) = emit_kernels(g).unwrap_or_else(|e| panic!("{e}"));
        let missing: Vec<&(String, String)> = others
            .iter()
            .filter(|(n, _)| g.nodes.iter().any(|m| &m.name == n && is_cnn(g, m)))
            .collect();
        assert!(
            missing.is_empty(),
            "{precision}: CNN nodes without a shader: {missing:?}"
        );
        let (mut worst, mut count) = (BTreeMap::new(), 0);
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for (ki, k) in kernels.iter().enumerate() {
            let node = g.nodes.iter().find(|n| n.name == k.node).expect("node");
            if !is_cnn(g, node) {
                continue;
            }
            match check(&dev, g, k, (ki * 31) as u64 + 11) {
                Ok(r) => note(&mut worst, r),
                Err(m) => panic!(
                    "mobilenet_v2 {precision}: {} (node `{}`, {}): {m}\n{}",
                    k.name,
                    k.node,
                    node.op.name(),
                    k.source
                ),
            }
            count += 1;
            let kind = if k.source.contains("(implicit GEMM)") {
                "implicit GEMM"
            } else if k.source.contains("(direct,") {
                "direct"
            } else {
                node.op.name()
            };
            let layout = if k.source.contains(" NHWC ") || k.source.contains(", NHWC.") {
                " NHWC"
            } else {
                ""
            };
            *kinds.entry(format!("{kind}{layout}")).or_insert(0) += 1;
        }
        println!("wgsl: mobilenet_v2 {precision}: shaders {kinds:?}");
        println!(
            "wgsl: mobilenet_v2 {precision}: {count} conv/pool/reduce shaders match; worst: {}",
            fmt(&worst)
        );
        assert!(count >= 50, "{precision}: only {count} CNN shaders checked");
        checked += count;
    }
    println!("wgsl: {checked} mobilenet_v2 CNN shaders checked");
}

/// The extra hand-built cases: (name, graph text).
fn extra_cases(dt: &'static str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    let grouped = Conv {
        hw: 13,
        group: 2,
        dil: 2,
        stride: 2,
        pad: 2,
        plain: true,
        ..conv_case(dt, 8, 12, 3, 2, 2)
    };
    v.push((grouped.name(), grouped.text()));
    let nhwc_3x3 = Conv {
        nhwc: true,
        hw: 9,
        stride: 2,
        act: "clip",
        ..conv_case(dt, 3, 32, 3, 2, 1)
    };
    v.push((nhwc_3x3.name(), nhwc_3x3.text()));
    let pointwise = Conv {
        nhwc: true,
        hw: 7,
        residual: Some(vec![1, 7, 7, 40]),
        ..conv_case(dt, 24, 40, 1, 1, 0)
    };
    v.push((pointwise.name(), pointwise.text()));
    // The implicit GEMM's register tiles: 128x128 (NHWC, vec4 channels, permuted W),
    // 128x64 (1x1 read directly, odd M, K under one slice), and the small tiles with
    // scalar gathers, several images, NCHW and NHWC, groups.
    let tiled = [
        Conv {
            nhwc: true,
            n: 2,
            hw: 130,
            act: "relu",
            ..conv_case(dt, 4, 128, 3, 1, 1)
        },
        Conv {
            nhwc: true,
            hw: 130,
            residual: Some(vec![1, 130, 130, 70]),
            ..conv_case(dt, 12, 70, 1, 1, 0)
        },
        Conv {
            n: 3,
            hw: 30,
            act: "silu",
            ..conv_case(dt, 6, 36, 3, 2, 1)
        },
        Conv {
            nhwc: true,
            n: 2,
            hw: 11,
            dil: 2,
            ..conv_case(dt, 6, 20, 3, 2, 2)
        },
        Conv {
            nhwc: true,
            n: 2,
            hw: 10,
            group: 2,
            ..conv_case(dt, 16, 24, 3, 1, 1)
        },
        Conv {
            n: 2,
            hw: 9,
            bias: false,
            ..conv_case(dt, 20, 33, 1, 1, 0)
        },
    ];
    v.extend(tiled.iter().map(|c| (c.name(), c.text())));
    let one = |name: &str, xs: &[usize], ys: &[usize], consts: &str, op: &str| {
        (
            format!("{dt} {name}"),
            format!(
                "graph \"g\"(%0 \"x\": {dt}{}) -> (%9) {{\n{consts}  %9 \"y\": {dt}{} = {op}\n}}",
                shape(xs),
                shape(ys)
            ),
        )
    };
    let axes = |a: &str, n: usize| format!("  %1 \"axes\": i64[{n}] = const [{a}]\n");
    v.extend([
        one("MaxPool 3x3 s2 p1 ceil_mode", &[1, 4, 10, 10], &[1, 4, 6, 6], "", "MaxPool \"p\"(%0) {kernel_shape=ints[3,3], pads=ints[1,1,1,1], strides=ints[2,2], ceil_mode=1}"),
        one("MaxPool 2x2 dilation 2", &[1, 3, 9, 9], &[1, 3, 7, 7], "", "MaxPool \"p\"(%0) {kernel_shape=ints[2,2], dilations=ints[2,2]}"),
        one("AveragePool ceil_mode pads count_include_pad=1", &[1, 4, 10, 10], &[1, 4, 6, 6], "", "AveragePool \"p\"(%0) {kernel_shape=ints[3,3], pads=ints[1,1,1,1], strides=ints[2,2], ceil_mode=1, count_include_pad=1}"),
        one("AveragePool ceil_mode pads count_include_pad=0", &[1, 4, 10, 10], &[1, 4, 6, 6], "", "AveragePool \"p\"(%0) {kernel_shape=ints[3,3], pads=ints[1,1,1,1], strides=ints[2,2], ceil_mode=1, count_include_pad=0}"),
        one("AveragePool 1-D SAME_UPPER", &[2, 3, 11], &[2, 3, 6], "", "AveragePool \"p\"(%0) {kernel_shape=ints[3], strides=ints[2], auto_pad=\"SAME_UPPER\"}"),
        one("ReduceMean [0,2] keepdims=0", &[2, 3, 4, 5], &[3, 5], &axes("0, 2", 2), "ReduceMean \"r\"(%0, %1) {keepdims=0}"),
        one("ReduceMin [1]", &[3, 7, 5], &[3, 1, 5], &axes("1", 1), "ReduceMin \"r\"(%0, %1) {keepdims=1}"),
        one("ReduceL1 [-1]", &[6, 40], &[6, 1], &axes("-1", 1), "ReduceL1 \"r\"(%0, %1) {keepdims=1}"),
        one("ReduceL2 [-1] long", &[3, 3000], &[3], &axes("-1", 1), "ReduceL2 \"r\"(%0, %1) {keepdims=0}"),
        one("ReduceSumSquare all", &[4, 5, 6], &[], "", "ReduceSumSquare \"r\"(%0) {keepdims=0}"),
        one("ReduceMax [1,2] keepdims=0", &[2, 9, 300], &[2], &axes("1, 2", 2), "ReduceMax \"r\"(%0, %1) {keepdims=0}"),
    ]);
    v
}

#[test]
fn hand_built_cnn_cases_match_the_interpreter_on_an_adapter() {
    let dev = open();
    let mut cases: Vec<(String, String)> = Vec::new();
    for dt in ["f32", "f16"] {
        cases.extend(conv_cases(dt).iter().map(|c| (c.name(), c.text())));
        cases.push(one_d(dt));
        cases.extend(
            other_cases(dt)
                .into_iter()
                .filter(|(n, _)| !n.contains(" Pad ") && !n.contains(" Split ")),
        );
        cases.extend(extra_cases(dt));
    }
    let mut failures = Vec::new();
    let (mut worst, mut count) = (BTreeMap::new(), 0);
    for (i, (name, text)) in cases.iter().enumerate() {
        let g = gopt::ir::text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let g = gopt::ir::verify(g).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        let (ks, others) = emit_kernels(&g).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            others.is_empty(),
            "{name}: nodes without a shader: {others:?}"
        );
        for k in &ks {
            match check(&dev, &g, k, i as u64 * 7 + 1) {
                Ok(r) => note(&mut worst, r),
                Err(m) => failures.push(format!("{name}: {m}\n{}", k.source)),
            }
            count += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} shaders failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    println!(
        "wgsl: {count} hand-built CNN shaders match; worst: {}",
        fmt(&worst)
    );
    assert!(count >= 60, "only {count} shaders");
}

/// 3-D convolutions (X of rank 5: the direct kernel of `conv_nd`): Conv with groups,
/// strides, dilations, asymmetric pads, SAME padding and a bias, depthwise in f16, and
/// FusedConv epilogues (channels-last with a broadcast residual before the clip, NCDHW
/// silu into an f32 output, a full residual after a sigmoid).
#[test]
fn three_d_convolutions_match_the_interpreter_on_an_adapter() {
    let dev = open();
    let case = |ins: &str, y: &str, op: &str| {
        format!("graph \"g\"({ins}) -> (%9) {{\n  %9 \"y\": {y} = {op}\n}}")
    };
    let cases = [
        case(
            "%0 \"x\": f32[2,4,7,6,5], %1 \"w\": f32[6,2,3,2,3], %2 \"b\": f32[6]",
            "f32[2,6,3,5,3]",
            "Conv \"c\"(%0, %1, %2) {group=2, strides=ints[2,1,2], dilations=ints[1,2,1], pads=ints[0,1,1,1,0,2]}",
        ),
        case(
            "%0 \"x\": f32[1,3,7,6,5], %1 \"w\": f32[2,3,3,3,2]",
            "f32[1,2,4,3,3]",
            "Conv \"c\"(%0, %1) {strides=ints[2,2,2], auto_pad=\"SAME_LOWER\"}",
        ),
        case(
            "%0 \"x\": f16[2,4,5,6,7], %1 \"w\": f16[8,1,3,3,3], %2 \"b\": f16[8]",
            "f16[2,8,5,3,4]",
            "Conv \"c\"(%0, %1, %2) {group=4, strides=ints[1,2,2], pads=ints[1,1,1,1,1,1]}",
        ),
        case(
            "%0 \"x\": f32[2,4,5,6,8], %1 \"w\": f32[6,8,3,1,3], %2 \"b\": f32[6], %3 \"r\": f32[4,1,1,6]",
            "f32[2,4,5,6,6]",
            "FusedConv \"c\"(%0, %1, %2, %3) {layout=\"NHWC\", pads=ints[1,0,1,1,0,1], activation=\"clip\", clip_min=-0.5, clip_max=0.5, epilogue=\"bias_residual_act\"}",
        ),
        case(
            "%0 \"x\": f16[1,6,4,5,6], %1 \"w\": f16[4,3,2,2,2], %3 \"r\": f32[4,1,1,1]",
            "f32[1,4,3,4,5]",
            "FusedConv \"c\"(%0, %1, _, %3) {group=2, activation=\"silu\", output_dtype=dtype f32}",
        ),
        case(
            "%0 \"x\": f32[1,3,4,4,4], %1 \"w\": f32[5,3,3,3,3], %2 \"b\": f32[5], %3 \"r\": f32[1,5,4,4,4]",
            "f32[1,5,4,4,4]",
            "FusedConv \"c\"(%0, %1, %2, %3) {pads=ints[1,1,1,1,1,1], activation=\"sigmoid\"}",
        ),
    ];
    let (mut worst, mut failures) = (BTreeMap::new(), Vec::new());
    for (i, text) in cases.iter().enumerate() {
        let g = gopt::ir::text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let g = gopt::ir::verify(g).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let (ks, others) = emit_kernels(&g).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(others.is_empty() && ks.len() == 1, "{text}: {others:?}");
        assert!(
            ks[0].source.contains("(direct 3-D convolution)"),
            "{}",
            ks[0].source
        );
        match check(&dev, &g, &ks[0], i as u64 * 5 + 3) {
            Ok(r) => note(&mut worst, r),
            Err(m) => failures.push(format!("{text}: {m}\n{}", ks[0].source)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!(
        "wgsl: {} 3-D convolutions match; worst: {}",
        cases.len(),
        fmt(&worst)
    );
}

/// What the WGSL emitter says it has no kernel for, for a one-node graph.
fn refusal(text: &str) -> String {
    let g = gopt::ir::verify(gopt::ir::text::parse(text).expect("parses")).expect("verifies");
    let (ks, others) = emit_kernels(&g).unwrap_or_else(|e| panic!("{e}"));
    assert!(ks.is_empty(), "expected no kernel for\n{text}");
    assert_eq!(others.len(), 1, "{others:?}");
    others[0].1.clone()
}

#[test]
fn unsupported_cnn_modes_are_refused_by_name() {
    let what = refusal(&conv_case("bf16", 16, 32, 3, 1, 1).text());
    assert!(what.contains("bf16") && what.contains("WGSL"), "{what}");
    let what = refusal(
        "graph \"g\"(%0 \"x\": f32[1,2,4,4,4,4], %1 \"w\": f32[3,2,3,3,3,3]) -> (%2) {\n  %2 \"y\": f32[1,3,2,2,2,2] = Conv \"c\"(%0, %1)\n}",
    );
    assert!(what.contains("4-D") && what.contains("WGSL"), "{what}");
    let what = refusal(
        "graph \"g\"(%0 \"x\": bf16[2,5,7]) -> (%9) {\n  %1 \"axes\": i64[1] = const [1]\n  %9 \"y\": bf16[2,7] = ReduceSum \"r\"(%0, %1) {keepdims=0}\n}",
    );
    assert!(what.contains("bf16"), "{what}");
}
