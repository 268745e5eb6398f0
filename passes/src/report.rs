//! What the optimizer did, for people (`--explain`) and machines (`report.json`): rules
//! fired, e-graph growth per iteration and why saturation stopped, nodes and kernels
//! before and after, the fusions found in words, padding decisions with their estimated
//! costs, each kernel's precision, and the estimated time before and after.

use crate::analysis::Egraph;
use crate::cost::{family, kind, node_cost, op_work, Kind, Target};
use crate::lang::Term;
use crate::Config;
use gopt_ir::ops::{AttentionOp, ElementwiseOp, FusedOp, ReduceOp, ShapeOp};
use gopt_ir::{Graph, Op, ValueId};
use serde::Serialize;
use std::collections::BTreeMap;

/// One kernel of a graph.
#[derive(Clone, Debug, Serialize)]
pub struct Kernel {
    /// Node name.
    pub name: String,
    /// Op name, with the epilogue for fused GEMMs/convs (`FusedMatMul[bias+gelu]`).
    pub op: String,
    /// Input dtype → output dtype, e.g. `bf16 (fp32 acc) -> f32`.
    pub precision: String,
    /// Estimated time, µs.
    pub est_us: f64,
    /// Bytes it reads and writes (the cost model's count).
    pub bytes: f64,
    /// Operations it performs (2 per multiply-add; one per element when streaming).
    pub flops: f64,
    /// The unit its operations run on (`bf16`, `tf32`, `fp32`: the key of the
    /// device's peak).
    pub unit: String,
    /// The family of kernel, for charts and tables (`gemm`, `conv`, `attention`,
    /// `norm`, `reduce`, `elementwise`, `movement`, `other`).
    pub kind: String,
    /// The class the cost model predicts (`memory-bound`, `compute-bound`,
    /// `launch-bound`, `under-occupied`).
    pub class: String,
}

/// Counts and estimates for one graph.
#[derive(Clone, Debug, Serialize)]
pub struct Census {
    /// Nodes.
    pub nodes: usize,
    /// Nodes that launch a kernel (views and leaves do not).
    pub kernels: usize,
    /// Op histogram.
    pub ops: BTreeMap<String, usize>,
    /// Estimated time of one run, µs.
    pub est_us: f64,
    /// Every kernel.
    pub kernel_list: Vec<Kernel>,
}

/// Counts the nodes and kernels of a verified graph and estimates each kernel with the
/// cost model (from the graph's own types: no copy of its weights).
pub fn census(g: &Graph, t: &Target) -> Census {
    let mut ops = BTreeMap::new();
    for n in &g.nodes {
        *ops.entry(n.op.name().to_string()).or_insert(0) += 1;
    }
    let mut kernel_list = Vec::new();
    let mut est = 0.0;
    for n in &g.nodes {
        if kind(n.op) == Kind::Free {
            continue;
        }
        let ins: Vec<&gopt_ir::TensorType> = n
            .inputs
            .iter()
            .flatten()
            .filter_map(|v| g.value(*v).ty.as_ref())
            .collect();
        let outs: Vec<gopt_ir::TensorType> = n
            .outputs
            .iter()
            .filter_map(|v| g.value(*v).ty.clone())
            .collect();
        let w = op_work(t, n.op, &n.attrs, &ins, &outs);
        let us = w.seconds * 1e6;
        est += if us.is_finite() { us } else { 0.0 };
        kernel_list.push(Kernel {
            name: n.name.clone(),
            op: describe_op(g, n),
            precision: precision_of(g, n),
            est_us: us,
            bytes: w.bytes,
            flops: w.flops,
            unit: w.unit.key().to_string(),
            kind: family(n.op).to_string(),
            class: w.class.name().to_string(),
        });
    }
    Census {
        nodes: g.nodes.len(),
        kernels: kernel_list.len(),
        ops,
        est_us: est,
        kernel_list,
    }
}

fn describe_op(g: &Graph, n: &gopt_ir::Node) -> String {
    match n.op {
        Op::Fused(FusedOp::FusedMatMul) | Op::Fused(FusedOp::FusedConv) => {
            format!("{}[{}]", n.op.name(), epilogue(g, n))
        }
        _ => n.op.name().to_string(),
    }
}

/// `bias+gelu+residual`-style description of a fused GEMM/conv epilogue.
fn epilogue(_g: &Graph, n: &gopt_ir::Node) -> String {
    let mut parts = Vec::new();
    if n.inputs.get(2).copied().flatten().is_some() {
        parts.push("bias".to_string());
    }
    let act = n.attrs.str_or("activation", "none").unwrap_or("none");
    if act != "none" {
        parts.push(act.to_string());
    }
    if n.inputs.get(3).copied().flatten().is_some() {
        parts.push("residual".to_string());
    }
    if parts.is_empty() {
        "plain".into()
    } else {
        parts.join("+")
    }
}

fn precision_of(g: &Graph, n: &gopt_ir::Node) -> String {
    let dt = |v: Option<&Option<ValueId>>| {
        v.copied()
            .flatten()
            .and_then(|v| g.value(v).ty.as_ref())
            .map(|t| t.dtype.name().to_string())
            .unwrap_or_else(|| "-".into())
    };
    let input = dt(n.inputs.first());
    let out = n
        .outputs
        .first()
        .and_then(|v| g.value(*v).ty.as_ref())
        .map(|t| t.dtype.name().to_string())
        .unwrap_or_default();
    match kind(n.op) {
        Kind::Gemm | Kind::Conv | Kind::Attention if input != "f32" && input != "f64" => {
            format!("{input} (f32 acc) -> {out}")
        }
        _ => format!("{input} -> {out}"),
    }
}

/// One iteration of saturation.
#[derive(Clone, Debug, Serialize)]
pub struct IterStat {
    /// E-nodes after the iteration.
    pub nodes: usize,
    /// E-classes after the iteration.
    pub classes: usize,
    /// Rule applications that changed the e-graph.
    pub applied: usize,
    /// Wall time, ms.
    pub ms: f64,
}

/// A padding decision.
#[derive(Clone, Debug, Serialize)]
pub struct Padding {
    /// The GEMM.
    pub node: String,
    /// What was padded, e.g. `N 333 -> 384`.
    pub what: String,
}

/// Everything the optimizer reports.
#[derive(Clone, Debug, Serialize)]
pub struct PassReport {
    /// Requested precision.
    pub precision: String,
    /// Passes switched off.
    pub disabled: Vec<String>,
    /// Why saturation stopped.
    pub stop_reason: String,
    /// Set when a deterministic budget (iterations, e-nodes) cut saturation short: says
    /// which, in a sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_cut: Option<String>,
    /// Growth per iteration.
    pub iterations: Vec<IterStat>,
    /// Rule applications by rule, most first.
    pub rules_fired: Vec<(String, usize)>,
    /// The input graph.
    pub before: Census,
    /// The optimized graph.
    pub after: Census,
    /// The fusions found, in words.
    pub fusions: Vec<String>,
    /// Padding decisions.
    pub padding: Vec<Padding>,
    /// Kernels by precision.
    pub precisions: BTreeMap<String, usize>,
    /// Stage timings, ms.
    pub timings: Vec<(String, f64)>,
    /// Attention nodes, causal ones, and those whose Q, K and V come from one GEMM.
    pub attention: AttentionStats,
    /// Convolutions switched to channels-last (NHWC).
    pub channels_last: usize,
    /// The rewrites behind each kernel a rewrite changed (recorded with
    /// [`Config::explain`]), in kernel order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<crate::explain::Chain>,
}

/// Attention facts for the report and tests.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AttentionStats {
    /// Fused attention nodes.
    pub fused: usize,
    /// Of which causal.
    pub causal: usize,
    /// Of which read Q, K and V from one GEMM.
    pub qkv_one_gemm: usize,
}

/// Why saturation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// No rule changed the e-graph any more.
    Saturated,
    /// The iteration budget ran out after this many iterations.
    IterationLimit(usize),
    /// The e-graph grew past the e-node budget, to this many e-nodes.
    NodeLimit(usize),
    /// Saturation did not run.
    NotRun,
}

impl Stop {
    /// The reason in a few words (`--explain`'s "stopped:").
    pub fn describe(self) -> String {
        match self {
            Stop::Saturated => "saturated".into(),
            Stop::IterationLimit(n) => format!("iteration limit ({n} iterations)"),
            Stop::NodeLimit(n) => format!("e-node limit ({n} e-nodes)"),
            Stop::NotRun => "not run".into(),
        }
    }

    /// A sentence when a budget cut saturation short (the result may be slower than a
    /// saturated one), `None` otherwise.
    pub fn budget_cut(self, cfg: &Config) -> Option<String> {
        match self {
            Stop::IterationLimit(n) => Some(format!(
                "saturation stopped at the iteration limit ({n} iterations, \
                 --max-iterations {})",
                cfg.budgets.iterations
            )),
            Stop::NodeLimit(n) => Some(format!(
                "saturation stopped at the e-node limit ({n} e-nodes, --max-nodes {})",
                cfg.budgets.nodes
            )),
            Stop::Saturated | Stop::NotRun => None,
        }
    }
}

/// What [`PassReport::new`] needs.
pub struct Inputs<'a> {
    /// The saturation's iterations.
    pub iterations: &'a [egg::Iteration<()>],
    /// Why saturation stopped.
    pub stop: Stop,
    /// Census before.
    pub before: Census,
    /// Census after.
    pub after: Census,
    /// Element-wise groups made.
    pub grouped: usize,
    /// Convolutions switched to channels-last.
    pub channels_last: usize,
    /// The optimized graph.
    pub graph: &'a Graph,
    /// The options.
    pub cfg: &'a Config,
    /// Stage timings.
    pub timings: Vec<(String, f64)>,
}

impl PassReport {
    /// Assembles the report.
    pub fn new(i: Inputs) -> PassReport {
        let mut fired: BTreeMap<String, usize> = BTreeMap::new();
        let mut iterations = Vec::new();
        for it in i.iterations {
            let mut applied = 0;
            for (r, n) in &it.applied {
                *fired.entry(r.to_string()).or_insert(0) += n;
                applied += n;
            }
            iterations.push(IterStat {
                nodes: it.egraph_nodes,
                classes: it.egraph_classes,
                applied,
                ms: it.total_time * 1e3,
            });
        }
        let mut rules_fired: Vec<(String, usize)> = fired.into_iter().collect();
        rules_fired.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let g = i.graph;
        let attention = attention_stats(g);
        let mut precisions = BTreeMap::new();
        for k in &i.after.kernel_list {
            *precisions.entry(k.precision.clone()).or_insert(0) += 1;
        }
        PassReport {
            precision: i.cfg.precision.name().into(),
            disabled: i
                .cfg
                .disabled
                .iter()
                .filter_map(|p| {
                    crate::Pass::ALL
                        .iter()
                        .find(|(_, q)| q == p)
                        .map(|(n, _)| n.to_string())
                })
                .collect(),
            stop_reason: i.stop.describe(),
            budget_cut: i.stop.budget_cut(i.cfg),
            iterations,
            rules_fired,
            fusions: fusions(g, &attention, i.grouped),
            padding: padding(g, &i.cfg.device),
            precisions,
            before: i.before,
            after: i.after,
            timings: i.timings,
            attention,
            channels_last: i.channels_last,
            chains: Vec::new(),
        }
    }

    /// Keeps the chains of the kernels the optimized graph still has (element-wise
    /// grouping and the layout pass replace some), in kernel order.
    pub fn keep_chains(&mut self, chains: Vec<crate::explain::Chain>) {
        let mut by_name: BTreeMap<String, crate::explain::Chain> =
            chains.into_iter().map(|c| (c.kernel.clone(), c)).collect();
        self.chains = self
            .after
            .kernel_list
            .iter()
            .filter_map(|k| by_name.remove(&k.name))
            .collect();
    }

    /// The report as text (what `gopt compile --explain` prints).
    pub fn explain(&self) -> String {
        let mut s = String::new();
        let disabled = if self.disabled.is_empty() {
            "none".into()
        } else {
            self.disabled.join(", ")
        };
        s += &format!(
            "optimizer: precision {}, passes disabled: {disabled}\n",
            self.precision
        );
        let sizes: Vec<String> = self
            .iterations
            .iter()
            .map(|it| format!("{}/{}", it.nodes, it.classes))
            .collect();
        s += &format!(
            "e-graph: {} iterations, stopped: {}; e-nodes/e-classes per iteration: {}\n",
            self.iterations.len(),
            self.stop_reason,
            sizes.join(", ")
        );
        if let Some(cut) = &self.budget_cut {
            s += &format!("budget: {cut}\n");
        }
        let fired: Vec<String> = self
            .rules_fired
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        s += &format!(
            "rules fired: {}\n",
            if fired.is_empty() {
                "none".into()
            } else {
                fired.join(", ")
            }
        );
        s += &format!(
            "nodes: {} -> {}, kernels: {} -> {}\n",
            self.before.nodes, self.after.nodes, self.before.kernels, self.after.kernels
        );
        s += &format!(
            "fused: {}\n",
            if self.fusions.is_empty() {
                "nothing".into()
            } else {
                self.fusions.join("; ")
            }
        );
        if self.channels_last > 0 {
            let transposes = self.after.ops.get("Transpose").copied().unwrap_or(0);
            s += &format!(
                "layout: {} channels-last, {} left\n",
                plural(self.channels_last, "conv", "convs"),
                plural(transposes, "transpose", "transposes")
            );
        }
        if !self.padding.is_empty() {
            let p: Vec<String> = self
                .padding
                .iter()
                .map(|p| format!("{} ({})", p.what, p.node))
                .collect();
            s += &format!("padding: {}\n", p.join("; "));
        }
        let pr: Vec<String> = self
            .precisions
            .iter()
            .map(|(p, n)| format!("{n} x {p}"))
            .collect();
        s += &format!("kernel precision: {}\n", pr.join(", "));
        s += &format!(
            "estimated time: {:.1} µs -> {:.1} µs ({:.2}x)\n",
            self.before.est_us,
            self.after.est_us,
            self.before.est_us / self.after.est_us.max(1e-9)
        );
        s += &self.after.kernel_table();
        s
    }
}

impl Census {
    /// Each kernel's estimate and predicted class, in graph order, after a line that
    /// counts the classes (what `--explain` prints; `gopt bench --profile` puts the
    /// measured ones beside these).
    pub fn kernel_table(&self) -> String {
        let mut classes: BTreeMap<&str, usize> = BTreeMap::new();
        for k in &self.kernel_list {
            *classes.entry(k.class.as_str()).or_insert(0) += 1;
        }
        let counts: Vec<String> = classes.iter().map(|(c, n)| format!("{n} {c}")).collect();
        let mut s = format!(
            "predicted classes: {}\nkernels (cost model: time, bytes moved, operations, unit, class):\n",
            if counts.is_empty() {
                "no kernels".into()
            } else {
                counts.join(", ")
            }
        );
        for k in &self.kernel_list {
            s += &format!(
                "  {:>9.2} µs  {:>9}  {:>9}  {:<4}  {:<14}  {} {} ({})\n",
                k.est_us,
                fmt_si(k.bytes, "B"),
                fmt_si(k.flops, "op"),
                k.unit,
                k.class,
                k.name,
                k.op,
                k.precision
            );
        }
        s
    }
}

/// `1.5 MB`, `3.2 Gop`: a count with an SI prefix.
pub fn fmt_si(x: f64, unit: &str) -> String {
    const PREFIXES: [(f64, &str); 5] =
        [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (scale, p) in PREFIXES {
        if x >= scale {
            return format!("{:.1} {p}{unit}", x / scale);
        }
    }
    format!("{x:.0} {unit}")
}

fn attention_stats(g: &Graph) -> AttentionStats {
    let producers = g.producers();
    let mut st = AttentionStats::default();
    // The GEMM a value comes from through views, transposes and slices.
    let source = |mut v: ValueId| -> Option<usize> {
        for _ in 0..16 {
            let (n, _) = producers.get(&v)?;
            let node = &g.nodes[n.index()];
            match node.op {
                Op::Fused(FusedOp::FusedMatMul) => return Some(n.index()),
                Op::Shape(
                    ShapeOp::Reshape
                    | ShapeOp::Transpose
                    | ShapeOp::Slice
                    | ShapeOp::Split
                    | ShapeOp::Squeeze
                    | ShapeOp::Unsqueeze,
                )
                | Op::Elementwise(ElementwiseOp::Cast) => {
                    v = node.inputs.first().copied().flatten()?
                }
                _ => return None,
            }
        }
        None
    };
    for n in &g.nodes {
        if n.op != Op::Attention(AttentionOp::Attention) {
            continue;
        }
        st.fused += 1;
        if n.attrs.int_or("is_causal", 0).unwrap_or(0) != 0 {
            st.causal += 1;
        }
        let srcs: Vec<Option<usize>> = n
            .inputs
            .iter()
            .take(3)
            .map(|v| v.and_then(source))
            .collect();
        if srcs.len() == 3 && srcs[0].is_some() && srcs.iter().all(|s| *s == srcs[0]) {
            st.qkv_one_gemm += 1;
        }
    }
    st
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn fusions(g: &Graph, att: &AttentionStats, grouped: usize) -> Vec<String> {
    let count = |op: Op| g.nodes.iter().filter(|n| n.op == op).count();
    let mut out = Vec::new();
    if att.fused > 0 {
        out.push(format!(
            "{} ({} causal, {} with Q/K/V from one GEMM)",
            plural(att.fused, "attention block", "attention blocks"),
            att.causal,
            att.qkv_one_gemm
        ));
    }
    let ln = count(Op::Reduce(ReduceOp::LayerNormalization));
    if ln > 0 {
        out.push(plural(ln, "LayerNorm", "LayerNorms"));
    }
    let rms = count(Op::Reduce(ReduceOp::RMSNormalization));
    if rms > 0 {
        out.push(plural(rms, "RMSNorm", "RMSNorms"));
    }
    let gelu_ops = count(Op::Elementwise(ElementwiseOp::Gelu));
    let mut epis: BTreeMap<String, usize> = BTreeMap::new();
    let mut conv_epis: BTreeMap<String, usize> = BTreeMap::new();
    let mut gelu_in_gemm = 0;
    for n in &g.nodes {
        match n.op {
            Op::Fused(FusedOp::FusedMatMul) => {
                let e = epilogue(g, n);
                if e.contains("gelu") {
                    gelu_in_gemm += 1;
                }
                *epis.entry(e).or_insert(0) += 1;
            }
            Op::Fused(FusedOp::FusedConv) => *conv_epis.entry(epilogue(g, n)).or_insert(0) += 1,
            _ => {}
        }
    }
    if gelu_ops + gelu_in_gemm > 0 {
        out.push(format!(
            "{} ({} in GEMM epilogues)",
            plural(gelu_ops + gelu_in_gemm, "GELU", "GELUs"),
            gelu_in_gemm
        ));
    }
    let list = |m: &BTreeMap<String, usize>| {
        m.iter()
            .map(|(e, n)| format!("{n} {e}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !epis.is_empty() {
        let n: usize = epis.values().sum();
        out.push(format!(
            "{} ({})",
            plural(n, "GEMM with epilogue", "GEMMs with epilogues"),
            list(&epis)
        ));
    }
    if !conv_epis.is_empty() {
        let n: usize = conv_epis.values().sum();
        out.push(format!(
            "{} ({})",
            plural(n, "fused conv", "fused convs"),
            list(&conv_epis)
        ));
    }
    if grouped > 0 {
        out.push(plural(grouped, "element-wise group", "element-wise groups"));
    }
    out
}

fn padding(g: &Graph, t: &Target) -> Vec<Padding> {
    let mut out = Vec::new();
    for n in &g.nodes {
        if n.op != Op::Fused(FusedOp::FusedMatMul) {
            continue;
        }
        let pn = n.attrs.int("pad_n").ok().flatten();
        let pk = n.attrs.int("pad_k").ok().flatten();
        if pn.is_none() && pk.is_none() {
            continue;
        }
        let shape = |i: usize| {
            n.inputs
                .get(i)
                .copied()
                .flatten()
                .and_then(|v| g.value(v).ty.as_ref())
                .and_then(|t| gopt_ir::dim::concrete(&t.shape))
        };
        let (Some(a), Some(w)) = (shape(0), shape(1)) else {
            continue;
        };
        let Some(dt) = n.inputs[0]
            .and_then(|v| g.value(v).ty.as_ref())
            .map(|t| t.dtype)
        else {
            continue;
        };
        let m: usize = a[..a.len() - 1].iter().product();
        let (Some(&k), Some(&nn)) = (w.first(), w.get(1)) else {
            continue;
        };
        let (k0, n0) = (pk.map_or(k, |v| v as usize), pn.map_or(nn, |v| v as usize));
        let before = crate::cost::gemm_compute(t, 1, m, n0, k0, dt) * 1e6;
        let after = crate::cost::gemm_compute(t, 1, m, nn, k, dt) * 1e6;
        let mut what = Vec::new();
        if k0 != k {
            what.push(format!("K {k0} -> {k}"));
        }
        if n0 != nn {
            what.push(format!("N {n0} -> {nn}"));
        }
        out.push(Padding {
            node: n.name.clone(),
            what: format!(
                "GEMM {}: est. compute {before:.2} µs -> {after:.2} µs",
                what.join(", ")
            ),
        });
    }
    out
}

/// Per-node costs of an e-graph's chosen terms (for tests and tools).
pub fn term_cost(t: &Target, eg: &Egraph, class: egg::Id, term: &Term) -> f64 {
    node_cost(t, eg, class, term)
}
