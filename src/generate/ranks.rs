//! Generation's steps on the ranks of a tensor-parallel decoder (CUDA): the ranks
//! started once ([`Ranks::start`]: a thread and GPU each, NCCL), each rank's weights
//! and step plans loaded on its GPU ([`load`]), and every prefill, decode step and
//! timed replay sent to all ranks at once, the same inputs to each, the logits read
//! from rank 0. Each rank's decode step keeps its K/V heads of the cache in its arena;
//! the prompt's keys and values are copied into it on each GPU.

use super::session::{row_copy, take_rows, Loaded, Rows, Session};
use super::steps::CompiledStep;
use crate::compiled::BackendPlan;
use crate::pipeline::Options;
use crate::{GoptError, Result};
use gopt_codegen::plan::WeightStore;
use gopt_ir::Tensor;
use gopt_passes::decoder::Cache;
use gopt_runtime::cuda::ranks::{Rank, Ranks};
use gopt_runtime::cuda::RowCopy;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The tensor-parallel form of [`Loaded::load`] (`loaded` becomes [`Loaded::Ranks`]):
/// the ranks started (a GPU each, NCCL) and each rank's weights uploaded the first
/// time or when the stores grew, then every rank's plan of `step` built, joined to
/// the communicators and captured on its GPU.
pub(super) fn load(
    loaded: &mut Loaded,
    step: &CompiledStep,
    stores: &[WeightStore],
    opts: &Options,
) -> Result<()> {
    let mut plans = Vec::with_capacity(stores.len());
    for p in std::iter::once(&step.plan).chain(step.rest.iter().map(|r| &r.plan)) {
        match p {
            BackendPlan::Cuda(p) => plans.push(p.clone()),
            BackendPlan::Cpu | BackendPlan::Wgpu(_) => {
                return Err(GoptError::Usage(format!(
                    "step {}: a rank was not compiled for CUDA",
                    step.step.name()
                )))
            }
        }
    }
    if plans.len() != stores.len() {
        return Err(GoptError::Usage(format!(
            "step {}: {} rank plans for {} ranks",
            step.step.name(),
            plans.len(),
            stores.len()
        )));
    }
    let upload = |ranks: &Ranks| {
        let blobs: Vec<Arc<Vec<u8>>> = stores.iter().map(|s| Arc::new(s.blob().to_vec())).collect();
        ranks.each(|r| {
            let blob = blobs[r].clone();
            Box::new(move |rank: &mut Rank| {
                rank.clear();
                rank.upload(&blob)?;
                Ok(None)
            })
        })
    };
    match loaded {
        Loaded::Ranks { ranks, len, keys } if *len != stores[0].len() => {
            upload(ranks)?;
            *len = stores[0].len();
            keys.clear();
        }
        Loaded::Ranks { .. } => {}
        _ => {
            loaded.release();
            let ranks = Ranks::start(stores.len())?;
            upload(&ranks)?;
            *loaded = Loaded::Ranks {
                ranks,
                len: stores[0].len(),
                keys: BTreeMap::new(),
            };
        }
    }
    let Loaded::Ranks { ranks, keys, .. } = loaded else {
        return Err(GoptError::Usage("the ranks are missing".into()));
    };
    if keys.contains_key(&step.step) {
        return Ok(());
    }
    let key = keys.len();
    let (graph, tuning) = (opts.get_cuda_graph(), opts.tune_options());
    let mut plans: Vec<Option<_>> = plans.into_iter().map(Some).collect();
    ranks.each(|r| {
        let plan = plans[r].take();
        let tuning = tuning.clone();
        Box::new(move |rank: &mut Rank| {
            let plan = plan.ok_or_else(|| {
                gopt_runtime::RuntimeError::Usage("a rank's plan was taken".into())
            })?;
            rank.add(key, plan, graph, &tuning)?;
            Ok(None)
        })
    })?;
    keys.insert(step.step, key);
    Ok(())
}

/// [`Session::prefill`] on the ranks: each runs the prompt and writes its heads of
/// the keys and values into its decode step's cache; rank 0's logits come back.
pub(super) fn prefill(
    s: &Session,
    ranks: &Ranks,
    (kp, kd): (usize, usize),
    inputs: &[Tensor],
    rows: &[usize],
    caches: &[Cache],
) -> Result<Rows> {
    let (BackendPlan::Cuda(pre), BackendPlan::Cuda(dec)) = (&s.prefill.plan, &s.decode.plan) else {
        return Err(GoptError::Usage("the steps are not CUDA plans".into()));
    };
    // Every rank's plans have the same inputs and outputs (rank 0's shapes).
    let copies: Vec<(usize, usize, RowCopy)> = caches
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let to = s.cache_inputs[k];
            let copy = row_copy(&pre.frame.outputs[k + 1], &dec.frame.inputs[to], c)?;
            Ok((k + 1, to, copy))
        })
        .collect::<Result<_>>()?;
    let (inputs, rows) = (Arc::new(inputs.to_vec()), Arc::new(rows.to_vec()));
    let copies = Arc::new(copies);
    let mut outs = ranks.each(|r| {
        let (inputs, rows, copies) = (inputs.clone(), rows.clone(), copies.clone());
        Box::new(move |rank: &mut Rank| {
            rank.exe(kp)?.set_inputs(&inputs)?;
            rank.execute(kp)?;
            let logits = match r {
                0 => Some(vec![rank.exe(kp)?.output(0, Some(&rows))?]),
                _ => None,
            };
            let (pre, dec) = rank.two(kp, kd)?;
            for &(from, to, copy) in copies.iter() {
                dec.zero_input(to)?;
                dec.copy_rows_from(pre, from, to, copy)?;
            }
            Ok(logits)
        })
    })?;
    rank0_logits(&mut outs)
}

/// [`Session::decode`] on the ranks: the inputs sent to every rank, one run of the
/// decode step on each (the caches updated in place on their GPUs), the logits of
/// rows `take` from rank 0.
pub(super) fn decode(
    ranks: &Ranks,
    key: usize,
    inputs: &[(usize, Tensor)],
    take: &[usize],
) -> Result<Rows> {
    let (inputs, take) = (Arc::new(inputs.to_vec()), Arc::new(take.to_vec()));
    let mut outs = ranks.each(|r| {
        let (inputs, take) = (inputs.clone(), take.clone());
        Box::new(move |rank: &mut Rank| {
            let exe = rank.exe(key)?;
            for (i, t) in inputs.iter() {
                exe.set_input(*i, t)?;
            }
            rank.execute(key)?;
            match r {
                0 => Ok(Some(vec![rank.exe(key)?.output(0, Some(&take))?])),
                _ => Ok(None),
            }
        })
    })?;
    rank0_logits(&mut outs)
}

/// The logits rows rank 0 returned (the other ranks return none).
fn rank0_logits(outs: &mut Vec<Option<Vec<Tensor>>>) -> Result<Rows> {
    let logits = outs.swap_remove(0).and_then(|mut v| v.pop());
    let logits = logits.ok_or_else(|| GoptError::Usage("rank 0 returned no logits".into()))?;
    take_rows(&logits, None)
}

/// Times the decode step under `key` on every rank (after `warmup` runs): the wall
/// clock of each run, from sending it to all ranks until every rank has finished,
/// in milliseconds (the host's dispatch to the rank threads included, as a token
/// pays it).
pub(super) fn time(
    ranks: &Ranks,
    key: usize,
    inputs: &[(usize, Tensor)],
    warmup: usize,
    iters: usize,
) -> Result<Vec<f64>> {
    let inputs = Arc::new(inputs.to_vec());
    ranks.each(|_| {
        let inputs = inputs.clone();
        Box::new(move |rank: &mut Rank| {
            let exe = rank.exe(key)?;
            for (i, t) in inputs.iter() {
                exe.set_input(*i, t)?;
            }
            Ok(None)
        })
    })?;
    let run = || {
        ranks.each(|_| {
            Box::new(move |rank: &mut Rank| {
                rank.execute(key)?;
                rank.finish(key)?;
                Ok(None)
            })
        })
    };
    for _ in 0..warmup {
        run()?;
    }
    let mut ms = Vec::with_capacity(iters);
    for _ in 0..iters.max(1) {
        let t = std::time::Instant::now();
        run()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(ms)
}
