//! The optimizer on the shared models at fixed buckets: what it must recognize (the
//! issue's "done when"), that every pass can be switched off, and that the optimized
//! graphs' snapshots (snapshots/opt/) only change on purpose. Numerics against the
//! references are in tests/models.rs.

use gopt::ir::text::{print_with, PrintOptions};
use gopt::ir::Op;
use gopt::passes::PassReport;
use gopt::pipeline::{specialize, Options, Variant};
use std::collections::BTreeMap;
use std::path::Path;

fn compile(name: &str, bucket: &[(&str, u64)], opts: &Options) -> Variant {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/models")
        .join(name)
        .join("model.onnx");
    let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let b: BTreeMap<String, u64> = bucket.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    specialize(&model.model, &b, opts).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn count(v: &Variant, op: &str) -> usize {
    v.graph.nodes.iter().filter(|n| n.op.name() == op).count()
}

fn report(v: &Variant) -> &PassReport {
    v.report.as_ref().expect("optimized")
}

fn snapshot(name: &str, v: &Variant) {
    let text = print_with(
        &v.graph,
        PrintOptions {
            max_inline_elements: 8,
        },
    );
    insta::with_settings!({snapshot_path => "../snapshots/opt", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn bert_small_fuses_attention_norms_gelu_and_epilogues() {
    let v = compile(
        "bert_small",
        &[("batch", 1), ("seq", 128)],
        &Options::default(),
    );
    let r = report(&v);
    assert_eq!(r.attention.fused, 2, "{}", r.explain());
    assert_eq!(r.attention.qkv_one_gemm, 2, "{}", r.explain());
    assert_eq!(count(&v, "LayerNormalization"), 5);
    // Both GELUs end up in GEMM epilogues.
    let gelu_epilogues = v
        .graph
        .nodes
        .iter()
        .filter(|n| {
            n.op.name() == "FusedMatMul" && n.attrs.str_or("activation", "none").unwrap() == "gelu"
        })
        .count();
    assert_eq!(gelu_epilogues + count(&v, "Gelu"), 2, "{}", r.explain());
    // No bare GEMM-and-bias is left: every MatMul is fused or inside attention.
    assert_eq!(
        count(&v, "MatMul") + count(&v, "Gemm"),
        0,
        "{}",
        r.explain()
    );
    assert_eq!(count(&v, "Softmax") + count(&v, "Erf"), 0);
    assert!(r.after.est_us < r.before.est_us);
    snapshot("bert_small_b1_s128", &v);
}

#[test]
fn gpt2_small_fuses_causal_attention_with_one_qkv_gemm() {
    let v = compile(
        "gpt2_small",
        &[("batch", 1), ("seq", 128)],
        &Options::default(),
    );
    let r = report(&v);
    assert_eq!(r.attention.fused, 2, "{}", r.explain());
    assert_eq!(r.attention.causal, 2, "{}", r.explain());
    assert_eq!(r.attention.qkv_one_gemm, 2, "{}", r.explain());
    assert_eq!(
        count(&v, "Tanh") + count(&v, "Pow"),
        0,
        "GELU (tanh form) recognized: {}",
        r.explain()
    );
    assert_eq!(
        count(&v, "MatMul") + count(&v, "Gemm"),
        0,
        "{}",
        r.explain()
    );
    snapshot("gpt2_small_b1_s128", &v);
}

#[test]
fn mobilenet_v2_fuses_every_conv_clip() {
    let v = compile("mobilenet_v2", &[("batch", 1)], &Options::default());
    let r = report(&v);
    assert_eq!(count(&v, "Clip"), 0, "{}", r.explain());
    assert_eq!(count(&v, "Conv"), 0, "{}", r.explain());
    let clip = v
        .graph
        .nodes
        .iter()
        .filter(|n| {
            n.op.name() == "FusedConv" && n.attrs.str_or("activation", "none").unwrap() == "clip"
        })
        .count();
    assert_eq!(clip, 35, "{}", r.explain());
    snapshot("mobilenet_v2_b1", &v);
}

#[test]
fn bf16_pipeline_lowers_gemms_and_keeps_io_types() {
    let opts = Options::new().precision(gopt::Precision::Bf16);
    let v = compile("bert_small", &[("batch", 1), ("seq", 128)], &opts);
    let r = report(&v);
    let low = r
        .precisions
        .iter()
        .filter(|(p, _)| p.starts_with("bf16"))
        .map(|(_, n)| n)
        .sum::<usize>();
    assert!(low >= 8, "GEMMs and attention in bf16: {}", r.explain());
    let out = v.graph.ty(v.graph.outputs[0]).unwrap();
    assert_eq!(
        out.dtype,
        gopt::DType::F32,
        "outputs keep their declared type"
    );
    // Normalizations and softmax stay fp32.
    for n in v
        .graph
        .nodes
        .iter()
        .filter(|n| n.op.name() == "LayerNormalization")
    {
        let t = v.graph.ty(n.inputs[0].unwrap()).unwrap();
        assert_eq!(t.dtype, gopt::DType::F32);
    }
}

#[test]
fn every_pass_can_be_switched_off() {
    let all = compile(
        "bert_small",
        &[("batch", 1), ("seq", 128)],
        &Options::default(),
    );
    let opts = Options::new().disable(gopt::Pass::Fusion);
    let v = compile("bert_small", &[("batch", 1), ("seq", 128)], &opts);
    assert_eq!(count(&v, "Attention"), 0);
    assert_eq!(count(&v, "FusedMatMul"), 0);
    assert!(report(&v).after.est_us > report(&all).after.est_us);
    let opts = Options::new().disable(gopt::Pass::Layout);
    let v = compile("bert_small", &[("batch", 1), ("seq", 128)], &opts);
    assert!(report(&v).padding.is_empty());
    assert!(
        !report(&all).padding.is_empty(),
        "333-wide FFN padded to 384"
    );
    let opts = Options::new()
        .precision(gopt::Precision::Bf16)
        .disable(gopt::Pass::Precision);
    let v = compile("bert_small", &[("batch", 1), ("seq", 128)], &opts);
    assert!(report(&v).precisions.keys().all(|p| !p.starts_with("bf16")));
    let opts = Options::new().optimize(false);
    let v = compile("bert_small", &[("batch", 1), ("seq", 128)], &opts);
    assert!(v.report.is_none());
    assert!(v.graph.nodes.iter().all(|n| !matches!(n.op, Op::Fused(_))));
}

#[test]
fn tight_budgets_stop_with_a_reason_not_an_error() {
    let opts = Options::default().max_iterations(1);
    let v = compile("bert_small", &[("batch", 1), ("seq", 128)], &opts);
    assert!(
        report(&v).stop_reason.contains("iteration limit"),
        "{}",
        report(&v).stop_reason
    );
    let opts = Options::default().max_nodes(150);
    let v = compile("gpt2_small", &[("batch", 1), ("seq", 128)], &opts);
    assert!(
        report(&v).stop_reason.contains("e-node limit"),
        "{}",
        report(&v).stop_reason
    );
}

/// The import fixtures (tests/in/import), every symbolic dim bound to 2, optimized:
/// snapshots/opt/fixture_<name>.snap, each paired with the semantic check that the
/// optimized graph computes what the imported one does.
#[test]
fn fixtures_optimized() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/in/import");
    for name in [
        "mlp",
        "conv_bn_relu6",
        "opset10_upgrades",
        "shape_arith",
        "constants",
        "if_capture",
    ] {
        let model = gopt::load_model(&dir.join(format!("{name}.onnx")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let bucket: BTreeMap<String, u64> = gopt::passes::bucket::symbols(&model.model.graph)
            .into_iter()
            .map(|s| (s, 2))
            .collect();
        let v = specialize(&model.model, &bucket, &Options::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let plain = specialize(&model.model, &bucket, &Options::new().optimize(false))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let inputs = fixture_inputs(&plain.graph);
        let want =
            gopt::ir::interp::run(&plain.graph, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = gopt::ir::interp::run(&v.graph, &inputs)
            .unwrap_or_else(|e| panic!("{name} optimized: {e}"));
        for (w, g) in want.iter().zip(&got) {
            gopt::testing::compare::compare(
                g,
                w,
                gopt::testing::compare::Tolerance {
                    rtol: 1e-4,
                    atol: 1e-5,
                },
            )
            .unwrap_or_else(|m| panic!("{name}: {m}"));
        }
        snapshot(&format!("fixture_{name}"), &v);
    }
}

/// Deterministic inputs for a static graph: floats in [-1, 1), small integers, `true`.
fn fixture_inputs(g: &gopt::ir::Graph) -> Vec<gopt::Tensor> {
    g.inputs
        .iter()
        .map(|&v| {
            let ty = g.ty(v).expect("typed");
            let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
            let n: usize = shape.iter().product();
            let vals: Vec<f64> = (0..n)
                .map(|i| match ty.dtype {
                    gopt::DType::Bool => 1.0,
                    d if d.is_int() => (i % 3) as f64,
                    _ => ((i * 37 % 101) as f64) / 50.5 - 1.0,
                })
                .collect();
            gopt::Tensor::from_f64s(ty.dtype, &shape, &vals).expect("tensor")
        })
        .collect()
}
