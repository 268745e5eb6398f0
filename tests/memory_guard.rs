//! The memory guard: what the interpreter, the planners, the runtimes and `bench` would
//! allocate is predicted and refused above the memory limit (`--memory-limit`, else the
//! machine's available memory, the device's free memory, or the largest GPU memory for
//! a plan made without a device), with one error line naming what and how many bytes —
//! never an allocator abort (exit 134) or a driver out-of-memory.
//!
//! The hostile models stay under the 1 TiB any one tensor may have (bigger ones are
//! shape errors at inference), so only the guard stands between them and the allocator.

use gopt_frontends::onnx::proto as pb;
use pb::tensor_shape_proto::{dimension::Value as DimValue, Dimension};
use prost::Message;
use std::path::Path;

mod common;
use common::cli::{assert_error, gopt, root, scratch};

const F32: i32 = 1;
const I64: i32 = 7;

// ---- hostile ONNX models --------------------------------------------------------------

fn value_info(name: &str, elem: i32, dims: &[i64]) -> pb::ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&n| Dimension {
            denotation: None,
            value: Some(DimValue::DimValue(n)),
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

/// An output of known dtype and rank whose dims inference gives.
fn output(name: &str, rank: usize) -> pb::ValueInfoProto {
    let dim = (0..rank)
        .map(|i| Dimension {
            denotation: None,
            value: Some(DimValue::DimParam(format!("o{i}"))),
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

fn ints(name: &str, v: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: Some(name.into()),
        r#type: Some(pb::attribute_proto::AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn node(op: &str, name: &str, inputs: &[&str], attrs: Vec<pb::AttributeProto>) -> pb::NodeProto {
    pb::NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![name.into()],
        attribute: attrs,
        ..Default::default()
    }
}

fn tensor(name: &str, elem: i32, dims: &[i64], f: &[f32], i: &[i64]) -> pb::TensorProto {
    pb::TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(elem),
        float_data: f.to_vec(),
        int64_data: i.to_vec(),
        ..Default::default()
    }
}

/// One node reading `X` (f32 of `x`) and the initializers, writing the graph's output
/// (named as the node) of rank `rank`.
fn write_model(
    dir: &Path,
    n: pb::NodeProto,
    x: &[i64],
    inits: Vec<pb::TensorProto>,
    rank: usize,
) -> String {
    let out = n.output[0].clone();
    let m = pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(18),
        }],
        producer_name: Some("gopt-tests".into()),
        graph: Some(pb::GraphProto {
            name: Some("g".into()),
            node: vec![n],
            input: vec![value_info("X", F32, x)],
            output: vec![output(&out, rank)],
            initializer: inits,
            ..Default::default()
        }),
        ..Default::default()
    };
    let path = dir.join("model.onnx");
    std::fs::write(&path, m.encode_to_vec()).expect("write model");
    path.display().to_string()
}

/// `ConvTranspose(X, W)`, X 1x1x4x4, W 1x1x1x1, strides `s`: 1x1x(3s+1)x(3s+1).
fn conv_transpose(dir: &Path, s: i64) -> String {
    let n = node(
        "ConvTranspose",
        "conv_t",
        &["X", "W"],
        vec![ints("strides", &[s, s])],
    );
    let w = tensor("W", F32, &[1, 1, 1, 1], &[1.0], &[]);
    write_model(dir, n, &[1, 1, 4, 4], vec![w], 4)
}

/// `AveragePool(X)`, X 1x1x4x4, a 1x1 window, pads `p`: 1x1x(4+2p)x(4+2p).
fn average_pool(dir: &Path, p: i64) -> String {
    let n = node(
        "AveragePool",
        "pool",
        &["X"],
        vec![ints("kernel_shape", &[1, 1]), ints("pads", &[p, p, p, p])],
    );
    write_model(dir, n, &[1, 1, 4, 4], vec![], 4)
}

/// `Resize(X, scales)`, X 1x1x4x4, scales (1, 1, s, s): 1x1x4sx4s.
fn resize(dir: &Path, s: f32) -> String {
    let n = node("Resize", "resize", &["X", "", "S"], vec![]);
    let scales = tensor("S", F32, &[4], &[1.0, 1.0, s, s], &[]);
    write_model(dir, n, &[1, 1, 4, 4], vec![scales], 4)
}

/// `Expand(X, shape)`, X of one element.
fn expand(dir: &Path, shape: &[i64]) -> String {
    let n = node("Expand", "expand", &["X", "S"], vec![]);
    let s = tensor("S", I64, &[shape.len() as i64], &[], shape);
    write_model(dir, n, &[1], vec![s], shape.len())
}

/// Writes `X` (f32 of `shape`) for `gopt run --input`.
fn input(dir: &Path, shape: &[usize]) -> String {
    let n: usize = shape.iter().product();
    let t = gopt::Tensor::from_f64s(gopt::DType::F32, shape, &vec![1.0; n]).expect("tensor");
    let path = dir.join("x.npy");
    gopt::tensor_io::write_npy(&path, &t).expect("write npy");
    format!("X={}", path.display())
}

// ---- the CPU interpreter --------------------------------------------------------------

/// The three hostile ops of the issue, each at a size that runs (0.6-1.1 GB) but is
/// above the limit given: refused before the node allocates, naming it and the bytes.
#[test]
fn hostile_nodes_are_refused_above_the_memory_limit() {
    let dir = scratch("hostile_nodes");
    let x = input(&dir, &[1, 1, 4, 4]);
    let sub = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).expect("scratch dir");
        d
    };
    let cases = [
        (
            conv_transpose(&sub("conv_t"), 4096),
            "node `conv_t` (ConvTranspose)",
            "f32[1,1,12289,12289] (576.09 MiB)",
        ),
        (
            average_pool(&sub("pool"), 8190),
            "node `pool` (AveragePool)",
            "f32[1,1,16384,16384] (1.00 GiB)",
        ),
        (
            resize(&sub("resize"), 4096.0),
            "node `resize` (Resize)",
            "f32[1,1,16384,16384] (1.00 GiB)",
        ),
    ];
    for (model, node, ty) in cases {
        let out = gopt(&[
            "run",
            &model,
            "--input",
            &x,
            "--backend",
            "cpu",
            "--memory-limit",
            "256M",
        ]);
        let line = assert_error(&out, &[node, ty, "268435456 bytes) (--memory-limit)"]);
        assert!(line.contains("would allocate"), "{line}");
    }
}

/// Without `--memory-limit` the CPU's limit is the machine's available memory: a
/// 640 GB Resize output (which aborted the process) is refused.
#[test]
fn the_cpu_default_is_the_available_memory() {
    let need = 4u64 * 400_000 * 400_000;
    if gopt::ir::limit::host_available().is_none_or(|a| a >= need) {
        return;
    }
    let dir = scratch("cpu_default");
    let model = resize(&dir, 100_000.0);
    let x = input(&dir, &[1, 1, 4, 4]);
    let out = gopt(&["run", &model, "--input", &x, "--backend", "cpu"]);
    assert_error(
        &out,
        &[
            "node `resize` (Resize)",
            "f32[1,1,400000,400000] (596.05 GiB)",
            "available on this machine",
        ],
    );
}

/// `bench --batch 100000000` on the CPU: the random inputs (or the bucket) are refused
/// before they are made.
#[test]
fn bench_with_a_huge_batch_is_refused() {
    let model = root().join("tests/data/models/bert_small/model.onnx");
    let model = model.to_str().expect("utf-8 path");
    let out = gopt(&[
        "bench",
        model,
        "--batch",
        "100000000",
        "--seq",
        "128",
        "--backend",
        "cpu",
        "--iters",
        "1",
        "--warmup",
        "0",
    ]);
    assert_error(&out, &[]);
    // Under the 1 TiB tensor limit, the inputs themselves are what the guard refuses.
    let out = gopt(&[
        "bench",
        model,
        "--batch",
        "64",
        "--seq",
        "128",
        "--backend",
        "cpu",
        "--iters",
        "1",
        "--warmup",
        "0",
        "--memory-limit",
        "100K",
    ]);
    assert_error(&out, &["bench input `", "(--memory-limit)"]);
}

// ---- plans made without a device -----------------------------------------------------

/// A plan made without a GPU is checked against the largest GPU memory: an arena of
/// 640 GB (which `compile` used to report without complaint) is refused.
#[test]
fn compile_refuses_a_plan_no_gpu_can_hold() {
    let dir = scratch("compile_default");
    let model = expand(&dir, &[400_000, 400_000]);
    let out = gopt(&["compile", &model, "--target", "cuda"]);
    assert_error(
        &out,
        &[
            "bucket static shapes: the CUDA plan would allocate 596.05 GiB",
            "largest value `expand` (node `expand`, Expand)",
            "288.00 GiB (309237645312 bytes) (the largest GPU memory",
        ],
    );
}

/// With `--memory-limit` the plans are checked against it.
#[test]
fn compile_checks_the_plan_against_the_memory_limit() {
    let dir = scratch("compile_flag");
    let model = average_pool(&dir, 8190);
    for (target, what) in [("cuda", "the CUDA plan"), ("wgsl", "the WGSL plan")] {
        let out = gopt(&[
            "compile",
            &model,
            "--target",
            target,
            "--memory-limit",
            "1G",
        ]);
        assert_error(
            &out,
            &[
                &format!("bucket static shapes: {what} would allocate 1.00 GiB"),
                "largest value `pool` (node `pool`, AveragePool) takes 1.00 GiB",
                "1.00 GiB (1073741824 bytes) (--memory-limit)",
            ],
        );
        let out = gopt(&[
            "compile",
            &model,
            "--target",
            target,
            "--memory-limit",
            "2G",
        ]);
        assert!(out.code == 0, "{}", out.stderr);
    }
}

// ---- the flag -------------------------------------------------------------------------

#[test]
fn bad_memory_limits_are_usage_errors() {
    let dir = scratch("bad_flag");
    let model = expand(&dir, &[4]);
    for bad in ["12X", "0", "-1G", "lots", "1e3", ""] {
        let flag = format!("--memory-limit={bad}");
        let out = gopt(&["compile", &model, &flag]);
        assert_error(&out, &["--memory-limit"]);
    }
    for sub in ["run", "test", "bench", "compile"] {
        let out = gopt(&[sub, "--help"]);
        assert!(out.stdout.contains("--memory-limit"), "{sub} --help");
    }
}

// ---- the library ----------------------------------------------------------------------

#[test]
fn the_pipeline_honours_the_option() {
    let dir = scratch("pipeline");
    let model = gopt::load_model(Path::new(&expand(&dir, &[1024, 1024]))).expect("imports");
    let x = gopt::Tensor::from_f64s(gopt::DType::F32, &[1], &[1.0]).expect("tensor");
    let opts = gopt::pipeline::Options::new().memory_limit(1 << 20);
    let e = gopt::pipeline::run(&model, std::slice::from_ref(&x), &opts)
        .expect_err("4 MiB above 1 MiB");
    assert!(
        matches!(e, gopt::GoptError::Ir(gopt::IrError::Memory(_))),
        "{e}"
    );
    let opts = opts.memory_limit(16 << 20);
    let out = gopt::pipeline::run(&model, &[x], &opts).expect("fits");
    assert_eq!(out.outputs[0].shape(), &[1024, 1024]);
}

/// The wgpu executor checks a plan against what the adapter can give (on lavapipe,
/// a CPU adapter, the machine's available memory) before it creates a buffer.
#[test]
fn the_wgpu_executor_refuses_what_the_device_cannot_hold() {
    use gopt::runtime::wgpu::{WgpuDevice, WgpuExecutable, WgpuWeights};
    // Two 14.4 GB buffers: under WGSL's 2^32 elements, above this machine's memory.
    let g = gopt::ir::verify(
        gopt::ir::text::parse(
            r#"graph "g"(%0 "x": f32[60000,60000]) -> (%1) {
  %1 "y": f32[60000,60000] = Relu "big_relu"(%0)
}"#,
        )
        .expect("parses"),
    )
    .expect("verifies");
    let (plan, blob) = gopt::codegen::wgsl::plan::build(&g).expect("plans");
    let Ok(dev) = WgpuDevice::open(None) else {
        eprintln!("no wgpu adapter here: skipped");
        return;
    };
    let dev = std::sync::Arc::new(dev);
    let small = gopt::runtime::wgpu::check_memory(
        &dev,
        "bucket b",
        &plan,
        &WgpuWeights::default(),
        Some(1 << 30),
    )
    .expect_err("28.8 GB above 1 GiB")
    .to_string();
    assert!(
        small.starts_with("bucket b: the WGSL plan would allocate 26.82 GiB")
            && small.contains("(--memory-limit)"),
        "{small}"
    );
    let kind = dev.adapter.kind.clone();
    let e = match WgpuExecutable::new(dev, plan, &mut WgpuWeights::default(), &blob) {
        Ok(_) => panic!("a 28.8 GB plan was loaded"),
        Err(e) => e.to_string(),
    };
    let need = 2 * 60_000u64 * 60_000 * 4;
    if kind == "Cpu" && gopt::ir::limit::host_available().is_some_and(|a| a < need) {
        assert!(
            e.contains("the WGSL plan would allocate 26.82 GiB")
                && e.contains("available on this machine"),
            "{e}"
        );
    }
}
