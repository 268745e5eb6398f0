//! The charts (`gopt::charts`) parsed back as SVG: the roofline's markers, roofs, axis
//! titles and kind colours, the e-graph growth chart, inputs log axes cannot show, and
//! the charts `gopt compile -o DIR` writes beside report.md.

use gopt::charts::{growth_svg, kind_colors, roofline_svg, Growth, Roof, RoofPoint, Roofline};

mod common;
use common::cli::{assert_ok, gopt, model_path, scratch};

fn point(label: &str, kind: &str, flops: f64, bytes: f64, seconds: f64) -> RoofPoint {
    RoofPoint {
        label: label.into(),
        kind: kind.into(),
        flops,
        bytes,
        seconds,
    }
}

/// An H200-like roofline with `points`.
fn roofline(points: Vec<RoofPoint>) -> Roofline {
    Roofline {
        title: "test roofline".into(),
        bandwidth: 3.7e12,
        roofs: vec![
            Roof {
                label: "bf16 tensor cores 824 TFLOP/s".into(),
                flops_per_s: 824e12,
            },
            Roof {
                label: "fp32 CUDA cores 60 TFLOP/s".into(),
                flops_per_s: 60e12,
            },
        ],
        points,
    }
}

fn sample_points() -> Vec<RoofPoint> {
    vec![
        // A large GEMM near the compute roof.
        point("qkv", "gemm", 2.0 * 4096.0 * 4096.0 * 4096.0, 1e8, 2e-4),
        point("ln1", "norm", 4e6, 3.2e7, 1.2e-5),
        point("gelu", "elementwise", 8e6, 6.4e7, 2e-5),
        point("sdpa", "attention", 1e11, 1e8, 3e-4),
        point("transpose", "movement", 1e6, 8e6, 4e-6),
        // An op with no arithmetic: cannot sit on log axes, drawn at the edge.
        point("copy", "movement", 0.0, 8e6, 4e-6),
    ]
}

/// Parses `svg`, checks the root is an `svg` with a size, and returns its text.
#[track_caller]
fn parse(svg: &str) -> roxmltree::Document<'_> {
    let doc = roxmltree::Document::parse(svg).expect("the chart is well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    for attr in ["width", "height"] {
        let v: u32 = root
            .attribute(attr)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("svg {attr} missing"));
        assert!(v >= 300, "svg {attr} = {v}");
    }
    doc
}

fn texts(doc: &roxmltree::Document) -> Vec<String> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect()
}

fn circles<'a>(doc: &'a roxmltree::Document) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.has_tag_name("circle"))
        .collect()
}

#[track_caller]
fn assert_text(texts: &[String], needle: &str) {
    assert!(
        texts.iter().any(|t| t.contains(needle)),
        "no <text> contains `{needle}`: {texts:?}"
    );
}

#[test]
fn roofline_draws_every_kernel_roof_and_kind() {
    let r = roofline(sample_points());
    let svg = roofline_svg(&r).expect("renders");
    let doc = parse(&svg);
    let circles = circles(&doc);
    assert_eq!(circles.len(), r.points.len(), "one marker per kernel");
    let texts = texts(&doc);
    for needle in [
        "test roofline",
        "arithmetic intensity (FLOP/byte)",
        "FLOP/s",
        "bf16 tensor cores 824 TFLOP/s",
        "fp32 CUDA cores 60 TFLOP/s",
        "memory 3.7 TB/s",
        "gemm (1)",
        "movement (2)",
        // Decade labels of both axes.
        "100 T",
        "1000",
    ] {
        assert_text(&texts, needle);
    }
    // The longest-running kernels are named beside their points.
    assert_text(&texts, "sdpa");
    assert_text(&texts, "qkv");
    // Each kind's colour is on its markers.
    let colors = kind_colors(&r.points);
    assert_eq!(colors.len(), 5, "{colors:?}");
    for (kind, color) in &colors {
        let n = r.points.iter().filter(|p| &p.kind == kind).count();
        let drawn = circles
            .iter()
            .filter(|c| c.attribute("fill") == Some(color) || c.attribute("stroke") == Some(color))
            .count();
        assert_eq!(drawn, n, "{kind} markers in {color}");
    }
    // Distinct kinds get distinct colours.
    let mut distinct: Vec<&String> = colors.iter().map(|(_, c)| c).collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), colors.len());
}

#[test]
fn zero_flop_kernels_are_drawn_hollow_and_counted() {
    let svg = roofline_svg(&roofline(sample_points())).expect("renders");
    let doc = parse(&svg);
    let hollow: Vec<_> = circles(&doc)
        .into_iter()
        .filter(|c| c.attribute("fill") == Some("none"))
        .collect();
    assert_eq!(hollow.len(), 1, "the zero-FLOP copy");
    assert_text(&texts(&doc), "1 hollow");
}

#[test]
fn roofline_is_deterministic() {
    let a = roofline_svg(&roofline(sample_points())).expect("renders");
    let b = roofline_svg(&roofline(sample_points())).expect("renders");
    assert_eq!(a, b);
    let g = growth();
    assert_eq!(
        growth_svg(&g).expect("renders"),
        growth_svg(&g).expect("renders")
    );
}

#[test]
fn a_roofline_without_points_draws_its_roofs() {
    let svg = roofline_svg(&roofline(vec![])).expect("renders");
    let doc = parse(&svg);
    assert!(circles(&doc).is_empty());
    let texts = texts(&doc);
    assert_text(&texts, "bf16 tensor cores 824 TFLOP/s");
    assert_text(&texts, "memory 3.7 TB/s");
    assert_text(&texts, "0 kernel(s)");
}

#[test]
fn unplaceable_points_are_clamped_and_bad_roofs_are_errors() {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    let points = vec![
        point("nan", "gemm", nan, 1e6, 1e-6),
        point("inf-flops", "gemm", inf, 1e6, 1e-6),
        point("no-bytes", "norm", 1e6, 0.0, 1e-6),
        point("no-time", "norm", 1e6, 1e6, 0.0),
        point("negative", "reduce", -1.0, -1.0, -1.0),
        point("tiny", "reduce", 1e-300, 1e6, 1.0),
        point("fine", "conv", 1e9, 1e6, 1e-5),
    ];
    let svg = roofline_svg(&roofline(points)).expect("clamped, not refused");
    let doc = parse(&svg);
    let circles = circles(&doc);
    assert_eq!(circles.len(), 7);
    let hollow = circles
        .iter()
        .filter(|c| c.attribute("fill") == Some("none"))
        .count();
    assert_eq!(hollow, 6);
    assert_text(&texts(&doc), "6 hollow");
    for bad in [nan, inf, 0.0, -1.0] {
        let mut r = roofline(vec![]);
        r.bandwidth = bad;
        let e = roofline_svg(&r).expect_err("a bad bandwidth");
        assert!(e.to_string().contains("memory bandwidth"), "{e}");
        let mut r = roofline(vec![]);
        r.roofs[1].flops_per_s = bad;
        let e = roofline_svg(&r).expect_err("a bad roof");
        assert!(e.to_string().contains("fp32 CUDA cores"), "{e}");
    }
}

fn growth() -> Growth {
    Growth {
        title: "e-graph growth".into(),
        iterations: vec![(120, 100), (300, 180), (900, 400), (1500, 520)],
    }
}

#[test]
fn growth_chart_has_both_series() {
    let svg = growth_svg(&growth()).expect("renders");
    let doc = parse(&svg);
    let labels = texts(&doc);
    for needle in [
        "e-graph growth",
        "e-nodes",
        "e-classes",
        "iteration",
        "1.5k",
    ] {
        assert_text(&labels, needle);
    }
    // A marker per iteration per series.
    assert_eq!(circles(&doc).len(), 8);
    let polylines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .count();
    assert!(polylines >= 2, "two lines expected, {polylines} drawn");
    // Saturation that did not run still renders, and says so.
    let empty = Growth {
        title: "nothing".into(),
        iterations: vec![],
    };
    let svg = growth_svg(&empty).expect("renders");
    assert_text(&texts(&parse(&svg)), "did not run");
}

#[test]
fn compile_writes_charts_beside_report_md() {
    let dir = scratch("compile_writes_charts_beside_report_md");
    let d = dir.display().to_string();
    let out = gopt(&[
        "compile",
        &model_path("mobilenet_v2"),
        "--target",
        "none",
        "--bind",
        "batch=1",
        "-o",
        &d,
    ]);
    assert_ok(&out);
    let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    for name in ["roofline-batch1.svg", "egraph-batch1.svg"] {
        assert!(
            md.contains(&format!("]({name})")),
            "report.md links {name}:\n{md}"
        );
        let svg = std::fs::read_to_string(dir.join(name)).expect(name);
        let doc = parse(&svg);
        assert!(!texts(&doc).is_empty(), "{name} has labels");
    }
    assert!(
        md.contains("predicted"),
        "the caption says predicted:\n{md}"
    );
    let svg = std::fs::read_to_string(dir.join("roofline-batch1.svg")).expect("svg");
    let doc = parse(&svg);
    let texts = texts(&doc);
    assert_text(&texts, "conv");
    assert!(
        circles(&doc).len() > 20,
        "one marker per kernel of MobileNet"
    );
}
