//! `gopt compile --explain-node NAME` end to end: the chain of a fused kernel of a real
//! model is printed per bucket; an unknown name ends with exit 2 and close names; the
//! artifact's report.md lists every changed kernel's chain, byte-identical across
//! compiles, and report.json carries the chains.

mod common;
use common::cli::{assert_error, assert_ok, gopt, model_path, scratch};

/// A kernel of bert_small at batch=1 seq=32: the first attention block's output
/// projection, a MatMul + bias Add + residual Add fused into one GEMM.
const FFN: &str = "/m/encoder/layer.0/attention/output/Add_output_0";

fn compile(extra: &[&str]) -> common::cli::Out {
    let model = model_path("bert_small");
    let mut args = vec![
        "compile",
        model.as_str(),
        "--bind",
        "batch=1",
        "--bind",
        "seq=32",
        "--target",
        "none",
    ];
    args.extend_from_slice(extra);
    gopt(&args)
}

#[test]
fn explain_node_prints_the_chain_of_a_fused_kernel() {
    let out = compile(&["--explain-node", FFN]);
    assert_ok(&out);
    let text = &out.stdout;
    let head = format!("== bucket batch=1,seq=32: kernel {FFN}");
    let at = text
        .find(&head)
        .unwrap_or_else(|| panic!("no `{head}` in\n{text}"));
    let lines: Vec<&str> = text[at..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(lines[0].contains("FusedMatMul[bias+residual]"), "{text}");
    assert!(lines[1].trim_start().starts_with("imported"), "{text}");
    let rules: Vec<&str> = lines[1..]
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let bias = rules.iter().position(|r| *r == "fuse-matmul-bias");
    let residual = rules
        .iter()
        .position(|r| r.starts_with("fuse-matmul-residual"));
    assert!(
        matches!((bias, residual), (Some(b), Some(r)) if b < r),
        "bias fused before the residual: {rules:?}\n{text}"
    );
    let last = lines[lines.len() - 1];
    assert!(
        last.contains("FusedMatMul(<Attention>, const, const, <"),
        "{text}"
    );
}

#[test]
fn unknown_explain_node_names_close_kernels() {
    let typo = FFN.replace("Add_output", "Add_outptu");
    let out = compile(&["--explain-node", &typo]);
    let line = assert_error(&out, &["--explain-node", "no kernel has that name"]);
    assert!(line.contains(FFN), "suggests the kernel: {line}");
    assert!(out.stdout.is_empty(), "nothing printed before the error");
}

#[test]
fn report_md_lists_the_chains_and_is_deterministic() {
    let dir = scratch("report_md_chains");
    let (a, b) = (dir.join("a"), dir.join("b"));
    for d in [&a, &b] {
        assert_ok(&compile(&[
            "-o",
            d.to_str().expect("utf-8 path"),
            "--explain",
        ]));
    }
    let md = std::fs::read_to_string(a.join("report.md")).expect("report.md");
    let md_b = std::fs::read_to_string(b.join("report.md")).expect("report.md");
    assert_eq!(md, md_b, "report.md is byte-identical across compiles");
    assert!(md.contains("### rewrite chains ("), "{md}");
    assert!(md.contains(&format!("{FFN}:\n")), "{md}");
    assert!(md.contains("fuse-matmul-bias"), "{md}");
    let json = std::fs::read_to_string(a.join("report.json")).expect("report.json");
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    let chains = v["buckets"][0]["optimizer"]["chains"]
        .as_array()
        .expect("chains in report.json");
    let c = chains
        .iter()
        .find(|c| c["kernel"] == FFN)
        .expect("the FFN kernel's chain");
    let steps = c["steps"].as_array().expect("steps");
    assert_eq!(steps[0]["rule"], "imported");
    assert!(steps.iter().all(|s| s["est_us"].as_f64().is_some()));
}
