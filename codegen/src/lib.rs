//! gopt-codegen: turns an optimized, verified graph into an execution plan — the
//! kernels in order, each value's place in one device arena (offsets planned from value
//! lifetimes, so memory is reused) — and emits kernel source for the CUDA backend (and, being built, WGSL).
//! Kernel templates are `.cu` files next to their emitter, filled by [`template`].
#![warn(missing_docs)]

pub mod cuda;
pub mod lower;
pub mod memory;
pub mod plan;
pub mod template;
pub mod wgsl;

/// Errors of code generation.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// An op (or a mode of one) this backend has no kernel for, with the node.
    #[error("node `{node}` ({op}): the {backend} backend has no kernel for {what}")]
    Unsupported {
        /// Node name.
        node: String,
        /// Op name.
        op: String,
        /// Backend name.
        backend: &'static str,
        /// What is missing.
        what: String,
    },
    /// A graph the planner cannot lay out (symbolic shapes, missing types).
    #[error("{0}")]
    Plan(String),
    /// A plan whose device memory is above the memory limit.
    #[error(transparent)]
    Memory(#[from] gopt_ir::limit::MemoryError),
    /// A generated shader that does not validate: a compiler bug, reported with the
    /// node it came from and the shader's text.
    #[error(
        "the WGSL generated for node `{node}` does not validate (a gopt bug): {msg}\n{shader}"
    )]
    Shader {
        /// The node.
        node: String,
        /// naga's message.
        msg: String,
        /// The shader.
        shader: String,
    },
}

/// Result alias of code generation.
pub type Result<T> = std::result::Result<T, CodegenError>;
