//! Compiling generation's steps: each [`Step`] (a prefill over a padded prompt, or a
//! decode step against a cache of some length) is the exported decoder specialized to
//! the step's sizes, rewritten by [`Decoder::lower`] (cache in place), optimized like any
//! bucket, its weights stored `[N, K]` ([`gopt_passes::decoder::weights_nk`]) and planned
//! for the backend into the weight store every step shares. Steps are specialized and
//! optimized in parallel, then planned in order, so the artifact does not depend on
//! timing. With tensor parallelism each step is split into its rank graphs
//! ([`gopt_passes::shard::shard_keeping`], the presents kept on their ranks) before
//! the optimizer, and rank r's plan goes into rank r's weight store.

use crate::compiled::BackendPlan;
use crate::pipeline::{self, Backend, Options, Variant};
use crate::{GoptError, Imported, Result};
use gopt_codegen::plan::WeightStore;
use gopt_ir::{DType, ValueId};
use gopt_passes::decoder::{self, Decoder, Step};
use rayon::prelude::*;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// One compiled step.
pub struct CompiledStep {
    /// Which step.
    pub step: Step,
    /// Its optimized graph (inputs: the model's, the caches and `cache_position`;
    /// outputs: the logits then the presents); rank 0's with tensor parallelism.
    pub variant: Variant,
    /// Its plan for the backend (rank 0's).
    pub plan: BackendPlan,
    /// Ranks 1.. of a tensor-parallel step (empty otherwise): every rank has the same
    /// inputs and outputs, the caches holding its share of the K/V heads.
    pub rest: Vec<RankStep>,
    /// Time to specialize, optimize and plan it.
    pub compile_time: Duration,
}

/// A tensor-parallel step's graph and plan on one rank.
pub struct RankStep {
    /// The rank's optimized graph.
    pub variant: Variant,
    /// Its plan.
    pub plan: BackendPlan,
}

impl CompiledStep {
    /// Kernel launches per run of the step (interpreted nodes on the CPU).
    pub fn launches(&self) -> usize {
        match &self.plan {
            BackendPlan::Cpu => self.variant.graph.nodes.len(),
            BackendPlan::Cuda(p) => p.launches(),
            BackendPlan::Wgpu(p) => p.kernels.len(),
        }
    }

    /// Steps by kind, for reports (`gemv`, `attention`, ...); `None` on the CPU.
    pub fn kernel_kinds(&self) -> Option<std::collections::BTreeMap<String, usize>> {
        match &self.plan {
            BackendPlan::Cpu => None,
            BackendPlan::Cuda(p) => Some(p.kernel_kinds()),
            BackendPlan::Wgpu(p) => Some(p.kernel_kinds()),
        }
    }

    /// The predicted device memory of the step beside the `weights` bytes it shares
    /// with the others: on CUDA its peak less the weights (arena, which holds the
    /// cache, workspace, graph), on wgpu its buffer pool.
    pub fn own_bytes(&self, weights: usize) -> u128 {
        match &self.plan {
            BackendPlan::Cpu => 0,
            BackendPlan::Cuda(p) => u128::from(gopt_runtime::peak::cuda(p, weights).total())
                .saturating_sub(weights as u128),
            BackendPlan::Wgpu(p) => p.pool_bytes() as u128,
        }
    }

    /// Device memory the plan needs (arena, which holds the cache, and the weights).
    pub fn device_bytes(&self) -> u128 {
        match &self.plan {
            BackendPlan::Cpu => 0,
            BackendPlan::Cuda(p) => p.device_bytes(),
            BackendPlan::Wgpu(p) => p.device_bytes(),
        }
    }
}

/// The dtype the caches are stored in: the compute precision's 16-bit type, else the
/// model's.
pub fn cache_dtype(decoder: &Decoder, opts: &Options) -> DType {
    match opts.get_config().precision {
        gopt_passes::Precision::Bf16 if opts.get_optimize() => DType::BF16,
        gopt_passes::Precision::Fp16 if opts.get_optimize() => DType::F16,
        _ => decoder.caches.first().map_or(DType::F32, |c| c.dtype),
    }
}

/// Specializes and optimizes `step` (no shared state: steps run this in parallel): one
/// variant, or one per rank when `ranks` is given.
fn specialize(
    model: &Imported,
    decoder: &Decoder,
    opts: &Options,
    cache: DType,
    step: Step,
    ranks: Option<usize>,
) -> Result<(Vec<Variant>, Duration)> {
    let t = Instant::now();
    let in_step = |e: GoptError| match e {
        GoptError::Passes(p) => GoptError::Passes(p.in_bucket(&step.name())),
        e => e,
    };
    let g = crate::prepare(&model.model, &decoder.bindings(step)).map_err(in_step)?;
    let g = decoder.lower(&g, step, cache)?;
    let graphs = match ranks {
        None => vec![g],
        Some(n) => {
            let presents: HashSet<ValueId> = g.outputs.iter().skip(1).copied().collect();
            gopt_passes::shard::shard_keeping(&g, n, &presents)
                .map_err(|e| {
                    GoptError::Usage(format!("step {}: --tensor-parallel {n}: {e}", step.name()))
                })?
                .ranks
        }
    };
    let variants = graphs
        .into_par_iter()
        .map(|g| {
            let mut v = pipeline::optimize_prepared(g, &decoder::step_sizes(step), opts)
                .map_err(in_step)?;
            if opts.get_backend() == Backend::Cuda {
                v.graph = decoder::weights_nk(v.graph)?;
            }
            Ok(v)
        })
        .collect::<Result<Vec<Variant>>>()?;
    Ok((variants, t.elapsed()))
}

/// Compiles `steps` into `stores` (one per rank: with one store, no tensor
/// parallelism), calling `progress` after each.
pub fn compile(
    model: &Imported,
    decoder: &Decoder,
    opts: &Options,
    steps: &[Step],
    stores: &mut [WeightStore],
    ranks: Option<usize>,
    mut progress: impl FnMut(&CompiledStep),
) -> Result<Vec<CompiledStep>> {
    let cache = cache_dtype(decoder, opts);
    let specialized: Vec<Result<(Vec<Variant>, Duration)>> = steps
        .par_iter()
        .map(|&s| specialize(model, decoder, opts, cache, s, ranks))
        .collect();
    let mut out = Vec::with_capacity(steps.len());
    for (&step, v) in steps.iter().zip(specialized) {
        let (variants, spent) = v?;
        if variants.len() != stores.len() {
            return Err(GoptError::Usage(format!(
                "step {}: {} rank graphs for {} weight stores",
                step.name(),
                variants.len(),
                stores.len()
            )));
        }
        let t = Instant::now();
        let what = format!("step {}", step.name());
        let limit = gopt_ir::limit::MemoryLimit::gpu_plan(opts.get_memory_limit());
        let mut planned = Vec::with_capacity(variants.len());
        for (variant, store) in variants.into_iter().zip(stores.iter_mut()) {
            let plan = plan(&variant, opts, store)?;
            match &plan {
                BackendPlan::Cpu => {}
                BackendPlan::Cuda(p) => p.check_memory(&what, Some(&variant.graph), 0, &limit)?,
                BackendPlan::Wgpu(p) => p.check_memory(&what, Some(&variant.graph), &limit)?,
            }
            planned.push(RankStep { variant, plan });
        }
        let mut planned = planned.into_iter();
        let Some(first) = planned.next() else {
            return Err(GoptError::Usage(format!("step {}: no graph", step.name())));
        };
        let c = CompiledStep {
            step,
            variant: first.variant,
            plan: first.plan,
            rest: planned.collect(),
            compile_time: spent + t.elapsed(),
        };
        progress(&c);
        out.push(c);
    }
    Ok(out)
}

fn plan(v: &Variant, opts: &Options, store: &mut WeightStore) -> Result<BackendPlan> {
    Ok(match opts.get_backend() {
        Backend::Cpu => BackendPlan::Cpu,
        Backend::Cuda => {
            let gemv = gopt_codegen::cuda::plan::PlanOptions { gemv: true };
            let mut p = gopt_codegen::cuda::plan::build_with_options(&v.graph, store, gemv)?;
            p.tf32 = opts.tf32_gemms();
            BackendPlan::Cuda(p)
        }
        Backend::Wgpu => BackendPlan::Wgpu(gopt_codegen::wgsl::plan::build_with(&v.graph, store)?),
    })
}
