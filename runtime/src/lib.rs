//! gopt-runtime: executors for the plans `gopt-codegen` makes. The CUDA executor loads
//! the driver, NVRTC and cuBLASLt at run time (cudarc's dynamic loading), so a machine
//! without a GPU gets a clear error naming what is missing instead of a crash at
//! start-up. [`exec`] runs a plan (CUDA graphs), [`blas`] its GEMMs, [`cuda`] the device
//! and NVRTC.
#![warn(missing_docs)]

pub mod blas;
pub mod cuda;
pub mod exec;
mod modules;
pub mod wgpu_exec;
pub mod wgsl;

/// Errors of the executors.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No CUDA driver (or no NVRTC) on this machine.
    #[error("no CUDA {0} library on this machine (`libcuda.so` comes with the NVIDIA driver, `libnvrtc.so.13` with the CUDA toolkit): use another backend, e.g. --backend cpu")]
    NoCuda(&'static str),
    /// A CUDA driver call failed.
    #[error("CUDA {what}: {msg}")]
    Driver {
        /// What was being done (naming the kernel when there is one).
        what: String,
        /// The driver's message.
        msg: String,
    },
    /// NVRTC rejected a module.
    #[error("NVRTC could not compile {what}: {log}")]
    Compile {
        /// Which module.
        what: String,
        /// The compiler's log.
        log: String,
    },
    /// An allocation refused before it was made: above the device's free memory or
    /// the memory limit.
    #[error(transparent)]
    Memory(#[from] gopt_ir::limit::MemoryError),
    /// Inputs that do not fit a kernel.
    #[error("{0}")]
    Usage(String),
}

/// Result alias of the executors.
pub type Result<T> = std::result::Result<T, RuntimeError>;
