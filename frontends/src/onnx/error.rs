//! The importer's error type. Every message is one line naming what failed and where
//! (file, node, op, opset, tensor), so the CLI can print it as is.

use std::fmt;
use std::path::PathBuf;

/// One construct of a model that gopt cannot import: an op, a domain, an opset, an
/// attribute kind or a mode of an op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedItem {
    /// Node name (generated when the model leaves it empty; empty for model-wide items).
    pub node: String,
    /// ONNX op type (empty for model-wide items).
    pub op: String,
    /// Operator-set domain (`ai.onnx` for the default domain).
    pub domain: String,
    /// Opset version of that domain the model imports (0 when it imports none).
    pub opset: i64,
    /// Why it is unsupported.
    pub reason: String,
}

impl fmt::Display for UnsupportedItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.node.is_empty() && self.op.is_empty() {
            write!(
                f,
                "domain {} opset {}: {}",
                self.domain, self.opset, self.reason
            )
        } else if self.op.is_empty() {
            write!(f, "`{}`: {}", self.node, self.reason)
        } else {
            write!(
                f,
                "node `{}` ({}, {} opset {}): {}",
                self.node, self.op, self.domain, self.opset, self.reason
            )
        }
    }
}

/// Errors raised while reading or converting an ONNX model or tensor file.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Bytes that are not a valid protobuf message of the expected kind (truncated or
    /// corrupt file).
    #[error("{what}: not a valid ONNX protobuf ({msg})")]
    Decode {
        /// What was being decoded (`model.onnx`, `input_0.pb`, ...).
        what: String,
        /// The decoder's message.
        msg: String,
    },
    /// A valid protobuf that is not an ONNX model (no graph, no opset import, IR version 0).
    #[error("{what}: not an ONNX model ({msg})")]
    NotAModel {
        /// What was decoded.
        what: String,
        /// What is missing.
        msg: String,
    },
    /// Constructs gopt cannot import, all of them listed together.
    #[error("{} unsupported construct(s): {}", items.len(), join_items(items))]
    Unsupported {
        /// Every unsupported node of the model (sub-graphs included).
        items: Vec<UnsupportedItem>,
    },
    /// A tensor or value whose element type gopt does not support.
    #[error("tensor `{tensor}`: unsupported element type {dtype}")]
    UnsupportedDType {
        /// Tensor or value name.
        tensor: String,
        /// ONNX type name (`string`, `float8e4m3fn`, `seq(tensor(float))`, ...).
        dtype: String,
    },
    /// A malformed model: an undefined input, a duplicate name, a bad attribute, bad data.
    #[error("{}", fmt_invalid(node, msg))]
    Invalid {
        /// The node as "`name` (Op, opset N)", empty when the problem is not in a node.
        node: String,
        /// What is wrong.
        msg: String,
    },
    /// A tensor stored outside the model file that cannot be read safely.
    #[error("tensor `{tensor}`: external data: {msg}")]
    ExternalData {
        /// Tensor name.
        tensor: String,
        /// What is wrong (location, size, offset).
        msg: String,
    },
    /// An error reported by the IR (structure verification).
    #[error(transparent)]
    Ir(#[from] gopt_ir::IrError),
    /// Dims whose element count does not fit in memory sizes.
    #[error("tensor `{tensor}`: dims {dims:?} overflow the element count")]
    ShapeOverflow {
        /// Tensor name.
        tensor: String,
        /// The declared dims.
        dims: Vec<i64>,
    },
    /// Another error, raised while reading `path`.
    #[error("{}: {source}", path.display())]
    Context {
        /// The model or tensor file.
        path: PathBuf,
        /// The underlying error.
        source: Box<ImportError>,
    },
}

/// Result alias for the importer.
pub type Result<T, E = ImportError> = std::result::Result<T, E>;

fn join_items(items: &[UnsupportedItem]) -> String {
    items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

fn fmt_invalid(node: &str, msg: &str) -> String {
    if node.is_empty() {
        msg.to_string()
    } else {
        format!("node {node}: {msg}")
    }
}

impl ImportError {
    /// True when the model is well-formed but uses something gopt does not support
    /// (op, domain, opset, attribute kind, dtype); false for broken input.
    pub fn is_unsupported(&self) -> bool {
        match self {
            ImportError::Unsupported { .. } | ImportError::UnsupportedDType { .. } => true,
            ImportError::Ir(e) => ir_unsupported(e),
            ImportError::Context { source, .. } => source.is_unsupported(),
            ImportError::Io { .. }
            | ImportError::Decode { .. }
            | ImportError::NotAModel { .. }
            | ImportError::Invalid { .. }
            | ImportError::ExternalData { .. }
            | ImportError::ShapeOverflow { .. } => false,
        }
    }

    /// The unsupported items, when this is (or wraps) an `Unsupported` error.
    pub fn unsupported_items(&self) -> &[UnsupportedItem] {
        match self {
            ImportError::Unsupported { items } => items,
            ImportError::Context { source, .. } => source.unsupported_items(),
            _ => &[],
        }
    }

    /// Wraps the error with the file it came from (unless it already names one).
    pub fn in_file(self, path: &std::path::Path) -> ImportError {
        match self {
            e @ (ImportError::Io { .. } | ImportError::Context { .. }) => e,
            e => ImportError::Context {
                path: path.to_path_buf(),
                source: Box::new(e),
            },
        }
    }

    /// Shorthand for a single-item `Unsupported` error.
    pub(crate) fn unsupported_one(item: UnsupportedItem) -> ImportError {
        ImportError::Unsupported { items: vec![item] }
    }

    /// Shorthand for an `Invalid` error.
    pub(crate) fn invalid(node: impl Into<String>, msg: impl Into<String>) -> ImportError {
        ImportError::Invalid {
            node: node.into(),
            msg: msg.into(),
        }
    }
}

fn ir_unsupported(e: &gopt_ir::IrError) -> bool {
    match e {
        gopt_ir::IrError::Unsupported(_) => true,
        gopt_ir::IrError::Node { source, .. } => ir_unsupported(source),
        _ => false,
    }
}
