//! `gopt bench --decode --tensor-parallel N`: one decode step split over N GPUs against
//! the same step on one GPU. Each rank reads its share of the weights and of the KV
//! cache per token, so the step's floor falls with N until the all-reduces (two per
//! layer, one row of activations each) and the host's dispatch to the ranks dominate:
//! the report gives both times, the speed-up and the scaling efficiency (throughput
//! at N ranks over N times one GPU's), and each rank's bytes per token.

use super::super::bench::{percentile, Args};
use super::super::outln;
use anyhow::{bail, Context, Result};
use gopt::generate::{GenerateOptions, Generator};
use gopt::Imported;
use serde::Serialize;
use std::process::ExitCode;

#[derive(Serialize)]
struct Side {
    /// How the times were taken.
    timing: &'static str,
    p50_ms: f64,
    p95_ms: f64,
    tokens_per_s: f64,
    /// Weights and cache one device reads per token.
    weight_bytes_per_token: u128,
    cache_bytes_per_token: u128,
    compile_ms: f64,
}

#[derive(Serialize)]
struct Report {
    model: String,
    step: String,
    precision: String,
    ranks: usize,
    iters: usize,
    tensor_parallel: Side,
    one_gpu: Side,
    speed_up: f64,
    scaling_efficiency: f64,
}

/// Compiles and times decode step `(batch, context)` with `gen`'s rank count.
fn time(
    model: &Imported,
    opts: &gopt::pipeline::Options,
    gen: &GenerateOptions,
    args: &Args,
    batch: u64,
) -> Result<(Side, String)> {
    let mut g = Generator::new(model, opts, gen)
        .with_context(|| format!("cannot generate with {}", args.model.display()))?;
    let step = g.decode_step(batch, args.context)?;
    let t = std::time::Instant::now();
    g.compile(&[step], |_| {})?;
    let compile_ms = t.elapsed().as_secs_f64() * 1e3;
    let (weights, cache) = g.traffic(step)?;
    let ranks = gen.tensor_parallel.unwrap_or(1) as u128;
    let mut ms = g.time_decode(step, args.context, args.warmup, args.iters)?;
    ms.sort_by(f64::total_cmp);
    let p50 = percentile(&ms, 0.5);
    let side = Side {
        timing: match gen.tensor_parallel {
            Some(_) => "wall clock per run, from sending it to every rank until all finished",
            None => "CUDA events around each replay of the step's CUDA graph",
        },
        p50_ms: p50,
        p95_ms: percentile(&ms, 0.95),
        tokens_per_s: batch as f64 / (p50 / 1e3),
        weight_bytes_per_token: weights,
        // Each rank holds its K/V heads of the cache (all of them replicated when
        // there are fewer K/V heads than ranks: an upper bound then).
        cache_bytes_per_token: cache / ranks,
        compile_ms,
    };
    Ok((side, step.name()))
}

/// Runs `gopt bench MODEL --decode --tensor-parallel N`.
pub fn bench(
    args: &Args,
    model: &Imported,
    opts: gopt::pipeline::Options,
    n: usize,
) -> Result<ExitCode> {
    gopt::runtime::cuda::nccl::check_ranks(n)
        .with_context(|| format!("gopt bench --decode --tensor-parallel {n}"))?;
    if opts.get_backend() != gopt::Backend::Cuda {
        bail!(
            "--decode --tensor-parallel {n}: the ranks run on CUDA GPUs through NCCL; not on {}",
            opts.get_backend().name()
        );
    }
    let batch = args.batch.unwrap_or(1);
    let gen = GenerateOptions {
        max_context: args
            .context
            .next_power_of_two()
            .max(GenerateOptions::default().min_context),
        max_batch: batch.next_power_of_two(),
        ..GenerateOptions::default()
    };
    let tp = GenerateOptions {
        tensor_parallel: Some(n),
        ..gen.clone()
    };
    let (split, step) = time(model, &opts, &tp, args, batch)?;
    let (one, _) = time(model, &opts, &gen, args, batch)?;
    let speed_up = one.p50_ms / split.p50_ms;
    let r = Report {
        model: args.model.display().to_string(),
        step,
        precision: opts.get_config().precision.name().to_string(),
        ranks: n,
        iters: args.iters,
        speed_up,
        scaling_efficiency: speed_up / n as f64,
        tensor_parallel: split,
        one_gpu: one,
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    let short = |b: u128| gopt::ir::limit::fmt_short(b);
    outln!(
        "{} {}, {}: {} ranks against 1 GPU",
        r.model,
        r.step,
        r.precision,
        n
    );
    for (what, s) in [
        (format!("{n} ranks"), &r.tensor_parallel),
        ("1 GPU".into(), &r.one_gpu),
    ] {
        outln!(
            "  {what}: p50 {:.4} ms, p95 {:.4} ms per token ({}), {:.1} tokens/s; reads {} of \
             weights + {} of KV cache per device; compile {:.0} ms",
            s.p50_ms,
            s.p95_ms,
            s.timing,
            s.tokens_per_s,
            short(s.weight_bytes_per_token),
            short(s.cache_bytes_per_token),
            s.compile_ms
        );
    }
    outln!(
        "  speed-up {:.2}x, scaling efficiency {:.1}% (throughput at {n} ranks / ({n} x 1 GPU))",
        r.speed_up,
        100.0 * r.scaling_efficiency
    );
    Ok(ExitCode::SUCCESS)
}
