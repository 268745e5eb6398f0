//! Convolutions: ONNX `Conv` and `FusedConv` (`act(conv(X, W) + B) + residual`), 1-D and
//! 2-D, any group, strides, dilations, explicit pads or `auto_pad`, NCHW or channels-last,
//! f32/f16/bf16 with f32 accumulation and one rounding at the store. This module takes
//! the node's [`ConvSpec`] as lowering read it (every size baked into the source, so
//! index math uses constant divisors) and picks the kernel: one input channel per group (depthwise)
//! runs a direct kernel, one thread per output; the rest run as an implicit GEMM per
//! group (`[M/g, C/g*taps] x im2col[C/g*taps, N*out]`, the im2col tile gathered on the
//! fly into shared memory) on tensor cores for f16/bf16 and on CUDA cores for f32
//! ([`super::conv_kernels`]); [`ConvSpec`] generates the fused epilogue for all three.

use super::conv_kernels;
use super::Kernel;
use crate::lower::conv::ConvSpec;
use crate::Result;
use gopt_ir::DType;

/// Emits the kernel for a Conv or FusedConv node.
pub fn emit(s: &ConvSpec, name: &str) -> Result<Kernel> {
    let inputs: Vec<u32> = s.site.inputs.iter().flatten().copied().collect();
    let outputs = vec![s.site.output(0)?];
    let (source, grid, block) = if s.cg() == 1 {
        conv_kernels::direct(s, name)?
    } else if matches!(s.x_dt, DType::F16 | DType::BF16) {
        conv_kernels::tensor_cores(s, name)?
    } else {
        conv_kernels::cuda_cores(s, name)?
    };
    Ok(Kernel {
        name: name.to_string(),
        node: s.site.node.clone(),
        source,
        threads: grid as usize * block as usize,
        vectorized: false,
        inputs,
        outputs,
        shared_mem: 0,
        grid,
        block,
        index_check: None,
    })
}
