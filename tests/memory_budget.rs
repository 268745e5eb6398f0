//! `gopt compile --memory-budget` without a GPU: BERT's CUDA plans are predicted and
//! the buckets kept or dropped (all kept, some kept with a line each for the others,
//! none kept: exit 2 with one line), bad sizes refused; the library's
//! `Options::memory_budget` gives the typed error; and the prediction itself grows with
//! the arena, counts one workspace per bucket and the weights once however many
//! buckets load.

mod common;
use common::cli::{assert_error, assert_ok, error_line, gopt, model_path};
use gopt::pipeline::{specialize, Options};
use gopt::runtime::peak::{self, BLAS_WORKSPACE, PAGE};
use std::collections::BTreeMap;

/// Four buckets of BERT-small, from its smallest to batch 128 at its longest sequence
/// (arenas from 77 KiB to 104 MiB: past the memory pool's 32 MiB chunks, which the
/// three smaller ones share).
const BUCKETS: [&str; 4] = ["--buckets", "batch=1,128", "--buckets", "seq=32,256"];

fn compile_json(extra: &[&str]) -> (common::cli::Out, serde_json::Value) {
    let bert = model_path("bert_small");
    let mut args = vec!["compile", bert.as_str(), "--json"];
    args.extend(BUCKETS);
    args.extend(extra);
    let out = gopt(&args);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("report JSON");
    (out, v)
}

/// The report of the four buckets without a budget (compiled once for every test).
fn unbudgeted() -> &'static serde_json::Value {
    static REPORT: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    REPORT.get_or_init(|| compile_json(&[]).1)
}

/// Each bucket's predicted peak, by bucket name (`batch=1 seq=32`), from the report.
fn peaks(report: &serde_json::Value) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for b in report["buckets"].as_array().expect("buckets") {
        let name: Vec<String> = b["bucket"]
            .as_object()
            .expect("sizes")
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let peak = b["memory"]["predicted_peak_bytes"]
            .as_u64()
            .expect("a predicted peak per bucket");
        m.insert(name.join(" "), peak);
    }
    m
}

#[test]
fn every_bucket_reports_its_predicted_peak_and_a_large_budget_keeps_all() {
    let all = unbudgeted();
    let p = peaks(all);
    assert_eq!(p.len(), 4, "{p:?}");
    for (name, bytes) in &p {
        // The workspace alone is 32 MiB; BERT-small's weights are over 1 MiB.
        assert!(*bytes > BLAS_WORKSPACE + (1 << 20), "{name}: {bytes}");
    }
    assert!(
        p["batch=128 seq=256"] > p["batch=1 seq=32"] + (20 << 20),
        "{p:?}"
    );
    let b = all["buckets"][0]["memory"]["predicted"].clone();
    assert_eq!(
        b["workspace"].as_u64(),
        Some(BLAS_WORKSPACE + peak::BLAS_HANDLE_BYTES)
    );
    assert!(b["weights"].as_u64().unwrap_or(0) > 1 << 20, "{b}");

    let (out, kept) = compile_json(&["--memory-budget", "100GiB"]);
    assert_eq!(peaks(&kept), p, "a budget that fits changes nothing");
    assert_eq!(kept["memory_budget"]["kept"].as_u64(), Some(4));
    assert_eq!(kept["memory_budget"]["dropped"].as_u64(), Some(0));
    assert!(out.stderr.is_empty(), "{}", out.stderr);
}

#[test]
fn a_budget_for_one_bucket_keeps_the_smallest_and_says_why_the_others_went() {
    let all = unbudgeted();
    let p = peaks(all);
    let smallest = *p.values().min().expect("a bucket");
    let budget = smallest.to_string();
    let bert = model_path("bert_small");
    let mut args = vec!["compile", bert.as_str(), "--memory-budget", budget.as_str()];
    args.extend(BUCKETS);
    let out = gopt(&args);
    assert_ok(&out);
    let kept: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("bucket "))
        .collect();
    assert_eq!(kept.len(), 1, "{}", out.stdout);
    assert!(kept[0].starts_with("bucket batch=1 seq=32:"), "{}", kept[0]);
    let dropped: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("skipped bucket ") && l.contains("does not fit --memory-budget"))
        .collect();
    assert_eq!(dropped.len(), 3, "{}", out.stdout);
    for l in &dropped {
        assert!(
            l.contains("predicted peak") && l.contains("workspace 34.00 MiB"),
            "{l}"
        );
    }
    assert!(
        out.stdout.contains("1 bucket(s) kept") && out.stdout.contains("3 dropped"),
        "{}",
        out.stdout
    );
    // A budget between the smallest and two buckets together: a dropped bucket that
    // would fit alone says so.
    let second = p
        .values()
        .copied()
        .filter(|&b| b > smallest)
        .min()
        .expect("two sizes");
    let budget = second.to_string();
    let mut args = vec!["compile", bert.as_str(), "--memory-budget", budget.as_str()];
    args.extend(BUCKETS);
    let out = gopt(&args);
    assert_ok(&out);
    assert!(
        out.stdout.lines().any(|l| l.starts_with("skipped bucket ")
            && l.contains("bucket(s) kept: predicted peak")
            && l.contains("alone")),
        "{}",
        out.stdout
    );
}

#[test]
fn no_bucket_fitting_exits_2_with_one_line() {
    let smallest = *peaks(unbudgeted()).values().min().expect("a bucket");
    let budget = (smallest - 1).to_string();
    let bert = model_path("bert_small");
    let mut args = vec!["compile", bert.as_str(), "--memory-budget", budget.as_str()];
    args.extend(BUCKETS);
    let out = gopt(&args);
    let line = assert_error(
        &out,
        &[
            "no bucket fits --memory-budget",
            "the smallest, batch=1 seq=32, needs",
            "weights",
            "workspace 34.00 MiB",
        ],
    );
    assert!(out.stdout.is_empty(), "{}\n{line}", out.stdout);
}

#[test]
fn bad_budgets_are_refused_with_one_line() {
    let bert = model_path("bert_small");
    for bad in ["12X", "0", "-5", "abc", "1.2.3G", "", "nan"] {
        let flag = format!("--memory-budget={bad}");
        let out = gopt(&["compile", &bert, &flag]);
        let line = error_line(&out);
        assert!(line.contains("--memory-budget"), "{bad}: {line}");
    }
    let out = gopt(&[
        "compile",
        &bert,
        "--bind",
        "batch=1",
        "--bind",
        "seq=32",
        "--target",
        "none",
        "--memory-budget",
        "1G",
    ]);
    assert_error(&out, &["--memory-budget predicts GPU memory"]);
}

#[test]
fn help_says_what_the_budget_counts() {
    let out = gopt(&["compile", "--help"]);
    assert_ok(&out);
    for needle in [
        "--memory-budget <SIZE>",
        "cuBLASLt workspace",
        "CUDA graph",
        "2 MiB pages",
        "must fit together",
    ] {
        assert!(out.stdout.contains(needle), "--help lacks `{needle}`");
    }
}

fn bert_plan(batch: u64, seq: u64) -> gopt::codegen::cuda::plan::CudaPlan {
    let model = gopt::load_model(std::path::Path::new(&model_path("bert_small"))).expect("bert");
    let b: BTreeMap<String, u64> = [("batch".to_string(), batch), ("seq".to_string(), seq)]
        .into_iter()
        .collect();
    let v = specialize(&model.model, &b, &Options::new()).expect("specializes");
    gopt::codegen::cuda::plan::build(&v.graph).expect("plans").0
}

#[test]
fn the_prediction_grows_with_the_arena_and_counts_the_workspace_once() {
    let plan = bert_plan(1, 32);
    let base = peak::cuda(&plan, plan.weights_bytes);
    assert_eq!(base.weights, plan.weights_bytes as u64);
    assert_eq!(base.arena, plan.arena_bytes as u64);
    assert_eq!(base.workspace, BLAS_WORKSPACE + peak::BLAS_HANDLE_BYTES);
    assert!(base.graph > 0 && base.library > 0, "{base:?}");
    assert_eq!(base.total(), base.shared() + base.own());
    // The pool's allocations take whole chunks once rounded.
    let pooled = base.weights + base.arena + BLAS_WORKSPACE + base.io;
    assert_eq!(
        (pooled + base.rounding + base.weights_rounding) % peak::POOL_CHUNK,
        0,
        "{base:?}"
    );
    let mut last = base.total();
    for extra in [1usize, PAGE as usize - 1, 3 << 20, 100 << 20] {
        let mut bigger = plan.clone();
        bigger.arena_bytes += extra;
        let p = peak::cuda(&bigger, plan.weights_bytes);
        assert!(p.total() >= last, "+{extra}: {} < {last}", p.total());
        assert!(
            p.total() + peak::POOL_CHUNK >= base.total() + extra as u64,
            "+{extra} arena bytes: {p:?}"
        );
        assert_eq!(
            p.workspace, base.workspace,
            "one workspace however big the arena"
        );
        last = p.total();
    }
    // Two buckets loaded together: the weights and library once, a workspace each.
    let other = peak::cuda(&bert_plan(4, 128), plan.weights_bytes);
    let both = peak::all_loaded(&[base, other]);
    assert_eq!(both, base.total() + other.own());
    assert!(both < base.total() + other.total());
    assert!(both >= base.weights + 2 * BLAS_WORKSPACE);
}

#[test]
fn the_library_budget_keeps_what_fits_or_gives_the_typed_error() {
    let model = gopt::load_model(std::path::Path::new(&model_path("bert_small"))).expect("bert");
    let opts = Options::new()
        .backend(gopt::Backend::Cuda)
        .buckets("batch", [1, 32])
        .buckets("seq", [256]);
    let all = gopt::compile(&model, &opts).expect("compiles");
    let small = all.predicted_peak(0).expect("a CUDA plan");
    let large = all.predicted_peak(1).expect("a CUDA plan");
    // The pool rounds to 32 MiB chunks: a larger arena can fit the same chunks.
    assert!(large.total() >= small.total(), "{small:?} {large:?}");
    assert!(large.arena > small.arena, "{small:?} {large:?}");
    assert_eq!(
        all.predicted_peak_all(),
        Some(peak::all_loaded(&[small, large]))
    );

    let one = gopt::compile(&model, &opts.clone().memory_budget(small.total())).expect("one fits");
    assert_eq!(one.buckets().len(), 1);
    assert_eq!(one.buckets()[0].name(), "batch=1 seq=256");
    let skipped = one.skipped();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0]
            .reason
            .starts_with("does not fit --memory-budget"),
        "{skipped:?}"
    );
    assert!(one.predicted_peak_all().expect("CUDA") <= small.total());

    match gopt::compile(&model, &opts.memory_budget(small.total() - 1)) {
        Err(gopt::GoptError::MemoryBudget {
            budget,
            bucket,
            peak,
        }) => {
            assert_eq!(budget, small.total() - 1);
            assert_eq!(bucket, "batch=1 seq=256");
            assert_eq!(peak, small);
        }
        Err(e) => panic!("expected the memory budget error, got {e}"),
        Ok(c) => panic!(
            "compiled {} buckets under too small a budget",
            c.buckets().len()
        ),
    }
}
