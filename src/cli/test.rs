//! `gopt test`: runs ONNX-layout test cases (the backend conformance suite, the real
//! models) and compares with their reference outputs and, optionally, a manifest.

use super::{adapter_name, outln, DeviceArgs, EXIT_FAILED};
use anyhow::{Context, Result};
use gopt::testing::{self, CaseResult, ManifestCheck, Options, Status, Totals};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run test cases (model.onnx + test_data_set_N) and compare with reference outputs.
#[derive(clap::Args)]
#[command(
    long_about = "Each DIR is a case (a folder holding model.onnx and test_data_set_N/ with \
                  input_K.pb and output_K.pb) or a folder of cases (its immediate \
                  sub-folders that hold model.onnx). Every data set is run; input_K.pb \
                  feeds the K-th graph input and outputs are compared with output_K.pb by \
                  NumPy's allclose rule |got - want| <= atol + rtol*|want| (NaN matches NaN; \
                  dtypes and shapes must match exactly; integers and booleans exactly). The \
                  tolerance comes from --rtol/--atol, else the case's tolerance.json, else \
                  rtol 1e-3, atol 1e-7. Prints `PASS name`, `FAIL name: why` or \
                  `UNSUPPORTED name: why` per case (an op or mode gopt does not implement \
                  counts as skipped) and last `N passed, M failed, K skipped`. A case is \
                  PASS only if it ran on the backend asked for (with --backend auto, the \
                  one auto picked), compiled as asked: `FALLBACK name (why)` matched only \
                  on the CPU interpreter because that backend has no kernel for it, \
                  `UNOPTIMIZED name (why)` matched only interpreted as imported because \
                  its optimized compile failed; both count as skipped and are never \
                  written to --write-manifest. Exit code 1 \
                  if any case failed or a case of --manifest did not pass. Each case is \
                  compiled first (specialized to its inputs' bucket and optimized with \
                  the same options as `gopt compile`; --disable all interprets it as \
                  imported); with --precision bf16|fp16 (and tf32 on CUDA, whose GEMMs \
                  then round their inputs to tf32) float outputs are compared by \
                  relative L2 error <= 2e-2 instead (--rel-l2 sets another bound).",
    after_help = "Examples:\n  \
        gopt test tests/data/conformance\n  \
        gopt test tests/data/conformance/test_gemm*\n  \
        gopt test tests/data/models --rtol 1e-3 --atol 1e-4\n  \
        gopt test tests/data/conformance --manifest tests/conformance/cpu.manifest\n  \
        gopt test tests/data/models --precision bf16\n  \
        gopt test tests/data/models --disable fusion,layout\n  \
        gopt test tests/data/conformance --write-manifest tests/conformance/cpu.manifest\n  \
        gopt test tests/data/conformance --backend wgpu --manifest tests/conformance/wgpu.manifest\n  \
        gopt test tests/data/conformance --backend cuda --plan-only --manifest tests/conformance/cuda.manifest"
)]
pub struct Args {
    /// Case folders, or folders of case folders.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Relative tolerance (overrides tolerance.json).
    #[arg(long, value_name = "R")]
    pub rtol: Option<f64>,
    /// Absolute tolerance (overrides tolerance.json).
    #[arg(long, value_name = "A")]
    pub atol: Option<f64>,
    /// With --precision bf16|fp16 (and tf32 on CUDA): the largest relative L2 error of
    /// a float output against its fp32 reference (default 2e-2, the precision rules'
    /// tolerance).
    #[arg(long, value_name = "MAX", value_parser = parse_rel_l2)]
    pub rel_l2: Option<f64>,
    /// Print per-case results and totals as one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Cases run in parallel (default and most: one per core).
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Expected passes, one case name per line: also fail if a listed case does not pass.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// Write the sorted names of the passing cases to FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "plan_only")]
    pub write_manifest: Option<PathBuf>,
    /// Build each case's plan for --backend cuda or wgpu without running it, on any
    /// machine: CUDA kernels are compiled with NVRTC for sm_90 (the H200; NVRTC needed,
    /// no GPU), WGSL shaders validated by naga. A case whose plans all build is PLANNED,
    /// never PASS; with --manifest every listed case must be PLANNED.
    #[arg(long)]
    pub plan_only: bool,
    #[command(flatten)]
    pub opt: super::compile::OptArgs,
}

#[derive(Serialize)]
struct Report<'a> {
    cases: &'a [CaseResult],
    totals: Totals,
    pass_percent: f64,
    /// The cases that matched only on the CPU interpreter (not passes).
    fallback: Vec<&'a str>,
    /// The cases that matched only unoptimized (not passes).
    unoptimized: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    manifest: Option<&'a ManifestCheck>,
}

/// Runs `gopt test`.
pub fn main(args: &Args) -> Result<ExitCode> {
    let cases = testing::discover(&args.dirs)?;
    let listed = match &args.manifest {
        Some(m) => Some(testing::read_manifest(m).context("cannot read the manifest")?),
        None => None,
    };
    let mut pipeline = args.opt.options()?;
    if args.plan_only
        && !matches!(
            args.device.backend,
            super::BackendChoice::Only(gopt::Backend::Cuda | gopt::Backend::Wgpu)
        )
    {
        anyhow::bail!(
            "--plan-only builds a GPU backend's plans: add --backend cuda or --backend wgpu"
        );
    }
    let (candidates, why) = args.device.candidates();
    let backend = candidates[0];
    args.device.apply(&mut pipeline, backend)?;
    // `auto` runs every case on the first backend this machine has; a case that backend
    // has no kernel for runs on the CPU interpreter and is FALLBACK, not PASS.
    let fallback_cpu = candidates.len() > 1;
    // On stderr, like the manifest notes: stdout keeps one line per case and the totals.
    if !args.json {
        eprintln!(
            "backend: {}{}",
            backend.name(),
            adapter_name(&pipeline)
                .map(|a| format!(" [{a}]"))
                .unwrap_or_default()
        );
        for w in &why {
            eprintln!("  {w}");
        }
    }
    // Low-precision pipelines, and tf32 GEMMs on CUDA, are checked by relative L2
    // error against the fp32 references (the precision rules' stated tolerance).
    let tf32 = pipeline.get_backend() == gopt::Backend::Cuda && pipeline.tf32_gemms();
    let rel_l2 = (pipeline.get_config().low_precision().is_some() || tf32)
        .then(|| args.rel_l2.unwrap_or(2e-2));
    let opts = Options {
        rtol: args.rtol,
        atol: args.atol,
        jobs: args.jobs,
        pipeline: Some(pipeline),
        rel_l2,
        fallback_cpu,
        plan_only: args.plan_only,
    };
    let workers = testing::worker_threads(args.jobs);
    if let Some(j) = args.jobs.filter(|&j| j > workers) {
        eprintln!("note: -j {j} capped at {workers} (the number of cores)");
    }
    let json = args.json;
    let results = testing::run_cases(&cases, &opts, |r| {
        if !json {
            outln!("{r}");
        }
    });
    let totals = Totals::of(&results);
    let want = if args.plan_only {
        Status::Planned
    } else {
        Status::Pass
    };
    let check = listed.map(|l| testing::check_manifest_for(&results, &l, want));
    if let Some(path) = &args.write_manifest {
        testing::write_manifest(path, &results)?;
        eprintln!("wrote {} ({} passing cases)", path.display(), totals.passed);
    }
    if json {
        let named = |s: Status| {
            results
                .iter()
                .filter(|r| r.status == s)
                .map(|r| r.name.as_str())
                .collect()
        };
        let report = Report {
            cases: &results,
            totals,
            pass_percent: totals.pass_percent(),
            fallback: named(Status::Fallback),
            unoptimized: named(Status::Unoptimized),
            manifest: check.as_ref(),
        };
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if let Some(c) = &check {
            for (name, status, _) in &c.regressions {
                let not = if args.plan_only { "PLANNED" } else { "PASSING" };
                outln!("NOT {not} (listed in the manifest): {name} is {status}");
            }
            if !c.unlisted_passes.is_empty() {
                eprintln!(
                    "{} passing case(s) are not in the manifest (update it with \
                     --write-manifest): {}",
                    c.unlisted_passes.len(),
                    c.unlisted_passes.join(" ")
                );
            }
        }
        if totals.fallback + totals.unoptimized > 0 {
            eprintln!(
                "of the {} skipped: {} matched only on the CPU interpreter (FALLBACK), {} \
                 only unoptimized (UNOPTIMIZED); neither is a pass",
                totals.skipped, totals.fallback, totals.unoptimized
            );
        }
        outln!("{totals}");
    }
    let failed = totals.failed > 0 || check.as_ref().is_some_and(|c| !c.ok());
    Ok(if failed {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--rel-l2`: a finite bound above zero.
fn parse_rel_l2(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}`: expected a positive number such as 2e-2")),
    }
}
