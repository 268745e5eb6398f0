//! Running generation's steps on a backend. The three differ in where the cache lives:
//!
//! - CUDA: in the decode step's arena. Its cache inputs are updated in place by the
//!   step's `TensorScatter`, so nothing moves between steps but the token, the
//!   positions and the mask going in and one row of logits per sequence coming out;
//!   the prompt's keys and values are copied once, device to device, from the prefill
//!   step's outputs into the cache rows ([`Executable::copy_rows_from`]).
//! - wgpu: in the decode step's input buffers; the plan writes the updated cache as an
//!   output (WGSL binds no output to an input's memory), which is copied back into the
//!   input on the device in the same submission.
//! - CPU: host tensors, the interpreter's outputs fed back as the next inputs.
//!
//! With tensor parallelism every rank keeps its K/V heads of the cache where its
//! device keeps it: on CUDA each rank's thread ([`Ranks`]) runs the steps on its GPU,
//! the same inputs sent to all, the logits read from rank 0, the prompt's keys copied
//! into the cache on each GPU; on the CPU the rank graphs run together in the
//! interpreter ([`simulate_each`]), each with its own host caches.

use super::steps::CompiledStep;
use crate::compiled::BackendPlan;
use crate::pipeline::{Backend, Options};
use crate::{GoptError, Result};
use gopt_codegen::plan::WeightStore;
use gopt_ir::ops::collective::simulate_each;
use gopt_ir::{interp, Tensor};
use gopt_passes::decoder::{Cache, Step};
use gopt_runtime::cuda::ranks::Ranks;
use gopt_runtime::cuda::{Executable, RowCopy, Weights};
use gopt_runtime::wgpu::{WgpuExecutable, WgpuWeights};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The executors loaded so far, with the weights they share.
pub(super) enum Loaded {
    /// None yet (always so on the CPU).
    Nothing,
    /// CUDA: the weights uploaded once (their blob's length, to see it grow), an
    /// executable per step.
    Cuda {
        weights: Arc<Weights>,
        len: usize,
        exes: BTreeMap<Step, Executable>,
    },
    /// wgpu: a buffer per distinct constant, an executable per step.
    Wgpu {
        weights: WgpuWeights,
        exes: BTreeMap<Step, WgpuExecutable>,
    },
    /// CUDA, tensor parallel: a thread and GPU per rank, each with its rank's weights
    /// (rank 0's blob length, to see the stores grow) and an executable per step
    /// under the step's key.
    Ranks {
        ranks: Ranks,
        len: usize,
        keys: BTreeMap<Step, usize>,
    },
}

impl Loaded {
    /// Makes `step`'s executor ready (compiling its kernels, uploading the weights the
    /// first time or when the store grew since).
    pub(super) fn load(
        &mut self,
        step: &CompiledStep,
        stores: &[WeightStore],
        ranks: Option<usize>,
        opts: &Options,
    ) -> Result<()> {
        let store = &stores[0];
        match (&step.plan, opts.get_backend()) {
            (BackendPlan::Cpu, _) => Ok(()),
            (BackendPlan::Cuda(_), Backend::Cuda) if ranks.is_some() => {
                super::ranks::load(self, step, stores, opts)
            }
            (BackendPlan::Cuda(plan), Backend::Cuda) => {
                if matches!(self, Loaded::Cuda { len, .. } if *len != store.len()) {
                    self.release();
                }
                if matches!(self, Loaded::Cuda { exes, .. } if exes.contains_key(&step.step)) {
                    return Ok(());
                }
                let dev = crate::cuda::device()?;
                let uploaded = matches!(self, Loaded::Cuda { .. });
                let what = format!("step {}", step.step.name());
                gopt_runtime::cuda::check_memory(
                    &dev,
                    &what,
                    plan,
                    !uploaded,
                    opts.get_memory_limit(),
                )?;
                gopt_runtime::cuda::precompile(&dev, &plan.kernels)?;
                let _gpu = gopt_runtime::cuda::gpu_lock();
                if !uploaded {
                    *self = Loaded::Cuda {
                        weights: Weights::upload(&dev, store.blob())?,
                        len: store.len(),
                        exes: BTreeMap::new(),
                    };
                }
                let Loaded::Cuda { weights, exes, .. } = self else {
                    return Err(GoptError::Usage("CUDA executors missing".into()));
                };
                let mut exe = Executable::with_tuning(
                    &dev,
                    plan.clone(),
                    weights.clone(),
                    opts.get_cuda_graph(),
                    &opts.tune_options(),
                )?;
                drop(_gpu);
                // Captured now, so the first token does not wait for the capture.
                exe.capture()?;
                exes.insert(step.step, exe);
                Ok(())
            }
            (BackendPlan::Wgpu(plan), Backend::Wgpu) => {
                if !matches!(self, Loaded::Wgpu { .. }) {
                    *self = Loaded::Wgpu {
                        weights: WgpuWeights::default(),
                        exes: BTreeMap::new(),
                    };
                }
                let Loaded::Wgpu { weights, exes } = self else {
                    return Err(GoptError::Usage("wgpu executors missing".into()));
                };
                if let std::collections::btree_map::Entry::Vacant(e) = exes.entry(step.step) {
                    let dev = crate::wgpu::device(opts.get_adapter())?;
                    e.insert(WgpuExecutable::new(
                        dev,
                        plan.clone(),
                        weights,
                        store.blob(),
                    )?);
                }
                Ok(())
            }
            (BackendPlan::Cuda(_) | BackendPlan::Wgpu(_), _) => Err(GoptError::Usage(
                "the steps were compiled for another backend".into(),
            )),
        }
    }

    /// Frees the CUDA executables and weights (under the process's GPU lock; the
    /// ranks take it themselves as they stop).
    pub(super) fn release(&mut self) {
        match self {
            Loaded::Cuda { .. } => {
                let _gpu = gopt_runtime::cuda::gpu_lock();
                *self = Loaded::Nothing;
            }
            Loaded::Ranks { .. } => *self = Loaded::Nothing,
            Loaded::Nothing | Loaded::Wgpu { .. } => {}
        }
    }

    /// The ranks and the key of `step` on them (tensor parallel on CUDA).
    pub(super) fn ranks(&self, step: Step) -> Option<(&Ranks, usize)> {
        match self {
            Loaded::Ranks { ranks, keys, .. } => keys.get(&step).map(|k| (ranks, *k)),
            Loaded::Nothing | Loaded::Cuda { .. } | Loaded::Wgpu { .. } => None,
        }
    }

    /// The CUDA executable of `step`.
    pub(super) fn cuda(&mut self, step: Step) -> Result<&mut Executable> {
        match self {
            Loaded::Cuda { exes, .. } => exes
                .get_mut(&step)
                .ok_or_else(|| GoptError::Usage(format!("step {} is not loaded", step.name()))),
            Loaded::Nothing | Loaded::Wgpu { .. } | Loaded::Ranks { .. } => Err(GoptError::Usage(
                "no single-GPU CUDA executor loaded".into(),
            )),
        }
    }
}

/// Where a generation's cache is between steps, and how the steps run.
pub(super) struct Session<'a> {
    /// The prefill step and the decode step.
    pub prefill: &'a CompiledStep,
    pub decode: &'a CompiledStep,
    /// The executors.
    pub loaded: &'a mut Loaded,
    /// The caches of each rank (CPU only; the GPUs keep theirs on the device).
    pub host_caches: Vec<Vec<Tensor>>,
    /// The decode step's input index of each cache.
    pub cache_inputs: Vec<usize>,
    pub limit: Option<u64>,
}

impl Session<'_> {
    /// Runs the prefill step on `inputs` and returns the logits of `rows` (indices into
    /// the logits seen as `[batch · seq, vocab]`), after writing the prompt's keys and
    /// values into the decode step's (zeroed) cache.
    pub fn prefill(&mut self, inputs: &[Tensor], rows: &[usize], caches: &[Cache]) -> Result<Rows> {
        let (p, d) = (self.prefill.step, self.decode.step);
        if let (Some((ranks, kp)), Some((_, kd))) = (self.loaded.ranks(p), self.loaded.ranks(d)) {
            return super::ranks::prefill(self, ranks, (kp, kd), inputs, rows, caches);
        }
        match &self.prefill.plan {
            BackendPlan::Cpu => {
                let each = vec![inputs.to_vec(); 1 + self.prefill.rest.len()];
                let outs = self.run_cpu(self.prefill, &each)?;
                let logits = take_rows(&outs[0][0], Some(rows))?;
                self.host_caches = outs
                    .iter()
                    .map(|o| self.fresh_caches(&o[1..], caches))
                    .collect::<Result<_>>()?;
                Ok(logits)
            }
            BackendPlan::Cuda(_) => {
                let (pre, dec) = two_cuda(self.loaded, p, d)?;
                pre.set_inputs(inputs)?;
                pre.execute()?;
                let logits = take_rows(&pre.output(0, Some(rows))?, None)?;
                for (k, c) in caches.iter().enumerate() {
                    let to = self.cache_inputs[k];
                    dec.zero_input(to)?;
                    let copy = row_copy(
                        &pre.plan().frame.outputs[k + 1],
                        &dec.plan().frame.inputs[to],
                        c,
                    )?;
                    dec.copy_rows_from(pre, k + 1, to, copy)?;
                }
                Ok(logits)
            }
            BackendPlan::Wgpu(_) => {
                let outs = self.wgpu(p)?.run(inputs)?;
                let logits = take_rows(&outs[0], Some(rows))?;
                let fresh = self.fresh_caches(&outs[1..], caches)?;
                let at = self.cache_inputs.clone();
                let dec = self.wgpu(d)?;
                for (k, t) in fresh.iter().enumerate() {
                    dec.set_input(at[k], t)?;
                }
                Ok(logits)
            }
        }
    }

    /// Runs one decode step: `inputs` are the decode step's inputs by index, the caches
    /// left out (they are where the session keeps them); returns the logits of the
    /// first `rows` batch rows.
    pub fn decode(&mut self, inputs: &[(usize, Tensor)], rows: usize) -> Result<Rows> {
        let d = self.decode.step;
        let take: Vec<usize> = (0..rows).collect();
        if let Some((ranks, key)) = self.loaded.ranks(d) {
            return super::ranks::decode(ranks, key, inputs, &take);
        }
        match &self.decode.plan {
            BackendPlan::Cpu => {
                let n = self.decode.variant.graph.inputs.len();
                let each = self
                    .host_caches
                    .iter()
                    .map(|caches| {
                        let mut all: Vec<Option<Tensor>> = vec![None; n];
                        for (i, t) in inputs {
                            all[*i] = Some(t.clone());
                        }
                        for (k, &i) in self.cache_inputs.iter().enumerate() {
                            all[i] = Some(caches[k].clone());
                        }
                        all.into_iter()
                            .map(|t| {
                                t.ok_or_else(|| {
                                    GoptError::Usage("a decode input was not given".into())
                                })
                            })
                            .collect::<Result<Vec<Tensor>>>()
                    })
                    .collect::<Result<Vec<_>>>()?;
                let outs = self.run_cpu(self.decode, &each)?;
                let logits = take_rows(&outs[0][0], Some(&take))?;
                self.host_caches = outs
                    .into_iter()
                    .map(|mut o| o.drain(1..).collect())
                    .collect();
                Ok(logits)
            }
            BackendPlan::Cuda(_) => {
                let exe = self.loaded.cuda(d)?;
                for (i, t) in inputs {
                    exe.set_input(*i, t)?;
                }
                exe.execute()?;
                take_rows(&exe.output(0, Some(&take))?, None)
            }
            BackendPlan::Wgpu(_) => {
                let carry: Vec<(usize, usize)> = self
                    .cache_inputs
                    .iter()
                    .enumerate()
                    .map(|(k, &i)| (k + 1, i))
                    .collect();
                let exe = self.wgpu(d)?;
                for (i, t) in inputs {
                    exe.set_input(*i, t)?;
                }
                exe.execute_carrying(&carry)?;
                take_rows(&exe.output(0)?, Some(&take))
            }
        }
    }

    /// Runs `step` on the CPU: its one graph in the interpreter, or (tensor parallel
    /// over several ranks) every rank's graph together, rank r on `each[r]`.
    fn run_cpu(&self, step: &CompiledStep, each: &[Vec<Tensor>]) -> Result<Vec<Vec<Tensor>>> {
        if step.rest.is_empty() {
            let limit = gopt_ir::limit::MemoryLimit::host(self.limit);
            return Ok(vec![interp::run_limited(
                &step.variant.graph,
                &each[0],
                limit,
            )?]);
        }
        let graphs: Vec<&gopt_ir::Graph> = std::iter::once(&step.variant.graph)
            .chain(step.rest.iter().map(|r| &r.variant.graph))
            .map(|g| &**g)
            .collect();
        Ok(simulate_each(&graphs, each)?)
    }

    /// The wgpu executable of `step`.
    fn wgpu(&mut self, step: Step) -> Result<&mut WgpuExecutable> {
        match &mut *self.loaded {
            Loaded::Wgpu { exes, .. } => exes
                .get_mut(&step)
                .ok_or_else(|| GoptError::Usage(format!("step {} is not loaded", step.name()))),
            Loaded::Nothing | Loaded::Cuda { .. } | Loaded::Ranks { .. } => {
                Err(GoptError::Usage("no wgpu executor loaded".into()))
            }
        }
    }

    /// The decode step's caches holding the prefill's presents in their first slots
    /// (host tensors, zeros elsewhere).
    fn fresh_caches(&self, presents: &[Tensor], caches: &[Cache]) -> Result<Vec<Tensor>> {
        let inputs = &self.decode.variant.graph;
        presents
            .iter()
            .zip(caches)
            .zip(&self.cache_inputs)
            .map(|((p, c), &i)| {
                let ty = inputs.ty(inputs.inputs[i])?;
                let shape = gopt_ir::dim::concrete(&ty.shape)
                    .ok_or_else(|| GoptError::Usage("a cache of unknown shape".into()))?;
                let cache = Tensor::zeros(ty.dtype, &shape);
                write_prefix(&cache, &p.cast(ty.dtype), c.axis)
            })
            .collect()
    }
}

/// The prefill and decode CUDA executables at once.
fn two_cuda(loaded: &mut Loaded, p: Step, d: Step) -> Result<(&mut Executable, &mut Executable)> {
    let Loaded::Cuda { exes, .. } = loaded else {
        return Err(GoptError::Usage("no CUDA executor loaded".into()));
    };
    // Two distinct keys of one map: split the borrow through an iterator.
    let mut pre = None;
    let mut dec = None;
    for (k, v) in exes.iter_mut() {
        if *k == p {
            pre = Some(v);
        } else if *k == d {
            dec = Some(v);
        }
    }
    match (pre, dec) {
        (Some(p), Some(d)) => Ok((p, d)),
        _ => Err(GoptError::Usage("prefill or decode step not loaded".into())),
    }
}

/// The rows of a present `[.., seq, ..]` into a cache `[.., context, ..]` around the
/// sequence axis: one row per index before it, `seq · inner` elements each.
pub(super) fn row_copy(
    present: &gopt_codegen::plan::Io,
    cache: &gopt_codegen::plan::Io,
    c: &Cache,
) -> Result<RowCopy> {
    let es = cache.dtype.size();
    if present.dtype != cache.dtype || present.shape.len() != cache.shape.len() {
        return Err(GoptError::Usage(format!(
            "present `{}` ({} {:?}) does not fit cache `{}` ({} {:?})",
            present.name, present.dtype, present.shape, cache.name, cache.dtype, cache.shape
        )));
    }
    let rows: usize = present.shape[..c.axis].iter().product();
    let inner: usize = present.shape[c.axis + 1..].iter().product();
    Ok(RowCopy {
        rows,
        width: present.shape[c.axis] * inner * es,
        src_pitch: present.shape[c.axis] * inner * es,
        dst_pitch: cache.shape[c.axis] * inner * es,
    })
}

/// `dst` with `src` written into its leading positions along `axis` (same dtype, same
/// other dims), copied as bytes row by row around the axis.
fn write_prefix(dst: &Tensor, src: &Tensor, axis: usize) -> Result<Tensor> {
    let (ds, ss) = (dst.shape(), src.shape());
    let fits = ds.len() == ss.len()
        && ss.get(axis) <= ds.get(axis)
        && ds
            .iter()
            .zip(ss)
            .enumerate()
            .all(|(a, (d, s))| a == axis || d == s);
    if !fits || dst.dtype() != src.dtype() {
        return Err(GoptError::Usage(format!(
            "prompt keys {} {ss:?} do not fit the cache {} {ds:?}",
            src.dtype(),
            dst.dtype()
        )));
    }
    let es = dst.dtype().size().max(1);
    let rows: usize = ds[..axis].iter().product();
    let inner: usize = ds[axis + 1..].iter().product::<usize>() * es;
    let (sw, dw) = (ss[axis] * inner, ds[axis] * inner);
    let mut bytes = gopt_codegen::plan::tensor_bytes(dst);
    let from = gopt_codegen::plan::tensor_bytes(src);
    for r in 0..rows {
        bytes[r * dw..r * dw + sw].copy_from_slice(&from[r * sw..(r + 1) * sw]);
    }
    Ok(gopt_runtime::host::from_bytes(dst.dtype(), ds, &bytes)?)
}

/// Logits rows: one vector of the vocabulary's size per sequence.
pub(super) type Rows = Vec<Vec<f32>>;

/// `rows` of `t` seen as `[rows, last dim]` (all of them with `None`), as f32.
pub(super) fn take_rows(t: &Tensor, rows: Option<&[usize]>) -> Result<Rows> {
    let width = t.shape().last().copied().unwrap_or(1).max(1);
    let t = t.cast(gopt_ir::DType::F32);
    let all = t.as_array::<f32>()?.as_standard_layout();
    let all = all.as_slice().unwrap_or(&[]);
    let every: Vec<usize>;
    let rows = match rows {
        Some(r) => r,
        None => {
            every = (0..all.len() / width).collect();
            &every
        }
    };
    rows.iter()
        .map(|&r| {
            all.get(r * width..(r + 1) * width)
                .map(<[f32]>::to_vec)
                .ok_or_else(|| {
                    GoptError::Usage(format!(
                        "logits have {} rows, not {}",
                        all.len() / width,
                        r + 1
                    ))
                })
        })
        .collect()
}
