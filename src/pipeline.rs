//! The compile pipeline the CLI and the tests share: specialize a model to one shape
//! bucket, optimize it, and run it with inputs padded up to the bucket and outputs
//! sliced back. [`Options`] is the typed set of choices a compile takes (precision,
//! buckets, passes, budgets, backend, memory limit); `gopt compile`, `run` and `test`
//! parse their flags into it, so every optimization can be switched off and measured
//! from any of them.

use crate::{GoptError, Result};
use gopt_ir::ops::ShapeOp;
use gopt_ir::{Attrs, Bindings, Dim, Graph, Model, Node, Op, Tensor, ValueId, Verified};
use gopt_passes::bucket::{self, Plan};
use gopt_passes::{Budgets, Config, Pass, PassReport, Precision};
use std::collections::BTreeMap;
use std::time::Duration;

/// Compile and run options, built with typed setters:
///
/// ```
/// use gopt::{Backend, Options, Pass, Precision};
/// let opts = Options::new()
///     .precision(Precision::Bf16)
///     .buckets("seq", [128])
///     .buckets("batch", [1, 8])
///     .disable(Pass::Layout)
///     .max_iterations(10)
///     .memory_limit(24 << 30)
///     .backend(Backend::Cuda);
/// assert_eq!(opts.config.precision, Precision::Bf16);
/// ```
///
/// The fields say what was chosen (the CLI's flags fill the same setters); a default
/// `Options` is fp32, every pass on, default buckets and budgets, the CPU backend.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Optimizer configuration (precision, disabled passes, budgets, target).
    pub config: Config,
    /// Bucket sizes per symbol (`--buckets seq=32,64`); defaults where absent.
    pub buckets: Vec<(String, Vec<u64>)>,
    /// Skip the optimizer entirely (run the graph as imported and folded).
    pub no_optimize: bool,
    /// Where [`run`] executes.
    pub backend: Backend,
    /// CUDA: launch the plan step by step instead of replaying a captured CUDA graph.
    pub no_cuda_graph: bool,
    /// CUDA: keep cuBLASLt's heuristic's first algorithm for every GEMM instead of
    /// timing its candidates when a plan is loaded (`--no-gemm-tune`; `GOPT_GEMM_TUNE=0`
    /// does the same). See [`gopt_runtime::cuda::tune`].
    pub no_gemm_tune: bool,
    /// wgpu: the adapter to run on (the first whose name contains this), else the most
    /// preferred (a discrete GPU first).
    pub adapter: Option<String>,
    /// wgpu: whether the adapter can run f16 shaders (`None`: assumed, as for a
    /// `compile --target wgsl` without a device). Without it, half precisions lower to
    /// fp32.
    pub wgsl_f16: Option<bool>,
    /// wgpu: the largest constant one shader binds; products and gathers over a bigger
    /// weight are split into pieces that fit (`None`: WebGPU's default storage binding
    /// limit, 128 MiB, which every adapter allows; see
    /// [`gopt_codegen::wgsl::split`]).
    pub wgsl_max_binding: Option<u64>,
    /// The most bytes a run or a plan may allocate (`--memory-limit`). `None`: the
    /// machine's available memory on the CPU, the device's free memory on a GPU at run
    /// time, and [`gopt_ir::limit::GPU_DEFAULT`] for a plan made without a device.
    pub memory_limit: Option<u64>,
    /// GPU backends: the device memory a run of the compiled model may hold
    /// (`--memory-budget`). The compile predicts each bucket's peak from its plan
    /// ([`gopt_codegen::peak`]) and keeps the buckets that fit together (a run keeps
    /// every bucket it loads); the others are skipped with the reason. `None`: keep all.
    pub memory_budget: Option<u64>,
    /// Weight-only quantization of the model's matrix-product weights before it is
    /// specialized (`--quantize int8|int4`, [`gopt_passes::quantize`]). `None`: weights
    /// keep their type (a model that is already quantized stays so).
    pub quantize: Option<gopt_passes::quantize::Quantize>,
}

/// Where a compiled graph executes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// The CPU reference interpreter.
    #[default]
    Cpu,
    /// NVIDIA GPUs: generated CUDA kernels and cuBLASLt, replayed as a CUDA graph.
    Cuda,
    /// Any GPU wgpu reaches (Vulkan, Metal, DX12; lavapipe on the CPU): generated WGSL.
    Wgpu,
}

impl Backend {
    /// The name the CLI and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Wgpu => "wgpu",
        }
    }
}

impl Options {
    /// The defaults: fp32, every pass on, default buckets and budgets, the CPU backend.
    pub fn new() -> Options {
        Options::default()
    }

    /// The math precision of GEMMs, convolutions and attention: fp32; tf32 (fp32
    /// storage, cuBLASLt's fp32 GEMMs on tf32 tensor cores); bf16 or fp16 (low-precision
    /// inputs, fp32 accumulation).
    pub fn precision(mut self, p: Precision) -> Options {
        self.config.precision = p;
        self
    }

    /// The bucket sizes of symbol `symbol` (sorted, each once), replacing any given
    /// before; symbols without sizes get the default buckets. The model must have the
    /// symbol and every size must be above 0, checked when the model is compiled.
    pub fn buckets(
        mut self,
        symbol: impl Into<String>,
        sizes: impl IntoIterator<Item = u64>,
    ) -> Options {
        let symbol = symbol.into();
        let mut sizes: Vec<u64> = sizes.into_iter().collect();
        sizes.sort_unstable();
        sizes.dedup();
        match self.buckets.iter_mut().find(|(s, _)| *s == symbol) {
            Some(entry) => entry.1 = sizes,
            None => self.buckets.push((symbol, sizes)),
        }
        self
    }

    /// Switches `pass` off.
    pub fn disable(mut self, pass: Pass) -> Options {
        if !self.config.disabled.contains(&pass) {
            self.config.disabled.push(pass);
        }
        self
    }

    /// Whether the optimizer runs at all (`false`: graphs run as imported and folded,
    /// the CLI's `--disable all`).
    pub fn optimize(mut self, on: bool) -> Options {
        self.no_optimize = !on;
        self
    }

    /// Where [`run`] and [`crate::Compiled::run`] execute, and what each bucket is
    /// planned for.
    pub fn backend(mut self, backend: Backend) -> Options {
        self.backend = backend;
        self
    }

    /// The saturation budgets and the compile's time limit, all at once.
    pub fn budgets(mut self, budgets: Budgets) -> Options {
        self.config.budgets = budgets;
        self
    }

    /// Saturation budget: iterations (deterministic).
    pub fn max_iterations(mut self, n: usize) -> Options {
        self.config.budgets.iterations = n;
        self
    }

    /// Saturation budget: e-nodes (deterministic).
    pub fn max_nodes(mut self, n: usize) -> Options {
        self.config.budgets.nodes = n;
        self
    }

    /// Record the rewrites behind each kernel: each bucket's report then holds the
    /// chain from the imported nodes to the kernel ([`gopt_passes::explain`]).
    pub fn explain(mut self, on: bool) -> Options {
        self.config.explain = on;
        self
    }

    /// A wall-clock limit for a whole compile: running past it is an error naming the
    /// stage, never a different result.
    pub fn time_limit(mut self, limit: Duration) -> Options {
        self.config.budgets.time = Some(limit);
        self
    }

    /// The most bytes a run or a plan may allocate, checked before allocating.
    pub fn memory_limit(mut self, bytes: u64) -> Options {
        self.memory_limit = Some(bytes);
        self
    }

    /// Quantize the weights of the model's matrix products (`MatMul` by a constant
    /// `[K, N]`) to `q`'s integers before compiling: the optimizer then runs each as a
    /// MatMulNBits reading the packed weight. The group size is checked when the
    /// model is compiled.
    pub fn quantize(mut self, q: gopt_passes::quantize::Quantize) -> Options {
        self.quantize = Some(q);
        self
    }

    /// GPU backends: keep the buckets whose predicted peak device memory fits `bytes`
    /// together ([`Options::memory_budget`]); [`crate::GoptError::MemoryBudget`] when
    /// none does.
    pub fn memory_budget(mut self, bytes: u64) -> Options {
        self.memory_budget = Some(bytes);
        self
    }

    /// CUDA: replay each bucket as a captured CUDA graph (`true`, the default) or
    /// launch it step by step.
    pub fn cuda_graph(mut self, on: bool) -> Options {
        self.no_cuda_graph = !on;
        self
    }

    /// CUDA: choose each GEMM's algorithm by timing cuBLASLt's candidates when a plan
    /// is loaded (`true`, the default, unless `GOPT_GEMM_TUNE=0`) or keep the heuristic's
    /// first choice.
    pub fn gemm_tuning(mut self, on: bool) -> Options {
        self.no_gemm_tune = !on;
        self
    }

    /// CUDA: how a plan's GEMM algorithms are chosen when it is loaded:
    /// `GOPT_GEMM_TUNE` and the cache directory from the environment, off with
    /// [`Options::no_gemm_tune`].
    pub fn tune_options(&self) -> gopt_runtime::cuda::TuneOptions {
        let mut t = gopt_runtime::cuda::TuneOptions::from_env();
        t.measure &= !self.no_gemm_tune;
        t
    }

    /// wgpu: run on the first adapter whose name contains `name`.
    pub fn adapter(mut self, name: impl Into<String>) -> Options {
        self.adapter = Some(name.into());
        self
    }

    /// wgpu: whether the adapter runs f16 shaders (half precisions lower to fp32
    /// without).
    pub fn wgsl_f16(mut self, f16: bool) -> Options {
        self.wgsl_f16 = Some(f16);
        self
    }

    /// Whether fp32 GEMMs compute in tf32: `--precision tf32` with the optimizer and its
    /// precision pass on (the cost model's rule).
    pub fn tf32_gemms(&self) -> bool {
        !self.no_optimize
            && self.config.precision == Precision::Tf32
            && self.config.enabled(Pass::Precision)
    }
}

/// One specialized, optimized graph.
#[derive(Debug)]
pub struct Variant {
    /// The bucket's bindings.
    pub bucket: BTreeMap<String, u64>,
    /// The graph to execute.
    pub graph: Verified,
    /// What the optimizer did (absent with `--disable all`).
    pub report: Option<PassReport>,
    /// GPU backends: each If, Loop and Scan made straight-line and how, or left and why
    /// ([`gopt_ir::unroll`]).
    pub control_flow: Vec<String>,
}

/// Specializes `model` to `bucket` and optimizes it.
pub fn specialize(
    model: &Model,
    bucket: &BTreeMap<String, u64>,
    opts: &Options,
) -> Result<Variant> {
    let b: Bindings = bucket.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let g = crate::prepare(model, &b)?;
    optimize_prepared(g, bucket, opts)
}

/// Optimizes `g`, a graph specialized to `bucket` already (bound, folded and verified,
/// perhaps rewritten since, as generation's steps are), for `opts`' backend.
pub fn optimize_prepared(
    g: Verified,
    bucket: &BTreeMap<String, u64>,
    opts: &Options,
) -> Result<Variant> {
    let (g, control_flow) = straight_line(g, opts)?;
    if opts.no_optimize {
        return Ok(Variant {
            bucket: bucket.clone(),
            graph: for_backend(g, opts)?,
            report: None,
            control_flow,
        });
    }
    let o = gopt_passes::optimize(g, &opts.config)?;
    Ok(Variant {
        bucket: bucket.clone(),
        graph: for_backend(o.graph, opts)?,
        report: Some(o.report),
        control_flow,
    })
}

/// For a GPU backend, `g` with its control flow made straight-line where it can be
/// ([`gopt_ir::unroll`]: constant conditions inlined, computed ones selected, loops
/// with known counts unrolled), and one line per control node saying what happened.
/// The CPU interpreter runs control flow as it is.
fn straight_line(g: Verified, opts: &Options) -> Result<(Verified, Vec<String>)> {
    let has_control = g.nodes.iter().any(|n| gopt_ir::unroll::is_control(&n.op));
    if opts.backend == Backend::Cpu || !has_control {
        return Ok((g, Vec::new()));
    }
    let mut graph = g.into_inner();
    let r = gopt_ir::unroll::unroll_control(&mut graph)?;
    let mut lines = r.done;
    lines.extend(r.left.into_iter().map(|l| format!("left: {l}")));
    Ok((gopt_ir::verify(graph)?, lines))
}

/// The graph as the backend binds it: for wgpu, weights above the storage binding
/// limit split into pieces ([`gopt_codegen::wgsl::split`]).
fn for_backend(g: Verified, opts: &Options) -> Result<Verified> {
    if opts.backend != Backend::Wgpu {
        return Ok(g);
    }
    let limit = opts
        .wgsl_max_binding
        .unwrap_or(gopt_codegen::wgsl::split::WEBGPU_MAX_BINDING);
    // A clone shares the weights; it is kept only when something was split.
    let mut graph = Graph::clone(&g);
    if gopt_codegen::wgsl::split::split_large_weights(&mut graph, limit)? == 0 {
        return Ok(g);
    }
    Ok(gopt_ir::verify(graph)?)
}

/// The bucket plan of a model under `opts` (an error for a bucket symbol the model
/// does not have, or a size of 0).
pub fn plan(model: &Model, opts: &Options) -> Result<Plan> {
    for (s, sizes) in &opts.buckets {
        if sizes.is_empty() || sizes.contains(&0) {
            return Err(GoptError::Usage(format!(
                "buckets of `{s}`: {sizes:?}: expected one or more sizes above 0"
            )));
        }
    }
    Ok(bucket::plan(&model.graph, &opts.buckets)?)
}

/// The bucket a run with these symbol sizes uses: with bucketing on, padded dims go to
/// their bucket and other dims must match an explicit bucket (or stay exact when none
/// was asked for); with bucketing off, the sizes themselves.
pub fn bucket_for(
    model: &Model,
    actual: &Bindings,
    opts: &Options,
) -> Result<BTreeMap<String, u64>> {
    let actual: BTreeMap<String, u64> = actual.iter().map(|(k, v)| (k.clone(), *v)).collect();
    if !opts.config.enabled(Pass::Bucketing) {
        return Ok(actual);
    }
    let mut p = plan(model, opts)?;
    for (s, why) in p.padding.clone() {
        let explicit = opts.buckets.iter().any(|(n, _)| *n == s);
        if why.is_some() && !explicit {
            if let Some(a) = actual.get(&s) {
                p.sizes.insert(s.clone(), vec![*a]);
            }
        }
    }
    // Symbols that only appear inside (not on inputs) are bound exactly.
    let mut chosen = p.choose(&actual)?;
    for (k, v) in actual {
        chosen.entry(k).or_insert(v);
    }
    Ok(chosen)
}

/// Result of [`run`].
#[derive(Debug)]
pub struct RunOutcome {
    /// Outputs, sliced back to the run's sizes.
    pub outputs: Vec<Tensor>,
}

/// Compiles `model` for the bucket `inputs` need and runs it once on the chosen backend
/// (the CPU reference interpreter, the CUDA plan or the WGSL plan): [`crate::Compiled::run`] on a
/// fresh [`crate::Compiled`].
pub fn run(model: &crate::Imported, inputs: &[Tensor], opts: &Options) -> Result<RunOutcome> {
    let mut c = crate::Compiled::new(model, opts)?;
    Ok(RunOutcome {
        outputs: c.run(inputs)?,
    })
}

/// `model` with its weights quantized as `opts.quantize` asks (a copy; weights not
/// quantized stay shared), and what was quantized; `model` itself when nothing is asked.
pub fn quantized(
    model: &crate::Imported,
    opts: &Options,
) -> Result<(crate::Imported, Vec<gopt_passes::quantize::WeightReport>)> {
    let Some(q) = &opts.quantize else {
        return Ok((model.clone(), Vec::new()));
    };
    q.check().map_err(GoptError::Usage)?;
    if opts.no_optimize {
        return Err(GoptError::Usage(
            "--quantize needs the optimizer (it runs the quantized products packed); drop \
             --disable all"
                .into(),
        ));
    }
    let mut m = model.clone();
    let reports = gopt_passes::quantize::quantize(&mut m.model.graph, q);
    Ok((m, reports))
}

/// Pads (or slices) each input to its bucket's dims.
pub(crate) fn pad_inputs(
    model: &Model,
    inputs: &[Tensor],
    bucket: &BTreeMap<String, u64>,
) -> Result<Vec<Tensor>> {
    let g = &model.graph;
    inputs
        .iter()
        .zip(&g.inputs)
        .map(|(t, &v)| resize(t, &dims_of(g, v), bucket))
        .collect()
}

/// Slices outputs computed at the bucket's sizes back to the run's own sizes.
pub(crate) fn slice_outputs(
    model: &Model,
    outs: Vec<Tensor>,
    bucket: &BTreeMap<String, u64>,
    actual: &BTreeMap<String, u64>,
) -> Result<Vec<Tensor>> {
    let padded_any = bucket.iter().any(|(k, v)| actual.get(k) != Some(v));
    if !padded_any {
        return Ok(outs);
    }
    let dims = output_dims(model, actual)?;
    outs.iter()
        .zip(&dims)
        .map(|(t, d)| resize(t, d, actual))
        .collect()
}

/// The outputs' shapes at the run's own sizes: the model specialized to them (bound and
/// folded, not optimized). Exporters declare outputs with unrelated dim names such as
/// `MatMul_dim_0`, and symbolic inference can lose a dim through `Range`, so this is the
/// reliable way to know what to slice back.
fn output_dims(model: &Model, actual: &BTreeMap<String, u64>) -> Result<Vec<Vec<Dim>>> {
    let b: Bindings = actual.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let g = crate::prepare(model, &b)?;
    Ok(g.outputs.iter().map(|&v| dims_of(&g, v)).collect())
}

fn dims_of(g: &Graph, v: ValueId) -> Vec<Dim> {
    g.value(v)
        .ty
        .as_ref()
        .map(|t| t.shape.to_vec())
        .unwrap_or_default()
}

/// Pads with zeros (or slices) each axis whose declared dim, evaluated with `sizes`,
/// differs from the tensor's size on that axis.
fn resize(t: &Tensor, dims: &[Dim], sizes: &BTreeMap<String, u64>) -> Result<Tensor> {
    let b: Bindings = sizes.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let mut out = t.clone();
    for (axis, d) in dims.iter().enumerate() {
        let Some(want) = d.bind(&b).known() else {
            continue;
        };
        let Some(&have) = out.shape().get(axis) else {
            continue;
        };
        let have = have as u64;
        if want > have {
            let mut pads = vec![0i64; 2 * out.rank()];
            pads[out.rank() + axis] = (want - have) as i64;
            out = apply(ShapeOp::Pad, &[out.clone(), Tensor::from_i64s(&pads)])?;
        } else if want < have {
            out = apply(
                ShapeOp::Slice,
                &[
                    out.clone(),
                    Tensor::from_i64s(&[0]),
                    Tensor::from_i64s(&[want as i64]),
                    Tensor::from_i64s(&[axis as i64]),
                ],
            )?;
        }
    }
    Ok(out)
}

fn apply(op: ShapeOp, inputs: &[Tensor]) -> Result<Tensor> {
    let node = Node {
        name: String::new(),
        op: Op::Shape(op),
        attrs: Attrs::default(),
        inputs: (0..inputs.len()).map(|i| Some(ValueId(i as u32))).collect(),
        outputs: vec![ValueId(inputs.len() as u32)],
    };
    let lookup = |_: &str| None;
    let cx = gopt_ir::ops::EvalCx { lookup: &lookup };
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(Some).collect();
    let mut out = Op::Shape(op).eval(&cx, &node, &refs)?;
    Ok(out.remove(0))
}
