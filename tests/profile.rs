//! `gopt bench --profile --plot` where CI can run it, on wgpu (Mesa's lavapipe): the
//! device's peaks are measured once and then read from the cache, every kernel gets a
//! measured class with the rule that decided it and the cost model's prediction beside
//! it, and the roofline chart is an SVG with one marker per kernel.

mod common;
use common::cli::{assert_error, model_path, root, scratch, Out};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// `gopt bench MODEL ARGS` with the peaks cached under `cache`.
fn bench(cache: &Path, model: &str, args: &[&str]) -> Out {
    let t = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gopt"));
    cmd.arg("bench")
        .arg(model_path(model))
        .args(args)
        .current_dir(root())
        .env("GOPT_CACHE_DIR", cache);
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let out = cmd.output().expect("run gopt");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: t.elapsed(),
    }
}

const CLASSES: [&str; 4] = ["Launch", "Memory", "Compute", "UnderOccupied"];

#[test]
fn profile_classes_every_kernel_and_plots_it_on_the_roofline() {
    let dir = scratch("profile_plot");
    let cache = dir.join("cache");
    let svg = dir.join("roofline.svg");
    let svg_arg = svg.display().to_string();
    let args = [
        "--backend",
        "wgpu",
        "--batch",
        "1",
        "--seq",
        "16",
        "--iters",
        "2",
        "--warmup",
        "1",
        "--profile",
        "--plot",
        &svg_arg,
        "--json",
    ];
    let out = bench(&cache, "bert_small", &args);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let r: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let p = &r["profile"];
    assert!(
        p["peaks_source"]
            .as_str()
            .unwrap_or("")
            .starts_with("measured now"),
        "{}",
        p["peaks_source"]
    );
    let peaks = &p["peaks"];
    assert!(peaks["copy_bytes_per_s"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(peaks["compute"]["fp32"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(peaks["floor_s"].as_f64().unwrap_or(0.0) > 0.0);
    let kernels = p["kernels"].as_array().expect("kernels");
    let steps = p["steps"].as_array().expect("steps");
    assert!(kernels.len() >= 5, "{} kernels", kernels.len());
    assert!(steps.len() >= kernels.len());
    let mut predicted = 0;
    let mut counted = 0;
    for k in kernels {
        let class = k["measured"]["class"].as_str().unwrap_or("");
        assert!(CLASSES.contains(&class), "class {class} of {k}");
        assert!(
            !k["measured"]["rule"].as_str().unwrap_or("").is_empty(),
            "{k}"
        );
        assert!(k["ms"].as_f64().unwrap_or(-1.0) >= 0.0);
        if k["predicted_ms"].as_f64().is_some() {
            predicted += 1;
            assert!(k["predicted_class"].is_string(), "{k}");
            let (m, e) = (
                k["ms"].as_f64().unwrap_or(0.0),
                k["predicted_ms"].as_f64().unwrap_or(0.0),
            );
            let off = m.max(1e-9) / e.max(1e-9);
            assert_eq!(
                k["mismatch"].as_bool(),
                Some(!(0.5..=2.0).contains(&off)),
                "{k}"
            );
        }
    }
    for n in p["classes"].as_object().expect("classes").values() {
        counted += n.as_u64().unwrap_or(0) as usize;
    }
    assert_eq!(counted, kernels.len(), "every kernel in one class");
    // The kernels more than 2x off, in all and by kind.
    let flagged: Vec<&str> = kernels
        .iter()
        .filter(|k| k["mismatch"].as_bool() == Some(true))
        .filter_map(|k| k["kind"].as_str())
        .collect();
    assert_eq!(p["mismatches"].as_u64(), Some(flagged.len() as u64));
    let by_kind = p["mismatches_by_kind"].as_object().expect("by kind");
    for (kind, n) in by_kind {
        let want = flagged.iter().filter(|k| *k == kind).count() as u64;
        assert_eq!(n.as_u64(), Some(want), "{kind}");
    }
    assert_eq!(
        by_kind.values().filter_map(|n| n.as_u64()).sum::<u64>(),
        flagged.len() as u64
    );
    assert!(
        predicted * 10 >= kernels.len() * 9,
        "{predicted} of {} predicted",
        kernels.len()
    );
    // The chart: one marker per kernel.
    let text = std::fs::read_to_string(&svg).expect("the chart was written");
    let doc = roxmltree::Document::parse(&text).expect("the chart is SVG");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let markers = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .count();
    assert_eq!(markers, kernels.len(), "one marker per kernel");
    // Again, as text: the peaks now come from the cache.
    let out = bench(&cache, "bert_small", &args[..args.len() - 3]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    for needle in [
        "profile  ",
        "peaks  ",
        "cached in",
        "classes  ",
        "rules  ",
        "predicted as",
    ] {
        assert!(
            out.stdout.contains(needle),
            "`{needle}` missing:\n{}",
            out.stdout
        );
    }
}

#[test]
fn profile_on_the_cpu_interpreter_says_there_is_no_roofline() {
    let dir = scratch("profile_cpu");
    let out = bench(
        &dir,
        "mobilenet_v2",
        &[
            "--backend",
            "cpu",
            "--batch",
            "1",
            "--iters",
            "1",
            "--warmup",
            "0",
            "--profile",
        ],
    );
    assert_error(&out, &["no roofline"]);
}
