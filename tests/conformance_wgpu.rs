//! The ONNX backend node conformance cases compiled to WGSL and run through wgpu (issue
//! 5; lavapipe in CI), checked against tests/conformance/wgpu.manifest (and
//! wgpu-pending.manifest: cases that pass here and have not run on the H200 yet) like
//! the CPU manifest: a listed case that does not pass fails this test, and passing cases that
//! are not listed are printed so the manifest can be updated:
//!
//! ```text
//! cargo run --release -- test tests/data/conformance --backend wgpu \
//!     --write-manifest tests/conformance/wgpu.manifest
//! ```
//!
//! No case falls back to the CPU: an op without a WGSL kernel is UNSUPPORTED. The
//! tolerance is the cases' own (rtol 1e-3, atol 1e-7 unless tolerance.json says).

use gopt::pipeline::Backend;
use gopt::testing::{check_manifest, discover, read_manifest, run_cases, Options, Status, Totals};
use std::fmt::Write as _;
use std::path::Path;

#[test]
fn conformance_wgpu() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = root.join("tests/data/conformance");
    assert!(
        data.join("manifest-all.txt").is_file(),
        "tests/data/conformance is missing: run scripts/test.sh, which generates it"
    );
    let dev = gopt::wgpu::device(None).unwrap_or_else(|e| panic!("{e}"));
    let cases = discover(std::slice::from_ref(&data)).expect("discover conformance cases");
    let pipeline = gopt::pipeline::Options::new()
        .backend(Backend::Wgpu)
        .wgsl_f16(dev.adapter.f16);
    let opts = Options {
        pipeline: Some(pipeline),
        ..Options::default()
    };
    let results = run_cases(&cases, &opts, |_| {});
    let totals = Totals::of(&results);
    let mut listed =
        read_manifest(&root.join("tests/conformance/wgpu.manifest")).expect("read wgpu.manifest");
    listed.extend(
        read_manifest(&root.join("tests/conformance/wgpu-pending.manifest"))
            .expect("read wgpu-pending.manifest"),
    );
    let check = check_manifest(&results, &listed);
    println!("conformance (wgpu on {}): {totals}", dev.adapter.name);
    if !check.unlisted_passes.is_empty() {
        println!(
            "{} passing cases are not in tests/conformance/wgpu.manifest:\n  {}",
            check.unlisted_passes.len(),
            check.unlisted_passes.join("\n  ")
        );
    }
    let panics: Vec<&str> = results
        .iter()
        .filter(|r| {
            r.status == Status::Fail
                && r.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("panic:"))
        })
        .map(|r| r.name.as_str())
        .collect();
    assert!(
        panics.is_empty(),
        "cases panicked on wgpu (bugs): {}",
        panics.join(" ")
    );
    let mut problems = String::new();
    for (name, status, msg) in &check.regressions {
        let _ = writeln!(
            problems,
            "  {status} {name}: {}",
            msg.as_deref().unwrap_or("")
        );
    }
    for name in &check.not_run {
        let _ = writeln!(
            problems,
            "  MISSING {name}: listed but not in tests/data/conformance"
        );
    }
    assert!(
        problems.is_empty(),
        "{} cases of tests/conformance/wgpu.manifest do not pass on wgpu ({totals}):\n{problems}",
        check.regressions.len() + check.not_run.len()
    );
}
