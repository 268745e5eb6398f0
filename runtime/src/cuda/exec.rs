//! Running a [`CudaPlan`]: the weights uploaded once, one arena for the bucket, every
//! GEMM prepared once (in tf32 when the plan was compiled for it, its algorithm chosen by
//! [`super::tune`]), and the whole step list captured into a CUDA graph on the first
//! run and replayed after (or enqueued step by step with `use_graph = false`, to
//! measure what the graph saves). A run copies the inputs into their arena slots,
//! replays, and copies the outputs back: one synchronization, at the end. Plans whose
//! kernels read indices get a one-word error buffer: zeroed by a memset at the start
//! of the steps (so inside the captured graph), raised by a kernel that finds an index
//! out of range, read back with the outputs; nonzero fails the run naming the node.

use super::blas::{self, Lt, Prepared};
use super::collective::{self, RankComm};
use super::device::{event_ms, launch_config, Device};
use super::modules::compile_kernels;
pub use super::modules::precompile;
use super::tune::{self, TuneOptions, TuneReport};
use super::{drv, memory};
use crate::host::from_bytes;
use crate::{Result, RuntimeError};
use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{
    CudaFunction, CudaGraph, CudaModule, CudaSlice, CudaStream, DevicePtr, PushKernelArg,
};
use gopt_codegen::cuda::plan::{CudaPlan, Place, Step};
use gopt_codegen::cuda::Kernel;
use gopt_codegen::plan::{index_error, keep_counted, status_words, takes_status, tensor_bytes};
use gopt_ir::Tensor;
use std::sync::Arc;

/// A strided copy of rows between two plans' values ([`Executable::copy_rows_from`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowCopy {
    /// Rows to copy.
    pub rows: usize,
    /// Bytes per row.
    pub width: usize,
    /// Bytes between the starts of consecutive source rows.
    pub src_pitch: usize,
    /// Bytes between the starts of consecutive destination rows.
    pub dst_pitch: usize,
}

/// Weights on the device, shared by every bucket of a model.
pub struct Weights {
    buf: CudaSlice<u8>,
    base: u64,
}

/// Checks that what loading `plan` allocates on the device — its arena, the cuBLASLt
/// workspace and, with `weights`, the weights blob still to upload — fits the device's
/// free memory and `flag` (`--memory-limit`): an error naming `what` (the bucket) and
/// How many times [`Executable::profile`] repeats a step inside the graph it times.
pub const PROFILE_REPEATS: usize = 20;

/// the bytes, before anything is allocated.
pub fn check_memory(
    dev: &Device,
    what: &str,
    plan: &CudaPlan,
    weights: bool,
    flag: Option<u64>,
) -> Result<()> {
    let limit = gopt_ir::limit::MemoryLimit::device(flag, free_bytes(dev)?);
    let mut plan = plan.clone();
    if !weights {
        plan.weights_bytes = 0;
    }
    plan.check_memory(what, None, blas::WORKSPACE as u128, &limit)
        .map_err(|e| match e {
            gopt_codegen::CodegenError::Memory(m) => RuntimeError::Memory(m),
            e => RuntimeError::Cuda(e.to_string()),
        })
}

/// The device's free memory in bytes.
fn free_bytes(dev: &Device) -> Result<u64> {
    let (free, _total) = dev
        .ctx
        .mem_get_info()
        .map_err(drv("reading the free device memory"))?;
    Ok(free as u64)
}

/// `Err` when `bytes` for `what` are more than the device has free.
fn check_free(dev: &Device, what: &str, bytes: usize) -> Result<()> {
    let limit = gopt_ir::limit::MemoryLimit::device(None, free_bytes(dev)?);
    limit
        .check(bytes as u128, || (what.to_string(), "on the GPU".into()))
        .map_err(RuntimeError::Memory)
}

impl Weights {
    /// Uploads a weights blob (refused when the device has not that much free).
    pub fn upload(dev: &Device, blob: &[u8]) -> Result<Arc<Weights>> {
        check_free(dev, "uploading the weights", blob.len())?;
        let buf = dev
            .stream
            .clone_htod(if blob.is_empty() { &[0u8][..] } else { blob })
            .map_err(drv("uploading the weights"))?;
        let base = buf.device_ptr(&dev.stream).0;
        // Plans run on their own streams: the weights must be there first.
        dev.stream
            .synchronize()
            .map_err(drv("uploading the weights"))?;
        memory::phase("weights")?;
        Ok(Arc::new(Weights { buf, base }))
    }

    /// Size on the device.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Device address of the blob's first byte.
    pub(crate) fn base(&self) -> u64 {
        self.base
    }
}

enum Ready {
    Kernel(usize),
    Gemm(Box<Prepared>, Option<usize>),
    Collective(Box<collective::Ready>),
}

/// A plan loaded on a GPU.
pub struct Executable {
    plan: CudaPlan,
    stream: Arc<CudaStream>,
    ctx: Arc<cudarc::driver::CudaContext>,
    _modules: Vec<Arc<CudaModule>>,
    funcs: Vec<CudaFunction>,
    args: Vec<Vec<u64>>,
    weights: Arc<Weights>,
    arena: CudaSlice<u8>,
    arena_base: u64,
    /// The index checks' error word and its address (plans with checks only).
    errors: Option<(CudaSlice<u32>, u64)>,
    lt: Lt,
    steps: Vec<Ready>,
    /// How each GEMM's algorithm was chosen.
    tuning: TuneReport,
    graph: Option<CudaGraph>,
    use_graph: bool,
    /// The inner-axis AllGathers' scratch buffer (plans with one only).
    _scratch: Option<CudaSlice<u8>>,
    /// A rank of a tensor-parallel model: its communicator ([`Executable::join`]).
    comm: Option<RankComm>,
}

impl Executable {
    /// Compiles the plan's kernels (NVRTC, through the disk cache), allocates the arena
    /// and prepares the GEMMs, their algorithms chosen as [`TuneOptions::from_env`] says.
    pub fn new(
        dev: &Device,
        plan: CudaPlan,
        weights: Arc<Weights>,
        use_graph: bool,
    ) -> Result<Executable> {
        Self::with_tuning(dev, plan, weights, use_graph, &TuneOptions::from_env())
    }

    /// [`Executable::new`], the GEMMs' algorithms chosen as `tuning` says (timed on the
    /// arena before any run, or the heuristic's first choice).
    pub fn with_tuning(
        dev: &Device,
        plan: CudaPlan,
        weights: Arc<Weights>,
        use_graph: bool,
        tuning: &TuneOptions,
    ) -> Result<Executable> {
        check_free(
            dev,
            "the plan's arena and cuBLASLt workspace",
            plan.arena_bytes.saturating_add(blas::WORKSPACE),
        )?;
        let (modules, funcs) = compile_kernels(dev, &plan.kernels)?;
        memory::phase("modules")?;
        let stream = dev.ctx.new_stream().map_err(drv("creating a stream"))?;
        let arena: CudaSlice<u8> = stream
            .alloc_zeros(plan.arena_bytes.max(256))
            .map_err(drv(format!("allocating a {} byte arena", plan.arena_bytes)))?;
        let arena_base = arena.device_ptr(&stream).0;
        memory::phase("arena")?;
        let lt = Lt::new(&stream)?;
        memory::phase("cublaslt")?;
        let ptr = |v: u32| tune::place(&plan, arena_base, weights.base, v);
        // The status buffer: the index checks' error word, then the counted outputs'
        // sizes; kernels that check indices or count an output take it last.
        let status = |k: &Kernel| takes_status(k.index_check.is_some(), &k.outputs, &plan.frame);
        let errors = if plan.kernels.iter().any(status) {
            let word: CudaSlice<u32> = stream
                .alloc_zeros(status_words(&plan.frame.outputs))
                .map_err(drv("allocating the status words"))?;
            let at = word.device_ptr(&stream).0;
            Some((word, at))
        } else {
            None
        };
        memory::phase("status")?;
        let mut args = Vec::with_capacity(plan.kernels.len());
        for k in &plan.kernels {
            let mut a = k
                .inputs
                .iter()
                .chain(&k.outputs)
                .map(|&v| ptr(v))
                .collect::<Result<Vec<u64>>>()?;
            if status(k) {
                a.extend(errors.as_ref().map(|e| e.1));
            }
            args.push(a);
        }
        let gathers: Vec<_> = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Collective(c) => Some(c),
                Step::Kernel(_) | Step::Gemm(_) => None,
            })
            .collect();
        let scratch = match collective::scratch_bytes(&gathers) {
            0 => None,
            n => Some(
                stream
                    .alloc_zeros::<u8>(n)
                    .map_err(drv("allocating the AllGather scratch"))?,
            ),
        };
        let scratch_at = scratch.as_ref().map_or(0, |s| s.device_ptr(&stream).0);
        let mut tuner = tune::Tuner::new(dev, &stream, tuning, (arena_base, arena.len()));
        let mut steps = Vec::with_capacity(plan.steps.len());
        for s in &plan.steps {
            steps.push(match s {
                Step::Kernel(k) => Ready::Kernel(*k),
                Step::Gemm(g) => {
                    let ptrs = tune::gemm_ptrs(&plan, g, arena_base, weights.base)?;
                    let mut p = blas::prepare(&lt, g, ptrs, plan.tf32)?;
                    tuner.choose(&lt, g, &mut p, plan.tf32)?;
                    Ready::Gemm(Box::new(p), g.post)
                }
                Step::Collective(c) => Ready::Collective(Box::new(collective::Ready::new(
                    c,
                    ptr(c.input)?,
                    ptr(c.output)?,
                    scratch_at,
                )?)),
            });
        }
        let tuning = tuner.finish()?;
        memory::phase("gemms")?;
        Ok(Executable {
            plan,
            stream,
            ctx: dev.ctx.clone(),
            _modules: modules,
            funcs,
            args,
            weights,
            arena,
            arena_base,
            errors,
            lt,
            steps,
            tuning,
            graph: None,
            use_graph,
            _scratch: scratch,
            comm: None,
        })
    }

    /// Makes this executable rank `comm.rank` of a tensor-parallel model: its collective
    /// steps run on `comm` (each must take as many ranks as `comm` has). Before this,
    /// a plan with collectives cannot run.
    pub fn join(&mut self, comm: RankComm) -> Result<()> {
        for s in &self.steps {
            if let Ready::Collective(c) = s {
                if c.ranks() != comm.comms.ranks() {
                    return Err(RuntimeError::Usage(format!(
                        "rank {}: the plan's collectives take {} ranks, the communicator has {}",
                        comm.rank,
                        c.ranks(),
                        comm.comms.ranks()
                    )));
                }
            }
        }
        self.comm = Some(comm);
        Ok(())
    }

    /// The plan it runs.
    pub fn plan(&self) -> &CudaPlan {
        &self.plan
    }

    /// How each GEMM's algorithm was chosen at load (plan order), and what it cost.
    pub fn gemm_tuning(&self) -> &TuneReport {
        &self.tuning
    }

    /// Device bytes this executable holds: arena, weights, cuBLASLt workspace.
    pub fn device_bytes(&self) -> usize {
        self.arena.len() + self.weights.bytes() + self.lt.workspace_bytes()
    }

    /// Launches one step: its kernel, or its GEMM and then its post kernel.
    fn launch_ready(&self, s: &Ready) -> Result<()> {
        match s {
            Ready::Kernel(k) => self.launch(*k),
            Ready::Gemm(g, post) => {
                g.launch(&self.lt, &self.stream)?;
                match post {
                    Some(k) => self.launch(*k),
                    None => Ok(()),
                }
            }
            Ready::Collective(c) => match &self.comm {
                Some(comm) => c.launch(comm, &self.stream),
                None => Err(RuntimeError::Usage(
                    "this plan is one rank of a tensor-parallel model (it has collective \
                     steps): run its artifact, `gopt run DIR`, which drives every rank"
                        .into(),
                )),
            },
        }
    }

    fn launch(&self, k: usize) -> Result<()> {
        let kernel = &self.plan.kernels[k];
        let mut b = self.stream.launch_builder(&self.funcs[k]);
        for p in &self.args[k] {
            b.arg(p);
        }
        // SAFETY: the kernel's parameters are its inputs then outputs, each a pointer
        // into the arena or the weights at the offset the plan gave the value, sized by
        // the same shapes the emitter used, then (with an index check) the error word.
        unsafe { b.launch(launch_config(kernel)) }
            .map(|_| ())
            .map_err(drv(format!(
                "launching {} (node `{}`)",
                kernel.name, kernel.node
            )))
    }

    /// Enqueues every step on the stream. With `sync` (`GOPT_CUDA_SYNC=1`, kernel by
    /// kernel only) each step is waited for, so an asynchronous fault names its step.
    fn enqueue(&self, sync: bool) -> Result<()> {
        if let Some((_, at)) = &self.errors {
            self.ctx
                .bind_to_thread()
                .map_err(drv("zeroing the index error word"))?;
            let bytes = 4 * status_words(&self.plan.frame.outputs);
            // SAFETY: `at` is the allocation of `bytes` bytes `errors` owns, for as long
            // as self.
            unsafe {
                cudarc::driver::result::memset_d8_async(*at, 0, bytes, self.stream.cu_stream())
            }
            .map_err(drv("zeroing the index error word"))?;
        }
        for (i, s) in self.steps.iter().enumerate() {
            self.launch_ready(s)?;
            if sync {
                let what = match &self.plan.steps[i] {
                    Step::Kernel(k) => format!(
                        "step {i}: kernel {} (node `{}`)",
                        self.plan.kernels[*k].name, self.plan.kernels[*k].node
                    ),
                    Step::Gemm(g) => format!("step {i}: GEMM `{}`", g.node),
                    Step::Collective(c) => format!("step {i}: collective `{}`", c.node),
                };
                self.stream.synchronize().map_err(drv(what))?;
            }
        }
        Ok(())
    }

    /// One execution on whatever the arena holds: a graph replay, or the steps.
    pub fn execute(&mut self) -> Result<()> {
        let _gpu = gpu_lock();
        self.execute_locked()
    }

    /// Captures the plan into its CUDA graph and uploads it without running it, so the
    /// first run is a replay like the others (a generation's first token is not made
    /// to wait for the capture). Nothing to do without a graph, or when captured.
    pub fn capture(&mut self) -> Result<()> {
        let _gpu = gpu_lock();
        self.capture_locked()
    }

    pub(crate) fn capture_locked(&mut self) -> Result<()> {
        if !self.use_graph || self.graph.is_some() {
            return Ok(());
        }
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(drv("starting the CUDA-graph capture"))?;
        let enq = self.enqueue(false);
        let graph = self
            .stream
            .end_capture(CUgraphInstantiate_flags(0))
            .map_err(drv("ending the CUDA-graph capture"));
        enq?;
        let graph = graph?.ok_or_else(|| RuntimeError::Driver {
            what: "capturing the plan".into(),
            msg: "the capture produced no graph".into(),
        })?;
        graph.upload().map_err(drv("uploading the CUDA graph"))?;
        self.graph = Some(graph);
        memory::phase("graph")
    }

    /// [`Executable::execute`] without taking [`gpu_lock`]: the tensor-parallel
    /// executor holds it once for all its ranks, whose collectives wait for each other.
    pub(crate) fn execute_locked(&mut self) -> Result<()> {
        if !self.use_graph {
            return self.enqueue(std::env::var_os("GOPT_CUDA_SYNC").is_some_and(|v| v == "1"));
        }
        self.capture_locked()?;
        match &self.graph {
            Some(g) => g.launch().map_err(drv("replaying the CUDA graph")),
            None => Ok(()),
        }
    }

    /// Copies `inputs` (the bucket's shapes, in order) into their slots.
    pub fn set_inputs(&mut self, inputs: &[Tensor]) -> Result<()> {
        if inputs.len() != self.plan.frame.inputs.len() {
            return Err(RuntimeError::Usage(format!(
                "the plan takes {} inputs, got {}",
                self.plan.frame.inputs.len(),
                inputs.len()
            )));
        }
        for (i, t) in inputs.iter().enumerate() {
            self.set_input(i, t)?;
        }
        Ok(())
    }

    /// Copies input `index` (the bucket's shape) into its slot, leaving the other
    /// inputs as they are: a generation step feeds its token and positions this way
    /// while the KV cache, an input updated in place, stays on the device.
    pub fn set_input(&mut self, index: usize, t: &Tensor) -> Result<()> {
        let (off, io) = self.input_slot(index)?;
        if t.dtype() != io.dtype || t.shape() != io.shape.as_slice() {
            return Err(RuntimeError::Usage(format!(
                "input `{}`: expected {} {:?}, got {} {:?}",
                io.name,
                io.dtype,
                io.shape,
                t.dtype(),
                t.shape()
            )));
        }
        let bytes = tensor_bytes(t);
        let mut dst = self.arena.slice_mut(off..off + bytes.len());
        self.stream
            .memcpy_htod(&bytes, &mut dst)
            .map_err(drv(format!("copying input `{}`", io.name)))
    }

    /// The arena offset and description of input `index`.
    fn input_slot(&self, index: usize) -> Result<(usize, gopt_codegen::plan::Io)> {
        let io = self.plan.frame.inputs.get(index).cloned().ok_or_else(|| {
            RuntimeError::Usage(format!(
                "the plan has {} inputs, not {}",
                self.plan.frame.inputs.len(),
                index + 1
            ))
        })?;
        match self.plan.places.get(&io.value).copied() {
            Some(Place::Arena(off)) => Ok((off, io)),
            _ => Err(RuntimeError::Cuda(format!(
                "plan: input `{}` has no arena slot",
                io.name
            ))),
        }
    }

    /// Sets every byte of input `index` to zero (a fresh KV cache).
    pub fn zero_input(&mut self, index: usize) -> Result<()> {
        let (off, io) = self.input_slot(index)?;
        let n = io.shape.iter().product::<usize>() * elem_size(io.dtype);
        let mut dst = self.arena.slice_mut(off..off + n.max(1));
        self.stream
            .memset_zeros(&mut dst)
            .map_err(drv(format!("zeroing input `{}`", io.name)))
    }

    /// Copies `rows` rows of `width` bytes from output `from` of `src` (rows `src_pitch`
    /// bytes apart) into input `to` of this plan (rows `dst_pitch` bytes apart), on the
    /// device: a prompt's keys and values written into the decode step's cache. `src`
    /// is synchronized first (the two plans run on streams of their own).
    pub fn copy_rows_from(
        &mut self,
        src: &Executable,
        from: usize,
        to: usize,
        rows: RowCopy,
    ) -> Result<()> {
        let out = src.plan.frame.outputs.get(from).cloned().ok_or_else(|| {
            RuntimeError::Usage(format!("the source plan has no output {}", from + 1))
        })?;
        let src_off = match src.plan.places.get(&out.value) {
            Some(Place::Arena(o)) => *o,
            _ => {
                return Err(RuntimeError::Cuda(format!(
                    "plan: output `{}` is not in the arena",
                    out.name
                )))
            }
        };
        let (dst_off, io) = self.input_slot(to)?;
        let src_len = out.shape.iter().product::<usize>() * elem_size(out.dtype);
        let dst_len = io.shape.iter().product::<usize>() * elem_size(io.dtype);
        let span = |pitch: usize| (rows.rows.max(1) - 1) * pitch + rows.width;
        if rows.rows > 0 && (span(rows.src_pitch) > src_len || span(rows.dst_pitch) > dst_len) {
            return Err(RuntimeError::Usage(format!(
                "copying {} rows of {} bytes from `{}` ({src_len} bytes) into `{}` ({dst_len} bytes) \
                 would leave them",
                rows.rows, rows.width, out.name, io.name
            )));
        }
        src.stream
            .synchronize()
            .map_err(drv("finishing the step before copying its output"))?;
        if rows.rows == 0 {
            return Ok(());
        }
        use cudarc::driver::sys::{CUmemorytype, CUDA_MEMCPY2D};
        let copy = CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: src.arena_base + src_off as u64,
            srcArray: std::ptr::null_mut(),
            srcPitch: rows.src_pitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: self.arena_base + dst_off as u64,
            dstArray: std::ptr::null_mut(),
            dstPitch: rows.dst_pitch,
            WidthInBytes: rows.width,
            Height: rows.rows,
        };
        self.ctx
            .bind_to_thread()
            .map_err(drv("binding the context to copy rows"))?;
        // SAFETY: both ranges were checked against their values' sizes above; the
        // arenas outlive the call (both executables are borrowed), and the copy is
        // ordered on this plan's stream before its next run.
        let r = unsafe { cudarc::driver::sys::cuMemcpy2DAsync_v2(&copy, self.stream.cu_stream()) };
        r.result()
            .map_err(drv(format!("copying `{}` into `{}`", out.name, io.name)))
    }

    /// Reads output `index` back (synchronizing the stream and checking the run's
    /// status word, as [`Executable::outputs`] does), or only the `rows` given of it:
    /// indices into the output seen as `[rows, last dim]` (the logits of the tokens
    /// that are sampled, not of the whole padded prompt). Counted outputs and outputs
    /// left in padded rows are read by [`Executable::outputs`] only.
    pub fn output(&self, index: usize, rows: Option<&[usize]>) -> Result<Tensor> {
        let io =
            self.plan.frame.outputs.get(index).cloned().ok_or_else(|| {
                RuntimeError::Usage(format!("the plan has no output {}", index + 1))
            })?;
        if io.count.is_some() || io.row_pitch.is_some() {
            return Err(RuntimeError::Usage(format!(
                "output `{}` is counted or padded: read it with the others",
                io.name
            )));
        }
        let Some(Place::Arena(off)) = self.plan.places.get(&io.value).copied() else {
            return Err(RuntimeError::Cuda(format!(
                "plan: output `{}` is not in the arena",
                io.name
            )));
        };
        let es = elem_size(io.dtype);
        let width = io.shape.last().copied().unwrap_or(1);
        let total: usize = io.shape.iter().product();
        let all: Vec<usize>;
        let rows = match rows {
            Some(r) => r,
            None => {
                all = (0..total / width.max(1)).collect();
                &all
            }
        };
        let mut host = vec![0u8; rows.len() * width * es];
        for (k, &r) in rows.iter().enumerate() {
            if (r + 1) * width > total {
                return Err(RuntimeError::Usage(format!(
                    "output `{}` has {} rows, not {}",
                    io.name,
                    total / width.max(1),
                    r + 1
                )));
            }
            let at = off + r * width * es;
            self.stream
                .memcpy_dtoh(
                    &self.arena.slice(at..at + width * es),
                    &mut host[k * width * es..(k + 1) * width * es],
                )
                .map_err(drv(format!("copying output `{}`", io.name)))?;
        }
        self.status()?;
        let shape = match rows.len() * width == total {
            true => io.shape.clone(),
            false => vec![rows.len(), width],
        };
        from_bytes(io.dtype, &shape, &host)
    }

    /// Waits for the stream and checks the run's status word.
    pub(crate) fn finish(&self) -> Result<()> {
        self.status().map(|_| ())
    }

    /// Reads the status words back, synchronizes the stream and fails when a kernel
    /// raised the index error word; the words (counted outputs' sizes) otherwise.
    fn status(&self) -> Result<Vec<u32>> {
        let mut words = vec![0u32; status_words(&self.plan.frame.outputs)];
        if let Some((word, _)) = &self.errors {
            self.stream
                .memcpy_dtoh(word, &mut words[..])
                .map_err(drv("copying the status words"))?;
        }
        self.stream
            .synchronize()
            .map_err(drv("running the plan (an asynchronous CUDA error)"))?;
        self.index_error(words[0])?;
        Ok(words)
    }

    /// `Err` naming the kernel whose index check raised `code` (0: none did).
    fn index_error(&self, code: u32) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        let checks = self
            .plan
            .kernels
            .iter()
            .filter_map(|k| Some((k.name.as_str(), k.node.as_str(), k.index_check.as_ref()?)));
        Err(RuntimeError::IndexOutOfRange(index_error(
            code, "CUDA", checks,
        )))
    }

    /// Copies the outputs back (synchronizing the stream).
    pub fn outputs(&self) -> Result<Vec<Tensor>> {
        let mut outs = Vec::with_capacity(self.plan.frame.outputs.len());
        for io in &self.plan.frame.outputs {
            let n = io.shape.iter().product::<usize>() * elem_size(io.dtype);
            // Rows left padded on the device: read them whole, keep each row's first
            // `cols` elements.
            let width = io.shape.last().copied().unwrap_or(1);
            let (cols, pitch) = match io.row_pitch {
                Some(p) if p > width && width > 0 => (width, p),
                _ => (1, 1),
            };
            let n_dev = n / cols * pitch;
            let mut host = vec![0u8; n_dev];
            let n = n_dev;
            match self.plan.places.get(&io.value) {
                Some(Place::Arena(off)) => self
                    .stream
                    .memcpy_dtoh(&self.arena.slice(*off..*off + n), &mut host)
                    .map_err(drv(format!("copying output `{}`", io.name)))?,
                Some(Place::Weight(off)) => self
                    .stream
                    .memcpy_dtoh(&self.weights.buf.slice(*off..*off + n), &mut host)
                    .map_err(drv(format!("copying output `{}`", io.name)))?,
                None => {
                    return Err(RuntimeError::Cuda(format!(
                        "plan: output `{}` has no place",
                        io.name
                    )))
                }
            }
            if pitch > cols {
                let (row, keep) = (pitch * elem_size(io.dtype), cols * elem_size(io.dtype));
                host = host.chunks(row).flat_map(|r| r[..keep].to_vec()).collect();
            }
            outs.push(from_bytes(io.dtype, &io.shape, &host)?);
        }
        let words = self.status()?;
        outs.into_iter()
            .zip(&self.plan.frame.outputs)
            .map(|(t, io)| keep_counted(io, t, &words).map_err(RuntimeError::Cuda))
            .collect()
    }

    /// A full run: inputs in, execute, outputs out.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let _gpu = gpu_lock();
        self.set_inputs(inputs)?;
        self.execute_locked()?;
        self.outputs()
    }

    /// Times `iters` executions after `warmup` ones, each between two CUDA events on
    /// the stream; returns milliseconds per execution, in order.
    pub fn time(&mut self, warmup: usize, iters: usize) -> Result<Vec<f64>> {
        let _gpu = gpu_lock();
        for _ in 0..warmup {
            self.execute_locked()?;
        }
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let mut events = Vec::with_capacity(iters);
        for _ in 0..iters {
            let start = self
                .ctx
                .new_event(flags)
                .map_err(drv("creating an event"))?;
            let end = self
                .ctx
                .new_event(flags)
                .map_err(drv("creating an event"))?;
            start
                .record(&self.stream)
                .map_err(drv("recording an event"))?;
            self.execute_locked()?;
            end.record(&self.stream)
                .map_err(drv("recording an event"))?;
            events.push((start, end));
        }
        self.stream
            .synchronize()
            .map_err(drv("running the plan (an asynchronous CUDA error)"))?;
        events
            .iter()
            .map(|(s, e)| {
                s.elapsed_ms(e)
                    .map(f64::from)
                    .map_err(drv("reading an event"))
            })
            .collect()
    }

    /// Times each step on its own, as it runs inside the bucket's CUDA graph: the step
    /// is captured [`PROFILE_REPEATS`] times in a row into a graph of its own, which is
    /// replayed between two CUDA events (`iters` times after one warm-up); the step's
    /// time is a replay's over the repeats, so neither the host's launch cost nor the
    /// events' own cost is in it. Returns each step's label, node, median milliseconds
    /// and blocks, in plan order. A repeated step reads what the previous repeat wrote
    /// where it works in place, so the arena holds garbage afterwards: run the plan
    /// again before reading outputs.
    pub fn profile(&mut self, iters: usize) -> Result<Vec<crate::StepTime>> {
        let _gpu = gpu_lock();
        self.enqueue(false)?;
        let mut samples: Vec<Vec<f64>> = Vec::with_capacity(self.steps.len());
        for (i, s) in self.steps.iter().enumerate() {
            self.stream
                .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .map_err(drv("starting a profile capture"))?;
            let enq = (0..PROFILE_REPEATS).try_for_each(|_| self.launch_ready(s));
            let graph = self
                .stream
                .end_capture(CUgraphInstantiate_flags(0))
                .map_err(drv("ending a profile capture"));
            enq?;
            let graph = graph?.ok_or_else(|| RuntimeError::Driver {
                what: format!("capturing step {i} to profile it"),
                msg: "the capture produced no graph".into(),
            })?;
            graph.launch().map_err(drv("replaying a profile graph"))?;
            let mut t = Vec::with_capacity(iters.max(1));
            for _ in 0..iters.max(1) {
                let ms = event_ms(&self.ctx, &self.stream, "profiling the plan", || {
                    graph.launch().map_err(drv("replaying a profile graph"))
                })?;
                t.push(ms / PROFILE_REPEATS as f64);
            }
            samples.push(t);
        }
        Ok(self
            .plan
            .steps
            .iter()
            .zip(samples)
            .map(|(s, mut t)| {
                t.sort_by(|a, b| a.total_cmp(b));
                let (label, node, blocks) = match s {
                    Step::Kernel(k) => {
                        let k = &self.plan.kernels[*k];
                        (
                            format!("{} `{}`", k.name, k.node),
                            k.node.clone(),
                            Some(u64::from(k.grid)),
                        )
                    }
                    Step::Gemm(g) => (
                        format!(
                            "GEMM {}x{}x{}{} `{}`",
                            g.m,
                            g.n,
                            g.k,
                            if g.batch > 1 {
                                format!(" x{}", g.batch)
                            } else {
                                String::new()
                            },
                            g.node
                        ),
                        g.node.clone(),
                        None,
                    ),
                    Step::Collective(c) => {
                        (format!("{:?} `{}`", c.kind, c.node), c.node.clone(), None)
                    }
                };
                crate::StepTime {
                    label,
                    node,
                    ms: t[t.len() / 2],
                    blocks,
                }
            })
            .collect())
    }

    /// Base device address of the arena (for diagnostics).
    pub fn arena_base(&self) -> u64 {
        self.arena_base
    }
}

/// One plan runs on the GPU at a time in a process: a CUDA-graph capture must not see
/// another thread's allocations, frees or synchronizations, and one GPU gains nothing
/// from interleaving two plans' launches.
///
/// Creating and dropping executables also take it (through [`gpu_lock`] in the
/// facade): a module load, allocation or free in one thread while another captures
/// made cuBLASLt's captured launches fail in `gopt test -j`.
pub fn gpu_lock() -> std::sync::MutexGuard<'static, ()> {
    static GPU: std::sync::Mutex<()> = std::sync::Mutex::new(());
    GPU.lock().unwrap_or_else(|e| e.into_inner())
}

fn elem_size(dt: gopt_ir::DType) -> usize {
    dt.size().max(1)
}
