//! The charts `gopt compile -o DIR` writes beside report.md, per bucket: the roofline of
//! the cost model's predictions (each kernel of the optimized graph at the FLOPs, bytes
//! and time the model estimates, under the target's roofs) and the e-graph's growth
//! over saturation. Drawn by [`gopt::charts`]; named from the bucket's sizes.

use anyhow::{Context, Result};
use gopt::charts::{growth_svg, roofline_svg, Growth, Roof, RoofPoint, Roofline};
use gopt::passes::cost::Target;
use gopt::passes::PassReport;
use std::collections::BTreeMap;
use std::path::Path;

/// A bucket's chart file stem: `batch1-seq128` (each symbol made safe as a file name),
/// `static` without symbols.
pub fn stem(bucket: &BTreeMap<String, u64>) -> String {
    let parts: Vec<String> = bucket
        .iter()
        .map(|(k, v)| format!("{}{v}", gopt::tensor_io::file_stem(k)))
        .collect();
    if parts.is_empty() {
        "static".to_string()
    } else {
        parts.join("-")
    }
}

/// Writes `roofline-<stem>.svg` and `egraph-<stem>.svg` for one bucket's optimizer
/// report into `dir`; returns the file names and the report.md text that shows them.
pub fn write_bucket(
    dir: &Path,
    stem: &str,
    bucket: &str,
    r: &PassReport,
    t: &Target,
) -> Result<(Vec<String>, String)> {
    let roofline = format!("roofline-{stem}.svg");
    let growth = format!("egraph-{stem}.svg");
    let svg = roofline_svg(&predicted_roofline(bucket, r, t))?;
    write(dir, &roofline, &svg)?;
    let svg = growth_svg(&Growth {
        title: format!("E-graph growth, bucket {bucket}"),
        iterations: r.iterations.iter().map(|i| (i.nodes, i.classes)).collect(),
    })?;
    write(dir, &growth, &svg)?;
    let md = format!(
        "![roofline, bucket {bucket}]({roofline})\n\n\
         Each kernel of the optimized graph at the FLOPs, bytes and time the cost model \
         predicts for {} (predicted, not measured: `gopt bench --profile --plot` draws \
         the measured one), coloured by kind.\n\n\
         ![e-graph growth, bucket {bucket}]({growth})\n\n\
         E-nodes and e-classes after each saturation iteration.\n\n",
        t.name
    );
    Ok((vec![roofline, growth], md))
}

/// The roofline of the optimized graph's kernels as the cost model predicts them.
fn predicted_roofline(bucket: &str, r: &PassReport, t: &Target) -> Roofline {
    let points = r
        .after
        .kernel_list
        .iter()
        .map(|k| RoofPoint {
            label: k.name.clone(),
            kind: k.kind.clone(),
            flops: k.flops,
            bytes: k.bytes,
            seconds: k.est_us / 1e6,
        })
        .collect();
    let roof = |label: &str, rate: f64| Roof {
        label: format!("{label} {} TFLOP/s", (rate / 1e12).round()),
        flops_per_s: rate,
    };
    Roofline {
        title: format!("Roofline, bucket {bucket}: {} (predicted)", t.name),
        bandwidth: t.bandwidth,
        roofs: vec![
            roof("bf16/fp16 tensor cores", t.tensor_f16),
            roof("tf32 tensor cores", t.tensor_tf32),
            roof("fp32 CUDA cores", t.fp32),
        ],
        points,
    }
}

fn write(dir: &Path, name: &str, text: &str) -> Result<()> {
    let p = dir.join(name);
    std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
}
