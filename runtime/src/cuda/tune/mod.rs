//! GEMM choice by measurement. cuBLASLt's heuristic orders its candidates by an
//! estimate, and its first is not always the fastest: on the H200, BERT-base batch 32's
//! FFN GEMM (4096×3072×768 bf16, bias+GELU) took 47 µs with it while the FFN2 GEMM of the
//! same FLOPs took 31 µs. When a plan is loaded on a GPU, each distinct GEMM problem has
//! its heuristic candidates (split-K configurations among them) timed on the step's own
//! descriptors and pointers — the arena is scratch before the first run, and outputs
//! never alias weights — and the fastest is kept when it beats the heuristic's first by
//! more than [`MARGIN`]. The choice goes into the on-disk cache ([`cache`]),
//! so the next load reads it back, checked by `cublasLtMatmulAlgoCheck`, without timing:
//! same choices, no time spent. `GOPT_GEMM_TUNE=0` ([`TuneOptions::measure`] false)
//! keeps the heuristic's first choice, as does a machine without a GPU (nothing loads).
//! Each GEMM's choice is a [`GemmChoice`], gathered in the load's [`TuneReport`]
//! (`report.rs`).

pub mod cache;
mod report;

pub use report::{GemmChoice, Source, TuneReport};

use super::blas::{self, Lt, Prepared, Ptrs};
use super::{drv, Device, Weights};
use crate::{Result, RuntimeError};
use cache::{Entry, GpuId};
use cudarc::cublaslt::sys;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use gopt_codegen::cuda::gemm::{Epilogue, Gemm};
use gopt_codegen::cuda::plan::{CudaPlan, Place, Step};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The environment switch: `GOPT_GEMM_TUNE=0` keeps the heuristic's first choice.
pub const ENV: &str = "GOPT_GEMM_TUNE";

/// How much faster than the heuristic's first a candidate must be to replace it (a
/// fraction of the first's time): closer is timing noise.
pub const MARGIN: f64 = 0.02;

/// Untimed launches of each candidate first.
const WARMUP: usize = 2;
/// Timed batches of each candidate; its time is the fastest batch's per launch.
const BATCHES: usize = 5;
/// Launches per timed batch.
const PER_BATCH: usize = 4;

/// Bytes the arena is filled with while candidates are timed (never all-zero operands,
/// whose products draw less power and run faster than a model's).
const FILL: u8 = 0x3c;

/// Whether and where GEMM choices are measured and cached.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Time the heuristic's candidates (`false`: its first choice, no cache read or
    /// written).
    pub measure: bool,
    /// Where the cache files are (`None`: no cache, every load measures).
    pub cache_dir: Option<PathBuf>,
}

impl TuneOptions {
    /// Measuring unless `GOPT_GEMM_TUNE` is `0` (or `off`, `false`, `no`), with the cache
    /// in [`cache::cache_dir`].
    pub fn from_env() -> TuneOptions {
        let off = std::env::var(ENV)
            .map(|v| matches!(v.trim(), "0" | "off" | "false" | "no"))
            .unwrap_or(false);
        TuneOptions {
            measure: !off,
            cache_dir: cache::cache_dir(),
        }
    }

    /// The heuristic's first choice, as without a GPU to time on.
    pub fn heuristic() -> TuneOptions {
        TuneOptions {
            measure: false,
            cache_dir: None,
        }
    }
}

/// A choice settled for one problem during a load: the algorithm and its record.
struct Settled {
    algo: sys::cublasLtMatmulAlgo_t,
    choice: GemmChoice,
}

/// Chooses the GEMM algorithms of one load, step by step, then writes the cache.
pub(crate) struct Tuner {
    opts: TuneOptions,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    gpu: GpuId,
    path: Option<PathBuf>,
    cached: BTreeMap<String, Entry>,
    fresh: BTreeMap<String, Entry>,
    settled: BTreeMap<String, Settled>,
    /// The arena: where outputs may be written while timing (base, bytes).
    scratch: (u64, usize),
    filled: bool,
    choices: Vec<GemmChoice>,
    notes: Vec<String>,
    spent: Duration,
}

impl Tuner {
    /// A tuner for the plan whose arena is `scratch` (base, bytes) on `stream`, reading
    /// the cache file of `dev` now. Call after [`Lt::new`] (cuBLASLt is then loaded).
    pub(crate) fn new(
        dev: &Device,
        stream: &Arc<CudaStream>,
        opts: &TuneOptions,
        scratch: (u64, usize),
    ) -> Tuner {
        let t = Instant::now();
        // SAFETY: cuBLASLt was found and loaded by `Lt::new`; the call reads a constant.
        let cublaslt = unsafe { sys::cublasLtGetVersion() };
        let gpu = GpuId {
            name: dev.name.clone(),
            arch: dev.arch.to_string(),
            cublaslt,
        };
        let path = match opts.measure {
            true => opts.cache_dir.as_ref().map(|d| cache::path(d, &gpu)),
            false => None,
        };
        let (cached, note) = match &path {
            Some(p) => cache::load(p, &gpu),
            None => (BTreeMap::new(), None),
        };
        Tuner {
            opts: opts.clone(),
            ctx: dev.ctx.clone(),
            stream: stream.clone(),
            gpu,
            path,
            cached,
            fresh: BTreeMap::new(),
            settled: BTreeMap::new(),
            scratch,
            filled: false,
            choices: Vec::new(),
            notes: note.into_iter().collect(),
            spent: t.elapsed(),
        }
    }

    /// Chooses `p`'s algorithm (prepared from `g`, in tf32 math or not): the problem's
    /// choice made earlier in this load, the cache's, the fastest candidate, or the
    /// heuristic's first. `Err` only for a CUDA failure while timing.
    pub(crate) fn choose(
        &mut self,
        lib: &Lt,
        g: &Gemm,
        p: &mut Prepared,
        tf32: bool,
    ) -> Result<()> {
        let t = Instant::now();
        let r = self.choose_timed(lib, g, p, tf32);
        self.spent += t.elapsed();
        r
    }

    fn choose_timed(&mut self, lib: &Lt, g: &Gemm, p: &mut Prepared, tf32: bool) -> Result<()> {
        let tf32_math =
            blas::compute_type(g, tf32) == sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32;
        let key = cache::key(g, tf32_math, &p.ptrs(), lib.workspace_bytes());
        if let Some(s) = self.settled.get(&key) {
            p.set_algo(s.algo);
            self.choices.push(GemmChoice {
                node: g.node.clone(),
                ..s.choice.clone()
            });
            return Ok(());
        }
        let n = p.candidates().len();
        let record = |index: usize, algo: &sys::cublasLtMatmulAlgo_t, source: Source| {
            let cfg = blas::algo_config(algo);
            GemmChoice {
                node: g.node.clone(),
                shape: label(g, tf32_math),
                key: key.clone(),
                index,
                candidates: n,
                tile: cfg.tile,
                stages: cfg.stages,
                split_k: cfg.split_k,
                us: None,
                heuristic_us: None,
                source,
            }
        };
        // `prepare` fails without a candidate, so there is always a first.
        let Some(&first) = p.candidates().first() else {
            return Ok(());
        };
        let (algo, choice) = if !self.opts.measure {
            (first, record(0, &first, Source::Heuristic))
        } else if let Some((algo, e)) = self.cached_choice(lib, &key, p) {
            let mut c = record(e.index, &algo, Source::Cache);
            c.candidates = e.candidates;
            c.us = Some(e.us);
            c.heuristic_us = e.heuristic_us;
            (algo, c)
        } else if !self.holds(p.ptrs()) {
            self.notes.push(format!(
                "GEMM `{}`: its output is not in the arena, so it was not timed (the \
                 heuristic's first choice)",
                g.node
            ));
            (first, record(0, &first, Source::Heuristic))
        } else {
            self.fill()?;
            let cands = p.candidates().to_vec();
            let mut times = Vec::with_capacity(cands.len());
            for algo in &cands {
                times.push(self.time(lib, p, algo)?);
            }
            match pick(&times) {
                None => {
                    self.notes.push(format!(
                        "GEMM `{}`: none of its {n} candidates ran while timing (the \
                         heuristic's first choice)",
                        g.node
                    ));
                    (first, record(0, &first, Source::Heuristic))
                }
                Some((i, us)) => {
                    let algo = cands[i];
                    let mut c = record(i, &algo, Source::Measured);
                    c.us = Some(cache::round_us(us));
                    c.heuristic_us = times[0].map(cache::round_us);
                    self.fresh.insert(
                        key.clone(),
                        Entry {
                            algo: cache::algo_to_hex(&algo.data),
                            index: i,
                            candidates: n,
                            us: cache::round_us(us),
                            heuristic_us: c.heuristic_us,
                            tile: c.tile,
                            stages: c.stages,
                            split_k: c.split_k,
                        },
                    );
                    (algo, c)
                }
            }
        };
        p.set_algo(algo);
        self.choices.push(choice.clone());
        self.settled.insert(key, Settled { algo, choice });
        Ok(())
    }

    /// The cached algorithm for `key`, when cuBLASLt accepts it for `p` (a note says
    /// when it does not: the problem is timed again and the entry replaced).
    fn cached_choice(
        &mut self,
        lib: &Lt,
        key: &str,
        p: &Prepared,
    ) -> Option<(sys::cublasLtMatmulAlgo_t, Entry)> {
        let e = self.cached.get(key)?;
        let algo = cache::algo_from_hex(&e.algo).map(|data| sys::cublasLtMatmulAlgo_t { data });
        match algo {
            Some(a) if p.check(lib, &a) => Some((a, e.clone())),
            _ => {
                self.notes.push(format!(
                    "GEMM `{}`: the cached algorithm is not valid for it any more; timed again",
                    p.node()
                ));
                None
            }
        }
    }

    /// Whether `ptrs`' output starts inside the arena (safe to overwrite before a run).
    fn holds(&self, ptrs: Ptrs) -> bool {
        let (base, len) = self.scratch;
        ptrs.d >= base && ptrs.d < base.saturating_add(len as u64)
    }

    /// Fills the arena with [`FILL`] bytes, once.
    fn fill(&mut self) -> Result<()> {
        if !self.filled {
            self.memset(FILL, "filling the arena to time the GEMMs")?;
            self.filled = true;
        }
        Ok(())
    }

    fn memset(&self, byte: u8, what: &str) -> Result<()> {
        let (base, len) = self.scratch;
        self.ctx.bind_to_thread().map_err(drv(what))?;
        // SAFETY: `scratch` is the arena allocation (base, bytes), alive for the whole
        // load, and nothing has run on it yet.
        unsafe { cudarc::driver::result::memset_d8_async(base, byte, len, self.stream.cu_stream()) }
            .map_err(drv(what))
    }

    /// `algo`'s time per launch on `p`, µs: the fastest of [`BATCHES`] batches of
    /// [`PER_BATCH`] launches after [`WARMUP`]; `None` when cuBLASLt refuses to launch it.
    fn time(
        &self,
        lib: &Lt,
        p: &Prepared,
        algo: &sys::cublasLtMatmulAlgo_t,
    ) -> Result<Option<f64>> {
        for _ in 0..WARMUP {
            if p.launch_with(lib, &self.stream, algo).is_err() {
                return Ok(None);
            }
        }
        let what = || format!("timing GEMM `{}`'s candidates", p.node());
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let mut events = Vec::with_capacity(BATCHES + 1);
        for b in 0..=BATCHES {
            let e = self.ctx.new_event(flags).map_err(drv(what()))?;
            e.record(&self.stream).map_err(drv(what()))?;
            events.push(e);
            if b < BATCHES {
                for _ in 0..PER_BATCH {
                    if p.launch_with(lib, &self.stream, algo).is_err() {
                        return Ok(None);
                    }
                }
            }
        }
        let last = events.last().ok_or_else(|| RuntimeError::Cuda(what()))?;
        last.synchronize()
            .map_err(drv(format!("{} (an asynchronous CUDA error)", what())))?;
        let mut best = f64::INFINITY;
        for pair in events.windows(2) {
            let ms = pair[0].elapsed_ms(&pair[1]).map_err(drv(what()))?;
            best = best.min(f64::from(ms) * 1e3 / PER_BATCH as f64);
        }
        Ok(best.is_finite().then_some(best))
    }

    /// Puts the arena back to zeros when it was filled, writes the cache when something
    /// was timed, and returns the load's choices.
    pub(crate) fn finish(mut self) -> Result<TuneReport> {
        let t = Instant::now();
        if self.filled {
            self.memset(0, "zeroing the arena after timing the GEMMs")?;
            self.stream
                .synchronize()
                .map_err(drv("timing the GEMMs (an asynchronous CUDA error)"))?;
        }
        if let (Some(p), false) = (&self.path, self.fresh.is_empty()) {
            if let Err(e) = cache::save(p, &self.gpu, &self.fresh) {
                self.notes.push(format!(
                    "cannot write the GEMM cache {}: {e} (the next load times again)",
                    p.display()
                ));
            }
        }
        self.spent += t.elapsed();
        let count = |f: &dyn Fn(&Settled) -> bool| self.settled.values().filter(|s| f(s)).count();
        let changed = count(&|s| s.choice.index != 0);
        let (mut first, mut chosen) = (0.0, 0.0);
        for c in self.choices.iter().filter(|c| c.index != 0) {
            if let (Some(us), Some(h)) = (c.us, c.heuristic_us) {
                first += h;
                chosen += us;
            }
        }
        Ok(TuneReport {
            gpu: self.gpu.describe(),
            measure: self.opts.measure,
            shapes: self.settled.len(),
            changed,
            speedup: (chosen > 0.0).then(|| first / chosen),
            cache_hits: count(&|s| s.choice.source == Source::Cache),
            measured: count(&|s| s.choice.source == Source::Measured),
            ms: self.spent.as_secs_f64() * 1e3,
            cache_file: self.path.as_ref().map(|p| p.display().to_string()),
            choices: self.choices,
            notes: self.notes,
        })
    }
}

/// The candidate to keep from their times (`None`: it did not run): the fastest, when it
/// beats the heuristic's first (index 0) by more than [`MARGIN`], else the first; ties go
/// to the lower index. `None` when none ran.
fn pick(times: &[Option<f64>]) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    for (i, t) in times.iter().enumerate() {
        if let Some(t) = *t {
            if best.is_none_or(|(_, b)| t < b) {
                best = Some((i, t));
            }
        }
    }
    match (times.first().copied().flatten(), best) {
        (Some(first), Some((_, b))) if b >= first * (1.0 - MARGIN) => Some((0, first)),
        (_, best) => best,
    }
}

/// `4096x3072x768 bf16 +bias gelu_tanh`, `64x64x32 x12 f16->f32 tf32 +residual`.
fn label(g: &Gemm, tf32_math: bool) -> String {
    let mut s = format!("{}x{}x{}", g.m, g.n, g.k);
    if g.batch > 1 {
        s += &format!(" x{}", g.batch);
    }
    s += &format!(" {}", g.ab_dtype);
    if g.d_dtype != g.ab_dtype {
        s += &format!("->{}", g.d_dtype);
    }
    if tf32_math {
        s += " tf32";
    }
    if g.bias.is_some() {
        s += " +bias";
    }
    match g.epilogue {
        Epilogue::None => {}
        Epilogue::Relu => s += " relu",
        Epilogue::GeluTanh => s += " gelu_tanh",
    }
    if g.residual.is_some() {
        s += " +residual";
    }
    s
}

/// The device address of value `v` of `plan`: in the arena at `arena`, or the weights
/// at `weights`.
pub(crate) fn place(plan: &CudaPlan, arena: u64, weights: u64, v: u32) -> Result<u64> {
    match plan.places.get(&v) {
        Some(Place::Arena(o)) => Ok(arena + *o as u64),
        Some(Place::Weight(o)) => Ok(weights + *o as u64),
        None => Err(RuntimeError::Cuda(format!(
            "plan: value {v} has no place (a corrupt or mismatched plan)"
        ))),
    }
}

/// The device addresses of GEMM `g`'s operands in `plan`, whose arena is at `arena`
/// and weights at `weights` (shared by loading a plan and by [`tune_plan`]).
pub(crate) fn gemm_ptrs(plan: &CudaPlan, g: &Gemm, arena: u64, weights: u64) -> Result<Ptrs> {
    let ptr = |v: u32| place(plan, arena, weights, v);
    Ok(Ptrs {
        a: ptr(g.a)?,
        b: ptr(g.b)?,
        c: g.residual.map(ptr).transpose()?,
        d: ptr(g.out)?,
        bias: g.bias.map(ptr).transpose()?,
    })
}

/// Chooses the GEMM algorithms of `plan` on `dev` as loading it would — same
/// descriptors, same pointer alignments, same cache — without its kernels, on an arena
/// of its own freed after: `gopt compile` records the choices in the artifact and leaves
/// them in the cache for the loads to come. Hold [`super::gpu_lock`] around it.
pub fn tune_plan(
    dev: &Device,
    plan: &CudaPlan,
    weights: &Weights,
    opts: &TuneOptions,
) -> Result<TuneReport> {
    if !plan.steps.iter().any(|s| matches!(s, Step::Gemm(_))) {
        return Ok(TuneReport {
            gpu: dev.name.clone(),
            measure: opts.measure,
            ..TuneReport::default()
        });
    }
    super::check_memory(dev, "timing the plan's GEMMs", plan, false, None)?;
    let stream = dev.ctx.new_stream().map_err(drv("creating a stream"))?;
    let arena: CudaSlice<u8> = stream
        .alloc_zeros(plan.arena_bytes.max(256))
        .map_err(drv(format!("allocating a {} byte arena", plan.arena_bytes)))?;
    let base = arena.device_ptr(&stream).0;
    let lt = Lt::new(&stream)?;
    let mut tuner = Tuner::new(dev, &stream, opts, (base, arena.len()));
    for s in &plan.steps {
        match s {
            Step::Kernel(_) | Step::Collective(_) => {}
            Step::Gemm(g) => {
                let ptrs = gemm_ptrs(plan, g, base, weights.base())?;
                let mut p = blas::prepare(&lt, g, ptrs, plan.tf32)?;
                tuner.choose(&lt, g, &mut p, plan.tf32)?;
            }
        }
    }
    let report = tuner.finish()?;
    stream
        .synchronize()
        .map_err(drv("timing the plan's GEMMs (an asynchronous CUDA error)"))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_stays_unless_a_candidate_beats_it_by_the_margin() {
        // 1.5% faster: noise, the first stays.
        assert_eq!(pick(&[Some(100.0), Some(98.5)]), Some((0, 100.0)));
        // 3% faster: replaced.
        assert_eq!(
            pick(&[Some(100.0), Some(97.0), Some(99.0)]),
            Some((1, 97.0))
        );
        // Ties between the others go to the lower index.
        assert_eq!(
            pick(&[Some(100.0), Some(90.0), Some(90.0)]),
            Some((1, 90.0))
        );
        // The first could not run: the fastest that did.
        assert_eq!(pick(&[None, Some(50.0), Some(40.0)]), Some((2, 40.0)));
        assert_eq!(pick(&[None, None]), None);
        assert_eq!(pick(&[]), None);
        assert_eq!(pick(&[Some(10.0)]), Some((0, 10.0)));
    }

    #[test]
    fn the_heuristic_options_neither_measure_nor_cache() {
        let h = TuneOptions::heuristic();
        assert!(!h.measure && h.cache_dir.is_none());
    }
}
