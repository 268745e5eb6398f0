//! The CUDA writer: kernel source for the nodes of a specialized graph as
//! [`crate::lower`] lowers them, compiled with NVRTC for the device's architecture.
//! [`kernel`] is the exhaustive match over the kernel families: element-wise nodes
//! (single ops and `FusedElementwise` groups), rows (norms and softmax on any axis),
//! reductions, arg/scan/trilu/gather-elements/loss kernels, data movement, split and
//! pad, convolutions, pools and flash attention (tensor cores). GEMMs, and channels-last
//! convolutions lowered to one, become cuBLASLt calls ([`gemm`], [`conv_gemm`]);
//! [`plan`] lays the steps and the arena out.

pub mod arg;
pub mod attention;
/// The collective steps (lowered once in [`crate::lower::collective`]).
pub use crate::lower::collective;
pub mod compress;
pub mod conv_transpose;
pub mod counted;
pub mod cumulative;
pub mod einsum;
pub mod elementwise;
mod fold;
pub mod gather_elements;
pub mod gemm;
pub mod gemv;
pub mod glu;
pub mod indexed;
pub mod loss;
pub mod movement;
pub mod nms;
pub mod norm;
pub mod packed;
pub mod plan;
pub mod quant;
pub mod resize;
pub mod rotary;
pub mod rows;
pub mod sample;
pub mod scatter;
pub mod topk;
pub mod trilu;
pub mod unique;
// Convolutions, pools, reductions, split and pad (CNN kernels).
pub mod conv;
pub mod conv_gemm;
pub mod conv_kernels;
pub mod conv_nd;
pub mod conv_spec;
pub mod conv_state;
pub mod linear_attention;
pub mod pool;
pub mod recurrent;
pub mod reduce;
pub mod spectral;
pub mod split_pad;
pub mod support;
pub mod syntax;

use crate::lower::{lower, Lowered, Spec, Views};
use crate::{CodegenError, Result};
use gopt_ir::Node;
use serde::{Deserialize, Serialize};

/// The backend's name in errors.
pub const BACKEND: &str = "CUDA";

/// Views alias in the arena, graph outputs included.
pub const VIEWS: Views = Views {
    alias_outputs: true,
    strided_reads: true,
    stores_casts: true,
    offset_views: true,
};

/// Helpers every module includes (dtype conversions, activations).
pub const PRELUDE: &str = include_str!("prelude.cuh");

/// One generated kernel.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Kernel {
    /// Entry point name (`extern "C"`).
    pub name: String,
    /// The graph node it computes.
    pub node: String,
    /// CUDA C source of the kernel alone (the module adds [`PRELUDE`]).
    pub source: String,
    /// Threads to launch (one per element, or per 16-byte vector).
    pub threads: usize,
    /// Whether it moves 16 bytes per access.
    pub vectorized: bool,
    /// The graph values its tensor parameters read, in parameter order (indices of
    /// `ValueId`s).
    pub inputs: Vec<u32>,
    /// The graph values it writes, as the parameters after the inputs, in order.
    pub outputs: Vec<u32>,
    /// Dynamic shared memory per block, bytes.
    pub shared_mem: u32,
    /// Blocks to launch.
    pub grid: u32,
    /// Threads per block.
    pub block: u32,
    /// The index check it makes, when it reads indices computed on the device: its
    /// last parameter is then the run's error word (`unsigned int*`, after the
    /// outputs).
    #[serde(default)]
    pub index_check: Option<crate::plan::IndexCheck>,
}

/// The kernel of `spec` for node `n` (named `name`): one exhaustive match over the
/// specs [`crate::lower`] makes, so a new family is a compile error here.
pub fn kernel(spec: &Spec, name: &str) -> Result<Kernel> {
    crate::lower::dispatch::write_spec!(spec, name)
}

/// The name of node `i`'s kernel: `k12_layernormalization` (reports group kernels by
/// op).
pub fn kernel_name(i: usize, n: &Node) -> String {
    format!("k{i}_{}", ident(n.op.name()))
}

/// The kernels of `g`'s nodes that [`crate::lower`] makes generated kernels (not views
/// or GEMMs), in node order, and the nodes with no CUDA kernel (name and why). For
/// tests and reports; the plan ([`plan`]) is what runs.
pub fn emit_kernels(g: &gopt_ir::Verified) -> Result<crate::plan::Emitted<Kernel>> {
    let mut kernels = Vec::new();
    let mut others = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        match lower(g, n, VIEWS)? {
            Lowered::Kernel(spec) => match kernel(&spec, &kernel_name(i, n)) {
                Ok(k) => kernels.push(k),
                Err(e @ CodegenError::Unsupported { .. }) => {
                    others.push((n.name.clone(), e.for_backend(BACKEND).to_string()))
                }
                Err(e) => return Err(e),
            },
            // Refused while lowering (a typed spec that does not parse, too): named
            // with the node, its op and this backend, as a writer's refusal is.
            Lowered::Unsupported(why) => others.push((
                n.name.clone(),
                crate::lower::support::unsupported(n, &why)
                    .for_backend(BACKEND)
                    .to_string(),
            )),
            Lowered::View
            | Lowered::Window(_)
            | Lowered::Absorbed
            | Lowered::Folded(_)
            | Lowered::Gemm(_)
            | Lowered::ConvGemm(_)
            | Lowered::PackedGemm(_)
            | Lowered::Collective(_) => {}
        }
    }
    Ok((kernels, others))
}

impl Kernel {
    /// A kernel of `n` threads in blocks of 256 (grid-stride loops cover what the grid
    /// cannot), no shared memory, no index check: the shape of most generated kernels.
    pub fn flat(
        name: &str,
        node: &str,
        source: String,
        n: usize,
        inputs: Vec<u32>,
        outputs: Vec<u32>,
    ) -> Kernel {
        Kernel {
            name: name.to_string(),
            node: node.to_string(),
            source,
            threads: n,
            vectorized: false,
            inputs,
            outputs,
            shared_mem: 0,
            grid: support::blocks(n, 256),
            block: 256,
            index_check: None,
        }
    }
}

/// One compilable module: the prelude and every kernel.
pub fn module_source(kernels: &[Kernel]) -> String {
    let mut s = String::from(PRELUDE);
    for k in kernels {
        s.push('\n');
        s.push_str(&k.source);
    }
    s
}

fn ident(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}
