//! The shared models (MobileNetV2, small BERT, small GPT-2) compiled to WGSL and run as
//! whole plans through wgpu (issue 5): every data set must match its ONNX Runtime
//! reference, fp32 within rtol 1e-3 / atol 1e-4 (the published tolerance) and fp16
//! within a relative L2 error of 2e-2, as on the CPU. CI runs them on Mesa's lavapipe
//! (installed by `.ci/run`); without any adapter the test fails with the reason. A node
//! without a WGSL kernel is a failure here, never a fallback to the CPU.

use gopt::pipeline::Backend;
use gopt::testing::{run_case, Case, Options, Status};
use std::path::Path;

#[track_caller]
fn check(name: &str, precision: &str) {
    let case = Case {
        name: name.to_string(),
        // GOPT_REPO: where the repo is on a machine the binary was carried to.
        dir: std::env::var("GOPT_REPO")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf())
            .join("tests/data/models")
            .join(name),
    };
    let dev = gopt::wgpu::device(None).unwrap_or_else(|e| panic!("{e}"));
    let pipeline = gopt::Options::new()
        .precision(gopt::Precision::from_name(precision).expect("precision"))
        .backend(Backend::Wgpu)
        .wgsl_f16(dev.adapter.f16);
    let low = precision != "fp32" && dev.adapter.f16;
    let opts = Options {
        rtol: Some(1e-3),
        atol: Some(1e-4),
        jobs: None,
        pipeline: Some(pipeline),
        rel_l2: low.then_some(2e-2),
        fallback_cpu: false,
        plan_only: false,
    };
    let r = run_case(&case, &opts);
    println!("wgpu [{}]: {name} {precision}: {r}", dev.adapter.name);
    assert_eq!(r.status, Status::Pass, "{name} {precision} on wgpu: {r}");
    assert_eq!(r.data_sets_passed, 2, "{r}");
    assert!(r.note.is_none(), "{name} {precision}: {r}");
}

#[test]
fn bert_small_on_wgpu_matches_reference() {
    check("bert_small", "fp32");
    check("bert_small", "fp16");
}

#[test]
fn gpt2_small_on_wgpu_matches_reference() {
    check("gpt2_small", "fp32");
    check("gpt2_small", "fp16");
}

#[test]
fn mobilenet_v2_on_wgpu_matches_reference() {
    check("mobilenet_v2", "fp32");
    check("mobilenet_v2", "fp16");
}
