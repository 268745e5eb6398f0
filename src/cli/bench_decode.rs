//! `gopt bench --decode`: one decode step of a decoder exported with its KV cache,
//! timed as generation replays it per token, against the memory roof. Decode reads
//! every weight (and the whole cache) once per token and computes little, so its floor
//! is those bytes over the device's bandwidth: the report gives the bytes, the roof
//! (bytes over the measured copy bandwidth, from `bench --profile`'s cached peaks)
//! and the fraction of it reached.

use super::bench::{percentile, Args, MAX_RUNS};
use super::outln;
use anyhow::{bail, Context, Result};
use gopt::generate::{GenerateOptions, Generator, Request};
use gopt::Backend;
use serde::Serialize;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Serialize)]
struct Report {
    model: String,
    backend: &'static str,
    device: String,
    precision: String,
    step: String,
    batch: u64,
    context: u64,
    /// How the times were taken.
    timing: &'static str,
    iters: usize,
    p50_ms: f64,
    p95_ms: f64,
    min_ms: f64,
    tokens_per_s: f64,
    launches: usize,
    weight_bytes_per_token: u128,
    cache_bytes_per_token: u128,
    /// Device-to-device copy bandwidth the roof divides by (bytes/s), when measured.
    copy_bytes_per_s: Option<f64>,
    /// (weights + cache) / copy bandwidth.
    roof_ms: Option<f64>,
    /// roof / p50.
    of_roof: Option<f64>,
    compile_ms: f64,
    /// `--quantize`: what was quantized, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    quantized: Option<String>,
}

/// Runs `gopt bench --decode`.
pub fn main(args: &Args) -> Result<ExitCode> {
    if !(1..=MAX_RUNS).contains(&args.iters) || args.warmup > MAX_RUNS {
        bail!(
            "--iters {} / --warmup {}: expected 1 to {MAX_RUNS} timed runs",
            args.iters,
            args.warmup
        );
    }
    let batch = args.batch.unwrap_or(1);
    if batch == 0 || args.context < 2 {
        bail!(
            "--batch {batch} --context {}: expected at least 1 row and 2 tokens",
            args.context
        );
    }
    let model = gopt::load_model(&args.model)
        .with_context(|| format!("cannot import {}", args.model.display()))?;
    let mut opts = args.opt.options()?;
    let (candidates, _) = args.device.candidates();
    let backend = candidates[0];
    args.device.apply(&mut opts, backend)?;
    if let Some(n) = args.tp.tensor_parallel {
        return super::tensor_parallel::decode::bench(args, &model, opts, n as usize);
    }
    let gen = GenerateOptions {
        max_context: args
            .context
            .next_power_of_two()
            .max(GenerateOptions::default().min_context),
        max_batch: batch.next_power_of_two(),
        ..GenerateOptions::default()
    };
    let mut g = Generator::new(&model, &opts, &gen)
        .with_context(|| format!("cannot generate with {}", args.model.display()))?;
    let step = g.decode_step(batch, args.context)?;
    let t = Instant::now();
    g.compile(&[step], |_| {})?;
    let compile_ms = t.elapsed().as_secs_f64() * 1e3;
    let (weights, cache) = g.traffic(step)?;
    let launches = g
        .compiled()
        .iter()
        .find(|c| c.step == step)
        .map_or(0, |c| c.launches());
    let (times, timing, device, peaks) = match backend {
        Backend::Cuda => {
            let dev = gopt::cuda::device()?;
            let times = g.time_decode(step, args.context, args.warmup, args.iters)?;
            let name = format!("{} ({})", dev.name, dev.arch);
            let (peaks, _) = gopt::roofline::load_or_measure("cuda", &dev.name, false, || {
                gopt::roofline::measure(Backend::Cuda, None)
            })?;
            (
                times,
                "CUDA events around each replay of the step's CUDA graph",
                name,
                Some(peaks),
            )
        }
        Backend::Wgpu | Backend::Cpu => {
            // No device timer per step here: a whole generation from a prompt of
            // context - iters tokens, each step's wall time (inputs in, logits out).
            let n = args.iters.min(args.context as usize - 1).max(1);
            let prompt =
                vec![vec![1i64; (args.context as usize).saturating_sub(n).max(1)]; batch as usize];
            let out = g.generate(&prompt, &Request::greedy(n + 1), |_, _| {})?;
            let dev = super::adapter_name(g.options())
                .unwrap_or_else(|| "CPU reference interpreter".into());
            (
                out.step_ms,
                "wall clock per generation step (host work included)",
                dev,
                None,
            )
        }
    };
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let p50 = percentile(&sorted, 0.5);
    let copy = peaks.as_ref().map(|p| p.copy_bytes_per_s);
    let roof = copy.map(|bw| (weights + cache) as f64 / bw * 1e3);
    let r = Report {
        model: args.model.display().to_string(),
        backend: backend.name(),
        device,
        precision: g.options().get_config().precision.name().to_string(),
        step: step.name(),
        batch,
        context: args.context,
        timing,
        iters: times.len(),
        p50_ms: p50,
        p95_ms: percentile(&sorted, 0.95),
        min_ms: sorted[0],
        tokens_per_s: batch as f64 / (p50 / 1e3),
        launches,
        weight_bytes_per_token: weights,
        cache_bytes_per_token: cache,
        copy_bytes_per_s: copy,
        roof_ms: roof,
        of_roof: roof.map(|r| r / p50),
        compile_ms,
        quantized: super::quantized::summary(g.options().get_quantize().as_ref(), g.quantized()),
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    let short = |n: u128| gopt::ir::limit::fmt_short(n);
    outln!(
        "{} on {} ({}), {}: {}",
        r.model,
        r.backend,
        r.device,
        r.precision,
        r.step
    );
    outln!(
        "per token: p50 {:.4} ms, p95 {:.4} ms, min {:.4} ms ({} runs, {}); {:.1} tokens/s over {} rows; {} launches",
        r.p50_ms,
        r.p95_ms,
        r.min_ms,
        r.iters,
        r.timing,
        r.tokens_per_s,
        batch,
        r.launches
    );
    match (r.roof_ms, copy) {
        (Some(roof), Some(bw)) => outln!(
            "reads {} of weights + {} of KV cache per token; memory roof {:.4} ms at {:.2} TB/s \
             (measured copy bandwidth): {:.0}% of the roof",
            short(weights),
            short(cache),
            roof,
            bw / 1e12,
            100.0 * roof / p50
        ),
        _ => outln!(
            "reads {} of weights + {} of KV cache per token (no memory roof: measured on CUDA only)",
            short(weights),
            short(cache)
        ),
    }
    outln!("compile {:.0} ms", r.compile_ms);
    if let Some(q) = &r.quantized {
        outln!("{q}");
    }
    Ok(ExitCode::SUCCESS)
}
