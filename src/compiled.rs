//! The library's compile API: [`compile`] turns a model into a [`Compiled`] — one
//! specialized, optimized graph per shape bucket and, for CUDA or wgpu, each bucket's
//! plan with the weights shared by all of them — and [`Compiled::run`] executes it: inputs checked,
//! padded up to their bucket, run on the chosen backend, outputs sliced back. The CLI's
//! `compile`, `run`, `test` and `bench` are built on these calls.
//!
//! ```no_run
//! use gopt::pipeline::{Backend, Options};
//! let model = gopt::load_model(std::path::Path::new("tests/data/models/bert_small/model.onnx"))?;
//! let mut opts = Options::from_cli("bf16", &[], &["seq=128".into(), "batch=1,8".into()])?;
//! opts.backend = Backend::Cuda;
//! let mut compiled = gopt::compile(&model, &opts)?;
//! compiled.save(std::path::Path::new("bert.gopt"))?;
//! # let inputs = vec![];
//! let outputs = compiled.run(&inputs)?;
//! # Ok::<(), gopt::GoptError>(())
//! ```

use crate::artifact;
use crate::pipeline::{self, Backend, Options, Variant};
use crate::{GoptError, Imported, Result};
use gopt_codegen::plan::{self, CudaPlan, WeightStore};
use gopt_codegen::wgsl::plan::WgslPlan;
use gopt_ir::{interp, Tensor};
use gopt_passes::{bucket, Budgets, PassError, Precision};
use gopt_runtime::exec::{Executable, Weights};
use gopt_runtime::wgpu_exec::{WgpuExecutable, WgpuWeights};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One compiled bucket.
pub struct Bucket {
    /// The symbol sizes it was specialized to.
    pub sizes: BTreeMap<String, u64>,
    /// The optimized graph (absent in a loaded artifact: the plan replaces it).
    pub variant: Option<Variant>,
    /// Its CUDA plan (with the CUDA backend).
    pub plan: Option<CudaPlan>,
    /// Its WGSL plan (with the wgpu backend).
    pub wgsl: Option<WgslPlan>,
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
    gpu_weights: Option<Arc<Weights>>,
    exes: BTreeMap<usize, Executable>,
    wgpu_weights: WgpuWeights,
    wgpu_exes: BTreeMap<usize, WgpuExecutable>,
    notes: Vec<String>,
    /// Models whose shape-deciding inputs became constants, by their values
    /// ([`crate::value_inputs`]).
    by_value: BTreeMap<Vec<Vec<u8>>, Compiled>,
    /// Which graph inputs those are (found once, at creation).
    value_positions: Vec<usize>,
    /// Default buckets that could not be built.
    skipped: Vec<Skipped>,
}

/// What `plan.json` holds.
#[derive(Serialize, Deserialize)]
struct Artifact {
    /// SHA-256 of this file, taken with this field blank (first: see
    /// [`artifact::SELF_KEY`]). Empty in artifacts of older gopts.
    #[serde(default)]
    sha256: String,
    format: String,
    backend: String,
    precision: String,
    /// SHA-256 of every other file of the artifact, by file name.
    #[serde(default)]
    files: BTreeMap<String, String>,
    buckets: Vec<ArtifactBucket>,
    /// Default buckets that could not be built, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    skipped: Vec<Skipped>,
}

/// Files every artifact has (besides `plan.json` and `kernels.*`).
const REQUIRED_FILES: [&str; 2] = ["model.onnx", "weights.bin"];

#[derive(Serialize, Deserialize)]
struct ArtifactBucket {
    sizes: BTreeMap<String, u64>,
    plan: Option<CudaPlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wgsl: Option<WgslPlan>,
}

/// Compiles `model` for every bucket combination of `opts` (the default bucket sizes,
/// or `opts.buckets`; see [`compile_plan`] for default buckets that cannot be built);
/// with `opts.backend == Cuda` each bucket is also planned for the GPU (no GPU is
/// needed to compile).
pub fn compile(model: &Imported, opts: &Options) -> Result<Compiled> {
    if opts.config.enabled(gopt_passes::Pass::Bucketing) {
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
    let budgets = opts.config.budgets.start();
    let mut c = Compiled::empty(model, opts);
    for b in buckets {
        let i = c.build_bucket(b, budgets)?;
        progress(&c.buckets[i]);
    }
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
    let budgets = opts.config.budgets.start();
    let mut c = Compiled::empty(model, opts);
    let combos = plan.combinations();
    let mut first_error = None;
    for b in &combos {
        match c.build_bucket(b, budgets) {
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
    Ok(c)
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
        let mut opts = opts.clone();
        // Each compile starts its own deadline (a run compiling a bucket it needs).
        opts.config.budgets.deadline = None;
        let mut notes = Vec::new();
        if opts.backend == Backend::Wgpu {
            let p = opts.config.precision;
            let lowered = wgsl_precision(p, opts.wgsl_f16.unwrap_or(true));
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
                opts.config.precision = lowered;
            }
        }
        Compiled {
            model: model.clone(),
            opts,
            buckets: Vec::new(),
            weights: WeightStore::default(),
            gpu_weights: None,
            exes: BTreeMap::new(),
            wgpu_weights: WgpuWeights::default(),
            wgpu_exes: BTreeMap::new(),
            notes,
            by_value: BTreeMap::new(),
            skipped: Vec::new(),
            value_positions: crate::value_inputs::positions(&model.model.graph),
        }
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
        let mut o = opts.clone();
        o.config.precision = self.opts.config.precision;
        Compiled::empty(&self.model, &o)
    }

    /// The weights blob the buckets' plans share.
    pub fn weights_bytes(&self) -> usize {
        self.weights.blob.len()
    }

    /// Default buckets the compile skipped, with the reason.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Compiles one more bucket (a run that needs it), under a time limit of its own.
    fn add_bucket(&mut self, sizes: &BTreeMap<String, u64>) -> Result<usize> {
        let budgets = self.opts.config.budgets.start();
        self.build_bucket(sizes, budgets)
    }

    /// Compiles one bucket under `budgets` (whose deadline is the running compile's).
    fn build_bucket(&mut self, sizes: &BTreeMap<String, u64>, budgets: Budgets) -> Result<usize> {
        let name = bucket_name(sizes);
        if let Some(k) = self.skipped.iter().find(|k| k.sizes == *sizes) {
            return Err(GoptError::Usage(format!(
                "bucket {name} was skipped when the model was compiled: {}",
                k.reason
            )));
        }
        let in_bucket = |e: GoptError| match e {
            GoptError::Passes(p) => GoptError::Passes(p.in_bucket(&name)),
            e => e,
        };
        let mut opts = self.opts.clone();
        opts.config.budgets = budgets;
        let v = pipeline::specialize(&self.model.model, sizes, &opts).map_err(in_bucket)?;
        budgets.check("optimize").map_err(|e| in_bucket(e.into()))?;
        let (plan, wgsl) = match self.opts.backend {
            Backend::Cpu => (None, None),
            Backend::Cuda => (Some(plan::build_with(&v.graph, &mut self.weights)?), None),
            Backend::Wgpu => (
                None,
                Some(gopt_codegen::wgsl::plan::build_with(
                    &v.graph,
                    &mut self.weights,
                )?),
            ),
        };
        budgets.check("plan").map_err(|e| in_bucket(e.into()))?;
        let limit = gopt_ir::limit::MemoryLimit::gpu_plan(self.opts.memory_limit);
        let what = format!("bucket {name}");
        if let Some(p) = &plan {
            p.check_memory(&what, Some(&v.graph), 0, &limit)?;
        }
        if let Some(p) = &wgsl {
            p.check_memory(&what, Some(&v.graph), &limit)?;
        }
        // New constants invalidate the uploaded blob.
        self.release_gpu();
        self.buckets.push(Bucket {
            sizes: sizes.clone(),
            variant: Some(v),
            plan,
            wgsl,
        });
        Ok(self.buckets.len() - 1)
    }

    /// Runs the model: `inputs` in graph order, at any sizes a bucket holds (padded up
    /// to it, outputs sliced back); a bucket not compiled yet is compiled first.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let g = &self.model.model.graph;
        let actual = interp::check_inputs(g, inputs)?;
        if !self.value_positions.is_empty() {
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
            return inner.run(&rest);
        }
        if self.opts.backend != Backend::Cpu {
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
        let padded = pipeline::pad_inputs(&self.model.model, inputs, &sizes)?;
        let outs = self.execute(i, &padded)?;
        let actual: BTreeMap<String, u64> = actual.into_iter().collect();
        pipeline::slice_outputs(&self.model.model, outs, &sizes, &actual)
    }

    /// The executable of bucket `i` (CUDA), loaded on first use.
    pub fn executable(&mut self, i: usize) -> Result<&mut Executable> {
        if !self.exes.contains_key(&i) {
            let plan = self.buckets[i]
                .plan
                .clone()
                .ok_or_else(|| GoptError::Usage("this model was not compiled for CUDA".into()))?;
            let dev = crate::cuda::device()?;
            gopt_runtime::exec::check_memory(
                &dev,
                &format!("bucket {}", bucket_name(&self.buckets[i].sizes)),
                &plan,
                self.gpu_weights.is_none(),
                self.opts.memory_limit,
            )?;
            // NVRTC runs outside the GPU lock (it does not touch the GPU).
            gopt_runtime::exec::precompile(&dev, &plan.kernels)?;
            let _gpu = gopt_runtime::exec::gpu_lock();
            let w = match &self.gpu_weights {
                Some(w) => w.clone(),
                None => {
                    let w = Weights::upload(&dev, &self.weights.blob)?;
                    self.gpu_weights = Some(w.clone());
                    w
                }
            };
            let exe = Executable::new(&dev, plan, w, !self.opts.no_cuda_graph)?;
            self.exes.insert(i, exe);
        }
        self.exes
            .get_mut(&i)
            .ok_or_else(|| GoptError::Usage("executable missing".into()))
    }

    fn execute(&mut self, i: usize, padded: &[Tensor]) -> Result<Vec<Tensor>> {
        match self.opts.backend {
            Backend::Cpu => {
                let v = self.buckets[i].variant.as_ref().ok_or_else(|| {
                    GoptError::Usage(
                        "a loaded CUDA artifact has no graph for the CPU backend".into(),
                    )
                })?;
                let limit = gopt_ir::limit::MemoryLimit::host(self.opts.memory_limit);
                Ok(interp::run_limited(&v.graph, padded, limit)?)
            }
            Backend::Cuda => Ok(self.executable(i)?.run(padded)?),
            Backend::Wgpu => Ok(self.wgpu_executable(i)?.run(padded)?),
        }
    }

    /// The wgpu executable of bucket `i`, made on first use.
    pub fn wgpu_executable(&mut self, i: usize) -> Result<&mut WgpuExecutable> {
        if !self.wgpu_exes.contains_key(&i) {
            let plan = self.buckets[i].wgsl.clone().ok_or_else(|| {
                GoptError::Usage("this model was not compiled for wgpu (--target wgsl)".into())
            })?;
            let dev = crate::wgpu::device(self.opts.adapter.as_deref())?;
            gopt_runtime::wgpu_exec::check_memory(
                &dev,
                &format!("bucket {}", bucket_name(&self.buckets[i].sizes)),
                &plan,
                &self.wgpu_weights,
                self.opts.memory_limit,
            )?;
            let exe = WgpuExecutable::new(dev, plan, &mut self.wgpu_weights, &self.weights.blob)?;
            self.wgpu_exes.insert(i, exe);
        }
        self.wgpu_exes
            .get_mut(&i)
            .ok_or_else(|| GoptError::Usage("executable missing".into()))
    }

    /// Device bytes of the wgpu weights uploaded so far.
    pub fn wgpu_weights_bytes(&self) -> usize {
        self.wgpu_weights.bytes()
    }

    /// Writes the artifact to `dir`: `plan.json` (every bucket's plan, versioned, with
    /// the SHA-256 of every file of the artifact), `kernels.cu` (each bucket's CUDA
    /// module), `weights.bin` (the shared weights) and `model.onnx` (a copy of the
    /// source model: runs pad and slice by its declared dims).
    pub fn save(&self, dir: &Path) -> Result<()> {
        self.save_with(dir, &[])
    }

    /// [`Compiled::save`], with `extra`: names of files already written in `dir` (the
    /// compile reports) that belong to the artifact and are hashed with it.
    pub fn save_with(&self, dir: &Path, extra: &[String]) -> Result<()> {
        let source = self.model.source.as_ref().ok_or_else(|| {
            GoptError::Usage("saving needs a model loaded from a file (gopt::load_model)".into())
        })?;
        std::fs::create_dir_all(dir).map_err(|e| GoptError::io(dir, e))?;
        let mut art = Artifact {
            sha256: String::new(),
            format: format!("gopt-artifact-{}", plan::VERSION),
            backend: self.opts.backend.name().into(),
            precision: self.opts.config.precision.name().into(),
            files: BTreeMap::new(),
            buckets: self
                .buckets
                .iter()
                .map(|b| ArtifactBucket {
                    sizes: b.sizes.clone(),
                    plan: b.plan.clone(),
                    wgsl: b.wgsl.clone(),
                })
                .collect(),
            skipped: self.skipped.clone(),
        };
        let write = |name: &str, bytes: &[u8]| -> Result<()> {
            let p = dir.join(name);
            std::fs::write(&p, bytes).map_err(|e| GoptError::io(p, e))
        };
        let mut cu = String::new();
        for b in &self.buckets {
            if let Some(p) = &b.plan {
                let s: Vec<String> = b.sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
                cu.push_str(&format!("// ===== bucket {} =====\n", s.join(" ")));
                cu.push_str(&gopt_codegen::cuda::module_source(&p.kernels));
                cu.push('\n');
            }
        }
        let mut wgsl = String::new();
        for b in &self.buckets {
            if let Some(p) = &b.wgsl {
                let s: Vec<String> = b.sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
                wgsl.push_str(&format!("// ===== bucket {} =====\n", s.join(" ")));
                wgsl.push_str(&p.source());
            }
        }
        let kernels = if self.opts.backend == Backend::Wgpu {
            write("kernels.wgsl", wgsl.as_bytes())?;
            "kernels.wgsl"
        } else {
            write("kernels.cu", cu.as_bytes())?;
            "kernels.cu"
        };
        write("weights.bin", &self.weights.blob)?;
        let dst = dir.join("model.onnx");
        if std::fs::canonicalize(source).ok() != std::fs::canonicalize(&dst).ok() {
            std::fs::copy(source, &dst).map_err(|e| GoptError::io(source.clone(), e))?;
        }
        let mut names: Vec<String> = REQUIRED_FILES.iter().map(|s| s.to_string()).collect();
        names.push(kernels.into());
        let extra = extra.iter().filter(|n| n.as_str() != artifact::PLAN);
        names.extend(extra.cloned());
        art.files = artifact::hash_files(dir, &names)?;
        let json = serde_json::to_vec_pretty(&art).map_err(|e| GoptError::Usage(e.to_string()))?;
        // plan.json last: an interrupted save leaves no loadable artifact.
        write(artifact::PLAN, &artifact::seal(&json)?)
    }

    /// Loads an artifact [`Compiled::save`] wrote; runs use its plans (CUDA) without
    /// optimizing again. `opts` gives run-time choices (CUDA graphs); its bucket and
    /// precision options must match the artifact's for buckets compiled later.
    /// Every file of the artifact is checked against the hashes `plan.json` records
    /// before anything is imported or run: a modified file is an error naming it.
    pub fn load(dir: &Path, opts: &Options) -> Result<Compiled> {
        let art = read_artifact(dir)?;
        let model = crate::load_model(&dir.join("model.onnx"))?;
        Self::from_artifact(dir, art, model, opts)
    }

    /// [`Compiled::load`] with the artifact's `model.onnx` already imported (as
    /// `model`), so a caller that needed the model first does not import it twice.
    pub fn load_with(dir: &Path, model: Imported, opts: &Options) -> Result<Compiled> {
        let art = read_artifact(dir)?;
        Self::from_artifact(dir, art, model, opts)
    }

    fn from_artifact(
        dir: &Path,
        art: Artifact,
        model: Imported,
        opts: &Options,
    ) -> Result<Compiled> {
        let value_positions = crate::value_inputs::positions(&model.model.graph);
        let p = dir.join("weights.bin");
        let blob =
            gopt_frontends::fs::read_regular(&p, u64::MAX).map_err(|e| GoptError::io(&p, e))?;
        let mut opts = opts.clone();
        opts.backend = match art.backend.as_str() {
            "cuda" => Backend::Cuda,
            "wgpu" => Backend::Wgpu,
            other => {
                return Err(GoptError::Usage(format!(
                    "{}: the artifact's backend `{other}` is not cuda or wgpu",
                    dir.display()
                )))
            }
        };
        // Buckets compiled later must match the artifact's precision.
        if let Some(p) = gopt_passes::Precision::from_name(&art.precision) {
            opts.config.precision = p;
        }
        let mut c = Compiled {
            model,
            opts,
            buckets: Vec::new(),
            weights: WeightStore::default(),
            gpu_weights: None,
            exes: BTreeMap::new(),
            wgpu_weights: WgpuWeights::default(),
            wgpu_exes: BTreeMap::new(),
            notes: Vec::new(),
            value_positions,
            by_value: BTreeMap::new(),
            skipped: art.skipped,
        };
        c.weights = WeightStore::default();
        c.weights.blob = blob;
        c.buckets = art
            .buckets
            .into_iter()
            .map(|b| Bucket {
                sizes: b.sizes,
                variant: None,
                plan: b.plan,
                wgsl: b.wgsl,
            })
            .collect();
        Ok(c)
    }

    /// Frees the GPU resources (under the process's GPU lock).
    fn release_gpu(&mut self) {
        if self.exes.is_empty() && self.gpu_weights.is_none() {
            return;
        }
        let _gpu = gopt_runtime::exec::gpu_lock();
        self.exes.clear();
        self.gpu_weights = None;
    }

    /// The backend it runs on.
    pub fn backend(&self) -> Backend {
        self.opts.backend
    }

    /// The source model's path, if it came from a file.
    pub fn source(&self) -> Option<&PathBuf> {
        self.model.source.as_ref()
    }
}

/// Reads and checks an artifact's `plan.json`, and every file it lists against its
/// hash.
fn read_artifact(dir: &Path) -> Result<Artifact> {
    let p = dir.join(artifact::PLAN);
    if !p.is_file() {
        return Err(GoptError::Usage(format!(
            "{} is not a gopt artifact: no {}",
            dir.display(),
            p.display()
        )));
    }
    let bytes = artifact::read_plan(dir)?;
    let art: Artifact = serde_json::from_slice(&bytes)
        .map_err(|e| GoptError::Usage(format!("{}: not a gopt artifact plan: {e}", p.display())))?;
    let want = format!("gopt-artifact-{}", plan::VERSION);
    if art.format != want {
        return Err(GoptError::Usage(format!(
            "{}: artifact format {} (this gopt reads {want}): compile it again",
            dir.display(),
            art.format
        )));
    }
    if art.sha256.is_empty() {
        return Err(GoptError::Usage(format!(
            "{}: {} records no file hashes (an older gopt wrote it), so its integrity \
             cannot be checked: compile it again",
            dir.display(),
            artifact::PLAN
        )));
    }
    artifact::check_plan(dir, &bytes, &art.sha256)?;
    if let Some(missing) = REQUIRED_FILES.iter().find(|f| !art.files.contains_key(**f)) {
        return Err(GoptError::Usage(format!(
            "{}: {} records no hash for {missing}: compile it again",
            dir.display(),
            artifact::PLAN
        )));
    }
    artifact::check_files(dir, &art.files)?;
    Ok(art)
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
        let (Some(table), Some(k)) = (g.constant(*data), g.inputs.iter().position(|v| v == idx))
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

impl Drop for Compiled {
    fn drop(&mut self) {
        self.release_gpu();
    }
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
