//! NonMaxSuppression in WGSL ([`crate::lower::nms`]): per (batch, class) pair,
//! greedy selection of the boxes by score, dropping a box that overlaps an already
//! kept one by more than the IoU threshold, as `ir/src/ops/image/nms.rs` does (the
//! same candidate order, ties by the lower index, the same IoU tests; f32 arithmetic
//! where the reference uses f64). One workgroup takes the pairs in order and keeps a box
//! per step (`nms.wgsl`): the best one that no kept box suppresses, the boxes kept or
//! suppressed flagged in a bitset in workgroup memory (so at most
//! [`crate::lower::nms::MAX_BOXES`] boxes).
//! The rows come out in the reference's order and the total goes to the output's
//! status word ([`crate::plan::Count`]). The limits
//! (`max_output_boxes_per_class`, `iou_threshold`, `score_threshold`) are read in the
//! kernel, so they may be computed on the device; an absent or empty one means what it
//! means to the reference (no boxes, 0.0, no threshold). Boxes in f32 or f16 (f64 and
//! bf16 refused, [`super::counted::data_type`]). The CUDA kernel (`cuda/nms.rs`) is the
//! same algorithm line by line.

use super::counted::data_type;
use super::types::{self, helpers_for};
use super::WgslKernel;
use crate::lower::nms::NmsSpec;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("nms.wgsl");

/// Emits the shader of NonMaxSuppression spec `sp`, counting into status word `slot`.
pub fn emit(sp: &NmsSpec, slot: u32, name: &str) -> Result<WgslKernel> {
    let t = data_type(&sp.site, sp.dtype)?;
    let pairs = sp.batches * sp.classes;
    let mut inputs = vec![sp.boxes_in.0, sp.scores.0];
    let mut bindings = String::new();
    for (v, var, ty) in [
        (sp.max_out, "max_out", "vec2<u32>"),
        (sp.iou, "iou_threshold", "f32"),
        (sp.score_threshold, "score_threshold", "f32"),
    ] {
        if let Some(v) = v {
            bindings.push_str(&format!(
                "@group(0) @binding({}) var<storage, read> {var}: array<{ty}>;\n",
                inputs.len()
            ));
            inputs.push(v.0);
        }
    }
    let pc = sp.per_class;
    // An i64 limit: negative keeps nothing, above the bound keeps the bound.
    let limit = match sp.max_out {
        Some(_) => format!(
            "select(select(max_out[0].x, {pc}u, max_out[0].y != 0u || max_out[0].x > {pc}u), \
             0u, (max_out[0].y & 0x80000000u) != 0u)"
        ),
        None => "0u".to_string(),
    };
    let passes = match sp.score_threshold {
        Some(_) => "!gopt_isnan(s) && !gopt_isnan(score_threshold[0]) && s > score_threshold[0]",
        None => "true",
    };
    let iou = match sp.iou {
        Some(_) => "iou_threshold[0]",
        None => "0.0",
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(sp.dtype == DType::F16)),
            ("batches", &sp.batches.to_string()),
            ("classes", &sp.classes.max(1).to_string()),
            ("boxes", &sp.boxes.to_string()),
            ("format", sp.format()),
            ("per_class", &pc.to_string()),
            ("slot", &slot.to_string()),
            ("t", t),
            ("bindings", &bindings),
            ("y_binding", &inputs.len().to_string()),
            ("status_binding", &(inputs.len() + 1).to_string()),
            ("center", if sp.center_point_box { "true" } else { "false" }),
            ("helpers", &helpers_for(&format!("{TEMPLATE}{passes}"))),
            ("load_box", &types::load(sp.dtype, "boxes[i]")),
            ("load_score", &types::load(sp.dtype, "scores[i]")),
            ("passes", passes),
            ("limit", &limit),
            ("iou", iou),
            ("pairs", &pairs.to_string()),
            ("words", &sp.boxes.div_ceil(32).max(1).to_string()),
        ],
    )?;
    Ok(WgslKernel {
        // Per (batch, class) pair: clear the flags, then up to `per_class` steps, each
        // a pass over the boxes for the best, an 8-step reduction and a pass to flag.
        loop_iterations: Some(((sp.batches * sp.classes) as u64).saturating_mul(
            (sp.boxes.div_ceil(32).div_ceil(256) as u64).saturating_add(
                (sp.per_class as u64).saturating_mul(2 * sp.boxes.div_ceil(256) as u64 + 9),
            ),
        )),
        ..WgslKernel::one_workgroup(name, &sp.site.node, source, inputs, vec![sp.y.0])
    })
}
