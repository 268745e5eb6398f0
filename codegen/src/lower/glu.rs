//! SwiGLU, read once for every backend: `Y = A * sigmoid(alpha * A) * B` over two
//! tensors of one float dtype and shape (the gated activation of Llama-style MLPs).
//! Computed in f32 per element; for f16 and bf16 the interpreter rounds the sigmoid
//! and the product `A * sigmoid` to the storage type before the last product, so the
//! spec says which type intermediates are rounded to ([`GluSpec::round`]). Where the
//! backend's kernels allow ([`super::Views`]), `A` and `B` are read in place as columns
//! of a wider tensor (the halves of a merged gate/up GEMM) and a Cast that is the
//! output's only reader is stored instead of the output ([`super::absorb`]).

use super::absorb::{column_reads, stored_cast, Columns};
use super::support::{check_float, input, output, plan, typed, unsupported, Site};
use super::Views;
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// A SwiGLU node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct GluSpec {
    /// The node.
    pub site: Site,
    /// The activated input `A`.
    pub a: ValueId,
    /// The gate `B` (`A`'s dtype and shape).
    pub b: ValueId,
    /// Where `A` is read when it is columns of a wider tensor (`a` is then that tensor).
    pub a_cols: Option<Columns>,
    /// Where `B` is read when it is columns of a wider tensor (`b` is then that tensor).
    pub b_cols: Option<Columns>,
    /// The value the kernel writes: the output, or the Cast of it it stores.
    pub out: ValueId,
    /// The dtype of `A` and `B` (f32, f16 or bf16).
    pub dtype: DType,
    /// The dtype written (`dtype`, or the stored Cast's).
    pub out_dtype: DType,
    /// Elements.
    pub n: usize,
    /// The sigmoid's slope (`alpha`, 1 by default).
    pub alpha: f32,
}

impl GluSpec {
    /// The narrower float type the intermediates are rounded to, if any (as the
    /// interpreter does for f16 and bf16).
    pub fn round(&self) -> Option<DType> {
        matches!(self.dtype, DType::F16 | DType::BF16).then_some(self.dtype)
    }
}

/// Reads SwiGLU node `node` of `g` as a backend with `views` runs it.
pub fn spec(g: &Graph, node: &Node, views: Views) -> Result<GluSpec> {
    let (a, b, mut out) = (input(node, 0)?, input(node, 1)?, output(node, 0)?);
    let (dtype, shape) = typed(g, node, a)?;
    check_float(node, dtype, "inputs")?;
    if typed(g, node, b)? != (dtype, shape.clone()) {
        return Err(unsupported(node, "a B of another dtype or shape than A"));
    }
    let alpha = node.attrs.float_or("alpha", 1.0).map_err(plan)?;
    if !alpha.is_finite() {
        return Err(unsupported(node, "a non-finite alpha"));
    }
    let mut out_dtype = dtype;
    if let Some((cast, true)) = views.stores_casts.then(|| stored_cast(g, node)).flatten() {
        out = output(cast, 0)?;
        out_dtype = typed(g, cast, out)?.0;
    }
    let (a_cols, b_cols) = (column_reads(g, a, views), column_reads(g, b, views));
    Ok(GluSpec {
        site: Site::of(node),
        a: a_cols.map_or(a, |c| c.source),
        b: b_cols.map_or(b, |c| c.source),
        a_cols,
        b_cols,
        out,
        dtype,
        out_dtype,
        n: shape.iter().product(),
        alpha,
    })
}
