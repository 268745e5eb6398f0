//! The tensor-parallel artifact `gopt compile --tensor-parallel N --target cuda -o DIR`
//! writes and `gopt run DIR` / `gopt bench DIR` load: a sealed top-level manifest,
//! `tensor-parallel.json`, listing the ranks, the buckets (one folder each), how each
//! input is distributed over the ranks, and the SHA-256 of every rank file
//! (`rank{r}/<bucket>/{plan.json,weights.bin,graph.ir}`) and of `model.onnx`, the model
//! they were split from. Loading checks them all, as
//! for a single-GPU artifact: a changed, missing or added-to-the-list file is refused,
//! naming it. An input is replicated to every rank or split by blocks along an axis
//! (a KV cache by heads); an output is read from rank 0 (whole, or gathered by the
//! rank graphs) or reassembled from its ranks' blocks (a present KV cache).

use super::{check_sealed, file_sha256, is_plain_name, seal};
use crate::{GoptError, Result};
use gopt_codegen::cuda::plan::CudaPlan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The manifest's file name; its presence makes a folder a tensor-parallel artifact.
pub const MANIFEST: &str = "tensor-parallel.json";

/// The model the ranks were split from (the 1-GPU baseline `bench` compares with).
pub const MODEL: &str = "model.onnx";

/// The files of one rank's bucket folder.
pub const RANK_FILES: [&str; 3] = ["plan.json", "weights.bin", "graph.ir"];

/// Largest plan or manifest read.
const MAX_JSON_BYTES: u64 = 1 << 30;

/// The manifest's format, tied to the plans' version.
pub fn format() -> String {
    format!("gopt-tensor-parallel-{}", gopt_codegen::plan::VERSION)
}

/// How an input reaches the ranks, or an output leaves them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// The whole tensor on every rank (an output: read from rank 0).
    Replicated,
    /// Cut along `axis` into `blocks` equal blocks, rank `r` holding block
    /// `r * blocks / ranks` (consecutive ranks share a block when there are fewer
    /// blocks than ranks).
    Split {
        /// The axis.
        axis: usize,
        /// How many distinct blocks.
        blocks: usize,
    },
}

impl Distribution {
    /// The distribution of a value the sharding pass placed as `p`.
    pub fn of(p: gopt_passes::shard::Placement) -> Distribution {
        use gopt_passes::shard::Placement;
        match p {
            Placement::Whole | Placement::Gathered => Distribution::Replicated,
            Placement::Split { axis, blocks } => Distribution::Split { axis, blocks },
        }
    }

    /// The sharding pass's placement this distribution carries out.
    pub fn placement(self) -> gopt_passes::shard::Placement {
        use gopt_passes::shard::Placement;
        match self {
            Distribution::Replicated => Placement::Whole,
            Distribution::Split { axis, blocks } => Placement::Split { axis, blocks },
        }
    }
}

/// One input or output of the model and its distribution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    /// The input's name.
    pub name: String,
    /// How it is given to the ranks.
    pub distribution: Distribution,
}

/// One bucket: its sizes and the folder name under each `rank{r}/`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// The symbolic dims' sizes.
    pub sizes: BTreeMap<String, u64>,
    /// Folder name inside each rank's folder.
    pub dir: String,
}

/// What `tensor-parallel.json` holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// SHA-256 of this file with this field blank (first: see [`super::SELF_KEY`]).
    pub sha256: String,
    /// [`format`].
    pub format: String,
    /// Rank count (GPUs).
    pub ranks: usize,
    /// The model's inputs, in order.
    pub inputs: Vec<Input>,
    /// The model's outputs, in order (absent: every output from `outputs_from`).
    #[serde(default)]
    pub outputs: Vec<Input>,
    /// The rank whose outputs are the model's.
    pub outputs_from: usize,
    /// The buckets.
    pub buckets: Vec<Bucket>,
    /// SHA-256 of every rank file, by path relative to the artifact (`/`-separated).
    pub files: BTreeMap<String, String>,
}

/// The path of rank `r`'s `file` of bucket folder `dir`.
pub fn rank_file(r: usize, dir: &str, file: &str) -> String {
    format!("rank{r}/{dir}/{file}")
}

/// Copies `model` (and its external data files) into `out` as [`MODEL`], then writes
/// and seals the manifest of the rank files already there (every bucket's
/// [`RANK_FILES`] for every rank), hashing each.
pub fn write(
    out: &Path,
    model: &Path,
    ranks: usize,
    inputs: Vec<Input>,
    outputs: Vec<Input>,
    buckets: Vec<Bucket>,
) -> Result<()> {
    let dst = out.join(MODEL);
    if std::fs::canonicalize(model).ok() != std::fs::canonicalize(&dst).ok() {
        std::fs::copy(model, &dst).map_err(|e| GoptError::io(model, e))?;
    }
    let mut files = BTreeMap::new();
    files.insert(MODEL.to_string(), file_sha256(out, MODEL)?);
    for name in crate::compiled::link_external_data(model, out)? {
        files.insert(name.clone(), file_sha256(out, &name)?);
    }
    for b in &buckets {
        for r in 0..ranks {
            for f in RANK_FILES {
                let p = rank_file(r, &b.dir, f);
                files.insert(p.clone(), file_sha256(out, &p)?);
            }
        }
    }
    let m = Manifest {
        sha256: String::new(),
        format: format(),
        ranks,
        inputs,
        outputs,
        outputs_from: 0,
        buckets,
        files,
    };
    let json = serde_json::to_vec_pretty(&m).map_err(|e| GoptError::Usage(e.to_string()))?;
    let p = out.join(MANIFEST);
    std::fs::write(&p, seal(&json)?).map_err(|e| GoptError::io(&p, e))
}

/// Reads `dir`'s manifest and checks it and every file it lists; a tensor-parallel
/// artifact must list every rank file of every bucket.
pub fn read(dir: &Path) -> Result<Manifest> {
    let p = dir.join(MANIFEST);
    let bytes =
        gopt_frontends::fs::read_regular(&p, MAX_JSON_BYTES).map_err(|e| GoptError::io(&p, e))?;
    let bad = |m: String| GoptError::Usage(format!("{}: {m}", p.display()));
    let m: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| bad(format!("not a gopt tensor-parallel manifest: {e}")))?;
    if m.format != format() {
        return Err(bad(format!(
            "format {} (this gopt reads {}): compile it again",
            m.format,
            format()
        )));
    }
    check_sealed(dir, MANIFEST, &bytes, &m.sha256)?;
    if !(1..=64).contains(&m.ranks) || m.outputs_from >= m.ranks || m.buckets.is_empty() {
        return Err(bad(format!(
            "{} ranks, outputs from rank {}, {} buckets: compile it again",
            m.ranks,
            m.outputs_from,
            m.buckets.len()
        )));
    }
    if !m.files.contains_key(MODEL) {
        return Err(bad(format!(
            "records no hash for {MODEL}: compile it again"
        )));
    }
    for b in &m.buckets {
        if !is_plain_name(&b.dir) {
            return Err(bad(format!(
                "bucket folder `{}` is not a plain name",
                b.dir
            )));
        }
        for r in 0..m.ranks {
            for f in RANK_FILES {
                let name = rank_file(r, &b.dir, f);
                if !m.files.contains_key(&name) {
                    return Err(bad(format!("records no hash for {name}: compile it again")));
                }
            }
        }
    }
    for (name, want) in &m.files {
        if !name.split('/').all(is_plain_name) {
            return Err(bad(format!(
                "lists `{name}`, which is not a path inside the artifact"
            )));
        }
        super::check_file(dir, name, want, "the manifest")?;
    }
    Ok(m)
}

/// Rank `r`'s plan of bucket `b` (from a manifest [`read`] checked).
pub fn plan(dir: &Path, b: &Bucket, r: usize) -> Result<CudaPlan> {
    let p = dir.join(rank_file(r, &b.dir, "plan.json"));
    let bytes =
        gopt_frontends::fs::read_regular(&p, MAX_JSON_BYTES).map_err(|e| GoptError::io(&p, e))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| GoptError::Usage(format!("{}: not a CUDA plan: {e}", p.display())))
}

/// Rank `r`'s weights of bucket `b`.
pub fn weights(dir: &Path, b: &Bucket, r: usize) -> Result<Vec<u8>> {
    let p = dir.join(rank_file(r, &b.dir, "weights.bin"));
    gopt_frontends::fs::read_regular(&p, u64::MAX).map_err(|e| GoptError::io(&p, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-rank artifact of one bucket with small stand-in files.
    fn artifact(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("gopt_tp_{name}_{}", std::process::id()));
        for r in 0..2 {
            let d = dir.join(format!("rank{r}")).join("batch=1");
            std::fs::create_dir_all(&d).expect("mkdir");
            for f in RANK_FILES {
                std::fs::write(d.join(f), format!("{f} of rank {r}")).expect("write");
            }
        }
        let b = Bucket {
            sizes: [("batch".to_string(), 1)].into(),
            dir: "batch=1".into(),
        };
        let model =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models/bert_small/model.onnx");
        let io = |name: &str, distribution| Input {
            name: name.into(),
            distribution,
        };
        let split = Distribution::Split { axis: 1, blocks: 2 };
        let inputs = vec![io("x", Distribution::Replicated), io("past", split)];
        write(&dir, &model, 2, inputs, vec![io("y", split)], vec![b]).expect("manifest");
        dir
    }

    #[test]
    fn a_written_manifest_reads_back_and_lists_every_rank_file() {
        let dir = artifact("roundtrip");
        let m = read(&dir).expect("intact");
        assert_eq!((m.ranks, m.outputs_from, m.files.len()), (2, 0, 7));
        assert_eq!(m.inputs[0].distribution, Distribution::Replicated);
        let split = Distribution::Split { axis: 1, blocks: 2 };
        assert_eq!(
            (m.inputs[1].distribution, m.outputs[0].distribution),
            (split, split)
        );
        let text = std::fs::read_to_string(dir.join(MANIFEST)).expect("manifest");
        assert!(text.contains("\"distribution\": \"replicated\""), "{text}");
        assert!(text.contains("\"axis\": 1"), "{text}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_changed_rank_file_or_manifest_is_refused() {
        let dir = artifact("tamper");
        std::fs::write(dir.join("rank1/batch=1/weights.bin"), "edited").expect("write");
        let e = read(&dir).expect_err("tampered weights").to_string();
        assert!(e.contains("rank1/batch=1/weights.bin was modified"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
        let dir = artifact("manifest");
        let p = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&p).expect("manifest");
        std::fs::write(&p, text.replace("\"ranks\": 2", "\"ranks\": 3")).expect("write");
        let e = read(&dir).expect_err("edited manifest").to_string();
        assert!(e.contains("tensor-parallel.json was modified"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
