//! A compiled model's executors: each bucket's plan made ready on its device on first
//! use (CUDA: NVRTC, the weights upload, the arena; wgpu: pipelines and buffers), kept
//! in one [`Loaded`] value for the backend, and [`Executor`], the borrowed executor of
//! one bucket that `gopt bench` times.

use super::{bucket_name, BackendPlan, Compiled};
use crate::pipeline::Backend;
use crate::{GoptError, Result};
use gopt_ir::Tensor;
use gopt_runtime::cuda::{Executable, Weights};
use gopt_runtime::wgpu::{WgpuExecutable, WgpuWeights};
use std::collections::btree_map::{BTreeMap, Entry};
use std::sync::Arc;

/// The executors loaded on the device so far, with the weights they share.
pub(super) enum Loaded {
    /// None yet (always so on the CPU).
    Nothing,
    /// CUDA: the weights blob uploaded once, and an executable per bucket index.
    Cuda {
        weights: Arc<Weights>,
        exes: BTreeMap<usize, Executable>,
    },
    /// wgpu: one buffer per distinct constant, and an executable per bucket index.
    Wgpu {
        weights: WgpuWeights,
        exes: BTreeMap<usize, WgpuExecutable>,
    },
}

/// One bucket's executor, loaded on its device.
pub enum Executor<'a> {
    /// A CUDA plan on an NVIDIA GPU.
    Cuda(&'a mut Executable),
    /// A WGSL plan on a wgpu adapter.
    Wgpu(&'a mut WgpuExecutable),
}

impl Executor<'_> {
    /// A full run: inputs (the bucket's shapes) in, outputs out.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        Ok(match self {
            Executor::Cuda(e) => e.run(inputs)?,
            Executor::Wgpu(e) => e.run(inputs)?,
        })
    }
}

fn missing(what: &str) -> GoptError {
    GoptError::Usage(format!("{what} executable missing"))
}

impl Compiled {
    /// The executor of bucket `i` on the backend it was compiled for, loaded on first
    /// use (the CPU backend has none: it interprets the bucket's graph).
    pub fn executor(&mut self, i: usize) -> Result<Executor<'_>> {
        let bucket = self
            .buckets
            .get(i)
            .ok_or_else(|| GoptError::Usage(format!("no bucket {i}")))?;
        match (self.opts.get_backend(), &bucket.plan) {
            (Backend::Cuda, BackendPlan::Cuda(_)) => self.cuda(i).map(Executor::Cuda),
            (Backend::Wgpu, BackendPlan::Wgpu(_)) => self.wgpu(i).map(Executor::Wgpu),
            (Backend::Cuda, _) => Err(GoptError::Usage(
                "this model was not compiled for CUDA".into(),
            )),
            (Backend::Wgpu, _) => Err(GoptError::Usage(
                "this model was not compiled for wgpu (--target wgsl)".into(),
            )),
            (Backend::Cpu, _) => Err(GoptError::Usage(
                "the CPU backend interprets the graph: it has no executor".into(),
            )),
        }
    }

    /// Device bytes of the weights uploaded so far.
    pub fn device_weights_bytes(&self) -> usize {
        match &self.loaded {
            Loaded::Nothing => 0,
            Loaded::Cuda { weights, .. } => weights.bytes(),
            Loaded::Wgpu { weights, .. } => weights.bytes(),
        }
    }

    /// The CUDA executable of bucket `i`, loaded on first use.
    fn cuda(&mut self, i: usize) -> Result<&mut Executable> {
        let ready = matches!(&self.loaded, Loaded::Cuda { exes, .. } if exes.contains_key(&i));
        if !ready {
            let BackendPlan::Cuda(plan) = &self.buckets[i].plan else {
                return Err(GoptError::Usage(
                    "this model was not compiled for CUDA".into(),
                ));
            };
            let plan = plan.clone();
            let dev = crate::cuda::device()?;
            let uploaded = matches!(self.loaded, Loaded::Cuda { .. });
            gopt_runtime::cuda::check_memory(
                &dev,
                &format!("bucket {}", bucket_name(&self.buckets[i].sizes)),
                &plan,
                !uploaded,
                self.opts.get_memory_limit(),
            )?;
            // NVRTC runs outside the GPU lock (it does not touch the GPU).
            gopt_runtime::cuda::precompile(&dev, &plan.kernels)?;
            let _gpu = gopt_runtime::cuda::gpu_lock();
            if !uploaded {
                self.loaded = Loaded::Cuda {
                    weights: Weights::upload(&dev, self.weights.blob())?,
                    exes: BTreeMap::new(),
                };
            }
            let Loaded::Cuda { weights, exes } = &mut self.loaded else {
                return Err(missing("CUDA"));
            };
            let exe = Executable::with_tuning(
                &dev,
                plan,
                weights.clone(),
                self.opts.get_cuda_graph(),
                &self.opts.tune_options(),
            )?;
            exes.insert(i, exe);
        }
        match &mut self.loaded {
            Loaded::Cuda { exes, .. } => exes.get_mut(&i).ok_or_else(|| missing("CUDA")),
            Loaded::Nothing | Loaded::Wgpu { .. } => Err(missing("CUDA")),
        }
    }

    /// The wgpu executable of bucket `i`, made on first use.
    fn wgpu(&mut self, i: usize) -> Result<&mut WgpuExecutable> {
        if !matches!(self.loaded, Loaded::Wgpu { .. }) {
            self.release_gpu();
            self.loaded = Loaded::Wgpu {
                weights: WgpuWeights::default(),
                exes: BTreeMap::new(),
            };
        }
        let Loaded::Wgpu { weights, exes } = &mut self.loaded else {
            return Err(missing("wgpu"));
        };
        match exes.entry(i) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => {
                let BackendPlan::Wgpu(plan) = &self.buckets[i].plan else {
                    return Err(GoptError::Usage(
                        "this model was not compiled for wgpu (--target wgsl)".into(),
                    ));
                };
                let plan = plan.clone();
                let dev = crate::wgpu::device(self.opts.get_adapter())?;
                gopt_runtime::wgpu::check_memory(
                    &dev,
                    &format!("bucket {}", bucket_name(&self.buckets[i].sizes)),
                    &plan,
                    weights,
                    self.opts.get_memory_limit(),
                )?;
                let exe = WgpuExecutable::new(dev, plan, weights, self.weights.blob())?;
                Ok(e.insert(exe))
            }
        }
    }

    /// CUDA: chooses every bucket's GEMM algorithms on this machine's GPU as loading the
    /// bucket would (timed, or read from the cache; see [`gopt_runtime::cuda::tune`]),
    /// without loading its kernels: `gopt compile` records the choices in the artifact
    /// and leaves them in the cache for the runs to come. One entry per bucket, `None`
    /// for a bucket without a CUDA plan.
    pub fn tune_gemms(&self) -> Result<Vec<Option<gopt_runtime::cuda::TuneReport>>> {
        let opts = self.opts.tune_options();
        let dev = crate::cuda::device()?;
        let _gpu = gopt_runtime::cuda::gpu_lock();
        let weights = match &self.loaded {
            Loaded::Cuda { weights, .. } => weights.clone(),
            Loaded::Nothing | Loaded::Wgpu { .. } => Weights::upload(&dev, self.weights.blob())?,
        };
        self.buckets
            .iter()
            .map(|b| match &b.plan {
                BackendPlan::Cuda(p) => Ok(Some(gopt_runtime::cuda::tune_plan(
                    &dev, p, &weights, &opts,
                )?)),
                BackendPlan::Cpu | BackendPlan::Wgpu(_) => Ok(None),
            })
            .collect()
    }

    /// Frees the CUDA executables and weights (under the process's GPU lock): a new
    /// bucket's constants change the blob they were uploaded from. The wgpu weights
    /// are kept: each is a buffer of its own, keyed by its offset in the blob, which
    /// new constants only extend.
    pub(super) fn release_gpu(&mut self) {
        if let Loaded::Cuda { .. } = self.loaded {
            let _gpu = gopt_runtime::cuda::gpu_lock();
            self.loaded = Loaded::Nothing;
        }
    }
}

impl Drop for Compiled {
    fn drop(&mut self) {
        self.release_gpu();
    }
}
