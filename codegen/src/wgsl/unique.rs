//! Unique in WGSL ([`crate::lower::counted::unique`]): one workgroup flags the first
//! occurrence of every slice (no earlier slice equal) in a bitmask in workgroup memory,
//! then ranks each slice's group by counting flagged slices (sorted: the ones that
//! compare below it; unsorted: the ones before its first occurrence) and stores Y,
//! `indices`, `inverse_indices` and `counts` at those ranks — O(d) slice comparisons
//! per slice, exactly the interpreter's groups and order. Elements compare as the
//! interpreter's `cmp_elem` does: floats in f32 with every NaN equal and after every
//! number, integers exactly (i64/u64 as their words). The CUDA kernel
//! (`cuda/unique.rs`) is the same algorithm line by line.
//!
//! On lavapipe (llvmpipe) a shader invocation runs at most 65535 loop iterations in
//! all, after which every loop ends early: this kernel makes about `d²/128` of them
//! per invocation for `d` one-element slices (more for longer slices), so there it is
//! right up to about 2900 slices and wrong above; real GPUs have no such limit.

use super::counted::data_type;
use super::types::{self, kind, Kind};
use super::{unsupported, WgslKernel};
use crate::lower::counted::{count_slot, unique, UniqueSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, Graph, Node};

const TEMPLATE: &str = include_str!("unique.wgsl");

/// Slices at most: the first-occurrence bitmask (`d` bits) must fit in workgroup memory.
pub const MAX_SLICES: usize = 65536;

/// Emits the shader for Unique node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let sp = unique(g, node)?;
    let dt = sp.dtype;
    let t = data_type(node, dt)?;
    check_size(node, &sp)?;
    let cmp = cmp_body(node, dt)?;
    let d = sp.d;
    // The optional outputs, bound after Y in node order, then the status words.
    let optional = [
        ("indices", sp.indices),
        ("inverse", sp.inverse),
        ("counts", sp.counts),
    ];
    let mut bindings = String::new();
    let mut outputs = vec![sp.y.0];
    for (field, v) in optional.iter().filter_map(|(f, v)| v.map(|v| (*f, v))) {
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
    let mut store_first = String::new();
    if sp.indices.is_some() {
        store_first += "            indices[rank] = vec2<u32>(i, 0u);\n";
    }
    if sp.counts.is_some() {
        store_first += &format!(
            "            var c = 1u;\n            for (var j: u32 = i + 1u; j < {d}u; j = j + 1u) {{\n                if (cmp_slices(j, i) == 0) {{\n                    c = c + 1u;\n                }}\n            }}\n            counts[rank] = vec2<u32>(c, 0u);\n"
        );
    }
    let store_inverse = if sp.inverse.is_some() {
        "        inverse[i] = vec2<u32>(rank, 0u);\n"
    } else {
        ""
    };
    let mut store_counts = String::new();
    for v in std::iter::once(sp.y).chain(sp.indices).chain(sp.counts) {
        // An omitted output (no graph output) is laid out but not counted.
        if let Some(slot) = count_slot(g, v) {
            store_counts += &format!("        status[{slot}] = total;\n");
        }
    }
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
            ("cmp_slices", &over_slice(&sp, 4, "a", "b", cmp_step)),
            ("rank", &rank_body(&sp)),
            ("copy", &over_slice(&sp, 12, "rank", "i", copy_step)),
            ("store_first", &store_first),
            ("store_inverse", store_inverse),
            ("store_counts", &store_counts),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [1, 1, 1],
        inputs: vec![sp.x.0],
        outputs,
        index_check: None,
        loop_iterations: Some(loop_iterations(&sp)),
    })
}

/// Refuses empty data, more elements than a u32 indexes, and more slices than the
/// bitmask holds.
fn check_size(node: &Node, sp: &UniqueSpec) -> Result<()> {
    let n = sp.outer * sp.d * sp.inner;
    if n == 0 {
        return Err(unsupported(node, "empty data"));
    }
    if u32::try_from(n).is_err() {
        return Err(unsupported(node, "more than 2^32 elements"));
    }
    if sp.d > MAX_SLICES {
        return Err(unsupported(
            node,
            format!("more than {MAX_SLICES} slices to compare"),
        ));
    }
    Ok(())
}

/// Loops over the elements of two slices `a` and `b` (only over the dims longer than
/// 1, so a slice of one element is no loop: lavapipe ends a shader's loops after 65535
/// iterations in all), with `step(ea, eb, indent)` given the offsets of the element in
/// each.
fn over_slice(
    sp: &UniqueSpec,
    indent: usize,
    a: &str,
    b: &str,
    step: fn(&str, &str, &str) -> String,
) -> String {
    let (d, inner) = (sp.d, sp.inner);
    let (mut ea, mut eb) = (a.to_string(), b.to_string());
    let mut pads = vec![" ".repeat(indent)];
    let mut head = String::new();
    if sp.outer > 1 {
        head += &format!(
            "{}for (var o: u32 = 0u; o < {}u; o = o + 1u) {{\n",
            pads[pads.len() - 1],
            sp.outer
        );
        pads.push(" ".repeat(indent + 4 * pads.len()));
        ea = format!("(o * {d}u + {ea})");
        eb = format!("(o * {d}u + {eb})");
    }
    if inner > 1 {
        head += &format!(
            "{}for (var k: u32 = 0u; k < {inner}u; k = k + 1u) {{\n",
            pads[pads.len() - 1]
        );
        pads.push(" ".repeat(indent + 4 * pads.len()));
        ea = format!("{ea} * {inner}u + k");
        eb = format!("{eb} * {inner}u + k");
    }
    let mut text = head + &step(&ea, &eb, &pads[pads.len() - 1]);
    for pad in pads.iter().rev().skip(1) {
        text += &format!("{pad}}}\n");
    }
    text
}

/// One element of `cmp_slices`: returns the first difference.
fn cmp_step(ea: &str, eb: &str, pad: &str) -> String {
    format!("{pad}let c = cmp_elem(x[{ea}], x[{eb}]);\n{pad}if (c != 0) {{\n{pad}    return c;\n{pad}}}\n")
}

/// One element of a first occurrence's slice of Y.
fn copy_step(ea: &str, eb: &str, pad: &str) -> String {
    format!("{pad}y[{ea}] = x[{eb}];\n")
}

/// The body of `rank_of(i)`: counts flagged slices into `rank`.
fn rank_body(sp: &UniqueSpec) -> String {
    if sp.sorted {
        format!(
            "    for (var j: u32 = 0u; j < {}u; j = j + 1u) {{\n        if (is_first(j) && cmp_slices(j, i) < 0) {{\n            rank = rank + 1u;\n        }}\n    }}",
            sp.d
        )
    } else {
        "    for (var j: u32 = 0u; j <= i; j = j + 1u) {\n        if (is_first(j)) {\n            if (cmp_slices(j, i) == 0) {\n                break;\n            }\n            rank = rank + 1u;\n        }\n    }".to_string()
    }
}

/// The body of `cmp_elem(a, b)` for storage elements of `dt`: -1, 0 or 1, floats in
/// f32 with NaN after every number and equal to NaN, integers exactly.
fn cmp_body(node: &Node, dt: DType) -> Result<String> {
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
        None => return Err(unsupported(node, format!("{dt} data"))),
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
