//! The wgpu executor: a [`WgslPlan`](gopt_codegen::wgsl::plan::WgslPlan) on any adapter
//! wgpu finds (Vulkan, Metal, DX12; Mesa's lavapipe on the CPU, which CI uses).
//!
//! - [`device`]: adapter selection (a discrete GPU first), the WGSL storage layout of
//!   host tensors, and one shader run on host tensors for the kernel tests;
//! - [`exec`]: a whole plan — checked against the adapter's limits, then pipelines,
//!   pooled buffers and bind groups made once per bucket, one command buffer per run.
//!
//! Its failures are [`RuntimeError::Wgpu`] (shown as
//! `wgpu: ...`) and [`RuntimeError::NoAdapter`].

pub mod device;
pub mod exec;
pub mod peaks;

/// wgpu's device limits (for [`WgpuDevice::open_with_limits`]).
pub use ::wgpu::Limits;
pub use device::{adapters, from_storage, storage_size, to_storage, AdapterInfo, WgpuDevice};
pub use exec::{check_memory, memory_limit, WgpuExecutable, WgpuWeights};

use crate::RuntimeError;

/// A wgpu failure ([`RuntimeError::Wgpu`]).
pub(crate) fn err(what: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Wgpu(what.to_string())
}
