//! Graph conversion: ONNX `GraphProto` → `gopt_ir::Graph`, recursively for sub-graphs.
//!
//! Each graph is converted in two passes: the first defines every name (inputs,
//! initializers, node outputs, `Constant` values), the second builds nodes, so nodes may
//! appear in any order. A name a sub-graph reads but does not define becomes a capture,
//! and the enclosing graph resolves it in turn (capturing it too when it is itself a
//! sub-graph), so captures propagate through any nesting depth.

use super::attrs::{self, Converted};
use super::error::{ImportError, Result};
use super::int4;
use super::proto;
use super::support::{self, Opsets};
use super::tensor::{const_from_proto, sparse_to_dense, tensor_from_proto};
use super::upgrade::{self, OnnxNode};
use gopt_ir::{Attrs, Dim, Graph, Model, Node, Op, Tensor, TensorType, ValueId};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Converts a decoded model (opsets checked, every op supported) to the IR.
pub(crate) fn convert_model(m: &proto::ModelProto, base_dir: Option<&Path>) -> Result<Model> {
    let m = super::functions::inline(m)?;
    let m = m.as_ref();
    let items = support::scan_model(m);
    if !items.is_empty() {
        return Err(ImportError::Unsupported { items });
    }
    let gp = m.graph.as_ref().ok_or_else(|| ImportError::NotAModel {
        what: "model".into(),
        msg: "no graph".into(),
    })?;
    let mut cx = Cx {
        opsets: Opsets::from_model(m),
        base_dir,
        unknown_dims: 0,
    };
    let graph = cx.graph(gp, false)?;
    let mut model = Model {
        graph,
        meta: Default::default(),
    };
    let meta = &mut model.meta;
    meta.insert("source".into(), "onnx".into());
    meta.insert(
        "onnx.ir_version".into(),
        m.ir_version.unwrap_or(0).to_string(),
    );
    meta.insert("onnx.producer".into(), super::producer(m));
    for (d, v) in super::opset_list(m) {
        meta.insert(format!("onnx.opset.{d}"), v.to_string());
    }
    if let Some(d) = m.domain.as_deref().filter(|d| !d.is_empty()) {
        meta.insert("onnx.domain".into(), d.to_string());
    }
    if let Some(v) = m.model_version {
        meta.insert("onnx.model_version".into(), v.to_string());
    }
    for p in &m.metadata_props {
        if let (Some(k), Some(v)) = (&p.key, &p.value) {
            meta.insert(format!("onnx.meta.{k}"), v.clone());
        }
    }
    Ok(model)
}

/// Model-wide conversion state.
struct Cx<'a> {
    opsets: Opsets,
    base_dir: Option<&'a Path>,
    unknown_dims: u32,
}

/// The graph being built, with its name scope.
pub(crate) struct Builder {
    pub(crate) g: Graph,
    /// ONNX value names defined in (or captured into) this graph.
    names: HashMap<String, ValueId>,
    /// Every value name in use, ONNX and generated.
    used: HashSet<String>,
    /// Node names in use.
    node_names: HashSet<String>,
    /// True for sub-graphs, which may capture outer names.
    sub: bool,
    /// Values holding 4-bit data widened to 8 bits, with their ONNX code ([`int4`]).
    widened: HashMap<ValueId, i32>,
}

impl Builder {
    fn new(name: &str, sub: bool) -> Builder {
        Builder {
            g: Graph::new(name),
            names: HashMap::new(),
            used: HashSet::new(),
            node_names: HashSet::new(),
            sub,
            widened: HashMap::new(),
        }
    }

    /// An unused value name based on `base`.
    fn fresh_name(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while self.used.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.used.insert(name.clone());
        name
    }

    /// An unused node name based on `base`.
    pub(crate) fn fresh_node_name(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while self.node_names.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.node_names.insert(name.clone());
        name
    }

    /// Defines ONNX name `name`; fails if it is already defined in this graph.
    fn define(&mut self, name: &str, v: ValueId, what: &str, node: &str) -> Result<()> {
        if self.names.insert(name.to_string(), v).is_some() {
            return Err(ImportError::invalid(
                node,
                format!("value `{name}` is defined twice (again as {what})"),
            ));
        }
        self.used.insert(name.to_string());
        Ok(())
    }

    /// Resolves an ONNX name; in a sub-graph an unknown name becomes a capture.
    fn lookup(&mut self, name: &str) -> Option<ValueId> {
        if let Some(&v) = self.names.get(name) {
            return Some(v);
        }
        if !self.sub {
            return None;
        }
        let v = self.g.add_value(name, None);
        self.g.captures.push(v);
        self.names.insert(name.to_string(), v);
        self.used.insert(name.to_string());
        Some(v)
    }

    /// Records that constant `v` was read from a tensor of element type `code`, if that
    /// is 4-bit (its data widened).
    fn mark_widened(&mut self, v: ValueId, code: Option<i32>) {
        if let Some(c) = code.filter(|&c| int4::widened(c).is_some()) {
            self.widened.insert(v, c);
        }
    }

    /// A new untyped value for an intermediate result.
    pub(crate) fn new_value(&mut self, base: &str) -> ValueId {
        let name = self.fresh_name(base);
        self.g.add_value(&name, None)
    }

    /// A new constant.
    pub(crate) fn add_const(&mut self, base: &str, t: Tensor) -> ValueId {
        let name = self.fresh_name(base);
        self.g.add_const(&name, t)
    }

    /// The declared type of a value (graph input, constant, or value_info), if any.
    pub(crate) fn declared(&self, v: ValueId) -> Option<&TensorType> {
        self.g.value(v).ty.as_ref()
    }

    /// Appends a node running IR op `op` (by ONNX name).
    pub(crate) fn push(
        &mut self,
        name: String,
        op: &str,
        attrs: Attrs,
        inputs: Vec<Option<ValueId>>,
        outputs: Vec<ValueId>,
    ) -> Result<()> {
        let op = Op::from_onnx_name(op).ok_or_else(|| {
            ImportError::invalid(format!("`{name}`"), format!("gopt has no `{op}` op"))
        })?;
        self.node_names.insert(name.clone());
        self.g.nodes.push(Node {
            name,
            op,
            attrs,
            inputs,
            outputs,
        });
        Ok(())
    }
}

/// "`name` (Op, opset N)" for messages.
pub(crate) fn describe(name: &str, op: &str, opset: i64) -> String {
    format!("`{name}` ({op}, opset {opset})")
}

impl Cx<'_> {
    fn value_type(&mut self, vi: &proto::ValueInfoProto) -> Result<Option<TensorType>> {
        let mut n = self.unknown_dims;
        let r = attrs::value_type(vi, &mut || {
            n += 1;
            Dim::sym(&format!("unk__{n}"))
        });
        self.unknown_dims = n;
        r
    }

    /// Converts a graph; `sub` for sub-graphs, whose captures the caller resolves in
    /// the enclosing scope.
    fn graph(&mut self, gp: &proto::GraphProto, sub: bool) -> Result<Graph> {
        let mut b = Builder::new(gp.name.as_deref().unwrap_or(""), sub);
        self.define_inputs(&mut b, gp)?;
        let names = support::node_names(gp);
        for n in &names {
            b.node_names.insert(n.clone());
        }
        let mut pending = Vec::new();
        for (node, name) in gp.node.iter().zip(&names) {
            if let Some(outs) = self.define_node(&mut b, node, name)? {
                pending.push((node, name, outs));
            }
        }
        self.declare_types(&mut b, gp)?;
        for (node, name, outs) in pending {
            self.node(&mut b, node, name, outs)?;
        }
        for o in &gp.output {
            let name = o.name.as_deref().unwrap_or("");
            let v = b.lookup(name).ok_or_else(|| {
                ImportError::invalid("", format!("graph output `{name}` is never produced"))
            })?;
            if let Some(dtype) = b.widened.get(&v).and_then(|&c| int4::value_reason(c)) {
                let tensor = name.to_string();
                return Err(ImportError::UnsupportedDType { tensor, dtype });
            }
            b.g.outputs.push(v);
        }
        Ok(b.g)
    }

    /// Initializers become constants; inputs without an initializer become inputs.
    fn define_inputs(&mut self, b: &mut Builder, gp: &proto::GraphProto) -> Result<()> {
        for t in &gp.initializer {
            let name = t.name.as_deref().unwrap_or("");
            if name.is_empty() {
                return Err(ImportError::invalid("", "an initializer has no name"));
            }
            let data = const_from_proto(t, self.base_dir)?;
            let v = b.g.add_const(name, data);
            b.define(name, v, "an initializer", "")?;
            b.mark_widened(v, t.data_type);
        }
        for s in &gp.sparse_initializer {
            let name = s
                .values
                .as_ref()
                .and_then(|v| v.name.as_deref())
                .unwrap_or("");
            if name.is_empty() {
                return Err(ImportError::invalid("", "a sparse initializer has no name"));
            }
            let data = sparse_to_dense(s, self.base_dir)?;
            let v = b.g.add_const(name, data);
            b.define(name, v, "a sparse initializer", "")?;
            b.mark_widened(v, s.values.as_ref().and_then(|t| t.data_type));
        }
        for vi in &gp.input {
            let name = vi.name.as_deref().unwrap_or("");
            if let Some(&v) = b.names.get(name) {
                if b.g.konst(v).is_some() {
                    // An input with an initializer is a constant with a default.
                    continue;
                }
            }
            if name.is_empty() {
                return Err(ImportError::invalid("", "a graph input has no name"));
            }
            let ty = self.value_type(vi)?;
            if ty.is_none() && !b.sub {
                return Err(ImportError::invalid(
                    "",
                    format!("graph input `{name}` has no tensor type with a shape"),
                ));
            }
            let v = b.g.add_value(name, ty);
            b.g.inputs.push(v);
            b.define(name, v, "a graph input", "")?;
        }
        Ok(())
    }

    /// First pass over a node: defines its outputs. `Constant` nodes become constants
    /// here (returns `None`); other nodes return their output values.
    fn define_node(
        &mut self,
        b: &mut Builder,
        node: &proto::NodeProto,
        name: &str,
    ) -> Result<Option<Vec<ValueId>>> {
        let op_type = node.op_type.as_deref().unwrap_or("");
        let domain = super::canonical_domain(node.domain.as_deref().unwrap_or(""));
        let opset = self.opsets.get(domain).unwrap_or(0);
        let desc = describe(name, op_type, opset);
        if op_type == "Constant" && domain == "ai.onnx" {
            let t = constant_value(node, &desc, self.base_dir)?;
            let out = match node.output.as_slice() {
                [o] if !o.is_empty() => o,
                _ => return Err(ImportError::invalid(desc, "Constant must have one output")),
            };
            let v = b.g.add_const(out, t);
            b.define(out, v, &format!("output of {desc}"), &desc)?;
            b.mark_widened(v, constant_code(node));
            return Ok(None);
        }
        // Omitted trailing outputs are dropped, as if the model never listed them.
        let count = node
            .output
            .iter()
            .rposition(|o| !o.is_empty())
            .map_or(1, |i| i + 1)
            .min(node.output.len());
        let mut outs = Vec::with_capacity(count);
        for (k, o) in node.output.iter().take(count).enumerate() {
            if o.is_empty() {
                outs.push(b.new_value(&format!("{name}__unused{k}")));
            } else {
                let v = b.g.add_value(o, None);
                b.define(o, v, &format!("output of {desc}"), &desc)?;
                outs.push(v);
            }
        }
        Ok(Some(outs))
    }

    /// Declared types (value_info, graph outputs) on values computed by nodes.
    fn declare_types(&mut self, b: &mut Builder, gp: &proto::GraphProto) -> Result<()> {
        let outputs = gp.output.iter().map(|vi| (vi, true));
        for (vi, output) in gp.value_info.iter().map(|vi| (vi, false)).chain(outputs) {
            let name = vi.name.as_deref().unwrap_or("");
            // A computed value declared 4-bit only moves widened data (anything computing
            // a 4-bit value is refused): inference gives it its 8-bit type.
            if !output && int4::widened(attrs::elem_code(vi)).is_some() {
                continue;
            }
            let Some(&v) = b.names.get(name) else {
                continue;
            };
            let is_input = b.g.inputs.contains(&v) || b.g.konst(v).is_some();
            if is_input || b.g.value(v).ty.is_some() {
                continue;
            }
            if let Some(ty) = self.value_type(vi)? {
                b.g.values[v.index()].ty = Some(ty);
            }
        }
        Ok(())
    }

    /// Second pass over a node: resolves inputs, converts attributes (and sub-graphs),
    /// then lowers it to IR nodes in the latest opset's form.
    fn node(
        &mut self,
        b: &mut Builder,
        node: &proto::NodeProto,
        name: &str,
        outputs: Vec<ValueId>,
    ) -> Result<()> {
        let op_type = node.op_type.as_deref().unwrap_or("");
        let domain = super::canonical_domain(node.domain.as_deref().unwrap_or(""));
        let opset = self.opsets.get(domain).unwrap_or(0);
        let desc = describe(name, op_type, opset);
        let mut inputs = Vec::with_capacity(node.input.len());
        for i in &node.input {
            if i.is_empty() {
                inputs.push(None);
                continue;
            }
            let v = b.lookup(i).ok_or_else(|| {
                ImportError::invalid(&desc, format!("reads `{i}`, which nothing produces"))
            })?;
            inputs.push(Some(v));
        }
        if domain == "ai.onnx" && !b.widened.is_empty() {
            let at = int4::At {
                node: name,
                op: op_type,
                opset,
            };
            int4::visit(&mut b.widened, &b.g, at, &inputs, &outputs)?;
        }
        let mut attrs = Attrs::default();
        for a in &node.attribute {
            let aname = a.name.as_deref().unwrap_or("");
            match attrs::convert(a, &desc, self.base_dir)? {
                Converted::Attr(x) => attrs.set(aname, x),
                Converted::Graph(sg) => {
                    let g = self.graph(sg, true)?;
                    for &c in &g.captures {
                        let cname = &g.value(c).name;
                        if b.lookup(cname).is_none() {
                            return Err(ImportError::invalid(
                                &desc,
                                format!(
                                    "sub-graph `{aname}` reads `{cname}`, which no enclosing scope defines"
                                ),
                            ));
                        }
                    }
                    attrs.set(aname, gopt_ir::Attr::Graph(Box::new(g)));
                }
            }
        }
        upgrade::lower(
            b,
            OnnxNode {
                name: name.to_string(),
                desc,
                op_type,
                domain,
                opset,
                inputs,
                outputs,
                attrs,
            },
        )
    }
}

/// The element-type code of a `Constant` node's 4-bit tensor value, if it has one.
fn constant_code(node: &proto::NodeProto) -> Option<i32> {
    let a = node.attribute.first()?;
    (a.name.as_deref() == Some("value"))
        .then_some(a.t.as_ref()?)
        .and_then(int4::code_of)
}

/// The value of a `Constant` node.
fn constant_value(node: &proto::NodeProto, desc: &str, base_dir: Option<&Path>) -> Result<Tensor> {
    let [a] = node.attribute.as_slice() else {
        return Err(ImportError::invalid(
            desc,
            format!(
                "Constant needs exactly one value attribute, found {}",
                node.attribute.len()
            ),
        ));
    };
    let aname = a.name.as_deref().unwrap_or("");
    let scalar_or_list = |t: Tensor, list: bool| -> Result<Tensor> {
        if list {
            Ok(t)
        } else {
            t.reshape(&[])
                .map_err(|e| ImportError::invalid(desc, e.to_string()))
        }
    };
    if let (Some(_), Some(t)) = (constant_code(node), &a.t) {
        // Past `attrs::convert`, which refuses 4-bit tensors in other attributes.
        return tensor_from_proto(t, base_dir).map_err(|e| attrs::in_attr(e, desc, aname));
    }
    match aname {
        "value" | "sparse_value" => match attrs::convert(a, desc, base_dir)? {
            Converted::Attr(gopt_ir::Attr::Tensor(t)) => Ok(t),
            _ => Err(ImportError::invalid(
                desc,
                format!("`{aname}` is not a tensor"),
            )),
        },
        "value_float" => {
            let v =
                a.f.ok_or_else(|| ImportError::invalid(desc, "`value_float` has no value"))?;
            scalar_or_list(
                Tensor::from_f64s(gopt_ir::DType::F32, &[1], &[v as f64])?,
                false,
            )
        }
        "value_floats" => {
            let v: Vec<f64> = a.floats.iter().map(|&x| x as f64).collect();
            Ok(Tensor::from_f64s(gopt_ir::DType::F32, &[v.len()], &v)?)
        }
        "value_int" => {
            let v =
                a.i.ok_or_else(|| ImportError::invalid(desc, "`value_int` has no value"))?;
            scalar_or_list(Tensor::from_i64s(&[v]), false)
        }
        "value_ints" => Ok(Tensor::from_i64s(&a.ints)),
        "value_string" | "value_strings" => Err(ImportError::UnsupportedDType {
            tensor: node.output.first().cloned().unwrap_or_default(),
            dtype: "string".into(),
        }),
        other => Err(ImportError::invalid(
            desc,
            format!("Constant has unknown attribute `{other}`"),
        )),
    }
}
