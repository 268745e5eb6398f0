//! ConvTranspose, Col2Im, MaxUnpool, DeformConv in WGSL ([`crate::lower::conv_transpose`]): not written yet.

use super::unsupported;
use super::WgslKernel;
use crate::Result;
use gopt_ir::{Graph, Node};

/// Emits the shader for node `node` of `g`.
pub fn emit(_g: &Graph, node: &Node, _name: &str) -> Result<WgslKernel> {
    Err(unsupported(node, "this op (no WGSL kernel yet)"))
}
