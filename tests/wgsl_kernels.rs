//! Generated WGSL kernels on a real wgpu adapter against the CPU reference interpreter
//! (issue 5). CI runs them on Mesa's lavapipe (Vulkan on the CPU, installed
//! by `.ci/run`); a machine without any adapter fails here with the reason, never skips.
//! Every shader of the shared models (optimized in fp32 and fp16: element-wise, rows,
//! data movement with bool and integer data, GEMMs with their epilogues, convolutions,
//! pools, reductions, attention) runs on pseudo-random inputs and must match the
//! interpreter: f32 outputs within rtol 1e-5 / atol 1e-6 (erf is a polynomial with
//! |error| < 1.5e-7), f16 outputs within one unit of their last place (rtol 1e-2 / atol
//! 1e-3); long sums by relative L2 error (below).

use gopt::codegen::wgsl::emit_kernels;
use gopt::ir::{DType, Tensor};
use gopt::pipeline::{specialize, Options};
use gopt::runtime::wgpu::{adapters, WgpuDevice};
use std::collections::BTreeMap;
use std::path::Path;

mod common;
use common::{node_inputs, reference};

#[test]
fn element_wise_shaders_match_the_interpreter_on_an_adapter() {
    let dev = WgpuDevice::open(None).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "wgsl: adapter {} ({}, {}), f16 {}; all: {:?}",
        dev.adapter.name,
        dev.adapter.kind,
        dev.adapter.backend,
        dev.adapter.f16,
        adapters()
            .iter()
            .map(|a| a.name.clone())
            .collect::<Vec<_>>()
    );
    let mut checked = 0;
    for (name, bucket) in [
        ("bert_small", &[("batch", 1u64), ("seq", 128)][..]),
        ("gpt2_small", &[("batch", 1), ("seq", 128)][..]),
        ("mobilenet_v2", &[("batch", 1)][..]),
    ] {
        for precision in ["fp32", "fp16"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/models")
                .join(name)
                .join("model.onnx");
            let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let b: BTreeMap<String, u64> =
                bucket.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            let opts =
                Options::new().precision(gopt::Precision::from_name(precision).expect("precision"));
            let v = specialize(&model.model, &b, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
            let g = &v.graph;
            let (kernels, _) = emit_kernels(g).unwrap_or_else(|e| panic!("{e}"));
            for (ki, k) in kernels.iter().enumerate() {
                let node = g
                    .nodes
                    .iter()
                    .find(|n| n.name == k.node)
                    .expect("kernel's node");
                let values = node_inputs(g, node, (ki * 31) as u64 + 11);
                let want = reference(node, &values);
                let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
                // Every output the kernel writes (Split has several), with the
                // interpreter's tensor for it.
                let (outs, wants): (Vec<(DType, Vec<usize>)>, Vec<&Tensor>) = k
                    .outputs
                    .iter()
                    .map(|&v| {
                        let j = node
                            .outputs
                            .iter()
                            .position(|o| o.0 == v)
                            .expect("kernel output of its node");
                        let ty = g.ty(node.outputs[j]).expect("typed");
                        let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
                        ((ty.dtype, shape), &want[j])
                    })
                    .unzip();
                let got = dev
                    .run_kernel(k, &params, &outs)
                    .unwrap_or_else(|e| panic!("{name}: {}: {e}", k.name));
                for (got, want) in got.iter().zip(&wants) {
                    let (a, w) = (got.to_f64_vec(), want.to_f64_vec());
                    assert_eq!(got.dtype(), want.dtype());
                    let (atol, rtol) = match want.dtype() {
                        DType::F16 => (1e-3, 1e-2),
                        _ => (1e-6, 1e-5),
                    };
                    if matches!(
                        node.op.name(),
                        "MatMul"
                            | "FusedMatMul"
                            | "Conv"
                            | "FusedConv"
                            | "AveragePool"
                            | "GlobalAveragePool"
                            | "ReduceSum"
                            | "ReduceMean"
                            | "ReduceSumSquare"
                            | "ReduceL1"
                            | "ReduceL2"
                            | "Attention"
                    ) {
                        // Long sums (GEMMs, convolutions, averages, sums, attention's
                        // scores and weighted values) add in another order than the
                        // interpreter: compared by relative L2 error (1e-5 in f32, 1e-2
                        // with an f16 output). Attention in f16 also rounds differently:
                        // the interpreter rounds Q·K and the softmax weights to f16, the
                        // shader keeps them in f32.
                        let num: f64 = a.iter().zip(&w).map(|(x, y)| (x - y) * (x - y)).sum();
                        let den: f64 = w.iter().map(|y| y * y).sum();
                        let l2 = (num / den.max(1e-30)).sqrt();
                        let bound = if want.dtype() == DType::F16 {
                            1e-2
                        } else {
                            1e-5
                        };
                        assert!(
                            l2 <= bound,
                            "{name}: {} (node `{}`): relative L2 {l2:.3e}",
                            k.name,
                            k.node
                        );
                    } else {
                        for (i, (x, y)) in a.iter().zip(&w).enumerate() {
                            assert!(
                                (x - y).abs() <= atol + rtol * y.abs(),
                                "{name}: {} (node `{}`) element {i}: wgpu {x}, interpreter {y}\n{}",
                                k.name,
                                k.node,
                                k.source
                            );
                        }
                    }
                }
                checked += 1;
            }
        }
    }
    println!(
        "wgsl: {checked} element-wise, row, data-movement and GEMM shaders match the interpreter"
    );
    assert!(checked >= 10, "only {checked} shaders checked");
}
