//! The GPU itself: opening it (after checking the driver and NVRTC exist, since cudarc
//! panics otherwise), NVRTC with the on-disk PTX cache, and single-kernel launches and
//! timing for the kernel tests. Whole plans run in [`super::exec`].

use super::drv;
use crate::host::{from_bytes, to_bytes};
use crate::{Result, RuntimeError};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};
use gopt_codegen::cuda::Kernel;
use gopt_ir::{DType, Tensor};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Milliseconds the work `enqueue` puts on `stream` takes, between two CUDA events
/// (waits for the second; `what` names the work in an asynchronous error).
pub(crate) fn event_ms(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    what: &str,
    enqueue: impl FnOnce() -> Result<()>,
) -> Result<f64> {
    let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let start = ctx.new_event(flags).map_err(drv("creating an event"))?;
    let end = ctx.new_event(flags).map_err(drv("creating an event"))?;
    start.record(stream).map_err(drv("recording an event"))?;
    enqueue()?;
    end.record(stream).map_err(drv("recording an event"))?;
    end.synchronize()
        .map_err(drv(format!("{what} (an asynchronous CUDA error)")))?;
    Ok(f64::from(
        start.elapsed_ms(&end).map_err(drv("reading an event"))?,
    ))
}

/// One GPU, its context and a stream.
pub struct Device {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    /// `sm_XY` of the device.
    pub arch: &'static str,
    /// The device's name.
    pub name: String,
}

impl Device {
    /// Opens GPU 0, after checking the driver and NVRTC libraries exist (cudarc panics
    /// when they do not).
    pub fn open() -> Result<Device> {
        Self::open_ordinal(0)
    }

    /// Opens GPU `ordinal` (a tensor-parallel rank's), as [`Device::open`] does GPU 0.
    pub fn open_ordinal(ordinal: usize) -> Result<Device> {
        // SAFETY: these only try to load the shared libraries.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(RuntimeError::NoCuda("driver"));
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(RuntimeError::NoCuda("NVRTC"));
        }
        let ctx = CudaContext::new(ordinal).map_err(drv(format!("opening GPU {ordinal}")))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(drv("reading the compute capability"))?;
        let name = ctx.name().map_err(drv("reading the device name"))?;
        let stream = ctx.default_stream();
        Ok(Device {
            ctx,
            stream,
            arch: arch_name(major, minor),
            name,
        })
    }

    /// Compiles a module for this device (CUDA headers from `GOPT_CUDA_INCLUDE`, else
    /// `/usr/local/cuda/include`), through the PTX cache (see [`ptx_cache_dir`]), and
    /// loads it.
    pub fn compile(&self, what: &str, src: &str) -> Result<Arc<CudaModule>> {
        let ptx = self.ptx(what, src)?;
        self.ctx
            .load_module(ptx)
            .map_err(drv(format!("loading module {what}")))
    }

    /// NVRTC's PTX for `src` on this device, from the cache when it is there (no GPU
    /// call: safe to run while another thread uses the GPU).
    pub fn ptx(&self, what: &str, src: &str) -> Result<Ptx> {
        ptx_for(self.arch, what, src)
    }

    /// Uploads a tensor's bytes.
    pub fn upload(&self, t: &Tensor) -> Result<CudaSlice<u8>> {
        let bytes = to_bytes(t);
        self.stream
            .clone_htod(&bytes)
            .map_err(drv("uploading a tensor"))
    }

    /// Runs one kernel of `module` on `inputs` (the kernel's input parameters, in order)
    /// and returns its outputs, of the given dtypes and shapes (the parameters after the
    /// inputs).
    pub fn run_kernel(
        &self,
        module: &Arc<CudaModule>,
        kernel: &Kernel,
        inputs: &[&Tensor],
        outs: &[(DType, Vec<usize>)],
    ) -> Result<Vec<Tensor>> {
        let f: CudaFunction = module
            .load_function(&kernel.name)
            .map_err(drv(format!("finding kernel {}", kernel.name)))?;
        super::modules::allow_shared(&f, kernel)?;
        let bufs: Vec<CudaSlice<u8>> = inputs
            .iter()
            .map(|t| self.upload(t))
            .collect::<Result<_>>()?;
        let mut obufs: Vec<CudaSlice<u8>> = Vec::with_capacity(outs.len());
        for (dt, shape) in outs {
            let n = shape.iter().product::<usize>() * elem_size(*dt);
            obufs.push(
                self.stream
                    .alloc_zeros(n.max(1))
                    .map_err(drv("allocating an output"))?,
            );
        }
        // A kernel that checks indices takes the error word after its outputs.
        let mut word: Option<CudaSlice<u32>> = match &kernel.index_check {
            Some(_) => Some(
                self.stream
                    .alloc_zeros(1)
                    .map_err(drv("allocating the index error word"))?,
            ),
            None => None,
        };
        let mut b = self.stream.launch_builder(&f);
        for buf in &bufs {
            b.arg(buf);
        }
        for o in &mut obufs {
            b.arg(o);
        }
        if let Some(w) = &mut word {
            b.arg(w);
        }
        // SAFETY: the kernel's parameters are exactly its tensor inputs then its outputs,
        // each a device buffer of the size the emitter assumed, then (with an index
        // check) the one-word error buffer.
        unsafe { b.launch(launch_config(kernel)) }
            .map_err(drv(format!("launching {}", kernel.name)))?;
        self.stream
            .synchronize()
            .map_err(drv(format!("running {}", kernel.name)))?;
        if let (Some(c), Some(w)) = (&kernel.index_check, &word) {
            let code: Vec<u32> = self
                .stream
                .clone_dtoh(w)
                .map_err(drv("downloading the index error word"))?;
            if code.first().is_some_and(|&x| x != 0) {
                let checks = [(kernel.name.as_str(), kernel.node.as_str(), c)];
                return Err(RuntimeError::IndexOutOfRange(
                    gopt_codegen::plan::index_error(code[0], "CUDA", checks),
                ));
            }
        }
        outs.iter()
            .zip(&obufs)
            .map(|((dt, shape), o)| {
                let n = shape.iter().product::<usize>() * elem_size(*dt);
                let host: Vec<u8> = self
                    .stream
                    .clone_dtoh(o)
                    .map_err(drv("downloading an output"))?;
                from_bytes(*dt, shape, &host[..n])
            })
            .collect()
    }
}

/// The launch shape the emitter chose for `k`.
pub fn launch_config(k: &Kernel) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (k.grid.max(1), 1, 1),
        block_dim: (k.block.max(32), 1, 1),
        shared_mem_bytes: k.shared_mem,
    }
}

/// Timing of repeated launches of one kernel.
#[derive(Clone, Debug)]
pub struct Timing {
    /// Median time per launch over the timed batches, µs.
    pub median_us: f64,
    /// Fastest batch's time per launch, µs.
    pub min_us: f64,
}

impl Device {
    /// Times `kernel` on device-resident random-free inputs (zeros of the given shapes):
    /// warm-up, then `batches` batches of `per_batch` launches between CUDA events.
    pub fn time_kernel(
        &self,
        module: &Arc<CudaModule>,
        kernel: &Kernel,
        inputs: &[(DType, Vec<usize>)],
        out: (DType, &[usize]),
        batches: usize,
        per_batch: usize,
    ) -> Result<Timing> {
        let f: CudaFunction = module
            .load_function(&kernel.name)
            .map_err(drv(format!("finding kernel {}", kernel.name)))?;
        super::modules::allow_shared(&f, kernel)?;
        let mut bufs: Vec<CudaSlice<u8>> = Vec::new();
        for (dt, shape) in inputs {
            let n: usize = shape.iter().product::<usize>() * elem_size(*dt);
            // Ones-like bytes (0x3c) rather than zeros: never an all-zero input.
            let host = vec![0x3cu8; n.max(1)];
            bufs.push(
                self.stream
                    .clone_htod(&host)
                    .map_err(drv("uploading an input"))?,
            );
        }
        let n: usize = out.1.iter().product::<usize>() * elem_size(out.0);
        let mut o: CudaSlice<u8> = self
            .stream
            .alloc_zeros(n.max(1))
            .map_err(drv("allocating an output"))?;
        let cfg = launch_config(kernel);
        let launch = |o: &mut CudaSlice<u8>| -> Result<()> {
            let mut b = self.stream.launch_builder(&f);
            for buf in &bufs {
                b.arg(buf);
            }
            b.arg(o);
            // SAFETY: as in `run_kernel`: tensor inputs then the output, sized as emitted.
            unsafe { b.launch(cfg) }
                .map(|_| ())
                .map_err(drv(format!("launching {}", kernel.name)))
        };
        for _ in 0..per_batch.max(3) {
            launch(&mut o)?;
        }
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut per_launch = Vec::with_capacity(batches);
        for _ in 0..batches.max(1) {
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
            for _ in 0..per_batch.max(1) {
                launch(&mut o)?;
            }
            end.record(&self.stream)
                .map_err(drv("recording an event"))?;
            end.synchronize()
                .map_err(drv(format!("running {}", kernel.name)))?;
            let ms = start.elapsed_ms(&end).map_err(drv("reading an event"))?;
            per_launch.push(f64::from(ms) * 1e3 / per_batch.max(1) as f64);
        }
        per_launch.sort_by(|a, b| a.total_cmp(b));
        Ok(Timing {
            median_us: per_launch[per_launch.len() / 2],
            min_us: per_launch[0],
        })
    }
}

/// NVRTC's PTX for `src` on architecture `arch` (`sm_90`), from the on-disk cache when
/// it is there (CUDA headers from `GOPT_CUDA_INCLUDE`, else `/usr/local/cuda/include`).
/// Needs NVRTC but no GPU: `gopt test --plan-only` compiles plans with it on machines
/// without one.
pub fn ptx_for(arch: &'static str, what: &str, src: &str) -> Result<Ptx> {
    // SAFETY: only tries to load the shared library (cudarc panics when it is absent).
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(RuntimeError::NoCuda("NVRTC"));
    }
    let include =
        std::env::var("GOPT_CUDA_INCLUDE").unwrap_or_else(|_| "/usr/local/cuda/include".into());
    let key = format!("{}\n{}\n{}\n--std=c++17\n", nvrtc_version(), arch, include);
    let cached =
        ptx_cache_dir().map(|d| d.join(format!("{:016x}", fnv1a(key.as_bytes(), src.as_bytes()))));
    let hit = cached.as_ref().and_then(|p| {
        let keyed = std::fs::read_to_string(p.with_extension("cu")).ok()?;
        (keyed.strip_prefix(key.as_str())? == src)
            .then(|| std::fs::read_to_string(p.with_extension("ptx")).ok())
            .flatten()
    });
    if let Some(text) = hit {
        return Ok(Ptx::from_src(text));
    }
    let opts = CompileOptions {
        arch: Some(arch),
        include_paths: vec![include],
        options: vec!["--std=c++17".into()],
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(src, opts).map_err(|e| RuntimeError::Compile {
        what: what.to_string(),
        log: format!("{e:?}"),
    })?;
    if let Some(p) = &cached {
        // A cache that cannot be written only costs the next compile.
        let _ = store(p, &format!("{key}{src}"), &ptx.to_src());
    }
    Ok(ptx)
}

/// `sm_XY` as NVRTC wants it (a `'static` string: one per architecture, interned).
fn arch_name(major: i32, minor: i32) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let name = format!("sm_{major}{minor}");
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == name) {
        return n;
    }
    let n: &'static str = Box::leak(name.into_boxed_str());
    names.push(n);
    n
}

/// Where compiled PTX is kept: `$GOPT_CACHE_DIR`, else `$XDG_CACHE_HOME/gopt/ptx`, else
/// `~/.cache/gopt/ptx`. Entries are keyed by a hash of the source, the architecture, the
/// NVRTC version and the options, and the key text is stored beside the PTX and compared
/// in full, so a hash collision is a miss, never a wrong module.
pub fn ptx_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("GOPT_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("gopt").join("ptx"))
}

fn nvrtc_version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC was found by `Device::open`; the call only writes two ints.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    format!("nvrtc {major}.{minor}")
}

fn fnv1a(a: &[u8], b: &[u8]) -> u64 {
    a.iter().chain(b).fold(0xcbf29ce484222325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100000001b3)
    })
}

fn store(p: &Path, key: &str, ptx: &str) -> std::io::Result<()> {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = p.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, ptx)?;
    std::fs::rename(&tmp, p.with_extension("ptx"))?;
    std::fs::write(&tmp, key)?;
    std::fs::rename(&tmp, p.with_extension("cu"))
}

fn elem_size(dt: DType) -> usize {
    match dt {
        DType::Bool => 1,
        d => d.size(),
    }
}
