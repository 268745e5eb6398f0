//! The library's compile API: [`compile`] turns a model into a [`Compiled`] — one
//! specialized, optimized graph per shape bucket and each bucket's [`BackendPlan`] (a
//! CUDA plan or a WGSL plan, with the weights shared by all of them) — and
//! [`Compiled::run`] executes it: inputs checked, padded up to their bucket, run on the
//! chosen backend, outputs sliced back. Each bucket states what it costs in
//! backend-neutral terms ([`Bucket::kernels`], [`Bucket::launches`],
//! [`Bucket::device_bytes`]). The executors a run loads live in `device`, the artifact
//! (`save`, `load`) in `save`, `--memory-budget`'s choice of buckets in `budget`. The
//! CLI's `compile`, `run`, `test` and `bench` are built on these calls.
//!
//! ```no_run
//! use gopt::{Backend, Options, Precision};
//! use std::path::Path;
//! let model = gopt::load_model(Path::new("tests/data/models/bert_small/model.onnx"))?;
//! let opts = Options::new()
//!     .precision(Precision::Bf16)
//!     .buckets("seq", [128])
//!     .buckets("batch", [1, 8])
//!     .backend(Backend::Cuda);
//! let mut compiled = gopt::compile(&model, &opts)?;
//! for b in compiled.buckets() {
//!     println!(
//!         "bucket {}: {} kernels, {} launches per run, {} device bytes",
//!         b.name(),
//!         b.kernels(),
//!         b.launches(),
//!         b.device_bytes()
//!     );
//! }
//! compiled.save(Path::new("bert.gopt"))?;
//! # let inputs = vec![];
//! let outputs = compiled.run(&inputs)?;
//! # Ok::<(), gopt::GoptError>(())
//! ```

mod budget;
mod device;
mod save;
pub(crate) use save::link_external_data;

pub use device::Executor;

use crate::pipeline::{self, Backend, Options, Variant};
use crate::{GoptError, Imported, Result};
use device::Loaded;
use gopt_codegen::cuda::plan::CudaPlan;
use gopt_codegen::plan::WeightStore;
use gopt_codegen::wgsl::plan::WgslPlan;
use gopt_ir::{interp, Tensor};
use gopt_passes::{bucket, Budgets, PassError, Precision};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A bucket's plan for the backend it was compiled for.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum BackendPlan {
    /// The CPU interpreter runs the bucket's graph: nothing to plan.
    Cpu,
    /// CUDA: generated kernels, cuBLASLt GEMMs and one arena, replayed as a CUDA graph.
    Cuda(CudaPlan),
    /// wgpu: WGSL compute shaders and pooled buffers, one command buffer per run.
    Wgpu(WgslPlan),
}

impl BackendPlan {
    /// The backend that runs it.
    pub fn backend(&self) -> Backend {
        match self {
            BackendPlan::Cpu => Backend::Cpu,
            BackendPlan::Cuda(_) => Backend::Cuda,
            BackendPlan::Wgpu(_) => Backend::Wgpu,
        }
    }
}

/// One compiled bucket.
pub struct Bucket {
    /// The symbol sizes it was specialized to.
    pub sizes: BTreeMap<String, u64>,
    /// The optimized graph (absent in a loaded artifact: the plan replaces it).
    pub variant: Option<Variant>,
    /// Its plan for the backend.
    pub plan: BackendPlan,
}

impl Bucket {
    /// `batch=1 seq=128` (or `static shapes`).
    pub fn name(&self) -> String {
        bucket_name(&self.sizes)
    }

    /// The kernels a run executes: generated CUDA kernels (cuBLASLt GEMMs not
    /// counted), WGSL shaders, or on the CPU the graph's nodes (0 for a loaded artifact,
    /// which has no graph).
    pub fn kernels(&self) -> usize {
        match &self.plan {
            BackendPlan::Cpu => self.nodes(),
            BackendPlan::Cuda(p) => p.kernels.len(),
            BackendPlan::Wgpu(p) => p.kernels.len(),
        }
    }

    /// Steps per kind (`transpose`, `layernormalization`, `gemm`, ...) of a GPU plan;
    /// `None` on the CPU.
    pub fn kernel_kinds(&self) -> Option<BTreeMap<String, usize>> {
        match &self.plan {
            BackendPlan::Cpu => None,
            BackendPlan::Cuda(p) => Some(p.kernel_kinds()),
            BackendPlan::Wgpu(p) => Some(p.kernel_kinds()),
        }
    }

    /// Launches per run: kernel launches and cuBLASLt calls on CUDA, dispatches on
    /// wgpu, interpreted nodes on the CPU.
    pub fn launches(&self) -> usize {
        match &self.plan {
            BackendPlan::Cpu => self.nodes(),
            BackendPlan::Cuda(p) => p.launches(),
            BackendPlan::Wgpu(p) => p.kernels.len(),
        }
    }

    /// Device memory the bucket's plan takes: its intermediates (the CUDA arena or the
    /// wgpu buffer pool) and the weights it uses; 0 on the CPU.
    pub fn device_bytes(&self) -> u128 {
        match &self.plan {
            BackendPlan::Cpu => 0,
            BackendPlan::Cuda(p) => p.device_bytes(),
            BackendPlan::Wgpu(p) => p.device_bytes(),
        }
    }

    fn nodes(&self) -> usize {
        self.variant.as_ref().map_or(0, |v| v.graph.nodes.len())
    }
}

/// A default bucket that could not be built, and why (a sequence longer than the
/// model's position table, ...). Runs that need it get this reason as their error.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Skipped {
    /// The symbol sizes of the bucket.
    pub sizes: BTreeMap<String, u64>,
    /// Why it could not be built.
    pub reason: String,
}

/// A compiled model.
pub struct Compiled {
    model: Imported,
    opts: Options,
    buckets: Vec<Bucket>,
    weights: WeightStore,
    /// The executors loaded on the device, and the weights they share.
    loaded: Loaded,
    notes: Vec<String>,
    /// Models whose shape-deciding inputs became constants, by their values
    /// ([`crate::value_inputs`]).
    by_value: BTreeMap<Vec<Vec<u8>>, Compiled>,
    /// Which graph inputs those are (found once, at creation).
    value_positions: Vec<usize>,
    /// Default buckets that could not be built.
    skipped: Vec<Skipped>,
    /// The weights `--quantize` quantized, in model order.
    quantized: Vec<gopt_passes::quantize::WeightReport>,
}

/// Compiles `model` for every bucket combination of `opts` (the default bucket sizes,
/// or `opts.buckets`; see [`compile_plan`] for default buckets that cannot be built);
/// with a GPU backend each bucket is also planned for it (no GPU is needed to compile).
pub fn compile(model: &Imported, opts: &Options) -> Result<Compiled> {
    if opts.get_config().enabled(gopt_passes::Pass::Bucketing) {
        let plan = pipeline::plan(&model.model, opts)?;
        compile_plan(model, opts, &plan, |_| {})
    } else {
        compile_buckets(model, opts, &[BTreeMap::new()], |_| {})
    }
}

/// Compiles `model` for the given buckets, every one of which must build; `progress`
/// is called after each. The budgets' time limit covers the whole call (or the
/// compile it is part of, when `opts` carries a started deadline).
pub fn compile_buckets(
    model: &Imported,
    opts: &Options,
    buckets: &[BTreeMap<String, u64>],
    mut progress: impl FnMut(&Bucket),
) -> Result<Compiled> {
    let budgets = opts.get_config().budgets.start();
    let mut c = Compiled::new(model, opts)?;
    let variants = specialize_all(&c, buckets, budgets);
    for (b, v) in buckets.iter().zip(variants) {
        let i = c.plan_bucket(b, v?, budgets)?;
        progress(&c.buckets[i]);
    }
    c.apply_memory_budget(budgets)?;
    Ok(c)
}

/// Compiles every bucket combination of `plan`. A combination with a default size (a
/// symbol `--buckets` did not give) that cannot be built is skipped, its reason kept in
/// [`Compiled::skipped`] (and the artifact); the compile fails when no bucket can be
/// built, when a requested size is in no built bucket, or when the time limit passes
/// (which never skips: what is built must not depend on timing).
pub fn compile_plan(
    model: &Imported,
    opts: &Options,
    plan: &bucket::Plan,
    mut progress: impl FnMut(&Bucket),
) -> Result<Compiled> {
    let budgets = opts.get_config().budgets.start();
    let mut c = Compiled::new(model, opts)?;
    let combos = plan.combinations();
    let mut first_error = None;
    let variants = specialize_all(&c, &combos, budgets);
    for (b, v) in combos.iter().zip(variants) {
        match v.and_then(|v| c.plan_bucket(b, v, budgets)) {
            Ok(i) => progress(&c.buckets[i]),
            Err(e @ GoptError::Passes(PassError::TimeLimit { .. })) => return Err(e),
            Err(e) if b.keys().any(|s| !plan.given.contains(s)) => {
                c.skipped.push(Skipped {
                    sizes: b.clone(),
                    reason: e.to_string(),
                });
                first_error.get_or_insert(e);
            }
            Err(e) => {
                return Err(GoptError::Usage(format!(
                    "bucket {} (asked for with --buckets): {e}",
                    bucket_name(b)
                )))
            }
        }
    }
    if c.buckets.is_empty() {
        let (Some(e), Some(s)) = (first_error, c.skipped.first()) else {
            return Err(GoptError::Usage("the bucket plan has no bucket".into()));
        };
        return Err(GoptError::Usage(format!(
            "no bucket could be built ({} tried); bucket {}: {e}",
            combos.len(),
            bucket_name(&s.sizes)
        )));
    }
    // A size asked for by name must be in some bucket.
    for s in &plan.given {
        for v in plan.sizes.get(s).into_iter().flatten() {
            if c.buckets.iter().any(|b| b.sizes.get(s) == Some(v)) {
                continue;
            }
            let why = c
                .skipped
                .iter()
                .find(|k| k.sizes.get(s) == Some(v))
                .map(|k| format!("bucket {}: {}", bucket_name(&k.sizes), k.reason))
                .unwrap_or_default();
            return Err(GoptError::Usage(format!(
                "--buckets {s}={v}: no bucket with it could be built; {why}"
            )));
        }
    }
    c.apply_memory_budget(budgets)?;
    Ok(c)
}

/// Specializes and optimizes `buckets` in parallel, results in order. The callers plan
/// them in that order (their weights go into one shared store), so the artifact does not
/// depend on timing.
fn specialize_all(
    c: &Compiled,
    buckets: &[BTreeMap<String, u64>],
    budgets: Budgets,
) -> Vec<Result<Variant>> {
    let (m, o, sk) = (&c.model, &c.opts, &c.skipped);
    buckets
        .par_iter()
        .map(|b| specialize_bucket(m, o, sk, b, budgets))
        .collect()
}

/// Specializes and optimizes one bucket of `model`: nothing shared is touched, so
/// buckets run this in parallel ([`compile_plan`], [`compile_buckets`]).
fn specialize_bucket(
    model: &Imported,
    opts: &Options,
    skipped: &[Skipped],
    sizes: &BTreeMap<String, u64>,
    budgets: Budgets,
) -> Result<pipeline::Variant> {
    let name = bucket_name(sizes);
    if let Some(k) = skipped.iter().find(|k| k.sizes == *sizes) {
        return Err(GoptError::Usage(format!(
            "bucket {name} was skipped when the model was compiled: {}",
            k.reason
        )));
    }
    let in_bucket = |e: GoptError| match e {
        GoptError::Passes(p) => GoptError::Passes(p.in_bucket(&name)),
        e => e,
    };
    let opts = opts.clone().budgets(budgets);
    let v = pipeline::specialize(&model.model, sizes, &opts).map_err(in_bucket)?;
    budgets.check("optimize").map_err(|e| in_bucket(e.into()))?;
    Ok(v)
}

/// `batch=1 seq=128` (or `static shapes`).
pub fn bucket_name(sizes: &BTreeMap<String, u64>) -> String {
    if sizes.is_empty() {
        return "static shapes".into();
    }
    let parts: Vec<String> = sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(" ")
}

impl Compiled {
    /// A compiled model with no bucket yet: [`Compiled::run`] compiles buckets as runs
    /// need them.
    pub fn empty(model: &Imported, opts: &Options) -> Compiled {
        // Each compile starts its own deadline (a run compiling a bucket it needs).
        let mut opts = opts.clone().budgets(Budgets {
            deadline: None,
            ..opts.get_config().budgets
        });
        let mut notes = Vec::new();
        if opts.get_backend() == Backend::Wgpu {
            let p = opts.get_config().precision;
            let lowered = wgsl_precision(p, opts.get_wgsl_f16().unwrap_or(true));
            if lowered != p {
                notes.push(format!(
                    "precision: {} requested, {} on wgpu ({})",
                    p.name(),
                    lowered.name(),
                    match p {
                        Precision::Bf16 if lowered == Precision::Fp16 =>
                            "WGSL has no bf16; f16 keeps the memory savings",
                        Precision::Tf32 => "WGSL has no tf32 math",
                        _ => "the adapter has no SHADER_F16",
                    }
                ));
                opts = opts.precision(lowered);
            }
            let g = &model.model.graph;
            if g.values.iter().any(|v| {
                v.ty.as_ref()
                    .is_some_and(|t| t.dtype == gopt_ir::DType::F64)
            }) {
                notes.push(
                    "f64: stored and computed as f32 on wgpu (WGSL has no f64; inputs and \
                     weights rounded to f32, outputs widened back)"
                        .into(),
                );
            }
        }
        Compiled::with_parts(model.clone(), opts, notes, Vec::new())
    }

    /// A compiled model of these parts, with no bucket and nothing loaded.
    fn with_parts(
        model: Imported,
        opts: Options,
        notes: Vec<String>,
        skipped: Vec<Skipped>,
    ) -> Compiled {
        let value_positions = crate::value_inputs::positions(&model.model.graph);
        Compiled {
            model,
            opts,
            buckets: Vec::new(),
            weights: WeightStore::default(),
            loaded: Loaded::Nothing,
            notes,
            by_value: BTreeMap::new(),
            value_positions,
            skipped,
            quantized: Vec::new(),
        }
    }

    /// An empty compiled model, its weights first quantized as `opts.quantize` asks
    /// ([`pipeline::quantized`]): what every compile starts from. [`Compiled::empty`]
    /// takes the model as it is.
    pub fn new(model: &Imported, opts: &Options) -> Result<Compiled> {
        let (m, quantized) = pipeline::quantized(model, opts)?;
        let mut c = Compiled::empty(&m, opts);
        c.quantized = quantized;
        Ok(c)
    }

    /// The weights `--quantize` quantized (empty without it), in model order.
    pub fn quantized(&self) -> &[gopt_passes::quantize::WeightReport] {
        &self.quantized
    }

    /// What the backend changed from what was asked (a bf16 request compiled as f16 on
    /// wgpu), one line each, for reports.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The options it compiles with (after any lowering the backend needs).
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// The compiled buckets.
    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// The imported model it compiles.
    pub fn model(&self) -> &Imported {
        &self.model
    }

    /// The same model, compiled afresh for `opts` (its backend, device choices and
    /// budgets) at this one's precision: a loaded artifact asked to run on another
    /// backend than the one it was compiled for. Buckets compile as runs need them.
    pub fn recompiled_for(&self, opts: &Options) -> Compiled {
        let o = opts.clone().precision(self.opts.get_config().precision);
        Compiled::empty(&self.model, &o)
    }

    /// The weights blob the buckets' plans share.
    pub fn weights_bytes(&self) -> usize {
        self.weights.len()
    }

    /// Default buckets the compile skipped, with the reason.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// The backend it runs on.
    pub fn backend(&self) -> Backend {
        self.opts.get_backend()
    }

    /// The source model's path, if it came from a file.
    pub fn source(&self) -> Option<&PathBuf> {
        self.model.source.as_ref()
    }

    /// Compiles one more bucket (a run that needs it), under a time limit of its own.
    fn add_bucket(&mut self, sizes: &BTreeMap<String, u64>) -> Result<usize> {
        let budgets = self.opts.get_config().budgets.start();
        self.build_bucket(sizes, budgets)
    }

    /// Compiles one bucket under `budgets` (whose deadline is the running compile's).
    fn build_bucket(&mut self, sizes: &BTreeMap<String, u64>, budgets: Budgets) -> Result<usize> {
        let v = specialize_bucket(&self.model, &self.opts, &self.skipped, sizes, budgets)?;
        self.plan_bucket(sizes, v, budgets)
    }

    /// Plans a specialized bucket into this model's shared weights and keeps it.
    fn plan_bucket(
        &mut self,
        sizes: &BTreeMap<String, u64>,
        v: pipeline::Variant,
        budgets: Budgets,
    ) -> Result<usize> {
        let name = bucket_name(sizes);
        let in_bucket = |e: GoptError| match e {
            GoptError::Passes(p) => GoptError::Passes(p.in_bucket(&name)),
            e => e,
        };
        let plan = match self.opts.get_backend() {
            Backend::Cpu => BackendPlan::Cpu,
            Backend::Cuda => {
                let mut p = gopt_codegen::cuda::plan::build_with(&v.graph, &mut self.weights)?;
                p.tf32 = self.opts.tf32_gemms();
                BackendPlan::Cuda(p)
            }
            Backend::Wgpu => BackendPlan::Wgpu(gopt_codegen::wgsl::plan::build_with(
                &v.graph,
                &mut self.weights,
            )?),
        };
        budgets.check("plan").map_err(|e| in_bucket(e.into()))?;
        let limit = gopt_ir::limit::MemoryLimit::gpu_plan(self.opts.get_memory_limit());
        let what = format!("bucket {name}");
        match &plan {
            BackendPlan::Cpu => {}
            BackendPlan::Cuda(p) => p.check_memory(&what, Some(&v.graph), 0, &limit)?,
            BackendPlan::Wgpu(p) => p.check_memory(&what, Some(&v.graph), &limit)?,
        }
        // New constants invalidate the uploaded blob.
        self.release_gpu();
        self.buckets.push(Bucket {
            sizes: sizes.clone(),
            variant: Some(v),
            plan,
        });
        Ok(self.buckets.len() - 1)
    }

    /// Runs the model: `inputs` in graph order, at any sizes a bucket holds (padded up
    /// to it, outputs sliced back); a bucket not compiled yet is compiled first.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        if let Some((inner, rest)) = self.by_values(inputs)? {
            return inner.run(&rest);
        }
        let (i, sizes, actual) = self.bucket_of(inputs)?;
        let padded = pipeline::pad_inputs(&self.model.model, inputs, &sizes)?;
        let outs = self.execute(i, &padded)?;
        let actual: BTreeMap<String, u64> = actual.into_iter().collect();
        pipeline::slice_outputs(&self.model.model, outs, &sizes, &actual)
    }

    /// Builds what a run on `inputs` would use, without running it: the bucket's plan
    /// (WGSL shaders are validated by naga as they are planned) and, for CUDA, its
    /// kernels compiled with NVRTC for `cuda_arch` (`sm_90`). Needs NVRTC but no GPU:
    /// `gopt test --plan-only` checks plans on machines without one.
    pub fn check_plan(&mut self, inputs: &[Tensor], cuda_arch: &'static str) -> Result<()> {
        if let Some((inner, rest)) = self.by_values(inputs)? {
            return inner.check_plan(&rest, cuda_arch);
        }
        let (i, _, _) = self.bucket_of(inputs)?;
        match &self.buckets[i].plan {
            BackendPlan::Cuda(p) => {
                gopt_runtime::cuda::compile_for_arch(cuda_arch, &p.kernels)?;
            }
            BackendPlan::Wgpu(_) | BackendPlan::Cpu => {}
        }
        Ok(())
    }

    /// The model specialized on the values of its shape-deciding inputs (made once per
    /// new set of values) and the other inputs, when it has such inputs.
    fn by_values(&mut self, inputs: &[Tensor]) -> Result<Option<(&mut Compiled, Vec<Tensor>)>> {
        if self.value_positions.is_empty() {
            return Ok(None);
        }
        interp::check_inputs(&self.model.model.graph, inputs)?;
        let pos = &self.value_positions;
        let key = crate::value_inputs::key(inputs, pos);
        let rest = crate::value_inputs::rest(inputs, pos);
        if !self.by_value.contains_key(&key) {
            let m = crate::value_inputs::specialize(&self.model, inputs, pos);
            let inner = Compiled::empty(&m, &self.opts);
            self.by_value.insert(key.clone(), inner);
        }
        let inner = self
            .by_value
            .get_mut(&key)
            .ok_or_else(|| GoptError::Usage("value-specialized model missing".into()))?;
        Ok(Some((inner, rest)))
    }

    /// The bucket `inputs` run in (compiled first when it is new), its sizes and the
    /// inputs' own symbol sizes.
    fn bucket_of(
        &mut self,
        inputs: &[Tensor],
    ) -> Result<(usize, BTreeMap<String, u64>, gopt_ir::dim::Bindings)> {
        let g = &self.model.model.graph;
        let actual = interp::check_inputs(g, inputs)?;
        if self.opts.get_backend() != Backend::Cpu {
            // The GPU kernels check every index they read and fail the run naming the
            // node; indices fed straight from an input are checked here first, for a
            // message that names the input, the bad value and its position.
            check_gather_indices(g, inputs)?;
        }
        let sizes = pipeline::bucket_for(&self.model.model, &actual, &self.opts)?;
        let i = match self.buckets.iter().position(|b| b.sizes == sizes) {
            Some(i) => i,
            None => self.add_bucket(&sizes)?,
        };
        Ok((i, sizes, actual))
    }

    /// Runs bucket `i` on `padded` (its own shapes) on the backend.
    fn execute(&mut self, i: usize, padded: &[Tensor]) -> Result<Vec<Tensor>> {
        if self.opts.get_backend() == Backend::Cpu {
            let v = self.buckets[i].variant.as_ref().ok_or_else(|| {
                GoptError::Usage("a loaded CUDA artifact has no graph for the CPU backend".into())
            })?;
            let limit = gopt_ir::limit::MemoryLimit::host(self.opts.get_memory_limit());
            return Ok(interp::run_limited(&v.graph, padded, limit)?);
        }
        self.executor(i)?.run(padded)
    }
}

/// Every graph input a `Gather` uses as indices into a constant (token ids into an
/// embedding table) is within the table: ONNX makes an out-of-range index an error.
fn check_gather_indices(g: &gopt_ir::Graph, inputs: &[Tensor]) -> Result<()> {
    use gopt_ir::ops::ShapeOp;
    for n in &g.nodes {
        if n.op != gopt_ir::Op::Shape(ShapeOp::Gather) {
            continue;
        }
        let (Some(Some(data)), Some(Some(idx))) = (n.inputs.first(), n.inputs.get(1)) else {
            continue;
        };
        let (Some(table), Some(k)) = (g.konst(*data), g.inputs.iter().position(|v| v == idx))
        else {
            continue;
        };
        let rank = table.rank() as i64;
        let axis = n.attrs.int_or("axis", 0).unwrap_or(0);
        let axis = if axis < 0 { axis + rank } else { axis };
        let Some(&len) = table.shape().get(axis.max(0) as usize) else {
            continue;
        };
        let len = len as i64;
        let Some(t) = inputs.get(k) else { continue };
        if !t.dtype().is_int() {
            continue;
        }
        if let Some((pos, bad)) = t
            .to_f64_vec()
            .iter()
            .map(|v| *v as i64)
            .enumerate()
            .find(|(_, v)| *v < -len || *v >= len)
        {
            return Err(GoptError::Inputs(format!(
                "input `{}` holds {bad} at flat index {pos}, outside the {len} rows of `{}` \
                 it indexes (node `{}`)",
                g.value(*idx).name,
                g.value(*data).name,
                n.name
            )));
        }
    }
    Ok(())
}

/// The precision a request runs at on wgpu: WGSL has f32 and (with `SHADER_F16`) f16,
/// so bf16 becomes f16 (or f32 without f16), fp16 without f16 becomes f32, and tf32 is
/// f32.
pub fn wgsl_precision(p: Precision, f16: bool) -> Precision {
    match p {
        Precision::Fp32 | Precision::Tf32 => Precision::Fp32,
        Precision::Bf16 | Precision::Fp16 if f16 => Precision::Fp16,
        Precision::Bf16 | Precision::Fp16 => Precision::Fp32,
    }
}
