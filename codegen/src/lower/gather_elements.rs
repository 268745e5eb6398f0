//! GatherElements, read once for every backend: `out[p] = data[p with p[axis] =
//! indices[p]]`. The spec gives the output's axes (the indices' dims) with the data's
//! stride on each, so a writer turns output element `i` into a data offset without the
//! gathered axis and adds the checked index times that axis' stride. The indices may be
//! computed on the device: a negative one counts from the end of the axis, and one out
//! of range is an error the kernel raises ([`Spec::out_of_range`]).

use super::index::strides;
use super::support::{input, output, plan, typed, unsupported, Site};
use crate::plan::index_code;
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// A GatherElements node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The node.
    pub site: Site,
    /// The code the kernel raises for an index out of range (`plan::index_code`).
    pub code: u32,
    /// The data.
    pub data: ValueId,
    /// The indices (the output's shape).
    pub indices: ValueId,
    /// The output.
    pub out: ValueId,
    /// The data's dtype (copied as stored).
    pub dtype: DType,
    /// The indices' dtype (i32 or i64).
    pub index_dtype: DType,
    /// The gathered axis.
    pub axis: usize,
    /// Its length in the data (at least 1).
    pub axis_len: usize,
    /// The data's stride along it.
    pub axis_stride: usize,
    /// Output elements (the indices' count, at least 1).
    pub n: usize,
    /// Data elements.
    pub data_len: usize,
    /// Per output axis, the indices' dim and the data's stride (the gathered axis
    /// contributes nothing: its stride is 0 here).
    pub dims: Vec<(usize, usize)>,
}

impl Spec {
    /// What an index out of range is, for the run's error message.
    pub fn out_of_range(&self) -> String {
        format!(
            "an index out of range for an axis of length {}",
            self.axis_len
        )
    }

    /// The output axes from the last to the first, as (dim, data stride), the
    /// gathered axis (stride 0) included so the next axes divide past it.
    pub fn axes_rev(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.dims.iter().rev().copied()
    }
}

/// The `axis` of an elements op over data dims `ds` (GatherElements and
/// ScatterElements alike), normalized, refusing indices dims `is` (of the same rank)
/// wider than the data off the axis.
pub fn elements_axis(node: &Node, ds: &[usize], is: &[usize]) -> Result<usize> {
    let axis = node.attrs.int_or("axis", 0).map_err(plan)?;
    let axis = gopt_ir::ops::util::norm_axis(axis, ds.len()).map_err(plan)?;
    if (0..ds.len()).any(|a| a != axis && is[a] > ds[a]) {
        return Err(unsupported(
            node,
            "indices wider than the data off the axis",
        ));
    }
    Ok(axis)
}

/// Reads GatherElements node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<Spec> {
    let (data, indices) = (input(node, 0)?, input(node, 1)?);
    let out = output(node, 0)?;
    let (dtype, ds) = typed(g, node, data)?;
    let (index_dtype, is) = typed(g, node, indices)?;
    if !matches!(index_dtype, DType::I32 | DType::I64) {
        return Err(unsupported(node, &format!("{index_dtype} indices")));
    }
    if ds.len() != is.len() || ds.is_empty() {
        return Err(unsupported(node, "indices of another rank than the data"));
    }
    let axis = elements_axis(node, &ds, &is)?;
    let n: usize = is.iter().product();
    if n == 0 || ds[axis] == 0 {
        return Err(unsupported(node, "an empty tensor"));
    }
    let st = strides(&ds);
    let dims = (0..is.len())
        .map(|a| (is[a], if a == axis { 0 } else { st[a] }))
        .collect();
    Ok(Spec {
        site: Site::of(node),
        code: index_code(g, node)?,
        data,
        indices,
        out,
        dtype,
        index_dtype,
        axis,
        axis_len: ds[axis],
        axis_stride: st[axis],
        n,
        data_len: ds.iter().product(),
        dims,
    })
}
