//! gopt-runtime: the executors of the plans `gopt-codegen` makes, one module per
//! backend, neither using the other.
//!
//! - [`cuda`] runs a `CudaPlan` on an NVIDIA GPU: the driver, NVRTC and cuBLASLt are
//!   loaded at run time (cudarc's dynamic loading), so a machine without them gets
//!   [`RuntimeError::NoCuda`] instead of a crash at start-up; kernels go through NVRTC
//!   with a disk PTX cache, GEMMs through cuBLASLt, and a bucket's steps are captured
//!   into a CUDA graph and replayed.
//! - [`wgpu`] runs a `WgslPlan` through wgpu on any adapter it finds (Vulkan, Metal,
//!   DX12; Mesa's lavapipe on the CPU): pipelines and bind groups made once per bucket,
//!   one command buffer per run.
//!
//! Errors name their backend: [`RuntimeError::Driver`], [`RuntimeError::Compile`] and
//! [`RuntimeError::Cuda`] come from the CUDA executor, [`RuntimeError::NoAdapter`] and
//! [`RuntimeError::Wgpu`] from the wgpu one; [`RuntimeError::Usage`] is a caller's
//! mistake (inputs that do not fit the plan).
#![warn(missing_docs)]

pub mod cuda;
pub mod host;
pub mod peak;
pub mod wgpu;

/// One step of a plan timed on its own (`profile` of either executor).
#[derive(Clone, Debug, serde::Serialize)]
pub struct StepTime {
    /// What ran: the kernel's name and node, or the GEMM's shape and node.
    pub label: String,
    /// The graph node it computes.
    pub node: String,
    /// Median milliseconds.
    pub ms: f64,
    /// Blocks (CUDA) or workgroups (wgpu) launched, when the plan says (a cuBLASLt
    /// GEMM chooses its own grid: `None`).
    pub blocks: Option<u64>,
}

/// Errors of the executors.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No CUDA driver (or no NVRTC, or no cuBLASLt) on this machine.
    #[error("no CUDA {0} library on this machine (`libcuda.so` comes with the NVIDIA driver, `libnvrtc.so.13` with the CUDA toolkit): use another backend, e.g. --backend cpu")]
    NoCuda(&'static str),
    /// A CUDA driver (or cuBLASLt) call failed.
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
    /// A CUDA plan the executor cannot run as it is (a value without a place, an
    /// operand dtype cuBLASLt has no type for: a damaged or mismatched artifact), or an
    /// executor thread that died.
    #[error("CUDA: {0}")]
    Cuda(String),
    /// No wgpu adapter (or none whose name matches the one asked for).
    #[error(
        "no wgpu adapter{} (adapters seen: {}); on Linux without a GPU, install Mesa's \
         lavapipe (`apt-get install mesa-vulkan-drivers libvulkan1`)",
        matching(.name),
        listed(.seen)
    )]
    NoAdapter {
        /// The name asked for (`--adapter`), if any.
        name: Option<String>,
        /// The adapters wgpu found.
        seen: Vec<String>,
    },
    /// wgpu failed, or a WGSL plan does not fit the adapter (a binding above its
    /// limits, f16 shaders without `SHADER_F16`, a shader or pipeline error).
    #[error("wgpu: {0}")]
    Wgpu(String),
    /// A kernel read an index out of its range (a Gather index, a Slice start): the
    /// message names the node and the backend whose kernel found it.
    #[error("{0}")]
    IndexOutOfRange(String),
    /// An allocation refused before it was made: above the device's free memory or
    /// the memory limit.
    #[error(transparent)]
    Memory(#[from] gopt_ir::limit::MemoryError),
    /// A caller's mistake: inputs that do not fit the plan (count, dtype, shape), or
    /// bytes that do not make the tensor asked for.
    #[error("{0}")]
    Usage(String),
}

/// ` matching `NAME`` when an adapter name was asked for.
fn matching(name: &Option<String>) -> String {
    name.as_ref()
        .map(|n| format!(" matching `{n}`"))
        .unwrap_or_default()
}

/// The names, comma-separated, or `none`.
fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// Result alias of the executors.
pub type Result<T> = std::result::Result<T, RuntimeError>;

/// gopt's cache directory (PTX, GEMM choices, measured peaks each below it):
/// `$GOPT_CACHE_DIR`, else `$XDG_CACHE_HOME/gopt`, else `~/.cache/gopt` (`None` without
/// any of them).
pub fn cache_base() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    match std::env::var_os("GOPT_CACHE_DIR") {
        Some(d) => Some(PathBuf::from(d)),
        None => Some(
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
                .join("gopt"),
        ),
    }
}
