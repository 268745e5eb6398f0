//! What a load's GEMM choices were: one [`GemmChoice`] per GEMM step and the
//! [`TuneReport`] gathering them, in the forms the CLI prints (`--explain`'s line per
//! distinct problem, `gopt bench`'s summary) and `report.json` records.

use super::ENV;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a GEMM's algorithm came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Its candidates were timed during this load.
    Measured,
    /// Read from the on-disk cache and accepted by `cublasLtMatmulAlgoCheck`.
    Cache,
    /// The heuristic's first choice, untimed (tuning off, or nothing could be timed).
    Heuristic,
}

impl Source {
    /// `measured`, `cache`, `heuristic`.
    pub fn name(self) -> &'static str {
        match self {
            Source::Measured => "measured",
            Source::Cache => "cache",
            Source::Heuristic => "heuristic",
        }
    }
}

/// The algorithm one GEMM step runs with, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmChoice {
    /// The node the GEMM computes.
    pub node: String,
    /// `4096x3072x768 bf16 +bias gelu_tanh` (M×N×K, batch, dtypes, epilogue).
    pub shape: String,
    /// The problem's cache key ([`super::cache::key`]).
    pub key: String,
    /// The chosen candidate's place in the heuristic's list (0: its first choice).
    pub index: usize,
    /// How many candidates the heuristic gave.
    pub candidates: usize,
    /// The chosen algorithm's tile, stages and split-K, where cuBLASLt says.
    pub tile: Option<u32>,
    /// See `tile`.
    pub stages: Option<u32>,
    /// See `tile`.
    pub split_k: Option<u32>,
    /// The chosen algorithm's measured time per launch, µs.
    pub us: Option<f64>,
    /// The heuristic's first choice's measured time per launch, µs.
    pub heuristic_us: Option<f64>,
    /// Where the choice came from.
    pub source: Source,
}

impl GemmChoice {
    /// One line for `--explain`: shape, node (and how many steps share the problem),
    /// choice, times and source.
    pub fn line(&self, steps: usize) -> String {
        let mut config = Vec::new();
        if let Some(t) = self.tile {
            config.push(format!("tile {t}"));
        }
        if let Some(s) = self.stages {
            config.push(format!("stages {s}"));
        }
        if let Some(k) = self.split_k {
            config.push(format!("split-K {k}"));
        }
        let config = if config.is_empty() {
            String::new()
        } else {
            format!(" ({})", config.join(", "))
        };
        let times = match (self.us, self.heuristic_us) {
            (Some(us), Some(_)) if self.index == 0 => format!(", {us:.1} µs (the first)"),
            (Some(us), Some(h)) => format!(
                ", {us:.1} µs vs {h:.1} µs for the heuristic's first ({:.2}x)",
                h / us.max(1e-9)
            ),
            (Some(us), None) => format!(", {us:.1} µs (the heuristic's first could not run)"),
            (None, _) => String::new(),
        };
        let shared = if steps > 1 {
            format!(", {steps} steps")
        } else {
            String::new()
        };
        format!(
            "{} (`{}`{shared}): candidate {} of {}{config}{times}, {}",
            self.shape,
            self.node,
            self.index + 1,
            self.candidates,
            self.source.name()
        )
    }
}

/// The GEMM choices of one load, with what choosing them cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    /// The GPU and cuBLASLt version (`NVIDIA H200 (sm_90, cuBLASLt 130000)`).
    pub gpu: String,
    /// Whether candidates were timed (else the heuristic's first choice throughout).
    pub measure: bool,
    /// Each GEMM step's choice, in plan order.
    pub choices: Vec<GemmChoice>,
    /// Distinct problems (GEMMs with one cache key count once).
    pub shapes: usize,
    /// Distinct problems whose choice is not the heuristic's first.
    pub changed: usize,
    /// The heuristic's first's time over the chosen one's, summed over the steps whose
    /// choice changed (`None` when none did).
    pub speedup: Option<f64>,
    /// Distinct problems read from the cache.
    pub cache_hits: usize,
    /// Distinct problems timed.
    pub measured: usize,
    /// Milliseconds spent choosing (timing, cache checks, reading and writing the file).
    pub ms: f64,
    /// The cache file, when there is one.
    pub cache_file: Option<String>,
    /// What went differently from the plan (a cache ignored, a candidate that failed).
    pub notes: Vec<String>,
}

impl TuneReport {
    /// Each distinct problem's first step's choice, with how many steps share it, in
    /// plan order.
    pub fn distinct(&self) -> Vec<(&GemmChoice, usize)> {
        let mut order: Vec<(&GemmChoice, usize)> = Vec::new();
        let mut at: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &self.choices {
            match at.get(c.key.as_str()) {
                Some(&i) => order[i].1 += 1,
                None => {
                    at.insert(&c.key, order.len());
                    order.push((c, 1));
                }
            }
        }
        order
    }

    /// `gemm tuning: 12 shapes, 5 changed from the heuristic's first, 1.23x on those,
    /// 310 ms (cache: 0 hits)`.
    pub fn summary_line(&self) -> String {
        if !self.measure {
            return format!(
                "gemm tuning: off ({ENV}=0 or --no-gemm-tune): cuBLASLt's heuristic's first \
                 choice for {} shapes",
                self.shapes
            );
        }
        let changed = match (self.changed, self.speedup) {
            (0, _) => "none changed from the heuristic's first".to_string(),
            (n, Some(s)) => format!("{n} changed from the heuristic's first, {s:.2}x on those"),
            (n, None) => format!("{n} changed from the heuristic's first"),
        };
        format!(
            "gemm tuning: {} shapes, {changed}, {:.0} ms (cache: {} hits)",
            self.shapes, self.ms, self.cache_hits
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(node: &str, key: &str, index: usize, us: f64, first: f64) -> GemmChoice {
        GemmChoice {
            node: node.into(),
            shape: "4096x3072x768 bf16 +bias gelu_tanh".into(),
            key: key.into(),
            index,
            candidates: 8,
            tile: Some(21),
            stages: None,
            split_k: Some(1),
            us: Some(us),
            heuristic_us: Some(first),
            source: Source::Measured,
        }
    }

    #[test]
    fn the_report_groups_steps_by_problem_and_says_so_in_a_line() {
        let r = TuneReport {
            gpu: "NVIDIA H200 (sm_90, cuBLASLt 130000)".into(),
            measure: true,
            choices: vec![
                choice("ffn1.0", "k1", 3, 31.0, 47.0),
                choice("ffn2.0", "k2", 0, 31.0, 31.0),
                choice("ffn1.1", "k1", 3, 31.0, 47.0),
            ],
            shapes: 2,
            changed: 1,
            speedup: Some(47.0 / 31.0),
            cache_hits: 0,
            measured: 2,
            ms: 12.4,
            cache_file: None,
            notes: vec![],
        };
        let d = r.distinct();
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].0.node.as_str(), d[0].1), ("ffn1.0", 2));
        assert_eq!(
            r.summary_line(),
            "gemm tuning: 2 shapes, 1 changed from the heuristic's first, 1.52x on those, 12 ms \
             (cache: 0 hits)"
        );
        assert_eq!(
            d[0].0.line(d[0].1),
            "4096x3072x768 bf16 +bias gelu_tanh (`ffn1.0`, 2 steps): candidate 4 of 8 (tile 21, \
             split-K 1), 31.0 µs vs 47.0 µs for the heuristic's first (1.52x), measured"
        );
        assert!(d[1].0.line(1).ends_with("31.0 µs (the first), measured"));
        let off = TuneReport {
            measure: false,
            shapes: 4,
            ..TuneReport::default()
        };
        assert!(off.summary_line().starts_with("gemm tuning: off"));
    }
}
