//! Predicting a bucket's peak device memory from its plan alone, before any kernel is
//! compiled and without a GPU: what `gopt compile --memory-budget` keeps or drops
//! buckets by, and what `gopt bench` prints beside the peak it measures
//! ([`crate::cuda::memory`]). It lives with the executors because it predicts what they
//! allocate; it reads a plan's data only, and the plans know nothing of it.
//!
//! The plan gives the exact sizes of what the executor allocates (the weights blob,
//! the arena, the status words); the rest are fixed or per-item costs of the CUDA
//! driver and libraries: the cuBLASLt workspace of each executable, the device code of
//! the loaded modules, the CUDA graph's own allocations, and what loading cuBLASLt's
//! kernels into the context costs once per process. Those are named constants below,
//! set from the per-phase deltas `tests/cuda_memory.rs` measures on an H200 (its
//! calibration test prints them).
//!
//! Driver rounding: cudarc allocates from the device's default memory pool
//! (`cuMemAllocAsync`). Measured on an H200 (driver 580), the pool grows in
//! [`POOL_CHUNK`]s of 32 MiB and an allocation uses what the previous one left of its
//! last chunk: the weights, arena, cuBLASLt workspace and status words together take
//! their sum rounded up to a whole chunk (BERT-base bf16 batch 32: 263.9 + 50.1 + 32 MiB
//! took 288 + 32 + 32 MiB). The difference is the breakdown's `rounding` term. The rest
//! (the cuBLASLt handle, its kernels, the CUDA graph) are driver allocations in
//! [`PAGE`]s of 2 MiB.

use gopt_codegen::cuda::plan::CudaPlan;
use gopt_codegen::cuda::PRELUDE;
use gopt_codegen::plan::{status_words, takes_status};
use gopt_codegen::wgsl::plan::WgslPlan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The granularity of device memory: allocations and `cuMemGetInfo` move in 2 MiB pages.
pub const PAGE: u64 = 2 << 20;

/// What the default memory pool grows by: the plan's allocations together take their
/// sum rounded up to whole chunks (measured on the H200: weights of 252.2 MiB took 256,
/// of 263.9 MiB took 288, and ResNet-50's 373.6 MiB arena after 52.6 MiB of weights
/// took 384 more).
pub const POOL_CHUNK: u64 = 32 << 20;

/// The cuBLASLt workspace each executable allocates.
pub const BLAS_WORKSPACE: u64 = crate::cuda::blas::WORKSPACE as u64;

/// Device memory a cuBLASLt handle takes besides its workspace (`cublasLtCreate`).
/// Measured as the `cublaslt` phase's delta minus the workspace: 2 MiB in every bucket
/// measured (BERT-base, GPT-2, ResNet-50, BERT-small on the H200).
pub const BLAS_HANDLE_BYTES: u64 = 2 << 20;

/// What loading cuBLASLt's GEMM kernels into the context costs, once per process (the
/// library loads them lazily, when a matmul is prepared). Measured as the `gemms` phase
/// delta: 0 for BERT-base and GPT-2, 2 MiB for ResNet-50 (more GEMM shapes); the
/// larger is taken.
pub const BLAS_LIBRARY_BYTES: u64 = 2 << 20;

/// Device memory each loaded module takes before its code (its constant banks and the
/// driver's bookkeeping). The `modules` phase measured 0 bytes for plans of 26 to 56
/// kernels on the H200: the context's code region, reserved when it is created, holds
/// them.
pub const MODULE_FIXED_BYTES: u64 = 0;

/// Device code of one distinct kernel (SASS, in the module's code segment): see
/// [`MODULE_FIXED_BYTES`].
pub const KERNEL_CODE_BYTES: u64 = 0;

/// The CUDA graph's own device memory (instantiation and upload). Measured as the
/// `graph` phase delta: 2 MiB for graphs of 26 to 104 launches on the H200.
pub const GRAPH_FIXED_BYTES: u64 = 2 << 20;

/// Device memory per node of an instantiated CUDA graph beyond [`GRAPH_FIXED_BYTES`]:
/// none measured up to 104 nodes; rounded up to a page, a node count where it shows
/// would add whole pages.
pub const GRAPH_NODE_BYTES: u64 = 0;

/// Local memory the driver reserves when a loaded kernel needs more stack than the
/// context's default: gopt's kernels do not spill past it (their per-thread arrays are
/// small), so nothing is added. A nonzero `modules` delta beyond code would show it.
pub const LOCAL_MEMORY_BYTES: u64 = 0;

/// The runtime splits a plan's distinct kernels into modules of at least this many
/// (`runtime/src/cuda/modules.rs`).
const MODULE_MIN_KERNELS: usize = 8;

/// The NVRTC threads the runtime splits modules for: its machine's cores, at most 16
/// (the H200 machine has 16). The module count, and so [`MODULE_FIXED_BYTES`]'s share,
/// assumes 16.
const MODULE_THREADS: usize = 16;

/// A bucket's predicted peak device memory, by what takes it. All fields in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeakMemory {
    /// The weights blob (uploaded once and shared by every bucket of a model).
    pub weights: u64,
    /// The bucket's arena (CUDA) or pooled buffers (wgpu).
    pub arena: u64,
    /// The cuBLASLt workspace and handle (CUDA; one per executable).
    pub workspace: u64,
    /// The status words, and on wgpu the read-back staging buffers.
    pub io: u64,
    /// The device code of the bucket's modules (CUDA).
    pub modules: u64,
    /// The instantiated CUDA graph.
    pub graph: u64,
    /// Once per process: cuBLASLt's kernels loaded into the context (CUDA).
    pub library: u64,
    /// What rounding the executor's allocations up to whole [`PAGE`]s adds.
    pub rounding: u64,
    /// What rounding the weights blob up to whole [`PAGE`]s adds (shown as part of
    /// `rounding`).
    pub weights_rounding: u64,
}

impl PeakMemory {
    /// The whole peak.
    pub fn total(&self) -> u64 {
        self.shared() + self.own()
    }

    /// What a process pays once however many buckets it loads: the weights (with their
    /// rounding) and the library.
    pub fn shared(&self) -> u64 {
        [self.weights, self.weights_rounding, self.library]
            .iter()
            .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// What each loaded bucket adds on its own: arena, workspace, io buffers, modules
    /// and graph, with their rounding.
    pub fn own(&self) -> u64 {
        [
            self.arena,
            self.workspace,
            self.io,
            self.modules,
            self.graph,
            self.rounding,
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// The nonzero terms, `weights 13.2 MiB, arena 1.5 MiB, ...`.
    pub fn breakdown(&self) -> String {
        let terms = [
            ("weights", self.weights),
            ("arena", self.arena),
            ("workspace", self.workspace),
            ("io", self.io),
            ("modules", self.modules),
            ("graph", self.graph),
            ("library", self.library),
            (
                "rounding",
                self.rounding.saturating_add(self.weights_rounding),
            ),
        ];
        let parts: Vec<String> = terms
            .iter()
            .filter(|t| t.1 > 0)
            .map(|(name, b)| format!("{name} {}", gopt_ir::limit::fmt_short(u128::from(*b))))
            .collect();
        parts.join(", ")
    }
}

/// `n` rounded up to whole [`POOL_CHUNK`]s.
pub fn chunk_up(n: u64) -> u64 {
    n.div_ceil(POOL_CHUNK).saturating_mul(POOL_CHUNK)
}

/// `n` rounded up to whole [`PAGE`]s.
pub fn page_up(n: u64) -> u64 {
    n.div_ceil(PAGE).saturating_mul(PAGE)
}

/// What the plan's kernels make once the runtime loads them: distinct kernels (those
/// differing only in their names compile once) and the modules they are split into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleCount {
    /// Distinct kernel bodies.
    pub kernels: usize,
    /// Modules (NVRTC compiles and the driver loads one each).
    pub modules: usize,
    /// CUDA source bytes of the distinct kernels and each module's prelude.
    pub source_bytes: usize,
}

/// The modules the runtime makes of `plan`'s kernels (as `runtime/src/cuda/modules.rs`
/// splits them, for [`MODULE_THREADS`] threads).
pub fn module_count(plan: &CudaPlan) -> ModuleCount {
    let mut bodies = BTreeSet::new();
    for k in &plan.kernels {
        bodies.insert(k.source.replace(&k.name, "\u{1}"));
    }
    let kernels = bodies.len();
    let per = kernels.div_ceil(MODULE_THREADS).max(MODULE_MIN_KERNELS);
    let modules = kernels.div_ceil(per);
    let source_bytes = bodies.iter().map(String::len).sum::<usize>() + modules * PRELUDE.len();
    ModuleCount {
        kernels,
        modules,
        source_bytes,
    }
}

/// Nodes of the plan's CUDA graph: every launch and cuBLASLt call, and the memset that
/// zeroes the status words.
pub fn graph_nodes(plan: &CudaPlan) -> usize {
    plan.launches() + usize::from(has_status(plan))
}

/// Whether the executor allocates the status words (a kernel checks indices or counts
/// an output).
fn has_status(plan: &CudaPlan) -> bool {
    plan.kernels
        .iter()
        .any(|k| takes_status(k.index_check.is_some(), &k.outputs, &plan.frame))
}

/// Predicts the peak device memory of running `plan` with a weights blob of
/// `weights_bytes` (the model's whole blob, which the runtime uploads whatever bucket
/// runs), as the first bucket a process loads: weights upload, module load, arena,
/// cuBLASLt handle and workspace, status words, graph capture and the first run.
pub fn cuda(plan: &CudaPlan, weights_bytes: usize) -> PeakMemory {
    let weights = weights_bytes.max(1) as u64;
    let arena = plan.arena_bytes.max(256) as u64;
    let status = if has_status(plan) {
        4 * status_words(&plan.frame.outputs) as u64
    } else {
        0
    };
    let m = module_count(plan);
    let modules = (m.modules as u64)
        .saturating_mul(MODULE_FIXED_BYTES)
        .saturating_add((m.kernels as u64).saturating_mul(KERNEL_CODE_BYTES))
        .saturating_add(if m.kernels > 0 { LOCAL_MEMORY_BYTES } else { 0 });
    let graph = page_up(
        GRAPH_FIXED_BYTES
            .saturating_add((graph_nodes(plan) as u64).saturating_mul(GRAPH_NODE_BYTES)),
    );
    // The pool takes the weights, arena, workspace and status words together, rounded
    // up to whole chunks; the weights' share of the rounding is what rounding them alone
    // adds (it stays when more buckets load).
    let pooled = [weights, arena, BLAS_WORKSPACE, status]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b));
    let rounding_all = chunk_up(pooled) - pooled;
    let weights_rounding = (chunk_up(weights) - weights).min(rounding_all);
    PeakMemory {
        weights,
        arena,
        workspace: BLAS_WORKSPACE + BLAS_HANDLE_BYTES,
        io: status,
        modules: page_up(modules),
        graph,
        library: BLAS_LIBRARY_BYTES,
        rounding: rounding_all - weights_rounding,
        weights_rounding,
    }
}

/// The predicted peak device memory of `plan` on wgpu: the weights it binds, its pooled
/// buffers, and as `io` the status words (twice: storage and read-back) and each
/// output's read-back staging buffer (at least 4 bytes, in whole words, as the executor
/// makes them). wgpu hides the driver's rounding, so nothing is rounded.
pub fn wgpu(plan: &WgslPlan) -> PeakMemory {
    let words = |n: usize| (n.max(4).div_ceil(4) * 4) as u64;
    let checks = plan
        .kernels
        .iter()
        .any(|k| takes_status(k.index_check.is_some(), &k.outputs, &plan.frame));
    let status = if checks {
        2 * words(4 * status_words(&plan.frame.outputs))
    } else {
        0
    };
    let staging: u64 = plan
        .frame
        .outputs
        .iter()
        .map(|o| words(plan.frame.value_bytes.get(&o.value).copied().unwrap_or(4)))
        .sum();
    PeakMemory {
        weights: u64::try_from(plan.weight_bytes()).unwrap_or(u64::MAX),
        arena: plan.buffers.iter().map(|&b| words(b)).sum(),
        io: status + staging,
        ..PeakMemory::default()
    }
}

/// The most device memory a process holds running every bucket of `peaks` (each a
/// bucket's [`PeakMemory`], sharing one weights blob): the shared part once, every
/// bucket's own part, since a run keeps each executor it has loaded.
pub fn all_loaded(peaks: &[PeakMemory]) -> u64 {
    let shared = peaks.iter().map(PeakMemory::shared).max().unwrap_or(0);
    peaks
        .iter()
        .map(PeakMemory::own)
        .fold(shared, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peak(arena: u64) -> PeakMemory {
        PeakMemory {
            weights: 3 << 20,
            arena,
            workspace: BLAS_WORKSPACE,
            io: 4,
            modules: PAGE,
            graph: PAGE,
            library: BLAS_LIBRARY_BYTES,
            rounding: (page_up(arena) - arena) + (PAGE - 4),
            weights_rounding: page_up(3 << 20) - (3 << 20),
        }
    }

    #[test]
    fn shared_and_own_add_up_to_the_total() {
        let p = peak(5 << 20);
        assert_eq!(p.shared(), (4 << 20) + BLAS_LIBRARY_BYTES);
        assert_eq!(
            p.own(),
            (6 << 20) + BLAS_WORKSPACE + PAGE + PAGE + PAGE,
            "arena 6 MiB rounded, workspace, status page, modules, graph"
        );
        assert_eq!(p.total(), p.shared() + p.own());
    }

    #[test]
    fn buckets_loaded_together_count_the_weights_once() {
        let (a, b) = (peak(5 << 20), peak(9 << 20));
        assert_eq!(all_loaded(&[a, b]), a.shared() + a.own() + b.own());
        assert_eq!(all_loaded(&[a]), a.total());
        assert_eq!(all_loaded(&[]), 0);
    }

    #[test]
    fn pages_round_up() {
        assert_eq!(page_up(0), 0);
        assert_eq!(page_up(1), PAGE);
        assert_eq!(page_up(PAGE), PAGE);
        assert_eq!(page_up(PAGE + 1), 2 * PAGE);
    }

    #[test]
    fn the_breakdown_names_the_nonzero_terms() {
        let p = PeakMemory {
            weights: 3 << 20,
            arena: 1 << 20,
            ..PeakMemory::default()
        };
        assert_eq!(p.breakdown(), "weights 3.00 MiB, arena 1.00 MiB");
    }
}
