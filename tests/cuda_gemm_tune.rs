//! GEMM choice by measurement: a bf16 FFN (bias+GELU, then bias+residual: the two
//! cuBLASLt epilogues a transformer's GEMMs use) loaded three times on the GPU with a
//! cache folder of its own. The first load times each problem's candidates and writes the
//! cache; the second reads the same choices back without timing and computes the same
//! bits; with tuning off the heuristic's first choice is used. Every load matches the
//! interpreter.
//!
//! Without a GPU (CI): the fixture plans into exactly those two GEMMs. On a GPU
//! (`#[ignore]`d here; scripts/gpu-check.sh runs it): the loads above.

use gopt::codegen::cuda::gemm::Epilogue;
use gopt::codegen::cuda::plan::{self, Step};
use gopt::ir::{DType, Verified};
use gopt::runtime::cuda::tune::Source;
use gopt::runtime::cuda::{Executable, TuneOptions, TuneReport, Weights};

mod common;
use common::random;

/// Rows, model width and hidden width of the FFN.
const M: usize = 512;
const D: usize = 256;
const H: usize = 1024;

fn ffn() -> Verified {
    let text = format!(
        r#"graph "ffn"(%0 "x": bf16[{M},{D}], %1 "w1": bf16[{D},{H}], %2 "b1": bf16[{H}], %3 "w2": bf16[{H},{D}], %4 "b2": bf16[{D}]) -> (%6) {{
  %5 "h": bf16[{M},{H}] = FusedMatMul "ffn1"(%0, %1, %2, _) {{activation="gelu_tanh"}}
  %6 "y": bf16[{M},{D}] = FusedMatMul "ffn2"(%5, %3, %4, %0)
}}"#
    );
    gopt::ir::verify(gopt::ir::text::parse(&text).expect("parses")).expect("verifies")
}

fn inputs(g: &Verified) -> Vec<gopt::Tensor> {
    g.inputs
        .iter()
        .enumerate()
        .map(|(j, &v)| {
            let ty = g.ty(v).expect("typed");
            let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
            let t = random(DType::F32, &shape, 7 + j as u64);
            // Small values: a sum of 1024 products stays well inside bf16.
            let vals: Vec<f64> = t.to_f64_vec().iter().map(|x| x / 8.0).collect();
            gopt::Tensor::from_f64s(DType::BF16, &shape, &vals).expect("tensor")
        })
        .collect()
}

#[test]
fn the_fixture_plans_into_the_two_fused_epilogues() {
    let (p, _) = plan::build(&ffn()).expect("plans");
    let gemms: Vec<_> = p
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Gemm(g) => Some(g),
            Step::Kernel(_) | Step::Collective(_) => None,
        })
        .collect();
    assert_eq!(gemms.len(), 2, "{:?}", p.steps);
    assert_eq!(
        p.steps.len(),
        2,
        "no kernel besides the GEMMs: {:?}",
        p.steps
    );
    let (a, b) = (gemms[0], gemms[1]);
    assert_eq!((a.m, a.n, a.k), (M as u64, H as u64, D as u64));
    assert_eq!(a.epilogue, Epilogue::GeluTanh);
    assert!(a.bias.is_some() && a.residual.is_none() && a.post.is_none());
    assert_eq!((b.m, b.n, b.k), (M as u64, D as u64, H as u64));
    assert_eq!(b.epilogue, Epilogue::None);
    assert!(b.bias.is_some() && b.residual.is_some() && b.post.is_none());
}

/// Relative L2 distance of `got` from `want`.
fn rel_l2(got: &gopt::Tensor, want: &gopt::Tensor) -> f64 {
    let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
    let num: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(1e-30)).sqrt()
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn a_second_load_reads_the_same_choices_from_the_cache_and_computes_the_same_bits() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    let g = ffn();
    let ins = inputs(&g);
    let want = gopt::ir::interp::run(&g, &ins).expect("interpreter");
    let dir = std::env::temp_dir().join(format!("gopt-gemm-tune-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tuned = TuneOptions {
        measure: true,
        cache_dir: Some(dir.clone()),
    };
    let load = |t: &TuneOptions| -> (TuneReport, gopt::Tensor) {
        let (p, blob) = plan::build(&g).expect("plans");
        let _gpu = gopt::runtime::cuda::gpu_lock();
        let w = Weights::upload(&dev, &blob).expect("weights");
        let mut exe = Executable::with_tuning(&dev, p, w, true, t).expect("loads");
        drop(_gpu);
        let out = exe.run(&ins).expect("runs").remove(0);
        let l2 = rel_l2(&out, &want[0]);
        assert!(l2 <= 1e-2, "relative L2 {l2:.3e} against the interpreter");
        (exe.gemm_tuning().clone(), out)
    };

    let (first, out1) = load(&tuned);
    println!("cuda: first load: {}", first.summary_line());
    for (c, n) in first.distinct() {
        println!("  {}", c.line(n));
    }
    assert!(first.measure);
    assert_eq!(first.choices.len(), 2);
    assert_eq!((first.shapes, first.measured, first.cache_hits), (2, 2, 0));
    assert!(first.choices.iter().all(|c| c.source == Source::Measured));
    assert!(first
        .choices
        .iter()
        .all(|c| c.us.is_some() && c.candidates >= 1));
    let file = first.cache_file.clone().expect("a cache file");
    assert!(std::path::Path::new(&file).is_file(), "{file} written");
    let bytes = std::fs::read(&file).expect("cache file");

    let (second, out2) = load(&tuned);
    println!("cuda: second load: {}", second.summary_line());
    assert_eq!(
        (second.shapes, second.measured, second.cache_hits),
        (2, 0, 2)
    );
    assert!(second.choices.iter().all(|c| c.source == Source::Cache));
    for (a, b) in first.choices.iter().zip(&second.choices) {
        assert_eq!(
            (
                &a.key,
                a.index,
                a.candidates,
                a.tile,
                a.stages,
                a.split_k,
                a.us
            ),
            (
                &b.key,
                b.index,
                b.candidates,
                b.tile,
                b.stages,
                b.split_k,
                b.us
            ),
            "`{}`",
            a.node
        );
    }
    assert_eq!(
        std::fs::read(&file).expect("cache file"),
        bytes,
        "a hit rewrites nothing"
    );
    let bits =
        |t: &gopt::Tensor| -> Vec<u64> { t.to_f64_vec().iter().map(|x| x.to_bits()).collect() };
    assert!(
        bits(&out1) == bits(&out2),
        "the same algorithms compute the same bits"
    );

    let (heuristic, _) = load(&TuneOptions::heuristic());
    println!("cuda: tuning off: {}", heuristic.summary_line());
    assert!(!heuristic.measure && heuristic.cache_file.is_none());
    assert!(heuristic
        .choices
        .iter()
        .all(|c| c.source == Source::Heuristic && c.index == 0 && c.us.is_none()));
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
