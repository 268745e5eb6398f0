//! `NonMaxSuppression`: greedy per-class selection of boxes by score, dropping boxes
//! that overlap an already selected one by more than the IoU threshold. Mirrors
//! `op_non_max_suppression.py` (ties in score keep the lower box index first).

use super::to_f64_array;
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::Node;
use crate::graph::TensorType;
use crate::ops::util::{in_ty, input, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::Tensor;
use ndarray::{ArrayD, IxDyn};

/// A box as `(x_min, x_max, y_min, y_max)`.
type Rect = (f64, f64, f64, f64);

fn rect(b: &[f64], center_point: bool) -> Rect {
    if center_point {
        let (hw, hh) = (b[2] / 2.0, b[3] / 2.0);
        (b[0] - hw, b[0] + hw, b[1] - hh, b[1] + hh)
    } else {
        // Corners [y1, x1, y2, x2] in any order.
        (
            b[1].min(b[3]),
            b[1].max(b[3]),
            b[0].min(b[2]),
            b[0].max(b[2]),
        )
    }
}

/// True when `a` and `b` overlap by more than `threshold` (intersection over union).
fn suppresses(a: Rect, b: Rect, threshold: f64) -> bool {
    let ix0 = a.0.max(b.0);
    let ix1 = a.1.min(b.1);
    if ix1 <= ix0 {
        return false;
    }
    let iy0 = a.2.max(b.2);
    let iy1 = a.3.min(b.3);
    if iy1 <= iy0 {
        return false;
    }
    let inter = (ix1 - ix0) * (iy1 - iy0);
    let area_a = (a.1 - a.0) * (a.3 - a.2);
    let area_b = (b.1 - b.0) * (b.3 - b.2);
    let union = area_a + area_b - inter;
    if inter <= 0.0 || area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > threshold
}

/// Runs NonMaxSuppression.
pub(super) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let boxes = to_f64_array(input(inputs, 0)?, "NonMaxSuppression boxes")?;
    let scores = to_f64_array(input(inputs, 1)?, "NonMaxSuppression scores")?;
    let first = |i: usize| opt_input(inputs, i).filter(|t| !t.is_empty());
    let max_out = first(2).map_or(0, |t| t.to_i64_vec()[0].max(0)) as usize;
    let iou = first(3).map_or(0.0, |t| t.to_f64_vec()[0]);
    let score_min = first(4).map(|t| t.to_f64_vec()[0]);
    let center_point = node.attrs.int_or("center_point_box", 0)? != 0;
    let (bs, ss) = (boxes.shape(), scores.shape());
    if bs.len() != 3 || bs[2] != 4 || ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
        return Err(IrError::Shape(format!(
            "NonMaxSuppression: boxes {bs:?} must be [B, N, 4] and scores {ss:?} [B, C, N]"
        )));
    }
    let (nb, nc, nbox) = (ss[0], ss[1], ss[2]);
    let bv: Vec<f64> = boxes.iter().copied().collect();
    let sv: Vec<f64> = scores.iter().copied().collect();
    let mut selected: Vec<i64> = Vec::new();
    for b in 0..nb {
        let rects: Vec<Rect> = (0..nbox)
            .map(|i| {
                rect(
                    &bv[(b * nbox + i) * 4..(b * nbox + i) * 4 + 4],
                    center_point,
                )
            })
            .collect();
        for c in 0..nc {
            let s = &sv[(b * nc + c) * nbox..(b * nc + c + 1) * nbox];
            let mut cand: Vec<usize> = (0..nbox)
                .filter(|&i| score_min.is_none_or(|t| s[i] > t))
                .collect();
            // Highest score first; equal scores keep the lower index first.
            cand.sort_by(|&i, &j| s[j].total_cmp(&s[i]).then(i.cmp(&j)));
            let mut kept: Vec<usize> = Vec::new();
            for i in cand {
                if kept.len() >= max_out {
                    break;
                }
                if kept.iter().all(|&k| !suppresses(rects[i], rects[k], iou)) {
                    kept.push(i);
                    selected.extend([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    let n = selected.len() / 3;
    let out = ArrayD::from_shape_vec(IxDyn(&[n, 3]), selected).expect("triples");
    Ok(vec![Tensor::I64(out)])
}

/// NonMaxSuppression's output type: `[selected, 3]` i64, the count known only at run
/// time.
pub(super) fn infer(cx: &mut InferCx, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    in_ty(inputs, 0)?;
    in_ty(inputs, 1)?;
    Ok(vec![TensorType::new(
        DType::I64,
        vec![cx.fresh_dim("nms_selected"), Dim::Known(3)],
    )])
}
