//! Model-local functions (`ModelProto.functions`): every call is replaced by the
//! function's body before conversion, so the rest of the importer sees plain nodes.
//!
//! A body is closed (it reads only its formal inputs), so inlining renames every name in
//! it: formals become the call's actual names and everything else gets a prefix unique
//! to the call. Attribute references (`ref_attr_name`) take the call's attribute or the
//! function's default; calls inside bodies are inlined in turn.

use super::error::{ImportError, Result, UnsupportedItem};
use super::proto::{self, FunctionProto, GraphProto, ModelProto, NodeProto};
use std::borrow::Cow;
use std::collections::HashMap;

/// Deepest chain of nested function calls inlined (deeper means recursion).
const MAX_DEPTH: usize = 32;

type Key = (String, String, String);

fn key(domain: Option<&str>, name: Option<&str>, overload: Option<&str>) -> Key {
    (
        super::canonical_domain(domain.unwrap_or("")).to_string(),
        name.unwrap_or("").to_string(),
        overload.unwrap_or("").to_string(),
    )
}

/// The model with every call of a model-local function inlined (borrowed unchanged
/// when it has no functions).
pub(crate) fn inline(m: &ModelProto) -> Result<Cow<'_, ModelProto>> {
    if m.functions.is_empty() {
        return Ok(Cow::Borrowed(m));
    }
    let fns: HashMap<Key, &FunctionProto> = m
        .functions
        .iter()
        .map(|f| {
            (
                key(
                    f.domain.as_deref(),
                    f.name.as_deref(),
                    f.overload.as_deref(),
                ),
                f,
            )
        })
        .collect();
    let opsets: HashMap<String, i64> = super::opset_list(m).into_iter().collect();
    let cx = Inliner { fns, opsets };
    let mut out = m.clone();
    if let Some(g) = &m.graph {
        out.graph = Some(cx.graph(g, 0)?);
    }
    out.functions.clear();
    Ok(Cow::Owned(out))
}

struct Inliner<'a> {
    fns: HashMap<Key, &'a FunctionProto>,
    opsets: HashMap<String, i64>,
}

impl Inliner<'_> {
    fn graph(&self, g: &GraphProto, depth: usize) -> Result<GraphProto> {
        let mut out = g.clone();
        out.node = self.nodes(&g.node, depth, &super::support::node_names(g))?;
        Ok(out)
    }

    /// Expands calls among `nodes`; `names` are the nodes' (generated) names.
    fn nodes(&self, nodes: &[NodeProto], depth: usize, names: &[String]) -> Result<Vec<NodeProto>> {
        let mut out = Vec::with_capacity(nodes.len());
        for (n, name) in nodes.iter().zip(names) {
            let mut n = n.clone();
            for a in &mut n.attribute {
                if let Some(g) = &a.g {
                    a.g = Some(self.graph(g, depth)?);
                }
            }
            let k = key(
                n.domain.as_deref(),
                n.op_type.as_deref(),
                n.overload.as_deref(),
            );
            match self.fns.get(&k) {
                None => out.push(n),
                Some(f) => out.extend(self.call(f, &n, name, depth)?),
            }
        }
        Ok(out)
    }

    fn unsupported(&self, call: &NodeProto, name: &str, reason: String) -> ImportError {
        let domain = super::canonical_domain(call.domain.as_deref().unwrap_or("")).to_string();
        ImportError::unsupported_one(UnsupportedItem {
            node: name.to_string(),
            op: call.op_type.clone().unwrap_or_default(),
            opset: self.opsets.get(&domain).copied().unwrap_or(0),
            domain,
            reason,
        })
    }

    /// The body of `f` instantiated for `call` (named `name`).
    fn call(
        &self,
        f: &FunctionProto,
        call: &NodeProto,
        name: &str,
        depth: usize,
    ) -> Result<Vec<NodeProto>> {
        let fname = f.name.as_deref().unwrap_or("");
        if depth >= MAX_DEPTH {
            return Err(self.unsupported(
                call,
                name,
                format!("function `{fname}` nests calls deeper than {MAX_DEPTH} (recursion?)"),
            ));
        }
        for o in &f.opset_import {
            let d = super::canonical_domain(o.domain.as_deref().unwrap_or(""));
            let v = o.version.unwrap_or(0);
            if let Some(&mv) = self.opsets.get(d) {
                if mv != v {
                    return Err(self.unsupported(
                        call,
                        name,
                        format!("function `{fname}` uses {d} opset {v}, the model {mv}"),
                    ));
                }
            }
        }
        let prefix = format!("{name}/");
        let mut rename: HashMap<&str, String> = HashMap::new();
        for (k, formal) in f.input.iter().enumerate() {
            rename.insert(formal, call.input.get(k).cloned().unwrap_or_default());
        }
        for (k, formal) in f.output.iter().enumerate() {
            let actual = call.output.get(k).filter(|o| !o.is_empty()).cloned();
            rename.insert(
                formal,
                actual.unwrap_or_else(|| format!("{prefix}{formal}")),
            );
        }
        let attrs: HashMap<&str, &proto::AttributeProto> = call
            .attribute
            .iter()
            .chain(&f.attribute_proto)
            .filter_map(|a| a.name.as_deref().map(|n| (n, a)))
            .rev()
            .collect();
        let r = Renamer {
            prefix: &prefix,
            rename: &rename,
            attrs: &attrs,
        };
        let body: Vec<NodeProto> = f.node.iter().map(|n| r.node(n)).collect();
        let names: Vec<String> = body
            .iter()
            .enumerate()
            .map(|(i, n)| match n.name.as_deref() {
                Some(s) if !s.is_empty() => s.to_string(),
                _ => format!("{prefix}{}_{i}", n.op_type.as_deref().unwrap_or("node")),
            })
            .collect();
        let mut body = body;
        for (n, nm) in body.iter_mut().zip(&names) {
            n.name = Some(nm.clone());
        }
        self.nodes(&body, depth + 1, &names)
    }
}

/// Renames the names of one function instantiation and resolves attribute references.
struct Renamer<'a> {
    prefix: &'a str,
    rename: &'a HashMap<&'a str, String>,
    attrs: &'a HashMap<&'a str, &'a proto::AttributeProto>,
}

impl Renamer<'_> {
    fn name(&self, n: &str) -> String {
        if n.is_empty() {
            return String::new();
        }
        match self.rename.get(n) {
            Some(actual) => actual.clone(),
            None => format!("{}{n}", self.prefix),
        }
    }

    fn node(&self, n: &NodeProto) -> NodeProto {
        let mut out = n.clone();
        out.input = n.input.iter().map(|i| self.name(i)).collect();
        out.output = n.output.iter().map(|o| self.name(o)).collect();
        if let Some(nm) = n.name.as_deref().filter(|s| !s.is_empty()) {
            out.name = Some(format!("{}{nm}", self.prefix));
        }
        out.attribute = n.attribute.iter().filter_map(|a| self.attr(a)).collect();
        out
    }

    /// The attribute with references resolved (`None`: a reference to an attribute the
    /// call does not set and the function gives no default for, which means absent).
    fn attr(&self, a: &proto::AttributeProto) -> Option<proto::AttributeProto> {
        if let Some(r) = a.ref_attr_name.as_deref().filter(|r| !r.is_empty()) {
            let mut v = (*self.attrs.get(r)?).clone();
            v.name = a.name.clone();
            v.ref_attr_name = None;
            return Some(v);
        }
        let mut a = a.clone();
        if let Some(g) = &a.g {
            a.g = Some(self.graph(g));
        }
        Some(a)
    }

    fn graph(&self, g: &GraphProto) -> GraphProto {
        let mut out = g.clone();
        let vi = |v: &proto::ValueInfoProto| {
            let mut v = v.clone();
            v.name = v.name.as_deref().map(|n| self.name(n));
            v
        };
        out.input = g.input.iter().map(vi).collect();
        out.output = g.output.iter().map(vi).collect();
        out.value_info = g.value_info.iter().map(vi).collect();
        for t in &mut out.initializer {
            t.name = t.name.as_deref().map(|n| self.name(n));
        }
        for s in &mut out.sparse_initializer {
            if let Some(v) = &mut s.values {
                v.name = v.name.as_deref().map(|n| self.name(n));
            }
        }
        out.node = g.node.iter().map(|n| self.node(n)).collect();
        out
    }
}
