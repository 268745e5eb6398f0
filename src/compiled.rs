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

use crate::pipeline::{self, Backend, Options, Variant};
use crate::{GoptError, Imported, Result};
use gopt_codegen::plan::{self, CudaPlan, WeightStore};
use gopt_codegen::wgsl::plan::WgslPlan;
use gopt_ir::{interp, Tensor};
use gopt_passes::Precision;
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
}

/// What `plan.json` holds.
#[derive(Serialize, Deserialize)]
struct Artifact {
    format: String,
    backend: String,
    precision: String,
    buckets: Vec<ArtifactBucket>,
}

#[derive(Serialize, Deserialize)]
struct ArtifactBucket {
    sizes: BTreeMap<String, u64>,
    plan: Option<CudaPlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wgsl: Option<WgslPlan>,
}

/// Compiles `model` for every bucket combination of `opts` (the default bucket sizes,
/// or `opts.buckets`); with `opts.backend == Cuda` each bucket is also planned for the
/// GPU (no GPU is needed to compile).
pub fn compile(model: &Imported, opts: &Options) -> Result<Compiled> {
    let combos = if opts.config.enabled(gopt_passes::Pass::Bucketing) {
        pipeline::plan(&model.model, opts)?.combinations()
    } else {
        vec![BTreeMap::new()]
    };
    compile_buckets(model, opts, &combos, |_| {})
}

/// Compiles `model` for the given buckets; `progress` is called after each.
pub fn compile_buckets(
    model: &Imported,
    opts: &Options,
    buckets: &[BTreeMap<String, u64>],
    mut progress: impl FnMut(&Bucket),
) -> Result<Compiled> {
    let mut c = Compiled::empty(model, opts);
    for b in buckets {
        let i = c.add_bucket(b)?;
        progress(&c.buckets[i]);
    }
    Ok(c)
}

impl Compiled {
    /// A compiled model with no bucket yet: [`Compiled::run`] compiles buckets as runs
    /// need them.
    pub fn empty(model: &Imported, opts: &Options) -> Compiled {
        let mut opts = opts.clone();
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

    /// The weights blob the buckets' plans share.
    pub fn weights_bytes(&self) -> usize {
        self.weights.blob.len()
    }

    fn add_bucket(&mut self, sizes: &BTreeMap<String, u64>) -> Result<usize> {
        let v = pipeline::specialize(&self.model.model, sizes, &self.opts)?;
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
            // The GPU gathers do not bounds-check (an out-of-range index would be an
            // illegal address that ends the process's CUDA context, or a clamped read
            // on wgpu): check here.
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
                Ok(interp::run(&v.graph, padded)?)
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

    /// Writes the artifact to `dir`: `plan.json` (every bucket's plan, versioned),
    /// `kernels.cu` (each bucket's CUDA module), `weights.bin` (the shared weights) and
    /// `model.onnx` (a copy of the source model: runs pad and slice by its declared
    /// dims).
    pub fn save(&self, dir: &Path) -> Result<()> {
        let source = self.model.source.as_ref().ok_or_else(|| {
            GoptError::Usage("saving needs a model loaded from a file (gopt::load_model)".into())
        })?;
        std::fs::create_dir_all(dir).map_err(|e| GoptError::io(dir, e))?;
        let art = Artifact {
            format: format!("gopt-artifact-{}", plan::VERSION),
            backend: self.opts.backend.name().into(),
            precision: self.opts.config.precision.name().into(),
            buckets: self
                .buckets
                .iter()
                .map(|b| ArtifactBucket {
                    sizes: b.sizes.clone(),
                    plan: b.plan.clone(),
                    wgsl: b.wgsl.clone(),
                })
                .collect(),
        };
        let write = |name: &str, bytes: &[u8]| -> Result<()> {
            let p = dir.join(name);
            std::fs::write(&p, bytes).map_err(|e| GoptError::io(p, e))
        };
        let json = serde_json::to_vec_pretty(&art).map_err(|e| GoptError::Usage(e.to_string()))?;
        write("plan.json", &json)?;
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
        if self.opts.backend == Backend::Wgpu {
            write("kernels.wgsl", wgsl.as_bytes())?;
        } else {
            write("kernels.cu", cu.as_bytes())?;
        }
        write("weights.bin", &self.weights.blob)?;
        let dst = dir.join("model.onnx");
        if std::fs::canonicalize(source).ok() != std::fs::canonicalize(&dst).ok() {
            std::fs::copy(source, &dst).map_err(|e| GoptError::io(source.clone(), e))?;
        }
        Ok(())
    }

    /// Loads an artifact [`Compiled::save`] wrote; runs use its plans (CUDA) without
    /// optimizing again. `opts` gives run-time choices (CUDA graphs); its bucket and
    /// precision options must match the artifact's for buckets compiled later.
    pub fn load(dir: &Path, opts: &Options) -> Result<Compiled> {
        let plan = dir.join("plan.json");
        if !plan.is_file() {
            return Err(GoptError::Usage(format!(
                "{} is not a gopt artifact: no {}",
                dir.display(),
                plan.display()
            )));
        }
        let model = crate::load_model(&dir.join("model.onnx"))?;
        Self::load_with(dir, model, opts)
    }

    /// [`Compiled::load`] with the artifact's `model.onnx` already imported (as
    /// `model`), so a caller that needed the model first does not import it twice.
    pub fn load_with(dir: &Path, model: Imported, opts: &Options) -> Result<Compiled> {
        let value_positions = crate::value_inputs::positions(&model.model.graph);
        let read = |name: &str| -> Result<Vec<u8>> {
            let p = dir.join(name);
            std::fs::read(&p).map_err(|e| GoptError::io(p, e))
        };
        let art = read_artifact(dir)?;
        let blob = read("weights.bin")?;
        let mut opts = opts.clone();
        opts.backend = match art.backend.as_str() {
            "cuda" => Backend::Cuda,
            "wgpu" => Backend::Wgpu,
            _ => Backend::Cpu,
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

/// Reads and checks an artifact's `plan.json`.
fn read_artifact(dir: &Path) -> Result<Artifact> {
    let p = dir.join("plan.json");
    let bytes = std::fs::read(&p).map_err(|e| GoptError::io(&p, e))?;
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
