//! The WGSL writer: compute shaders for the nodes of a specialized graph as
//! [`crate::lower`] lowers them, one shader module per kernel, each parsed and
//! validated by naga before it is handed out. An invalid shader is a compiler bug: its
//! error carries the node it came from and the shader text
//! ([`crate::CodegenError::Shader`]). [`kernel`] matches every kernel family; element-
//! wise shaders cover every dtype [`storage_type`] holds (see [`types`]); [`plan`]
//! lays the shaders out over a pool of buffers.

pub mod arg;
pub mod attention;
mod bounds;
pub mod compress;
pub mod conv;
pub mod conv_nd;
pub mod conv_state;
pub mod conv_transpose;
pub mod counted;
pub mod cumulative;
pub mod einsum;
pub mod elementwise;
mod elementwise_expr;
pub mod gather_elements;
pub mod gemm;
mod gemm_split;
mod gemm_tile;
pub mod glu;
pub mod indexed;
mod launch;
pub mod linear_attention;
pub mod loss;
pub mod matmul;
pub mod movement;
pub mod nms;
pub mod norm;
pub mod packed;
pub mod plan;
pub mod pool;
pub mod quant;
pub mod recurrent;
pub mod reduce;
pub mod resize;
pub mod rotary;
pub mod rows;
pub mod sample;
pub mod scatter;
pub mod spectral;
pub mod split_pad;
pub mod syntax;
pub mod topk;
pub mod trilu;
pub mod types;
pub mod unique;

use crate::lower::{lower, GemmForm, Lowered, Spec, Views};
use crate::{CodegenError, Result};
use gopt_ir::{DType, Graph, Node};
use serde::{Deserialize, Serialize};

/// Invocations per workgroup of every generated shader.
pub const WORKGROUP: u32 = 256;

/// The storage binding size every WebGPU implementation allows (and lavapipe's): the
/// pipeline splits bigger weights before planning (`gopt_passes::split_weights`).
pub const WEBGPU_MAX_BINDING: u64 = 128 << 20;

/// The WGSL element type a tensor of `dt` has in a wgpu buffer, and its bytes per
/// element there. WGSL storage has no 8/16-bit integers, no bool and no 64-bit integers:
/// bool and 8/16-bit integers are widened to one 32-bit word per element (the executor
/// converts at the graph's inputs and outputs), 64-bit integers keep their bytes as
/// `vec2<u32>` (low word first, little-endian), f16 needs the adapter's `SHADER_F16`.
/// WGSL has no f64: f64 tensors are stored and computed as f32 (rounded to nearest at
/// the inputs and the constants, widened again at the outputs), as TensorRT runs FP64
/// layers in FP32; the compile says so in a note. bf16 has no WGSL form (a bf16
/// request is lowered to f16 or f32 before).
pub fn storage_type(dt: DType) -> Option<(&'static str, usize)> {
    match dt {
        DType::F32 => Some(("f32", 4)),
        DType::F16 => Some(("f16", 2)),
        DType::I32 => Some(("i32", 4)),
        DType::U32 => Some(("u32", 4)),
        DType::Bool | DType::U8 | DType::U16 => Some(("u32", 4)),
        DType::I8 | DType::I16 => Some(("i32", 4)),
        DType::I64 | DType::U64 => Some(("vec2<u32>", 8)),
        DType::F64 => Some(("f32", 4)),
        DType::BF16 => None,
    }
}

/// The error for a mode or operand of a spec's node (`site`) no WGSL kernel implements.
pub(crate) fn refuse(site: &crate::lower::support::Site, what: &str) -> CodegenError {
    site.unsupported(what).for_backend(BACKEND)
}

/// The `enable f16;` directive a shader with f16 storage starts with, or nothing.
pub(crate) fn enable_f16(f16: bool) -> &'static str {
    if f16 {
        "enable f16;\n"
    } else {
        ""
    }
}

/// One generated compute shader.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WgslKernel {
    /// A name for reports (the entry point is always `main`).
    pub name: String,
    /// The graph node it computes.
    pub node: String,
    /// The WGSL module.
    pub source: String,
    /// Workgroups to dispatch along x, y, z (1-D kernels loop over what x cannot hold).
    pub workgroups: [u32; 3],
    /// Graph values bound at bindings 0.. (read-only storage), in order.
    pub inputs: Vec<u32>,
    /// Graph values bound after the inputs (read-write storage).
    pub outputs: Vec<u32>,
    /// The index check it makes, when it reads indices computed on the device: the
    /// binding after the outputs is then the run's error word (`atomic<u32>`).
    #[serde(default)]
    pub index_check: Option<crate::plan::IndexCheck>,
    /// The most loop iterations one invocation runs in all, where the writer knows it
    /// (the counted kernels): Mesa's lavapipe ends an invocation's loops after
    /// [`LAVAPIPE_LOOP_LIMIT`] and carries on without an error, so the runtime refuses
    /// such a kernel there instead of returning a wrong answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_iterations: Option<u64>,
}

/// The loop iterations per invocation after which lavapipe (llvmpipe) stops looping.
pub const LAVAPIPE_LOOP_LIMIT: u64 = 65_535;

/// The backend's name in errors.
pub const BACKEND: &str = "WGSL";

/// Views alias within the pool; graph outputs own their buffers (they are read back
/// from them), so a view that is a graph output is a copy.
pub const VIEWS: Views = Views {
    alias_outputs: false,
    strided_reads: false,
    stores_casts: false,
    offset_views: false,
};

/// The shader of `spec` for node `n` (named `name`): one exhaustive match over the
/// specs [`crate::lower`] makes, so a new family is a compile error here.
pub fn kernel(spec: &Spec, name: &str) -> Result<WgslKernel> {
    crate::lower::dispatch::write_spec!(spec, name)
}

/// The shader of node `i` (`n`) of `g` as lowered (`None` for a view), validated by
/// naga: matrix products run the tiled GEMM shaders, convolutions lowered to a GEMM
/// run the convolution shader (WGSL has no im2col GEMM path).
pub fn write(g: &Graph, i: usize, n: &Node, lowered: &Lowered) -> Result<Option<WgslKernel>> {
    let name = format!("k{i}");
    let k = match lowered {
        Lowered::View | Lowered::Absorbed => return Ok(None),
        // The pool binds whole buffers (`VIEWS.offset_views` is off): a window is a copy.
        Lowered::Window(_) => crate::lower::index::spec(g, n, crate::lower::index::Move::Slice)
            .and_then(|s| movement::emit(&s, &name)),
        Lowered::Gemm(sp) => match sp.form {
            GemmForm::Gemm => gemm::emit(sp, &name),
            GemmForm::MatMul => matmul::emit(sp, &name),
        },
        Lowered::ConvGemm(s) => conv::emit(&s.conv, &name),
        Lowered::PackedGemm(sp) => packed::emit(sp, &name),
        Lowered::Kernel(spec) => kernel(spec, &name),
        Lowered::Collective(_) => Err(crate::lower::support::unsupported(
            n,
            "a collective (tensor-parallel runs are CUDA's, through NCCL)",
        )),
        Lowered::Unsupported(why) => Err(crate::lower::support::unsupported(n, why)),
        // The WGSL plan folds nothing: its pool binds whole buffers.
        Lowered::Folded(_) => Err(CodegenError::Plan(format!(
            "node `{}`: a folded Slice has no WGSL form",
            n.name
        ))),
    };
    let mut k = k.map_err(|e| e.for_backend(BACKEND))?;
    // `k12_layernormalization`: reports group kernels by op.
    k.name = format!("{}_{}", k.name, n.op.name().to_ascii_lowercase());
    validate(&k)?;
    Ok(Some(k))
}

/// The shaders of `g`'s nodes, in node order, and the nodes without one (name and
/// why). Every shader has been validated by naga; one that does not validate is an
/// error.
pub fn emit_kernels(g: &gopt_ir::Verified) -> Result<crate::plan::Emitted<WgslKernel>> {
    let mut kernels = Vec::new();
    let mut others = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        match write(g, i, n, &lower(g, n, VIEWS)?) {
            Ok(Some(k)) => kernels.push(k),
            Ok(None) => {}
            Err(e @ CodegenError::Unsupported { .. }) => {
                others.push((n.name.clone(), e.for_backend(BACKEND).to_string()));
            }
            Err(e) => return Err(e),
        }
    }
    Ok((kernels, others))
}

/// Parses and validates a kernel's WGSL with naga (every capability a kernel may use,
/// f16 included: whether the adapter has them is the runtime's question).
pub fn validate(k: &WgslKernel) -> Result<()> {
    let err = |msg: String| CodegenError::Shader {
        node: k.node.clone(),
        msg,
        shader: k.source.clone(),
    };
    let module =
        naga::front::wgsl::parse_str(&k.source).map_err(|e| err(e.emit_to_string(&k.source)))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| err(format!("{e:?}")))?;
    Ok(())
}
