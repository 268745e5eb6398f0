//! Predicted against measured peak device memory, on a GPU (`#[ignore]`d here;
//! scripts/gpu-check.sh runs it): for every default bucket of the shared models, in
//! fp32 and bf16, the peak `gopt_runtime::peak` predicts from the plan must be at
//! least the peak measured when the bucket loads and runs, and at most 10% above it.
//!
//! Each bucket is measured in a process of its own (this test binary, started again
//! with `GOPT_MEMORY_CHILD` naming the artifact and the bucket), because a process pays
//! some costs once (cuBLASLt's kernels) and a bucket is predicted as the first one a
//! process loads, which is what `gopt bench` measures. The models compile once per
//! precision, into an artifact the children load.
//!
//! The output is also the calibration of the prediction's constants: every bucket's
//! measured phase deltas (`calibration` lines) next to the plan figures they depend on,
//! and least-squares fits of the module and graph costs.

use gopt::runtime::peak::{self, PeakMemory};
use gopt::{Backend, Compiled, Executor, Options, Precision};
use std::path::{Path, PathBuf};
use std::process::Command;

const MODELS: [&str; 3] = ["bert_small", "gpt2_small", "mobilenet_v2"];
const PRECISIONS: [Precision; 2] = [Precision::Fp32, Precision::Bf16];
/// The child's environment variable: `ARTIFACT_DIR|BUCKET_INDEX`.
const CHILD: &str = "GOPT_MEMORY_CHILD";
/// The child's result line starts with this.
const RESULT: &str = "GOPT_MEMORY_RESULT ";
/// How far above the measurement the prediction may be.
const TOLERANCE: f64 = 0.10;

/// A least-squares fit to print: the phase, what it is fitted against, and that figure of
/// a case.
type Fit = (&'static str, &'static str, fn(&Case) -> f64);

/// One bucket's figures: the plan's, the prediction and the measurement.
struct Case {
    name: String,
    predicted: PeakMemory,
    measured: u64,
    phases: Vec<(String, i64)>,
    kernels: usize,
    modules: usize,
    source_bytes: usize,
    graph_nodes: usize,
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn predicted_peaks_bound_the_measured_ones_within_ten_percent() {
    if let Ok(job) = std::env::var(CHILD) {
        measure_child(&job);
        return;
    }
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuda_memory");
    let mut cases = Vec::new();
    for model in MODELS {
        for precision in PRECISIONS {
            cases.extend(model_cases(&scratch, model, precision));
        }
    }
    print_calibration(&cases);
    let bad: Vec<String> = cases
        .iter()
        .filter(|c| !within(c.predicted.total(), c.measured))
        .map(describe)
        .collect();
    println!(
        "cuda memory: {} buckets, {} outside [measured, measured + {:.0}%]",
        cases.len(),
        bad.len(),
        TOLERANCE * 100.0
    );
    assert!(!cases.is_empty(), "no bucket was measured");
    assert!(
        bad.is_empty(),
        "predicted peaks outside [measured, 1.10 x measured]:\n{}",
        bad.join("\n")
    );
}

/// Whether `predicted` is at least `measured` and at most 10% above it.
fn within(predicted: u64, measured: u64) -> bool {
    predicted >= measured && predicted as f64 <= measured as f64 * (1.0 + TOLERANCE)
}

fn describe(c: &Case) -> String {
    let phases: Vec<String> = c.phases.iter().map(|(n, b)| format!("{n} {b}")).collect();
    format!(
        "{}: predicted {} ({}), measured {} ({:+.1}%); phases: {}",
        c.name,
        c.predicted.total(),
        c.predicted.breakdown(),
        c.measured,
        (c.predicted.total() as f64 / c.measured.max(1) as f64 - 1.0) * 100.0,
        phases.join(", ")
    )
}

/// Compiles `model`'s default buckets at `precision` into an artifact, then measures
/// each bucket in a child process.
fn model_cases(scratch: &Path, model: &str, precision: Precision) -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/models")
        .join(model)
        .join("model.onnx");
    let imported = gopt::load_model(&path).unwrap_or_else(|e| panic!("{model}: {e}"));
    let opts = Options::new().precision(precision).backend(Backend::Cuda);
    let compiled = gopt::compile(&imported, &opts).unwrap_or_else(|e| panic!("{model}: {e}"));
    let dir = scratch.join(format!("{model}-{}", precision.name()));
    let _ = std::fs::remove_dir_all(&dir);
    compiled
        .save(&dir)
        .unwrap_or_else(|e| panic!("{model}: saving the artifact: {e}"));
    (0..compiled.buckets().len())
        .map(|i| {
            let b = &compiled.buckets()[i];
            let gopt::BackendPlan::Cuda(plan) = &b.plan else {
                panic!("{model}: bucket {} has no CUDA plan", b.name());
            };
            let predicted = compiled.predicted_peak(i).expect("a CUDA plan");
            let (measured, phases) = run_child(&dir, i);
            let m = peak::module_count(plan);
            Case {
                name: format!("{model} {} {}", precision.name(), b.name()),
                predicted,
                measured,
                phases,
                kernels: m.kernels,
                modules: m.modules,
                source_bytes: m.source_bytes,
                graph_nodes: peak::graph_nodes(plan),
            }
        })
        .collect()
}

/// Runs this test again in a fresh process to measure bucket `i` of the artifact in
/// `dir`; returns the measured peak and phases.
fn run_child(dir: &Path, i: usize) -> (u64, Vec<(String, i64)>) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "predicted_peaks_bound_the_measured_ones_within_ten_percent",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, format!("{}|{i}", dir.display()))
        .output()
        .expect("start the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // libtest prints `test NAME ... ` before the child's own output, on the same line.
    let Some(line) = stdout
        .lines()
        .find_map(|l| l.find(RESULT).map(|at| &l[at + RESULT.len()..]))
    else {
        panic!(
            "{} bucket {i}: the child printed no result (exit {:?})\nstdout:\n{stdout}\nstderr:\n{}",
            dir.display(),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let v: serde_json::Value = serde_json::from_str(line).expect("the child's JSON");
    let measured = v["measured"].as_u64().expect("measured bytes");
    let phases = v["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| {
            (
                p[0].as_str().unwrap_or("?").to_string(),
                p[1].as_i64().unwrap_or(0),
            )
        })
        .collect();
    (measured, phases)
}

/// The child: loads bucket `i` of the artifact, runs it, prints what the probe saw.
fn measure_child(job: &str) {
    let (dir, i) = job.rsplit_once('|').expect("DIR|INDEX");
    let i: usize = i.parse().expect("a bucket index");
    let opts = Options::new().backend(Backend::Cuda);
    let mut c = Compiled::load(&PathBuf::from(dir), &opts).expect("loads the artifact");
    let inputs = zero_inputs(&c, i);
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    let probe = gopt::runtime::cuda::memory::Probe::start(&dev).expect("probe");
    let Executor::Cuda(exe) = c.executor(i).unwrap_or_else(|e| panic!("{e}")) else {
        panic!("not a CUDA executor");
    };
    exe.set_inputs(&inputs).unwrap_or_else(|e| panic!("{e}"));
    exe.time(3, 10).unwrap_or_else(|e| panic!("{e}"));
    probe.mark("runs").expect("probe");
    let m = probe.finish().expect("probe");
    let phases: Vec<(String, i64)> = m
        .phases
        .iter()
        .map(|p| (p.name.to_string(), p.bytes))
        .collect();
    println!(
        "{RESULT}{}",
        serde_json::json!({ "measured": m.peak_bytes, "phases": phases })
    );
}

/// Zeros of bucket `i`'s input shapes (token id 0, mask 0: memory does not depend on
/// the values).
fn zero_inputs(c: &Compiled, i: usize) -> Vec<gopt::Tensor> {
    let gopt::BackendPlan::Cuda(plan) = &c.buckets()[i].plan else {
        panic!("bucket {i} has no CUDA plan");
    };
    plan.frame
        .inputs
        .iter()
        .map(|io| {
            let n: usize = io.shape.iter().product();
            gopt::Tensor::from_f64s(io.dtype, &io.shape, &vec![0.0; n]).expect("a tensor")
        })
        .collect()
}

/// One `calibration` line per bucket, then least-squares fits of each phase against
/// the plan figure it should follow.
fn print_calibration(cases: &[Case]) {
    println!(
        "calibration columns: bucket | kernels modules source_bytes graph_nodes | weights arena | phases (bytes the free memory dropped) | measured predicted"
    );
    for c in cases {
        let phases: Vec<String> = c.phases.iter().map(|(n, b)| format!("{n}={b}")).collect();
        println!(
            "calibration {} | {} {} {} {} | {} {} | {} | {} {}",
            c.name,
            c.kernels,
            c.modules,
            c.source_bytes,
            c.graph_nodes,
            c.predicted.weights,
            c.predicted.arena,
            phases.join(" "),
            c.measured,
            c.predicted.total()
        );
    }
    let phase = |c: &Case, name: &str| -> f64 {
        c.phases
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, b)| *b as f64)
            .sum()
    };
    let fits: [Fit; 4] = [
        ("modules", "distinct kernels", |c| c.kernels as f64),
        ("modules", "modules", |c| c.modules as f64),
        ("graph", "graph nodes", |c| c.graph_nodes as f64),
        ("runs", "graph nodes", |c| c.graph_nodes as f64),
    ];
    for (name, against, x) in fits {
        let points: Vec<(f64, f64)> = cases.iter().map(|c| (x(c), phase(c, name))).collect();
        let (slope, intercept, max_residual) = fit(&points);
        println!(
            "calibration fit: {name} phase = {intercept:.0} + {slope:.0} x {against} (largest residual {max_residual:.0} bytes)"
        );
    }
    for name in [
        "weights", "arena", "cublaslt", "status", "gemms", "graph", "runs",
    ] {
        let values: Vec<f64> = cases.iter().map(|c| phase(c, name)).collect();
        let max = values.iter().copied().fold(f64::MIN, f64::max);
        let min = values.iter().copied().fold(f64::MAX, f64::min);
        println!("calibration range: {name} phase {min:.0} to {max:.0} bytes");
    }
}

/// Least squares `y = intercept + slope * x`, and the largest absolute residual.
fn fit(points: &[(f64, f64)]) -> (f64, f64, f64) {
    let n = points.len() as f64;
    if n == 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let intercept = my - slope * mx;
    let max_residual = points
        .iter()
        .map(|(x, y)| (y - intercept - slope * x).abs())
        .fold(0.0, f64::max);
    (slope, intercept, max_residual)
}

#[test]
fn the_tolerance_is_one_sided() {
    assert!(within(100, 100));
    assert!(within(110, 100));
    assert!(!within(111, 100));
    assert!(!within(99, 100));
    let (slope, intercept, r) = fit(&[(1.0, 3.0), (2.0, 5.0), (3.0, 7.0)]);
    assert!((slope - 2.0).abs() < 1e-9 && (intercept - 1.0).abs() < 1e-9 && r < 1e-9);
}
