//! What gopt can import: opset ranges, domains, and a scan of a whole model (sub-graphs
//! included) that lists every unsupported node at once, before any conversion starts.

use super::attrs;
use super::error::UnsupportedItem;
use super::int4;
use super::proto;
use super::upgrade;
use std::collections::{HashMap, HashSet};

/// Lowest default-domain opset gopt imports.
pub(crate) const MIN_OPSET: i64 = 7;
/// Highest default-domain opset gopt imports.
pub(crate) const MAX_OPSET: i64 = 28;

/// Below `MIN_OPSET`, the default-domain ops whose opset-7 form already existed, with
/// the opset that introduced that form (from ONNX's schema history): a node of such an
/// op at an opset at least that high imports as at opset 7. Any other old node is
/// unsupported.
const SAME_AS_7_SINCE: &[(&str, i64)] = &[
    ("Abs", 6),
    ("Add", 7),
    ("And", 7),
    ("ArgMax", 1),
    ("ArgMin", 1),
    ("AveragePool", 7),
    ("BatchNormalization", 7),
    ("Cast", 6),
    ("Ceil", 6),
    ("Clip", 6),
    ("Concat", 4),
    ("Constant", 1),
    ("Conv", 1),
    ("ConvTranspose", 1),
    ("DepthToSpace", 1),
    ("Div", 7),
    ("Dropout", 7),
    ("Elu", 6),
    ("Equal", 7),
    ("Exp", 6),
    ("Flatten", 1),
    ("Floor", 6),
    ("GRU", 7),
    ("Gather", 1),
    ("Gemm", 7),
    ("GlobalAveragePool", 1),
    ("GlobalLpPool", 2),
    ("GlobalMaxPool", 1),
    ("Greater", 7),
    ("HardSigmoid", 6),
    ("Hardmax", 1),
    ("Identity", 1),
    ("If", 1),
    ("InstanceNormalization", 6),
    ("LRN", 1),
    ("LSTM", 7),
    ("LeakyRelu", 6),
    ("Less", 7),
    ("Log", 6),
    ("LogSoftmax", 1),
    ("Loop", 1),
    ("LpNormalization", 1),
    ("LpPool", 2),
    ("MatMul", 1),
    ("Max", 6),
    ("MaxPool", 1),
    ("MaxRoiPool", 1),
    ("Mean", 6),
    ("Min", 6),
    ("Mul", 7),
    ("Neg", 6),
    ("Not", 1),
    ("Or", 7),
    ("PRelu", 7),
    ("Pad", 2),
    ("Pow", 7),
    ("RNN", 7),
    ("RandomNormal", 1),
    ("RandomNormalLike", 1),
    ("RandomUniform", 1),
    ("RandomUniformLike", 1),
    ("Reciprocal", 6),
    ("ReduceL1", 1),
    ("ReduceL2", 1),
    ("ReduceLogSum", 1),
    ("ReduceLogSumExp", 1),
    ("ReduceMax", 1),
    ("ReduceMean", 1),
    ("ReduceMin", 1),
    ("ReduceProd", 1),
    ("ReduceSum", 1),
    ("ReduceSumSquare", 1),
    ("Relu", 6),
    ("Reshape", 5),
    ("Selu", 6),
    ("Shape", 1),
    ("Sigmoid", 6),
    ("Size", 1),
    ("Slice", 1),
    ("Softmax", 1),
    ("Softplus", 1),
    ("Softsign", 1),
    ("SpaceToDepth", 1),
    ("Split", 2),
    ("Sqrt", 6),
    ("Squeeze", 1),
    ("Sub", 7),
    ("Sum", 6),
    ("Tanh", 6),
    ("Tile", 6),
    ("TopK", 1),
    ("Transpose", 1),
    ("Unsqueeze", 1),
    ("Upsample", 7),
    ("Xor", 7),
];

/// Domains whose ops the IR names by their bare ONNX op type.
const DOMAINS: [&str; 5] = [
    "ai.onnx",
    "ai.onnx.ml",
    "ai.onnx.preview.training",
    "ai.onnx.preview",
    CONTRIB,
];

/// ONNX Runtime's contrib domain, of which gopt imports only [`CONTRIB_OPS`].
const CONTRIB: &str = "com.microsoft";

/// The `com.microsoft` ops the IR has (under the same name), and no others: the
/// packed low-bit weights int4 LLM exports carry.
const CONTRIB_OPS: [&str; 1] = ["MatMulNBits"];

/// The opset versions a model imports, by canonical domain.
#[derive(Clone, Debug, Default)]
pub(crate) struct Opsets(HashMap<String, i64>);

impl Opsets {
    /// Reads `opset_import`.
    pub(crate) fn from_model(m: &proto::ModelProto) -> Opsets {
        Opsets(super::opset_list(m).into_iter().collect())
    }

    /// Version imported for `domain` (canonical spelling).
    pub(crate) fn get(&self, domain: &str) -> Option<i64> {
        self.0.get(domain).copied()
    }
}

/// Node names for a graph's nodes: the model's, or `<op_type>_<index>` for empty ones,
/// made unique.
pub(crate) fn node_names(gp: &proto::GraphProto) -> Vec<String> {
    let mut used: HashSet<String> = gp
        .node
        .iter()
        .filter_map(|n| n.name.clone())
        .filter(|n| !n.is_empty())
        .collect();
    gp.node
        .iter()
        .enumerate()
        .map(|(i, n)| match n.name.as_deref() {
            Some(s) if !s.is_empty() => s.to_string(),
            _ => {
                let base = format!("{}_{i}", n.op_type.as_deref().unwrap_or("node"));
                let mut name = base.clone();
                let mut k = 1;
                while used.contains(&name) {
                    name = format!("{base}_{k}");
                    k += 1;
                }
                used.insert(name.clone());
                name
            }
        })
        .collect()
}

/// Every unsupported construct of a model (its functions already inlined): a
/// default-domain opset out of range, and each node (in sub-graphs too) gopt cannot
/// import, with the reason.
pub(crate) fn scan_model(m: &proto::ModelProto) -> Vec<UnsupportedItem> {
    let opsets = Opsets::from_model(m);
    let mut items = Vec::new();
    if let Some(v) = opsets.get("ai.onnx") {
        if !(1..=MAX_OPSET).contains(&v) {
            items.push(UnsupportedItem {
                node: String::new(),
                op: String::new(),
                domain: "ai.onnx".into(),
                opset: v,
                reason: format!("opset {v} is outside the range gopt imports (up to {MAX_OPSET})"),
            });
        }
    }
    if let Some(g) = &m.graph {
        scan_graph(g, &opsets, &mut items);
    }
    items
}

fn scan_graph(gp: &proto::GraphProto, opsets: &Opsets, items: &mut Vec<UnsupportedItem>) {
    for (node, name) in gp.node.iter().zip(node_names(gp)) {
        let op = node.op_type.as_deref().unwrap_or("");
        let domain = super::canonical_domain(node.domain.as_deref().unwrap_or(""));
        let opset = opsets.get(domain).unwrap_or(0);
        let reason = node_reason(node, domain, opsets);
        if let Some(reason) = reason {
            items.push(UnsupportedItem {
                node: name,
                op: op.to_string(),
                domain: domain.to_string(),
                opset,
                reason,
            });
        }
        for a in &node.attribute {
            if let Some(g) = &a.g {
                scan_graph(g, opsets, items);
            }
        }
    }
}

/// Why one node cannot be imported (ignoring its sub-graphs), if it cannot.
fn node_reason(node: &proto::NodeProto, domain: &str, opsets: &Opsets) -> Option<String> {
    let op = node.op_type.as_deref().unwrap_or("");
    if !DOMAINS.contains(&domain) {
        return Some(format!("domain `{domain}` is not supported"));
    }
    let Some(opset) = opsets.get(domain) else {
        return Some(format!("the model does not import domain `{domain}`"));
    };
    if (domain == CONTRIB) != CONTRIB_OPS.contains(&op) {
        return Some(match domain == CONTRIB {
            true => format!(
                "gopt imports only {} from domain `{CONTRIB}`",
                CONTRIB_OPS.join(", ")
            ),
            false => format!("`{op}` is an op of domain `{CONTRIB}`, not of `{domain}`"),
        });
    }
    if domain == "ai.onnx" && !(1..=MAX_OPSET).contains(&opset) {
        // Reported once for the whole model.
        return None;
    }
    if domain == "ai.onnx" && opset < MIN_OPSET {
        let since = SAME_AS_7_SINCE
            .iter()
            .find(|(o, _)| *o == op)
            .map(|&(_, v)| v);
        match since {
            Some(v) if opset < v => {
                return Some(format!(
                    "this op changed between opset {opset} and {v}; gopt imports it from opset {v}"
                ))
            }
            None => {
                return Some(format!(
                    "gopt imports this op from opset {MIN_OPSET} on (the model has {opset})"
                ))
            }
            Some(_) => {}
        }
    }
    let mut reasons = Vec::new();
    if op == "Constant" && domain == "ai.onnx" {
        for a in &node.attribute {
            match a.name.as_deref() {
                Some("value_string" | "value_strings") => {
                    reasons.push("string constants are not supported".to_string())
                }
                // 4-bit constants are read widened (see `int4`).
                Some("value") if a.t.as_ref().and_then(int4::code_of).is_some() => {}
                _ => reasons.extend(attrs::unsupported_reason(a)),
            }
        }
        return join(reasons);
    }
    match upgrade::needed_ops(node, op, domain, opset) {
        Err(reason) => reasons.push(reason),
        Ok(ops) => {
            for needed in ops {
                if gopt_ir::Op::from_onnx_name(needed).is_none() {
                    reasons.push(if needed == op {
                        "gopt does not implement this op".to_string()
                    } else {
                        format!(
                            "its upgrade to the latest opset needs `{needed}`, which gopt lacks"
                        )
                    });
                }
            }
        }
    }
    reasons.extend(node.attribute.iter().filter_map(attrs::unsupported_reason));
    join(reasons)
}

fn join(reasons: Vec<String>) -> Option<String> {
    (!reasons.is_empty()).then(|| reasons.join("; "))
}
