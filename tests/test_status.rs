//! `gopt test` results that cannot claim more than was tested (issue 11): a case is PASS
//! only if it ran on the backend asked for, compiled as asked. One that matched only on
//! the CPU interpreter after the backend had no kernel for it is FALLBACK, one that
//! matched only after its optimized compile failed is UNOPTIMIZED; both count as skipped
//! in the closing line, are named in `--json`, and are never written to a manifest.
//! And `-j` beyond the core count is capped, with a note.
//!
//! The cases come from the generated conformance suite (tests/data/conformance, as
//! tests/conformance.rs).

use gopt::pipeline::Backend;
use gopt::testing::{self, run_case, Case, Options, Status, Totals};

mod common;
use common::cli::{gopt, root, scratch};

fn case(name: &str) -> Case {
    let dir = root().join("tests/data/conformance").join(name);
    assert!(
        dir.join("model.onnx").is_file(),
        "{} is missing: run scripts/test.sh, which generates the conformance cases",
        dir.display()
    );
    Case {
        name: name.into(),
        dir,
    }
}

/// A case whose optimized CPU compile fails (an If whose branches give f32[] and f32[1]:
/// no static type) while the interpreter runs it: it used to count as a PASS.
const UNOPTIMIZED_CASE: &str = "test_affine_grid_2d_align_corners_expanded";

/// A case the WGSL backend has no kernel for and the interpreter passes.
const NO_WGSL_CASE: &str = "test_ai_onnx_ml_binarizer";

#[test]
fn a_case_that_ran_unoptimized_is_not_a_pass() {
    let c = case(UNOPTIMIZED_CASE);
    // As imported, the interpreter passes it: the reference itself is fine.
    let interpreted = run_case(&c, &Options::default());
    assert_eq!(interpreted.status, Status::Pass, "{interpreted}");
    let cpu = Options {
        pipeline: Some(gopt::pipeline::Options::default()),
        ..Options::default()
    };
    let r = run_case(&c, &cpu);
    assert_eq!(r.status, Status::Unoptimized, "{r}");
    assert!(
        r.note
            .as_deref()
            .is_some_and(|n| n.starts_with("not optimized: ")),
        "{r}"
    );
    assert!(r.to_string().starts_with("UNOPTIMIZED "), "{r}");
    let totals = Totals::of(std::slice::from_ref(&r));
    assert_eq!(totals.to_string(), "0 passed, 0 failed, 1 skipped");
    assert_eq!((totals.unoptimized, totals.fallback), (1, 0));
    // Never written to a manifest, and a listed case that ran unoptimized regresses.
    let dir = scratch("unoptimized");
    let manifest = dir.join("m.manifest");
    testing::write_manifest(&manifest, std::slice::from_ref(&r)).expect("write");
    assert_eq!(std::fs::read_to_string(&manifest).expect("read"), "");
    let check = testing::check_manifest(std::slice::from_ref(&r), &[c.name.clone()]);
    assert!(!check.ok(), "{check:?}");
}

#[test]
fn a_case_that_fell_back_to_the_cpu_is_not_a_pass() {
    let c = case(NO_WGSL_CASE);
    let dev = gopt::wgpu::device(None).unwrap_or_else(|e| panic!("{e}"));
    let wgpu = |fallback_cpu| Options {
        pipeline: Some(
            gopt::pipeline::Options::new()
                .backend(Backend::Wgpu)
                .wgsl_f16(dev.adapter.f16),
        ),
        fallback_cpu,
        ..Options::default()
    };
    // Without the fallback, the backend's own result: no kernel, UNSUPPORTED.
    let r = run_case(&c, &wgpu(false));
    assert_eq!(r.status, Status::Unsupported, "{r}");
    let r = run_case(&c, &wgpu(true));
    assert_eq!(r.status, Status::Fallback, "{r}");
    assert!(r.to_string().starts_with("FALLBACK "), "{r}");
    assert!(
        r.note
            .as_deref()
            .is_some_and(|n| n.starts_with("ran on cpu: wgpu cannot: ")),
        "{r}"
    );
    let totals = Totals::of(std::slice::from_ref(&r));
    assert_eq!(totals.to_string(), "0 passed, 0 failed, 1 skipped");
    assert_eq!((totals.unoptimized, totals.fallback), (0, 1));
}

#[test]
fn the_command_counts_fallback_and_unoptimized_apart() {
    let dir = scratch("command");
    let manifest = dir.join("written.manifest");
    let fallback = case(NO_WGSL_CASE).dir.display().to_string();
    let unoptimized = case(UNOPTIMIZED_CASE).dir.display().to_string();
    // `auto` resolves to wgpu here (lavapipe in CI): the case it has no kernel for runs
    // on the CPU interpreter and is not a pass.
    let out = gopt(&[
        "test",
        &fallback,
        "--backend",
        "auto",
        "--write-manifest",
        &manifest.display().to_string(),
    ]);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("backend: wgpu"), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    assert!(
        lines[0].starts_with(&format!(
            "FALLBACK {NO_WGSL_CASE} (ran on cpu: wgpu cannot: "
        )),
        "{}",
        lines[0]
    );
    assert_eq!(lines[1], "0 passed, 0 failed, 1 skipped");
    assert_eq!(std::fs::read_to_string(&manifest).expect("written"), "");
    // On the CPU backend, the case whose optimized compile fails; named in --json.
    let out = gopt(&["test", &unoptimized, "--backend", "cpu", "--json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("--json is JSON");
    assert_eq!(v["cases"][0]["status"], "UNOPTIMIZED", "{v}");
    assert_eq!(v["unoptimized"][0], UNOPTIMIZED_CASE, "{v}");
    assert_eq!(v["totals"]["passed"], 0, "{v}");
    assert_eq!(v["totals"]["skipped"], 1, "{v}");
    assert_eq!(v["totals"]["unoptimized"], 1, "{v}");
}

#[test]
fn jobs_are_capped_at_the_core_count() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(testing::worker_threads(Some(100_000)), cores);
    assert_eq!(testing::worker_threads(Some(0)), 1);
    assert_eq!(testing::worker_threads(None), cores);
    let c = case("test_abs").dir.display().to_string();
    let out = gopt(&["test", &c, "--backend", "cpu", "-j", "100000"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "-j 100000 capped at {cores} (the number of cores)"
        )),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "PASS test_abs\n1 passed, 0 failed, 0 skipped\n");
}
