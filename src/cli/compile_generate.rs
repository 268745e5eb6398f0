//! `gopt compile --generate`: a decoder's generation steps compiled the way `gopt
//! generate` compiles them (one optimization per step, the caches in place, the
//! weights shared), each reported with its plan: kernels and launches per token, the
//! kinds of steps, the arena (which holds the cache on CUDA) and the cache's bytes.

use super::compile::Args;
use super::{fmt_duration, outln};
use anyhow::{Context, Result};
use gopt::generate::{cache_dtype, GenerateOptions, Generator, Step};
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

/// Which steps `--generate` compiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Steps {
    /// Prefill and decode.
    All,
    /// The prefill steps (batch x prompt length).
    Prefill,
    /// The decode steps (batch x cache length).
    Decode,
}

#[derive(Serialize)]
struct StepReport {
    step: String,
    compile_ms: f64,
    nodes: usize,
    launches: usize,
    kernel_kinds: Option<BTreeMap<String, usize>>,
    device_bytes: u128,
    cache_bytes: u128,
    /// With `--tensor-parallel`: each rank's collectives per run, and their bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    collectives: Option<Collectives>,
}

#[derive(Serialize)]
struct Collectives {
    all_reduce: usize,
    all_gather: usize,
    bytes: u64,
}

#[derive(Serialize)]
struct Report {
    model: String,
    target: &'static str,
    precision: String,
    /// The decoder's interface: how the cache is kept, its inputs, the caches.
    form: String,
    /// `--tensor-parallel N`: the rank count (each step reported as rank 0 has it).
    #[serde(skip_serializing_if = "Option::is_none")]
    tensor_parallel: Option<usize>,
    inputs: Vec<String>,
    caches: usize,
    vocab: u64,
    /// Outputs that generation does not compute.
    dropped_outputs: Vec<String>,
    import_ms: f64,
    compile_ms: f64,
    weights_bytes: usize,
    steps: Vec<StepReport>,
    /// `--quantize`: what was quantized, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    quantized: Option<String>,
}

/// Runs `gopt compile --generate`.
pub fn main(args: &Args) -> Result<ExitCode> {
    let t0 = Instant::now();
    let model = gopt::load_model(&args.model)
        .with_context(|| format!("cannot import {}", args.model.display()))?;
    let import_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut opts = args.opt.options()?;
    opts = opts.backend(args.target);
    let gen = GenerateOptions {
        max_context: args.max_context,
        max_batch: args.max_batch,
        tensor_parallel: args.tp.tensor_parallel.map(|n| n as usize),
        ..GenerateOptions::default()
    };
    let mut g = Generator::new(&model, &opts, &gen)
        .with_context(|| format!("cannot generate with {}", args.model.display()))?;
    let steps: Vec<Step> = g
        .buckets()
        .steps()
        .into_iter()
        .filter(|s| {
            matches!(
                (args.steps, s),
                (Steps::All, _)
                    | (Steps::Prefill, Step::Prefill { .. })
                    | (Steps::Decode, Step::Decode { .. })
            )
        })
        .collect();
    let progress = !args.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let bar = progress.then(|| {
        let b = indicatif::ProgressBar::new(steps.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "compiling [{bar:30}] {pos}/{len} steps {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let t = Instant::now();
    g.compile(&steps, |_| {
        if let Some(b) = &bar {
            b.inc(1);
        }
    })?;
    let compile_ms = t.elapsed().as_secs_f64() * 1e3;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let d = g.decoder();
    let dtype = cache_dtype(d, g.options());
    let reports: Vec<StepReport> = g
        .compiled()
        .iter()
        .map(|c| StepReport {
            step: c.step.name(),
            compile_ms: c.compile_time.as_secs_f64() * 1e3,
            nodes: c.variant.graph.nodes.len(),
            launches: c.launches(),
            kernel_kinds: c.kernel_kinds(),
            device_bytes: c.device_bytes(),
            cache_bytes: match c.step {
                Step::Decode { batch, context } => d.cache_bytes(batch, context, dtype),
                Step::Prefill { .. } => 0,
            },
            collectives: g.tensor_parallel().map(|_| {
                let c = gopt::passes::shard::collectives(&c.variant.graph);
                let count = |op| c.iter().filter(|(o, _)| *o == op).count();
                Collectives {
                    all_reduce: count(gopt::ir::ops::CollectiveOp::AllReduce),
                    all_gather: count(gopt::ir::ops::CollectiveOp::AllGather),
                    bytes: c.iter().map(|(_, b)| b).sum(),
                }
            }),
        })
        .collect();
    if args.print_ir {
        for c in g.compiled() {
            outln!(
                "# {}\n{}",
                c.step.name(),
                gopt::ir::text::print(&c.variant.graph)
            );
        }
    }
    let mut inputs = vec![d.input_ids.clone()];
    inputs.extend(d.attention_mask.iter().chain(&d.position_ids).cloned());
    let r = Report {
        model: args.model.display().to_string(),
        target: g.options().get_backend().name(),
        precision: g.options().get_config().precision.name().to_string(),
        form: format!("{:?}", d.form).to_lowercase(),
        tensor_parallel: g.tensor_parallel(),
        inputs,
        caches: d.caches.len(),
        vocab: d.vocab,
        dropped_outputs: d.dropped.clone(),
        import_ms,
        compile_ms,
        weights_bytes: g.weights_bytes(),
        steps: reports,
        quantized: super::quantized::summary(g.options().get_quantize().as_ref(), g.quantized()),
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    let short = |n: u128| gopt::ir::limit::fmt_short(n);
    outln!(
        "model: {} (decoder with a KV cache, {} form)",
        r.model,
        r.form
    );
    outln!(
        "inputs: {}; {} caches ({}); vocab {}{}",
        r.inputs.join(", "),
        r.caches,
        dtype,
        r.vocab,
        if r.dropped_outputs.is_empty() {
            String::new()
        } else {
            format!("; not computed: {}", r.dropped_outputs.join(", "))
        }
    );
    outln!(
        "compiled {} steps for {} at {} in {} (import {}); weights {} shared by the steps",
        r.steps.len(),
        r.target,
        r.precision,
        fmt_duration(std::time::Duration::from_secs_f64(compile_ms / 1e3)),
        fmt_duration(std::time::Duration::from_secs_f64(import_ms / 1e3)),
        short(r.weights_bytes as u128)
    );
    if let Some(q) = &r.quantized {
        outln!("{q}");
    }
    if let Some(n) = r.tensor_parallel {
        outln!(
            "tensor parallel: {n} rank{}, each step split Megatron-style with each rank's K/V \
             heads of the cache kept on it; below, rank 0's plans (every rank's have the same \
             shape)",
            if n == 1 { "" } else { "s" }
        );
    }
    for s in &r.steps {
        let kinds = s
            .kernel_kinds
            .as_ref()
            .map(|k| {
                let mut v: Vec<(&String, &usize)> = k.iter().collect();
                v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                v.iter()
                    .map(|(k, n)| format!("{n} {k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        outln!(
            "  {}: {} nodes, {} launches{}; device {}{}; {}",
            s.step,
            s.nodes,
            s.launches,
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({kinds})")
            },
            short(s.device_bytes),
            if s.cache_bytes > 0 {
                format!(" (KV cache {})", short(s.cache_bytes))
            } else {
                String::new()
            },
            fmt_duration(std::time::Duration::from_secs_f64(s.compile_ms / 1e3)),
        );
        if let Some(c) = &s.collectives {
            outln!(
                "    {} AllReduce, {} AllGather per run ({})",
                c.all_reduce,
                c.all_gather,
                short(c.bytes as u128)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
