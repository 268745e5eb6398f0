//! What a tensor-parallel run needs before it starts: as many GPUs as ranks, and NCCL
//! (`libnccl.so.2`, loaded at run time through cudarc's `nccl` module, so a machine
//! without it builds and runs everything else). [`super::ranks`] checks these before
//! it opens any GPU, so a machine that lacks one is a clear error, not a hang.

use crate::{Result, RuntimeError};

/// GPUs this process sees (0 without a driver or without a device).
pub fn gpu_count() -> Result<usize> {
    // SAFETY: this only tries to load the shared library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(RuntimeError::NoCuda("driver"));
    }
    let n = cudarc::driver::CudaContext::device_count().map_err(super::drv("counting the GPUs"))?;
    Ok(n.max(0) as usize)
}

/// Whether NCCL can be loaded here.
pub fn nccl_present() -> bool {
    // SAFETY: this only tries to load the shared library.
    unsafe { cudarc::nccl::sys::is_culib_present() }
}

/// Checks this machine can run `ranks` ranks: a CUDA driver, at least `ranks` GPUs,
/// NCCL.
pub fn check_ranks(ranks: usize) -> Result<()> {
    let gpus = gpu_count()?;
    if gpus < ranks {
        return Err(RuntimeError::Usage(format!(
            "--tensor-parallel {ranks} needs {ranks} GPUs; this machine has {gpus}"
        )));
    }
    if !nccl_present() {
        return Err(RuntimeError::Usage(format!(
            "--tensor-parallel {ranks} needs NCCL (libnccl.so.2, e.g. from the \
             nvidia-nccl-cu13 wheel or the CUDA repositories) on the library path; it \
             cannot be loaded here"
        )));
    }
    Ok(())
}
