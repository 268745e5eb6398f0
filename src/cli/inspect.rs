//! `gopt inspect`: what a model file holds and what gopt cannot do with it, without
//! importing it fully (an unsupported op is reported, not an error).

use super::outln;
use anyhow::{Context, Result};
use gopt::report::{human_bytes, human_count};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Show a model's opsets, inputs and outputs, op histogram, weights and unsupported ops.
#[derive(clap::Args)]
#[command(
    long_about = "Reads a model and prints its opsets, its inputs and outputs with dtypes and \
                  symbolic dims, how many nodes of each op it has, its parameter count and \
                  weight size, and every op gopt cannot import, listed together with the \
                  nodes that use it. Unsupported ops are reported, not an error: the exit \
                  code is 0 unless the file cannot be read as a model (2). Only regular \
                  files are read (not devices, FIFOs or folders).",
    after_help = "Examples:\n  \
        gopt inspect tests/data/models/bert_small/model.onnx\n  \
        gopt inspect model.onnx --json | jq .unsupported"
)]
pub struct Args {
    /// The model file (.onnx).
    pub model: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Io {
    name: String,
    dtype: String,
    dims: Vec<String>,
}

#[derive(Serialize)]
struct Unsupported {
    domain: String,
    op: String,
    opset: i64,
    reason: String,
    nodes: Vec<String>,
}

#[derive(Serialize)]
struct Report {
    model: String,
    producer: String,
    ir_version: i64,
    opsets: Vec<(String, i64)>,
    inputs: Vec<Io>,
    outputs: Vec<Io>,
    node_count: usize,
    op_histogram: Vec<(String, String, usize)>,
    param_count: u64,
    weight_bytes: u64,
    unsupported: Vec<Unsupported>,
}

/// Runs `gopt inspect`.
pub fn main(args: &Args) -> Result<ExitCode> {
    let i = gopt::frontends::inspect(&args.model)
        .with_context(|| format!("cannot read model {}", args.model.display()))?;
    let io = |v: &[gopt::frontends::IoInfo]| -> Vec<Io> {
        v.iter()
            .map(|x| Io {
                name: x.name.clone(),
                dtype: x.dtype.clone(),
                dims: x.dims.clone(),
            })
            .collect()
    };
    // Unsupported items grouped by (domain, op, opset, reason), node names together.
    let mut groups: BTreeMap<(String, String, i64, String), Vec<String>> = BTreeMap::new();
    for u in &i.unsupported {
        groups
            .entry((u.domain.clone(), u.op.clone(), u.opset, u.reason.clone()))
            .or_default()
            .push(u.node.clone());
    }
    let report = Report {
        model: args.model.display().to_string(),
        producer: i.producer.clone(),
        ir_version: i.ir_version,
        opsets: i.opsets.clone(),
        inputs: io(&i.inputs),
        outputs: io(&i.outputs),
        node_count: i.node_count,
        op_histogram: i.op_histogram.clone(),
        param_count: i.param_count,
        weight_bytes: i.weight_bytes,
        unsupported: groups
            .into_iter()
            .map(|((domain, op, opset, reason), nodes)| Unsupported {
                domain,
                op,
                opset,
                reason,
                nodes,
            })
            .collect(),
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn qualified(domain: &str, op: &str) -> String {
    if domain.is_empty() || domain == "ai.onnx" {
        op.to_string()
    } else {
        format!("{domain}.{op}")
    }
}

fn print_text(r: &Report) {
    outln!("model       {}", r.model);
    outln!(
        "producer    {}",
        if r.producer.is_empty() {
            "-"
        } else {
            &r.producer
        }
    );
    outln!("ir version  {}", r.ir_version);
    let opsets: Vec<String> = r
        .opsets
        .iter()
        .map(|(d, v)| format!("{} {v}", if d.is_empty() { "ai.onnx" } else { d }))
        .collect();
    outln!("opsets      {}", opsets.join(", "));
    for (title, list) in [("inputs", &r.inputs), ("outputs", &r.outputs)] {
        outln!("{title}:");
        let w = list.iter().map(|x| x.name.len()).max().unwrap_or(0);
        for x in list {
            outln!("  {:w$}  {} [{}]", x.name, x.dtype, x.dims.join(", "));
        }
    }
    outln!("nodes       {}", r.node_count);
    outln!("ops:");
    let w = r
        .op_histogram
        .iter()
        .map(|(d, o, _)| qualified(d, o).len())
        .max()
        .unwrap_or(0);
    for (d, o, n) in &r.op_histogram {
        outln!("  {:w$}  {n}", qualified(d, o));
    }
    outln!(
        "parameters  {} ({} of weights)",
        human_count(r.param_count),
        human_bytes(r.weight_bytes)
    );
    if r.unsupported.is_empty() {
        outln!("unsupported none");
    } else {
        let n: usize = r.unsupported.iter().map(|u| u.nodes.len()).sum();
        outln!("unsupported {} op(s) in {n} node(s):", r.unsupported.len());
        for u in &r.unsupported {
            outln!(
                "  {} (opset {}): {}",
                qualified(&u.domain, &u.op),
                u.opset,
                u.reason
            );
            outln!("    nodes: {}", u.nodes.join(", "));
        }
    }
}
