//! WGSL kernels without a GPU (issue 5, being built): every element-wise, row and
//! data-movement kernel the WGSL emitter makes for the shared models (fp32 and fp16) is parsed and validated by naga,
//! an invalid shader is reported with its node and text, ops without a WGSL form are
//! refused by name, and the generated source is snapshotted (snapshots/wgsl/).

use gopt::codegen::wgsl::{emit_kernels, validate, WgslKernel};
use gopt::codegen::CodegenError;
use gopt::pipeline::{specialize, Options};
use std::collections::BTreeMap;
use std::path::Path;

fn model_kernels(name: &str, bucket: &[(&str, u64)], precision: &str) -> Vec<WgslKernel> {
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
fn element_wise_shaders_of_the_shared_models_validate() {
    let mut count = 0;
    for (name, bucket) in [
        ("bert_small", &[("batch", 1u64), ("seq", 128)][..]),
        ("gpt2_small", &[("batch", 1), ("seq", 128)][..]),
        ("mobilenet_v2", &[("batch", 1)][..]),
    ] {
        for precision in ["fp32", "fp16"] {
            // emit_kernels validates each shader with naga before returning it.
            count += model_kernels(name, bucket, precision).len();
        }
    }
    println!("wgsl: {count} element-wise, row, data-movement and GEMM shaders validated by naga");
    assert!(
        count >= 10,
        "only {count} shaders: the emitter lost coverage"
    );
}

#[test]
fn an_invalid_shader_names_its_node_and_shows_its_text() {
    let k = WgslKernel {
        name: "k0".into(),
        node: "broken_node".into(),
        source: "@compute @workgroup_size(1) fn main() { let x: f32 = undefined_name; }".into(),
        workgroups: [1, 1, 1],
        inputs: vec![],
        outputs: vec![],
        index_check: None,
        loop_iterations: None,
    };
    match validate(&k) {
        Err(e @ CodegenError::Shader { .. }) => {
            let m = e.to_string();
            assert!(
                m.contains("broken_node") && m.contains("undefined_name"),
                "{m}"
            );
        }
        other => panic!("expected a shader error, got {other:?}"),
    }
}

#[test]
fn nodes_without_a_wgsl_kernel_are_listed_with_the_reason() {
    let g = gopt::ir::verify(
        gopt::ir::text::parse(
            r#"graph "g"(%0 "x": i64[4], %1 "y": i64[4]) -> (%2) {
  %2 "m": i64[4] = Div "the_div"(%0, %1)
}"#,
        )
        .expect("parses"),
    )
    .expect("verifies");
    let (kernels, others) = emit_kernels(&g).expect("emits");
    assert!(kernels.is_empty());
    assert_eq!(others.len(), 1);
    // WGSL has no 64-bit integers: an i64 division cannot be exact, so it is refused.
    assert_eq!(others[0].0, "the_div");
    assert!(
        others[0].1.contains("WGSL") && others[0].1.contains("Div"),
        "{:?}",
        others[0]
    );
    // bf16 storage has no WGSL type: refused, not silently widened.
    let g = gopt::ir::verify(
        gopt::ir::text::parse(
            r#"graph "g"(%0 "x": bf16[4]) -> (%1) {
  %1 "r": bf16[4] = Relu "relu"(%0)
}"#,
        )
        .expect("parses"),
    )
    .expect("verifies");
    let (kernels, others) = emit_kernels(&g).expect("emits");
    assert!(
        kernels.is_empty() && others[0].1.contains("bf16"),
        "{others:?}"
    );
}

#[test]
fn wgsl_source_snapshot() {
    let ks = model_kernels("bert_small", &[("batch", 1), ("seq", 128)], "fp32");
    let src: Vec<String> = ks
        .iter()
        .map(|k| {
            format!(
                "// {} ({:?} workgroups)\n{}",
                k.name, k.workgroups, k.source
            )
        })
        .collect();
    insta::with_settings!({snapshot_path => "../snapshots/wgsl", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("bert_small_fp32_kernels", src.join("\n"));
    });
}
