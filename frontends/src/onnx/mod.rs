//! ONNX import: protobuf decoding (prost, no protoc), tensors, and graph conversion.
//!
//! `load`/`import` turn a model into a `gopt_ir::Model` whose ops have the latest ONNX
//! semantics (older opset forms are upgraded on the way in), check its structure, and
//! report every unsupported construct at once. `inspect` summarises a model without
//! converting it, so it works on models gopt cannot import.

mod attrs;
mod convert;
pub mod error;
mod functions;
mod inspect;
mod int4;
pub mod proto;
mod support;
pub mod tensor;
mod upgrade;

pub use error::{ImportError, Result, UnsupportedItem};
pub use inspect::{inspect, inspect_bytes, Inspection, IoInfo};
pub use tensor::{
    dtype_from_onnx, dtype_to_onnx, read_tensor_file, tensor_from_proto, tensor_to_proto,
    write_tensor_file,
};

use bytes::Bytes;
use prost::Message;
use std::path::Path;

/// An imported model with the facts about its source that the IR does not keep.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The converted model (structure checked, types not yet inferred).
    pub model: gopt_ir::Model,
    /// Opsets the model imports, as (domain, version); the default domain is `ai.onnx`.
    pub opsets: Vec<(String, i64)>,
    /// The model's IR version.
    pub ir_version: i64,
    /// Producer name and version (`pytorch 2.5`).
    pub producer: String,
    /// The file it was read from (absent when imported from bytes).
    pub source: Option<std::path::PathBuf>,
}

/// Reads and imports a model file; external data is resolved relative to its directory.
/// Errors name the file.
///
/// The file is memory-mapped, and the decoded model's weights are slices of the
/// mapping: nothing is copied, and pages are read only when a weight is used.
pub fn load(path: &Path) -> Result<Imported> {
    let bytes = crate::fs::map_regular(path, crate::fs::MAX_MODEL_BYTES).map_err(|source| {
        ImportError::Io {
            path: path.to_path_buf(),
            source,
        }
    })?;
    let base = path.parent().map(|p| {
        if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        }
    });
    let mut m = import_named(bytes, base, &file_label(path)).map_err(|e| e.in_file(path))?;
    m.source = Some(path.to_path_buf());
    Ok(m)
}

/// Imports a model from bytes; `base_dir` is where external data files are looked up.
pub fn import(bytes: &[u8], base_dir: Option<&Path>) -> Result<Imported> {
    import_named(Bytes::copy_from_slice(bytes), base_dir, "model")
}

fn import_named(bytes: Bytes, base_dir: Option<&Path>, what: &str) -> Result<Imported> {
    let m = decode_model(bytes, what)?;
    let opsets = opset_list(&m);
    let model = convert::convert_model(&m, base_dir)?;
    gopt_ir::verify::check_structure(&model.graph, &[])?;
    Ok(Imported {
        model,
        opsets,
        ir_version: m.ir_version.unwrap_or(0),
        producer: producer(&m),
        source: None,
    })
}

fn file_label(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Decodes a `ModelProto` and checks it is a model: it has a graph, an IR version and
/// at least one opset import.
pub(crate) fn decode_model(bytes: Bytes, what: &str) -> Result<proto::ModelProto> {
    let m = proto::ModelProto::decode(bytes).map_err(|e| ImportError::Decode {
        what: what.to_string(),
        msg: e.to_string(),
    })?;
    let not = |msg: &str| ImportError::NotAModel {
        what: what.to_string(),
        msg: msg.to_string(),
    };
    if m.graph.is_none() {
        return Err(not("no graph"));
    }
    if m.ir_version.unwrap_or(0) <= 0 {
        return Err(not("no IR version"));
    }
    if m.opset_import.is_empty() {
        return Err(not("no opset import"));
    }
    Ok(m)
}

/// The default domain's canonical name.
pub(crate) fn canonical_domain(d: &str) -> &str {
    if d.is_empty() {
        "ai.onnx"
    } else {
        d
    }
}

/// The model's opset imports with the default domain spelled `ai.onnx`.
pub(crate) fn opset_list(m: &proto::ModelProto) -> Vec<(String, i64)> {
    m.opset_import
        .iter()
        .map(|o| {
            (
                canonical_domain(o.domain.as_deref().unwrap_or("")).to_string(),
                o.version.unwrap_or(0),
            )
        })
        .collect()
}

/// "name version", trimmed.
pub(crate) fn producer(m: &proto::ModelProto) -> String {
    format!(
        "{} {}",
        m.producer_name.as_deref().unwrap_or(""),
        m.producer_version.as_deref().unwrap_or("")
    )
    .trim()
    .to_string()
}

/// The external data files a model file's tensors name (`location` entries, relative
/// to its directory), each once, sorted: what must travel with a copy of the model.
/// Decoding maps the file and reads no weight.
pub fn external_locations(path: &Path) -> Result<Vec<String>> {
    let bytes = crate::fs::map_regular(path, crate::fs::MAX_MODEL_BYTES).map_err(|source| {
        ImportError::Io {
            path: path.to_path_buf(),
            source,
        }
    })?;
    let m = decode_model(bytes, &file_label(path))?;
    let mut out = std::collections::BTreeSet::new();
    fn tensor(t: &proto::TensorProto, out: &mut std::collections::BTreeSet<String>) {
        if t.data_location == Some(proto::tensor_proto::DataLocation::External as i32) {
            for e in &t.external_data {
                if e.key.as_deref() == Some("location") {
                    out.insert(e.value.clone().unwrap_or_default());
                }
            }
        }
    }
    fn graph(g: &proto::GraphProto, out: &mut std::collections::BTreeSet<String>) {
        g.initializer.iter().for_each(|t| tensor(t, out));
        for s in &g.sparse_initializer {
            s.values
                .iter()
                .chain(&s.indices)
                .for_each(|t| tensor(t, out));
        }
        for n in &g.node {
            for a in &n.attribute {
                a.t.iter().chain(&a.tensors).for_each(|t| tensor(t, out));
                a.g.iter().chain(&a.graphs).for_each(|g| graph(g, out));
            }
        }
    }
    if let Some(g) = &m.graph {
        graph(g, &mut out);
    }
    out.remove("");
    Ok(out.into_iter().collect())
}
