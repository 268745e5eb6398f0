//! `gopt bench`: compiles a model for one bucket and times it. On CUDA the time of an
//! execution is taken between two CUDA events around it, after warm-up, inputs already
//! on the device (what a serving loop pays per batch once its inputs are there); on the
//! CPU it is wall-clock. On wgpu it is GPU timestamps around the run's compute pass
//! where the adapter has timestamp queries, else wall-clock from submit to completion. Reports p50/p95/min/mean, throughput, device memory and the
//! time each compile stage took.

use super::{fmt_duration, outln, DeviceArgs};
use anyhow::{bail, Context, Result};
use gopt::ir::{DType, Dim, Tensor};
use gopt::{Backend, Executor};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Time a compiled model: p50/p95/min latency, throughput, memory, compile time.
#[derive(clap::Args)]
#[command(
    long_about = "Compiles the model for one bucket (optimizer, plan, kernels) and runs it \
                  on random inputs (fixed seed; integer inputs in [0, 100), inputs named \
                  like a mask all ones): --warmup untimed runs, then --iters timed ones. \
                  On CUDA each run is timed with CUDA events around the replay of the \
                  bucket's CUDA graph (or the kernel-by-kernel launches with \
                  --no-cuda-graph), inputs resident on the device. On wgpu each run \
                  is one command buffer, timed by GPU timestamps around its compute pass \
                  when the adapter has them (else wall-clock to completion). \
                  --backend auto takes cuda, else wgpu, else the CPU. --batch binds the \
                  symbol of every input's first dim, --seq the second dim of rank-2 \
                  inputs (token ids, masks); --bind sets any other symbol.",
    after_help = "Examples:\n  \
        gopt bench tests/data/models/bert_small/model.onnx --batch 32 --seq 128 --precision bf16\n  \
        gopt bench model.onnx --batch 1 --seq 128 --precision bf16 --json\n  \
        gopt bench resnet50.onnx --batch 32 --precision bf16 --no-cuda-graph\n  \
        gopt bench tests/data/models/mobilenet_v2/model.onnx --batch 1 --backend cpu --iters 10\n  \
        gopt bench tests/data/models/gpt2_small/model.onnx --batch 1 --seq 64 --backend wgpu --adapter llvmpipe"
)]
pub struct Args {
    #[command(flatten)]
    pub tp: super::tensor_parallel::TpArgs,
    /// The model file (.onnx).
    pub model: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Batch size (binds the symbol of each input's first dim).
    #[arg(long, value_name = "N")]
    pub batch: Option<u64>,
    /// Sequence length (binds the symbol of each rank-2 input's second dim).
    #[arg(long, value_name = "N")]
    pub seq: Option<u64>,
    /// Bind any other symbolic dim, e.g. `past=0`. Repeat per symbol.
    #[arg(long = "bind", value_name = "SYMBOL=SIZE")]
    pub binds: Vec<String>,
    /// Untimed runs first (0 to 1000000).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub warmup: usize,
    /// Timed runs (1 to 1000000; 100 or more for stable percentiles).
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub iters: usize,
    /// CUDA and wgpu: also time every step on its own and list the slowest (and the time per
    /// kind of step).
    #[arg(long)]
    pub profile: bool,
    /// With --profile: draw each kernel on the device's roofline, coloured by kind, as
    /// an SVG file.
    #[arg(long, value_name = "FILE.svg", requires = "profile")]
    pub plot: Option<PathBuf>,
    /// With --profile: measure the device's peaks again instead of reading the cache.
    #[arg(long, requires = "profile")]
    pub remeasure_peaks: bool,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Time one decode step of a decoder exported with its KV cache (as `gopt
    /// generate` replays it per token) instead of a forward pass: --batch rows with
    /// --context tokens in the cache; the time per token against the memory roof.
    #[arg(long, conflicts_with_all = ["seq", "binds", "profile"])]
    pub decode: bool,
    /// With --decode: tokens in the cache (the step runs in the smallest cache bucket
    /// holding them).
    #[arg(long, value_name = "L", default_value_t = 128, requires = "decode")]
    pub context: u64,
    #[command(flatten)]
    pub opt: super::compile::OptArgs,
}

#[derive(Serialize)]
struct Report {
    model: String,
    backend: &'static str,
    device: String,
    precision: String,
    /// What the backend changed (a bf16 request run as f16 on wgpu).
    notes: Vec<String>,
    bucket: BTreeMap<String, u64>,
    cuda_graph: bool,
    iters: usize,
    p50_ms: f64,
    p95_ms: f64,
    min_ms: f64,
    mean_ms: f64,
    throughput_per_s: f64,
    batch: u64,
    kernels: usize,
    launches: usize,
    arena_bytes: usize,
    unplanned_bytes: usize,
    weights_bytes: usize,
    device_bytes: usize,
    compile_ms: BTreeMap<&'static str, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<super::profile::Profile>,
    /// The predicted peak device memory, and on CUDA the measured one by phase.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    memory: Option<super::memory::BenchMemory>,
    /// CUDA: how each GEMM's cuBLASLt algorithm was chosen at load (timed, cached, the
    /// heuristic's first), and what choosing took (inside `kernels+load`).
    #[serde(skip_serializing_if = "Option::is_none")]
    gemm_tuning: Option<gopt::runtime::cuda::TuneReport>,
}

fn bindings(args: &Args, g: &gopt::Graph) -> Result<BTreeMap<String, u64>> {
    let mut b = BTreeMap::new();
    for s in &args.binds {
        let Some((k, v)) = s.split_once('=') else {
            bail!("--bind {s}: expected SYMBOL=SIZE");
        };
        let v: u64 = v
            .parse()
            .with_context(|| format!("--bind {s}: the size is not a number"))?;
        b.insert(k.to_string(), v);
    }
    for &i in &g.inputs {
        let Some(ty) = &g.value(i).ty else { continue };
        for (axis, flag) in [(0, args.batch), (1, args.seq)] {
            let (Some(n), Some(Dim::Sym(s))) = (flag, ty.shape.get(axis)) else {
                continue;
            };
            if axis == 1 && ty.shape.len() != 2 {
                continue;
            }
            b.entry(s.to_string()).or_insert(n);
        }
    }
    let mut free = Vec::new();
    for &i in &g.inputs {
        if let Some(ty) = &g.value(i).ty {
            for d in ty.shape.iter() {
                if let Dim::Sym(s) = d {
                    if !b.contains_key(&s.to_string()) && !free.contains(&s.to_string()) {
                        free.push(s.to_string());
                    }
                }
            }
        }
    }
    if !free.is_empty() {
        bail!(
            "symbolic dims without a size: {} (use --batch, --seq or --bind SYMBOL=SIZE)",
            free.join(", ")
        );
    }
    Ok(b)
}

/// Seeded inputs of the bucket's shapes, refused before they are made when they
/// would take more than `limit`.
fn inputs(g: &gopt::Graph, limit: &gopt::ir::limit::MemoryLimit) -> Result<Vec<Tensor>> {
    let mut specs = Vec::new();
    for &i in &g.inputs {
        let v = g.value(i);
        let ty = v.ty.as_ref().context("an input without a type")?;
        let shape = gopt::ir::dim::concrete(&ty.shape)
            .with_context(|| format!("input `{}` is not static after binding", v.name))?;
        specs.push((v.name.clone(), ty.dtype, shape));
    }
    random_inputs(&specs, limit)
}

/// [`inputs`] for inputs given by name, dtype and shape (a tensor-parallel plan's).
pub(super) fn random_inputs(
    specs: &[(String, DType, Vec<usize>)],
    limit: &gopt::ir::limit::MemoryLimit,
) -> Result<Vec<Tensor>> {
    let mut seed = 0x2545F4914F6CDD1Du64;
    let mut out = Vec::new();
    let mut held = 0u128;
    for (name, dtype, shape) in specs {
        let (dtype, shape) = (*dtype, shape.clone());
        let ty =
            gopt::ir::TensorType::new(dtype, shape.iter().map(|&d| Dim::Known(d as u64)).collect());
        // The values are made as f64 first, then converted.
        let bytes = gopt::ir::limit::bytes_of(shape.iter().map(|&d| d as u64), 8 + ty.dtype.size());
        limit.check(held + bytes, || {
            (
                format!("bench input `{}`", name),
                format!("for its random values {ty} (with the inputs before it)"),
            )
        })?;
        held += gopt::ir::limit::bytes_of(shape.iter().map(|&d| d as u64), ty.dtype.size());
        let n: usize = shape.iter().product();
        let mask = name.to_lowercase().contains("mask");
        let vals: Vec<f64> = (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                match ty.dtype {
                    _ if mask => 1.0,
                    DType::Bool => 1.0,
                    d if d.is_int() => (seed % 100) as f64,
                    _ => ((seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0,
                }
            })
            .collect();
        out.push(Tensor::from_f64s(ty.dtype, &shape, &vals)?);
    }
    Ok(out)
}

/// Most `--iters` (and `--warmup`) runs: the times are kept, one number a run.
pub(super) const MAX_RUNS: usize = 1_000_000;

pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs `gopt bench`.
pub fn main(args: &Args) -> Result<ExitCode> {
    if super::tensor_parallel::is_artifact(&args.model) {
        return super::tensor_parallel::bench_artifact(
            &args.model,
            &args.tp,
            &args.binds,
            args.warmup,
            args.iters,
            args.opt.options()?,
            args.json,
        );
    }
    if !args.decode {
        super::tensor_parallel::refuse(&args.tp, "bench")?;
    }
    if !(1..=MAX_RUNS).contains(&args.iters) {
        bail!(
            "--iters {}: expected 1 to {MAX_RUNS} timed runs",
            args.iters
        );
    }
    if args.warmup > MAX_RUNS {
        bail!("--warmup {}: expected 0 to {MAX_RUNS} runs", args.warmup);
    }
    if args.decode {
        return super::bench_decode::main(args);
    }
    let mut compile_ms = BTreeMap::new();
    let t = Instant::now();
    let model = gopt::load_model(&args.model)
        .with_context(|| format!("cannot import {}", args.model.display()))?;
    compile_ms.insert("import", t.elapsed().as_secs_f64() * 1e3);
    let bucket = bindings(args, &model.model.graph)?;
    let mut opts = args.opt.options()?;
    let (candidates, _) = args.device.candidates();
    let backend = candidates[0];
    args.device.apply(&mut opts, backend)?;
    let t = Instant::now();
    let mut compiled = gopt::compile_buckets(&model, &opts, std::slice::from_ref(&bucket), |_| {})
        .with_context(|| format!("cannot compile {}", args.model.display()))?;
    compile_ms.insert("optimize+plan", t.elapsed().as_secs_f64() * 1e3);
    let b0 = &compiled.buckets()[0];
    // A clone shares the weights: the executor below borrows `compiled` mutably.
    let graph = &b0
        .variant
        .as_ref()
        .context("a compiled bucket without its graph")?
        .graph
        .clone();
    let ins = inputs(
        graph,
        &gopt::ir::limit::MemoryLimit::host(compiled.options().get_memory_limit()),
    )?;
    let sizes = b0.sizes.clone();
    // The cost model's target, for --profile's predicted column.
    let target = compiled.options().get_config().cost_target();
    let batch = args.batch.unwrap_or(1);
    let mut steps = Vec::new();
    // Each profiled step's kind, in the profile's order (plan order).
    let mut kinds: Vec<String> = Vec::new();
    let mut measured = None;
    let mut gemm_tuning = None;
    let (device, times, kernels, launches, mem) = match backend {
        Backend::Wgpu => {
            let t = Instant::now();
            let Executor::Wgpu(exe) = compiled.executor(0)? else {
                bail!("the compiled model has no wgpu executor");
            };
            compile_ms.insert("pipelines+upload", t.elapsed().as_secs_f64() * 1e3);
            exe.set_inputs(&ins)?;
            let (times, gpu_clock) = exe.time(args.warmup, args.iters)?;
            if args.profile {
                steps = exe.profile(20)?;
            }
            let p = exe.plan();
            kinds = p.step_kinds().into_iter().map(String::from).collect();
            let a = exe.adapter();
            let device = format!(
                "{} ({}, {}; {})",
                a.name,
                a.kind,
                a.backend,
                if gpu_clock {
                    "GPU timestamps"
                } else {
                    "wall clock"
                }
            );
            let (k, pool, unplanned, dev_bytes) = (
                p.kernels.len(),
                p.pool_bytes(),
                p.frame.unplanned_bytes,
                exe.device_bytes(),
            );
            let w = compiled.device_weights_bytes();
            (device, times, k, k, (pool, unplanned, w, dev_bytes + w))
        }
        Backend::Cuda => {
            let t = Instant::now();
            let dev = gopt::cuda::device()?;
            compile_ms.insert("open GPU", t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let probe = super::memory::start_probe()?;
            let Executor::Cuda(exe) = compiled.executor(0)? else {
                bail!("the compiled model has no CUDA executor");
            };
            compile_ms.insert("kernels+load", t.elapsed().as_secs_f64() * 1e3);
            gemm_tuning = Some(exe.gemm_tuning().clone());
            exe.set_inputs(&ins)?;
            let times = exe.time(args.warmup, args.iters)?;
            probe.mark("runs")?;
            // Ended here: what --profile then loads (the peaks' own GEMMs) is not the
            // bucket's.
            measured = Some(probe.finish()?);
            if args.profile {
                steps = exe.profile(20)?;
            }
            let p = exe.plan();
            kinds = p.step_kinds().into_iter().map(String::from).collect();
            let mem = (
                p.arena_bytes,
                p.frame.unplanned_bytes,
                p.weights_bytes,
                exe.device_bytes(),
            );
            (
                format!("{} ({})", dev.name, dev.arch),
                times,
                p.kernels.len(),
                p.launches(),
                mem,
            )
        }
        Backend::Cpu => {
            let limit = gopt::ir::limit::MemoryLimit::host(compiled.options().get_memory_limit());
            for _ in 0..args.warmup {
                gopt::ir::interp::run_limited(graph, &ins, limit)?;
            }
            let mut times = Vec::new();
            for _ in 0..args.iters {
                let t = Instant::now();
                gopt::ir::interp::run_limited(graph, &ins, limit)?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let n = graph.nodes.len();
            (
                "CPU reference interpreter".to_string(),
                times,
                n,
                n,
                (0, 0, 0, 0),
            )
        }
    };
    let profile = if args.profile {
        let p = super::profile::build(
            backend,
            args.device.adapter.as_deref(),
            &device,
            args.remeasure_peaks,
            steps,
            graph,
            &target,
        )?;
        if let Some(path) = &args.plot {
            let title = format!(
                "{} on {}",
                args.model.file_name().unwrap_or_default().to_string_lossy(),
                device
            );
            super::profile::plot(&p, &title, path)?;
        }
        Some(p)
    } else {
        None
    };
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let p50 = percentile(&sorted, 0.5);
    let report = Report {
        model: args.model.display().to_string(),
        backend: backend.name(),
        device,
        precision: compiled.options().get_config().precision.name().to_string(),
        notes: compiled.notes().to_vec(),
        bucket: sizes,
        cuda_graph: backend == Backend::Cuda && !args.device.no_cuda_graph,
        iters: args.iters,
        p50_ms: p50,
        p95_ms: percentile(&sorted, 0.95),
        min_ms: sorted[0],
        mean_ms: times.iter().sum::<f64>() / times.len() as f64,
        throughput_per_s: batch as f64 / (p50 / 1e3),
        batch,
        kernels,
        launches,
        arena_bytes: mem.0,
        unplanned_bytes: mem.1,
        weights_bytes: mem.2,
        device_bytes: mem.3,
        compile_ms,
        profile,
        memory: super::memory::bench_memory(&compiled, measured),
        gemm_tuning,
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let b: Vec<String> = report
        .bucket
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    outln!(
        "{} on {} [{}], {} {}",
        report.model,
        report.device,
        b.join(" "),
        report.precision,
        if report.cuda_graph {
            "CUDA graph"
        } else if backend == Backend::Cuda {
            "kernel by kernel"
        } else if backend == Backend::Wgpu {
            "wgpu, one command buffer per run"
        } else {
            ""
        }
    );
    for n in &report.notes {
        outln!("note  {n}");
    }
    outln!(
        "latency  p50 {:.3} ms   p95 {:.3} ms   min {:.3} ms   mean {:.3} ms   ({} runs after {} warm-up)",
        report.p50_ms, report.p95_ms, report.min_ms, report.mean_ms, args.iters, args.warmup
    );
    outln!(
        "throughput  {:.1} samples/s (batch {batch})",
        report.throughput_per_s
    );
    if backend == Backend::Wgpu {
        outln!(
            "plan  {} shaders, {} dispatches per run; pooled buffers {} (one buffer per value: {}), weights {}, device total {}",
            report.kernels,
            report.launches,
            gopt::report::human_bytes(report.arena_bytes as u64),
            gopt::report::human_bytes(report.unplanned_bytes as u64),
            gopt::report::human_bytes(report.weights_bytes as u64),
            gopt::report::human_bytes(report.device_bytes as u64)
        );
    }
    if backend == Backend::Cuda {
        outln!(
            "plan  {} kernels, {} launches per run; arena {} (one buffer per value: {}), weights {}, device total {}",
            report.kernels,
            report.launches,
            gopt::report::human_bytes(report.arena_bytes as u64),
            gopt::report::human_bytes(report.unplanned_bytes as u64),
            gopt::report::human_bytes(report.weights_bytes as u64),
            gopt::report::human_bytes(report.device_bytes as u64)
        );
    }
    if let Some(m) = &report.memory {
        super::memory::print_bench(m);
    }
    let stages: Vec<String> = report
        .compile_ms
        .iter()
        .map(|(k, v)| {
            format!(
                "{k} {}",
                fmt_duration(std::time::Duration::from_secs_f64(v / 1e3))
            )
        })
        .collect();
    outln!("compile  {}", stages.join(", "));
    if let Some(r) = report
        .gemm_tuning
        .as_ref()
        .filter(|r| !r.choices.is_empty())
    {
        outln!("{}", r.summary_line());
        for n in &r.notes {
            outln!("note  {n}");
        }
    }
    if let Some(p) = &report.profile {
        super::profile::print(p, &kinds);
        if let Some(path) = &args.plot {
            outln!("plot  {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
