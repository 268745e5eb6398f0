//! RotaryEmbedding in CUDA ([`crate::lower::rotary`]): one thread per output element,
//! f32/f16/bf16 data and caches, fp32 math and one rounding at the store. Position ids
//! are i64 read on the device: each is wrapped (negative counts from the end) and
//! checked against the caches' rows; one out of range raises the node's code in the
//! run's error word ([`crate::plan::IndexCheck`]) and reads row 0. X is read in place
//! where it is columns of a wider tensor, and the type of a Cast it absorbs is stored.
//! The WGSL shader's algorithm line by line.

use super::elementwise::storage;
use super::support::store;
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::rotary::{CacheRows, RotarySpec};
use crate::plan::IndexCheck;
use crate::template::fill_owned;
use crate::Result;

const TEMPLATE: &str = include_str!("rotary.cu");

/// Emits the kernel of RotaryEmbedding spec `sp`.
pub fn emit(sp: &RotarySpec, name: &str) -> Result<Kernel> {
    let at = |i: &str| sp.x_cols.map_or_else(|| i.to_string(), |c| c.index(i));
    let s = sp.dims[1];
    let t = storage(sp.dtype);
    let mut params = vec![
        format!("const {t}* __restrict__ x"),
        format!("const {}* __restrict__ cos_c", storage(sp.cache_dtypes[0])),
        format!("const {}* __restrict__ sin_c", storage(sp.cache_dtypes[1])),
    ];
    let mut inputs = vec![sp.x.0, sp.cos.0, sp.sin.0];
    let (row, check) = match sp.rows {
        CacheRows::Positions { ids, rows, code } => {
            inputs.push(ids.0);
            params.push("const long long* __restrict__ pos".into());
            let row = format!(
                "        long long k = pos[b * {s}LL + s];\n        if (k < 0) k += {rows}LL;\n        if (k < 0 || k >= {rows}LL) {{\n            atomicMax(gopt_err, {code}u);\n            k = 0;\n        }}\n        const long long row = k * HALF;\n"
            );
            let check = IndexCheck {
                code,
                op: sp.site.op.into(),
                what: sp.out_of_range(),
            };
            (row, Some(check))
        }
        CacheRows::Broadcast([sb, ss]) => (
            format!("        const long long row = b * {sb}LL + s * {ss}LL;\n"),
            None,
        ),
    };
    params.push(format!("{}* __restrict__ y", storage(sp.out_dtype)));
    if check.is_some() {
        params.push("unsigned int* __restrict__ gopt_err".into());
    }
    let mut holes = sp.holes(&Cuda::PLAIN);
    holes.extend([
        ("name", name.to_string()),
        ("params", params.join(", ")),
        ("row", row),
        ("x1", at("base + i1")),
        ("x2", at("base + i2")),
        (
            "copy",
            store(sp.out_dtype, &format!("gopt_ld(x[{}])", at("e"))),
        ),
        ("store", store(sp.out_dtype, "v")),
    ]);
    let source = fill_owned(TEMPLATE, &holes)?;
    Ok(Kernel {
        index_check: check,
        ..Kernel::flat(name, &sp.site.node, source, sp.n(), inputs, vec![sp.out.0])
    })
}
