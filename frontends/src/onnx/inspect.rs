//! A summary of an ONNX model read straight from the protobuf (no conversion), so it
//! works on models gopt cannot import and says what blocks them.

use super::attrs::type_name;
use super::error::{ImportError, Result, UnsupportedItem};
use super::proto;
use super::support;
use super::tensor::dtype_from_onnx;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// What `inspect` reports about a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspection {
    /// IR version.
    pub ir_version: i64,
    /// Producer name and version.
    pub producer: String,
    /// Imported opsets (default domain as `ai.onnx`).
    pub opsets: Vec<(String, i64)>,
    /// Graph inputs that are not initializers.
    pub inputs: Vec<IoInfo>,
    /// Graph outputs.
    pub outputs: Vec<IoInfo>,
    /// (domain, op, count) over all nodes, sub-graphs included, most frequent first.
    pub op_histogram: Vec<(String, String, usize)>,
    /// Number of nodes, sub-graphs included.
    pub node_count: usize,
    /// Elements of floating-point initializers and constants.
    pub param_count: u64,
    /// Bytes of all initializers and constants.
    pub weight_bytes: u64,
    /// Everything that keeps gopt from importing the model (empty: nothing found).
    pub unsupported: Vec<UnsupportedItem>,
}

/// Name, element type and dims of a graph input or output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoInfo {
    /// Value name.
    pub name: String,
    /// gopt dtype name (`f32`), or ONNX's type name for others (`string`, `seq(float)`).
    pub dtype: String,
    /// Dims: a size (`1`), a symbol (`batch`) or `?`; `["..."]` when the rank is unknown.
    pub dims: Vec<String>,
}

/// Summarises a model file.
pub fn inspect(path: &Path) -> Result<Inspection> {
    let bytes = crate::fs::read_regular(path, crate::fs::MAX_MODEL_BYTES).map_err(|source| {
        ImportError::Io {
            path: path.to_path_buf(),
            source,
        }
    })?;
    let what = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    inspect_named(&bytes, &what).map_err(|e| e.in_file(path))
}

/// Summarises a model given as bytes.
pub fn inspect_bytes(bytes: &[u8]) -> Result<Inspection> {
    inspect_named(bytes, "model")
}

fn inspect_named(bytes: &[u8], what: &str) -> Result<Inspection> {
    let m = super::decode_model(bytes::Bytes::copy_from_slice(bytes), what)?;
    let g = m.graph.as_ref().expect("decode_model checks the graph");
    let init: HashSet<&str> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .chain(
            g.sparse_initializer
                .iter()
                .filter_map(|s| s.values.as_ref().and_then(|v| v.name.as_deref())),
        )
        .collect();
    let inputs: Vec<IoInfo> = g
        .input
        .iter()
        .filter(|i| !init.contains(i.name.as_deref().unwrap_or("")))
        .map(io_info)
        .collect();
    let outputs: Vec<IoInfo> = g.output.iter().map(io_info).collect();
    let mut stats = Stats::default();
    stats.graph(g);
    let mut op_histogram: Vec<(String, String, usize)> =
        stats.ops.into_iter().map(|((d, o), n)| (d, o, n)).collect();
    op_histogram.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
    let mut unsupported = match super::functions::inline(&m) {
        Ok(inlined) => support::scan_model(&inlined),
        Err(e) => match e.unsupported_items() {
            [] => vec![UnsupportedItem {
                node: String::new(),
                op: String::new(),
                domain: "ai.onnx".into(),
                opset: 0,
                reason: format!("model-local functions cannot be inlined: {e}"),
            }],
            items => items.to_vec(),
        },
    };
    for (vi, kind) in g
        .input
        .iter()
        .map(|v| (v, "input"))
        .chain(g.output.iter().map(|v| (v, "output")))
    {
        if let Some(t) = &vi.r#type {
            let ok = match &t.value {
                Some(proto::type_proto::Value::TensorType(tt)) => {
                    let c = tt.elem_type.unwrap_or(0);
                    c == 0 || dtype_from_onnx(c).is_some()
                }
                None => true,
                Some(_) => false,
            };
            if !ok {
                unsupported.push(UnsupportedItem {
                    node: vi.name.clone().unwrap_or_default(),
                    op: String::new(),
                    domain: "ai.onnx".into(),
                    opset: 0,
                    reason: format!("graph {kind} of unsupported type {}", type_name(t)),
                });
            }
        }
    }
    for t in &g.initializer {
        let c = t.data_type.unwrap_or(0);
        if dtype_from_onnx(c).is_none() && super::int4::widened(c).is_none() {
            unsupported.push(UnsupportedItem {
                node: t.name.clone().unwrap_or_default(),
                op: String::new(),
                domain: "ai.onnx".into(),
                opset: 0,
                reason: format!(
                    "initializer of unsupported element type {}",
                    super::tensor::onnx_dtype_name(c)
                ),
            });
        }
    }
    if let Some(e) = stats.overflow.take() {
        return Err(e);
    }
    Ok(Inspection {
        ir_version: m.ir_version.unwrap_or(0),
        producer: super::producer(&m),
        opsets: super::opset_list(&m),
        inputs,
        outputs,
        op_histogram,
        node_count: stats.nodes,
        param_count: stats.params,
        weight_bytes: stats.bytes,
        unsupported,
    })
}

fn io_info(vi: &proto::ValueInfoProto) -> IoInfo {
    use proto::tensor_shape_proto::dimension::Value as D;
    use proto::type_proto::Value;
    let name = vi.name.clone().unwrap_or_default();
    let Some(t) = &vi.r#type else {
        return IoInfo {
            name,
            dtype: "?".into(),
            dims: vec!["...".into()],
        };
    };
    match &t.value {
        Some(Value::TensorType(tt)) => {
            let code = tt.elem_type.unwrap_or(0);
            let dtype = dtype_from_onnx(code)
                .map(|d| d.name().to_string())
                .unwrap_or_else(|| type_name(t));
            let dims = match &tt.shape {
                None => vec!["...".into()],
                Some(s) => s
                    .dim
                    .iter()
                    .map(|d| match &d.value {
                        Some(D::DimValue(v)) if *v >= 0 => v.to_string(),
                        Some(D::DimParam(p)) if !p.is_empty() => p.clone(),
                        _ => "?".into(),
                    })
                    .collect(),
            };
            IoInfo { name, dtype, dims }
        }
        _ => IoInfo {
            name,
            dtype: type_name(t),
            dims: vec![],
        },
    }
}

/// Counts over a graph and its sub-graphs.
#[derive(Default)]
struct Stats {
    ops: BTreeMap<(String, String), usize>,
    nodes: usize,
    params: u64,
    bytes: u64,
    /// The first tensor whose dims overflow the element count: `inspect` reports it as
    /// the error `load` gives, rather than counting it as zero parameters.
    overflow: Option<ImportError>,
}

impl Stats {
    fn graph(&mut self, g: &proto::GraphProto) {
        for t in &g.initializer {
            self.tensor(t, &t.dims);
        }
        for s in &g.sparse_initializer {
            if let Some(v) = &s.values {
                self.tensor(v, &s.dims);
            }
        }
        for n in &g.node {
            self.nodes += 1;
            let d = super::canonical_domain(n.domain.as_deref().unwrap_or("")).to_string();
            let o = n.op_type.clone().unwrap_or_default();
            let is_const = o == "Constant" && d == "ai.onnx";
            *self.ops.entry((d, o)).or_default() += 1;
            for a in &n.attribute {
                if is_const {
                    if let Some(t) = &a.t {
                        self.tensor(t, &t.dims);
                    }
                    if let Some(s) = &a.sparse_tensor {
                        if let Some(v) = &s.values {
                            self.tensor(v, &s.dims);
                        }
                    }
                }
                if let Some(sg) = &a.g {
                    self.graph(sg);
                }
            }
        }
    }

    fn tensor(&mut self, t: &proto::TensorProto, dims: &[i64]) {
        let n = dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?));
        let Some(n) = n else {
            self.overflow
                .get_or_insert_with(|| ImportError::ShapeOverflow {
                    tensor: t.name.clone().unwrap_or_default(),
                    dims: dims.to_vec(),
                });
            return;
        };
        let code = t.data_type.unwrap_or(0);
        let (float, bits): (bool, u64) = match code {
            1 | 10 | 11 | 16 => (
                true,
                dtype_from_onnx(code).map_or(0, |d| d.size() as u64 * 8),
            ),
            17..=20 | 24 => (true, 8),
            23 => (true, 4),
            27 | 28 => (true, 6),
            21 | 22 => (false, 4),
            25 | 26 => (false, 2),
            14 => (false, 64),
            15 => (false, 128),
            8 => {
                self.bytes += t.string_data.iter().map(|s| s.len() as u64).sum::<u64>();
                return;
            }
            c => (false, dtype_from_onnx(c).map_or(0, |d| d.size() as u64 * 8)),
        };
        if float {
            self.params += n;
        }
        self.bytes += (n.saturating_mul(bits)).div_ceil(8);
    }
}
