//! What `--quantize` did, as the CLI says it: one summary line (weights, bytes before
//! and after, the worst and mean relative error) for every command that compiles, and
//! one line per weight under `--explain`. The JSON reports carry the weights as they
//! are ([`gopt::passes::quantize::WeightReport`]).

use gopt::passes::quantize::{Quantize, WeightReport};
use gopt::report::human_bytes;

/// `quantized 44 weights to int4 (groups of 128, symmetric): 22.0 MiB -> 5.8 MiB;
/// weight error (relative L2) mean 0.081, worst 0.093 (`w1`)`, or `None` without
/// `--quantize`.
pub fn summary(q: Option<&Quantize>, weights: &[WeightReport]) -> Option<String> {
    let q = q?;
    let mode = if q.asymmetric {
        "asymmetric"
    } else {
        "symmetric"
    };
    let head = format!(
        "quantized {} weight(s) to {} (groups of {}, {mode})",
        weights.len(),
        q.scheme.name(),
        q.group
    );
    let Some(worst) = weights
        .iter()
        .max_by(|a, b| a.rel_error.total_cmp(&b.rel_error))
    else {
        return Some(format!(
            "{head}: no MatMul has a constant [K, N] weight with K ≥ 16"
        ));
    };
    let before: u64 = weights.iter().map(|w| w.bytes_before).sum();
    let after: u64 = weights.iter().map(|w| w.bytes_after).sum();
    let mean = weights.iter().map(|w| w.rel_error).sum::<f64>() / weights.len() as f64;
    Some(format!(
        "{head}: {} -> {}; weight error (relative L2) mean {mean:.4}, worst {:.4} (`{}`)",
        human_bytes(before),
        human_bytes(after),
        worst.rel_error,
        worst.name
    ))
}

/// One line per quantized weight: name, `[K, N]`, bytes before -> after, error.
pub fn lines(weights: &[WeightReport]) -> Vec<String> {
    weights
        .iter()
        .map(|w| {
            format!(
                "  {} {:?}: {} -> {}, relative error {:.4}",
                w.name,
                w.shape,
                human_bytes(w.bytes_before),
                human_bytes(w.bytes_after),
                w.rel_error
            )
        })
        .collect()
}
