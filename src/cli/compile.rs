//! `gopt compile`: imports, verifies and (with `--bind`) specializes a model, and reports
//! what each stage did. Later stages (saturation, extraction, kernels) join this
//! pipeline as they are built.

use super::{charts, fmt_duration, outln};
use anyhow::{bail, Context, Result};
use gopt::report::{human_bytes, human_count, GraphSummary};
use gopt::{Backend, Bindings};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Most entries of a list printed in the text report (JSON has them all).
const LIST_MAX: usize = 12;

/// Largest `--time-limit`, in seconds (11.6 days: a budget, not a timeout to dodge).
pub const MAX_TIME_LIMIT_S: f64 = 1e6;

/// Import, verify and specialize a model; report nodes, ops, shapes and weights.
#[derive(clap::Args)]
#[command(
    long_about = "Imports the model and verifies it (every value gets a dtype and a possibly \
                  symbolic shape). With --bind SYMBOL=SIZE for the model's symbolic dims, \
                  the graph is specialized: dims are bound and every computation that \
                  became constant (the Shape -> Gather -> Concat -> Reshape sub-graphs \
                  exporters emit) is folded away. The report gives each stage's time and the process's peak memory, the \
                  node count before and after folding, the op histogram, the shape \
                  computations and symbolic dims that remain, and the weights. Then \
                  the optimizer runs per shape bucket (the --bind sizes, or every \
                  combination of bucket sizes): equality saturation with the fusion, \
                  layout and precision rules, extraction under a roofline cost model of \
                  an H200, element-wise grouping. One line per bucket summarizes it; \
                  --explain shows rules fired, e-graph growth and stop reason, fusions, \
                  padding, kernel precisions and estimated time before -> after.",
    after_help = "Examples:\n  \
        gopt compile tests/data/models/bert_small/model.onnx --bind batch=1 --bind seq=128\n  \
        gopt compile tests/data/models/mobilenet_v2/model.onnx\n  \
        gopt compile model.onnx --bind batch=8 --json\n  \
        gopt compile tests/data/models/gpt2_small/model.onnx --bind batch=1 --bind seq=128 --explain\n  \
        gopt compile tests/data/models/bert_small/model.onnx --bind batch=1 --bind seq=128 --explain-node /m/encoder/layer.0/attention/output/Add_output_0\n  \
        gopt compile tests/data/models/bert_small/model.onnx --precision bf16 --buckets batch=1,8 --buckets seq=128 -o out/\n  \
        gopt compile model.onnx --bind batch=1 --disable fusion,layout --print-ir"
)]
pub struct Args {
    /// The model file (.onnx).
    pub model: PathBuf,
    /// Bind a symbolic dim to a size, e.g. `batch=1`. Repeat for each symbol.
    #[arg(long = "bind", value_name = "SYMBOL=SIZE")]
    pub binds: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub opt: OptArgs,
    /// Print what the optimizer did: rules fired, e-graph growth, stop reason, fusions,
    /// padding, kernel precisions, estimated time before -> after (per bucket). Also
    /// records the rewrite chain of each kernel (see --explain-node); with -o, report.md
    /// lists them.
    #[arg(long)]
    pub explain: bool,
    /// Print the rewrites that turned the imported nodes into kernel NAME, one step per
    /// line: the rule, the estimated time of the kernel's region after it, and the
    /// region. NAME is a kernel's node name as `--explain` and report.json
    /// (`after.kernel_list`) list them. Repeatable.
    #[arg(long = "explain-node", value_name = "NAME")]
    pub explain_node: Vec<String>,
    /// Print each bucket's optimized graph in the IR text format (large constants elided).
    #[arg(long)]
    pub print_ir: bool,
    /// Write the compile report to DIR: `report.json` (what --json prints), `report.md`
    /// (what --explain prints) with each bucket's predicted roofline and e-graph growth
    /// charts (`roofline-<bucket>.svg`, `egraph-<bucket>.svg`), and each bucket's
    /// optimized graph as `<bucket>.ir`; with `--target cuda|wgsl` also the artifact
    /// `gopt run DIR` loads: `plan.json`, `kernels.cu` (or `kernels.wgsl`),
    /// `weights.bin`, `model.onnx`. `plan.json`
    /// records every file's SHA-256 (but report.json's, which holds timings); `gopt run`
    /// refuses an artifact whose files changed.
    /// Symbol names become safe file names: nothing is written outside DIR.
    #[arg(short, long = "output", value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The backend to generate code for, named as `--backend` names it: `cuda` (an
    /// execution plan per bucket: kernels, cuBLASLt GEMMs, arena; no GPU needed to
    /// compile), `wgpu` or its alias `wgsl` (WGSL compute shaders, each validated by naga;
    /// bf16 becomes f16) or `cpu` or its alias `none` (stop after the optimizer).
    #[arg(long, value_enum, default_value_t = Backend::Cuda)]
    pub target: Backend,
    /// Keep the buckets whose predicted peak device memory fits SIZE together (CUDA and
    /// wgsl targets).
    #[arg(long, value_name = "SIZE", value_parser = super::memory::parse_budget,
          long_help = super::memory::BUDGET_HELP)]
    pub memory_budget: Option<u64>,
    /// Compile a decoder exported with its KV cache for generation instead: its prefill
    /// steps (batch x prompt length) and decode steps (batch x cache length), as `gopt
    /// generate` runs them, each reported with its kernels and cache bytes.
    #[arg(long)]
    pub generate: bool,
    /// With --generate: the largest batch (steps for 1, 2, 4, ... up to it).
    #[arg(long, value_name = "B", default_value_t = 16, requires = "generate")]
    pub max_batch: u64,
    /// With --generate: the longest cache (decode steps for 128, 256, ... up to it).
    #[arg(long, value_name = "N", default_value_t = 2048, requires = "generate")]
    pub max_context: u64,
    /// With --generate: which steps to compile.
    #[arg(long, value_enum, default_value_t = super::compile_generate::Steps::All, requires = "generate")]
    pub steps: super::compile_generate::Steps,
    #[command(flatten)]
    pub tp: super::tensor_parallel::TpArgs,
}

/// The optimizer options `compile`, `run` and `test` share.
#[derive(clap::Args, Clone, Debug)]
pub struct OptArgs {
    /// Math precision of GEMMs, convolutions and attention: fp32, tf32, bf16 or fp16.
    ///
    /// tf32 keeps fp32 storage and runs the CUDA plan's fp32 cuBLASLt GEMMs
    /// (convolutions lowered to GEMMs included) on tf32 tensor cores
    /// (CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to 10 mantissa bits, fp32
    /// accumulation); generated kernels stay fp32, and wgpu runs it as fp32. bf16 and
    /// fp16 lower GEMM, convolution and attention inputs to that type with fp32
    /// accumulation; softmax, normalizations and reductions stay fp32.
    #[arg(long, value_name = "P", default_value = "fp32")]
    pub precision: String,
    /// Switch passes off: fusion, layout, precision, bucketing, or all (no optimizer).
    /// Comma-separated or repeated.
    #[arg(long, value_name = "PASS,...")]
    pub disable: Vec<String>,
    /// Bucket sizes for a symbolic dim, e.g. `seq=32,64,128`. Repeat per dim. Default:
    /// powers of two (batch 1..32, other dims 32..512 when an attention mask makes
    /// padding exact, else the run's exact size).
    #[arg(long, value_name = "SYM=N,...")]
    pub buckets: Vec<String>,
    /// Saturation budget: iterations. Deterministic: the same model and options give
    /// the same artifact on any machine; when it stops saturation the report says so.
    #[arg(long, value_name = "N", default_value_t = gopt::passes::ITER_LIMIT)]
    pub max_iterations: usize,
    /// Saturation budget: e-nodes (deterministic, as --max-iterations).
    #[arg(
        long = "max-nodes",
        visible_alias = "max-enodes",
        value_name = "N",
        default_value_t = gopt::passes::NODE_LIMIT
    )]
    pub max_enodes: usize,
    /// Wall-clock limit of the whole compile (import, verify, bind+fold, optimize and
    /// plan, every bucket), in seconds, more than 0 and at most 1000000. It never changes
    /// what is built: a compile that runs past it stops with an error naming the stage
    /// and bucket. Default: none (the deterministic budgets bound the work).
    #[arg(long, value_name = "S")]
    pub time_limit: Option<f64>,
    /// The most memory a run or plan may take: 512M, 24G, 1.5GiB (binary units), 24GB
    /// (decimal) or bytes. Whatever would allocate more (a node's outputs in the CPU
    /// interpreter, a bucket's CUDA arena and weights, wgpu buffers, bench inputs) is
    /// refused before it allocates, with an error naming it and the bytes. Default: the
    /// machine's available memory on the CPU, the GPU's free memory when a plan is
    /// loaded, and 288 GiB (the largest GPU memory today) for `compile --target
    /// cuda|wgsl`, which has no device to ask.
    #[arg(long, value_name = "SIZE", value_parser = parse_memory_limit)]
    pub memory_limit: Option<u64>,
    /// Weight-only quantization: int8 or int4. Every `MatMul` (or `Gemm`) by a
    /// constant weight `[K, N]` (K ≥ 16) gets its weight rounded to integers in groups
    /// of --group-size along K, one scale per group (round to nearest, ties to even),
    /// and runs as a MatMulNBits that reads the packed weight: on CUDA, a GEMV that
    /// dequantizes in registers for up to 16 rows (decode reads 1/2 or 1/4 of bf16's
    /// bytes), the weight dequantized into scratch then cuBLASLt above. The product
    /// computing a graph output (an LM head) keeps its weight, as AWQ and GPTQ do.
    /// Activations, accumulation and everything else keep --precision. Each weight's
    /// relative error is in the report (--explain lists them). Models already
    /// quantized (QDQ, MatMulNBits, int4 weights) need no flag. docs/quantization.md
    #[arg(long, value_name = "BITS", value_parser = ["int8", "int4"])]
    pub quantize: Option<String>,
    /// --quantize: weights per group along K (a power of two, at least 16).
    #[arg(long, value_name = "N", default_value_t = 128, requires = "quantize")]
    pub group_size: usize,
    /// --quantize: a zero point per group (u8 values over the group's range widened to
    /// hold 0) instead of a range symmetric around 0 (i8, no zero point).
    #[arg(long, requires = "quantize")]
    pub asymmetric: bool,
    /// CUDA: keep cuBLASLt's heuristic's first algorithm for every GEMM instead of
    /// timing its candidates (up to 8, split-K among them) when a plan is loaded on a
    /// GPU, or compiled with `--target cuda` on a machine that has one. Choices are cached
    /// per GPU in ~/.cache/gopt/gemm, so only a shape's first load pays.
    /// `GOPT_GEMM_TUNE=0` does the same. docs/cuda.md
    #[arg(long)]
    pub no_gemm_tune: bool,
}

/// Parses `--memory-limit`.
fn parse_memory_limit(s: &str) -> std::result::Result<u64, String> {
    gopt::ir::limit::parse_size(s)
}

impl OptArgs {
    /// The pipeline options these flags describe.
    pub fn options(&self) -> Result<gopt::Options> {
        let precision = gopt::Precision::from_name(&self.precision).with_context(|| {
            format!(
                "--precision {}: expected fp32, tf32, bf16 or fp16",
                self.precision
            )
        })?;
        let mut o = gopt::Options::new().precision(precision);
        for d in self.disable.iter().flat_map(|d| d.split(',')) {
            let d = d.trim();
            match (d, gopt::Pass::from_name(d)) {
                ("", _) => {}
                ("all", _) => o = o.optimize(false),
                (_, Some(pass)) => o = o.disable(pass),
                (_, None) => bail!(
                    "--disable {d}: unknown pass (passes: fusion, layout, precision, \
                     bucketing, all)"
                ),
            }
        }
        for b in &self.buckets {
            let (symbol, sizes) = gopt::passes::bucket::parse_override(b)?;
            if o.get_buckets().iter().any(|(s, _)| *s == symbol) {
                bail!("--buckets {b}: `{symbol}` is given twice");
            }
            o = o.buckets(symbol, sizes);
        }
        if let Some(bytes) = self.memory_limit {
            o = o.memory_limit(bytes);
        }
        if self.no_gemm_tune {
            o = o.gemm_tuning(false);
        }
        if let Some(q) = &self.quantize {
            use gopt::passes::quantize::{Quantize, Scheme};
            let scheme = match q.as_str() {
                "int4" => Scheme::Int4,
                _ => Scheme::Int8,
            };
            let q = Quantize {
                scheme,
                group: self.group_size,
                asymmetric: self.asymmetric,
            };
            q.check().map_err(anyhow::Error::msg)?;
            o = o.quantize(q);
        }
        let time = match self.time_limit {
            None => None,
            Some(t) => {
                let time = Duration::try_from_secs_f64(t)
                    .ok()
                    .filter(|_| t > 0.0 && t <= MAX_TIME_LIMIT_S);
                let Some(time) = time else {
                    bail!(
                        "--time-limit {t}: expected a number of seconds more than 0 and at \
                         most {MAX_TIME_LIMIT_S}"
                    );
                };
                Some(time)
            }
        };
        Ok(o.budgets(gopt::Budgets {
            iterations: self.max_iterations,
            nodes: self.max_enodes,
            time,
            deadline: None,
        }))
    }
}

#[derive(Serialize)]
struct Stage {
    stage: &'static str,
    ms: f64,
}

#[derive(Serialize)]
struct Report {
    model: String,
    stages: Vec<Stage>,
    /// The process's peak resident memory over the whole compile (Linux `VmHWM`).
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_memory_bytes: Option<u64>,
    bindings: Vec<(String, u64)>,
    before: GraphSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<GraphSummary>,
    buckets: Vec<BucketReport>,
    /// Default buckets that could not be built, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    skipped: Vec<gopt::Skipped>,
    /// Symbols whose default bucket sizes stop at a limit the model states: the limit
    /// and where the model states it.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    bucket_limits: std::collections::BTreeMap<String, (u64, String)>,
    /// What the target changed from what was asked (bf16 compiled as f16 for WGSL).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    /// `--memory-budget`: the budget and what the kept buckets take together.
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_budget: Option<super::memory::BudgetReport>,
    /// `--quantize`: what was asked and each weight quantized.
    #[serde(skip_serializing_if = "Option::is_none")]
    quantize: Option<gopt::passes::quantize::Quantize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    quantized: Vec<gopt::passes::quantize::WeightReport>,
    /// `--target cuda`: why the GEMM algorithms were not chosen here (no GPU, tuning
    /// off, a failure); they are then chosen when a plan is loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    gemm_tuning_note: Option<String>,
}

#[derive(Serialize)]
struct BucketReport {
    bucket: std::collections::BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    optimizer: Option<gopt::passes::PassReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cuda: Option<CudaSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wgsl: Option<WgslSummary>,
    /// The plan's steps per kind (`gemm`, `transpose`, ...; see
    /// `gopt::codegen::plan::kernel_kind`), with a GPU target.
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_kinds: Option<std::collections::BTreeMap<String, usize>>,
    /// Outputs whose size depends on the data and how the plan reads it back.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    counted_outputs: Vec<String>,
    /// GPU targets: each If, Loop and Scan made straight-line and how, or left and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    control_flow: Vec<String>,
    /// GPU targets: the predicted peak device memory and what takes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<super::memory::BucketMemory>,
    /// `--target cuda` on a machine with a GPU: each GEMM's cuBLASLt algorithm, how it
    /// was chosen (timed, cached, the heuristic's first) and what choosing took.
    #[serde(skip_serializing_if = "Option::is_none")]
    gemm_tuning: Option<gopt::runtime::cuda::TuneReport>,
}

impl BucketReport {
    /// `kernel kinds: 12 gemm, 5 layernormalization, ...`, most frequent first (`None`
    /// on the CPU).
    fn kinds_line(&self) -> Option<String> {
        let mut kinds: Vec<(&String, &usize)> = self.kernel_kinds.as_ref()?.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        Some(format!("kernel kinds: {}", kinds.join(", ")))
    }
}

/// A bucket's WGSL plan in numbers.
#[derive(Serialize)]
struct WgslSummary {
    shaders: usize,
    distinct_shaders: usize,
    f16: bool,
    pool_bytes: usize,
    unplanned_bytes: usize,
}

impl WgslSummary {
    fn of(p: &gopt::codegen::wgsl::plan::WgslPlan) -> WgslSummary {
        let distinct: std::collections::HashSet<&str> =
            p.kernels.iter().map(|k| k.source.as_str()).collect();
        WgslSummary {
            shaders: p.kernels.len(),
            distinct_shaders: distinct.len(),
            f16: p.f16,
            pool_bytes: p.pool_bytes(),
            unplanned_bytes: p.frame.unplanned_bytes,
        }
    }
}

/// A bucket's CUDA plan in numbers.
#[derive(Serialize)]
struct CudaSummary {
    kernels: usize,
    gemms: usize,
    /// Kernel launches and GEMMs in plan order (a GEMM's epilogue kernel is part of
    /// its step).
    steps: usize,
    launches: usize,
    arena_bytes: usize,
    unplanned_bytes: usize,
    weights_bytes: usize,
}

impl CudaSummary {
    fn of(p: &gopt::codegen::cuda::plan::CudaPlan) -> CudaSummary {
        CudaSummary {
            kernels: p.kernels.len(),
            gemms: p
                .steps
                .iter()
                .filter(|s| matches!(s, gopt::codegen::cuda::plan::Step::Gemm(_)))
                .count(),
            steps: p.steps.len(),
            launches: p.launches(),
            arena_bytes: p.arena_bytes,
            unplanned_bytes: p.frame.unplanned_bytes,
            weights_bytes: p.weights_bytes,
        }
    }
}

/// Runs `gopt compile`.
pub fn main(args: &Args) -> Result<ExitCode> {
    if args.generate {
        return super::compile_generate::main(args);
    }
    if let Some(ranks) = args.tp.tensor_parallel {
        return super::tensor_parallel::compile(args, ranks as usize);
    }
    let bindings = parse_binds(&args.binds)?;
    let mut stages = Vec::new();
    // Progress goes to a terminal only, so stderr holds nothing but errors otherwise;
    // the report on stdout has the timings either way.
    let progress = !args.json && std::io::stderr().is_terminal();
    let mut stage = |name: &'static str, t: Instant| {
        let d = t.elapsed();
        if progress {
            eprintln!("{name:>9}  {}", fmt_duration(d));
        }
        stages.push(Stage {
            stage: name,
            ms: d.as_secs_f64() * 1e3,
        });
    };
    // The time limit covers the whole compile: one deadline from here, checked between
    // stages and inside each bucket's.
    let opts = args.opt.options()?;
    let opts = opts.clone().budgets(opts.get_config().budgets.start());
    let budgets = opts.get_config().budgets;
    let t = Instant::now();
    let model = gopt::load_model(&args.model)
        .with_context(|| format!("cannot import {}", args.model.display()))?;
    stage("import", t);
    budgets.check("import")?;
    let t = Instant::now();
    let verified = gopt::ir::verify(model.model.graph.clone())
        .with_context(|| format!("{} does not verify", args.model.display()))?;
    stage("verify", t);
    budgets.check("verify")?;
    let before = GraphSummary::of(&verified);
    let mut sorted: Vec<(String, u64)> = bindings.iter().map(|(k, v)| (k.clone(), *v)).collect();
    sorted.sort();
    let after = if bindings.is_empty() {
        None
    } else {
        let inputs = gopt::report::input_symbols(&model.model.graph);
        for (name, _) in &sorted {
            if !before.symbols.contains(name) {
                bail!(
                    "--bind {name}: the model has no symbolic dim `{name}` (its inputs' \
                     symbols: {})",
                    if inputs.is_empty() {
                        "none".to_string()
                    } else {
                        inputs.join(", ")
                    }
                );
            }
        }
        let t = Instant::now();
        let folded = gopt::prepare(&model.model, &bindings)
            .with_context(|| format!("cannot specialize {}", args.model.display()))?;
        stage("bind+fold", t);
        budgets.check("bind+fold")?;
        Some(GraphSummary::of(&folded))
    };
    // Without --bind, the bucket plan: default buckets that cannot be built are skipped.
    let plan = if bindings.is_empty() && opts.get_config().enabled(gopt::passes::Pass::Bucketing) {
        Some(gopt::pipeline::plan(&model.model, &opts)?)
    } else {
        None
    };
    let combos: Vec<std::collections::BTreeMap<String, u64>> = match &plan {
        _ if !bindings.is_empty() => vec![sorted.iter().cloned().collect()],
        Some(p) => p.combinations(),
        None => vec![Default::default()],
    };
    let bar = (progress && combos.len() > 1).then(|| {
        let b = indicatif::ProgressBar::new(combos.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg:>9} [{bar:30}] {pos}/{len} buckets {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.set_message("optimize");
        b
    });
    let t = Instant::now();
    let mut buckets = Vec::new();
    let mut graphs = Vec::new();
    let spinner = (progress && combos.len() == 1).then(|| {
        let s = indicatif::ProgressBar::new_spinner();
        s.set_message("optimizing");
        s.enable_steady_tick(Duration::from_millis(120));
        s
    });
    let opts = opts.backend(args.target);
    let opts = match args.memory_budget {
        Some(b) => opts.memory_budget(b),
        None => opts,
    };
    let opts = opts.explain(args.explain || !args.explain_node.is_empty());
    let on_bucket = |b: &gopt::compiled::Bucket| {
        if let Some(bar) = &bar {
            bar.inc(1);
        }
        let Some(v) = &b.variant else { return };
        if args.print_ir || args.out.is_some() {
            let text = gopt::ir::text::print_with(
                &v.graph,
                gopt::ir::text::PrintOptions {
                    max_inline_elements: 8,
                },
            );
            if args.print_ir {
                outln!("{text}");
            }
            graphs.push((ir_file_stem(&v.bucket), text));
        }
    };
    let compiled = match &plan {
        Some(p) => gopt::compile_plan(&model, &opts, p, on_bucket),
        None => gopt::compile_buckets(&model, &opts, &combos, on_bucket),
    };
    let compiled = match compiled {
        Ok(c) => c,
        // The time limit says what ran out itself.
        Err(
            e @ (gopt::GoptError::Passes(gopt::passes::PassError::TimeLimit { .. })
            | gopt::GoptError::MemoryBudget { .. }),
        ) => return Err(e.into()),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "cannot compile {}{}",
                args.model.display(),
                match args.target {
                    Backend::Cuda => " for CUDA (`--target none` stops before the plan)",
                    Backend::Wgpu => " to WGSL (`--target none` stops before the plan)",
                    Backend::Cpu => "",
                }
            )))
        }
    };
    for (i, b) in compiled.buckets().iter().enumerate() {
        let (cuda, wgsl) = match &b.plan {
            gopt::BackendPlan::Cpu => (None, None),
            gopt::BackendPlan::Cuda(p) => (Some(CudaSummary::of(p)), None),
            gopt::BackendPlan::Wgpu(p) => (None, Some(WgslSummary::of(p))),
        };
        let outputs = match &b.plan {
            gopt::BackendPlan::Cpu => &[][..],
            gopt::BackendPlan::Cuda(p) => &p.frame.outputs[..],
            gopt::BackendPlan::Wgpu(p) => &p.frame.outputs[..],
        };
        let counted_outputs = outputs
            .iter()
            .filter_map(gopt::codegen::plan::describe_count)
            .collect();
        buckets.push(BucketReport {
            bucket: b.sizes.clone(),
            optimizer: b.variant.as_ref().and_then(|v| v.report.clone()),
            cuda,
            wgsl,
            kernel_kinds: b.kernel_kinds(),
            counted_outputs,
            control_flow: b
                .variant
                .as_ref()
                .map(|v| v.control_flow.clone())
                .unwrap_or_default(),
            memory: super::memory::bucket_memory(&compiled, i),
            gemm_tuning: None,
        });
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    stage("optimize", t);
    let mut gemm_tuning_note = None;
    if args.target == Backend::Cuda {
        let t = Instant::now();
        let (tuned, note) = super::gemm_tune::tune(&compiled);
        if tuned.iter().any(Option::is_some) {
            stage("gemm-tune", t);
        }
        for (b, r) in buckets.iter_mut().zip(tuned) {
            b.gemm_tuning = r;
        }
        gemm_tuning_note = note;
    }
    let report = Report {
        model: args.model.display().to_string(),
        stages,
        peak_memory_bytes: gopt::ir::limit::peak_rss(),
        bindings: sorted,
        before,
        after,
        buckets,
        skipped: compiled.skipped().to_vec(),
        bucket_limits: plan.map(|p| p.bounds).unwrap_or_default(),
        notes: compiled.notes().to_vec(),
        memory_budget: super::memory::budget_report(&compiled),
        quantize: opts.get_quantize(),
        quantized: compiled.quantized().to_vec(),
        gemm_tuning_note,
    };
    let explained: Vec<super::explain::Bucket> = report
        .buckets
        .iter()
        .map(|b| super::explain::Bucket {
            name: bucket_name(&b.bucket),
            report: b.optimizer.as_ref(),
        })
        .collect();
    super::explain::check_names(&args.explain_node, &explained)?;
    if let Some(dir) = &args.out {
        let written = write_artifact(dir, &report, &graphs, &opts.get_config().device)?;
        if args.target != Backend::Cpu {
            compiled
                .save_with(dir, &written)
                .with_context(|| format!("cannot write the artifact to {}", dir.display()))?;
        }
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report, &gopt::report::input_symbols(&model.model.graph));
        if let Some(line) = super::quantized::summary(report.quantize.as_ref(), &report.quantized) {
            outln!("{line}");
            if args.explain {
                for l in super::quantized::lines(&report.quantized) {
                    outln!("{l}");
                }
            }
        }
        print_buckets(&report.buckets, args.explain);
        if let (true, Some(n)) = (args.explain, &report.gemm_tuning_note) {
            outln!("gemm choice: {n}");
        }
        super::explain::print_nodes(&args.explain_node, &explained);
        print_skipped(&report);
        super::memory::print_budget(&compiled);
        for n in &report.notes {
            outln!("note: {n}");
        }
        if let Some(dir) = &args.out {
            outln!(
                "wrote {}/report.json, report.md and {} graph(s){}",
                dir.display(),
                graphs.len(),
                match args.target {
                    Backend::Cuda => ", plan.json, kernels.cu, weights.bin, model.onnx",
                    Backend::Wgpu => ", plan.json, kernels.wgsl, weights.bin, model.onnx",
                    Backend::Cpu => "",
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn parse_binds(binds: &[String]) -> Result<Bindings> {
    let mut b = Bindings::new();
    for s in binds {
        let Some((name, size)) = s.split_once('=') else {
            bail!("--bind {s}: expected SYMBOL=SIZE, e.g. batch=1");
        };
        let size: u64 = size
            .trim()
            .parse()
            .with_context(|| format!("--bind {s}: `{size}` is not a size"))?;
        if b.insert(name.trim().to_string(), size).is_some() {
            bail!("--bind {s}: `{name}` is bound twice");
        }
    }
    Ok(b)
}

fn list<T>(items: &[T], show: impl Fn(&T) -> String) -> String {
    let mut parts: Vec<String> = items.iter().take(LIST_MAX).map(show).collect();
    if items.len() > LIST_MAX {
        parts.push(format!("... ({} more)", items.len() - LIST_MAX));
    }
    parts.join(", ")
}

fn print_text(r: &Report, input_symbols: &[String]) {
    let b = &r.before;
    outln!("model: {}", r.model);
    let stages: Vec<String> = r
        .stages
        .iter()
        .map(|s| {
            format!(
                "{} {}",
                s.stage,
                fmt_duration(Duration::from_secs_f64(s.ms / 1e3))
            )
        })
        .collect();
    match r.peak_memory_bytes {
        Some(b) => outln!(
            "stages: {}; peak memory {}",
            stages.join(", "),
            gopt::ir::limit::fmt_short(b as u128)
        ),
        None => outln!("stages: {}", stages.join(", ")),
    }
    match &r.after {
        None => outln!("nodes: {}", b.nodes),
        Some(a) => {
            let binds: Vec<String> = r.bindings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            outln!(
                "nodes: {} -> {} after binding {} and folding",
                b.nodes,
                a.nodes,
                binds.join(" ")
            );
        }
    }
    let g = r.after.as_ref().unwrap_or(b);
    outln!(
        "ops: {}",
        list(&g.op_histogram, |(op, n)| format!("{op} {n}"))
    );
    if g.shape_nodes.is_empty() {
        outln!("shape computations: none");
    } else {
        outln!(
            "shape computations: {} nodes: {}",
            g.shape_nodes.len(),
            list(&g.shape_nodes, |(n, op)| format!("{n} ({op})"))
        );
        if r.after.is_none() && !input_symbols.is_empty() {
            let hint: Vec<String> = input_symbols
                .iter()
                .map(|s| format!("--bind {s}=N"))
                .collect();
            outln!("  (bind the input dims to fold them: {})", hint.join(" "));
        }
    }
    if !g.constant_nodes.is_empty() {
        outln!(
            "left unfolded on constants: {} nodes: {}",
            g.constant_nodes.len(),
            list(&g.constant_nodes, |(n, op)| format!("{n} ({op})"))
        );
    }
    if g.symbolic_values.is_empty() {
        outln!("symbolic dims: none (fully static)");
    } else {
        outln!(
            "symbolic dims: {} values over {}: {}",
            g.symbolic_values.len(),
            g.symbols.join(", "),
            list(&g.symbolic_values, |(n, t)| format!("{n}: {t}"))
        );
    }
    outln!(
        "weights: {} parameters, {}",
        human_count(g.params as u64),
        human_bytes(g.weight_bytes as u64)
    );
}

fn bucket_name(b: &std::collections::BTreeMap<String, u64>) -> String {
    let name: Vec<String> = b.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if name.is_empty() {
        "static".to_string()
    } else {
        name.join(",")
    }
}

/// A bucket's IR file name (without `.ir`): `batch=1,seq=128`, each symbol made safe as
/// a file name ([`gopt::tensor_io::file_stem`]), so a symbol such as `../../x` cannot
/// name a file outside the output folder.
fn ir_file_stem(b: &std::collections::BTreeMap<String, u64>) -> String {
    let name: Vec<String> = b
        .iter()
        .map(|(k, v)| format!("{}={v}", gopt::tensor_io::file_stem(k)))
        .collect();
    if name.is_empty() {
        "static".to_string()
    } else {
        name.join(",")
    }
}

/// Writes the reports and each bucket's graph into `dir`; returns the names of those
/// the artifact's `plan.json` hashes (all but the timings in `report.json`).
fn write_artifact(
    dir: &std::path::Path,
    report: &Report,
    graphs: &[(String, String)],
    target: &gopt::passes::cost::Target,
) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
    };
    write("report.json", &serde_json::to_string_pretty(report)?)?;
    let mut md = format!("# gopt compile report: {}\n\n", report.model);
    let stems: Vec<String> = report
        .buckets
        .iter()
        .map(|b| charts::stem(&b.bucket))
        .collect();
    let mut chart_files = Vec::new();
    for (b, stem) in report
        .buckets
        .iter()
        .zip(gopt::tensor_io::unique_stems(&stems))
    {
        md += &format!("## bucket {}\n\n", bucket_name(&b.bucket));
        match &b.optimizer {
            Some(r) => {
                md += "```text\n";
                md += &r.explain();
                md += "```\n\n";
                let (files, text) =
                    charts::write_bucket(dir, &stem, &bucket_name(&b.bucket), r, target)?;
                md += &text;
                chart_files.extend(files);
                md += &super::explain::markdown(r);
            }
            None => md += "not optimized (--disable all)\n\n",
        }
        if let Some(line) = b.kinds_line() {
            md += &format!("{line}\n\n");
        }
        if let Some(m) = &b.memory {
            md += &format!("{}\n\n", super::memory::bucket_line(m));
        }
        for line in b.control_flow.iter().chain(&b.counted_outputs) {
            md += &format!("- {line}\n");
        }
        if !b.counted_outputs.is_empty() || !b.control_flow.is_empty() {
            md += "\n";
        }
    }
    if !report.skipped.is_empty() || !report.bucket_limits.is_empty() {
        md += "## buckets not built\n\n";
        for (sym, (limit, why)) in &report.bucket_limits {
            md += &format!("- default `{sym}` sizes stop at {limit}: {why}\n");
        }
        for k in &report.skipped {
            md += &format!(
                "- skipped {}: {}\n",
                gopt::bucket_name(&k.sizes),
                k.reason.replace('\n', " ")
            );
        }
        md += "\n";
    }
    write("report.md", &md)?;
    // report.json is left out: it holds the stage timings, and hashing it into
    // plan.json would make two identical compiles give different artifacts.
    let mut written = vec!["report.md".to_string()];
    written.extend(chart_files);
    let stems: Vec<String> = graphs.iter().map(|(s, _)| s.clone()).collect();
    for (stem, (_, text)) in gopt::tensor_io::unique_stems(&stems).iter().zip(graphs) {
        let name = format!("{stem}.ir");
        write(&name, text)?;
        written.push(name);
    }
    Ok(written)
}

/// The default buckets' limits and the buckets skipped, one line each.
fn print_skipped(r: &Report) {
    for (sym, (limit, why)) in &r.bucket_limits {
        outln!("buckets: `{sym}` stops at {limit}: {why}");
    }
    for k in &r.skipped {
        outln!(
            "skipped bucket {}: {}",
            gopt::bucket_name(&k.sizes),
            k.reason.replace('\n', " ")
        );
    }
}

fn print_buckets(buckets: &[BucketReport], explain: bool) {
    for b in buckets {
        let name: Vec<String> = b.bucket.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let name = if name.is_empty() {
            "static shapes".to_string()
        } else {
            name.join(" ")
        };
        let Some(r) = &b.optimizer else {
            outln!("bucket {name}: not optimized (--disable all)");
            continue;
        };
        if explain {
            outln!("== bucket {name}");
            for line in r.explain().lines() {
                outln!("  {line}");
            }
            if let Some(line) = super::explain::summary_line(r) {
                outln!("  {line}");
            }
        } else {
            outln!(
                "bucket {name}: nodes {} -> {}, kernels {} -> {}, est. {:.1} -> {:.1} µs; fused: {}",
                r.before.nodes,
                r.after.nodes,
                r.before.kernels,
                r.after.kernels,
                r.before.est_us,
                r.after.est_us,
                if r.fusions.is_empty() { "nothing".into() } else { r.fusions.join("; ") }
            );
            if let Some(cut) = &r.budget_cut {
                outln!("  budget: {cut}");
            }
        }
        if let Some(w) = &b.wgsl {
            outln!(
                "  wgsl: {} shaders ({} distinct{}), one command buffer per run; pooled \
                 buffers {} (one buffer per value: {})",
                w.shaders,
                w.distinct_shaders,
                if w.f16 { ", f16" } else { "" },
                human_bytes(w.pool_bytes as u64),
                human_bytes(w.unplanned_bytes as u64)
            );
        }
        if let Some(c) = &b.cuda {
            outln!(
                "  cuda: {} kernels + {} cuBLASLt GEMMs, {} launches per run (one CUDA graph); \
                 arena {} (one buffer per value: {}), weights {} shared by the buckets",
                c.kernels,
                c.gemms,
                c.launches,
                human_bytes(c.arena_bytes as u64),
                human_bytes(c.unplanned_bytes as u64),
                human_bytes(c.weights_bytes as u64)
            );
        }
        if let Some(line) = b.kinds_line() {
            outln!("  {line}");
        }
        if let Some(r) = &b.gemm_tuning {
            super::gemm_tune::print(r, explain, "  ");
        }
        if let Some(m) = &b.memory {
            outln!("  {}", super::memory::bucket_line(m));
        }
        for line in b.control_flow.iter().chain(&b.counted_outputs) {
            outln!("  {line}");
        }
    }
    if !explain && !buckets.is_empty() {
        outln!("(--explain for rules fired, e-graph growth, padding and precision per kernel)");
    }
}
