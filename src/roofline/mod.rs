//! Where each kernel sits against what the device can do. [`Peaks`] are the device's
//! roofs — the bandwidth of a device-to-device copy, the GEMM rate per unit (bf16/f16
//! and tf32 tensor cores, fp32), the time of a one-element kernel timed the way
//! `--profile` times steps, and the SM count — measured once per device
//! ([`measure`]) and cached on disk ([`load_or_measure`]). [`classify`] puts a
//! measured kernel into one [`Class`] by stated rules, and [`rows`] joins a profile
//! with the cost model's prediction for each kernel, flagging the kernels where the two
//! differ by more than [`MISMATCH`]: that is where the cost model is wrong.
//!
//! Peers classify after the fact on a GPU (Nsight Compute's roofline) or not at all
//! (TensorRT's inspector lists what was chosen); here the prediction exists before the
//! run (`gopt compile --explain`) and the measurement checks it.

mod measure;

pub use gopt_passes::cost::Class;
pub use measure::measure;

use crate::{GoptError, Result};
use gopt_passes::report::Kernel;
use gopt_runtime::StepTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A kernel at or below this many times the one-element kernel's time is
/// launch/latency-bound.
pub const LAUNCH_FACTOR: f64 = 2.0;
/// A kernel reaching this fraction of the roof that binds it is bound by that roof.
pub const ROOF_FRACTION: f64 = 0.5;
/// Measured and predicted times further apart than this factor are flagged.
pub const MISMATCH: f64 = 2.0;
/// Format of the cached peaks (bumped when a field changes meaning).
const VERSION: u32 = 1;

/// What a device can do, measured on it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Peaks {
    /// Format version.
    pub version: u32,
    /// `cuda` or `wgpu`.
    pub backend: String,
    /// The device's name.
    pub device: String,
    /// Bytes per second (read plus write) of a device-to-device copy.
    pub copy_bytes_per_s: f64,
    /// GEMM operations per second by unit key (`bf16`, `tf32`, `fp32`; the keys of
    /// `gopt_passes::cost::Unit::key`).
    pub compute: BTreeMap<String, f64>,
    /// Seconds a one-element kernel takes, timed as `--profile` times each step.
    pub floor_s: f64,
    /// Streaming multiprocessors (CUDA; unknown on wgpu).
    pub sms: Option<u32>,
    /// How each figure was measured (sizes, method), for the report.
    pub how: Vec<String>,
    /// When, in seconds since the Unix epoch.
    pub measured_at: u64,
}

impl Peaks {
    /// The compute roof of `unit`, falling back to the fp32 rate when the unit was not
    /// measured (a wgpu adapter without f16).
    pub fn compute_roof(&self, unit: &str) -> Option<f64> {
        self.compute
            .get(unit)
            .or_else(|| self.compute.get("fp32"))
            .copied()
    }

    /// One line: `copy 4.31 TB/s, bf16 812 TFLOP/s, ..., one-element kernel 2.1 µs, 132 SMs`.
    pub fn summary(&self) -> String {
        let mut parts = vec![format!("copy {}", rate(self.copy_bytes_per_s, "B/s"))];
        for (k, v) in &self.compute {
            parts.push(format!("{k} GEMM {}", rate(*v, "FLOP/s")));
        }
        parts.push(format!("one-element kernel {:.1} µs", self.floor_s * 1e6));
        if let Some(n) = self.sms {
            parts.push(format!("{n} SMs"));
        }
        parts.join(", ")
    }

    /// `measured 3 h ago`, `measured just now`.
    pub fn age(&self) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let s = now.saturating_sub(self.measured_at);
        match s {
            0..=59 => "measured just now".into(),
            60..=3599 => format!("measured {} min ago", s / 60),
            3600..=172_799 => format!("measured {} h ago", s / 3600),
            _ => format!("measured {} days ago", s / 86_400),
        }
    }
}

impl Peaks {
    /// The cost model's target with these measured roofs in place of `base`'s
    /// figures: bandwidth, the GEMM rate of each unit, the one-element kernel's time as
    /// the launch cost, the SM count; `base`'s tile latency and scalar rate on CUDA
    /// (measured once, on an H200), none on wgpu; no low-precision penalty. Predictions
    /// made with it are the cost model's formulas on this device, so they can be held
    /// against its measurements.
    pub fn target(&self, base: &gopt_passes::Target) -> gopt_passes::Target {
        let rate = |k: &str, d: f64| self.compute.get(k).copied().unwrap_or(d);
        gopt_passes::Target {
            name: self.device.clone(),
            bandwidth: self.copy_bytes_per_s,
            tensor_f16: rate("bf16", base.tensor_f16),
            tensor_tf32: rate("tf32", rate("fp32", base.tensor_tf32)),
            fp32: rate("fp32", base.fp32),
            launch_graph: self.floor_s,
            launch_eager: self.floor_s,
            // Unknown (wgpu): no occupancy rule rather than another device's.
            sms: self.sms.map_or(0, |n| n as usize),
            // Measured on CUDA kernels (cuBLASLt's, gopt's), not on WGSL shaders: none
            // on wgpu rather than another backend's.
            tile_latency: if self.backend == "cuda" {
                base.tile_latency
            } else {
                0.0
            },
            scalar_rate: if self.backend == "cuda" {
                base.scalar_rate
            } else {
                0.0
            },
            // A prediction, not a choice: without the penalty extraction puts on wide
            // math under a low precision (the estimates `--explain` reports, too).
            low_precision: None,
            ..base.clone()
        }
    }
}

/// `4.31 TB/s`, `812 TFLOP/s`.
pub fn rate(x: f64, unit: &str) -> String {
    gopt_passes::report::fmt_si(x, unit)
}

/// Where the peaks of `backend`'s `device` are cached: `$GOPT_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/gopt`, else `~/.cache/gopt`, then `peaks/<backend>-<device>.json`.
pub fn cache_path(backend: &str, device: &str) -> Option<PathBuf> {
    let base = gopt_runtime::cache_base()?;
    let slug: String = device
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    Some(base.join("peaks").join(format!("{backend}-{slug}.json")))
}

/// Where [`load_or_measure`]'s peaks came from.
#[derive(Clone, Debug)]
pub enum Source {
    /// Read from this cache file.
    Cached(PathBuf),
    /// Measured now, and cached in this file (or not, and why).
    Measured(std::result::Result<PathBuf, String>),
}

/// The cached peaks of this device, or `measure()`d and cached now (`fresh`: measure
/// even when cached). A cache that cannot be read or written is not an error: the
/// peaks are measured again, and [`Source`] says what happened.
pub fn load_or_measure(
    backend: &str,
    device: &str,
    fresh: bool,
    measure: impl FnOnce() -> Result<Peaks>,
) -> Result<(Peaks, Source)> {
    let path = cache_path(backend, device);
    if let (false, Some(p)) = (fresh, &path) {
        if let Some(peaks) = std::fs::read(p)
            .ok()
            .and_then(|b| serde_json::from_slice::<Peaks>(&b).ok())
            .filter(|k| k.version == VERSION && k.backend == backend)
        {
            return Ok((peaks, Source::Cached(p.clone())));
        }
    }
    let peaks = measure()?;
    let saved = match &path {
        None => Err("no cache directory (set GOPT_CACHE_DIR or HOME)".to_string()),
        Some(p) => save(p, &peaks)
            .map(|()| p.clone())
            .map_err(|e| format!("cannot write {}: {e}", p.display())),
    };
    Ok((peaks, Source::Measured(saved)))
}

fn save(p: &std::path::Path, peaks: &Peaks) -> std::io::Result<()> {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d)?;
    }
    let json = serde_json::to_vec_pretty(peaks).map_err(std::io::Error::other)?;
    let tmp = p.with_extension("json.tmp");
    std::fs::write(&tmp, json)?;
    std::fs::rename(tmp, p)
}

/// A measured kernel's class and the rule that decided it, in words.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// The class.
    pub class: Class,
    /// The rule, with the figures it compared.
    pub rule: String,
    /// Achieved bytes per second.
    pub bytes_per_s: f64,
    /// Achieved operations per second.
    pub flops_per_s: f64,
    /// Achieved bandwidth as a fraction of the copy bandwidth.
    pub of_copy: f64,
    /// Achieved operations per second as a fraction of the unit's GEMM roof.
    pub of_compute: f64,
}

/// The class of a kernel that moved `bytes` and performed `flops` on `unit` in
/// `seconds`, launched as `blocks` blocks (when known). The rules, in order:
/// 1. launch/latency-bound: it took at most [`LAUNCH_FACTOR`] × the one-element
///    kernel's time;
/// 2. the roof that binds it is the memory roof when its arithmetic intensity is
///    below the ridge (bytes / copy bandwidth ≥ flops / unit roof), else the compute
///    roof; reaching [`ROOF_FRACTION`] of it makes it memory- or compute-bound;
/// 3. below that, fewer blocks than the device has SMs make it under-occupied;
/// 4. otherwise it is classed by the roof that binds it, below that roof (the rule
///    says how far).
pub fn classify(
    p: &Peaks,
    bytes: f64,
    flops: f64,
    unit: &str,
    seconds: f64,
    blocks: Option<u64>,
) -> Verdict {
    let seconds = seconds.max(1e-12);
    let (bw, fl) = (bytes / seconds, flops / seconds);
    let roof = p.compute_roof(unit).unwrap_or(f64::INFINITY).max(1.0);
    let copy = p.copy_bytes_per_s.max(1.0);
    let (of_copy, of_compute) = (bw / copy, fl / roof);
    let memory_side = bytes / copy >= flops / roof;
    let pct = |x: f64| format!("{:.0}%", 100.0 * x);
    let verdict = |class: Class, rule: String| Verdict {
        class,
        rule,
        bytes_per_s: bw,
        flops_per_s: fl,
        of_copy,
        of_compute,
    };
    if seconds <= LAUNCH_FACTOR * p.floor_s {
        return verdict(
            Class::Launch,
            format!(
                "{:.1} µs ≤ {LAUNCH_FACTOR}× the {:.1} µs of a one-element kernel",
                seconds * 1e6,
                p.floor_s * 1e6
            ),
        );
    }
    let (class, reached, roof_name) = if memory_side {
        (Class::Memory, of_copy, "copy bandwidth".to_string())
    } else {
        (Class::Compute, of_compute, format!("the {unit} GEMM peak"))
    };
    if reached >= ROOF_FRACTION {
        return verdict(
            class,
            format!("{} of {roof_name} (≥ {})", pct(reached), pct(ROOF_FRACTION)),
        );
    }
    if let (Some(b), Some(sms)) = (blocks, p.sms) {
        if b < u64::from(sms) {
            return verdict(
                Class::UnderOccupied,
                format!("{b} blocks for {sms} SMs; {} of {roof_name}", pct(reached)),
            );
        }
    }
    verdict(
        class,
        format!(
            "intensity on the {} side of the ridge, at only {} of {roof_name}",
            if memory_side { "memory" } else { "compute" },
            pct(reached)
        ),
    )
}

/// One kernel of a profile: measured beside predicted.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The graph node (a fused kernel's name).
    pub node: String,
    /// What ran for it (kernel names, GEMM shapes), joined.
    pub steps: Vec<String>,
    /// Op, with a fused GEMM's epilogue.
    pub op: String,
    /// Family for charts (`gemm`, `norm`, ...).
    pub kind: String,
    /// Measured milliseconds (its steps' medians, summed).
    pub ms: f64,
    /// Bytes moved and operations (the cost model's counts).
    pub bytes: f64,
    /// See `bytes`.
    pub flops: f64,
    /// The unit key.
    pub unit: String,
    /// Blocks launched (the largest of its steps), when known.
    pub blocks: Option<u64>,
    /// The measured class and rule.
    pub measured: Verdict,
    /// The cost model's estimate, ms, and class (absent for a step the cost model does
    /// not see as a kernel: a view the backend had to copy).
    pub predicted_ms: Option<f64>,
    /// See `predicted_ms`.
    pub predicted_class: Option<String>,
    /// Measured and predicted differ by more than [`MISMATCH`]×.
    pub mismatch: bool,
}

/// Joins a profile (steps in plan order) with the cost model's kernels of the graph
/// the plan was made from, one row per node, slowest first.
pub fn rows(peaks: &Peaks, profile: &[StepTime], kernels: &[Kernel]) -> Vec<Row> {
    let by_name: BTreeMap<&str, &Kernel> = kernels.iter().map(|k| (k.name.as_str(), k)).collect();
    let mut order: Vec<String> = Vec::new();
    let mut steps: BTreeMap<String, (Vec<String>, f64, Option<u64>)> = BTreeMap::new();
    for s in profile {
        let e = steps.entry(s.node.clone()).or_insert_with(|| {
            order.push(s.node.clone());
            (Vec::new(), 0.0, None)
        });
        e.0.push(s.label.clone());
        e.1 += s.ms;
        e.2 = match (e.2, s.blocks) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    let mut out: Vec<Row> = order
        .into_iter()
        .filter_map(|node| {
            let (labels, ms, blocks) = steps.remove(&node)?;
            let k = by_name.get(node.as_str());
            let (bytes, flops, unit) = k.map_or((0.0, 0.0, "fp32".to_string()), |k| {
                (k.bytes, k.flops, k.unit.clone())
            });
            let measured = classify(peaks, bytes, flops, &unit, ms / 1e3, blocks);
            let predicted_ms = k.map(|k| k.est_us / 1e3).filter(|x| x.is_finite());
            let mismatch = predicted_ms.is_some_and(|p| {
                let (a, b) = (ms.max(1e-9), p.max(1e-9));
                a / b > MISMATCH || b / a > MISMATCH
            });
            Some(Row {
                op: k.map_or_else(|| "(copy)".to_string(), |k| k.op.clone()),
                kind: k.map_or_else(|| "movement".to_string(), |k| k.kind.clone()),
                node,
                steps: labels,
                ms,
                bytes,
                flops,
                unit,
                blocks,
                measured,
                predicted_ms,
                predicted_class: k.map(|k| k.class.clone()),
                mismatch,
            })
        })
        .collect();
    out.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    out
}

/// Counts of each measured class, in class order.
pub fn class_counts(rows: &[Row]) -> BTreeMap<Class, usize> {
    let mut m = BTreeMap::new();
    for r in rows {
        *m.entry(r.measured.class).or_insert(0) += 1;
    }
    m
}

/// The peaks as a roofline chart's roofs and the rows as its points.
pub fn chart(title: &str, peaks: &Peaks, rows: &[Row]) -> crate::charts::Roofline {
    crate::charts::Roofline {
        title: title.to_string(),
        bandwidth: peaks.copy_bytes_per_s,
        // The f16 rate is measured but the cost model's tensor-core unit is keyed
        // `bf16` (both run on the same units): one roof for them.
        roofs: peaks
            .compute
            .iter()
            .filter(|(k, _)| !(k.as_str() == "f16" && peaks.compute.contains_key("bf16")))
            .map(|(k, v)| crate::charts::Roof {
                label: format!("{k} GEMM {}", rate(*v, "FLOP/s")),
                flops_per_s: *v,
            })
            .collect(),
        points: rows
            .iter()
            .map(|r| crate::charts::RoofPoint {
                label: r.node.clone(),
                kind: r.kind.clone(),
                flops: r.flops,
                bytes: r.bytes,
                seconds: r.ms / 1e3,
            })
            .collect(),
    }
}

/// An error of measuring peaks, as the crate's error.
fn peaks_error(what: String) -> GoptError {
    GoptError::Usage(format!("measuring the device's peaks: {what}"))
}
