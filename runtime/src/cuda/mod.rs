//! The CUDA executor: a [`CudaPlan`](gopt_codegen::cuda::plan::CudaPlan) on an NVIDIA GPU
//! through cudarc, with the driver, NVRTC and cuBLASLt loaded at run time.
//!
//! - [`device`]: opening the GPU (after checking the libraries exist), NVRTC with the
//!   on-disk PTX cache, single-kernel launches and timing for the kernel tests;
//! - [`exec`]: a whole plan — weights uploaded once per model, an arena per bucket, the
//!   steps captured into a CUDA graph and replayed, per-step profiles;
//! - [`blas`]: the plan's GEMMs as cuBLASLt matmuls prepared once;
//! - [`tune`]: each GEMM's algorithm chosen by timing cuBLASLt's candidates at load,
//!   kept in an on-disk cache;
//! - [`memory`]: the device memory an executor really takes, phase by phase;
//! - [`ranks`]: a tensor-parallel model, one thread and GPU per rank, its
//!   [`collective`] steps run through NCCL inside each rank's CUDA graph;
//! - `modules`: the plan's kernels grouped into modules NVRTC compiles in parallel.

pub mod blas;
pub mod collective;
pub mod device;
pub mod exec;
pub mod memory;
mod modules;
pub mod nccl;
pub mod peaks;
pub mod ranks;
pub mod tune;
pub use modules::compile_for_arch;
pub use tune::{tune_plan, GemmChoice, TuneOptions, TuneReport};

pub use device::{launch_config, ptx_cache_dir, Device, Timing};
pub use exec::{check_memory, gpu_lock, precompile, Executable, RowCopy, Weights};

use crate::RuntimeError;

/// Maps a driver error to [`RuntimeError::Driver`] saying what was being done.
pub(crate) fn drv(
    what: impl Into<String>,
) -> impl FnOnce(cudarc::driver::DriverError) -> RuntimeError {
    let what = what.into();
    move |e| RuntimeError::Driver {
        what,
        msg: format!("{e:?}"),
    }
}
