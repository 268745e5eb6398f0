//! The facade's error type: one enum over the pipeline's crates' errors, so callers of
//! the library (and the CLI) can tell "gopt cannot do this yet" from "this input is bad".

use gopt_frontends::ImportError;
use gopt_ir::IrError;
use std::path::PathBuf;

/// Errors of the gopt library.
#[derive(Debug, thiserror::Error)]
pub enum GoptError {
    /// The model could not be imported (unreadable, invalid, or unsupported).
    #[error(transparent)]
    Import(#[from] ImportError),
    /// Verification, inference, folding or interpretation failed.
    #[error(transparent)]
    Ir(#[from] IrError),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A tensor file (`.npy`, `.pb`) that gopt cannot read or write.
    #[error("{}: {msg}", path.display())]
    TensorFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
    /// Run-time inputs that do not fit the model (missing, extra, unknown names).
    #[error("{0}")]
    Inputs(String),
    /// The optimizer failed or was given options it cannot honour.
    #[error(transparent)]
    Passes(#[from] gopt_passes::PassError),
    /// Code generation failed (an op or mode a backend has no kernel for).
    #[error(transparent)]
    Codegen(#[from] gopt_codegen::CodegenError),
    /// A backend failed at run time (no GPU, a driver or library error).
    #[error(transparent)]
    Runtime(#[from] gopt_runtime::RuntimeError),
    /// A bad option value.
    #[error("{0}")]
    Usage(String),
    /// No bucket's predicted peak device memory fits `--memory-budget`.
    #[error(
        "no bucket fits --memory-budget {}: the smallest, {bucket}, needs {} ({})",
        gopt_ir::limit::fmt_short(u128::from(*budget)),
        gopt_ir::limit::fmt_short(u128::from(peak.total())),
        peak.breakdown()
    )]
    MemoryBudget {
        /// The budget in bytes.
        budget: u64,
        /// The bucket with the smallest predicted peak (`batch=1 seq=128`).
        bucket: String,
        /// Its predicted peak.
        peak: gopt_runtime::peak::PeakMemory,
    },
}

/// Result alias for the gopt library.
pub type Result<T, E = GoptError> = std::result::Result<T, E>;

impl GoptError {
    /// Builds an `Io` error for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> GoptError {
        GoptError::Io {
            path: path.into(),
            source,
        }
    }

    /// True when the failure is an op, attribute, dtype or mode gopt does not implement
    /// (as opposed to a bad model or bad input): the conformance runner counts these as
    /// skipped, not failed.
    pub fn is_unsupported(&self) -> bool {
        match self {
            GoptError::Import(e) => e.is_unsupported(),
            GoptError::Ir(e) => ir_is_unsupported(e),
            GoptError::Passes(gopt_passes::PassError::Ir(e)) => ir_is_unsupported(e),
            GoptError::Codegen(
                gopt_codegen::CodegenError::Unsupported { .. }
                | gopt_codegen::CodegenError::DynamicShape { .. },
            ) => true,
            GoptError::Io { .. }
            | GoptError::Codegen(_)
            | GoptError::Runtime(_)
            | GoptError::TensorFile { .. }
            | GoptError::Inputs(_)
            | GoptError::Passes(_)
            | GoptError::Usage(_)
            | GoptError::MemoryBudget { .. } => false,
        }
    }
}

/// True when an IR error is (or wraps, through `IrError::Node`) an `IrError::Unsupported`.
pub fn ir_is_unsupported(e: &IrError) -> bool {
    match e {
        IrError::Unsupported(_) => true,
        IrError::Node { source, .. } => ir_is_unsupported(source),
        IrError::Shape(_)
        | IrError::DType { .. }
        | IrError::Attr { .. }
        | IrError::Invalid(_)
        | IrError::Parse { .. }
        | IrError::Memory(_)
        | IrError::Input { .. } => false,
    }
}
