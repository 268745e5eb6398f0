//! The test-case runner behind `gopt test` and the conformance and model integration
//! tests. A case is a folder in the ONNX backend test layout: `model.onnx` plus
//! `test_data_set_N/{input_K,output_K}.pb`, optionally `tolerance.json`
//! (`{"rtol": .., "atol": ..}`). Every data set of a case is run and compared; a case
//! that gopt cannot run because something is not implemented is UNSUPPORTED (skipped),
//! any other error or mismatch is a FAIL. A case is PASS only if every data set ran on
//! the backend asked for, compiled as asked: one that matched only after falling back to
//! the CPU interpreter (FALLBACK) or after its optimized compile failed (UNOPTIMIZED) is
//! counted apart, with the skipped cases, so a result never claims more than was tested.
//! Cases run in parallel, each behind a panic guard, and results come back in case order.

pub mod compare;
pub mod manifest;

pub use compare::{compare, Tolerance};
pub use manifest::{
    check_manifest, check_manifest_for, read_manifest, write_manifest, ManifestCheck,
};

use crate::error::{GoptError, Result};
use crate::{load_model, run_cpu};
use gopt_ir::Tensor;
use rayon::prelude::*;
use serde::Serialize;
use std::cell::RefCell;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Once};
use std::time::Instant;

/// Stack size of the runner's worker threads (sub-graphs recurse through the
/// interpreter).
const WORKER_STACK_BYTES: usize = 64 << 20;

/// One test case: a folder holding `model.onnx`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Case {
    /// The folder's name (what manifests list).
    pub name: String,
    /// The folder.
    pub dir: PathBuf,
}

/// Runner settings.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Relative tolerance overriding the cases' `tolerance.json` and the default.
    pub rtol: Option<f64>,
    /// Absolute tolerance overriding the cases' `tolerance.json` and the default.
    pub atol: Option<f64>,
    /// Worker threads (`None`: one per core; more than the cores are capped, see
    /// [`worker_threads`]).
    pub jobs: Option<usize>,
    /// Compile each case with these options first (`None`: interpret it as imported).
    pub pipeline: Option<crate::pipeline::Options>,
    /// Compare float outputs by relative L2 error instead (low-precision pipelines).
    pub rel_l2: Option<f64>,
    /// A case the pipeline's backend has no kernel for runs on the CPU interpreter and is
    /// FALLBACK, not PASS (`--backend auto`); otherwise another backend never falls back.
    pub fallback_cpu: bool,
    /// Build each case's plan for the pipeline's GPU backend (CUDA kernels compiled
    /// with NVRTC for sm_90) without running it: such a case is PLANNED, never PASS.
    pub plan_only: bool,
}

/// The architecture `--plan-only` compiles CUDA kernels for: the H200's.
pub const PLAN_ONLY_ARCH: &str = "sm_90";

/// Outcome of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Every data set matched its reference outputs.
    Pass,
    /// A mismatch, an error that is not "unsupported", or a panic.
    Fail,
    /// gopt does not implement something the case needs (counted as skipped).
    Unsupported,
    /// Every data set matched, but only on the CPU interpreter after the backend asked
    /// for had no kernel for it (`--backend auto`; counted as skipped, never a pass).
    Fallback,
    /// Every data set matched, but only interpreted as imported after the optimized
    /// compile failed (counted as skipped, never a pass).
    Unoptimized,
    /// `--plan-only`: every data set's plan built for the backend (CUDA kernels compiled
    /// with NVRTC), nothing run (never a pass).
    Planned,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Unsupported => "UNSUPPORTED",
            Status::Fallback => "FALLBACK",
            Status::Unoptimized => "UNOPTIMIZED",
            Status::Planned => "PLANNED",
        })
    }
}

/// The result of one case.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// Outcome.
    pub status: Status,
    /// Why it failed or was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Data sets that were run and matched.
    pub data_sets_passed: usize,
    /// Wall-clock time of the case, in seconds.
    pub seconds: f64,
    /// Set when a data set did not run as asked: why it fell back to the CPU interpreter
    /// (FALLBACK) or why its optimized compile failed (UNOPTIMIZED).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl fmt::Display for CaseResult {
    /// `PASS name`, `FAIL name: why`, `UNSUPPORTED name: why`, or `FALLBACK name (why)`
    /// and `UNOPTIMIZED name (why)` for a case that matched only not as asked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.name)?;
        if let Some(n) = &self.note {
            write!(f, " ({})", n.replace('\n', " "))?;
        }
        match &self.message {
            Some(m) => write!(f, ": {}", m.replace('\n', " ")),
            None => Ok(()),
        }
    }
}

/// Counts of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Cases that did not pass or fail: unsupported, fallback and unoptimized ones.
    pub skipped: usize,
    /// Of the skipped, the cases that matched only on the CPU interpreter (FALLBACK).
    pub fallback: usize,
    /// Of the skipped, the cases that matched only unoptimized (UNOPTIMIZED).
    pub unoptimized: usize,
    /// Cases whose plans built, not run (`--plan-only`).
    pub planned: usize,
}

impl Totals {
    /// Counts the results.
    pub fn of(results: &[CaseResult]) -> Totals {
        let mut t = Totals::default();
        for r in results {
            match r.status {
                Status::Pass => t.passed += 1,
                Status::Fail => t.failed += 1,
                Status::Unsupported => t.skipped += 1,
                Status::Fallback => {
                    t.skipped += 1;
                    t.fallback += 1;
                }
                Status::Unoptimized => {
                    t.skipped += 1;
                    t.unoptimized += 1;
                }
                Status::Planned => t.planned += 1,
            }
        }
        t
    }

    /// All cases.
    pub fn total(&self) -> usize {
        self.passed + self.failed + self.skipped + self.planned
    }

    /// Passed cases as a percentage of all cases (0 when there are none).
    pub fn pass_percent(&self) -> f64 {
        if self.total() == 0 {
            0.0
        } else {
            100.0 * self.passed as f64 / self.total() as f64
        }
    }
}

impl fmt::Display for Totals {
    /// `N passed, M failed, K skipped` (`, P planned` after a `--plan-only` run).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )?;
        if self.planned > 0 {
            write!(f, ", {} planned", self.planned)?;
        }
        Ok(())
    }
}

/// Finds the cases in `dirs`: a folder holding `model.onnx` is a case, any other folder
/// contributes its immediate sub-folders that hold one (sorted by name). A folder with
/// no case at all is an error, so a typo does not pass as an empty run.
pub fn discover(dirs: &[PathBuf]) -> Result<Vec<Case>> {
    let mut cases: Vec<Case> = Vec::new();
    for dir in dirs {
        let meta = std::fs::metadata(dir).map_err(|e| GoptError::io(dir, e))?;
        if !meta.is_dir() {
            return Err(GoptError::Inputs(format!(
                "{} is not a folder (give a case folder holding model.onnx, or a folder of them)",
                dir.display()
            )));
        }
        let found = if is_case(dir) {
            vec![case_at(dir)]
        } else {
            let entries = std::fs::read_dir(dir).map_err(|e| GoptError::io(dir, e))?;
            let mut sub: Vec<Case> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| is_case(p))
                .map(|p| case_at(&p))
                .collect();
            sub.sort_by(|a, b| a.name.cmp(&b.name));
            sub
        };
        if found.is_empty() {
            return Err(GoptError::Inputs(format!(
                "{} holds no test case (no model.onnx in it or in its immediate sub-folders)",
                dir.display()
            )));
        }
        for c in found {
            if !cases.iter().any(|k| k.dir == c.dir) {
                cases.push(c);
            }
        }
    }
    Ok(cases)
}

fn is_case(dir: &Path) -> bool {
    dir.join("model.onnx").is_file()
}

fn case_at(dir: &Path) -> Case {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    Case {
        name,
        dir: dir.to_path_buf(),
    }
}

/// Runs all `cases` in parallel and returns their results in case order; `on_result` is
/// called for each result as soon as it and every earlier one are done.
pub fn run_cases(
    cases: &[Case],
    opts: &Options,
    mut on_result: impl FnMut(&CaseResult),
) -> Vec<CaseResult> {
    install_panic_capture();
    let builder = rayon::ThreadPoolBuilder::new()
        .stack_size(WORKER_STACK_BYTES)
        .num_threads(worker_threads(opts.jobs));
    let pool = builder.build().ok();
    let (tx, rx) = mpsc::channel::<(usize, CaseResult)>();
    let mut slots: Vec<Option<CaseResult>> = vec![None; cases.len()];
    let mut done = Vec::with_capacity(cases.len());
    std::thread::scope(|s| {
        let pool = pool.as_ref();
        s.spawn(move || {
            let work = || {
                cases
                    .par_iter()
                    .enumerate()
                    .for_each_with(tx, |tx, (i, c)| {
                        // The receiver lives until every sender is gone.
                        let _ = tx.send((i, run_case(c, opts)));
                    })
            };
            match pool {
                Some(p) => p.install(work),
                None => work(),
            }
        });
        for (i, r) in rx {
            slots[i] = Some(r);
            while let Some(r) = slots.get_mut(done.len()).and_then(Option::take) {
                on_result(&r);
                done.push(r);
            }
        }
    });
    done
}

/// The worker threads a run uses for `jobs`: one per core by default, at least 1, and
/// never more than the cores (each worker reserves a 64 MiB stack, and more threads
/// than cores only add contention: `-j 100000` must not start 100,000 threads).
pub fn worker_threads(jobs: Option<usize>) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    jobs.unwrap_or(cores).clamp(1, cores)
}

/// Runs one case behind a panic guard: a panic is a FAIL whose message starts with
/// `panic:` (a bug to fix, but it must not stop the other cases).
pub fn run_case(case: &Case, opts: &Options) -> CaseResult {
    let start = Instant::now();
    let mut passed = 0usize;
    let mut degraded = None;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        IN_CASE.with(|c| *c.borrow_mut() = Some(None));
        run_case_inner(case, opts, &mut passed, &mut degraded)
    }));
    let captured = IN_CASE.with(|c| c.borrow_mut().take()).flatten();
    let note = degraded.as_ref().map(|d: &Degraded| d.why().to_string());
    let (status, message) = match outcome {
        Ok(Ok(())) if opts.plan_only => (Status::Planned, None),
        Ok(Ok(())) => match degraded {
            None => (Status::Pass, None),
            Some(Degraded::Fallback(_)) => (Status::Fallback, None),
            Some(Degraded::Unoptimized(_)) => (Status::Unoptimized, None),
        },
        Ok(Err(Outcome::Fail(m))) => (Status::Fail, Some(m)),
        Ok(Err(Outcome::Unsupported(m))) => (Status::Unsupported, Some(m)),
        Err(payload) => {
            let msg = captured.unwrap_or_else(|| panic_text(payload.as_ref()));
            (Status::Fail, Some(format!("panic: {msg}")))
        }
    };
    CaseResult {
        name: case.name.clone(),
        status,
        message,
        data_sets_passed: passed,
        seconds: start.elapsed().as_secs_f64(),
        note,
    }
}

/// How a data set that matched did not run as asked (the first one a case hit).
enum Degraded {
    /// It ran on the CPU interpreter: the backend asked for has no kernel for it.
    Fallback(String),
    /// It ran interpreted as imported: the optimized compile failed.
    Unoptimized(String),
}

impl Degraded {
    fn why(&self) -> &str {
        match self {
            Degraded::Fallback(w) | Degraded::Unoptimized(w) => w,
        }
    }
}

/// Why a case did not pass.
enum Outcome {
    Fail(String),
    Unsupported(String),
}

impl Outcome {
    /// Classifies a library error, with `context` (which file or data set) prepended.
    fn from_error(context: &str, e: GoptError) -> Outcome {
        let msg = if context.is_empty() {
            e.to_string()
        } else {
            format!("{context}: {e}")
        };
        if e.is_unsupported() {
            Outcome::Unsupported(msg)
        } else {
            Outcome::Fail(msg)
        }
    }
}

/// Runs one data set: compiled with the pipeline options when given; on the CPU backend a
/// model whose compile fails (e.g. its shapes need values only known at run time) is
/// interpreted as imported and marked UNOPTIMIZED; with `fallback_cpu` a model the
/// backend has no kernel for is interpreted and marked FALLBACK. Optimizer failures are
/// failures.
fn run_set(
    model: &crate::Imported,
    inputs: &[Tensor],
    opts: &Options,
    degraded: &mut Option<Degraded>,
) -> crate::Result<Vec<Tensor>> {
    let Some(p) = &opts.pipeline else {
        return run_cpu(model, inputs);
    };
    match crate::pipeline::run(model, inputs, p) {
        Ok(o) => Ok(o.outputs),
        Err(e @ GoptError::Passes(_)) => Err(e),
        Err(e @ (GoptError::Codegen(_) | GoptError::Runtime(_)))
            if opts.fallback_cpu && p.get_backend() != crate::pipeline::Backend::Cpu =>
        {
            let why = format!("ran on cpu: {} cannot: {e}", p.get_backend().name());
            degraded.get_or_insert(Degraded::Fallback(why));
            run_cpu(model, inputs)
        }
        // Another backend never falls back to the interpreter: its result must be its own.
        Err(e) if p.get_backend() != crate::pipeline::Backend::Cpu => Err(e),
        Err(e) => {
            if gopt_ir::interp::check_inputs(&model.model.graph, inputs).is_err() {
                return Err(e);
            }
            degraded.get_or_insert(Degraded::Unoptimized(format!("not optimized: {e}")));
            run_cpu(model, inputs)
        }
    }
}

/// Builds one data set's plan for the pipeline's backend without running it (the CUDA
/// kernels compiled with NVRTC for [`PLAN_ONLY_ARCH`]).
fn plan_set(model: &crate::Imported, inputs: &[Tensor], opts: &Options) -> crate::Result<()> {
    let p = match &opts.pipeline {
        Some(p) if p.get_backend() != crate::pipeline::Backend::Cpu => p,
        _ => {
            return Err(GoptError::Usage(
                "--plan-only builds a GPU backend's plan: use --backend cuda or wgpu".into(),
            ))
        }
    };
    crate::Compiled::new(model, p)?.check_plan(inputs, PLAN_ONLY_ARCH)
}

fn run_case_inner(
    case: &Case,
    opts: &Options,
    passed: &mut usize,
    degraded: &mut Option<Degraded>,
) -> Result<(), Outcome> {
    let tol = tolerance(case, opts).map_err(Outcome::Fail)?;
    let model = load_model(&case.dir.join("model.onnx")).map_err(|e| Outcome::from_error("", e))?;
    let sets = numbered(&case.dir, "test_data_set_", "").map_err(Outcome::Fail)?;
    if sets.is_empty() {
        return Err(Outcome::Fail(format!(
            "no test_data_set_N folder in {}",
            case.dir.display()
        )));
    }
    for set in &sets {
        let set_name = set
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let inputs = read_tensors(set, "input_").map_err(|e| Outcome::from_error(&set_name, e))?;
        if opts.plan_only {
            plan_set(&model, &inputs, opts).map_err(|e| Outcome::from_error(&set_name, e))?;
            *passed += 1;
            continue;
        }
        let want = read_tensors(set, "output_").map_err(|e| Outcome::from_error(&set_name, e))?;
        let got = run_set(&model, &inputs, opts, degraded)
            .map_err(|e| Outcome::from_error(&set_name, e))?;
        if got.len() != want.len() {
            return Err(Outcome::Fail(format!(
                "{set_name}: the model gave {} outputs, the data set has {}",
                got.len(),
                want.len()
            )));
        }
        let names = crate::output_names(&model.model.graph);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let r = match opts.rel_l2 {
                Some(l2) if w.dtype().is_float() => compare::compare_rel_l2(g, w, l2),
                _ => compare(g, w, tol),
            };
            if let Err(m) = r {
                let name = names.get(k).map(String::as_str).unwrap_or("?");
                return Err(Outcome::Fail(format!(
                    "{set_name}: output {k} `{name}`: {m}"
                )));
            }
        }
        *passed += 1;
    }
    Ok(())
}

/// The case's tolerance: the options' overrides, else `tolerance.json`, else the default.
fn tolerance(case: &Case, opts: &Options) -> Result<Tolerance, String> {
    let mut tol = Tolerance::DEFAULT;
    let path = case.dir.join("tolerance.json");
    if path.is_file() {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        tol = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(r) = opts.rtol {
        tol.rtol = r;
    }
    if let Some(a) = opts.atol {
        tol.atol = a;
    }
    Ok(tol)
}

/// Reads `<prefix>K.pb` for K = 0, 1, ... from `dir`.
fn read_tensors(dir: &Path, prefix: &str) -> Result<Vec<Tensor>> {
    let files = numbered(dir, prefix, ".pb").map_err(GoptError::Inputs)?;
    files
        .iter()
        .map(|f| Ok(gopt_frontends::read_tensor_file(f)?.1))
        .collect()
}

/// Entries of `dir` named `<prefix>N<suffix>`, sorted by N; N must run 0, 1, 2, ...
fn numbered(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut found: Vec<(usize, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name
                .strip_prefix(prefix)?
                .strip_suffix(suffix)?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .collect();
    found.sort();
    for (i, (n, _)) in found.iter().enumerate() {
        if *n != i {
            return Err(format!(
                "{}: {prefix}{i}{suffix} is missing (found {prefix}{n}{suffix})",
                dir.display()
            ));
        }
    }
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

thread_local! {
    /// `Some` while this thread runs a case; holds the message of a panic raised in it.
    static IN_CASE: RefCell<Option<Option<String>>> = const { RefCell::new(None) };
}

/// Installs (once per process) a panic hook that, on a thread running a case, records
/// the message and location instead of printing them; elsewhere it defers to the hook
/// that was installed before.
fn install_panic_capture() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let text = match info.location() {
                Some(l) => format!(
                    "{} at {}:{}",
                    panic_text(info.payload()),
                    l.file(),
                    l.line()
                ),
                None => panic_text(info.payload()),
            };
            let captured = IN_CASE
                .try_with(|c| match c.try_borrow_mut() {
                    Ok(mut slot) => match slot.as_mut() {
                        Some(msg) => {
                            *msg = Some(text.clone());
                            true
                        }
                        None => false,
                    },
                    Err(_) => false,
                })
                .unwrap_or(false);
            if !captured {
                previous(info);
            }
        }));
    });
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string payload)".into()
    }
}
