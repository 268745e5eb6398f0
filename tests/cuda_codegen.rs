//! CUDA kernels without a GPU: every kernel the CUDA emitter generates for the shared
//! models, optimized in fp32, bf16 and fp16, compiles with NVRTC for sm_90 (the H200).
//! NVRTC and the CUDA headers come from the pip wheels pinned in
//! scripts/requirements.txt (CUDA 13.0, the GPU machines' driver); scripts/test.sh puts
//! them on `LD_LIBRARY_PATH` and in `GOPT_CUDA_INCLUDE`. Without them this test fails
//! and says how to get them: a kernel that was never compiled does not count. The
//! generated source is also snapshotted (snapshots/cuda/).

use gopt::codegen::cuda::{emit_kernels, module_source};
use gopt::pipeline::{specialize, Options};
use std::collections::BTreeMap;
use std::path::Path;

mod common;
use common::{compile, nvrtc_ready};

fn model_kernels(
    name: &str,
    bucket: &[(&str, u64)],
    precision: &str,
) -> Vec<gopt::codegen::cuda::Kernel> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/models")
        .join(name)
        .join("model.onnx");
    let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let b: BTreeMap<String, u64> = bucket.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let opts = Options::new().precision(gopt::Precision::from_name(precision).expect("precision"));
    let v = specialize(&model.model, &b, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    emit_kernels(&v.graph)
        .unwrap_or_else(|e| panic!("{name} {precision}: {e}"))
        .0
}

#[test]
fn every_generated_kernel_of_the_shared_models_compiles_for_sm90() {
    nvrtc_ready();
    let mut compiled = 0;
    let mut vectorized = 0;
    for (name, bucket) in [
        ("bert_small", &[("batch", 1), ("seq", 128)][..]),
        ("gpt2_small", &[("batch", 1), ("seq", 128)][..]),
        ("mobilenet_v2", &[("batch", 1)][..]),
    ] {
        for precision in ["fp32", "bf16", "fp16"] {
            let kernels = model_kernels(name, bucket, precision);
            let src = module_source(&kernels);
            if let Err(e) = compile(&src) {
                panic!("{name} {precision}: NVRTC rejected the module:\n{e}\n{src}");
            }
            compiled += kernels.len();
            vectorized += kernels.iter().filter(|k| k.vectorized).count();
        }
    }
    println!("cuda: {compiled} kernels (element-wise, row, data movement) compiled for sm_90 ({vectorized} vectorized)");
    assert!(
        compiled >= 20,
        "only {compiled} kernels: the emitter lost coverage"
    );
}

#[test]
fn nvrtc_rejects_a_broken_kernel() {
    nvrtc_ready();
    let err = compile("extern \"C\" __global__ void k(float* x) { x[0] = undefined_name; }")
        .expect_err("a kernel that cannot compile must fail");
    assert!(err.contains("undefined_name"), "{err}");
}

#[test]
fn elementwise_source_snapshots() {
    for (name, bucket, precision) in [
        ("bert_small", &[("batch", 1), ("seq", 128)][..], "bf16"),
        ("mobilenet_v2", &[("batch", 1)][..], "fp32"),
    ] {
        let src = module_source(&model_kernels(name, bucket, precision));
        insta::with_settings!({snapshot_path => "../snapshots/cuda", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(format!("{name}_{precision}_elementwise"), src);
        });
    }
}
