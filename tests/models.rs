//! The real models in tests/data/models (MobileNetV2, a small BERT, a small GPT-2, with
//! ONNX Runtime reference outputs): every data set matches on the CPU interpreter, and
//! once batch and sequence length are bound, the exporters' shape arithmetic folds away
//! completely.

use gopt::testing::{run_case, Case, Options, Status};
use gopt::Bindings;
use std::path::{Path, PathBuf};

/// The tolerance the reference data was published with (tests/data/models/README.md).
const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-4;

fn model_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/models")
        .join(name)
}

#[track_caller]
fn check_numerics(name: &str) {
    let case = Case {
        name: name.to_string(),
        dir: model_dir(name),
    };
    let opts = Options {
        rtol: Some(RTOL),
        atol: Some(ATOL),
        jobs: None,
    };
    let r = run_case(&case, &opts);
    assert_eq!(r.status, Status::Pass, "{r}");
    assert_eq!(r.data_sets_passed, 2, "{r}");
}

#[test]
fn mobilenet_v2_matches_reference() {
    check_numerics("mobilenet_v2");
}

#[test]
fn bert_small_matches_reference() {
    check_numerics("bert_small");
}

#[test]
fn gpt2_small_matches_reference() {
    check_numerics("gpt2_small");
}

/// Ops that only exist to compute shapes or shape-derived constants.
const SHAPE_OPS: &[&str] = &["Shape", "Size", "ConstantOfShape", "Range"];

/// Binds batch=1, seq=128 and checks that no shape computation is left: no shape op,
/// no node computing only from constants, and every value's shape is concrete.
#[track_caller]
fn check_folds_to_static(name: &str) {
    let model = gopt::load_model(&model_dir(name).join("model.onnx"))
        .unwrap_or_else(|e| panic!("{name}: import failed: {e}"));
    let bindings: Bindings = [("batch".to_string(), 1), ("seq".to_string(), 128)]
        .into_iter()
        .collect();
    let g = gopt::prepare(&model.model, &bindings)
        .unwrap_or_else(|e| panic!("{name}: specialization failed: {e}"));
    let shape_ops: Vec<String> = g
        .nodes
        .iter()
        .filter(|n| SHAPE_OPS.contains(&n.op.name()))
        .map(|n| format!("{} ({})", n.name, n.op))
        .collect();
    assert!(
        shape_ops.is_empty(),
        "{name}: shape ops left: {shape_ops:?}"
    );
    let on_constants: Vec<String> = g
        .nodes
        .iter()
        .filter(|n| n.inputs.iter().flatten().all(|v| g.constant(*v).is_some()))
        .map(|n| format!("{} ({})", n.name, n.op))
        .collect();
    assert!(
        on_constants.is_empty(),
        "{name}: nodes left whose inputs are all constants: {on_constants:?}"
    );
    let derived = gopt::report::shape_computations(&g);
    assert!(
        derived.is_empty(),
        "{name}: {} shape computations left",
        derived.len()
    );
    let summary = gopt::report::GraphSummary::of(&g);
    assert!(
        summary.symbolic_values.is_empty(),
        "{name}: values with symbolic dims left: {:?}",
        summary.symbolic_values
    );
}

#[test]
fn bert_small_specializes_to_static_shapes() {
    check_folds_to_static("bert_small");
}

#[test]
fn gpt2_small_specializes_to_static_shapes() {
    check_folds_to_static("gpt2_small");
}
