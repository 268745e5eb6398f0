//! Compile budgets and default buckets, end to end through the `gopt` binary: the
//! iteration and e-node budgets shape the output deterministically (same model and
//! options, byte-identical artifact) and say when they cut saturation short; the
//! wall-clock `--time-limit` covers the whole compile and, when passed, is an error
//! (exit 2, one line naming the stage), never a different artifact; default buckets
//! stop at the limits a model states, and a default bucket that cannot be built is
//! skipped with its reason (an explicitly requested one is an error).

use gopt_frontends::onnx::proto as pb;
use pb::tensor_shape_proto::{dimension::Value as DimValue, Dimension};
use prost::Message;
use std::path::Path;
use std::time::Duration;

mod common;
use common::cli::{assert_error, assert_ok, gopt, model_path, scratch};

const F32: i32 = 1;

fn read(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()))
}

// ---- building ONNX models -------------------------------------------------------------

enum D {
    N(i64),
    S(&'static str),
}

fn value_info(name: &str, dims: &[D]) -> pb::ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            denotation: None,
            value: Some(match d {
                D::N(n) => DimValue::DimValue(*n),
                D::S(s) => DimValue::DimParam(s.to_string()),
            }),
        })
        .collect();
    pb::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(pb::TypeProto {
            denotation: None,
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: Some(F32),
                shape: Some(pb::TensorShapeProto { dim }),
            })),
        }),
        ..Default::default()
    }
}

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> pb::NodeProto {
    pb::NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn f32_init(name: &str, dims: &[i64], values: &[f32]) -> pb::TensorProto {
    pb::TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(F32),
        float_data: values.to_vec(),
        ..Default::default()
    }
}

fn model(
    nodes: Vec<pb::NodeProto>,
    inputs: Vec<pb::ValueInfoProto>,
    outputs: Vec<pb::ValueInfoProto>,
    inits: Vec<pb::TensorProto>,
) -> pb::ModelProto {
    pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(18),
        }],
        producer_name: Some("gopt-tests".into()),
        graph: Some(pb::GraphProto {
            name: Some("g".into()),
            node: nodes,
            input: inputs,
            output: outputs,
            initializer: inits,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn write_model(dir: &Path, m: &pb::ModelProto) -> String {
    let path = dir.join("model.onnx");
    std::fs::write(&path, m.encode_to_vec()).expect("write model");
    path.display().to_string()
}

/// A chain of `n` element-wise nodes on X: f32 [4]: Add of a constant, then Relu,
/// alternating.
fn chain_model(n: usize) -> pb::ModelProto {
    let mut nodes = Vec::with_capacity(n);
    let mut prev = "X".to_string();
    for i in 0..n {
        let out = if i + 1 == n {
            "Y".to_string()
        } else {
            format!("v{i}")
        };
        let name = format!("n{i}");
        nodes.push(if i % 2 == 0 {
            node("Add", &name, &[&prev, "C"], &[&out])
        } else {
            node("Relu", &name, &[&prev], &[&out])
        });
        prev = out;
    }
    model(
        nodes,
        vec![value_info("X", &[D::N(4)])],
        vec![value_info("Y", &[D::N(4)])],
        vec![f32_init("C", &[4], &[0.5, -0.25, 1.0, -2.0])],
    )
}

/// `Y = X + C` with X: f32 [batch, seq] and C: f32 [1, 64]: only `seq` = 64 (or 1)
/// broadcasts, which nothing in the model states as a limit, so only specializing
/// finds it.
fn fixed_seq_model() -> pb::ModelProto {
    let c: Vec<f32> = (0..64).map(|i| i as f32 * 0.5).collect();
    model(
        vec![node("Add", "add", &["X", "C"], &["Y"])],
        vec![value_info("X", &[D::S("batch"), D::S("seq")])],
        vec![value_info("Y", &[D::S("batch"), D::S("seq")])],
        vec![f32_init("C", &[1, 64], &c)],
    )
}

// ---- deterministic budgets --------------------------------------------------------------

/// A tight e-node budget cuts saturation at the same point on every run: two compiles
/// give byte-identical plans and kernels, and the report says the budget cut it.
#[test]
fn tight_budgets_give_byte_identical_artifacts_and_say_so() {
    let dir = scratch("tight_budgets_give_byte_identical_artifacts_and_say_so");
    let m = model_path("gpt2_small");
    let mut plans = Vec::new();
    for run in ["a", "b"] {
        let out_dir = dir.join(run);
        let out = gopt(&[
            "compile",
            &m,
            "--bind",
            "batch=1",
            "--bind",
            "seq=32",
            "--max-nodes",
            "160",
            "-o",
            out_dir.to_str().expect("utf-8 path"),
        ]);
        assert_ok(&out);
        assert!(
            out.stdout
                .contains("budget: saturation stopped at the e-node limit"),
            "the report should say the e-node budget cut saturation:\n{}",
            out.stdout
        );
        plans.push(
            ["plan.json", "kernels.cu", "weights.bin", "report.md"].map(|f| read(&out_dir, f)),
        );
    }
    for (i, f) in ["plan.json", "kernels.cu", "weights.bin", "report.md"]
        .iter()
        .enumerate()
    {
        assert!(plans[0][i] == plans[1][i], "{f} differs between runs");
    }
}

#[test]
fn an_iteration_budget_is_reported_in_text_and_json() {
    let m = model_path("bert_small");
    let args = [
        "compile",
        m.as_str(),
        "--bind",
        "batch=1",
        "--bind",
        "seq=32",
        "--max-iterations",
        "1",
        "--target",
        "none",
    ];
    let out = gopt(&args);
    assert_ok(&out);
    assert!(
        out.stdout
            .contains("budget: saturation stopped at the iteration limit (1 iterations"),
        "{}",
        out.stdout
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = gopt(&json_args);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    let cut = &v["buckets"][0]["optimizer"]["budget_cut"];
    assert!(
        cut.as_str()
            .is_some_and(|s| s.contains("iteration limit") && s.contains("--max-iterations 1")),
        "budget_cut: {cut}"
    );
    // Saturated with the default budgets: no budget line.
    let out = gopt(&args[..args.len() - 4]);
    assert_ok(&out);
    assert!(!out.stdout.contains("budget:"), "{}", out.stdout);
}

/// The library's default budgets keep saturating the shared models at their usual
/// buckets (their results, and the snapshots in snapshots/opt, stay as they were).
#[test]
fn default_budgets_saturate_the_shared_models() {
    let models: [(&str, &[&str]); 3] = [
        ("bert_small", &["batch=1", "seq=128"]),
        ("gpt2_small", &["batch=1", "seq=128"]),
        ("mobilenet_v2", &["batch=1"]),
    ];
    for (name, binds) in models {
        let m = model_path(name);
        let mut args = vec!["compile", m.as_str(), "--target", "none", "--explain"];
        for b in binds {
            args.extend(["--bind", *b]);
        }
        let out = gopt(&args);
        assert_ok(&out);
        assert!(
            out.stdout.contains("stopped: saturated"),
            "{name}:\n{}",
            out.stdout
        );
    }
}

// ---- the time limit ---------------------------------------------------------------------

/// A time limit too small for the compile is an error naming the limit and the stage,
/// not an artifact cut by timing.
#[test]
fn a_tiny_time_limit_is_an_error_not_a_different_artifact() {
    let dir = scratch("a_tiny_time_limit_is_an_error_not_a_different_artifact");
    let out_dir = dir.join("out");
    let out = gopt(&[
        "compile",
        &model_path("gpt2_small"),
        "--bind",
        "batch=1",
        "--bind",
        "seq=128",
        "--time-limit",
        "0.005",
        "-o",
        out_dir.to_str().expect("utf-8 path"),
    ]);
    assert_error(
        &out,
        &[
            "compile exceeded --time-limit 0.005 s in stage",
            "--max-iterations/--max-nodes",
        ],
    );
    assert!(
        !out_dir.join("plan.json").exists(),
        "no artifact after a time-limit error"
    );
}

/// The limit covers every bucket of a compile, not each one: the error names the
/// bucket it ran out in.
#[test]
fn the_time_limit_covers_all_buckets_and_names_the_bucket() {
    let out = gopt(&[
        "compile",
        &model_path("bert_small"),
        "--buckets",
        "batch=1,2,4,8",
        "--buckets",
        "seq=32,64,128",
        "--target",
        "none",
        "--time-limit",
        "0.05",
    ]);
    // The 12 buckets take ~0.2 s together (import and verify ~4 ms), so the limit
    // runs out inside one of them.
    assert_error(&out, &["--time-limit 0.05 s in stage", ", bucket batch="]);
}

/// A 100,000-node chain with `--time-limit 1` finishes or stops with the time-limit
/// error within a few seconds (the limit once bounded only saturation: 16 s).
#[test]
fn a_large_chain_respects_the_time_limit() {
    let dir = scratch("a_large_chain_respects_the_time_limit");
    let m = write_model(&dir, &chain_model(100_000));
    let out = gopt(&["compile", &m, "--time-limit", "1", "--target", "none"]);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    if out.code != 0 {
        assert_error(&out, &["compile exceeded --time-limit 1 s in stage"]);
    }
    assert!(
        out.took < Duration::from_secs(10),
        "took {:?} with --time-limit 1 (exit {}):\n{}",
        out.took,
        out.code,
        out.stderr
    );
}

// ---- default buckets --------------------------------------------------------------------

/// bert_small has 256 positions: its default `seq` buckets stop there (and say why)
/// instead of failing the whole compile at 512.
#[test]
fn default_buckets_stop_at_the_models_position_table() {
    let out = gopt(&[
        "compile",
        &model_path("bert_small"),
        "--buckets",
        "batch=1",
        "--target",
        "none",
        "--json",
    ]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    let seqs: Vec<u64> = v["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .filter_map(|b| b["bucket"]["seq"].as_u64())
        .collect();
    assert_eq!(seqs, vec![32, 64, 128, 256], "{}", out.stdout);
    let limit = &v["bucket_limits"]["seq"];
    assert_eq!(limit[0].as_u64(), Some(256), "{}", out.stdout);
    assert!(
        limit[1].as_str().is_some_and(|s| s.contains("256")),
        "{limit}"
    );
}

/// Default buckets that cannot be specialized are skipped with their reason (text,
/// JSON, the artifact's report and plan); runs that need one get that reason.
#[test]
fn default_buckets_that_cannot_be_built_are_skipped_with_the_reason() {
    let dir = scratch("default_buckets_that_cannot_be_built_are_skipped_with_the_reason");
    let m = write_model(&dir, &fixed_seq_model());
    let out_dir = dir.join("out");
    let out_dir_s = out_dir.to_str().expect("utf-8 path").to_string();
    let out = gopt(&[
        "compile",
        &m,
        "--buckets",
        "batch=1",
        "--target",
        "wgsl",
        "-o",
        &out_dir_s,
    ]);
    assert_ok(&out);
    assert!(
        out.stdout.contains("bucket batch=1 seq=64:"),
        "{}",
        out.stdout
    );
    for seq in [32, 128, 256, 512] {
        let line = format!("skipped bucket batch=1 seq={seq}: ");
        assert!(
            out.stdout.contains(&line),
            "missing `{line}`:\n{}",
            out.stdout
        );
    }
    let report = String::from_utf8(read(&out_dir, "report.json")).expect("utf-8");
    let v: serde_json::Value = serde_json::from_str(&report).expect("json");
    assert_eq!(v["skipped"].as_array().map(Vec::len), Some(4), "{report}");
    let md = String::from_utf8(read(&out_dir, "report.md")).expect("utf-8");
    assert!(md.contains("- skipped batch=1 seq=32: "), "{md}");
    // The artifact knows: a run at a skipped size is refused with the reason.
    let x = gopt::Tensor::from_f64s(gopt::DType::F32, &[1, 32], &[0.0; 32]).expect("tensor");
    let npy = dir.join("x.npy");
    gopt::tensor_io::write_npy(&npy, &x).expect("write npy");
    let input = format!("X={}", npy.display());
    let out = gopt(&["run", &out_dir_s, "--input", &input, "--backend", "wgpu"]);
    assert_error(
        &out,
        &["batch=1 seq=32 was skipped when the model was compiled"],
    );
    // The one that was built runs.
    let x = gopt::Tensor::from_f64s(gopt::DType::F32, &[1, 64], &[1.0; 64]).expect("tensor");
    gopt::tensor_io::write_npy(&npy, &x).expect("write npy");
    let out = gopt(&["run", &out_dir_s, "--input", &input, "--backend", "wgpu"]);
    assert_ok(&out);
}

#[test]
fn requested_buckets_that_cannot_be_built_are_errors() {
    let dir = scratch("requested_buckets_that_cannot_be_built_are_errors");
    let m = write_model(&dir, &fixed_seq_model());
    // Asked for by name: an error, not a skip.
    let out = gopt(&[
        "compile",
        &m,
        "--buckets",
        "batch=1",
        "--buckets",
        "seq=32,64",
    ]);
    assert_error(
        &out,
        &[
            "bucket batch=1 seq=32 (asked for with --buckets)",
            "32 vs 64",
        ],
    );
    let out = gopt(&["compile", &m, "--bind", "batch=1", "--bind", "seq=32"]);
    assert_error(&out, &["32 vs 64"]);
    // No default bucket can be built: the compile fails, saying so.
    let c: Vec<f32> = vec![1.0; 48];
    let m48 = model(
        vec![node("Add", "add", &["X", "C"], &["Y"])],
        vec![value_info("X", &[D::S("batch"), D::S("seq")])],
        vec![value_info("Y", &[D::S("batch"), D::S("seq")])],
        vec![f32_init("C", &[1, 48], &c)],
    );
    let m = write_model(&dir, &m48);
    let out = gopt(&["compile", &m, "--buckets", "batch=1", "--target", "none"]);
    assert_error(&out, &["no bucket could be built (5 tried)", "seq=32"]);
}
