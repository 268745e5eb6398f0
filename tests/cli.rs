//! The `gopt` binary end to end: each subcommand on the real models (exit codes, output
//! lines), and bad inputs (broken files, invalid graphs, unsafe external data, run-time
//! inputs that do not fit), each of which must end with exit code 2, one `error:` line
//! that says what is wrong, and no panic.

use gopt_frontends::onnx::proto as pb;
use pb::tensor_shape_proto::{dimension::Value as DimValue, Dimension};
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::cli::{assert_ok, error_line, gopt, model_path, root, scratch, Out};

/// Exit code 2, a single `error:` line mentioning every needle (any case), no panic.
#[track_caller]
fn assert_error(out: &Out, needles: &[&str]) {
    let line = error_line(out);
    let lower = line.to_lowercase();
    for n in needles {
        assert!(
            lower.contains(&n.to_lowercase()),
            "error should mention `{n}`: {line}"
        );
    }
}

const F32: i32 = 1;

// ---- building ONNX models -------------------------------------------------------------

enum D {
    N(i64),
    S(&'static str),
}

fn value_info(name: &str, elem: i32, dims: &[D]) -> pb::ValueInfoProto {
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
                elem_type: Some(elem),
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

fn model(
    nodes: Vec<pb::NodeProto>,
    inputs: Vec<pb::ValueInfoProto>,
    outputs: Vec<pb::ValueInfoProto>,
    inits: Vec<pb::TensorProto>,
    opset: i64,
) -> pb::ModelProto {
    pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
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

/// `Y = Relu(X)` with X: f32 [n, 3].
fn relu_model() -> pb::ModelProto {
    model(
        vec![node("Relu", "relu", &["X"], &["Y"])],
        vec![value_info("X", F32, &[D::S("n"), D::N(3)])],
        vec![value_info("Y", F32, &[D::S("n"), D::N(3)])],
        vec![],
        18,
    )
}

/// `Y = X + W`, with W an f32 [4] initializer described by `w`.
fn add_init_model(w: pb::TensorProto) -> pb::ModelProto {
    model(
        vec![node("Add", "add", &["X", "W"], &["Y"])],
        vec![value_info("X", F32, &[D::N(4)])],
        vec![value_info("Y", F32, &[D::N(4)])],
        vec![w],
        18,
    )
}

fn external_tensor(name: &str, dims: &[i64], entries: &[(&str, &str)]) -> pb::TensorProto {
    pb::TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(F32),
        data_location: Some(pb::tensor_proto::DataLocation::External as i32),
        external_data: entries
            .iter()
            .map(|(k, v)| pb::StringStringEntryProto {
                key: Some(k.to_string()),
                value: Some(v.to_string()),
            })
            .collect(),
        ..Default::default()
    }
}

fn write_model(dir: &Path, m: &pb::ModelProto) -> String {
    let path = dir.join("model.onnx");
    std::fs::write(&path, m.encode_to_vec()).expect("write model");
    path.display().to_string()
}

fn write_npy(dir: &Path, name: &str, t: &gopt::Tensor) -> String {
    let path = dir.join(name);
    gopt::tensor_io::write_npy(&path, t).expect("write npy");
    path.display().to_string()
}

fn f32_tensor(shape: &[usize]) -> gopt::Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| (i as f64) - (n as f64) / 2.0).collect();
    gopt::Tensor::from_f64s(gopt::DType::F32, shape, &v).expect("shape fits")
}

// ---- the subcommands on real models ---------------------------------------------------

#[test]
fn help_teaches_each_subcommand() {
    let out = gopt(&["--help"]);
    assert_ok(&out);
    for cmd in ["inspect", "run", "test", "compile", "bench", "adapters"] {
        assert!(out.stdout.contains(cmd), "{}", out.stdout);
        let sub = gopt(&[cmd, "--help"]);
        assert_ok(&sub);
        assert!(
            sub.stdout.contains("Examples:"),
            "{cmd} --help:\n{}",
            sub.stdout
        );
    }
}

#[test]
fn inspect_bert() {
    let out = gopt(&["inspect", &model_path("bert_small")]);
    assert_ok(&out);
    for needle in [
        "input_ids",
        "attention_mask",
        "batch",
        "seq",
        "MatMul",
        "parameters",
        "opsets",
    ] {
        assert!(
            out.stdout.contains(needle),
            "missing `{needle}`:\n{}",
            out.stdout
        );
    }
    let json = gopt(&["inspect", &model_path("bert_small"), "--json"]);
    assert_ok(&json);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("inspect --json is JSON");
    assert_eq!(v["inputs"][0]["name"], "input_ids");
    assert!(v["param_count"].as_u64().unwrap_or(0) > 100_000, "{v}");
}

#[test]
fn compile_bert_folds_shapes() {
    let out = gopt(&[
        "compile",
        &model_path("bert_small"),
        "--bind",
        "batch=1",
        "--bind",
        "seq=128",
    ]);
    assert_ok(&out);
    assert!(
        out.stdout.contains("after binding batch=1 seq=128"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("shape computations: none"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("stages: import "), "{}", out.stdout);
    assert!(out.stdout.contains(", bind+fold "), "{}", out.stdout);
    // Peak memory beside the stage times (Linux: CI and the GPU machine).
    assert!(out.stdout.contains("; peak memory "), "{}", out.stdout);
    let json = gopt(&[
        "compile",
        &model_path("gpt2_small"),
        "--bind",
        "batch=1",
        "--bind",
        "seq=128",
        "--json",
    ]);
    assert_ok(&json);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("compile --json is JSON");
    let before = v["before"]["nodes"].as_u64().unwrap_or(0);
    let after = v["after"]["nodes"].as_u64().unwrap_or(u64::MAX);
    assert!(
        after < before,
        "folding removed nothing: {before} -> {after}"
    );
    // The process read the model, so its peak is above the model file's size.
    let peak = v["peak_memory_bytes"].as_u64().unwrap_or(0);
    let file = std::fs::metadata(model_path("gpt2_small")).map_or(0, |m| m.len());
    assert!(peak > file, "peak memory {peak} bytes, model file {file}");
}

#[test]
fn compile_rejects_unknown_symbol() {
    let out = gopt(&[
        "compile",
        &model_path("bert_small"),
        "--bind",
        "sequence=128",
    ]);
    assert_error(&out, &["sequence", "seq"]);
    let out = gopt(&["compile", &model_path("bert_small"), "--bind", "batch"]);
    assert_error(&out, &["SYMBOL=SIZE"]);
}

#[test]
fn run_mobilenet_writes_outputs() {
    let dir = scratch("run_mobilenet");
    let input = root().join("tests/data/models/mobilenet_v2/test_data_set_0/input_0.pb");
    let spec = format!("input={}", input.display());
    let out_dir = dir.join("out");
    let out = gopt(&[
        "run",
        &model_path("mobilenet_v2"),
        "--input",
        &spec,
        "-o",
        &out_dir.display().to_string(),
    ]);
    assert_ok(&out);
    assert!(
        out.stdout.contains("logits: f32 [1, 100]"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("mean"), "{}", out.stdout);
    let (_, t) = gopt::tensor_io::read_tensor(&out_dir.join("logits.npy")).expect("output written");
    assert_eq!(t.shape(), &[1, 100]);
    // The bare-FILE form binds inputs in order, and --format pb writes TensorProtos.
    let out = gopt(&[
        "run",
        &model_path("mobilenet_v2"),
        "-i",
        &input.display().to_string(),
        "-o",
        &out_dir.display().to_string(),
        "--format",
        "pb",
        "--json",
    ]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("run --json is JSON");
    assert_eq!(v["outputs"][0]["shape"], serde_json::json!([1, 100]));
    assert!(out_dir.join("logits.pb").is_file());
}

#[test]
fn run_small_model_on_npy() {
    let dir = scratch("run_relu");
    let m = write_model(&dir, &relu_model());
    let x = write_npy(&dir, "x.npy", &f32_tensor(&[2, 3]));
    let out = gopt(&[
        "run",
        &m,
        "--input",
        &format!("X={x}"),
        "-o",
        &dir.display().to_string(),
    ]);
    assert_ok(&out);
    assert!(
        out.stdout.contains("Y: f32 [2, 3]  min 0  max 2"),
        "{}",
        out.stdout
    );
    let (_, y) = gopt::tensor_io::read_tensor(&dir.join("Y.npy")).expect("Y.npy");
    assert_eq!(y.to_f64_vec(), vec![0.0, 0.0, 0.0, 0.0, 1.0, 2.0]);
}

#[test]
fn test_command_on_models() {
    let dir = root().join("tests/data/models").display().to_string();
    let out = gopt(&["test", &dir, "--rtol", "1e-3", "--atol", "1e-4"]);
    assert_ok(&out);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "PASS bert_small",
            "PASS gpt2_small",
            "PASS mobilenet_v2",
            "3 passed, 0 failed, 0 skipped"
        ]
    );
    let out = gopt(&[
        "test", &dir, "--rtol", "1e-3", "--atol", "1e-4", "--json", "-j", "1",
    ]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("test --json is JSON");
    assert_eq!(v["totals"]["passed"], 3);
    assert_eq!(v["cases"][0]["status"], "PASS");
}

#[test]
fn test_command_manifest() {
    let dir = scratch("manifest");
    let cases = root().join("tests/data/models").display().to_string();
    let written = dir.join("written.manifest");
    let out = gopt(&[
        "test",
        &cases,
        "--atol",
        "1e-4",
        "--write-manifest",
        &written.display().to_string(),
    ]);
    assert_ok(&out);
    let text = std::fs::read_to_string(&written).expect("manifest written");
    assert_eq!(text, "bert_small\ngpt2_small\nmobilenet_v2\n");
    // A tolerance no real result meets makes the listed cases fail; the run names them.
    let out = gopt(&[
        "test",
        &cases,
        "--rtol",
        "0",
        "--atol",
        "0",
        "--manifest",
        &written.display().to_string(),
    ]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("NOT PASSING (listed in the manifest): bert_small"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .trim_end()
            .ends_with("0 passed, 3 failed, 0 skipped"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("FAIL bert_small: test_data_set_0: output 0 `last_hidden_state`"),
        "{}",
        out.stdout
    );
}

#[test]
fn test_command_reports_unsupported_and_failures() {
    let dir = scratch("test_cases");
    // An unknown op is UNSUPPORTED (skipped), not a failure.
    let unknown = dir.join("unknown_op");
    std::fs::create_dir_all(unknown.join("test_data_set_0")).expect("mkdir");
    let mut m = relu_model();
    if let Some(g) = m.graph.as_mut() {
        g.node[0].op_type = Some("FrobnicateOp".into());
    }
    write_model(&unknown, &m);
    // A case whose reference output is wrong FAILs with the worst value.
    let wrong = dir.join("wrong_output");
    std::fs::create_dir_all(wrong.join("test_data_set_0")).expect("mkdir");
    write_model(&wrong, &relu_model());
    let ds = wrong.join("test_data_set_0");
    gopt_frontends::write_tensor_file(&ds.join("input_0.pb"), "X", &f32_tensor(&[1, 3]))
        .expect("write");
    let want = gopt::Tensor::from_f64s(gopt::DType::F32, &[1, 3], &[0.0, 0.0, 7.0]).expect("fits");
    gopt_frontends::write_tensor_file(&ds.join("output_0.pb"), "Y", &want).expect("write");
    let out = gopt(&["test", &dir.display().to_string()]);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    assert!(
        lines[0].starts_with("UNSUPPORTED unknown_op: "),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("FrobnicateOp"), "{}", lines[0]);
    assert!(
        lines[1].starts_with("FAIL wrong_output: test_data_set_0: output 0 `Y`: 1 of 3 values differ; worst at [0, 2]"),
        "{}",
        lines[1]
    );
    assert_eq!(lines[2], "0 passed, 1 failed, 1 skipped");
}

#[test]
fn test_command_rejects_a_folder_without_cases() {
    let dir = scratch("no_cases");
    assert_error(
        &gopt(&["test", &dir.display().to_string()]),
        &["no test case"],
    );
    assert_error(&gopt(&["test", "does/not/exist"]), &["does/not/exist"]);
}

// ---- bad model files ------------------------------------------------------------------

/// Runs `inspect` and `compile` on a file that is not a readable model.
#[track_caller]
fn assert_unreadable(path: &str, needles: &[&str]) {
    assert_error(&gopt(&["inspect", path]), needles);
    assert_error(&gopt(&["compile", path]), needles);
    assert_error(&gopt(&["run", path]), needles);
}

#[test]
fn missing_file() {
    assert_unreadable("no/such/model.onnx", &["no/such/model.onnx"]);
}

#[test]
fn truncated_file() {
    let dir = scratch("truncated");
    let bytes = std::fs::read(model_path("bert_small")).expect("read bert");
    let path = dir.join("model.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write");
    assert_unreadable(&path.display().to_string(), &[]);
}

#[test]
fn random_bytes() {
    let dir = scratch("random");
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let path = dir.join("model.onnx");
    std::fs::write(&path, bytes).expect("write");
    assert_unreadable(&path.display().to_string(), &[]);
}

#[test]
fn protobuf_that_is_not_a_model() {
    let dir = scratch("not_a_model");
    let empty = dir.join("empty.onnx");
    std::fs::write(&empty, b"").expect("write");
    assert_unreadable(&empty.display().to_string(), &["graph"]);
    let no_graph = pb::ModelProto {
        ir_version: Some(8),
        ..Default::default()
    };
    let path = dir.join("no_graph.onnx");
    std::fs::write(&path, no_graph.encode_to_vec()).expect("write");
    assert_unreadable(&path.display().to_string(), &["graph"]);
}

#[test]
fn missing_initializer_data() {
    let dir = scratch("missing_init");
    let w = external_tensor("W", &[4], &[("location", "weights.bin")]);
    let m = write_model(&dir, &add_init_model(w));
    assert_error(&gopt(&["compile", &m]), &["weights.bin"]);
}

#[test]
fn input_that_nothing_produces() {
    let dir = scratch("dangling");
    let m = model(
        vec![node("Add", "add", &["X", "ghost"], &["Y"])],
        vec![value_info("X", F32, &[D::N(4)])],
        vec![value_info("Y", F32, &[D::N(4)])],
        vec![],
        18,
    );
    let m = write_model(&dir, &m);
    assert_error(&gopt(&["compile", &m]), &["ghost"]);
}

#[test]
fn cycle() {
    let dir = scratch("cycle");
    let m = model(
        vec![
            node("Add", "first", &["X", "b"], &["a"]),
            node("Add", "second", &["a", "X"], &["b"]),
        ],
        vec![value_info("X", F32, &[D::N(4)])],
        vec![value_info("b", F32, &[D::N(4)])],
        vec![],
        18,
    );
    let m = write_model(&dir, &m);
    assert_error(&gopt(&["compile", &m]), &["cycle"]);
}

#[test]
fn unknown_op() {
    let dir = scratch("unknown_op");
    let mut m = relu_model();
    if let Some(g) = m.graph.as_mut() {
        g.node[0].op_type = Some("FrobnicateOp".into());
        g.node[0].name = Some("frob_node".into());
    }
    let m = write_model(&dir, &m);
    assert_error(&gopt(&["compile", &m]), &["FrobnicateOp", "frob_node"]);
    // inspect reports it and still succeeds.
    let out = gopt(&["inspect", &m]);
    assert_ok(&out);
    assert!(out.stdout.contains("FrobnicateOp"), "{}", out.stdout);
    assert!(out.stdout.contains("frob_node"), "{}", out.stdout);
    let json = gopt(&["inspect", &m, "--json"]);
    assert_ok(&json);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(v["unsupported"][0]["op"], "FrobnicateOp");
    assert_eq!(v["unsupported"][0]["nodes"][0], "frob_node");
}

#[test]
fn unsupported_opset() {
    let dir = scratch("opset");
    let mut m = relu_model();
    m.opset_import[0].version = Some(99);
    let m = write_model(&dir, &m);
    assert_error(&gopt(&["compile", &m]), &["opset", "99"]);
}

#[test]
fn external_data_escaping_the_model_folder() {
    let dir = scratch("escape");
    let inner = dir.join("model");
    std::fs::create_dir_all(&inner).expect("mkdir");
    std::fs::write(dir.join("escape.bin"), [0u8; 16]).expect("write");
    let w = external_tensor("W", &[4], &[("location", "../escape.bin")]);
    let m = write_model(&inner, &add_init_model(w));
    assert_error(&gopt(&["compile", &m]), &["escape.bin"]);
    let abs = dir.join("escape.bin").display().to_string();
    let w = external_tensor("W", &[4], &[("location", &abs)]);
    let m = write_model(&inner, &add_init_model(w));
    assert_error(&gopt(&["compile", &m]), &["escape.bin"]);
}

#[test]
fn external_data_shorter_than_declared() {
    let dir = scratch("short_external");
    std::fs::write(dir.join("weights.bin"), [0u8; 8]).expect("write");
    // f32 [4] needs 16 bytes; the file has 8.
    let w = external_tensor("W", &[4], &[("location", "weights.bin")]);
    let m = write_model(&dir, &add_init_model(w));
    assert_error(&gopt(&["compile", &m]), &["W"]);
    // A declared length beyond the end of the file.
    let w = external_tensor(
        "W",
        &[4],
        &[
            ("location", "weights.bin"),
            ("offset", "0"),
            ("length", "16"),
        ],
    );
    let m = write_model(&dir, &add_init_model(w));
    assert_error(&gopt(&["compile", &m]), &["W"]);
}

#[test]
fn dims_whose_product_overflows() {
    let dir = scratch("overflow");
    let w = pb::TensorProto {
        name: Some("W".into()),
        dims: vec![1 << 40, 1 << 40, 1 << 40],
        data_type: Some(F32),
        raw_data: Some(vec![0u8; 16].into()),
        ..Default::default()
    };
    let m = write_model(&dir, &add_init_model(w));
    assert_error(&gopt(&["compile", &m]), &["W"]);
    assert_error(&gopt(&["inspect", &m]), &["W", "overflow"]);
}

// ---- run-time inputs that do not fit --------------------------------------------------

#[test]
fn wrong_input_dtype() {
    let dir = scratch("wrong_dtype");
    let ids = write_npy(
        &dir,
        "ids.npy",
        &gopt::Tensor::from_i64s(&[1, 2, 3])
            .reshape(&[1, 3])
            .expect("fits"),
    );
    let x = write_npy(&dir, "x.npy", &f32_tensor(&[1, 3]));
    let out = gopt(&[
        "run",
        &model_path("bert_small"),
        "--input",
        &format!("input_ids={x}"),
        "--input",
        &format!("attention_mask={ids}"),
    ]);
    assert_error(&out, &["input_ids", "i64", "f32"]);
}

#[test]
fn wrong_input_rank() {
    let dir = scratch("wrong_rank");
    let ids = write_npy(&dir, "ids.npy", &gopt::Tensor::from_i64s(&[1, 2, 3]));
    let out = gopt(&["run", &model_path("bert_small"), "-i", &ids, "-i", &ids]);
    assert_error(&out, &["input_ids", "rank 2"]);
}

#[test]
fn wrong_input_shape() {
    let dir = scratch("wrong_shape");
    let x = write_npy(&dir, "x.npy", &f32_tensor(&[1, 3, 224, 225]));
    let out = gopt(&[
        "run",
        &model_path("mobilenet_v2"),
        "--input",
        &format!("input={x}"),
    ]);
    assert_error(&out, &["input", "224", "225"]);
    // One symbol, two sizes.
    let a = write_npy(
        &dir,
        "a.npy",
        &gopt::Tensor::from_i64s(&[1, 2, 3])
            .reshape(&[1, 3])
            .expect("fits"),
    );
    let b = write_npy(
        &dir,
        "b.npy",
        &gopt::Tensor::from_i64s(&[1, 2])
            .reshape(&[1, 2])
            .expect("fits"),
    );
    let out = gopt(&["run", &model_path("bert_small"), "-i", &a, "-i", &b]);
    assert_error(&out, &["attention_mask", "seq"]);
}

#[test]
fn wrong_input_names_and_counts() {
    let dir = scratch("wrong_names");
    let m = write_model(&dir, &relu_model());
    let x = write_npy(&dir, "x.npy", &f32_tensor(&[2, 3]));
    assert_error(
        &gopt(&["run", &m, "--input", &format!("Z={x}")]),
        &["`Z`", "`X`"],
    );
    assert_error(&gopt(&["run", &m]), &["missing", "`X`"]);
    assert_error(&gopt(&["run", &m, "-i", &x, "-i", &x]), &["more input"]);
    let txt = dir.join("x.txt");
    std::fs::write(&txt, "1 2 3").expect("write");
    assert_error(
        &gopt(&["run", &m, "-i", &txt.display().to_string()]),
        &[".npy"],
    );
    let bad = dir.join("bad.npy");
    std::fs::write(&bad, b"\x93NUMPY garbage").expect("write");
    assert_error(
        &gopt(&["run", &m, "-i", &bad.display().to_string()]),
        &["bad.npy"],
    );
}

#[test]
fn verbose_prints_the_cause_chain() {
    let out = gopt(&["--verbose", "compile", "no/such/model.onnx"]);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    assert_eq!(out.code, 2);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
}

// ---- optimizer options ------------------------------------------------------------------

#[test]
fn compile_explains_the_optimizer() {
    let out = gopt(&[
        "compile",
        &model_path("gpt2_small"),
        "--bind",
        "batch=1",
        "--bind",
        "seq=128",
        "--explain",
    ]);
    assert_ok(&out);
    for needle in [
        "rules fired: ",
        "stopped: saturated",
        "2 attention blocks (2 causal, 2 with Q/K/V from one GEMM)",
        "5 LayerNorms",
        "estimated time: ",
        "kernel precision: ",
    ] {
        assert!(
            out.stdout.contains(needle),
            "missing `{needle}`:\n{}",
            out.stdout
        );
    }
}

#[test]
fn compile_writes_reports_and_buckets() {
    let dir = scratch("compile_writes_reports_and_buckets");
    let d = dir.display().to_string();
    let out = gopt(&[
        "compile",
        &model_path("bert_small"),
        "--buckets",
        "batch=1,2",
        "--buckets",
        "seq=64,128",
        "--precision",
        "bf16",
        "-o",
        &d,
        "--json",
    ]);
    assert_ok(&out);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(
        json["buckets"].as_array().map(Vec::len),
        Some(4),
        "2 x 2 buckets"
    );
    assert_eq!(json["buckets"][0]["optimizer"]["precision"], "bf16");
    for f in [
        "report.json",
        "report.md",
        "batch=1,seq=64.ir",
        "batch=2,seq=128.ir",
    ] {
        assert!(dir.join(f).is_file(), "{f} not written");
    }
}

#[test]
fn bad_optimizer_options_are_errors() {
    let m = model_path("bert_small");
    assert_error(
        &gopt(&["compile", &m, "--precision", "fp8"]),
        &["--precision fp8", "bf16"],
    );
    assert_error(
        &gopt(&["compile", &m, "--disable", "fusion,speed"]),
        &["--disable speed", "unknown pass"],
    );
    assert_error(
        &gopt(&["compile", &m, "--buckets", "seq"]),
        &["--buckets seq", "NAME=SIZE"],
    );
    assert_error(&gopt(&["compile", &m, "--buckets", "seq=0"]), &["positive"]);
    assert_error(
        &gopt(&["compile", &m, "--buckets", "height=32"]),
        &["no symbolic dim `height`", "batch"],
    );
    assert_error(
        &gopt(&["compile", &m, "--time-limit", "0"]),
        &["--time-limit"],
    );
}

#[test]
fn a_run_that_fits_no_bucket_is_refused_with_the_reason() {
    let dir = scratch("a_run_that_fits_no_bucket_is_refused_with_the_reason");
    // gpt2_small has no attention-mask input: padding its sequence could change results.
    let ids = gopt::Tensor::from_i64s(&[1; 50])
        .reshape(&[1, 50])
        .expect("reshape");
    let ids = write_npy(&dir, "ids.npy", &ids);
    let out = gopt(&[
        "run",
        &model_path("gpt2_small"),
        "--input",
        &format!("input_ids={ids}"),
        "--buckets",
        "seq=64,128",
    ]);
    assert_error(&out, &["`seq` = 50", "no attention-mask input"]);
    // Without an explicit bucket list the run is specialized to its exact size.
    let out = gopt(&[
        "run",
        &model_path("gpt2_small"),
        "--input",
        &format!("input_ids={ids}"),
    ]);
    assert_ok(&out);
}

#[test]
fn compile_writes_a_cuda_artifact() {
    let dir = scratch("compile_writes_a_cuda_artifact");
    let out_dir = dir.join("bert.gopt");
    let out = gopt(&[
        "compile",
        &model_path("bert_small"),
        "--precision",
        "bf16",
        "--buckets",
        "batch=1,2",
        "--buckets",
        "seq=64",
        "-o",
        &out_dir.display().to_string(),
    ]);
    assert_ok(&out);
    assert!(out.stdout.contains("cuda: "), "{}", out.stdout);
    assert!(out.stdout.contains("cuBLASLt GEMMs"), "{}", out.stdout);
    for f in [
        "plan.json",
        "kernels.cu",
        "weights.bin",
        "model.onnx",
        "report.json",
    ] {
        assert!(out_dir.join(f).is_file(), "{f} missing");
    }
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("plan.json")).expect("plan"))
            .expect("plan.json is JSON");
    assert_eq!(plan["buckets"].as_array().map(Vec::len), Some(2));
    assert_eq!(plan["format"], "gopt-artifact-3");
    let cu = std::fs::read_to_string(out_dir.join("kernels.cu")).expect("kernels.cu");
    assert!(cu.contains("extern \"C\" __global__"));
    // The two buckets share one weights blob (each constant once).
    let w = std::fs::metadata(out_dir.join("weights.bin"))
        .expect("weights")
        .len();
    let per = plan["buckets"][0]["plan"]["weights_bytes"]
        .as_u64()
        .expect("bytes");
    assert!(
        w <= per + per / 2,
        "weights.bin {w} B for buckets of {per} B each"
    );
}

#[test]
fn cuda_without_a_gpu_is_a_clear_error() {
    // CI has no GPU: the CUDA backend must say so and suggest another, not crash.
    if std::path::Path::new("/dev/nvidia0").exists() {
        return;
    }
    let out = gopt(&[
        "run",
        &model_path("mobilenet_v2"),
        "-i",
        &root()
            .join("tests/data/models/mobilenet_v2/test_data_set_0/input_0.pb")
            .display()
            .to_string(),
        "--backend",
        "cuda",
    ]);
    assert_error(&out, &["no CUDA", "use another backend"]);
    let out = gopt(&[
        "bench",
        &model_path("bert_small"),
        "--batch",
        "1",
        "--seq",
        "32",
        "--backend",
        "cuda",
    ]);
    assert_error(&out, &["no CUDA", "use another backend"]);
}

#[test]
fn bench_on_the_cpu_and_its_errors() {
    let out = gopt(&[
        "bench",
        &model_path("bert_small"),
        "--backend",
        "cpu",
        "--batch",
        "1",
        "--seq",
        "32",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--json",
    ]);
    assert_ok(&out);
    let r: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(r["iters"], 2);
    assert!(r["p50_ms"].as_f64().expect("p50") > 0.0);
    assert_eq!(r["bucket"]["seq"], 32);
    let out = gopt(&[
        "bench",
        &model_path("bert_small"),
        "--batch",
        "1",
        "--backend",
        "cpu",
    ]);
    assert_error(&out, &["symbolic dims without a size", "seq"]);
    let out = gopt(&[
        "bench",
        &model_path("bert_small"),
        "--iters",
        "0",
        "--backend",
        "cpu",
    ]);
    assert_error(&out, &["--iters"]);
}

#[test]
fn cuda_refuses_token_ids_outside_the_embedding() {
    // The GPU gather does not bounds-check; the run must refuse the input by name first.
    let dir = scratch("cuda_refuses_token_ids_outside_the_embedding");
    let mut ids = vec![1.0; 8];
    ids[5] = 1_000_000.0;
    let ids = gopt::Tensor::from_f64s(gopt::DType::I64, &[1, 8], &ids).expect("ids");
    let mask = gopt::Tensor::from_f64s(gopt::DType::I64, &[1, 8], &[1.0; 8]).expect("mask");
    let ids = write_npy(&dir, "ids.npy", &ids);
    let mask = write_npy(&dir, "mask.npy", &mask);
    let out = gopt(&[
        "run",
        &model_path("bert_small"),
        "--backend",
        "cuda",
        "-i",
        &format!("input_ids={ids}"),
        "-i",
        &format!("attention_mask={mask}"),
    ]);
    assert_error(&out, &["input_ids", "1000000", "outside"]);
}

#[test]
fn adapters_lists_what_wgpu_sees() {
    let out = gopt(&["adapters", "--json"]);
    assert_ok(&out);
    let list: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let list = list.as_array().expect("a list");
    // CI installs lavapipe (.ci/run): at least that adapter must be there.
    assert!(!list.is_empty(), "no adapter: {}", out.stdout);
    assert!(list
        .iter()
        .all(|a| a["name"].is_string() && a["backend"].is_string()));
}

/// The shared GPT-2's first data set's input, as a path.
fn gpt2_input() -> String {
    root()
        .join("tests/data/models/gpt2_small/test_data_set_0/input_0.pb")
        .display()
        .to_string()
}

#[test]
fn wgpu_runs_models_and_auto_says_what_it_chose() {
    // CI has lavapipe and no GPU: auto passes over CUDA (saying why) and runs on wgpu.
    if std::path::Path::new("/dev/nvidia0").exists() {
        return;
    }
    let out = gopt(&[
        "run",
        &model_path("gpt2_small"),
        "-i",
        &gpt2_input(),
        "--json",
    ]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("run --json is JSON");
    assert_eq!(v["backend"], "wgpu", "{}", out.stdout);
    assert!(v["adapter"].is_string(), "{}", out.stdout);
    assert!(
        v["notes"][0]
            .as_str()
            .is_some_and(|n| n.contains("passed over cuda")),
        "{}",
        out.stdout
    );
    // bf16 has no WGSL form: the run says what it became.
    let out = gopt(&[
        "run",
        &model_path("gpt2_small"),
        "-i",
        &gpt2_input(),
        "--backend",
        "wgpu",
        "--precision",
        "bf16",
    ]);
    assert_ok(&out);
    assert!(out.stdout.contains("bf16 requested"), "{}", out.stdout);
    // An adapter that does not exist is a clear error listing the ones there are.
    let out = gopt(&[
        "run",
        &model_path("gpt2_small"),
        "-i",
        &gpt2_input(),
        "--backend",
        "wgpu",
        "--adapter",
        "no-such-gpu",
    ]);
    assert_error(
        &out,
        &["no wgpu adapter matching `no-such-gpu`", "adapters seen"],
    );
}

#[test]
fn wgsl_artifact_compiles_and_runs() {
    let dir = scratch("wgsl_artifact_compiles_and_runs");
    let art = dir.join("gpt2.gopt");
    let art_s = art.display().to_string();
    let out = gopt(&[
        "compile",
        &model_path("gpt2_small"),
        "--target",
        "wgsl",
        "--buckets",
        "batch=1",
        "--buckets",
        "seq=128",
        "-o",
        &art_s,
    ]);
    assert_ok(&out);
    assert!(out.stdout.contains("wgsl: "), "{}", out.stdout);
    let wgsl = std::fs::read_to_string(art.join("kernels.wgsl")).expect("kernels.wgsl");
    assert!(wgsl.contains("@compute"), "kernels.wgsl has no shader");
    assert!(!art.join("kernels.cu").exists());
    let out = gopt(&["run", &art_s, "-i", &gpt2_input(), "--json"]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(v["backend"], "wgpu", "{}", out.stdout);
    // The artifact's output matches the CPU's on the same input.
    let cpu = gopt(&[
        "run",
        &model_path("gpt2_small"),
        "-i",
        &gpt2_input(),
        "--backend",
        "cpu",
        "--json",
    ]);
    assert_ok(&cpu);
    let c: serde_json::Value = serde_json::from_str(&cpu.stdout).expect("JSON");
    let (a, b) = (
        v["outputs"][0]["mean"].as_f64().expect("mean"),
        c["outputs"][0]["mean"].as_f64().expect("mean"),
    );
    assert!((a - b).abs() <= 1e-5, "wgpu mean {a}, cpu mean {b}");
}

#[test]
fn bench_on_wgpu() {
    let out = gopt(&[
        "bench",
        &model_path("bert_small"),
        "--batch",
        "1",
        "--seq",
        "32",
        "--backend",
        "wgpu",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--json",
    ]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("bench --json is JSON");
    assert_eq!(v["backend"], "wgpu");
    assert!(
        v["p50_ms"].as_f64().is_some_and(|t| t > 0.0),
        "{}",
        out.stdout
    );
    assert!(
        v["kernels"].as_u64().is_some_and(|k| k > 10),
        "{}",
        out.stdout
    );
}

// ---- the CLI and the artifact under hostile inputs ----------------------------------

/// `gopt` with `env_remove` removed from its environment, killed (and the test failed)
/// if it runs past `secs`: a read that never ends must fail the test, not hang it.
fn gopt_bounded(args: &[&str], env_remove: &[&str], secs: u64) -> Out {
    use std::io::Read;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gopt"));
    cmd.args(args)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for v in env_remove {
        cmd.env_remove(v);
    }
    let started = std::time::Instant::now();
    let mut child = cmd.spawn().expect("run gopt");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let so = drain(Box::new(child.stdout.take().expect("stdout")));
    let se = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gopt {args:?} still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Out {
        code: status.code().unwrap_or(-1),
        stdout: so.join().expect("stdout"),
        stderr: se.join().expect("stderr"),
        took: started.elapsed(),
    }
}

/// `Y = Relu(X)` with X: f32 [`sym`, 3].
fn relu_model_over(sym: &str) -> pb::ModelProto {
    let mut m = relu_model();
    if let Some(g) = m.graph.as_mut() {
        for v in g.input.iter_mut().chain(g.output.iter_mut()) {
            if let Some(pb::type_proto::Value::TensorType(t)) =
                v.r#type.as_mut().and_then(|t| t.value.as_mut())
            {
                if let Some(d) = t.shape.as_mut().and_then(|s| s.dim.first_mut()) {
                    d.value = Some(DimValue::DimParam(sym.into()));
                }
            }
        }
    }
    m
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn compile_writes_every_file_inside_the_output_folder() {
    let dir = scratch("compile_writes_every_file_inside_the_output_folder");
    let out_dir = dir.join("d1/d2/d3/out");
    let escaped = dir.join("escaped").display().to_string();
    let _ = std::fs::remove_file("/tmp/gopt-escaped=2.ir");
    for sym in [
        "../../../x",
        escaped.as_str(),
        "/../../../../tmp/gopt-escaped",
    ] {
        let m = write_model(&dir, &relu_model_over(sym));
        let _ = std::fs::remove_dir_all(&out_dir);
        let out = gopt(&[
            "compile",
            &m,
            "--bind",
            &format!("{sym}=2"),
            "-o",
            &out_dir.display().to_string(),
        ]);
        assert_ok(&out);
        let stray: Vec<PathBuf> = files_under(&dir)
            .into_iter()
            .filter(|p| !p.starts_with(&out_dir) && !p.ends_with("model.onnx"))
            .collect();
        assert!(stray.is_empty(), "`{sym}` wrote outside -o: {stray:?}");
        let irs = files_under(&out_dir)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "ir"))
            .count();
        assert_eq!(irs, 1, "`{sym}`: one bucket graph expected");
    }
    assert!(!Path::new("/tmp/gopt-escaped=2.ir").exists());
}

#[test]
fn run_writes_outputs_whose_names_collide_to_distinct_files() {
    let dir = scratch("run_writes_outputs_whose_names_collide_to_distinct_files");
    let m = model(
        vec![
            node("Relu", "relu", &["X"], &["a/b"]),
            node("Neg", "neg", &["X"], &["a_b"]),
            node("Abs", "abs", &["X"], &["A_B"]),
        ],
        vec![value_info("X", F32, &[D::N(2), D::N(3)])],
        vec![
            value_info("a/b", F32, &[D::N(2), D::N(3)]),
            value_info("a_b", F32, &[D::N(2), D::N(3)]),
            value_info("A_B", F32, &[D::N(2), D::N(3)]),
        ],
        vec![],
        18,
    );
    let m = write_model(&dir, &m);
    let x = f32_tensor(&[2, 3]);
    let xs = write_npy(&dir, "x.npy", &x);
    let out_dir = dir.join("out");
    let out = gopt(&[
        "run",
        &m,
        "-i",
        &xs,
        "--backend",
        "cpu",
        "-o",
        &out_dir.display().to_string(),
        "--json",
    ]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let xv = x.to_f64_vec();
    let want: [Vec<f64>; 3] = [
        xv.iter().map(|v| v.max(0.0)).collect(),
        xv.iter().map(|v| -v).collect(),
        xv.iter().map(|v| v.abs()).collect(),
    ];
    let mut files = Vec::new();
    for (k, w) in want.iter().enumerate() {
        let f = v["outputs"][k]["file"].as_str().expect("file").to_string();
        let (_, t) = gopt::tensor_io::read_tensor(Path::new(&f)).expect("output file");
        assert_eq!(&t.to_f64_vec(), w, "output {k} in {f}");
        files.push(f.to_lowercase());
    }
    files.sort();
    files.dedup();
    assert_eq!(files.len(), 3, "{}", out.stdout);
}

/// Compiles `Y = Relu(X)` over [n, 3] for `target` into `dir/art`; returns its path.
fn relu_artifact(dir: &Path, target: &str) -> String {
    let m = write_model(dir, &relu_model());
    let art = dir.join("art").display().to_string();
    let out = gopt(&[
        "compile", &m, "--target", target, "--bind", "n=2", "-o", &art,
    ]);
    assert_ok(&out);
    art
}

#[test]
fn run_artifact_honours_backend() {
    let dir = scratch("run_artifact_honours_backend");
    let x = write_npy(&dir, "x.npy", &f32_tensor(&[2, 3]));
    for target in ["cuda", "wgsl"] {
        let art = relu_artifact(&dir, target);
        let out = gopt(&["run", &art, "-i", &x, "--backend", "cpu", "--json"]);
        assert_ok(&out);
        let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
        assert_eq!(v["backend"], "cpu", "{target}: {}", out.stdout);
        assert!(
            v["notes"][0]
                .as_str()
                .is_some_and(|n| n.contains("compiled for")),
            "{target}: {}",
            out.stdout
        );
        assert_eq!(v["outputs"][0]["max"], 2.0, "{}", out.stdout);
    }
    // auto keeps the artifact's backend (the wgsl one, on lavapipe in CI).
    let art = relu_artifact(&dir, "wgsl");
    let out = gopt(&["run", &art, "-i", &x, "--json"]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(v["backend"], "wgpu", "{}", out.stdout);
}

#[test]
fn artifact_integrity_is_checked() {
    let dir = scratch("artifact_integrity_is_checked");
    let x = write_npy(&dir, "x.npy", &f32_tensor(&[2, 3]));
    let art = PathBuf::from(relu_artifact(&dir, "cuda"));
    let run = |a: &Path| {
        gopt(&[
            "run",
            &a.display().to_string(),
            "-i",
            &x,
            "--backend",
            "cpu",
        ])
    };
    assert_ok(&run(&art));
    let names: Vec<String> = files_under(&art)
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    for f in [
        "plan.json",
        "kernels.cu",
        "weights.bin",
        "model.onnx",
        "report.md",
    ] {
        assert!(names.iter().any(|n| n == f), "{f} missing: {names:?}");
    }
    // report.json holds the compile's timings, so it is left out of the hashes (two
    // compiles of one model give the same artifact); `run` never reads it.
    for name in names.iter().filter(|n| *n != "report.json") {
        let copy = dir.join(format!("edited-{name}"));
        let _ = std::fs::remove_dir_all(&copy);
        std::fs::create_dir_all(&copy).expect("mkdir");
        for n in &names {
            std::fs::copy(art.join(n), copy.join(n)).expect("copy");
        }
        let p = copy.join(name);
        let mut bytes = std::fs::read(&p).expect("read");
        match bytes.iter().position(|b| *b == b'\n') {
            // A space before the first line break: text files stay valid.
            Some(i) => bytes.insert(i, b' '),
            None => bytes.push(0),
        }
        std::fs::write(&p, bytes).expect("write");
        assert_error(&run(&copy), &["integrity", name]);
    }
    // A file the plan lists that is gone is refused too.
    std::fs::remove_file(art.join("kernels.cu")).expect("rm");
    assert_error(&run(&art), &["kernels.cu"]);
}

#[test]
fn numeric_flags_out_of_bounds_are_errors() {
    let m = model_path("bert_small");
    assert_error(
        &gopt(&["compile", &m, "--time-limit", "1e20"]),
        &["--time-limit", "1000000"],
    );
    assert_error(
        &gopt(&["compile", &m, "--time-limit", "inf"]),
        &["--time-limit"],
    );
    for iters in ["18446744073709551615", "4000000000", "1000001"] {
        let out = gopt_bounded(
            &["bench", &m, "--backend", "cpu", "--iters", iters],
            &[],
            60,
        );
        assert_error(&out, &["--iters", "1000000"]);
    }
    assert_error(
        &gopt(&[
            "bench",
            &m,
            "--backend",
            "cpu",
            "--warmup",
            "18446744073709551615",
        ]),
        &["--warmup"],
    );
    // A number clap cannot parse is one error line too.
    assert_error(
        &gopt(&["bench", &m, "--iters", "99999999999999999999999"]),
        &["--iters"],
    );
    let help = gopt(&["bench", "--help"]);
    assert!(help.stdout.contains("1 to 1000000"), "{}", help.stdout);
}

#[test]
fn special_files_are_refused_not_read() {
    let dir = scratch("special_files_are_refused_not_read");
    for cmd in ["inspect", "compile", "run"] {
        let out = gopt_bounded(&[cmd, "/dev/zero"], &[], 30);
        assert_error(&out, &["/dev/zero", "not a regular file"]);
    }
    let out = gopt_bounded(&["inspect", &dir.display().to_string()], &[], 30);
    assert_error(&out, &["not a regular file", "directory"]);
    let m = write_model(&dir, &relu_model());
    let out = gopt_bounded(&["run", &m, "-i", "/dev/zero"], &[], 30);
    assert_error(&out, &["/dev/zero"]);
    // Inputs and external data that are FIFOs would block the read forever.
    let fifo = dir.join("x.npy");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let out = gopt_bounded(&["run", &m, "-i", &fifo.display().to_string()], &[], 30);
        assert_error(&out, &["x.npy", "FIFO"]);
        let pb = dir.join("x.pb");
        assert!(Command::new("mkfifo").arg(&pb).status().is_ok());
        let out = gopt_bounded(&["run", &m, "-i", &pb.display().to_string()], &[], 30);
        assert_error(&out, &["x.pb", "FIFO"]);
        let data = dir.join("data");
        std::fs::create_dir_all(&data).expect("mkdir");
        assert!(Command::new("mkfifo")
            .arg(data.join("w.bin"))
            .status()
            .is_ok());
        let w = external_tensor("W", &[4], &[("location", "w.bin")]);
        let em = write_model(&data, &add_init_model(w));
        let out = gopt_bounded(&["compile", &em], &[], 30);
        assert_error(&out, &["w.bin", "FIFO"]);
    }
}

#[test]
fn wgpu_without_a_runtime_dir_prints_no_loader_errors() {
    let dir = scratch("wgpu_without_a_runtime_dir_prints_no_loader_errors");
    let m = write_model(&dir, &relu_model());
    let x = write_npy(&dir, "x.npy", &f32_tensor(&[2, 3]));
    for backend in ["wgpu", "auto"] {
        let out = gopt_bounded(
            &["run", &m, "-i", &x, "--backend", backend],
            &["XDG_RUNTIME_DIR"],
            120,
        );
        assert_ok(&out);
        assert!(
            !out.stderr.contains("XDG_RUNTIME_DIR"),
            "--backend {backend}: {}",
            out.stderr
        );
    }
}

#[test]
fn test_rel_l2_bound_is_a_flag() {
    assert_error(
        &gopt(&["test", "tests/data/models/bert_small", "--rel-l2", "0"]),
        &["--rel-l2", "positive"],
    );
    // bf16 on bert_small is within the default 2e-2 but not within 1e-9: the flag
    // must reach the comparison.
    let strict = gopt(&[
        "test",
        "tests/data/models/bert_small",
        "--backend",
        "cpu",
        "--precision",
        "bf16",
        "--rel-l2",
        "1e-9",
    ]);
    assert_eq!(strict.code, 1, "{}\n{}", strict.stdout, strict.stderr);
    assert!(
        strict.stdout.contains("relative L2 error"),
        "{}",
        strict.stdout
    );
}

/// A model whose weights live in an external data file (how exporters write models
/// over 2 GB): the artifact takes the file along (hard-linked or copied, hashed), so
/// it loads from its own folder, and its weights.bin holds the weights read through
/// the mapping.
#[test]
fn an_external_data_models_artifact_loads_from_its_own_folder() {
    let dir = scratch("external_artifact");
    let w: Vec<u8> = [1.5f32, -2.0, 3.25, 4.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(dir.join("w.data"), &w).expect("write");
    let wt = external_tensor("W", &[4], &[("location", "w.data"), ("length", "16")]);
    let m = write_model(&dir, &add_init_model(wt));
    let art = dir.join("out.gopt");
    let _ = std::fs::remove_dir_all(&art);
    let out = gopt(&["compile", &m, "-o", &art.display().to_string()]);
    assert_ok(&out);
    assert_eq!(std::fs::read(art.join("w.data")).expect("copied"), w);
    let plan = std::fs::read_to_string(art.join("plan.json")).expect("plan");
    assert!(
        plan.contains("\"w.data\""),
        "external data is hashed: {plan}"
    );
    let blob = std::fs::read(art.join("weights.bin")).expect("weights");
    assert!(
        blob.windows(16).any(|s| s == w.as_slice()),
        "W in weights.bin"
    );
    // The source folder can go: the artifact is whole.
    std::fs::remove_file(dir.join("w.data")).expect("rm");
    gopt::Compiled::load(&art, &gopt::Options::default()).expect("loads from its folder");
}
