//! `gopt bench --profile`: each kernel timed on its own, beside what the cost model
//! predicted, classed against the device's measured peaks (`gopt::roofline`), and
//! `--plot FILE.svg` drawing them on the device's roofline. The peaks are measured once
//! per device and cached; `--remeasure-peaks` measures them again.

use super::outln;
use anyhow::{Context, Result};
use gopt::pipeline::Backend;
use gopt::roofline::{self, Peaks, Row, Source};
use gopt::runtime::StepTime;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// What `--profile` adds to a bench report.
#[derive(Serialize)]
pub struct Profile {
    /// The device's peaks the classes were decided against.
    pub peaks: Peaks,
    /// Where they came from (a cache file, or measured now).
    pub peaks_source: String,
    /// Steps timed one by one, summed, ms.
    pub total_ms: f64,
    /// Kernels per measured class.
    pub classes: BTreeMap<String, usize>,
    /// Kernels whose measured and predicted times differ by more than 2×.
    pub mismatches: usize,
    /// Those kernels by kind (`gemm`, `attention`, ...; kinds with none are left out).
    pub mismatches_by_kind: BTreeMap<String, usize>,
    /// One row per kernel (graph node), slowest first.
    pub kernels: Vec<Row>,
    /// Each plan step: label, node, median ms, blocks.
    pub steps: Vec<StepTime>,
}

/// Joins `steps` with the cost model's prediction for each kernel of `graph` (the
/// graph the plan was made from), both against the device's peaks (cached, or
/// measured now: a few seconds). The prediction uses the cost model's formulas with
/// the measured roofs in place of its defaults (`base`).
pub fn build(
    backend: Backend,
    adapter: Option<&str>,
    device: &str,
    fresh: bool,
    steps: Vec<StepTime>,
    graph: &gopt::Graph,
    base: &gopt::passes::Target,
) -> Result<Profile> {
    if backend == Backend::Cpu {
        anyhow::bail!(
            "--profile: the CPU interpreter has no roofline to class kernels against; \
             profile on --backend cuda or wgpu"
        );
    }
    let (peaks, source) = roofline::load_or_measure(backend.name(), device, fresh, || {
        eprintln!("measuring the device's peaks (once per device; cached afterwards)...");
        roofline::measure(backend, adapter)
    })
    .context("cannot measure the device's peaks for --profile")?;
    let peaks_source = match source {
        Source::Cached(p) => format!("{}, cached in {}", peaks.age(), p.display()),
        Source::Measured(Ok(p)) => format!("measured now, cached in {}", p.display()),
        Source::Measured(Err(why)) => format!("measured now, not cached: {why}"),
    };
    let target = peaks.target(base);
    let mut kernels = gopt::passes::report::census(graph, &target).kernel_list;
    kernels.extend(copies(graph, &steps, &kernels, &target));
    let rows = roofline::rows(&peaks, &steps, &kernels);
    let classes = roofline::class_counts(&rows)
        .into_iter()
        .map(|(c, n)| (c.name().to_string(), n))
        .collect();
    let mut mismatches_by_kind = BTreeMap::new();
    for r in rows.iter().filter(|r| r.mismatch) {
        *mismatches_by_kind.entry(r.kind.clone()).or_insert(0) += 1;
    }
    Ok(Profile {
        total_ms: steps.iter().map(|s| s.ms).sum(),
        mismatches: rows.iter().filter(|r| r.mismatch).count(),
        mismatches_by_kind,
        classes,
        kernels: rows,
        peaks,
        peaks_source,
        steps,
    })
}

/// Kernels for the steps of nodes the cost model sees as views (a slice of a fused
/// GEMM's output, a reshape) but the backend had to copy: a read and a write of the
/// node's outputs, one operation per element, plus a launch.
fn copies(
    graph: &gopt::Graph,
    steps: &[StepTime],
    known: &[gopt::passes::report::Kernel],
    target: &gopt::passes::Target,
) -> Vec<gopt::passes::report::Kernel> {
    let known: std::collections::BTreeSet<&str> = known.iter().map(|k| k.name.as_str()).collect();
    let mut seen = std::collections::BTreeSet::new();
    steps
        .iter()
        .filter(|s| !known.contains(s.node.as_str()) && seen.insert(s.node.clone()))
        .filter_map(|s| {
            let n = graph.nodes.iter().find(|n| n.name == s.node)?;
            let (mut bytes, mut elems) = (0.0, 0.0);
            for ty in n.outputs.iter().filter_map(|v| graph.value(*v).ty.as_ref()) {
                let e: f64 = ty
                    .shape
                    .iter()
                    .map(|d| d.known().unwrap_or(1) as f64)
                    .product();
                elems += e;
                bytes += 2.0 * e * ty.dtype.size() as f64;
            }
            let est = bytes / target.bandwidth + target.launch();
            Some(gopt::passes::report::Kernel {
                name: n.name.clone(),
                op: format!("{} (copied)", n.op.name()),
                precision: String::new(),
                est_us: est * 1e6,
                bytes,
                flops: elems,
                unit: "fp32".into(),
                kind: "movement".into(),
                class: gopt::passes::cost::classify_estimate(
                    target,
                    bytes / target.bandwidth,
                    0.0,
                    elems / 256.0,
                )
                .name()
                .into(),
            })
        })
        .collect()
}

/// Writes the roofline chart of `p` to `path` (SVG).
pub fn plot(p: &Profile, title: &str, path: &Path) -> Result<()> {
    let chart = roofline::chart(title, &p.peaks, &p.kernels);
    let svg = gopt::charts::roofline_svg(&chart).context("cannot draw the roofline chart")?;
    std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))
}

/// Prints the profile: the peaks, the classes, each kernel measured beside predicted
/// (flagging the kernels the cost model is more than 2× off on), and the time per kind
/// of step (`step_kinds`: each step's kind, in plan order).
pub fn print(p: &Profile, step_kinds: &[String]) {
    outln!(
        "profile  {} kernels ({} steps), {:.3} ms timed one by one",
        p.kernels.len(),
        p.steps.len(),
        p.total_ms
    );
    outln!("peaks  {} ({})", p.peaks.summary(), p.peaks_source);
    let classes: Vec<String> = p.classes.iter().map(|(c, n)| format!("{n} {c}")).collect();
    outln!("classes  {}", classes.join(", "));
    outln!(
        "rules  launch-bound: ≤ {}× a one-element kernel's time; else memory- or compute-bound by \
         the roof its intensity is under, when it reaches ≥ {:.0}% of it; below that, \
         under-occupied if it launched fewer blocks than the SMs",
        roofline::LAUNCH_FACTOR,
        100.0 * roofline::ROOF_FRACTION
    );
    outln!(
        "  {:>9} {:>9}  {:>9} {:>5}  {:>10} {:>5}  {:<14} {:<14}  kernel",
        "measured",
        "predicted",
        "bandwidth",
        "%copy",
        "ops/s",
        "%peak",
        "class",
        "predicted as"
    );
    for r in &p.kernels {
        outln!(
            "{} {:>6.1} µs {:>6} µs  {:>9} {:>4.0}%  {:>10} {:>4.0}%  {:<14} {:<14}  {} {} [{}]",
            if r.mismatch { "!" } else { " " },
            r.ms * 1e3,
            r.predicted_ms
                .map_or_else(|| "-".to_string(), |x| format!("{:.1}", x * 1e3)),
            roofline::rate(r.measured.bytes_per_s, "B/s"),
            100.0 * r.measured.of_copy,
            roofline::rate(r.measured.flops_per_s, "op/s"),
            100.0 * r.measured.of_compute,
            r.measured.class.name(),
            r.predicted_class.as_deref().unwrap_or("-"),
            r.node,
            r.op,
            r.measured.rule
        );
    }
    if p.mismatches > 0 {
        let by_kind: Vec<String> = p
            .mismatches_by_kind
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        outln!(
            "! {} kernel(s) measured more than {}× away from the cost model's estimate ({}): \
             that is where the cost model is wrong",
            p.mismatches,
            roofline::MISMATCH,
            by_kind.join(", ")
        );
    }
    per_kind(&p.steps, step_kinds);
}

fn per_kind(steps: &[StepTime], step_kinds: &[String]) {
    let total: f64 = steps.iter().map(|s| s.ms).sum();
    let mut per_kind: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
    for (i, s) in steps.iter().enumerate() {
        let kind = step_kinds.get(i).map_or("unknown", String::as_str);
        let e = per_kind.entry(kind).or_default();
        e.0 += 1;
        e.1 += s.ms;
    }
    let mut kinds: Vec<_> = per_kind.into_iter().collect();
    kinds.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    outln!("time per kind of step");
    for (kind, (n, ms)) in &kinds {
        outln!(
            "  {:>6.1}%  {:>8.3} ms  {:>4} x {kind}",
            100.0 * ms / total.max(1e-12),
            ms,
            n
        );
    }
}
