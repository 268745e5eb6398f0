//! The CUDA emitters: kernel source for the nodes of a specialized graph, compiled with
//! NVRTC for the device's architecture. Element-wise nodes (single ops and
//! `FusedElementwise` groups), row kernels (LayerNorm, RMSNorm, softmax over the last
//! axis), data movement, attention (flash-style, tensor cores), convolutions, pools,
//! reductions, split and pad each have an emitter here; GEMMs (and channels-last
//! convolutions) become cuBLASLt calls in the plan ([`gemm`], [`conv_gemm`]).
//! [`emit_kernels`] reports the nodes it has no kernel for, by name; the plan
//! (`crate::plan`) decides what each node becomes.

pub mod attention;
pub mod elementwise;
pub mod gemm;
pub mod movement;
pub mod rows;
// Convolutions, pools, reductions, split and pad (CNN kernels).
pub mod conv;
pub mod conv_gemm;
pub mod conv_kernels;
pub mod conv_spec;
pub mod pool;
pub mod reduce;
pub mod split_pad;
pub mod support;

use crate::Result;
use gopt_ir::{Graph, Op};
use serde::{Deserialize, Serialize};

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

/// The kernels these emitters make for `g` (element-wise, row and data-movement), in
/// node order, and the nodes left to other emitters or library calls (name and op).
pub fn emit_kernels(g: &Graph) -> Result<(Vec<Kernel>, Vec<(String, String)>)> {
    let mut kernels = Vec::new();
    let mut others = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let name = format!("k{i}_{}", ident(n.op.name()));
        match n.op {
            Op::Elementwise(_) | Op::Fused(gopt_ir::ops::FusedOp::FusedElementwise) => {
                kernels.push(elementwise::emit(g, n, &name)?);
            }
            op if rows::handles(op) => kernels.push(rows::emit(g, n, &name)?),
            op if movement::handles(op) => kernels.push(movement::emit(g, n, &name)?),
            op if attention::handles(op) => kernels.push(attention::emit(g, n, &name)?),
            op if conv::handles(op) => kernels.push(conv::emit(g, n, &name)?),
            op if pool::handles(op) => kernels.push(pool::emit(g, n, &name)?),
            op if reduce::handles(op) => kernels.push(reduce::emit(g, n, &name)?),
            op if split_pad::handles(op) => kernels.push(split_pad::emit(g, n, &name)?),
            _ => others.push((n.name.clone(), n.op.name().to_string())),
        }
    }
    Ok((kernels, others))
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
