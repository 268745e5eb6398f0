//! QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv in CUDA ([`crate::lower::quant`]): not written yet.

use super::support::unsupported;
use super::Kernel;
use crate::Result;
use gopt_ir::{Graph, Node};

/// Emits the kernel for node `node` of `g`.
pub fn emit(_g: &Graph, node: &Node, _name: &str) -> Result<Kernel> {
    Err(unsupported(node, "this op (no CUDA kernel yet)"))
}
