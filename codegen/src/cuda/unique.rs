//! Unique in CUDA ([`crate::lower::counted::unique`]): one block flags the first
//! occurrence of every slice (no earlier slice equal) in a bitmask in shared memory,
//! then ranks each slice's group by counting flagged slices (sorted: the ones that
//! compare below it; unsorted: the ones before its first occurrence) and stores Y,
//! `indices`, `inverse_indices` and `counts` at those ranks — O(d) slice comparisons
//! per slice, exactly the interpreter's groups and order. Elements compare as the
//! interpreter's `cmp_elem` does: floats in float (f64 in double) with every NaN equal
//! and after every number, integers exactly in their own type. The WGSL kernel
//! (`wgsl/unique.rs`) is the same algorithm line by line.

use super::elementwise::storage;
use super::Kernel;
use crate::lower::counted::{count_slot, unique, UniqueSpec};
use crate::lower::support::unsupported;
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, Graph, Node};

const TEMPLATE: &str = include_str!("unique.cu");

/// Slices at most: the first-occurrence bitmask (`d` bits) must fit in shared memory
/// (the WGSL kernel's limit, kept the same).
pub const MAX_SLICES: usize = 65536;

/// Emits the kernel for Unique node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let sp = unique(g, node)?;
    let dt = sp.dtype;
    let t = storage(dt);
    check_size(node, &sp)?;
    let d = sp.d;
    // The optional outputs, after Y in node order, then the status words.
    let optional = [
        ("indices", sp.indices),
        ("inverse", sp.inverse),
        ("counts", sp.counts),
    ];
    let mut params = String::new();
    let mut outputs = vec![sp.y.0];
    for (field, v) in optional.iter().filter_map(|(f, v)| v.map(|v| (*f, v))) {
        params += &format!("long long* __restrict__ {field}, ");
        outputs.push(v.0);
    }
    let mut store_first = String::new();
    if sp.indices.is_some() {
        store_first += "            indices[rank] = (long long)i;\n";
    }
    if sp.counts.is_some() {
        store_first += &format!(
            "            unsigned int c = 1u;\n            for (unsigned int j = i + 1u; j < {d}u; ++j) {{\n                if (cmp_slices(j, i) == 0) {{\n                    c += 1u;\n                }}\n            }}\n            counts[rank] = (long long)c;\n"
        );
    }
    let store_inverse = if sp.inverse.is_some() {
        "        inverse[i] = (long long)rank;\n"
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
            ("d", &d.to_string()),
            ("outer", &sp.outer.to_string()),
            ("inner", &sp.inner.to_string()),
            ("order", sp.order()),
            ("rank_what", sp.rank_what()),
            ("name", name),
            ("t", t),
            ("params", &params),
            ("words", &d.div_ceil(32).max(1).to_string()),
            ("cmp", &cmp_body(dt)),
            ("cmp_slices", &over_slice(&sp, 8, "a", "b", cmp_step)),
            ("rank", &rank_body(&sp)),
            ("copy", &over_slice(&sp, 12, "rank", "i", copy_step)),
            ("store_first", &store_first),
            ("store_inverse", store_inverse),
            ("store_counts", &store_counts),
        ],
    )?;
    let mut k = Kernel::flat(name, &node.name, source, 1024, vec![sp.x.0], outputs);
    k.grid = 1;
    k.block = 1024;
    Ok(k)
}

/// Refuses empty data, more elements than a u32 indexes, and more slices than the
/// bitmask holds (as the WGSL kernel does).
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
            &format!("more than {MAX_SLICES} slices to compare"),
        ));
    }
    Ok(())
}

/// Loops over the elements of two slices `a` and `b` (only over the dims longer than
/// 1, as the WGSL kernel does), with `step(ea, eb, indent)` given the offsets of the
/// element in each.
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
            "{}for (unsigned int o = 0u; o < {}u; ++o) {{\n",
            pads[pads.len() - 1],
            sp.outer
        );
        pads.push(" ".repeat(indent + 4 * pads.len()));
        ea = format!("((long long)o * {d}LL + {ea})");
        eb = format!("((long long)o * {d}LL + {eb})");
    }
    if inner > 1 {
        head += &format!(
            "{}for (unsigned int k = 0u; k < {inner}u; ++k) {{\n",
            pads[pads.len() - 1]
        );
        pads.push(" ".repeat(indent + 4 * pads.len()));
        ea = format!("(long long){ea} * {inner}LL + k");
        eb = format!("(long long){eb} * {inner}LL + k");
    }
    let mut text = head + &step(&ea, &eb, &pads[pads.len() - 1]);
    for pad in pads.iter().rev().skip(1) {
        text += &format!("{pad}}}\n");
    }
    text
}

/// One element of `cmp_slices`: returns the first difference.
fn cmp_step(ea: &str, eb: &str, pad: &str) -> String {
    format!("{pad}const int c = cmp_elem(x[{ea}], x[{eb}]);\n{pad}if (c != 0) {{\n{pad}    return c;\n{pad}}}\n")
}

/// One element of a first occurrence's slice of Y.
fn copy_step(ea: &str, eb: &str, pad: &str) -> String {
    format!("{pad}y[{ea}] = x[{eb}];\n")
}

/// The body of `rank_of(i)`: counts flagged slices into `rank`.
fn rank_body(sp: &UniqueSpec) -> String {
    if sp.sorted {
        format!(
            "        for (unsigned int j = 0u; j < {}u; ++j) {{\n            if (is_first(j) && cmp_slices(j, i) < 0) {{\n                rank += 1u;\n            }}\n        }}",
            sp.d
        )
    } else {
        "        for (unsigned int j = 0u; j <= i; ++j) {\n            if (is_first(j)) {\n                if (cmp_slices(j, i) == 0) {\n                    break;\n                }\n                rank += 1u;\n            }\n        }".to_string()
    }
}

/// The body of `cmp_elem(a, b)` for stored elements of `dt`: -1, 0 or 1, floats in
/// float (f64 in double) with NaN after every number and equal to NaN, integers exactly.
fn cmp_body(dt: DType) -> String {
    let ct = match dt {
        DType::F32 | DType::F16 | DType::BF16 => "float",
        DType::F64 => "double",
        _ => {
            return "        if (a < b) {\n            return -1;\n        }\n        if (a > b) {\n            return 1;\n        }\n        return 0;".to_string();
        }
    };
    format!(
        "        const {ct} fa = gopt_ld(a);\n        const {ct} fb = gopt_ld(b);\n        const bool na = isnan(fa);\n        const bool nb = isnan(fb);\n        if (na || nb) {{\n            return (na ? 1 : 0) - (nb ? 1 : 0);\n        }}\n        if (fa < fb) {{\n            return -1;\n        }}\n        if (fa > fb) {{\n            return 1;\n        }}\n        return 0;"
    )
}
