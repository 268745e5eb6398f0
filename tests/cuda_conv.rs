//! CNN kernels of the CUDA emitter: convolutions (Conv, FusedConv), pools, reductions,
//! Split and Pad. Without a GPU, a matrix of cases in f32, bf16 and f16 (3x3 stride 1
//! and 2, 1x1, depthwise, grouped, the ResNet stem, dilation, every activation, bias,
//! residual, mixed output dtypes, NHWC) must compile with NVRTC for sm_90, unsupported
//! modes must be refused by name, and one convolution's source is snapshotted. On a
//! GPU (`#[ignore]`d here; scripts/gpu-check.sh runs them with `--ignored`) the same
//! cases run against the CPU reference interpreter, and a timing test prints the
//! ResNet-50 (batch 32, bf16) and MobileNetV2 convolutions' speed.

use gopt::codegen::cuda::{emit_kernels, module_source, Kernel};
use gopt::codegen::CodegenError;
use gopt::ir::ops::EvalCx;
use gopt::ir::{DType, Graph, Tensor, ValueId};
use gopt::runtime::cuda::Device;
use std::collections::BTreeMap;

#[path = "cuda_conv/cases.rs"]
mod cases;
use cases::{all_cases, conv, Conv};

mod common;
use common::{compile, nvrtc_ready, random};

fn graph(text: &str) -> gopt::ir::Verified {
    let g = gopt::ir::text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    gopt::ir::verify(g).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn kernels(g: &gopt::ir::Verified) -> Vec<Kernel> {
    let (k, others) = emit_kernels(g).unwrap_or_else(|e| panic!("{e}"));
    assert!(others.is_empty(), "nodes without a kernel: {others:?}");
    k
}

#[test]
fn cnn_kernels_compile_for_sm90() {
    nvrtc_ready();
    // One module per dtype (kernel names made unique), then each case alone on failure.
    let mut count = 0;
    let mut by_dtype: BTreeMap<String, Vec<Kernel>> = BTreeMap::new();
    for (i, (name, text)) in all_cases().iter().enumerate() {
        let g = graph(text);
        for mut k in kernels(&g) {
            let unique = format!("c{i}_{}", k.name);
            k.source = k.source.replace(&k.name, &unique);
            k.name = unique;
            by_dtype
                .entry(name.split(' ').next().unwrap_or("").to_string())
                .or_default()
                .push(k);
            count += 1;
        }
    }
    for (dt, ks) in &by_dtype {
        if compile(&module_source(ks)).is_err() {
            for k in ks {
                if let Err(e) = compile(&module_source(std::slice::from_ref(k))) {
                    panic!("{dt}: NVRTC rejected {}:\n{e}\n{}", k.name, k.source);
                }
            }
        }
    }
    println!("cuda: {count} CNN kernels compiled for sm_90");
    assert!(count >= 100, "only {count} kernels");
}

fn unsupported(text: &str) -> String {
    let g = gopt::ir::verify(gopt::ir::text::parse(text).expect("parses")).expect("verifies");
    match gopt::codegen::cuda::plan::build(&g) {
        Err(CodegenError::Unsupported { what, backend, .. }) => {
            assert_eq!(backend, "CUDA");
            what
        }
        Err(e) => panic!("expected Unsupported, got {e}"),
        Ok(_) => panic!("expected Unsupported, got a plan"),
    }
}

#[test]
fn unsupported_modes_are_refused_by_name() {
    let what = unsupported(
        "graph \"g\"(%0 \"x\": f32[1,2,4,4,4,4], %1 \"w\": f32[3,2,3,3,3,3]) -> (%2) {\n  %2 \"y\": f32[1,3,2,2,2,2] = Conv \"c\"(%0, %1)\n}",
    );
    assert!(what.contains("4-D"), "{what}");
    let what = unsupported(
        "graph \"g\"(%0 \"x\": f64[1,4,6,6], %1 \"w\": f64[8,4,3,3]) -> (%2) {\n  %2 \"y\": f64[1,8,4,4] = Conv \"c\"(%0, %1)\n}",
    );
    assert!(what.contains("f64"), "{what}");
    let what = unsupported(
        "graph \"g\"(%0 \"x\": f32[1,3,4,5]) -> (%2) {\n  %1 \"pads\": i64[8] = const [0, 0, 1, 1, 0, 0, 1, 1]\n  %2 \"y\": f32[1,3,6,7] = Pad \"p\"(%0, %1) {mode=\"symmetric\"}\n}",
    );
    assert!(what.contains("symmetric"), "{what}");
}

#[test]
fn conv_source_snapshot() {
    let mut c = conv("bf16", 16, 32, 3, 1, 1);
    c.act = "relu";
    c.residual = Some(vec![1, 32, 14, 14]);
    let ks = kernels(&graph(&c.text()));
    insta::with_settings!({snapshot_path => "../snapshots/cuda", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("conv_bf16_3x3_bias_relu_residual", ks[0].source);
    });
}

/// f32: |a - b| <= 1e-4 |b| + 1e-5 max(1, max |want|). The absolute term scales with the
/// output's magnitude because GPU and CPU add a convolution's K products in different
/// orders: the rounding error of a sum follows the size of its terms, and outputs near
/// zero come from cancelling terms of the typical output's size. f16/bf16: relative L2
/// error at most 1e-2 (both round one f32 accumulation once).
fn close(got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "{:?}{:?} vs {:?}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    if matches!(want.dtype(), DType::F16 | DType::BF16) {
        let num: f64 = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum();
        let den: f64 = w.iter().map(|b| b * b).sum();
        let rel = (num / den.max(1e-30)).sqrt();
        return if rel <= 1e-2 {
            Ok(())
        } else {
            Err(format!("relative L2 error {rel:e}"))
        };
    }
    let scale = w.iter().fold(1.0f64, |m, b| m.max(b.abs()));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if !((a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-5 * scale + 1e-4 * b.abs()) {
            return Err(format!("element {i}: GPU {a}, CPU {b}"));
        }
    }
    Ok(())
}

fn typed(g: &Graph, v: u32) -> (DType, Vec<usize>) {
    let t = g.ty(ValueId(v)).expect("typed");
    (t.dtype, gopt::ir::dim::concrete(&t.shape).expect("static"))
}

/// Runs every kernel of `text` on the GPU against the interpreter.
fn check_on_gpu(dev: &Device, name: &str, text: &str, seed: u64) -> Result<(), String> {
    let g = graph(text);
    let ks = kernels(&g);
    let module = dev
        .compile(name, &module_source(&ks))
        .map_err(|e| e.to_string())?;
    for k in &ks {
        let node = g
            .nodes
            .iter()
            .find(|n| n.name == k.node)
            .expect("kernel's node");
        let mut values: BTreeMap<u32, Tensor> = BTreeMap::new();
        for (j, v) in node.inputs.iter().flatten().enumerate() {
            let t = match g.constant(*v) {
                Some(c) => c.clone(),
                None => {
                    let (dt, s) = typed(&g, v.0);
                    random(dt, &s, seed * 31 + j as u64)
                }
            };
            values.insert(v.0, t);
        }
        let ins: Vec<Option<&Tensor>> = node
            .inputs
            .iter()
            .map(|i| i.and_then(|v| values.get(&v.0)))
            .collect();
        let lookup = |_: &str| None;
        let want = node
            .op
            .eval(&EvalCx { lookup: &lookup }, node, &ins)
            .map_err(|e| e.to_string())?;
        let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
        let outs: Vec<(DType, Vec<usize>)> = k.outputs.iter().map(|o| typed(&g, *o)).collect();
        let got = dev
            .run_kernel(&module, k, &params, &outs)
            .map_err(|e| e.to_string())?;
        for (o, got) in k.outputs.iter().zip(&got) {
            let j = node
                .outputs
                .iter()
                .position(|v| v.0 == *o)
                .expect("a node output");
            close(got, &want[j]).map_err(|m| format!("output {j}: {m}\n{}", k.source))?;
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn cnn_kernels_match_the_interpreter_on_the_gpu() {
    let dev = Device::open().unwrap_or_else(|e| panic!("{e}"));
    println!("device: {} ({})", dev.name, dev.arch);
    let mut failures = Vec::new();
    let cases = all_cases();
    for (i, (name, text)) in cases.iter().enumerate() {
        if let Err(e) = check_on_gpu(&dev, name, text, i as u64 + 1) {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    println!(
        "cuda: {} CNN cases match the interpreter on the GPU",
        cases.len()
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn conv_kernel_speed() {
    let dev = Device::open().unwrap_or_else(|e| panic!("{e}"));
    let rn = |c: usize, m: usize, hw: usize, k: usize, stride: usize| Conv {
        n: 32,
        hw,
        act: "relu",
        ..conv("bf16", c, m, k, stride, k / 2)
    };
    let cases = [
        ("ResNet-50 b32 stem 3->64 7x7 s2 @224", rn(3, 64, 224, 7, 2)),
        ("ResNet-50 b32 64->64 3x3 @56", rn(64, 64, 56, 3, 1)),
        ("ResNet-50 b32 256->64 1x1 @56", rn(256, 64, 56, 1, 1)),
        ("ResNet-50 b32 64->256 1x1 @56", rn(64, 256, 56, 1, 1)),
        ("ResNet-50 b32 128->128 3x3 @28", rn(128, 128, 28, 3, 1)),
        ("ResNet-50 b32 256->256 3x3 @14", rn(256, 256, 14, 3, 1)),
        ("ResNet-50 b32 512->512 3x3 @7", rn(512, 512, 7, 3, 1)),
        (
            "ResNet-50 b32 1024->2048 1x1 s2 @14",
            rn(1024, 2048, 14, 1, 2),
        ),
        (
            "MobileNetV2 b1 f32 dw 144 3x3 @56",
            Conv {
                hw: 56,
                group: 144,
                act: "clip",
                ..conv("f32", 144, 144, 3, 1, 1)
            },
        ),
        (
            "MobileNetV2 b1 f32 dw 960 3x3 @7",
            Conv {
                hw: 7,
                group: 960,
                act: "clip",
                ..conv("f32", 960, 960, 3, 1, 1)
            },
        ),
        (
            "MobileNetV2 b1 bf16 1x1 960->160 @7",
            Conv {
                hw: 7,
                ..conv("bf16", 960, 160, 1, 1, 0)
            },
        ),
        (
            "MobileNetV2 b1 bf16 1x1 24->144 @56",
            Conv {
                hw: 56,
                act: "clip",
                ..conv("bf16", 24, 144, 1, 1, 0)
            },
        ),
        (
            "MobileNetV2 b1 f32 1x1 24->144 @56",
            Conv {
                hw: 56,
                act: "clip",
                ..conv("f32", 24, 144, 1, 1, 0)
            },
        ),
    ];
    println!("| convolution | kernel | median µs | TFLOP/s |");
    println!("|---|---|---:|---:|");
    for (what, c) in cases {
        let g = graph(&c.text());
        let ks = kernels(&g);
        let k = &ks[0];
        let module = dev
            .compile(what, &module_source(&ks))
            .unwrap_or_else(|e| panic!("{e}"));
        let ins: Vec<(DType, Vec<usize>)> = k.inputs.iter().map(|v| typed(&g, *v)).collect();
        let (odt, os) = typed(&g, k.outputs[0]);
        let t = dev
            .time_kernel(&module, k, &ins, (odt, &os), 20, 10)
            .unwrap_or_else(|e| panic!("{e}"));
        let o = c.out_hw();
        let flops = 2.0 * (c.n * c.m * o * o * (c.c / c.group) * c.k * c.k) as f64;
        let kind = if k.source.contains("mma.sync") {
            "tensor cores"
        } else if k.source.contains("direct") {
            "direct"
        } else {
            "CUDA cores"
        };
        println!(
            "| {what} | {kind} {}x{} | {:.1} | {:.1} |",
            k.grid,
            k.block,
            t.median_us,
            flops / (t.median_us * 1e-6) / 1e12
        );
    }
}
