//! Generated CUDA kernels against the CPU reference interpreter, on a GPU: every
//! element-wise kernel of the shared models (optimized in fp32, bf16 and fp16) runs on
//! pseudo-random inputs (the graph's own constants where a parameter is one) and must
//! match the interpreter's result for its node: fp32 within rtol 1e-5 / atol 1e-6 (GPU
//! and CPU transcendental functions differ in the last bits), bf16/fp16 outputs within
//! one unit of their last place (rtol 1e-2), integers and booleans exactly. bf16/f16
//! attention is compared with the f32 interpreter by relative L2 (1e-2), fp32
//! convolutions and reductions by relative L2 (1e-5): see the test for why.
//!
//! It needs an NVIDIA GPU, so it is `#[ignore]`d here (CI has none: ignored, never
//! counted as passed); scripts/gpu-check.sh runs it on the GPU machine with `--ignored`.

use gopt::codegen::cuda::emit_kernels;
use gopt::ir::{DType, Tensor};
use gopt::pipeline::{specialize, Options};
use gopt::runtime::cuda::Device;
use std::collections::BTreeMap;
use std::path::PathBuf;

mod common;
use common::{close, node_inputs, reference, KERNEL_TOL};

fn repo() -> PathBuf {
    std::env::var("GOPT_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

fn rel_l2(got: &Tensor, want: &Tensor, bound: f64) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!("shape {:?} vs {:?}", got.shape(), want.shape()));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let num: f64 = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum();
    let den: f64 = w.iter().map(|b| b * b).sum();
    let e = (num / den.max(1e-30)).sqrt();
    if e.is_finite() && e <= bound {
        Ok(())
    } else {
        Err(format!("relative L2 error {e:.3e} > {bound:.0e}"))
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn generated_kernels_match_the_interpreter_on_the_gpu() {
    let dev = Device::open().unwrap_or_else(|e| panic!("{e}"));
    println!("device: {} ({})", dev.name, dev.arch);
    let mut checked = 0;
    // Kernels that also do a neighbour's work (attention reading Q/K/V in place from
    // the QKV GEMM's output, a row kernel storing the next Cast's type) read or write
    // values their node does not have: the whole-plan runs of the shared models
    // (`gopt test --backend cuda`, gpu-check's next step) check them.
    let mut absorbing = 0;
    for (name, bucket) in [
        ("bert_small", &[("batch", 1u64), ("seq", 128)][..]),
        ("gpt2_small", &[("batch", 1), ("seq", 128)][..]),
        ("mobilenet_v2", &[("batch", 1)][..]),
    ] {
        let path = repo()
            .join("tests/data/models")
            .join(name)
            .join("model.onnx");
        let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        for precision in ["fp32", "bf16", "fp16"] {
            let b: BTreeMap<String, u64> =
                bucket.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            let opts =
                Options::new().precision(gopt::Precision::from_name(precision).expect("precision"));
            let v = specialize(&model.model, &b, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
            let g = &v.graph;
            let (kernels, _) = emit_kernels(g).unwrap_or_else(|e| panic!("{e}"));
            let module = dev
                .compile(
                    &format!("{name} {precision}"),
                    &gopt::codegen::cuda::module_source(&kernels),
                )
                .unwrap_or_else(|e| panic!("{e}"));
            for (ki, k) in kernels.iter().enumerate() {
                let node = g
                    .nodes
                    .iter()
                    .find(|n| n.name == k.node)
                    .expect("kernel's node");
                let own: Vec<u32> = node
                    .inputs
                    .iter()
                    .flatten()
                    .chain(&node.outputs)
                    .map(|v| v.0)
                    .collect();
                if k.inputs.iter().chain(&k.outputs).any(|v| !own.contains(v)) {
                    absorbing += 1;
                    continue;
                }
                // Inputs: the graph's constants where they are, random tensors otherwise.
                let values = node_inputs(g, node, (ki * 31) as u64 + 7);
                // Attention in bf16/f16: ONNX's reference (and so the interpreter) rounds
                // every intermediate to the low type, including each running row sum,
                // which is itself ~1e-2 (relative L2) from the exact result at S=128; the
                // kernel keeps fp32 scores and sums. It is compared with the interpreter
                // run in f32 on the same rounded inputs, by relative L2 (1e-2).
                let exact_attention = matches!(node.op, gopt::ir::Op::Attention(_))
                    && values
                        .values()
                        .any(|t| matches!(t.dtype(), DType::BF16 | DType::F16));
                let widened: BTreeMap<u32, Tensor> = values
                    .iter()
                    .map(|(k, t)| {
                        let w = if exact_attention && matches!(t.dtype(), DType::BF16 | DType::F16)
                        {
                            t.cast(DType::F32)
                        } else {
                            t.clone()
                        };
                        (*k, w)
                    })
                    .collect();
                let want = reference(node, &widened);
                let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
                let outs: Vec<(DType, Vec<usize>)> = k
                    .outputs
                    .iter()
                    .map(|o| {
                        let ty = g.ty(gopt::ir::ValueId(*o)).expect("typed");
                        (
                            ty.dtype,
                            gopt::ir::dim::concrete(&ty.shape).expect("static"),
                        )
                    })
                    .collect();
                let got = dev
                    .run_kernel(&module, k, &params, &outs)
                    .unwrap_or_else(|e| panic!("{e}"));
                for (o, got) in k.outputs.iter().zip(&got) {
                    let j = node
                        .outputs
                        .iter()
                        .position(|v| v.0 == *o)
                        .expect("a kernel writes its node's outputs");
                    // Long fp32 sums (convolutions, reductions over hundreds of terms)
                    // add in another order on the GPU (tiles, warps): per element that
                    // reaches ~1e-4 relative where the sum cancels, so they are checked
                    // by relative L2 error (1e-5) instead.
                    let long_sum = matches!(
                        node.op.name(),
                        "Conv" | "FusedConv" | "ReduceMean" | "ReduceSum" | "GlobalAveragePool"
                    ) && want[j].dtype() == DType::F32;
                    let checked_result = if exact_attention {
                        rel_l2(got, &want[j], 1e-2)
                    } else if long_sum {
                        rel_l2(got, &want[j], 1e-5)
                    } else {
                        close(got, &want[j], KERNEL_TOL)
                    };
                    checked_result.unwrap_or_else(|m| {
                        panic!(
                            "{name} {precision}: kernel {} for node `{}` output {j}: {m}\n{}",
                            k.name, k.node, k.source
                        )
                    });
                }
                checked += 1;
            }
        }
    }
    println!(
        "cuda: {checked} kernels (element-wise, row, data movement) match the interpreter on the GPU; \
         {absorbing} that absorb a neighbour are left to the whole-plan model runs"
    );
    assert!(checked >= 20);
}

#[test]
fn without_a_gpu_the_device_says_so() {
    // On a machine with a GPU this opens it; without one it must be a clear error, not a
    // panic inside cudarc.
    match Device::open() {
        Ok(d) => println!("device: {} ({})", d.name, d.arch),
        Err(e @ gopt::runtime::RuntimeError::NoCuda(_)) => {
            assert!(e.to_string().contains("use another backend"), "{e}");
        }
        Err(e @ gopt::runtime::RuntimeError::Driver { .. }) => {
            println!("driver present, no usable GPU: {e}")
        }
        Err(e) => panic!("unexpected error opening the GPU: {e}"),
    }
}

/// Bandwidth of generated kernels on large tensors (the issue's bar: 70% of the
/// 4.3 TB/s device-to-device copy). Bytes counted: every input read once, the output
/// written once.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn kernel_bandwidth_on_large_tensors() {
    let dev = Device::open().unwrap_or_else(|e| panic!("{e}"));
    let cases = [
        (
            "bf16 add",
            r#"graph "g"(%0 "x": bf16[16384,8192], %1 "y": bf16[16384,8192]) -> (%2) {
  %2 "z": bf16[16384,8192] = Add "add"(%0, %1)
}"#,
        ),
        (
            "bf16 gelu(x + b)",
            r#"graph "g"(%0 "x": bf16[16384,8192], %1 "b": bf16[16384,8192]) -> (%3) {
  %2 "s": bf16[16384,8192] = Add "add"(%0, %1)
  %3 "z": bf16[16384,8192] = Gelu "gelu"(%2)
}"#,
        ),
        (
            "f32 add",
            r#"graph "g"(%0 "x": f32[8192,8192], %1 "y": f32[8192,8192]) -> (%2) {
  %2 "z": f32[8192,8192] = Add "add"(%0, %1)
}"#,
        ),
        (
            "bf16 LayerNorm 65536x4096",
            r#"graph "g"(%0 "x": bf16[65536,4096], %1 "s": bf16[4096], %2 "b": bf16[4096]) -> (%3) {
  %3 "z": bf16[65536,4096] = LayerNormalization "ln"(%0, %1, %2) {axis=-1, epsilon=1e-5}
}"#,
        ),
        (
            "f32 row crop 4096x50304 -> 4096x50257 (GPT-2 logits)",
            r#"graph "g"(%0 "x": f32[4096,50304]) -> (%4) {
  %1 "s": i64[1] = const [0]
  %2 "e": i64[1] = const [50257]
  %3 "a": i64[1] = const [1]
  %4 "z": f32[4096,50257] = Slice "crop"(%0, %1, %2, %3)
}"#,
        ),
        (
            "bf16 row crop 4096x50304 -> 4096x50257",
            r#"graph "g"(%0 "x": bf16[4096,50304]) -> (%4) {
  %1 "s": i64[1] = const [0]
  %2 "e": i64[1] = const [50257]
  %3 "a": i64[1] = const [1]
  %4 "z": bf16[4096,50257] = Slice "crop"(%0, %1, %2, %3)
}"#,
        ),
        (
            "bf16 softmax 65536x4096",
            r#"graph "g"(%0 "x": bf16[65536,4096]) -> (%1) {
  %1 "z": bf16[65536,4096] = Softmax "sm"(%0) {axis=-1}
}"#,
        ),
    ];
    println!("| kernel | bytes | median µs | GB/s | % of 4.3 TB/s |");
    println!("|---|---:|---:|---:|---:|");
    for (what, src) in cases {
        let g = gopt::ir::verify(gopt::ir::text::parse(src).expect("parses")).expect("verifies");
        let mut g = g.into_inner();
        gopt::passes::group::fuse_elementwise(&mut g).expect("groups");
        let g = gopt::ir::verify(g).expect("verifies");
        let (kernels, _) = emit_kernels(&g).unwrap_or_else(|e| panic!("{e}"));
        let k = &kernels[0];
        let module = dev
            .compile(what, &gopt::codegen::cuda::module_source(&kernels))
            .unwrap_or_else(|e| panic!("{e}"));
        let node = g.nodes.iter().find(|n| n.name == k.node).expect("node");
        let ins: Vec<(DType, Vec<usize>)> = k
            .inputs
            .iter()
            .map(|v| {
                let t = g.ty(gopt::ir::ValueId(*v)).expect("typed");
                (t.dtype, gopt::ir::dim::concrete(&t.shape).expect("static"))
            })
            .collect();
        let oty = g.ty(node.outputs[0]).expect("typed");
        let oshape = gopt::ir::dim::concrete(&oty.shape).expect("static");
        let t = dev
            .time_kernel(&module, k, &ins, (oty.dtype, &oshape), 20, 10)
            .unwrap_or_else(|e| panic!("{e}"));
        let bytes: usize = ins
            .iter()
            .map(|(d, s)| s.iter().product::<usize>() * d.size())
            .sum::<usize>()
            + oshape.iter().product::<usize>() * oty.dtype.size();
        let gbs = bytes as f64 / (t.median_us * 1e-6) / 1e9;
        println!(
            "| {what} ({}) | {:.0} MB | {:.1} | {:.0} | {:.0}% |",
            if k.vectorized { "16-byte" } else { "scalar" },
            bytes as f64 / 1e6,
            t.median_us,
            gbs,
            gbs / 4300.0 * 100.0
        );
    }
}
