//! Unique in WGSL ([`crate::lower::unique`]): the kernel the lowering describes, in
//! WGSL ([`Wgsl`]), one workgroup with the first-occurrence bitmask in workgroup memory
//! — O(d) slice comparisons per slice, exactly the interpreter's groups and order.
//! Elements compare as the interpreter's `cmp_elem` does: floats in f32 with every NaN
//! equal and after every number, integers exactly (i64/u64 as their words).
//!
//! On lavapipe (llvmpipe) a shader invocation runs at most 65535 loop iterations in
//! all, after which every loop ends early: this kernel makes about `d²/128` of them
//! per invocation for `d` one-element slices (more for longer slices), so there it is
//! right up to about 2900 slices and wrong above; real GPUs have no such limit.

use super::counted::data_type;
use super::syntax::Wgsl;
use super::types::{self, kind, Kind};
use super::WgslKernel;
use crate::lower::support::Site;
use crate::lower::unique::{Step, Text, UniqueSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("unique.wgsl");

/// Emits the shader of Unique spec `sp`, counting into the status words `slots`.
pub fn emit(sp: &UniqueSpec, slots: &[u32], name: &str) -> Result<WgslKernel> {
    let dt = sp.dtype;
    let t = data_type(&sp.site, dt)?;
    let cmp = cmp_body(&sp.site, dt)?;
    let text = Text {
        sp,
        syntax: Wgsl::PLAIN,
    };
    let d = sp.d;
    // The optional outputs, bound after Y in node order, then the status words.
    let mut bindings = String::new();
    let mut outputs = vec![sp.y.0];
    for (field, v) in text.optional() {
        bindings += &format!(
            "@group(0) @binding({}) var<storage, read_write> {field}: array<vec2<u32>>;\n",
            outputs.len() + 1
        );
        outputs.push(v.0);
    }
    bindings += &format!(
        "@group(0) @binding({}) var<storage, read_write> status: array<u32>;\n",
        outputs.len() + 1
    );
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("d", &d.to_string()),
            ("outer", &sp.outer.to_string()),
            ("inner", &sp.inner.to_string()),
            ("order", sp.order()),
            ("rank_what", sp.rank_what()),
            ("t", t),
            ("bindings", &bindings),
            ("words", &d.div_ceil(32).max(1).to_string()),
            ("helpers", &types::helpers_for(&cmp)),
            ("cmp", &cmp),
            ("cmp_slices", &text.over_slice(4, "a", "b", Step::Compare)),
            ("rank", &text.rank(4)),
            ("copy", &text.over_slice(12, "rank", "i", Step::Copy)),
            ("store_first", &text.store_first()),
            ("store_inverse", &text.store_inverse()),
            ("store_counts", &Text::<Wgsl>::store_counts(slots)),
        ],
    )?;
    Ok(WgslKernel {
        loop_iterations: Some(loop_iterations(sp)),
        ..WgslKernel::one_workgroup(name, &sp.site.node, source, vec![sp.x.0], outputs)
    })
}

/// The body of `cmp_elem(a, b)` for storage elements of `dt`: -1, 0 or 1, floats in
/// f32 with NaN after every number and equal to NaN, integers exactly.
fn cmp_body(site: &Site, dt: DType) -> Result<String> {
    let plain = "    if (a < b) {\n        return -1;\n    }\n    if (a > b) {\n        return 1;\n    }\n    return 0;";
    Ok(match kind(dt) {
        Some(Kind::Float) => format!(
            "    let fa = {};\n    let fb = {};\n    let na = (bitcast<u32>(fa) & 0x7fffffffu) > 0x7f800000u;\n    let nb = (bitcast<u32>(fb) & 0x7fffffffu) > 0x7f800000u;\n    if (na || nb) {{\n        return select(0, 1, na) - select(0, 1, nb);\n    }}\n    if (fa < fb) {{\n        return -1;\n    }}\n    if (fa > fb) {{\n        return 1;\n    }}\n    return 0;",
            types::load(dt, "a"),
            types::load(dt, "b")
        ),
        Some(Kind::Int | Kind::Uint | Kind::Bool) => plain.to_string(),
        Some(Kind::Wide) => {
            let lt = if dt == DType::I64 {
                "gopt_lt_i64"
            } else {
                "gopt_lt_u64"
            };
            format!("    if (all(a == b)) {{\n        return 0;\n    }}\n    if ({lt}(a, b)) {{\n        return -1;\n    }}\n    return 1;")
        }
        None => return Err(site.unsupported(&format!("{dt} data"))),
    })
}

/// Loop iterations per invocation, about: each of its `d / 256` slices scans the others
/// for its first occurrence (half of them on average), its rank (all of them) and its
/// count (half), each comparison a loop over the slice when it has more than one
/// element.
fn loop_iterations(sp: &UniqueSpec) -> u64 {
    let slice = (sp.outer * sp.inner) as u64;
    let per_compare = 1 + if slice > 1 { slice } else { 0 };
    let d = sp.d as u64;
    d.div_ceil(256)
        .saturating_mul(2 * d + 256)
        .saturating_mul(per_compare)
}
