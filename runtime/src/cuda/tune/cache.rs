//! The on-disk cache of measured GEMM choices, so that loading the same plan again on the
//! same GPU skips the timing and gets the same algorithms. One JSON file per GPU and
//! cuBLASLt version (`$GOPT_CACHE_DIR/gemm`, else `$XDG_CACHE_HOME/gopt/gemm`, else
//! `~/.cache/gopt/gemm`, the peaks cache's convention), one entry per problem: the key
//! spells out everything the descriptors, layouts and operand pointers tell cuBLASLt.
//! Entries are kept in a `BTreeMap` and the file is written whole through a temporary
//! file and a rename, so its bytes depend only on its entries. A file that does not
//! parse, or was written for another GPU, is ignored (with a note) and rewritten.
//!
//! Nothing here touches the GPU: [`super`] measures and validates.

use crate::cuda::blas::Ptrs;
use gopt_codegen::cuda::gemm::{Epilogue, Gemm};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Format of the cache file (bumped when a field changes meaning).
pub const FORMAT: u32 = 1;

/// The GPU and library a choice was measured on: the cache file's name and identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuId {
    /// The device's name (`NVIDIA H200`).
    pub name: String,
    /// Its architecture (`sm_90`).
    pub arch: String,
    /// `cublasLtGetVersion()` (major·10000 + minor·100 + patch).
    pub cublaslt: usize,
}

impl GpuId {
    /// The cache file's name: `NVIDIA_H200-sm_90-cublaslt130000.json`.
    pub fn file_name(&self) -> String {
        let slug: String = self
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!("{slug}-{}-cublaslt{}.json", self.arch, self.cublaslt)
    }

    /// `NVIDIA H200 (sm_90, cuBLASLt 130000)`.
    pub fn describe(&self) -> String {
        format!("{} ({}, cuBLASLt {})", self.name, self.arch, self.cublaslt)
    }
}

/// Where the GEMM cache files live: `$GOPT_CACHE_DIR/gemm`, else
/// `$XDG_CACHE_HOME/gopt/gemm`, else `~/.cache/gopt/gemm` (`None` without any of them).
pub fn cache_dir() -> Option<PathBuf> {
    Some(crate::cache_base()?.join("gemm"))
}

/// The alignment of a device pointer that matters to cuBLASLt: its largest power-of-two
/// divisor, capped at 256 (`-` for none).
fn align(p: Option<u64>) -> String {
    match p {
        None => "-".into(),
        Some(0) => "0".into(),
        Some(p) => (1u64 << p.trailing_zeros().min(8)).to_string(),
    }
}

fn epilogue_name(e: Epilogue) -> &'static str {
    match e {
        Epilogue::None => "none",
        Epilogue::Relu => "relu",
        Epilogue::GeluTanh => "gelu_tanh",
    }
}

/// The cache key of `g` prepared with operands at `ptrs`, computing in tf32 math or
/// not, with `workspace` bytes: sizes, batch and strides, transposes, leading dimension,
/// dtypes, compute type, epilogue, bias, residual, alpha (its bits) and the operands'
/// alignments. Two GEMMs with the same key get the same candidates from cuBLASLt.
pub fn key(g: &Gemm, tf32_math: bool, ptrs: &Ptrs, workspace: usize) -> String {
    format!(
        "m{} n{} k{} batch{} sa{} sb{} sd{} ta{} tb{} ldb{} ab:{} d:{} math:{} epi:{} \
         bias:{} res:{} alpha:{:08x} align:{},{},{},{},{} ws{}",
        g.m,
        g.n,
        g.k,
        g.batch,
        g.stride_a,
        g.stride_b,
        g.stride_d,
        u8::from(g.trans_a),
        u8::from(g.trans_b),
        g.ld_b.map_or_else(|| "-".to_string(), |l| l.to_string()),
        g.ab_dtype,
        g.d_dtype,
        if tf32_math { "32F_FAST_TF32" } else { "32F" },
        epilogue_name(g.epilogue),
        match (g.bias, g.bias_dtype) {
            (None, _) => "-".to_string(),
            (Some(_), Some(dt)) => dt.to_string(),
            (Some(_), None) => g.d_dtype.to_string(),
        },
        u8::from(g.residual.is_some()),
        g.alpha.to_bits(),
        align(Some(ptrs.a)),
        align(Some(ptrs.b)),
        align(ptrs.c),
        align(Some(ptrs.d)),
        align(ptrs.bias),
        workspace
    )
}

/// One cached choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The chosen `cublasLtMatmulAlgo_t`, its eight words as 128 hex digits (see
    /// [`algo_to_hex`]).
    pub algo: String,
    /// Its place in cuBLASLt's heuristic list (0: the heuristic's first choice).
    pub index: usize,
    /// How many candidates the heuristic gave.
    pub candidates: usize,
    /// Its measured time per launch, µs.
    pub us: f64,
    /// The heuristic's first choice's measured time per launch, µs (`None` when it
    /// could not run).
    pub heuristic_us: Option<f64>,
    /// `CUBLASLT_ALGO_CONFIG_TILE_ID`, when cuBLASLt says.
    pub tile: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_STAGES_ID`, when cuBLASLt says.
    pub stages: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_SPLITK_NUM`, when cuBLASLt says.
    pub split_k: Option<u32>,
}

/// What a cache file holds.
#[derive(Debug, Serialize, Deserialize)]
struct CacheFile {
    format: u32,
    gpu: String,
    arch: String,
    cublaslt: usize,
    entries: BTreeMap<String, Entry>,
}

/// The opaque algorithm's words as 128 hex digits, each word little-endian first.
pub fn algo_to_hex(words: &[u64; 8]) -> String {
    words.iter().map(|w| format!("{w:016x}")).collect()
}

/// [`algo_to_hex`] read back; `None` for anything but 128 hex digits.
pub fn algo_from_hex(s: &str) -> Option<[u64; 8]> {
    if s.len() != 128 || !s.is_ascii() {
        return None;
    }
    let mut words = [0u64; 8];
    for (i, w) in words.iter_mut().enumerate() {
        *w = u64::from_str_radix(&s[16 * i..16 * (i + 1)], 16).ok()?;
    }
    Some(words)
}

/// The cache file of `gpu` under `dir`.
pub fn path(dir: &Path, gpu: &GpuId) -> PathBuf {
    dir.join(gpu.file_name())
}

/// The entries cached at `path` for `gpu`, and a note when the file was there but could
/// not be used (it is then rewritten by the next [`save`]). A missing file is an empty
/// cache, without a note.
pub fn load(path: &Path, gpu: &GpuId) -> (BTreeMap<String, Entry>, Option<String>) {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (BTreeMap::new(), None),
        Err(e) => {
            return (
                BTreeMap::new(),
                Some(format!(
                    "cannot read the GEMM cache {}: {e}",
                    path.display()
                )),
            )
        }
    };
    let ignored = |why: String| {
        (
            BTreeMap::new(),
            Some(format!(
                "ignored the GEMM cache {} ({why}); it is rewritten",
                path.display()
            )),
        )
    };
    match serde_json::from_slice::<CacheFile>(&bytes) {
        Err(e) => ignored(format!("not a GEMM cache: {e}")),
        Ok(f) if f.format != FORMAT => ignored(format!("format {}, not {FORMAT}", f.format)),
        Ok(f) if f.gpu != gpu.name || f.arch != gpu.arch || f.cublaslt != gpu.cublaslt => {
            ignored(format!(
                "written for {} ({}, cuBLASLt {}), not {}",
                f.gpu,
                f.arch,
                f.cublaslt,
                gpu.describe()
            ))
        }
        Ok(f) => (f.entries, None),
    }
}

/// Writes `entries` into the cache at `path`, merged over what the file holds now (so
/// two processes that tuned different shapes keep both; `entries` win on a shared key),
/// through a temporary file and a rename.
pub fn save(path: &Path, gpu: &GpuId, entries: &BTreeMap<String, Entry>) -> std::io::Result<()> {
    let (mut all, _) = load(path, gpu);
    all.extend(entries.iter().map(|(k, v)| (k.clone(), v.clone())));
    let file = CacheFile {
        format: FORMAT,
        gpu: gpu.name.clone(),
        arch: gpu.arch.clone(),
        cublaslt: gpu.cublaslt,
        entries: all,
    };
    let mut json = serde_json::to_string_pretty(&file).map_err(std::io::Error::other)?;
    json.push('\n');
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// A time rounded to a nanosecond, so the file does not spell float noise.
pub fn round_us(us: f64) -> f64 {
    (us * 1e3).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;
    use gopt_ir::DType;

    fn gemm() -> Gemm {
        Gemm {
            node: "ffn1".into(),
            a: 1,
            b: 2,
            bias: Some(3),
            bias_dtype: Some(DType::BF16),
            residual: None,
            out: 4,
            m: 4096,
            n: 3072,
            k: 768,
            batch: 1,
            stride_a: 0,
            stride_b: 0,
            stride_d: 0,
            trans_b: false,
            trans_a: false,
            ld_b: None,
            alpha: 1.0,
            ab_dtype: DType::BF16,
            d_dtype: DType::BF16,
            epilogue: Epilogue::GeluTanh,
            post: None,
        }
    }

    fn ptrs() -> Ptrs {
        Ptrs {
            a: 0x7f00_0000_0000,
            b: 0x7f10_0000_0100,
            c: None,
            d: 0x7f00_0000_0010,
            bias: Some(0x7f10_0000_0008),
        }
    }

    fn gpu() -> GpuId {
        GpuId {
            name: "NVIDIA H200".into(),
            arch: "sm_90".into(),
            cublaslt: 130000,
        }
    }

    fn entry(index: usize) -> Entry {
        Entry {
            algo: algo_to_hex(&[1, 2, 3, u64::MAX, 0, 0x0123_4567_89ab_cdef, 7, index as u64]),
            index,
            candidates: 8,
            us: 31.25,
            heuristic_us: Some(47.0),
            tile: Some(21),
            stages: Some(16),
            split_k: Some(1),
        }
    }

    /// A directory of its own under the system's temporary folder.
    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gopt-gemm-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    #[test]
    fn the_key_spells_the_whole_problem_and_is_stable() {
        let k = key(&gemm(), false, &ptrs(), 32 << 20);
        assert_eq!(
            k,
            "m4096 n3072 k768 batch1 sa0 sb0 sd0 ta0 tb0 ldb- ab:bf16 d:bf16 math:32F \
             epi:gelu_tanh bias:bf16 res:0 alpha:3f800000 align:256,256,-,16,8 ws33554432"
        );
        assert_eq!(k, key(&gemm(), false, &ptrs(), 32 << 20));
        let mut other = gemm();
        other.epilogue = Epilogue::None;
        assert_ne!(key(&other, false, &ptrs(), 32 << 20), k);
        assert_ne!(key(&gemm(), true, &ptrs(), 32 << 20), k);
        let mut moved = ptrs();
        moved.d += 0x100;
        assert_eq!(
            key(&gemm(), false, &moved, 32 << 20),
            k,
            "only alignment counts"
        );
        moved.d += 2;
        assert_ne!(key(&gemm(), false, &moved, 32 << 20), k);
    }

    #[test]
    fn algo_bytes_round_trip_and_bad_text_is_refused() {
        let words = [0, 1, u64::MAX, 0x8000_0000_0000_0000, 42, 7, 0xdead_beef, 3];
        let hex = algo_to_hex(&words);
        assert_eq!(hex.len(), 128);
        assert_eq!(algo_from_hex(&hex), Some(words));
        assert_eq!(algo_from_hex(&hex[1..]), None);
        assert_eq!(algo_from_hex(&format!("{}g", &hex[1..])), None);
        assert_eq!(algo_from_hex(&"é".repeat(64)), None);
    }

    #[test]
    fn saved_entries_load_back_and_the_file_is_deterministic() {
        let dir = temp_dir("roundtrip");
        let p = path(&dir, &gpu());
        assert!(p.ends_with("NVIDIA_H200-sm_90-cublaslt130000.json"));
        let (empty, note) = load(&p, &gpu());
        assert!(
            empty.is_empty() && note.is_none(),
            "a missing file is an empty cache"
        );
        let mut a = BTreeMap::new();
        a.insert("k2".to_string(), entry(2));
        a.insert("k1".to_string(), entry(0));
        save(&p, &gpu(), &a).expect("saves");
        let first = std::fs::read(&p).expect("written");
        let (back, note) = load(&p, &gpu());
        assert_eq!(back, a);
        assert!(note.is_none());
        // The same entries given in another order, over the file: the same bytes.
        let mut b = BTreeMap::new();
        b.insert("k1".to_string(), entry(0));
        save(&p, &gpu(), &b).expect("saves");
        assert_eq!(std::fs::read(&p).expect("written"), first);
        // Another GPU's identity does not read it.
        let other = GpuId {
            cublaslt: 130100,
            ..gpu()
        };
        let (none, note) = load(&p, &other);
        assert!(none.is_empty());
        assert!(note.expect("a note").contains("written for NVIDIA H200"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_corrupt_file_is_ignored_with_a_note_and_rewritten() {
        let dir = temp_dir("corrupt");
        let p = path(&dir, &gpu());
        std::fs::write(&p, b"{ \"format\": 1, \"entries\": [tr").expect("write");
        let (none, note) = load(&p, &gpu());
        assert!(none.is_empty());
        let note = note.expect("a note");
        assert!(
            note.contains("ignored the GEMM cache") && note.contains("rewritten"),
            "{note}"
        );
        let mut a = BTreeMap::new();
        a.insert("k".to_string(), entry(1));
        save(&p, &gpu(), &a).expect("rewrites");
        assert_eq!(load(&p, &gpu()), (a, None));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn times_are_rounded_to_a_nanosecond() {
        assert_eq!(round_us(31.123_456_7), 31.123);
        assert_eq!(round_us(0.0), 0.0);
    }
}
