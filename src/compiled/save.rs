//! The artifact a [`Compiled`] model saves and loads: `plan.json` (every bucket's plan,
//! versioned, with the SHA-256 of every file: see [`crate::artifact`]), the kernels
//! (`kernels.cu` or `kernels.wgsl`), `weights.bin` shared by the buckets, and a copy of
//! `model.onnx`. A loaded artifact runs its plans without optimizing again.

use super::{BackendPlan, Bucket, Compiled, Skipped};
use crate::artifact;
use crate::pipeline::{Backend, Options};
use crate::{GoptError, Imported, Result};
use gopt_codegen::cuda::plan::CudaPlan;
use gopt_codegen::plan::{self, WeightStore};
use gopt_codegen::wgsl::plan::WgslPlan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

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
    /// `--quantize`: `model.onnx` is the float model; buckets compiled later quantize
    /// it the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    quantize: Option<gopt_passes::quantize::Quantize>,
}

/// Files every artifact has (besides `plan.json` and `kernels.*`).
const REQUIRED_FILES: [&str; 2] = ["model.onnx", "weights.bin"];

/// A bucket in `plan.json`: `plan` is its CUDA plan (`null` for another backend),
/// `wgsl` its WGSL plan (absent for another backend).
#[derive(Serialize, Deserialize)]
struct ArtifactBucket {
    sizes: BTreeMap<String, u64>,
    plan: Option<CudaPlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wgsl: Option<WgslPlan>,
}

impl ArtifactBucket {
    fn of(b: &Bucket) -> ArtifactBucket {
        let (plan, wgsl) = match &b.plan {
            BackendPlan::Cpu => (None, None),
            BackendPlan::Cuda(p) => (Some(p.clone()), None),
            BackendPlan::Wgpu(p) => (None, Some(p.clone())),
        };
        ArtifactBucket {
            sizes: b.sizes.clone(),
            plan,
            wgsl,
        }
    }

    fn into_bucket(self, dir: &Path) -> Result<Bucket> {
        let plan = match (self.plan, self.wgsl) {
            (None, None) => BackendPlan::Cpu,
            (Some(p), None) => BackendPlan::Cuda(p),
            (None, Some(p)) => BackendPlan::Wgpu(p),
            (Some(_), Some(_)) => {
                return Err(GoptError::Usage(format!(
                    "{}: bucket {} holds both a CUDA and a WGSL plan: compile it again",
                    dir.display(),
                    super::bucket_name(&self.sizes)
                )))
            }
        };
        Ok(Bucket {
            sizes: self.sizes,
            variant: None,
            plan,
        })
    }
}

impl Compiled {
    /// Writes the artifact to `dir`: `plan.json` (every bucket's plan, versioned, with
    /// the SHA-256 of every file of the artifact), `kernels.cu` (each bucket's CUDA
    /// module) or `kernels.wgsl`, `weights.bin` (the shared weights) and `model.onnx` (a
    /// copy of the source model: runs pad and slice by its declared dims).
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
            backend: self.opts.get_backend().name().into(),
            precision: self.opts.get_config().precision.name().into(),
            files: BTreeMap::new(),
            buckets: self.buckets.iter().map(ArtifactBucket::of).collect(),
            skipped: self.skipped.clone(),
            quantize: self.opts.get_quantize(),
        };
        let write = |name: &str, bytes: &[u8]| -> Result<()> {
            let p = dir.join(name);
            std::fs::write(&p, bytes).map_err(|e| GoptError::io(p, e))
        };
        let (kernels, text) = match self.opts.get_backend() {
            Backend::Wgpu => ("kernels.wgsl", self.wgsl_source()),
            Backend::Cuda | Backend::Cpu => ("kernels.cu", self.cuda_source()),
        };
        write(kernels, text.as_bytes())?;
        // weights.bin is hashed as it is streamed out (a 1B model's weights are
        // gigabytes: reading them back would double the write's cost).
        let p = dir.join("weights.bin");
        let f = std::fs::File::create(&p).map_err(|e| GoptError::io(&p, e))?;
        let mut w = artifact::HashingWriter::new(std::io::BufWriter::with_capacity(1 << 20, f));
        self.weights
            .write(&mut w)
            .map_err(|e| GoptError::io(&p, e))?;
        let weights_hash = w.finish().map_err(|e| GoptError::io(&p, e))?;
        let dst = dir.join("model.onnx");
        if std::fs::canonicalize(source).ok() != std::fs::canonicalize(&dst).ok() {
            std::fs::copy(source, &dst).map_err(|e| GoptError::io(source.clone(), e))?;
        }
        let mut names: Vec<String> = vec!["model.onnx".into(), kernels.into()];
        let extra = extra.iter().filter(|n| n.as_str() != artifact::PLAN);
        names.extend(extra.cloned());
        names.extend(link_external_data(source, dir)?);
        art.files = artifact::hash_files(dir, &names)?;
        art.files.insert("weights.bin".into(), weights_hash);
        let json = serde_json::to_vec_pretty(&art).map_err(|e| GoptError::Usage(e.to_string()))?;
        // plan.json last: an interrupted save leaves no loadable artifact.
        write(artifact::PLAN, &artifact::seal(&json)?)
    }

    /// `kernels.cu`: each CUDA bucket's module under a `// ===== bucket ... =====` line.
    fn cuda_source(&self) -> String {
        let mut cu = String::new();
        for b in &self.buckets {
            if let BackendPlan::Cuda(p) = &b.plan {
                cu.push_str(&format!("// ===== bucket {} =====\n", header(&b.sizes)));
                cu.push_str(&gopt_codegen::cuda::module_source(&p.kernels));
                cu.push('\n');
            }
        }
        cu
    }

    /// `kernels.wgsl`: each WGSL bucket's shaders under a `// ===== bucket ... =====`
    /// line.
    fn wgsl_source(&self) -> String {
        let mut wgsl = String::new();
        for b in &self.buckets {
            if let BackendPlan::Wgpu(p) = &b.plan {
                wgsl.push_str(&format!("// ===== bucket {} =====\n", header(&b.sizes)));
                wgsl.push_str(&p.source());
            }
        }
        wgsl
    }

    /// Loads an artifact [`Compiled::save`] wrote; runs use its plans without
    /// optimizing again. `opts` gives run-time choices (CUDA graphs, the adapter); its
    /// bucket and budget options apply to buckets compiled later, at the artifact's
    /// precision. Every file of the artifact is checked against the hashes `plan.json`
    /// records before anything is imported or run: a modified file is an error naming
    /// it.
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
        let p = dir.join("weights.bin");
        let blob =
            gopt_frontends::fs::map_regular(&p, u64::MAX).map_err(|e| GoptError::io(&p, e))?;
        let backend = match art.backend.parse::<Backend>() {
            Ok(b @ (Backend::Cuda | Backend::Wgpu)) => b,
            Ok(Backend::Cpu) | Err(_) => {
                return Err(GoptError::Usage(format!(
                    "{}: the artifact's backend `{}` is not cuda or wgpu",
                    dir.display(),
                    art.backend
                )))
            }
        };
        let mut opts = opts.clone().backend(backend);
        // Buckets compiled later must match the artifact's precision.
        if let Some(p) = gopt_passes::Precision::from_name(&art.precision) {
            opts = opts.precision(p);
        }
        let mut quantized = Vec::new();
        let model = match art.quantize {
            Some(q) => {
                opts = opts.quantize(q);
                let (m, reports) = crate::pipeline::quantized(&model, &opts)?;
                quantized = reports;
                m
            }
            None => model,
        };
        let mut c = Compiled::with_parts(model, opts, Vec::new(), art.skipped);
        c.quantized = quantized;
        c.weights = WeightStore::from_blob(blob);
        c.buckets = art
            .buckets
            .into_iter()
            .map(|b| b.into_bucket(dir))
            .collect::<Result<_>>()?;
        Ok(c)
    }
}

/// Places the external data files of the source model (weights kept beside an ONNX
/// file over 2 GB) in the artifact, under the same relative names, so its
/// `model.onnx` imports from there: a hard link when the artifact is on the same file
/// system (no copy), else a copy. Returns their names (hashed with the artifact).
pub(crate) fn link_external_data(source: &Path, dir: &Path) -> Result<Vec<String>> {
    let from = source.parent().unwrap_or(Path::new("."));
    let locations = gopt_frontends::onnx::external_locations(source)
        .map_err(|e| GoptError::Usage(format!("{}: {e}", source.display())))?;
    let mut names = Vec::new();
    for loc in locations {
        let (src, dst) = (from.join(&loc), dir.join(&loc));
        if std::fs::canonicalize(&src).ok() == std::fs::canonicalize(&dst).ok() {
            names.push(loc);
            continue;
        }
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(|e| GoptError::io(parent, e))?;
        }
        let _ = std::fs::remove_file(&dst);
        if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).map_err(|e| GoptError::io(&src, e))?;
        }
        names.push(loc);
    }
    Ok(names)
}

/// `batch=1 seq=128` for a kernels file's bucket header (empty for static shapes).
fn header(sizes: &BTreeMap<String, u64>) -> String {
    let s: Vec<String> = sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
    s.join(" ")
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
