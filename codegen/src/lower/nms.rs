//! NonMaxSuppression, read once for every backend: the boxes, scores and limits of a
//! node whose output rows the device counts ([`super::counted`]), and the sizes both
//! backends' kernels refuse.

use super::support::{input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// Boxes per batch at most: the kernels flag kept and suppressed boxes in a bitset of
/// 8 KiB of shared (workgroup) memory.
pub const MAX_BOXES: usize = 65536;

/// Refuses NonMaxSuppression with more boxes, scores or output words than a u32
/// indexes, or more boxes per batch than the kernels' bitset holds.
pub fn nms_size(n: &Node, sp: &NmsSpec) -> Result<()> {
    let too_big = |k: usize| u32::try_from(k).is_err();
    let pairs = sp.batches * sp.classes;
    if too_big(sp.batches * sp.boxes * 4) || too_big(pairs * sp.boxes) || too_big(sp.bound * 3) {
        return Err(unsupported(
            n,
            "more than 2^32 boxes, scores or output words",
        ));
    }
    if sp.boxes > MAX_BOXES {
        return Err(unsupported(
            n,
            &format!("more than {MAX_BOXES} boxes per batch"),
        ));
    }
    Ok(())
}

/// A NonMaxSuppression node, resolved: `batches` × `boxes` boxes of 4 coordinates and
/// `batches` × `classes` × `boxes` scores; the limits are inputs 2..4 (absent: keep no
/// box, IoU threshold 0.0 and no score threshold).
#[derive(Clone, Debug, PartialEq)]
pub struct NmsSpec {
    /// The node.
    pub site: Site,
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

impl NmsSpec {
    /// The box format, for the kernels' headers.
    pub fn format(&self) -> &'static str {
        if self.center_point_box {
            "[x_center, y_center, width, height]"
        } else {
            "corners [y1, x1, y2, x2]"
        }
    }
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
        site: Site::of(n),
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
