//! The CUDA conformance manifest without a GPU (issue 15): every case listed in
//! tests/conformance/cuda.manifest (the cases that pass through CUDA on the H200,
//! written there by scripts/gpu-check.sh) still builds its CUDA plan here, and every
//! kernel of it compiles with NVRTC for sm_90 — what `gopt test --backend cuda
//! --plan-only` checks. A listed case whose plan no longer builds (an op refused, a
//! kernel that no longer compiles) fails this test on the CPU-only CI machine instead
//! of on the next GPU run. tests/conformance/cuda-pending.manifest lists cases that plan
//! and compile and have not run on the H200 yet; they are checked the same way. Whether
//! the numbers are right is the GPU run's job: nothing here is a pass. NVRTC and the CUDA headers come from the pinned wheels
//! (scripts/test.sh sets LD_LIBRARY_PATH and GOPT_CUDA_INCLUDE).

use gopt::pipeline::Backend;
use gopt::testing::{check_manifest_for, discover, read_manifest, run_cases, Options, Status};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

mod common;
use common::nvrtc_ready;

#[test]
fn every_cuda_manifest_case_plans_and_compiles_for_sm90() {
    nvrtc_ready();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = root.join("tests/data/conformance");
    assert!(
        data.join("manifest-all.txt").is_file(),
        "tests/data/conformance is missing: run scripts/test.sh, which generates it"
    );
    let mut listed =
        read_manifest(&root.join("tests/conformance/cuda.manifest")).expect("read cuda.manifest");
    listed.extend(
        read_manifest(&root.join("tests/conformance/cuda-pending.manifest"))
            .expect("read cuda-pending.manifest"),
    );
    let dirs: Vec<PathBuf> = listed.iter().map(|n| data.join(n)).collect();
    let missing: Vec<&PathBuf> = dirs.iter().filter(|d| !d.is_dir()).collect();
    assert!(
        missing.is_empty(),
        "cases listed in cuda.manifest are not in tests/data/conformance: {missing:?}"
    );
    let cases = discover(&dirs).expect("discover the listed cases");
    let pipeline = gopt::pipeline::Options::new().backend(Backend::Cuda);
    let opts = Options {
        pipeline: Some(pipeline),
        plan_only: true,
        ..Options::default()
    };
    let results = run_cases(&cases, &opts, |_| {});
    let check = check_manifest_for(&results, &listed, Status::Planned);
    let planned = results
        .iter()
        .filter(|r| r.status == Status::Planned)
        .count();
    println!(
        "cuda.manifest: {planned} of {} cases plan and compile for sm_90",
        listed.len()
    );
    let mut problems = String::new();
    for (name, status, msg) in check.regressions.iter().take(40) {
        let _ = writeln!(
            problems,
            "  {status} {name}: {}",
            msg.as_deref().unwrap_or("")
        );
    }
    assert!(
        check.ok() && check.not_run.is_empty(),
        "{} cases of tests/conformance/cuda.manifest no longer build their CUDA plan:\n{problems}",
        check.regressions.len() + check.not_run.len()
    );
}
