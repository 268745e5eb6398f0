//! Unique in CUDA ([`crate::lower::unique`]): the kernel the lowering describes, in
//! CUDA C ([`Cuda`]), one block with the first-occurrence bitmask in shared memory —
//! O(d) slice comparisons per slice, exactly the interpreter's groups and order.
//! Elements compare as the interpreter's `cmp_elem` does: floats in float (f64 in
//! double) with every NaN equal and after every number, integers exactly in their own
//! type.

use super::elementwise::storage;
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::unique::{Step, Text, UniqueSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("unique.cu");

/// Emits the kernel of Unique spec `sp`, counting into the status words `slots`.
pub fn emit(sp: &UniqueSpec, slots: &[u32], name: &str) -> Result<Kernel> {
    let text = Text {
        sp,
        syntax: Cuda::PLAIN,
    };
    let d = sp.d;
    // The optional outputs, after Y in node order, then the status words.
    let mut params = String::new();
    let mut outputs = vec![sp.y.0];
    for (field, v) in text.optional() {
        params += &format!("long long* __restrict__ {field}, ");
        outputs.push(v.0);
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
            ("t", storage(sp.dtype)),
            ("params", &params),
            ("words", &d.div_ceil(32).max(1).to_string()),
            ("cmp", &cmp_body(sp.dtype)),
            ("cmp_slices", &text.over_slice(8, "a", "b", Step::Compare)),
            ("rank", &text.rank(8)),
            ("copy", &text.over_slice(12, "rank", "i", Step::Copy)),
            ("store_first", &text.store_first()),
            ("store_inverse", &text.store_inverse()),
            ("store_counts", &Text::<Cuda>::store_counts(slots)),
        ],
    )?;
    let mut k = Kernel::flat(name, &sp.site.node, source, 1024, vec![sp.x.0], outputs);
    k.grid = 1;
    k.block = 1024;
    Ok(k)
}

/// The body of `cmp_elem(a, b)` for stored elements of `dt`: -1, 0 or 1, floats in
/// float (f64 in double) with NaN after every number and equal to NaN, integers exactly.
fn cmp_body(dt: DType) -> String {
    if !dt.is_float() {
        return "        if (a < b) {\n            return -1;\n        }\n        if (a > b) {\n            return 1;\n        }\n        return 0;".to_string();
    }
    let ct = if dt == DType::F64 { "double" } else { "float" };
    format!(
        "        const {ct} fa = gopt_ld(a);\n        const {ct} fb = gopt_ld(b);\n        const bool na = isnan(fa);\n        const bool nb = isnan(fb);\n        if (na || nb) {{\n            return (na ? 1 : 0) - (nb ? 1 : 0);\n        }}\n        if (fa < fb) {{\n            return -1;\n        }}\n        if (fa > fb) {{\n            return 1;\n        }}\n        return 0;"
    )
}
