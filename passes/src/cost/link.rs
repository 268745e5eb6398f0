//! The price of a collective: its bytes over the GPU-to-GPU link's bandwidth plus the
//! link's latency, for the algorithm NCCL runs between the GPUs of one host (a ring).
//! A ring all-reduce over N ranks sends and receives 2(N-1)/N of the buffer on each
//! link (a reduce-scatter, then an all-gather); an all-gather (N-1)/N of its output.

use super::{Class, Unit, Work};
use gopt_ir::ops::collective::Group;
use gopt_ir::ops::CollectiveOp;
use gopt_ir::{Attrs, TensorType};

/// NVLink 4 on the H200 (HGX): 18 links of 25 GB/s per direction, 450 GB/s per
/// direction per GPU, the bandwidth a ring step between two GPUs of the host gets.
pub const NVLINK4_BYTES_PER_S: f64 = 450e9;

/// The fixed cost of one NCCL collective inside a CUDA graph on one host (a kernel
/// launch plus the ring's handshakes), s: NCCL's small-message all-reduce latency on
/// NVLink is a few microseconds.
pub const COLLECTIVE_LATENCY_S: f64 = 5e-6;

/// Bytes each rank sends over its link for `op` with this output.
pub fn link_bytes(op: CollectiveOp, ranks: usize, out_bytes: f64) -> f64 {
    let n = ranks as f64;
    match op {
        CollectiveOp::AllReduce => 2.0 * (n - 1.0) / n * out_bytes,
        CollectiveOp::AllGather => (n - 1.0) / n * out_bytes,
    }
}

/// The [`Work`] of collective `op`: link bytes over [`NVLINK4_BYTES_PER_S`] plus
/// [`COLLECTIVE_LATENCY_S`] (nothing at all over one rank, which is a copy-free
/// identity).
pub fn collective_work(op: CollectiveOp, attrs: &Attrs, outputs: &[TensorType]) -> Work {
    let ranks = Group::of(attrs).map_or(1, |g| g.ranks);
    let out_bytes: f64 = outputs
        .iter()
        .map(|t| super::elems(t) * t.dtype.size() as f64)
        .sum();
    let bytes = link_bytes(op, ranks, out_bytes);
    let (memory_s, seconds) = if ranks <= 1 {
        (0.0, 0.0)
    } else {
        let m = bytes / NVLINK4_BYTES_PER_S;
        (m, m + COLLECTIVE_LATENCY_S)
    };
    Work {
        bytes,
        flops: 0.0,
        unit: Unit::Cores,
        seconds,
        memory_s,
        compute_s: 0.0,
        class: if memory_s > COLLECTIVE_LATENCY_S {
            Class::Memory
        } else {
            Class::Launch
        },
    }
}
