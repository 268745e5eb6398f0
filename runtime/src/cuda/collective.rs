//! A plan's collective steps as NCCL calls on the rank's stream: an AllReduce (sum,
//! in place or not, as the plan placed the values) or an AllGather, whose inner-axis
//! form gathers into a scratch buffer (NCCL concatenates whole ranks) and then
//! interleaves each rank's rows into the planned layout with one strided copy per
//! rank. Both are ordinary stream work, so they are captured into the plan's CUDA
//! graph like its kernels. The communicators ([`Comms`]) are made once for all ranks
//! and aborted together when any rank fails, so no rank waits for a peer that stopped.

use super::drv;
use crate::{Result, RuntimeError};
use cudarc::driver::CudaStream;
use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t};
use gopt_codegen::cuda::collective::{Collective, CollectiveKind};
use gopt_ir::DType;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One NCCL communicator per rank, made together (`ncclCommInitAll`).
pub struct Comms {
    comms: Vec<ncclComm_t>,
    aborted: AtomicBool,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; each
// rank's thread is the only one issuing calls on its communicator, and `abort` is the
// call NCCL provides for stopping a communicator another thread is blocked in.
unsafe impl Send for Comms {}
unsafe impl Sync for Comms {}

impl Comms {
    /// Communicators for GPUs `0..ranks` (rank r on GPU r).
    pub fn new(ranks: usize) -> Result<Arc<Comms>> {
        let mut comms = vec![std::ptr::null_mut(); ranks];
        let ordinals: Vec<i32> = (0..ranks as i32).collect();
        // SAFETY: `comms` has room for `ranks` communicators, `ordinals` lists `ranks`
        // devices.
        unsafe {
            cudarc::nccl::result::comm_init_all(comms.as_mut_ptr(), ranks as i32, ordinals.as_ptr())
        }
        .map_err(|e| RuntimeError::Driver {
            what: format!("creating the NCCL communicators of {ranks} ranks"),
            msg: format!("{e:?}"),
        })?;
        Ok(Arc::new(Comms {
            comms,
            aborted: AtomicBool::new(false),
        }))
    }

    /// How many ranks.
    pub fn ranks(&self) -> usize {
        self.comms.len()
    }

    /// Whether [`Comms::abort`] ran.
    pub fn aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// Aborts every communicator (once): their pending operations end, so ranks
    /// blocked in a collective whose peer failed return instead of waiting.
    pub fn abort(&self) {
        if self.aborted.swap(true, Ordering::SeqCst) {
            return;
        }
        for &c in &self.comms {
            // SAFETY: `c` came from ncclCommInitAll and is aborted only here, once.
            // An error while aborting leaves nothing more to do.
            let _ = unsafe { cudarc::nccl::result::comm_abort(c) };
        }
    }
}

impl Drop for Comms {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Rank `rank`'s view of the communicators.
#[derive(Clone)]
pub struct RankComm {
    /// All ranks' communicators.
    pub comms: Arc<Comms>,
    /// This rank.
    pub rank: usize,
}

/// A collective step ready to enqueue: device addresses and NCCL's count and type.
pub(crate) struct Ready {
    node: String,
    kind: CollectiveKind,
    send: u64,
    recv: u64,
    count: usize,
    dtype: ncclDataType_t,
    ranks: usize,
    /// Inner-axis AllGather: (scratch address, rows before the axis, bytes of one
    /// rank's part of a row).
    interleave: Option<(u64, usize, usize)>,
}

/// Scratch bytes the plan's inner-axis AllGathers need (the largest output).
pub(crate) fn scratch_bytes(cs: &[&Collective]) -> usize {
    cs.iter()
        .filter(|c| c.kind == CollectiveKind::AllGather && c.outer > 1)
        .map(|c| c.bytes)
        .max()
        .unwrap_or(0)
}

/// NCCL's type for an AllReduce over `dt`; `None` where NCCL has no sum for it.
fn reduce_type(dt: DType) -> Option<ncclDataType_t> {
    use ncclDataType_t::*;
    match dt {
        DType::F32 => Some(ncclFloat32),
        DType::F16 => Some(ncclFloat16),
        DType::BF16 => Some(ncclBfloat16),
        DType::F64 => Some(ncclFloat64),
        DType::I8 => Some(ncclInt8),
        DType::I32 => Some(ncclInt32),
        DType::I64 => Some(ncclInt64),
        DType::U8 => Some(ncclUint8),
        DType::U32 => Some(ncclUint32),
        DType::U64 => Some(ncclUint64),
        DType::I16 | DType::U16 | DType::Bool => None,
    }
}

impl Ready {
    /// Checks `c` and resolves its addresses (`send`, `recv`: its input and output).
    pub(crate) fn new(c: &Collective, send: u64, recv: u64, scratch: u64) -> Result<Ready> {
        let bad = |m: String| RuntimeError::Cuda(format!("plan: collective `{}`: {m}", c.node));
        if c.ranks == 0 || !c.bytes.is_multiple_of(c.ranks) {
            return Err(bad(format!("{} bytes over {} ranks", c.bytes, c.ranks)));
        }
        let (count, dtype, interleave) = match c.kind {
            CollectiveKind::AllReduce => {
                let dtype = reduce_type(c.dtype)
                    .ok_or_else(|| bad(format!("NCCL cannot sum {:?}", c.dtype)))?;
                (c.bytes / c.dtype.size().max(1), dtype, None)
            }
            // Gathered as bytes: any element type, no arithmetic.
            CollectiveKind::AllGather => {
                let part = c.bytes / c.ranks;
                let interleave = match c.outer {
                    0 | 1 => None,
                    outer if outer * c.chunk_bytes == part => Some((scratch, outer, c.chunk_bytes)),
                    outer => {
                        return Err(bad(format!(
                            "{outer} rows of {} bytes is not one rank's {part} bytes",
                            c.chunk_bytes
                        )))
                    }
                };
                (part, ncclDataType_t::ncclUint8, interleave)
            }
        };
        Ok(Ready {
            node: c.node.clone(),
            kind: c.kind,
            send,
            recv,
            count,
            dtype,
            ranks: c.ranks,
            interleave,
        })
    }

    /// The ranks it takes.
    pub(crate) fn ranks(&self) -> usize {
        self.ranks
    }

    /// Enqueues the collective on `stream` with rank `comm`'s communicator.
    pub(crate) fn launch(&self, comm: &RankComm, stream: &CudaStream) -> Result<()> {
        let what = || format!("{:?} `{}` on rank {}", self.kind, self.node, comm.rank);
        if comm.comms.aborted() {
            return Err(RuntimeError::Usage(format!(
                "{}: the ranks' communicators were aborted after a failure; load the \
                 model again",
                what()
            )));
        }
        let c = comm.comms.comms[comm.rank];
        let s = stream.cu_stream() as cudarc::nccl::sys::cudaStream_t;
        let nccl = |e: cudarc::nccl::result::NcclError| RuntimeError::Driver {
            what: what(),
            msg: format!("{e:?}"),
        };
        // SAFETY: the addresses are the plan's places of the step's input and output
        // (and the scratch buffer), sized by the plan for `count` elements per rank.
        unsafe {
            match (self.kind, self.interleave) {
                (CollectiveKind::AllReduce, _) => cudarc::nccl::result::all_reduce(
                    self.send as _,
                    self.recv as _,
                    self.count,
                    self.dtype,
                    ncclRedOp_t::ncclSum,
                    c,
                    s,
                )
                .map_err(nccl)?,
                (CollectiveKind::AllGather, None) => cudarc::nccl::result::all_gather(
                    self.send as _,
                    self.recv as _,
                    self.count,
                    self.dtype,
                    c,
                    s,
                )
                .map_err(nccl)?,
                (CollectiveKind::AllGather, Some((scratch, outer, chunk))) => {
                    cudarc::nccl::result::all_gather(
                        self.send as _,
                        scratch as _,
                        self.count,
                        self.dtype,
                        c,
                        s,
                    )
                    .map_err(nccl)?;
                    self.interleave(stream, scratch, outer, chunk)
                        .map_err(drv(what()))?;
                    return Ok(());
                }
            };
        }
        Ok(())
    }

    /// Scratch holds `[ranks][outer][chunk]`; the output wants `[outer][ranks][chunk]`:
    /// rank r's `outer` rows go `ranks * chunk` bytes apart from `recv + r * chunk`.
    fn interleave(
        &self,
        stream: &CudaStream,
        scratch: u64,
        outer: usize,
        chunk: usize,
    ) -> std::result::Result<(), cudarc::driver::DriverError> {
        use cudarc::driver::sys::{CUmemorytype, CUDA_MEMCPY2D};
        for r in 0..self.ranks {
            let copy = CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcHost: std::ptr::null(),
                srcDevice: scratch + (r * outer * chunk) as u64,
                srcArray: std::ptr::null_mut(),
                srcPitch: chunk,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
                dstHost: std::ptr::null_mut(),
                dstDevice: self.recv + (r * chunk) as u64,
                dstArray: std::ptr::null_mut(),
                dstPitch: self.ranks * chunk,
                WidthInBytes: chunk,
                Height: outer,
            };
            // SAFETY: source rows lie inside the scratch buffer (`ranks * outer * chunk`
            // bytes, the output's size), destination rows inside the output.
            unsafe { cudarc::driver::sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }
                .result()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gather(outer: usize, chunk_bytes: usize, bytes: usize) -> Collective {
        Collective {
            node: "g".into(),
            kind: CollectiveKind::AllGather,
            input: 0,
            output: 1,
            dtype: DType::F32,
            ranks: 2,
            bytes,
            outer,
            chunk_bytes,
        }
    }

    #[test]
    fn an_inner_axis_gather_interleaves_and_a_bad_layout_is_refused() {
        let r = Ready::new(&gather(3, 8, 48), 0, 0, 4096).expect("layout");
        assert_eq!((r.count, r.interleave), (24, Some((4096, 3, 8))));
        let outer = Ready::new(&gather(1, 24, 48), 0, 0, 0).expect("outer axis");
        assert_eq!((outer.count, outer.interleave), (24, None));
        assert!(Ready::new(&gather(3, 16, 48), 0, 0, 0).is_err());
        assert_eq!(scratch_bytes(&[&gather(3, 8, 48), &gather(1, 24, 96)]), 48);
    }

    #[test]
    fn a_sum_nccl_lacks_is_refused() {
        let mut c = gather(1, 8, 16);
        c.kind = CollectiveKind::AllReduce;
        c.dtype = DType::Bool;
        assert!(Ready::new(&c, 0, 0, 0).is_err());
        c.dtype = DType::BF16;
        assert_eq!(Ready::new(&c, 0, 0, 0).expect("bf16").count, 8);
    }
}
