//! NonMaxSuppression in CUDA ([`crate::lower::nms`]): per (batch, class) pair,
//! greedy selection of the boxes by score, dropping a box that overlaps an already
//! kept one by more than the IoU threshold, as `ir/src/ops/image/nms.rs` does (the
//! same candidate order, ties by the lower index, the same IoU tests; f32 arithmetic,
//! f64 for f64 boxes, rounded op by op). One block takes the pairs in order and keeps a
//! box per step (`nms.cu`): the best one that no kept box suppresses, the boxes kept or
//! suppressed flagged in a bitset in shared memory (so at most
//! [`crate::lower::nms::MAX_BOXES`] boxes).
//! The rows come out in the reference's order and the total goes to the output's
//! status word ([`crate::plan::Count`]). The limits
//! (`max_output_boxes_per_class`, `iou_threshold`, `score_threshold`) are read in the
//! kernel, so they may be computed on the device; an absent or empty one means what it
//! means to the reference (no boxes, 0.0, no threshold). The WGSL kernel
//! (`wgsl/nms.rs`) is the same algorithm line by line.

use super::elementwise::storage;
use super::Kernel;
use crate::lower::nms::NmsSpec;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("nms.cu");

/// The arithmetic of one float width: the type, its key type, how its bits are read,
/// and the operations rounded one by one (so nothing contracts into an FMA).
struct Real {
    real: &'static str,
    key_t: &'static str,
    bits: &'static str,
    sign_shift: &'static str,
    ops: [&'static str; 4],
}

const F32: Real = Real {
    real: "float",
    key_t: "unsigned int",
    bits: "__float_as_uint",
    sign_shift: "31",
    ops: ["__fadd_rn", "__fsub_rn", "__fmul_rn", "__fdiv_rn"],
};

const F64: Real = Real {
    real: "double",
    key_t: "unsigned long long",
    bits: "(unsigned long long)__double_as_longlong",
    sign_shift: "63",
    ops: ["__dadd_rn", "__dsub_rn", "__dmul_rn", "__ddiv_rn"],
};

/// Emits the kernel of NonMaxSuppression spec `sp`, counting into status word `slot`.
pub fn emit(sp: &NmsSpec, slot: u32, name: &str) -> Result<Kernel> {
    let pairs = sp.batches * sp.classes;
    let r = if sp.dtype == DType::F64 { &F64 } else { &F32 };
    let mut inputs = vec![sp.boxes_in.0, sp.scores.0];
    let mut params = String::new();
    for (v, var, ty) in [
        (sp.max_out, "max_out", "long long"),
        (sp.iou, "iou_threshold", "float"),
        (sp.score_threshold, "score_threshold", "float"),
    ] {
        if let Some(v) = v {
            params.push_str(&format!("const {ty}* __restrict__ {var}, "));
            inputs.push(v.0);
        }
    }
    let pc = sp.per_class;
    // An i64 limit: negative keeps nothing, above the bound keeps the bound.
    let limit = match sp.max_out {
        Some(_) => format!(
            "max_out[0] < 0LL ? 0u : (max_out[0] > {pc}LL ? {pc}u : (unsigned int)max_out[0])"
        ),
        None => "0u".to_string(),
    };
    let passes = match sp.score_threshold {
        Some(_) => format!(
            "!isnan(s) && !isnan(({real})score_threshold[0]) && s > ({real})score_threshold[0]",
            real = r.real
        ),
        None => "true".to_string(),
    };
    let iou = match sp.iou {
        Some(_) => format!("({})iou_threshold[0]", r.real),
        None => "0.0".to_string(),
    };
    let [add, sub, mul, div] = r.ops;
    let source = fill(
        TEMPLATE,
        &[
            ("name", name),
            ("batches", &sp.batches.to_string()),
            ("classes", &sp.classes.max(1).to_string()),
            ("boxes", &sp.boxes.to_string()),
            ("format", sp.format()),
            ("per_class", &pc.to_string()),
            ("slot", &slot.to_string()),
            ("t", storage(sp.dtype)),
            ("real", r.real),
            ("key_t", r.key_t),
            ("bits", r.bits),
            ("sign_shift", r.sign_shift),
            ("add", add),
            ("sub", sub),
            ("mul", mul),
            ("div", div),
            ("params", &params),
            ("center", if sp.center_point_box { "true" } else { "false" }),
            ("passes", &passes),
            ("limit", &limit),
            ("iou", &iou),
            ("pairs", &pairs.to_string()),
            ("words", &sp.boxes.div_ceil(32).max(1).to_string()),
        ],
    )?;
    let mut k = Kernel::flat(name, &sp.site.node, source, 1024, inputs, vec![sp.y.0]);
    k.grid = 1;
    k.block = 1024;
    Ok(k)
}
