//! gopt-codegen: turns an optimized, verified, specialized graph into an execution plan
//! for a GPU backend. [`lower`] decides once, for every backend, what each node becomes
//! (a view, a GEMM, a kernel of one family, or nothing with a reason) and reads the
//! facts kernels need; [`cuda`] and [`wgsl`] are the two writers, each an exhaustive
//! match over that decision, that spell kernels in CUDA C (NVRTC, templates filled by
//! [`template`]) and WGSL (validated by naga). [`plan`] holds what their plans share
//! (inputs and outputs, one weights store, the GPU index check) and [`memory`] the value
//! lifetimes with two strategies: one arena (CUDA) and a pool of buffers (wgpu).
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

impl CodegenError {
    /// The error with a lowering's neutral backend name (`GPU`) replaced by `backend`,
    /// the backend that refused the node.
    pub fn for_backend(self, backend: &'static str) -> CodegenError {
        match self {
            CodegenError::Unsupported {
                node,
                op,
                backend: lower::support::NEUTRAL,
                what,
            } => CodegenError::Unsupported {
                node,
                op,
                backend,
                what,
            },
            e => e,
        }
    }
}

/// Result alias of code generation.
pub type Result<T> = std::result::Result<T, CodegenError>;
