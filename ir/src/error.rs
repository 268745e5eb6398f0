//! The IR crate's error type. Every variant carries enough context (node, op, value,
//! expected vs found) for a user to act on it without a debugger.

use crate::dtype::DType;

/// Errors raised by graph construction, verification, inference and interpretation.
#[derive(Debug, thiserror::Error)]
pub enum IrError {
    /// A shape that does not fit what an operation needs.
    #[error("shape error: {0}")]
    Shape(String),
    /// A dtype other than the one an operation accepts.
    #[error("{context}: expected {expected}, found {found}")]
    DType {
        /// Where the mismatch was found.
        context: String,
        /// What was accepted.
        expected: String,
        /// What was given.
        found: DType,
    },
    /// A missing or ill-typed attribute.
    #[error("attribute `{name}`: {msg}")]
    Attr {
        /// Attribute name.
        name: String,
        /// What is wrong with it.
        msg: String,
    },
    /// A structural problem found by the verifier.
    #[error("invalid graph: {0}")]
    Invalid(String),
    /// An operation or a mode of one that the interpreter or inference cannot perform.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A failure inside one node, with the node's identity prepended.
    #[error("node `{node}` ({op}): {source}")]
    Node {
        /// Node name.
        node: String,
        /// Op name.
        op: String,
        /// The underlying error.
        #[source]
        source: Box<IrError>,
    },
    /// Text-format parse error with a line number.
    #[error("line {line}: {msg}")]
    Parse {
        /// 1-based line.
        line: usize,
        /// What was expected.
        msg: String,
    },
    /// An allocation refused because it would go above the memory limit.
    #[error(transparent)]
    Memory(#[from] crate::limit::MemoryError),
    /// A run-time input that does not match the graph's declared input.
    #[error("input `{name}`: {msg}")]
    Input {
        /// Graph input name.
        name: String,
        /// What does not match.
        msg: String,
    },
}

/// Result alias for the IR crate.
pub type Result<T, E = IrError> = std::result::Result<T, E>;

/// Shorthand for an `IrError::Shape`.
pub fn shape_err<T>(msg: impl Into<String>) -> Result<T> {
    Err(IrError::Shape(msg.into()))
}

/// Shorthand for an `IrError::Unsupported`.
pub fn unsupported<T>(msg: impl Into<String>) -> Result<T> {
    Err(IrError::Unsupported(msg.into()))
}
