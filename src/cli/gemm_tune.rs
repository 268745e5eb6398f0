//! The GEMM choices in the CLI's reports: `gopt compile --target cuda` on a machine with
//! a GPU times each bucket's cuBLASLt candidates (or reads them from the cache) so the
//! artifact's `report.json` records them and `--explain` lists them; `gopt bench` prints
//! the summary of the bucket it loaded. They stay out of `report.md`, which `plan.json`
//! hashes: measured times would make two compiles' artifacts differ. The choosing itself
//! is the runtime's (`gopt::runtime::cuda::tune`).

use super::outln;
use gopt::runtime::cuda::TuneReport;

/// What `compile` says about the GEMM choices when it could not make them here.
pub const NO_GPU: &str = "no GPU here: each GEMM's cuBLASLt algorithm is chosen when the \
    plan is loaded on one (its candidates timed, or the heuristic's first choice with \
    GOPT_GEMM_TUNE=0 or --no-gemm-tune)";

/// Each bucket's GEMM choices on this machine's GPU (`None` per bucket without a CUDA
/// plan), or why there are none: no GPU, tuning switched off, or a failure (which
/// never fails the compile: the choice is then made at load).
pub fn tune(compiled: &gopt::Compiled) -> (Vec<Option<TuneReport>>, Option<String>) {
    let none = || vec![None; compiled.buckets().len()];
    if !compiled.options().tune_options().measure {
        return (
            none(),
            Some(
                "GEMM tuning off (GOPT_GEMM_TUNE=0 or --no-gemm-tune): nothing timed here; a \
                 load with tuning off too keeps cuBLASLt's heuristic's first choice"
                    .into(),
            ),
        );
    }
    if gopt::cuda::device().is_err() {
        return (none(), Some(NO_GPU.into()));
    }
    match compiled.tune_gemms() {
        Ok(r) => (r, None),
        Err(e) => (
            none(),
            Some(format!(
                "GEMM tuning failed here ({e}): each GEMM's algorithm is chosen when the \
                 plan is loaded"
            )),
        ),
    }
}

/// The lines a bucket's choices print as: the summary, and with `explain` one line per
/// distinct GEMM and the notes.
pub fn lines(r: &TuneReport, explain: bool) -> Vec<String> {
    let mut out = vec![format!("{} on {}", r.summary_line(), r.gpu)];
    if explain {
        out.extend(
            r.distinct()
                .iter()
                .map(|(c, n)| format!("  {}", c.line(*n))),
        );
        out.extend(r.notes.iter().map(|n| format!("  note: {n}")));
    }
    out
}

/// Prints [`lines`], indented by `indent` (nothing for a plan without GEMMs).
pub fn print(r: &TuneReport, explain: bool, indent: &str) {
    if r.choices.is_empty() {
        return;
    }
    for l in lines(r, explain) {
        outln!("{indent}{l}");
    }
}
