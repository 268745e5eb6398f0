//! `--tensor-parallel N`: `gopt compile` splits the model N ways
//! (`gopt_passes::shard`), optimizes each rank's graph, builds its CUDA plan with
//! `--target cuda`, and reports per rank the collectives and their bytes; `-o DIR`
//! writes each rank's graph and plan, and with `--target cuda` the artifact's
//! manifest, which `gopt run DIR` and `gopt bench DIR` load ([`exec`]). `run` and
//! `bench` of a model file with `--tensor-parallel N` check that the machine has N
//! GPUs and NCCL (exit 2 naming what is missing), then point to the artifact;
//! `generate --tensor-parallel N` compiles and runs the ranks' steps itself
//! (`gopt::generate`, each rank keeping its heads of the KV cache).

pub mod decode;
mod exec;
pub use exec::{bench_artifact, is_artifact, run_artifact};

use super::compile::{parse_binds, Args as CompileArgs};
use super::{fmt_duration, outln};
use anyhow::{bail, Context, Result};
use gopt::artifact::ranks::{Distribution, Input};
use gopt::ir::ops::CollectiveOp;
use gopt::passes::shard::{collectives, shard};
use gopt::Backend;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

/// The `--tensor-parallel` flag `compile`, `run`, `bench` and `generate` share.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TpArgs {
    /// Tensor parallelism over N GPUs, Megatron-style: attention heads and MLP columns
    /// split N ways (column-parallel Q/K/V, up and gate; row-parallel output and down
    /// projections, each followed by an NCCL all-reduce). `compile` builds and reports
    /// the N rank graphs (their CUDA plans with --target cuda) and needs the model's
    /// dims bound (--bind, or its buckets); `run` and `bench` need N GPUs and NCCL
    /// (`libnccl.so`). `generate` splits its prefill and decode steps, each rank
    /// keeping its K/V heads of the cache, and runs them on GPUs 0..N-1 (with
    /// --backend cpu: simulated together on the interpreter, a check, not a speed-up).
    /// Heads, K/V heads and MLP widths must divide by N (fewer K/V heads than ranks are
    /// replicated). `--tensor-parallel 1` builds the same structure for one GPU, each
    /// collective over a 1-rank NCCL communicator: the multi-GPU path, checked on one.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub tensor_parallel: Option<u64>,
}

impl TpArgs {
    /// The rank count asked for, when above 1 (`run` and `bench` of a model file with
    /// one rank take the ordinary path).
    pub fn ranks(&self) -> Option<usize> {
        self.tensor_parallel.filter(|&n| n > 1).map(|n| n as usize)
    }
}

/// `run`/`bench MODEL --tensor-parallel N`: an error saying what this machine lacks
/// (GPUs, NCCL), else what to run instead.
pub fn refuse(tp: &TpArgs, command: &str) -> Result<()> {
    let Some(n) = tp.ranks() else { return Ok(()) };
    let what = format!("gopt {command} --tensor-parallel {n}");
    gopt::runtime::cuda::nccl::check_ranks(n).with_context(|| what.clone())?;
    bail!(
        "{what}: compile the ranks first, `gopt compile MODEL --tensor-parallel {n} \
         --target cuda -o DIR`, then `gopt {command} DIR`"
    )
}

/// `gopt compile --tensor-parallel N`.
pub fn compile(args: &CompileArgs, ranks: usize) -> Result<ExitCode> {
    let t = Instant::now();
    let model = gopt::load_model(&args.model)
        .with_context(|| format!("cannot import {}", args.model.display()))?;
    let opts = args.opt.options()?;
    // `--quantize`: the weights quantized once, before the split (each rank cuts its
    // integers, scales and zero points).
    let (model, quantized) = gopt::pipeline::quantized(&model, &opts)?;
    let opts = opts.clone().budgets(opts.get_config().budgets.start());
    let opts = match args.target {
        Backend::Cuda => opts.backend(Backend::Cuda),
        Backend::Wgpu => {
            bail!("--tensor-parallel: the rank plans are CUDA's (NCCL); use --target cuda or none")
        }
        Backend::Cpu => opts,
    };
    let bindings = parse_binds(&args.binds)?;
    let buckets: Vec<BTreeMap<String, u64>> = if bindings.is_empty() {
        gopt::pipeline::plan(&model.model, &opts)?.combinations()
    } else {
        vec![bindings.iter().map(|(k, v)| (k.clone(), *v)).collect()]
    };
    // What the artifact's manifest lists (with --target cuda -o): each input's and
    // output's distribution, the same in every bucket.
    let mut io: Option<Io> = None;
    // The same, in the order and names of rank 0's first plan (what `run` feeds).
    let mut frame_io: Option<Io> = None;
    let mut written = Vec::new();
    outln!(
        "tensor parallel: {ranks} rank{}, {} bucket(s), model {}",
        if ranks == 1 { "" } else { "s" },
        buckets.len(),
        args.model.display()
    );
    if let Some(q) = super::quantized::summary(opts.get_quantize().as_ref(), &quantized) {
        outln!("{q}");
    }
    for bucket in &buckets {
        let name: Vec<String> = bucket.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let name = if name.is_empty() {
            "static".to_string()
        } else {
            name.join(" ")
        };
        let b: gopt::Bindings = bucket.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let g = gopt::prepare(&model.model, &b).with_context(|| format!("bucket {name}"))?;
        let s = shard(&g, ranks).with_context(|| format!("bucket {name}"))?;
        let placed = distributions(&g, &s);
        match &io {
            Some(first) if *first != placed => bail!(
                "bucket {name}: its inputs and outputs are split differently from the first \
                 bucket's; compile the buckets separately (--bind)"
            ),
            Some(_) => {}
            None => io = Some(placed),
        }
        outln!("bucket {name}:");
        outln!(
            "  column-parallel products: {}; row-parallel: {} (an AllReduce after each); gathered outputs: {}",
            s.column.len(),
            s.row.len(),
            if s.gathered.is_empty() { "none".to_string() } else { s.gathered.join(", ") }
        );
        for (r, rg) in s.ranks.into_iter().enumerate() {
            let v = gopt::pipeline::optimize_prepared(rg, bucket, &opts)
                .with_context(|| format!("bucket {name}, rank {r}"))?;
            let c = collectives(&v.graph);
            let sum = |op: CollectiveOp| {
                let of: Vec<u64> = c
                    .iter()
                    .filter(|(o, _)| *o == op)
                    .map(|(_, b)| *b)
                    .collect();
                (of.len(), of.iter().sum::<u64>())
            };
            let (ar, ar_b) = sum(CollectiveOp::AllReduce);
            let (ag, ag_b) = sum(CollectiveOp::AllGather);
            let (w_n, w_bytes) = v.graph.weight_stats();
            let mut line = format!(
                "  rank {r}: {} nodes, {w_n} weights ({}), {ar} AllReduce ({} per run), {ag} AllGather ({})",
                v.graph.nodes.len(),
                gopt::report::human_bytes(w_bytes as u64),
                gopt::report::human_bytes(ar_b),
                gopt::report::human_bytes(ag_b),
            );
            if args.target == Backend::Cuda {
                let (plan, blob) = gopt::codegen::cuda::plan::build(&v.graph)
                    .with_context(|| format!("bucket {name}, rank {r}: CUDA plan"))?;
                if frame_io.is_none() {
                    let (ins, outs) = io
                        .as_ref()
                        .map_or((&[][..], &[][..]), |(i, o)| (&i[..], &o[..]));
                    let named = |names: Vec<&String>, of: &[Input]| -> Vec<Input> {
                        names
                            .into_iter()
                            .map(|n| Input {
                                name: n.clone(),
                                distribution: of
                                    .iter()
                                    .find(|i| i.name == *n)
                                    .map_or(Distribution::Replicated, |i| i.distribution),
                            })
                            .collect()
                    };
                    frame_io = Some((
                        named(plan.frame.inputs.iter().map(|i| &i.name).collect(), ins),
                        named(plan.frame.outputs.iter().map(|o| &o.name).collect(), outs),
                    ));
                }
                let kinds = plan.kernel_kinds();
                line.push_str(&format!(
                    "; CUDA plan: {} steps ({} allreduce, {} allgather), arena {}",
                    plan.steps.len(),
                    kinds.get("allreduce").copied().unwrap_or(0),
                    kinds.get("allgather").copied().unwrap_or(0),
                    gopt::report::human_bytes(plan.arena_bytes as u64),
                ));
                if let Some(dir) = &args.out {
                    let d = dir.join(format!("rank{r}")).join(name.replace(' ', "_"));
                    std::fs::create_dir_all(&d)
                        .with_context(|| format!("creating {}", d.display()))?;
                    let json = serde_json::to_string(&plan)?;
                    std::fs::write(d.join("plan.json"), json)?;
                    std::fs::write(d.join("weights.bin"), blob)?;
                }
            }
            if let Some(dir) = &args.out {
                let d = dir.join(format!("rank{r}")).join(name.replace(' ', "_"));
                std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
                std::fs::write(d.join("graph.ir"), gopt::ir::text::print(&v.graph))?;
            }
            outln!("{line}");
        }
        written.push(gopt::artifact::ranks::Bucket {
            sizes: bucket.clone(),
            dir: name.replace(' ', "_"),
        });
    }
    let split: Vec<String> = io.iter().flat_map(split_names).collect();
    if !split.is_empty() {
        outln!(
            "split over the ranks (each rank reads or keeps its block): {}",
            split.join(", ")
        );
    }
    match (&args.out, frame_io) {
        (Some(dir), Some((inputs, outputs))) if args.target == Backend::Cuda => {
            exec::write_artifact(dir, &args.model, ranks, inputs, outputs, written)?;
            outln!("wrote rank{{0..{}}}/<bucket>/ under {} (graph.ir, plan.json, weights.bin) and {}: `gopt run {}` runs it", ranks - 1, dir.display(), gopt::artifact::ranks::MANIFEST, dir.display());
        }
        (Some(dir), _) => outln!(
            "wrote rank{{0..{}}}/<bucket>/graph.ir under {} (--target cuda writes the plans and the artifact `gopt run` loads)",
            ranks - 1,
            dir.display()
        ),
        (None, _) => {}
    }
    outln!("total {}", fmt_duration(t.elapsed()));
    Ok(ExitCode::SUCCESS)
}

/// Each input's and output's distribution over the ranks, by name, in the model's
/// order.
type Io = (Vec<Input>, Vec<Input>);

/// `input x (axis 1, 2 blocks)` for each split input and output of `io`.
fn split_names(io: &Io) -> Vec<String> {
    let named = |what: &str, v: &[Input]| -> Vec<String> {
        v.iter()
            .filter_map(|i| match i.distribution {
                Distribution::Split { axis, blocks } => Some(format!(
                    "{what} `{}` (axis {axis}, {blocks} blocks)",
                    i.name
                )),
                Distribution::Replicated => None,
            })
            .collect()
    };
    let mut out = named("input", &io.0);
    out.extend(named("output", &io.1));
    out
}

/// How sharding `s` of `g` places each of `g`'s inputs and outputs.
fn distributions(g: &gopt::ir::Graph, s: &gopt::passes::shard::Sharded) -> Io {
    let io = |vs: &[gopt::ir::ValueId], ps: &[gopt::passes::shard::Placement]| -> Vec<Input> {
        vs.iter()
            .zip(ps)
            .map(|(v, p)| Input {
                name: g.value(*v).name.clone(),
                distribution: Distribution::of(*p),
            })
            .collect()
    };
    (io(&g.inputs, &s.inputs), io(&g.outputs, &s.outputs))
}
