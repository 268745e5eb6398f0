//! ScatterElements (and the deprecated Scatter), ScatterND and TensorScatter, read once
//! for every backend. The kernels are deterministic without atomics: one thread per
//! output element copies its data element, then walks, in the interpreter's order, the
//! updates that may land on it and applies those that do (the last one wins with
//! reduction none; the reduction combines them in order otherwise). So duplicate
//! indices resolve as on the CPU, and one kernel does the copy and the scatter. Every
//! index an update is written by is read, wrapped and checked by some thread
//! ([`crate::plan::IndexCheck`]):
//!
//! - ScatterElements: the updates that can land on element `c` are those at `c` off the
//!   axis, one per position `t` along the indices' axis, visited in order of `t`
//!   ([`ElementsSpec`]); every index is visited by the threads of its row.
//! - ScatterND: every index row, in order, is compared with the element's slice
//!   ([`NdSpec`]): O(elements × rows × depth), refused past [`MAX_ND_WORK`].
//! - TensorScatter: each cache position knows the update it receives from its batch
//!   entry's write index (linear: the window must fit the cache, else the run fails;
//!   circular: positions wrap) ([`CacheSpec`]). A cache that is a graph input read by
//!   nothing else is updated in place where the backend lets an output alias an input
//!   ([`in_place`]): then one thread per update element writes it, and the rest of the
//!   cache is not touched (generation's KV cache, which lives across steps).

use super::gather_elements::elements_axis;
use super::index::strides;
use super::indexed::{coords_out_of_range, longest_coord};
use super::support::{input, opt_input, output, plan, typed, unsupported, Site};
use crate::plan::{index_code, IndexCheck};
use crate::Result;
use gopt_ir::ops::AttentionOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

/// The most ScatterND work (output elements × index rows × index depth) a kernel is
/// generated for: each thread walks every index row.
pub const MAX_ND_WORK: usize = 1 << 32;

/// How an update combines with the value already there (integers wrap; floats compute
/// in f32, or f64 for f64, rounded to the dtype each time; max and min keep the old
/// value unless the update compares greater or less, so a NaN update never wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// The update replaces the value.
    None,
    /// Sum.
    Add,
    /// Product.
    Mul,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

impl Reduction {
    /// The `reduction` attribute of `node`.
    fn of(node: &Node) -> Result<Reduction> {
        Ok(
            match node.attrs.str_or("reduction", "none").map_err(plan)? {
                "none" => Reduction::None,
                "add" => Reduction::Add,
                "mul" => Reduction::Mul,
                "max" => Reduction::Max,
                "min" => Reduction::Min,
                r => return Err(unsupported(node, &format!("reduction `{r}`"))),
            },
        )
    }
}

/// Which scatter a node is, as [`super::lower`] maps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterOp {
    /// ScatterElements or Scatter.
    Elements,
    /// ScatterND.
    Nd,
    /// TensorScatter.
    Cache,
}

/// A scatter node, resolved, with what its writers need besides its form.
#[derive(Clone, Debug, PartialEq)]
pub struct Scatter {
    /// The node.
    pub site: Site,
    /// The index check: the node's code, and what an index out of range is.
    pub check: IndexCheck,
    /// TensorScatter writes the cache in place ([`in_place`]).
    pub in_place: bool,
    /// The form.
    pub form: ScatterSpec,
}

/// A scatter node's form, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum ScatterSpec {
    /// ScatterElements or Scatter.
    Elements(ElementsSpec),
    /// ScatterND.
    Nd(NdSpec),
    /// TensorScatter.
    Cache(CacheSpec),
}

/// What every scatter has: data, indices and updates, one output like the data.
#[derive(Clone, Debug, PartialEq)]
pub struct Operands {
    /// The data (copied into the output).
    pub data: ValueId,
    /// The indices.
    pub indices: ValueId,
    /// The updates.
    pub updates: ValueId,
    /// The output.
    pub out: ValueId,
    /// The data's (and updates') dtype.
    pub dtype: DType,
    /// The indices' dtype (i32 or i64).
    pub index_dtype: DType,
    /// Output elements (at least 1).
    pub n: usize,
    /// The combination.
    pub reduction: Reduction,
}

/// ScatterElements: element `c` of the data (coordinates over [`ElementsSpec::dims`])
/// receives, for each `t < count`, the update at `p = c with c[axis] = t` (when `c`
/// lies inside the indices off the axis) if `indices[p]` (wrapped) is `c[axis]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ElementsSpec {
    /// Data, indices, updates, output.
    pub ops: Operands,
    /// The scattered axis.
    pub axis: usize,
    /// Per data axis: the data's dim, the indices' dim and the indices' stride.
    pub dims: Vec<(usize, usize, usize)>,
    /// The indices' elements (at least 1).
    pub updates_len: usize,
}

impl ElementsSpec {
    /// The data's length along the axis (what indices are checked against).
    pub fn axis_len(&self) -> usize {
        self.dims[self.axis].0
    }

    /// Positions along the indices' axis.
    pub fn count(&self) -> usize {
        self.dims[self.axis].1
    }

    /// The indices' stride along the axis.
    pub fn axis_stride(&self) -> usize {
        self.dims[self.axis].2
    }

    /// What an index out of range is, for the run's error message.
    pub fn out_of_range(&self) -> String {
        format!(
            "an index out of range for an axis of length {}",
            self.axis_len()
        )
    }
}

/// ScatterND: element `i` is element `j = i % chunk` of the slice at offset `i - j`;
/// each index row `r` (in order) whose coordinates (wrapped, checked) address that
/// slice applies `updates[r × chunk + j]`.
#[derive(Clone, Debug, PartialEq)]
pub struct NdSpec {
    /// Data, indices, updates, output.
    pub ops: Operands,
    /// Elements per slice.
    pub chunk: usize,
    /// Index rows.
    pub rows: usize,
    /// Coordinates per row.
    pub depth: usize,
    /// Per coordinate: the data axis' length and stride.
    pub coords: Vec<(usize, usize)>,
}

impl NdSpec {
    /// What an index out of range is, for the run's error message.
    pub fn out_of_range(&self) -> String {
        coords_out_of_range(&self.coords)
    }

    /// The longest indexed axis.
    pub fn max_len(&self) -> usize {
        longest_coord(&self.coords)
    }
}

/// TensorScatter: the cache seen as `[prefix, max_seq, inner]` around its sequence
/// axis; position `s` of prefix row `p` (batch entry `p / per_batch`, write index `w`)
/// takes update row `p`, position `s - w` when that is in `0..seq` (linear), or
/// `(s - w) mod max_seq` when that is below `seq` (circular).
#[derive(Clone, Debug, PartialEq)]
pub struct CacheSpec {
    /// The cache.
    pub past: ValueId,
    /// The update.
    pub update: ValueId,
    /// The write indices, one per batch entry (absent: all 0).
    pub writes: Option<ValueId>,
    /// The output.
    pub out: ValueId,
    /// The cache's dtype (copied as stored).
    pub dtype: DType,
    /// The write indices' dtype (i32 or i64).
    pub writes_dtype: DType,
    /// Output elements (at least 1).
    pub n: usize,
    /// Elements after the sequence axis.
    pub inner: usize,
    /// The cache's length along it.
    pub max_seq: usize,
    /// The update's length along it.
    pub seq: usize,
    /// Prefix rows (axes before the sequence axis) per batch entry.
    pub per_batch: usize,
    /// Positions wrap around the cache.
    pub circular: bool,
}

impl CacheSpec {
    /// What a write index out of range is, for the run's error message.
    pub fn out_of_range(&self) -> String {
        format!(
            "a write index that puts {} new entries outside a cache of length {}",
            self.seq, self.max_seq
        )
    }
}

/// Reads scatter node `node` (of op `op`) of `g`, placed under `views`.
pub fn spec(g: &Graph, node: &Node, op: ScatterOp, views: super::Views) -> Result<Scatter> {
    let form = match op {
        ScatterOp::Elements => elements(g, node).map(ScatterSpec::Elements)?,
        ScatterOp::Nd => nd(g, node).map(ScatterSpec::Nd)?,
        ScatterOp::Cache => cache(g, node).map(ScatterSpec::Cache)?,
    };
    let what = match &form {
        ScatterSpec::Elements(s) => s.out_of_range(),
        ScatterSpec::Nd(s) => s.out_of_range(),
        ScatterSpec::Cache(s) => s.out_of_range(),
    };
    Ok(Scatter {
        site: Site::of(node),
        check: IndexCheck {
            code: index_code(g, node)?,
            op: node.op.name().into(),
            what,
        },
        in_place: in_place(g, node, views),
        form,
    })
}

/// The data, indices, updates and output of a ScatterElements or ScatterND, with the
/// shapes of the first three.
fn operands(g: &Graph, node: &Node) -> Result<(Operands, [Vec<usize>; 3])> {
    let (data, indices, updates) = (input(node, 0)?, input(node, 1)?, input(node, 2)?);
    let out = output(node, 0)?;
    let (dtype, ds) = typed(g, node, data)?;
    let (index_dtype, is) = typed(g, node, indices)?;
    let (udt, us) = typed(g, node, updates)?;
    if !matches!(index_dtype, DType::I32 | DType::I64) {
        return Err(unsupported(node, &format!("{index_dtype} indices")));
    }
    if udt != dtype {
        return Err(plan(format!(
            "node `{}`: {udt} updates for {dtype} data",
            node.name
        )));
    }
    let n = ds.iter().product();
    if n == 0 {
        return Err(unsupported(node, "empty data"));
    }
    let ops = Operands {
        data,
        indices,
        updates,
        out,
        dtype,
        index_dtype,
        n,
        reduction: Reduction::of(node)?,
    };
    Ok((ops, [ds, is, us]))
}

/// ScatterElements or Scatter along `axis`.
fn elements(g: &Graph, node: &Node) -> Result<ElementsSpec> {
    let (ops, [ds, is, us]) = operands(g, node)?;
    if ds.len() != is.len() || is != us || ds.is_empty() {
        return Err(unsupported(
            node,
            "indices of another rank than the data, or updates of another shape",
        ));
    }
    let axis = elements_axis(node, &ds, &is)?;
    if is.contains(&0) {
        return Err(unsupported(node, "empty indices (nothing to scatter)"));
    }
    let ist = strides(&is);
    Ok(ElementsSpec {
        ops,
        axis,
        dims: (0..ds.len()).map(|a| (ds[a], is[a], ist[a])).collect(),
        updates_len: is.iter().product(),
    })
}

/// ScatterND.
fn nd(g: &Graph, node: &Node) -> Result<NdSpec> {
    let (ops, [ds, is, us]) = operands(g, node)?;
    let (&depth, rows_shape) = is
        .split_last()
        .ok_or_else(|| unsupported(node, "scalar indices"))?;
    let mut want = rows_shape.to_vec();
    if depth > ds.len() {
        return Err(unsupported(node, "indices deeper than the data's rank"));
    }
    want.extend_from_slice(&ds[depth..]);
    if us != want {
        return Err(plan(format!(
            "node `{}`: updates {us:?}, expected {want:?}",
            node.name
        )));
    }
    let rows: usize = rows_shape.iter().product();
    if rows == 0 {
        return Err(unsupported(node, "empty indices (nothing to scatter)"));
    }
    let work = ops
        .n
        .checked_mul(rows)
        .and_then(|w| w.checked_mul(depth.max(1)));
    if work.is_none_or(|w| w > MAX_ND_WORK) {
        return Err(unsupported(
            node,
            "more than 2^32 element × index-row steps (each thread walks every row)",
        ));
    }
    let st = strides(&ds);
    Ok(NdSpec {
        chunk: ds[depth..].iter().product(),
        rows,
        depth,
        coords: (0..depth).map(|a| (ds[a], st[a])).collect(),
        ops,
    })
}

/// Whether TensorScatter node `node` of `g` updates its cache in place (its output
/// aliases input 0's memory): the cache is a graph input that no other node reads and
/// that is not itself an output, and `views` lets outputs alias (an arena). Then the
/// kernel writes the update's rows only.
pub fn in_place(g: &Graph, node: &Node, views: super::Views) -> bool {
    let Some(Some(cache)) = node.inputs.first() else {
        return false;
    };
    node.op == Op::Attention(AttentionOp::TensorScatter)
        && views.alias_outputs
        && g.inputs.contains(cache)
        && !g.outputs.contains(cache)
        && g.nodes
            .iter()
            .filter(|n| n.inputs.contains(&Some(*cache)))
            .count()
            == 1
}

/// TensorScatter with `mode` and `axis`.
fn cache(g: &Graph, node: &Node) -> Result<CacheSpec> {
    let (past, update, out) = (input(node, 0)?, input(node, 1)?, output(node, 0)?);
    let writes = opt_input(node, 2);
    let (dtype, ps) = typed(g, node, past)?;
    let (udt, us) = typed(g, node, update)?;
    let writes_dtype = match writes {
        Some(w) => {
            let (wdt, ws) = typed(g, node, w)?;
            if !matches!(wdt, DType::I32 | DType::I64) || ws.iter().product::<usize>() != ps[0] {
                return Err(unsupported(
                    node,
                    "write indices that are not one int per batch entry",
                ));
            }
            wdt
        }
        None => DType::I64,
    };
    let circular = match node.attrs.str_or("mode", "linear").map_err(plan)? {
        "linear" => false,
        "circular" => true,
        m => return Err(unsupported(node, &format!("mode `{m}`"))),
    };
    let axis =
        gopt_ir::ops::util::norm_axis(node.attrs.int_or("axis", -2).map_err(plan)?, ps.len())
            .map_err(plan)?;
    let fits = ps.len() == us.len()
        && (0..ps.len()).all(|a| {
            if a == axis {
                us[a] <= ps[a]
            } else {
                us[a] == ps[a]
            }
        });
    if axis == 0 || udt != dtype || !fits {
        return Err(unsupported(
            node,
            "an update that does not fit the cache, or the batch axis as the sequence axis",
        ));
    }
    let n: usize = ps.iter().product();
    if n == 0 {
        return Err(unsupported(node, "an empty cache"));
    }
    let prefix: usize = ps[..axis].iter().product();
    Ok(CacheSpec {
        past,
        update,
        writes,
        out,
        dtype,
        writes_dtype,
        n,
        inner: ps[axis + 1..].iter().product(),
        max_seq: ps[axis],
        seq: us[axis],
        per_batch: prefix / ps[0].max(1),
        circular,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::support::test_graph as graph;

    /// ScatterElements along axis 1 of [3, 5] with [2, 2] indices: each element walks
    /// the 2 positions of its row (stride 1 in the indices).
    #[test]
    fn elements_axes() {
        let g = graph(
            r#"graph "g"(%0 "x": f32[3,5], %1 "i": i64[2,2], %2 "u": f32[2,2]) -> (%3) {
  %3 "y": f32[3,5] = ScatterElements "s"(%0, %1, %2) {axis = 1, reduction = "add"}
}"#,
        );
        let s = elements(&g, &g.nodes[0]).expect("spec");
        assert_eq!(s.dims, vec![(3, 2, 2), (5, 2, 1)]);
        assert_eq!((s.axis_len(), s.count(), s.axis_stride()), (5, 2, 1));
        assert_eq!(s.ops.reduction, Reduction::Add);
    }

    /// ScatterND of rows of a [4, 4, 4] tensor: slices of 16, one coordinate each.
    #[test]
    fn nd_slices() {
        let g = graph(
            r#"graph "g"(%0 "x": f32[4,4,4], %1 "i": i64[2,1], %2 "u": f32[2,4,4]) -> (%3) {
  %3 "y": f32[4,4,4] = ScatterND "s"(%0, %1, %2) {reduction = "mul"}
}"#,
        );
        let s = nd(&g, &g.nodes[0]).expect("spec");
        assert_eq!((s.chunk, s.rows, s.depth), (16, 2, 1));
        assert_eq!(s.coords, vec![(4, 16)]);
    }
}
