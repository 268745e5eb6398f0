//! The indexing ops, read once for every backend: GatherND, Tile, DepthToSpace,
//! SpaceToDepth, CenterCropPad, ReverseSequence, OneHot, EyeLike, Range and
//! ConstantOfShape. Each becomes one thread per output element that works out which
//! input element it copies, or the value it generates, so a spec here is the output's
//! size and the arithmetic from an output element back to its source:
//!
//! - [`MapSpec`] (Tile, DepthToSpace, SpaceToDepth, CenterCropPad): the output seen as
//!   axes each mapped to the input by a coordinate rule (as is, modulo the input's
//!   length, or shifted with zeros outside the input). Everything comes from the static
//!   shapes: a Tile's repeats are the output's dims over the input's, a crop or pad's
//!   offsets the difference of the two, a block op's regrouping a transpose of a 6-D
//!   view.
//! - [`GatherNdSpec`], [`ReverseSpec`]: indices (sequence lengths) read on the device and
//!   checked there ([`crate::plan::IndexCheck`]), since they may be computed on it.
//! - [`OneHotSpec`], [`EyeSpec`], [`RangeSpec`], [`FillSpec`]: generated values (a
//!   OneHot's out-of-range index gives an all-off row, as the spec says, not an error).

use super::index::strides;
use super::support::{input, output, plan, typed, unsupported, Site};
use crate::plan::index_code;
use crate::Result;
use gopt_ir::{DType, Graph, Node, Tensor, ValueId};

/// Which indexing op a node is, as [`super::lower`] maps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexedOp {
    /// Tile.
    Tile,
    /// DepthToSpace.
    DepthToSpace,
    /// SpaceToDepth.
    SpaceToDepth,
    /// CenterCropPad.
    CenterCropPad,
    /// GatherND.
    GatherNd,
    /// ReverseSequence.
    ReverseSequence,
    /// OneHot.
    OneHot,
    /// EyeLike.
    EyeLike,
    /// Range.
    Range,
    /// ConstantOfShape.
    ConstantOfShape,
}

/// An indexing node, resolved, with what its writers need besides its form.
#[derive(Clone, Debug, PartialEq)]
pub struct Indexed {
    /// The node.
    pub site: Site,
    /// The code an index or length out of range raises ([`index_code`]).
    pub code: u32,
    /// The output's dtype.
    pub out_dtype: DType,
    /// The form.
    pub form: IndexedSpec,
}

/// An indexing node's form, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexedSpec {
    /// Tile, DepthToSpace, SpaceToDepth, CenterCropPad.
    Map(MapSpec),
    /// GatherND.
    GatherNd(GatherNdSpec),
    /// ReverseSequence.
    Reverse(ReverseSpec),
    /// OneHot.
    OneHot(OneHotSpec),
    /// EyeLike.
    Eye(EyeSpec),
    /// Range.
    Range(RangeSpec),
    /// ConstantOfShape.
    Fill(FillSpec),
}

/// How an output coordinate `c` along one axis of a [`MapSpec`] picks the input's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisRead {
    /// The input coordinate is `c`.
    Direct {
        /// The input's stride for it.
        stride: usize,
    },
    /// The input coordinate is `c % len` (Tile).
    Wrap {
        /// The input's length along the axis (at least 1).
        len: usize,
        /// The input's stride.
        stride: usize,
    },
    /// The input coordinate is `c - shift`; outside `0..len` the element is zero
    /// (CenterCropPad: a positive shift pads, a negative one crops).
    Shift {
        /// The leading pad (negative: the leading elements cropped).
        shift: i64,
        /// The input's length along the axis.
        len: usize,
        /// The input's stride.
        stride: usize,
    },
}

/// Tile, DepthToSpace, SpaceToDepth or CenterCropPad: output element `i`, split into
/// coordinates along [`MapSpec::axes`] (row-major, the output's own element order),
/// copies the input element the axes' reads add up to, or is zero where a shifted axis
/// falls outside the input.
#[derive(Clone, Debug, PartialEq)]
pub struct MapSpec {
    /// The input.
    pub x: ValueId,
    /// The output.
    pub out: ValueId,
    /// The dtype (copied as stored).
    pub dtype: DType,
    /// Output elements (at least 1).
    pub n: usize,
    /// Input elements.
    pub x_len: usize,
    /// The output's axes from the first to the last, as (dim, read).
    pub axes: Vec<(usize, AxisRead)>,
}

impl MapSpec {
    /// Whether some element is zero instead of a copy (a padded axis).
    pub fn pads(&self) -> bool {
        self.axes
            .iter()
            .any(|(_, r)| matches!(r, AxisRead::Shift { .. }))
    }
}

/// GatherND: output element `i` is element `i % chunk` of the slice that row
/// `r = i / chunk` of the indices (`depth` coordinates) picks in its batch
/// (`r / rows_per_batch`).
#[derive(Clone, Debug, PartialEq)]
pub struct GatherNdSpec {
    /// The data.
    pub data: ValueId,
    /// The indices.
    pub indices: ValueId,
    /// The output.
    pub out: ValueId,
    /// The data's dtype (copied as stored).
    pub dtype: DType,
    /// The indices' dtype (i32 or i64).
    pub index_dtype: DType,
    /// Output elements (at least 1).
    pub n: usize,
    /// Data elements.
    pub data_len: usize,
    /// Elements each index row copies.
    pub chunk: usize,
    /// Coordinates per index row (the indices' last dim, at least 1).
    pub depth: usize,
    /// Index rows per batch entry.
    pub rows_per_batch: usize,
    /// Data elements per batch entry.
    pub batch_stride: usize,
    /// Per coordinate of a row: the data axis' length and stride.
    pub coords: Vec<(usize, usize)>,
}

impl GatherNdSpec {
    /// What an index out of range is, for the run's error message.
    pub fn out_of_range(&self) -> String {
        coords_out_of_range(&self.coords)
    }

    /// The longest indexed axis.
    pub fn max_len(&self) -> usize {
        longest_coord(&self.coords)
    }
}

/// What an index out of range is for the indexed axes `coords` (length, stride), for
/// the run's error message (GatherND and ScatterND alike).
pub fn coords_out_of_range(coords: &[(usize, usize)]) -> String {
    let lens: Vec<String> = coords.iter().map(|(l, _)| l.to_string()).collect();
    format!(
        "an index out of range for the indexed axes (lengths {})",
        lens.join(", ")
    )
}

/// The longest of the indexed axes `coords` (length, stride); 1 for none.
pub fn longest_coord(coords: &[(usize, usize)]) -> usize {
    coords.iter().map(|c| c.0).max().unwrap_or(1)
}

/// ReverseSequence: output element `i` at batch `b` and time `t` copies the input at
/// time `len - 1 - t` where `t < len = lens[b]`, and at `t` otherwise. Each length is
/// read on the device and checked against `0..=time_len`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReverseSpec {
    /// The input.
    pub x: ValueId,
    /// The sequence lengths.
    pub lens: ValueId,
    /// The output.
    pub out: ValueId,
    /// The dtype (copied as stored).
    pub dtype: DType,
    /// The lengths' dtype (i32 or i64).
    pub lens_dtype: DType,
    /// Elements (at least 1).
    pub n: usize,
    /// The batch axis' length and stride.
    pub batch: (usize, usize),
    /// The time axis' length and stride.
    pub time: (usize, usize),
}

impl ReverseSpec {
    /// What a length out of range is, for the run's error message.
    pub fn out_of_range(&self) -> String {
        format!(
            "a sequence length outside 0..={} (the time axis' length)",
            self.time.0
        )
    }
}

/// OneHot: output element `i` is `(outer, j, inner)` around the inserted axis; it is
/// `values[1]` (on) where the index at `(outer, inner)`, a negative one plus `depth`,
/// equals `j`, and `values[0]` (off) otherwise (an index out of range matches no `j`).
#[derive(Clone, Debug, PartialEq)]
pub struct OneHotSpec {
    /// The indices.
    pub indices: ValueId,
    /// `[off, on]`.
    pub values: ValueId,
    /// The output.
    pub out: ValueId,
    /// The indices' dtype (any number).
    pub index_dtype: DType,
    /// The values' (and output's) dtype, copied as stored.
    pub dtype: DType,
    /// Output elements (at least 1).
    pub n: usize,
    /// The inserted axis' length.
    pub depth: usize,
    /// Elements after it.
    pub inner: usize,
}

/// EyeLike: `rows × cols`, one on the diagonal `c - r == k`, zero elsewhere.
#[derive(Clone, Debug, PartialEq)]
pub struct EyeSpec {
    /// The output.
    pub out: ValueId,
    /// Its dtype.
    pub dtype: DType,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// The diagonal.
    pub k: i64,
}

/// A scalar operand: known when compiling, or one element read on the device.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// A constant (one element, of the op's dtype).
    Const(Tensor),
    /// A one-element tensor computed on the device.
    Input(ValueId),
}

/// Range: element `i` is `start + i × delta`, `n` of them (the output's static length).
#[derive(Clone, Debug, PartialEq)]
pub struct RangeSpec {
    /// The output.
    pub out: ValueId,
    /// Its dtype.
    pub dtype: DType,
    /// Elements (at least 1).
    pub n: usize,
    /// The first value.
    pub start: Scalar,
    /// The step.
    pub delta: Scalar,
    /// f16/bf16 computed as the interpreter does by default: `i × delta` rounded to f32,
    /// then the sum rounded to f32 (else floats are `start + i × delta` rounded once,
    /// integers exact and wrapped).
    pub stash_f32: bool,
}

/// ConstantOfShape: every element is `value`.
#[derive(Clone, Debug, PartialEq)]
pub struct FillSpec {
    /// The output.
    pub out: ValueId,
    /// Its dtype.
    pub dtype: DType,
    /// Elements (at least 1).
    pub n: usize,
    /// The value (one element of `dtype`).
    pub value: Tensor,
}

/// Reads indexing node `node` (of op `op`) of `g`.
pub fn spec(g: &Graph, node: &Node, op: IndexedOp) -> Result<Indexed> {
    let form = match op {
        IndexedOp::Tile => tile(g, node).map(IndexedSpec::Map),
        IndexedOp::DepthToSpace => depth_space(g, node, true).map(IndexedSpec::Map),
        IndexedOp::SpaceToDepth => depth_space(g, node, false).map(IndexedSpec::Map),
        IndexedOp::CenterCropPad => center_crop_pad(g, node).map(IndexedSpec::Map),
        IndexedOp::GatherNd => gather_nd(g, node).map(IndexedSpec::GatherNd),
        IndexedOp::ReverseSequence => reverse_sequence(g, node).map(IndexedSpec::Reverse),
        IndexedOp::OneHot => one_hot(g, node).map(IndexedSpec::OneHot),
        IndexedOp::EyeLike => eye_like(g, node).map(IndexedSpec::Eye),
        IndexedOp::Range => range(g, node).map(IndexedSpec::Range),
        IndexedOp::ConstantOfShape => constant_of_shape(g, node).map(IndexedSpec::Fill),
    }?;
    Ok(Indexed {
        site: Site::of(node),
        code: index_code(g, node)?,
        out_dtype: typed(g, node, output(node, 0)?)?.0,
        form,
    })
}

/// The output's elements, refusing an empty output (nothing to run; WGSL cannot bind
/// an empty buffer of wide elements).
fn elements(node: &Node, shape: &[usize]) -> Result<usize> {
    match shape.iter().product() {
        0 => Err(unsupported(node, "an empty output")),
        n => Ok(n),
    }
}

/// A one-input op's input and output, with their dtype and shapes.
struct Unary {
    x: ValueId,
    out: ValueId,
    dtype: DType,
    xs: Vec<usize>,
    ys: Vec<usize>,
}

impl Unary {
    /// The map of `n` output elements reading this input through `axes`.
    fn map(&self, n: usize, axes: Vec<(usize, AxisRead)>) -> MapSpec {
        MapSpec {
            x: self.x,
            out: self.out,
            dtype: self.dtype,
            n,
            x_len: self.xs.iter().product(),
            axes,
        }
    }

    /// The map over the output's elements whose axis `a` reads the input's axis `a`
    /// as `read(input length, output length, input stride)` says.
    fn axis_by_axis(
        &self,
        node: &Node,
        read: impl Fn(usize, usize, usize) -> AxisRead,
    ) -> Result<MapSpec> {
        let st = strides(&self.xs);
        let axes = (0..self.ys.len())
            .map(|a| (self.ys[a], read(self.xs[a], self.ys[a], st[a])))
            .collect();
        Ok(self.map(elements(node, &self.ys)?, axes))
    }
}

/// Reads the input and output of one-input op `node` (of the same rank).
fn unary(g: &Graph, node: &Node) -> Result<Unary> {
    let (x, out) = (input(node, 0)?, output(node, 0)?);
    let (dtype, xs) = typed(g, node, x)?;
    let (_, ys) = typed(g, node, out)?;
    if xs.len() != ys.len() {
        return Err(plan(format!(
            "node `{}`: input of rank {} for an output of rank {}",
            node.name,
            xs.len(),
            ys.len()
        )));
    }
    Ok(Unary {
        x,
        out,
        dtype,
        xs,
        ys,
    })
}

/// Tile: along each axis the input coordinate is the output's modulo the input's
/// length (the repeats are the output's dims over the input's).
fn tile(g: &Graph, node: &Node) -> Result<MapSpec> {
    unary(g, node)?.axis_by_axis(node, |x, y, stride| match x == y {
        true => AxisRead::Direct { stride },
        false => AxisRead::Wrap {
            len: x.max(1),
            stride,
        },
    })
}

/// DepthToSpace / SpaceToDepth: the interpreter's regrouping (the input viewed as 6
/// axes, transposed, viewed as the output), as the transposed view's axes each reading
/// the 6-D input's stride.
fn depth_space(g: &Graph, node: &Node, to_space: bool) -> Result<MapSpec> {
    let u = unary(g, node)?;
    let (xs, ys) = (&u.xs, &u.ys);
    let bs = node.attrs.int("blocksize").map_err(plan)?;
    let bs = bs
        .and_then(|b| usize::try_from(b).ok())
        .filter(|&b| b > 0)
        .ok_or_else(|| unsupported(node, "a missing or non-positive blocksize"))?;
    let dcr = match node.attrs.str_or("mode", "DCR").map_err(plan)? {
        "DCR" => true,
        "CRD" => false,
        m => return Err(unsupported(node, &format!("mode `{m}`"))),
    };
    let [n, c, h, w] = xs[..] else {
        return Err(unsupported(node, "an input that is not 4-D"));
    };
    let (tmp, perm) = if to_space {
        if c % (bs * bs) != 0 {
            return Err(unsupported(node, "channels not divisible by blocksize²"));
        }
        let c2 = c / (bs * bs);
        if dcr {
            ([n, bs, bs, c2, h, w], [0, 3, 4, 1, 5, 2])
        } else {
            ([n, c2, bs, bs, h, w], [0, 1, 4, 2, 5, 3])
        }
    } else {
        if h % bs != 0 || w % bs != 0 {
            return Err(unsupported(node, "spatial dims not divisible by blocksize"));
        }
        let tmp = [n, c, h / bs, bs, w / bs, bs];
        if dcr {
            (tmp, [0, 3, 5, 1, 2, 4])
        } else {
            (tmp, [0, 1, 3, 5, 2, 4])
        }
    };
    let count = elements(node, ys)?;
    if count != tmp.iter().product::<usize>() {
        return Err(plan(format!(
            "node `{}`: output {ys:?} for input {xs:?}",
            node.name
        )));
    }
    let st = strides(&tmp);
    let axes = perm
        .iter()
        .map(|&p| (tmp[p], AxisRead::Direct { stride: st[p] }))
        .collect();
    Ok(u.map(count, axes))
}

/// CenterCropPad: along each axis the output is centred on the input, the odd element
/// of a difference at the end (`shift = sign(d) × (|d| / 2)` for `d` the output's
/// length minus the input's), zero where it pads. The axes not named keep their
/// length, so the difference (and the shift) is 0 there.
fn center_crop_pad(g: &Graph, node: &Node) -> Result<MapSpec> {
    unary(g, node)?.axis_by_axis(node, |x, y, stride| {
        let d = y as i64 - x as i64;
        let shift = d.signum() * (d.abs() / 2);
        match shift == 0 && y <= x {
            true => AxisRead::Direct { stride },
            false => AxisRead::Shift {
                shift,
                len: x,
                stride,
            },
        }
    })
}

/// The i32 or i64 dtype of an index operand `v` of `node`.
fn index_dtype(g: &Graph, node: &Node, v: ValueId, what: &str) -> Result<(DType, Vec<usize>)> {
    let (dt, shape) = typed(g, node, v)?;
    match dt {
        DType::I32 | DType::I64 => Ok((dt, shape)),
        other => Err(unsupported(node, &format!("{other} {what}"))),
    }
}

/// GatherND with `batch_dims`.
fn gather_nd(g: &Graph, node: &Node) -> Result<GatherNdSpec> {
    let (data, indices, out) = (input(node, 0)?, input(node, 1)?, output(node, 0)?);
    let (dtype, ds) = typed(g, node, data)?;
    let (index_dtype, is) = index_dtype(g, node, indices, "indices")?;
    let (_, ys) = typed(g, node, out)?;
    let b = usize::try_from(node.attrs.int_or("batch_dims", 0).map_err(plan)?)
        .map_err(|_| unsupported(node, "negative batch_dims"))?;
    let depth = *is
        .last()
        .ok_or_else(|| unsupported(node, "scalar indices"))?;
    if b >= is.len() || depth == 0 || b + depth > ds.len() || ds[..b] != is[..b] {
        return Err(unsupported(
            node,
            "indices whose depth and batch dims do not fit the data",
        ));
    }
    let n = elements(node, &ys)?;
    let batches: usize = ds[..b].iter().product();
    let rows: usize = is[..is.len() - 1].iter().product();
    let st = strides(&ds);
    Ok(GatherNdSpec {
        data,
        indices,
        out,
        dtype,
        index_dtype,
        n,
        data_len: ds.iter().product(),
        chunk: ds[b + depth..].iter().product(),
        depth,
        rows_per_batch: rows / batches.max(1),
        batch_stride: ds[b..].iter().product(),
        coords: (b..b + depth).map(|a| (ds[a], st[a])).collect(),
    })
}

/// ReverseSequence with `batch_axis` and `time_axis`.
fn reverse_sequence(g: &Graph, node: &Node) -> Result<ReverseSpec> {
    let (x, lens, out) = (input(node, 0)?, input(node, 1)?, output(node, 0)?);
    let (dtype, xs) = typed(g, node, x)?;
    let (lens_dtype, ls) = index_dtype(g, node, lens, "sequence_lens")?;
    let axis = |name: &str, default: i64| -> Result<usize> {
        gopt_ir::ops::util::norm_axis(node.attrs.int_or(name, default).map_err(plan)?, xs.len())
            .map_err(plan)
    };
    let (batch, time) = (axis("batch_axis", 1)?, axis("time_axis", 0)?);
    if batch == time || ls.iter().product::<usize>() != xs[batch] {
        return Err(unsupported(
            node,
            "the same batch and time axis, or lengths not one per batch entry",
        ));
    }
    let st = strides(&xs);
    Ok(ReverseSpec {
        x,
        lens,
        out,
        dtype,
        lens_dtype,
        n: elements(node, &xs)?,
        batch: (xs[batch], st[batch]),
        time: (xs[time], st[time]),
    })
}

/// OneHot: the depth is the output's length along the inserted axis.
fn one_hot(g: &Graph, node: &Node) -> Result<OneHotSpec> {
    let (indices, values, out) = (input(node, 0)?, input(node, 2)?, output(node, 0)?);
    let (index_dtype, is) = typed(g, node, indices)?;
    let (dtype, vs) = typed(g, node, values)?;
    let (_, ys) = typed(g, node, out)?;
    if vs.iter().product::<usize>() != 2 || ys.len() != is.len() + 1 {
        return Err(unsupported(node, "values that are not [off, on]"));
    }
    if index_dtype == DType::Bool {
        return Err(unsupported(node, "bool indices"));
    }
    let axis =
        gopt_ir::ops::util::norm_axis(node.attrs.int_or("axis", -1).map_err(plan)?, ys.len())
            .map_err(plan)?;
    Ok(OneHotSpec {
        indices,
        values,
        out,
        index_dtype,
        dtype,
        n: elements(node, &ys)?,
        depth: ys[axis],
        inner: ys[axis + 1..].iter().product(),
    })
}

/// EyeLike: the output's dtype and shape (the input's values are not read).
fn eye_like(g: &Graph, node: &Node) -> Result<EyeSpec> {
    let out = output(node, 0)?;
    let (dtype, ys) = typed(g, node, out)?;
    let [rows, cols] = ys[..] else {
        return Err(unsupported(node, "an output that is not 2-D"));
    };
    elements(node, &ys)?;
    Ok(EyeSpec {
        out,
        dtype,
        rows,
        cols,
        k: node.attrs.int_or("k", 0).map_err(plan)?,
    })
}

/// Input `k` of a Range: a constant, or one element read on the device.
fn range_scalar(g: &Graph, node: &Node, k: usize, dtype: DType) -> Result<Scalar> {
    let v = input(node, k)?;
    let (dt, shape) = typed(g, node, v)?;
    if dt != dtype || shape.iter().product::<usize>() != 1 {
        return Err(unsupported(
            node,
            "a start or delta that is not one element",
        ));
    }
    Ok(match g.constant(v) {
        Some(t) => Scalar::Const(t.clone()),
        None => Scalar::Input(v),
    })
}

/// Range: the length is the output's (static, so the planner knew it); start and delta
/// are constants or read on the device.
fn range(g: &Graph, node: &Node) -> Result<RangeSpec> {
    let out = output(node, 0)?;
    let (dtype, ys) = typed(g, node, out)?;
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::I16 | DType::I32 => {}
        DType::I64 => {}
        other => return Err(unsupported(node, &format!("{other} values"))),
    }
    // `stash_type` is an ONNX type code: 1 (float, the default) or 11 (double).
    let stash_f64 = matches!(
        node.attrs.get("stash_type"),
        Some(gopt_ir::Attr::Int(11)) | Some(gopt_ir::Attr::DType(DType::F64))
    );
    Ok(RangeSpec {
        out,
        dtype,
        n: elements(node, &ys)?,
        start: range_scalar(g, node, 0, dtype)?,
        delta: range_scalar(g, node, 2, dtype)?,
        stash_f32: matches!(dtype, DType::F16 | DType::BF16) && !stash_f64,
    })
}

/// ConstantOfShape: the `value` attribute (f32 0 when absent), the output's shape.
fn constant_of_shape(g: &Graph, node: &Node) -> Result<FillSpec> {
    let out = output(node, 0)?;
    let (dtype, ys) = typed(g, node, out)?;
    let value = match node.attrs.tensor("value").map_err(plan)? {
        Some(t) if t.len() == 1 => t.clone(),
        Some(_) => return Err(unsupported(node, "a value of more than one element")),
        None => Tensor::scalar_f64(DType::F32, 0.0),
    };
    if value.dtype() != dtype {
        return Err(plan(format!(
            "node `{}`: a {} value for a {dtype} output",
            node.name,
            value.dtype()
        )));
    }
    Ok(FillSpec {
        out,
        dtype,
        n: elements(node, &ys)?,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::support::test_graph as graph;

    fn map(g: &Graph) -> MapSpec {
        let op = match g.nodes[0].op.name() {
            "Tile" => IndexedOp::Tile,
            "DepthToSpace" => IndexedOp::DepthToSpace,
            "SpaceToDepth" => IndexedOp::SpaceToDepth,
            "CenterCropPad" => IndexedOp::CenterCropPad,
            other => panic!("not a map test: {other}"),
        };
        match spec(g, &g.nodes[0], op).map(|s| s.form) {
            Ok(IndexedSpec::Map(m)) => m,
            other => panic!("not a map: {other:?}"),
        }
    }

    /// DepthToSpace DCR on [1, 8, 2, 3], blocksize 2: the interpreter's regrouping
    /// ([n, bs, bs, c/4, h, w] transposed by [0, 3, 4, 1, 5, 2]) as output axes reading
    /// the 6-D view's strides.
    #[test]
    fn depth_to_space_reads_the_transposed_view() {
        let g = graph(
            r#"graph "g"(%0 "x": f32[1,8,2,3]) -> (%1) {
  %1 "y": f32[1,2,4,6] = DepthToSpace "d2s"(%0) {blocksize = 2, mode = "DCR"}
}"#,
        );
        let m = map(&g);
        let axes: Vec<(usize, AxisRead)> = [(1, 48), (2, 6), (2, 3), (2, 24), (3, 1), (2, 12)]
            .into_iter()
            .map(|(d, stride)| (d, AxisRead::Direct { stride }))
            .collect();
        assert_eq!(m.axes, axes);
        assert_eq!((m.n, m.x_len), (48, 48));
    }

    /// CenterCropPad crops 20 -> 10 from element 5, pads 8 -> 10 with one leading zero
    /// (the odd element of a difference goes to the end), keeps the last axis.
    #[test]
    fn center_crop_pad_shifts() {
        let g = graph(
            r#"graph "g"(%0 "x": f32[20,8,3], %1 "s": i64[3]) -> (%2) {
  %2 "y": f32[10,10,3] = CenterCropPad "c"(%0, %1)
}"#,
        );
        let m = map(&g);
        assert_eq!(
            m.axes,
            vec![
                (
                    10,
                    AxisRead::Shift {
                        shift: -5,
                        len: 20,
                        stride: 24
                    }
                ),
                (
                    10,
                    AxisRead::Shift {
                        shift: 1,
                        len: 8,
                        stride: 3
                    }
                ),
                (3, AxisRead::Direct { stride: 1 }),
            ]
        );
        assert!(m.pads());
    }
}
