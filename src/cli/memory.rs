//! Device memory in the CLI: `gopt compile --memory-budget` (the flag, each bucket's
//! predicted peak in the report, the kept and dropped buckets) and `gopt bench`'s
//! predicted peak beside the one it measures on CUDA (free device memory before the
//! bucket loads minus the lowest seen after each loading phase and the timed runs).

use super::outln;
use anyhow::Result;
use gopt::ir::limit::fmt_short;
use gopt::runtime::cuda::memory::{Measured, Probe};
use gopt::runtime::peak::PeakMemory;
use gopt::Compiled;
use serde::Serialize;

/// What `--memory-budget`'s help says it counts.
pub const BUDGET_HELP: &str = "The device memory a run of the compiled model may hold: \
    512MiB, 12GiB, 1.5G (binary units), 800MB (decimal) or bytes. Each bucket's peak is \
    predicted from its plan before any kernel is compiled: the weights (uploaded once, \
    shared by the buckets), its arena (or wgpu's pooled buffers), the cuBLASLt workspace \
    (32 MiB per bucket), the status and read-back buffers, the device code of its \
    modules, its CUDA graph, cuBLASLt's kernels (once per process), and the driver's \
    rounding of each allocation to 2 MiB pages. A run keeps every bucket it has loaded, \
    so the kept buckets must fit together: the smallest are kept first, the others are \
    skipped (said, with their breakdown against the budget; a run that needs one gets \
    the reason). With no bucket left the compile fails. `gopt bench` prints a bucket's \
    prediction beside the peak it measures.";

/// Parses `--memory-budget` (the sizes `--memory-limit` takes).
pub fn parse_budget(s: &str) -> std::result::Result<u64, String> {
    gopt::ir::limit::parse_size(s)
}

/// A bucket's predicted peak in the compile report.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BucketMemory {
    /// The whole predicted peak of running this bucket (as the first one loaded).
    pub predicted_peak_bytes: u64,
    /// What takes it.
    pub predicted: PeakMemory,
}

/// Bucket `i`'s predicted peak (`None` on the CPU).
pub fn bucket_memory(c: &Compiled, i: usize) -> Option<BucketMemory> {
    let p = c.predicted_peak(i)?;
    Some(BucketMemory {
        predicted_peak_bytes: p.total(),
        predicted: p,
    })
}

/// The bucket report's memory line.
pub fn bucket_line(m: &BucketMemory) -> String {
    format!(
        "memory: predicted peak {} ({})",
        fmt_short(u128::from(m.predicted_peak_bytes)),
        m.predicted.breakdown()
    )
}

/// `--memory-budget` in the compile report: the budget and what the kept buckets take
/// together.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BudgetReport {
    /// The budget.
    pub budget_bytes: u64,
    /// The predicted peak of a run that loads every kept bucket.
    pub kept_peak_bytes: u64,
    /// Buckets kept.
    pub kept: usize,
    /// Buckets dropped for the budget.
    pub dropped: usize,
}

/// The budget's report (`None` without `--memory-budget` or on the CPU).
pub fn budget_report(c: &Compiled) -> Option<BudgetReport> {
    let budget_bytes = c.options().get_memory_budget()?;
    Some(BudgetReport {
        budget_bytes,
        kept_peak_bytes: c.predicted_peak_all()?,
        kept: c.buckets().len(),
        dropped: c
            .skipped()
            .iter()
            .filter(|s| s.reason.starts_with("does not fit --memory-budget"))
            .count(),
    })
}

/// The budget's summary line.
pub fn budget_line(b: &BudgetReport) -> String {
    format!(
        "memory budget {}: {} bucket(s) kept, predicted peak {} with all of them loaded; {} dropped",
        fmt_short(u128::from(b.budget_bytes)),
        b.kept,
        fmt_short(u128::from(b.kept_peak_bytes)),
        b.dropped
    )
}

/// `gopt bench`'s memory: the prediction, and on CUDA the measurement.
#[derive(Clone, Debug, Serialize)]
pub struct BenchMemory {
    /// The predicted peak.
    pub predicted_peak_bytes: u64,
    /// What takes it.
    #[serde(rename = "predicted_memory")]
    pub predicted: PeakMemory,
    /// The measured peak (CUDA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_peak_bytes: Option<u64>,
    /// How much free device memory each phase took, in order (CUDA).
    #[serde(rename = "memory_phases", skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<(String, i64)>,
}

/// Starts measuring on CUDA, before the bucket's executor loads (the context open).
pub fn start_probe() -> Result<Probe> {
    let dev = gopt::cuda::device()?;
    Ok(Probe::start(&dev)?)
}

/// Bucket 0's prediction, with what a probe measured on CUDA.
pub fn bench_memory(c: &Compiled, measured: Option<Measured>) -> Option<BenchMemory> {
    let predicted = c.predicted_peak(0)?;
    Some(BenchMemory {
        predicted_peak_bytes: predicted.total(),
        predicted,
        measured_peak_bytes: measured.as_ref().map(|m| m.peak_bytes),
        phases: measured
            .map(|m| {
                m.phases
                    .into_iter()
                    .map(|p| (p.name.to_string(), p.bytes))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// `memory  predicted X (breakdown), measured Y (+Z%)`, and the phases.
pub fn print_bench(m: &BenchMemory) {
    let short = |n: u64| fmt_short(u128::from(n));
    let predicted = format!(
        "memory  predicted {} ({})",
        short(m.predicted_peak_bytes),
        m.predicted.breakdown()
    );
    match m.measured_peak_bytes {
        Some(measured) => {
            outln!(
                "{predicted}, measured {} ({})",
                short(measured),
                error_pct(m.predicted_peak_bytes, measured)
            );
            let phases: Vec<String> = m
                .phases
                .iter()
                .map(|(name, b)| format!("{name} {}", signed(*b)))
                .collect();
            outln!("  measured by phase: {}", phases.join(", "));
        }
        None => outln!("{predicted}"),
    }
}

/// The prediction's error against the measurement: `+4.2%` (over) or `-3.0%` (under).
pub fn error_pct(predicted: u64, measured: u64) -> String {
    if measured == 0 {
        return "nothing measured".into();
    }
    let pct = (predicted as f64 - measured as f64) / measured as f64 * 100.0;
    format!("{pct:+.1}%")
}

fn signed(b: i64) -> String {
    let s = fmt_short(u128::from(b.unsigned_abs()));
    if b < 0 {
        format!("-{s}")
    } else {
        s
    }
}

/// Prints the budget's summary line, when the compile had one (the dropped buckets
/// are in the skipped list, one line each).
pub fn print_budget(c: &Compiled) {
    if let Some(b) = budget_report(c) {
        outln!("{}", budget_line(&b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_is_signed_and_relative_to_the_measurement() {
        assert_eq!(error_pct(110, 100), "+10.0%");
        assert_eq!(error_pct(97, 100), "-3.0%");
        assert_eq!(error_pct(1, 0), "nothing measured");
        assert_eq!(signed(-(3 << 20)), "-3.00 MiB");
        assert_eq!(signed(2048), "2.00 KiB");
    }
}
