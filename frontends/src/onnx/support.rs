//! What gopt can import: opset ranges, domains, and a scan of a whole model (sub-graphs
//! included) that lists every unsupported node at once, before any conversion starts.

use super::attrs;
use super::error::UnsupportedItem;
use super::proto;
use super::upgrade;
use std::collections::{HashMap, HashSet};

/// Lowest default-domain opset gopt imports.
pub(crate) const MIN_OPSET: i64 = 7;
/// Highest default-domain opset gopt imports.
pub(crate) const MAX_OPSET: i64 = 28;

/// Domains whose ops the IR names by their bare ONNX op type.
const DOMAINS: [&str; 4] = [
    "ai.onnx",
    "ai.onnx.ml",
    "ai.onnx.preview.training",
    "ai.onnx.preview",
];

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

/// Every unsupported construct of the model: a default-domain opset out of range, and
/// each node (in sub-graphs too) gopt cannot import, with the reason.
pub(crate) fn scan_model(m: &proto::ModelProto) -> Vec<UnsupportedItem> {
    let opsets = Opsets::from_model(m);
    let mut items = Vec::new();
    if let Some(v) = opsets.get("ai.onnx") {
        if !(MIN_OPSET..=MAX_OPSET).contains(&v) {
            items.push(UnsupportedItem {
                node: String::new(),
                op: String::new(),
                domain: "ai.onnx".into(),
                opset: v,
                reason: format!(
                    "opset {v} is outside the range gopt imports ({MIN_OPSET} to {MAX_OPSET})"
                ),
            });
        }
    }
    let functions: HashSet<(String, String)> = m
        .functions
        .iter()
        .map(|f| {
            (
                super::canonical_domain(f.domain.as_deref().unwrap_or("")).to_string(),
                f.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    if let Some(g) = &m.graph {
        scan_graph(g, &opsets, &functions, &mut items);
    }
    items
}

fn scan_graph(
    gp: &proto::GraphProto,
    opsets: &Opsets,
    functions: &HashSet<(String, String)>,
    items: &mut Vec<UnsupportedItem>,
) {
    for (node, name) in gp.node.iter().zip(node_names(gp)) {
        let op = node.op_type.as_deref().unwrap_or("");
        let domain = super::canonical_domain(node.domain.as_deref().unwrap_or(""));
        let opset = opsets.get(domain).unwrap_or(0);
        let reason = if functions.contains(&(domain.to_string(), op.to_string())) {
            Some(format!(
                "calls the model-local function `{op}`, which gopt does not inline"
            ))
        } else {
            node_reason(node, domain, opsets)
        };
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
                scan_graph(g, opsets, functions, items);
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
    if domain == "ai.onnx" && !(MIN_OPSET..=MAX_OPSET).contains(&opset) {
        // Reported once for the whole model.
        return None;
    }
    let mut reasons = Vec::new();
    if op == "Constant" && domain == "ai.onnx" {
        for a in &node.attribute {
            match a.name.as_deref() {
                Some("value_string" | "value_strings") => {
                    reasons.push("string constants are not supported".to_string())
                }
                _ => reasons.extend(attrs::unsupported_reason(a)),
            }
        }
        return join(reasons);
    }
    match upgrade::needed_ops(node, op, domain, opset) {
        Err(reason) => reasons.push(reason),
        Ok(ops) => {
            for needed in ops {
                if gopt_ir::Op::from_name(needed).is_none() {
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
