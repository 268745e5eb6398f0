//! Ops whose output size depends on the data (NonZero, Compress, Unique,
//! NonMaxSuppression), read once for every backend. GPU plans lay memory out before the
//! run, so each such output is laid out at its bound (the most elements it can have:
//! every element of NonZero's input, every row of a Compress condition, every box of
//! every class for NonMaxSuppression) and the kernel writes how many it produced into a
//! word of the run's status buffer, beside the index checks' error word
//! ([`crate::plan::Count`]). The runtime reads that word back with the outputs, one
//! device-to-host read the run makes anyway, and keeps that many.
//!
//! That works where nothing on the device reads the output after the kernel: each
//! counted output must be a graph output that no other node reads. [`bound`] rewrites
//! the types of those outputs to their bounds before the plan is laid out; an op whose
//! counted output feeds another node stays symbolic and is refused with the node it
//! feeds ([`refusal`]).

use super::support::{input, opt_input, output, plan, typed, unsupported};
use crate::plan::Count;
use crate::Result;
use gopt_ir::ops::{ImageOp, ShapeOp};
use gopt_ir::{DType, Dim, Graph, Node, Op, TensorType, ValueId};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Whether `op` is one whose output size the device counts.
pub fn is_counted(op: &Op) -> bool {
    matches!(
        op,
        Op::Shape(ShapeOp::NonZero | ShapeOp::Compress | ShapeOp::Unique)
            | Op::Image(ImageOp::NonMaxSuppression)
    )
}

/// The status word of graph output `v` (word 0 is the index checks' error word), or
/// `None` when `v` is not a graph output.
pub fn count_slot(g: &Graph, v: ValueId) -> Option<u32> {
    let i = g.outputs.iter().position(|&o| o == v)?;
    u32::try_from(i + 1).ok()
}

/// The outputs of counted node `n` whose size depends on the data, each with the axis
/// the count sizes and that axis' bound, read from the node's static inputs.
pub fn counted_outputs(g: &Graph, n: &Node) -> Result<Vec<(ValueId, usize, usize)>> {
    let out = |k: usize| output(n, k);
    Ok(match &n.op {
        Op::Shape(ShapeOp::NonZero) => {
            let (_, s) = typed(g, n, input(n, 0)?)?;
            vec![(out(0)?, 1, s.iter().product())]
        }
        Op::Shape(ShapeOp::Compress) => {
            let sp = compress(g, n)?;
            vec![(out(0)?, sp.axis, sp.bound)]
        }
        Op::Shape(ShapeOp::Unique) => {
            let sp = unique(g, n)?;
            // Y along the axis, indices and counts: one entry per unique element.
            let mut v = vec![(sp.y, sp.axis.unwrap_or(0), sp.d)];
            v.extend(sp.indices.map(|i| (i, 0, sp.d)));
            v.extend(sp.counts.map(|c| (c, 0, sp.d)));
            v
        }
        Op::Image(ImageOp::NonMaxSuppression) => {
            let sp = nms(g, n)?;
            vec![(out(0)?, 0, sp.bound)]
        }
        _ => Vec::new(),
    })
}

/// Why counted node `n` cannot run on a GPU, or `None` when every counted output is a
/// graph output no other node reads.
pub fn refusal(g: &Graph, n: &Node) -> Option<String> {
    let outs = match counted_outputs(g, n) {
        Ok(o) => o,
        Err(e) => return Some(e.to_string()),
    };
    for &(v, _, _) in &outs {
        if !g.outputs.contains(&v) && unread(g, v) {
            // An omitted output (an empty name in the model): laid out, never read.
            continue;
        }
        if let Some(user) = g
            .nodes
            .iter()
            .find(|m| m.inputs.iter().flatten().any(|&i| i == v))
        {
            return Some(format!(
                "output `{}`, whose size depends on the data, feeding node `{}` ({}): a GPU \
                 plan reads such a size back only for a graph output, at the end of the run",
                g.value(v).name,
                user.name,
                user.op.name()
            ));
        }
        if count_slot(g, v).is_none() {
            return Some(format!(
                "output `{}`, whose size depends on the data, which is not a graph output",
                g.value(v).name
            ));
        }
    }
    if !outs.iter().any(|(v, _, _)| g.outputs.contains(v)) {
        return Some(
            "outputs whose size depends on the data, none of them a graph output (a GPU \
             plan reads such a size back only for a graph output, at the end of the run)"
                .into(),
        );
    }
    None
}

fn unread(g: &Graph, v: ValueId) -> bool {
    !g.nodes
        .iter()
        .any(|m| m.inputs.iter().flatten().any(|&i| i == v))
}

/// `g` with each counted output a GPU plan can run laid out at its bound, and the count
/// of each such graph output (an output no one reads is laid out but not counted). `g`
/// itself when it has none.
pub fn bound(g: &Graph) -> Result<(Cow<'_, Graph>, BTreeMap<ValueId, Count>)> {
    let mut counts = BTreeMap::new();
    let mut bounded = Cow::Borrowed(g);
    for n in g.nodes.iter().filter(|n| is_counted(&n.op)) {
        if refusal(g, n).is_some() {
            continue;
        }
        for (v, axis, bound) in counted_outputs(g, n)? {
            // Laid out at the bound and counted even when inference knew the size, so
            // every counted kernel writes its counts.
            let ty = g.ty(v).map_err(plan)?;
            let mut shape = ty.shape.clone();
            let at = shape
                .get_mut(axis)
                .ok_or_else(|| plan(format!("{}: output rank below its axis {axis}", n.name)))?;
            *at = Dim::Known(bound as u64);
            if gopt_ir::dim::concrete(&shape).is_none() {
                return Err(unsupported(n, "symbolic dims besides the counted one"));
            }
            if let Some(slot) = count_slot(g, v) {
                counts.insert(v, Count { axis, slot });
            }
            bounded.to_mut().values[v.index()].ty = Some(TensorType::new(ty.dtype, shape));
        }
    }
    Ok((bounded, counts))
}

/// A Compress node, resolved: `x` viewed as `outer` × `d` × `inner` around the axis (or
/// flattened, `outer` = `inner` = 1, without one), the condition's length `len`, and
/// the output's bound along the axis (`min(len, d)`).
#[derive(Clone, Debug)]
pub struct CompressSpec {
    /// The data.
    pub x: ValueId,
    /// The condition (bool, 1-D).
    pub cond: ValueId,
    /// The output.
    pub y: ValueId,
    /// The data's dtype.
    pub dtype: DType,
    /// The axis in the output (0 when the data is flattened).
    pub axis: usize,
    /// Elements before the axis.
    pub outer: usize,
    /// The axis' length in the data.
    pub d: usize,
    /// Elements after the axis.
    pub inner: usize,
    /// The condition's length.
    pub len: usize,
    /// The output's length along the axis at most.
    pub bound: usize,
}

/// Reads Compress node `n` of `g`.
pub fn compress(g: &Graph, n: &Node) -> Result<CompressSpec> {
    let x = input(n, 0)?;
    let cond = input(n, 1)?;
    let (dtype, s) = typed(g, n, x)?;
    let (cdt, cs) = typed(g, n, cond)?;
    if cdt != DType::Bool || cs.len() != 1 {
        return Err(unsupported(n, "a condition that is not a 1-D bool tensor"));
    }
    let (axis, outer, d, inner) = match n.attrs.int("axis").map_err(plan)? {
        Some(a) => {
            let a = gopt_ir::ops::util::norm_axis(a, s.len()).map_err(plan)?;
            (
                a,
                s[..a].iter().product(),
                s[a],
                s[a + 1..].iter().product(),
            )
        }
        None => (0, 1, s.iter().product(), 1),
    };
    Ok(CompressSpec {
        x,
        cond,
        y: output(n, 0)?,
        dtype,
        axis,
        outer,
        d,
        inner,
        len: cs[0],
        bound: cs[0].min(d),
    })
}

/// A Unique node, resolved: `x` viewed as `outer` × `d` × `inner` around the axis (or
/// flattened: `d` elements), so the unique things are the `d` slices along the axis,
/// compared lexicographically (element by element, `outer` then `inner` order).
#[derive(Clone, Debug)]
pub struct UniqueSpec {
    /// The data.
    pub x: ValueId,
    /// Y: the unique slices (counted along the axis, or 0).
    pub y: ValueId,
    /// `indices` (i64, counted), when the node has it.
    pub indices: Option<ValueId>,
    /// `inverse_indices` (i64, `d` of them), when the node has it.
    pub inverse: Option<ValueId>,
    /// `counts` (i64, counted), when the node has it.
    pub counts: Option<ValueId>,
    /// The data's dtype.
    pub dtype: DType,
    /// The axis, when the node has one.
    pub axis: Option<usize>,
    /// Elements before the axis.
    pub outer: usize,
    /// Slices along the axis (elements when flattened).
    pub d: usize,
    /// Elements after the axis.
    pub inner: usize,
    /// Unique slices in ascending order (else in order of first occurrence).
    pub sorted: bool,
}

impl UniqueSpec {
    /// The order of Y, for the kernels' headers.
    pub fn order(&self) -> &'static str {
        if self.sorted {
            "in ascending order"
        } else {
            "in order of first occurrence"
        }
    }

    /// How a group's rank is counted, for the kernels' headers.
    pub fn rank_what(&self) -> &'static str {
        if self.sorted {
            "the first occurrences that compare below it"
        } else {
            "the first occurrences before its own"
        }
    }
}

/// Reads Unique node `n` of `g`.
pub fn unique(g: &Graph, n: &Node) -> Result<UniqueSpec> {
    let x = input(n, 0)?;
    let (dtype, s) = typed(g, n, x)?;
    let (axis, outer, d, inner) = match n.attrs.int("axis").map_err(plan)? {
        Some(a) => {
            let a = gopt_ir::ops::util::norm_axis(a, s.len()).map_err(plan)?;
            (
                Some(a),
                s[..a].iter().product(),
                s[a],
                s[a + 1..].iter().product(),
            )
        }
        None => (None, 1, s.iter().product(), 1),
    };
    let out = |k: usize| n.outputs.get(k).copied();
    Ok(UniqueSpec {
        x,
        y: output(n, 0)?,
        indices: out(1),
        inverse: out(2),
        counts: out(3),
        dtype,
        axis,
        outer,
        d,
        inner,
        sorted: n.attrs.int_or("sorted", 1).map_err(plan)? != 0,
    })
}

/// A NonMaxSuppression node, resolved: `batches` × `boxes` boxes of 4 coordinates and
/// `batches` × `classes` × `boxes` scores; the limits are inputs 2..4 (absent: keep no
/// box, IoU threshold 0.0 and no score threshold).
#[derive(Clone, Debug)]
pub struct NmsSpec {
    /// Boxes `[batches, boxes, 4]`.
    pub boxes_in: ValueId,
    /// Scores `[batches, classes, boxes]`.
    pub scores: ValueId,
    /// `max_output_boxes_per_class` (i64), when present and not empty (else 0: no box
    /// is kept, as in ONNX and the interpreter).
    pub max_out: Option<ValueId>,
    /// `iou_threshold` (f32), when present and not empty.
    pub iou: Option<ValueId>,
    /// `score_threshold` (f32), when present and not empty.
    pub score_threshold: Option<ValueId>,
    /// The output `[selected, 3]` (i64).
    pub y: ValueId,
    /// The boxes' and scores' dtype.
    pub dtype: DType,
    /// Batches.
    pub batches: usize,
    /// Classes.
    pub classes: usize,
    /// Boxes per batch.
    pub boxes: usize,
    /// Boxes are `[x_center, y_center, width, height]` (else `[y1, x1, y2, x2]`).
    pub center_point_box: bool,
    /// Selections per class at most: `boxes`, or less when the limit is a constant.
    pub per_class: usize,
    /// Rows of the output at most: `batches × classes × per_class`.
    pub bound: usize,
}

/// Reads NonMaxSuppression node `n` of `g`.
pub fn nms(g: &Graph, n: &Node) -> Result<NmsSpec> {
    let boxes_in = input(n, 0)?;
    let scores = input(n, 1)?;
    let (dtype, bs) = typed(g, n, boxes_in)?;
    let (sdt, ss) = typed(g, n, scores)?;
    if bs.len() != 3 || bs[2] != 4 || ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
        return Err(plan(format!(
            "{}: NonMaxSuppression boxes {bs:?} and scores {ss:?} do not match",
            n.name
        )));
    }
    if !dtype.is_float() || sdt != dtype {
        return Err(unsupported(
            n,
            "boxes and scores that are not one float type",
        ));
    }
    // The limits the kernel reads: each present and holding an element (the reference
    // treats an empty one as absent), of the dtype ONNX gives it.
    let given = |k: usize, want: DType, what: &str| -> Result<Option<ValueId>> {
        let Some(v) = opt_input(n, k) else {
            return Ok(None);
        };
        let (dt, s) = typed(g, n, v)?;
        if dt != want {
            return Err(unsupported(n, &format!("a {dt} {what}")));
        }
        Ok((s.iter().product::<usize>() > 0).then_some(v))
    };
    let max_out = given(2, DType::I64, "max_output_boxes_per_class")?;
    // A constant limit bounds the output; one computed on the device does not.
    let per_class = match max_out.and_then(|v| g.constant(v)) {
        Some(t) => {
            let l = t.to_i64_vec().first().copied().unwrap_or(0);
            usize::try_from(l.max(0)).unwrap_or(usize::MAX).min(bs[1])
        }
        None if max_out.is_none() => 0,
        None => bs[1],
    };
    let bound = bs[0]
        .checked_mul(ss[1])
        .and_then(|b| b.checked_mul(per_class))
        .ok_or_else(|| plan(format!("{}: NonMaxSuppression's bound overflows", n.name)))?;
    Ok(NmsSpec {
        boxes_in,
        scores,
        max_out,
        iou: given(3, DType::F32, "iou_threshold")?,
        score_threshold: given(4, DType::F32, "score_threshold")?,
        y: output(n, 0)?,
        dtype,
        batches: bs[0],
        classes: ss[1],
        boxes: bs[1],
        center_point_box: n.attrs.int_or("center_point_box", 0).map_err(plan)? != 0,
        per_class,
        bound,
    })
}
