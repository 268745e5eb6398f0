//! `gopt compile --json` lists each bucket's plan steps by kind (`kernel_kinds`): the
//! counts add up to the plan's steps, and the bf16 transformer plans spend no step on
//! moving data (transpose, split, slice, cast) around their GEMMs and attention: the
//! only cast left is one the model itself asks for on a non-float input (BERT's int64
//! attention mask to bool).

use serde_json::Value;
use std::sync::OnceLock;

mod common;
use common::cli::{assert_ok, gopt, model_path};

/// The transformers whose bf16 plans are checked.
const MODELS: [&str; 2] = ["bert_small", "gpt2_small"];

/// Kinds that only move or convert data.
const DATA_MOVES: [&str; 4] = ["transpose", "split", "slice", "cast"];

/// `gopt compile MODEL --precision bf16 --target TARGET --bind batch=1 --bind seq=128
/// --json`, parsed.
fn compile(model: &str, target: &str) -> Value {
    let out = gopt(&[
        "compile",
        &model_path(model),
        "--precision",
        "bf16",
        "--target",
        target,
        "--bind",
        "batch=1",
        "--bind",
        "seq=128",
        "--json",
    ]);
    assert_ok(&out);
    serde_json::from_str(&out.stdout).expect("compile --json is JSON")
}

/// The CUDA reports of [`MODELS`], compiled once for all tests of this file.
fn cuda_reports() -> &'static [(String, Value)] {
    static REPORTS: OnceLock<Vec<(String, Value)>> = OnceLock::new();
    REPORTS.get_or_init(|| {
        MODELS
            .iter()
            .map(|m| (m.to_string(), compile(m, "cuda")))
            .collect()
    })
}

/// A report's buckets (at least one).
#[track_caller]
fn buckets(report: &Value) -> &Vec<Value> {
    let b = report["buckets"].as_array().expect("buckets");
    assert!(!b.is_empty(), "no buckets: {report}");
    b
}

/// A bucket's `kernel_kinds` as (kind, count), checked to be counts.
#[track_caller]
fn kinds(bucket: &Value) -> Vec<(String, u64)> {
    let map = bucket["kernel_kinds"]
        .as_object()
        .unwrap_or_else(|| panic!("no kernel_kinds in bucket {bucket}"));
    map.iter()
        .map(|(k, n)| {
            let n = n
                .as_u64()
                .unwrap_or_else(|| panic!("`{k}`: {n} is not a count"));
            assert!(n > 0, "`{k}` listed with a count of 0");
            (k.clone(), n)
        })
        .collect()
}

fn count(kinds: &[(String, u64)], kind: &str) -> u64 {
    kinds.iter().find(|(k, _)| k == kind).map_or(0, |(_, n)| *n)
}

#[test]
fn kernel_kinds_count_every_step() {
    for (model, report) in cuda_reports() {
        for b in buckets(report) {
            let kinds = kinds(b);
            let cuda = &b["cuda"];
            let steps = cuda["steps"].as_u64().expect("cuda.steps");
            let gemms = cuda["gemms"].as_u64().expect("cuda.gemms");
            let kernels = cuda["kernels"].as_u64().expect("cuda.kernels");
            let total: u64 = kinds.iter().map(|(_, n)| n).sum();
            assert_eq!(total, steps, "{model}: kinds {kinds:?} vs {steps} steps");
            assert_eq!(count(&kinds, "gemm"), gemms, "{model}: {kinds:?}");
            // Kernel steps launch plan kernels (the rest are GEMM epilogues or folded).
            assert!(steps - gemms <= kernels, "{model}: {kinds:?} vs {cuda}");
            assert!(
                kinds.iter().all(|(k, _)| k
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')),
                "{model}: kinds are lowercase op names: {kinds:?}"
            );
        }
    }
    // WGSL: one kind per shader.
    let report = compile("bert_small", "wgsl");
    for b in buckets(&report) {
        let kinds = kinds(b);
        let shaders = b["wgsl"]["shaders"].as_u64().expect("wgsl.shaders");
        let total: u64 = kinds.iter().map(|(_, n)| n).sum();
        assert_eq!(total, shaders, "bert_small wgsl: {kinds:?}");
    }
}

/// Cast kernels of `model`'s bf16 CUDA plan (batch 1, seq 128) that convert one of the
/// model's own non-float values (BERT's int64 attention mask to bool): the model asks
/// for those, precision lowering did not add them.
fn model_casts(model: &str) -> u64 {
    let m = gopt::load_model(std::path::Path::new(&model_path(model))).expect("loads");
    let b = [("batch".to_string(), 1u64), ("seq".to_string(), 128)].into();
    let opts = gopt::pipeline::Options::new().precision(gopt::Precision::Bf16);
    let v = gopt::pipeline::specialize(&m.model, &b, &opts).expect("specializes");
    let g = &v.graph;
    let (kernels, _) = gopt::codegen::cuda::emit_kernels(g).expect("kernels");
    kernels
        .iter()
        .filter_map(|k| g.nodes.iter().find(|n| n.name == k.node))
        .filter(|n| n.op == gopt::ir::Op::Elementwise(gopt::ir::ops::ElementwiseOp::Cast))
        .filter(|n| {
            let x = n.inputs[0].expect("a Cast has an input");
            !g.ty(x).expect("typed").dtype.is_float()
        })
        .count() as u64
}

#[test]
fn bf16_transformer_plans_move_no_data() {
    let mut found = Vec::new();
    for (model, report) in cuda_reports() {
        let own_casts = model_casts(model);
        for b in buckets(report) {
            let kinds = kinds(b);
            let moves: Vec<String> = DATA_MOVES
                .iter()
                .filter_map(|&k| {
                    let n = count(&kinds, k);
                    match if k == "cast" {
                        n.saturating_sub(own_casts)
                    } else {
                        n
                    } {
                        0 => None,
                        n => Some(format!("{n} {k}")),
                    }
                })
                .collect();
            if !moves.is_empty() {
                found.push(format!(
                    "{model} {}: {} (all kinds: {kinds:?})",
                    b["bucket"],
                    moves.join(", ")
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "bf16 plans with data-movement kernels:\n{}",
        found.join("\n")
    );
}
