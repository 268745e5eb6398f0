//! What a tensor-parallel run needs before it starts: as many GPUs as ranks, and NCCL
//! (loaded at run time through cudarc's `nccl` module, so a machine without it builds
//! and runs everything else). cudarc looks for `libnccl.so` (and a few versioned names,
//! not NCCL's own soname `libnccl.so.2`), so a wheel's bare `libnccl.so.2` needs a link;
//! the error says so. [`super::ranks`] checks these before
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
            "--tensor-parallel {ranks} needs NCCL, loaded at run time as `libnccl.so` (or \
             libnccl.so.12/.13) from the library path; none loads here. A system install \
             (libnccl2 with libnccl-dev) provides it; the nvidia-nccl-cu13 wheel ships only \
             `libnccl.so.2`: link it as `libnccl.so` in a folder on LD_LIBRARY_PATH (`ln -s \
             .../nvidia/nccl/lib/libnccl.so.2 DIR/libnccl.so`)"
        )));
    }
    Ok(())
}
