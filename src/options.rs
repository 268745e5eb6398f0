//! [`Options`], the typed set of choices a compile and a run take: the optimizer's
//! configuration, buckets, backend, device choices and memory limits. One builder for
//! the library and the CLI, so every flag is a setter a test can call too.

use crate::Backend;
use gopt_passes::{Budgets, Config, Pass, Precision};
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
/// assert_eq!(opts.get_config().precision, Precision::Bf16);
/// assert_eq!(opts.get_backend(), Backend::Cuda);
/// ```
///
/// The fields are private: each is set by its setter (`backend`, `memory_limit`, ...;
/// the CLI's flags fill the same setters) and read by the getter of the same name with
/// `get_` in front, as clap's builders do. A default `Options` is fp32, every pass on,
/// default buckets and budgets, the CPU backend.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Optimizer configuration (precision, disabled passes, budgets, the cost model's device).
    config: Config,
    /// Bucket sizes per symbol (`--buckets seq=32,64`); defaults where absent.
    buckets: Vec<(String, Vec<u64>)>,
    /// Skip the optimizer entirely (run the graph as imported and folded).
    no_optimize: bool,
    /// Where [`crate::pipeline::run`] executes.
    backend: Backend,
    /// CUDA: launch the plan step by step instead of replaying a captured CUDA graph.
    no_cuda_graph: bool,
    /// CUDA: keep cuBLASLt's heuristic's first algorithm for every GEMM instead of
    /// timing its candidates when a plan is loaded (`--no-gemm-tune`; `GOPT_GEMM_TUNE=0`
    /// does the same). See [`gopt_runtime::cuda::tune`].
    no_gemm_tune: bool,
    /// wgpu: the adapter to run on (the first whose name contains this), else the most
    /// preferred (a discrete GPU first).
    adapter: Option<String>,
    /// wgpu: whether the adapter can run f16 shaders (`None`: assumed, as for a
    /// `compile --target wgsl` without a device). Without it, half precisions lower to
    /// fp32.
    wgsl_f16: Option<bool>,
    /// wgpu: the largest constant one shader binds; products and gathers over a bigger
    /// weight are split into pieces that fit (`None`: WebGPU's default storage binding
    /// limit, 128 MiB, which every adapter allows; see [`gopt_passes::split_weights`]).
    wgsl_max_binding: Option<u64>,
    /// The most bytes a run or a plan may allocate (`--memory-limit`). `None`: the
    /// machine's available memory on the CPU, the device's free memory on a GPU at run
    /// time, and [`gopt_ir::limit::GPU_DEFAULT`] for a plan made without a device.
    memory_limit: Option<u64>,
    /// GPU backends: the device memory a run of the compiled model may hold
    /// (`--memory-budget`). The compile predicts each bucket's peak from its plan
    /// ([`gopt_runtime::peak`]) and keeps the buckets that fit together (a run keeps
    /// every bucket it loads); the others are skipped with the reason. `None`: keep all.
    memory_budget: Option<u64>,
    /// Weight-only quantization of the model's matrix-product weights before it is
    /// specialized (`--quantize int8|int4`, [`gopt_passes::quantize`]). `None`: weights
    /// keep their type (a model that is already quantized stays so).
    quantize: Option<gopt_passes::quantize::Quantize>,
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

    /// Where [`crate::pipeline::run`] and [`crate::Compiled::run`] execute, and what each bucket is
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

    /// wgpu: the largest constant one shader binds, in bytes (products and gathers over
    /// a bigger weight are split into pieces that fit).
    pub fn wgsl_max_binding(mut self, bytes: u64) -> Options {
        self.wgsl_max_binding = Some(bytes);
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

/// The getters: what each setter chose.
impl Options {
    /// The optimizer's configuration: precision, disabled passes, budgets, explain and
    /// the cost model's device.
    pub fn get_config(&self) -> &Config {
        &self.config
    }

    /// The bucket sizes given per symbol ([`Options::buckets`]).
    pub fn get_buckets(&self) -> &[(String, Vec<u64>)] {
        &self.buckets
    }

    /// Whether the optimizer runs ([`Options::optimize`]).
    pub fn get_optimize(&self) -> bool {
        !self.no_optimize
    }

    /// Where a run executes ([`Options::backend`]).
    pub fn get_backend(&self) -> Backend {
        self.backend
    }

    /// CUDA: whether plans replay as a captured CUDA graph ([`Options::cuda_graph`]).
    pub fn get_cuda_graph(&self) -> bool {
        !self.no_cuda_graph
    }

    /// CUDA: whether GEMM algorithms may be chosen by timing ([`Options::gemm_tuning`]).
    pub fn get_gemm_tuning(&self) -> bool {
        !self.no_gemm_tune
    }

    /// wgpu: the adapter asked for ([`Options::adapter`]).
    pub fn get_adapter(&self) -> Option<&str> {
        self.adapter.as_deref()
    }

    /// wgpu: whether the adapter runs f16 shaders (`None`: assumed).
    pub fn get_wgsl_f16(&self) -> Option<bool> {
        self.wgsl_f16
    }

    /// wgpu: the largest constant one shader binds (`None`: WebGPU's default).
    pub fn get_wgsl_max_binding(&self) -> Option<u64> {
        self.wgsl_max_binding
    }

    /// The most bytes a run or a plan may allocate ([`Options::memory_limit`]).
    pub fn get_memory_limit(&self) -> Option<u64> {
        self.memory_limit
    }

    /// GPU backends: the device memory budget ([`Options::memory_budget`]).
    pub fn get_memory_budget(&self) -> Option<u64> {
        self.memory_budget
    }

    /// The weight-only quantization asked for ([`Options::quantize`]).
    pub fn get_quantize(&self) -> Option<gopt_passes::quantize::Quantize> {
        self.quantize
    }
}
