//! gopt-codegen: turns an optimized, verified, specialized graph into an execution plan
//! for a GPU backend. [`lower`] decides once, for every backend, what each node becomes
//! (a view, a GEMM, a kernel of one family, or nothing with a reason) and reads the
//! facts kernels need; [`cuda`] and [`wgsl`] are the two writers, each an exhaustive
//! match over that decision, that spell kernels in CUDA C (NVRTC, templates filled by
//! [`template`]) and WGSL (validated by naga). [`plan`] holds what their plans share
//! (inputs and outputs, one weights store, the GPU index check) and [`memory`] the value
//! lifetimes with two strategies: one arena (CUDA) and a pool of buffers (wgpu). A
//! plan's predicted peak device memory is the runtime's (`gopt_runtime::peak`).
#![warn(missing_docs)]

pub mod cuda;
pub mod lower;
pub mod memory;
pub mod plan;
pub mod template;
pub mod twin;
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
    /// A graph the planner cannot lay out (missing types, sizes out of range).
    #[error("{0}")]
    Plan(String),
    /// A value whose size is only known at run time (decided by data: NonZero, Unique,
    /// NonMaxSuppression, a Loop's trip count, or a shape computed inside the graph).
    /// GPU plans lay memory out before the run, so such a graph runs on the CPU
    /// backend; an unsupported case, not a failure.
    #[error(
        "value `{value}` has shape {ty}, a size known only at run time{origin}: GPU plans \
         lay memory out before the run (the CPU backend runs it)"
    )]
    DynamicShape {
        /// The value.
        value: String,
        /// Its type, with the symbolic dims.
        ty: String,
        /// ` (first decided by node `n` (Op))`, or empty.
        origin: String,
    },
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
    /// The error for value `v` of `g`, whose shape `ty` is still symbolic in a
    /// specialized graph, naming the first node whose inputs have known sizes and whose
    /// outputs do not.
    pub(crate) fn dynamic_shape(
        g: &gopt_ir::Graph,
        v: gopt_ir::ValueId,
        ty: &dyn std::fmt::Display,
    ) -> CodegenError {
        let symbolic = |x: gopt_ir::ValueId| {
            g.ty(x)
                .is_ok_and(|t| gopt_ir::dim::concrete(&t.shape).is_none())
        };
        let origin = g
            .nodes
            .iter()
            .find(|n| {
                n.outputs.iter().any(|&o| symbolic(o))
                    && n.inputs.iter().flatten().all(|&i| !symbolic(i))
            })
            .map(|n| {
                // A control node left as it was says why (`gopt_ir::unroll`).
                let why = n
                    .attrs
                    .str(gopt_ir::unroll::LEFT_ATTR)
                    .ok()
                    .flatten()
                    .map(|w| format!(", left as control flow: {w}"))
                    .unwrap_or_default();
                format!(
                    " (first decided by node `{}` ({}){why})",
                    n.name,
                    n.op.name()
                )
            })
            .unwrap_or_default();
        CodegenError::DynamicShape {
            value: g.value(v).name.clone(),
            ty: ty.to_string(),
            origin,
        }
    }

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
