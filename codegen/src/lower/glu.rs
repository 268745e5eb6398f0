//! SwiGLU, read once for every backend: `Y = A * sigmoid(alpha * A) * B` over two
//! tensors of one float dtype and shape (the gated activation of Llama-style MLPs).
//! Computed in f32 per element; for f16 and bf16 the interpreter rounds the sigmoid
//! and the product `A * sigmoid` to the storage type before the last product, so the
//! spec says which type intermediates are rounded to ([`GluSpec::round`]).

use super::support::{check_float, input, output, plan, typed, unsupported};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// A SwiGLU node, resolved.
#[derive(Clone, Debug)]
pub struct GluSpec {
    /// The activated input `A`.
    pub a: ValueId,
    /// The gate `B` (`A`'s dtype and shape).
    pub b: ValueId,
    /// The output (`A`'s dtype and shape).
    pub out: ValueId,
    /// The dtype of all three (f32, f16 or bf16).
    pub dtype: DType,
    /// Elements.
    pub n: usize,
    /// The sigmoid's slope (`alpha`, 1 by default).
    pub alpha: f32,
}

impl GluSpec {
    /// The narrower float type the intermediates are rounded to, if any (as the
    /// interpreter does for f16 and bf16).
    pub fn round(&self) -> Option<DType> {
        match self.dtype {
            DType::F16 | DType::BF16 => Some(self.dtype),
            _ => None,
        }
    }
}

/// Reads SwiGLU node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<GluSpec> {
    let (a, b, out) = (input(node, 0)?, input(node, 1)?, output(node, 0)?);
    let (dtype, shape) = typed(g, node, a)?;
    check_float(node, dtype, "inputs")?;
    if typed(g, node, b)? != (dtype, shape.clone()) {
        return Err(unsupported(node, "a B of another dtype or shape than A"));
    }
    let alpha = node.attrs.float_or("alpha", 1.0).map_err(plan)?;
    if !alpha.is_finite() {
        return Err(unsupported(node, "a non-finite alpha"));
    }
    Ok(GluSpec {
        a,
        b,
        out,
        dtype,
        n: shape.iter().product(),
        alpha,
    })
}
