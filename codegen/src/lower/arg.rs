//! ArgMax, ArgMin and Hardmax, read once for every backend: the axis (`axis`, default 0,
//! or -1 for Hardmax), `select_last_index`, and the input's dims around the axis
//! (`lanes` lanes of `d` elements `inner` apart). The writers compare in the reference's
//! order: NaN above every number and the first one wins, ties to the lower index unless
//! the last is selected.

use super::support::{input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// Which index-selecting op a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// The index of the largest element.
    Max,
    /// The index of the smallest element.
    Min,
    /// 1 at the index of the first largest element, 0 elsewhere (same shape as the input).
    Hardmax,
}

/// An ArgMax, ArgMin or Hardmax node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The node.
    pub site: Site,
    /// Which op.
    pub kind: ArgKind,
    /// The data.
    pub x: ValueId,
    /// The output (i64 indices, or Hardmax's data-typed one-hot lanes).
    pub out: ValueId,
    /// The data's dtype.
    pub dtype: DType,
    /// The axis' length (at least 1).
    pub d: usize,
    /// Elements between neighbours along the axis (the dims after it).
    pub inner: usize,
    /// Lanes along the axis: the input's elements over `d`.
    pub lanes: usize,
    /// Ties go to the last index (`select_last_index`).
    pub last: bool,
}

impl Spec {
    /// Whether the op looks for the largest element (ArgMax, Hardmax).
    pub fn max(&self) -> bool {
        self.kind != ArgKind::Min
    }

    /// Elements of one lane's block: `d * inner`.
    pub fn span(&self) -> usize {
        self.d * self.inner
    }
}

/// Reads ArgMax/ArgMin/Hardmax node `node` of `g`.
pub fn spec(g: &Graph, node: &Node, kind: ArgKind) -> Result<Spec> {
    let x = input(node, 0)?;
    let out = output(node, 0)?;
    let (dtype, shape) = typed(g, node, x)?;
    let hard = kind == ArgKind::Hardmax;
    if dtype == DType::Bool || (hard && !dtype.is_float()) {
        return Err(unsupported(node, &format!("{dtype} data")));
    }
    let axis = node
        .attrs
        .int_or("axis", if hard { -1 } else { 0 })
        .map_err(plan)?;
    let axis = gopt_ir::ops::util::norm_axis(axis, shape.len()).map_err(plan)?;
    let last = !hard && node.attrs.int_or("select_last_index", 0).map_err(plan)? != 0;
    // Hardmax writes the data's type; ArgMax and ArgMin write i64 indices.
    let (out_dt, _) = typed(g, node, out)?;
    if out_dt != if hard { dtype } else { DType::I64 } {
        return Err(unsupported(node, &format!("a {out_dt} output")));
    }
    let d = shape[axis];
    if d == 0 {
        return Err(unsupported(node, "an empty axis"));
    }
    Ok(Spec {
        site: Site::of(node),
        kind,
        x,
        out,
        dtype,
        d,
        inner: shape[axis + 1..].iter().product(),
        lanes: shape.iter().product::<usize>() / d,
        last,
    })
}
