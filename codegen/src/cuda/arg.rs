//! ArgMax, ArgMin and Hardmax in CUDA ([`crate::lower::arg`]): one thread per lane along
//! the axis compares its elements in order, floats in f32 (f64 in double) with NaN
//! first-wins, integers in their own type, exactly. ArgMax/ArgMin write the index as
//! i64; Hardmax writes its lane, 1 at the index and 0 elsewhere, in the data's dtype.

use super::elementwise::storage;
use super::support::{store, Compared};
use super::Kernel;
use crate::lower::arg::{ArgKind, Spec};
use crate::template::fill;
use crate::Result;

const TEMPLATE: &str = include_str!("arg.cu");

/// Emits the kernel of spec `sp`.
pub fn emit(sp: &Spec, name: &str) -> Result<Kernel> {
    let dt = sp.dtype;
    let t = storage(dt);
    let cmp = Compared::of(dt);
    let inner = sp.inner.max(1);
    let (ot, write) = if sp.kind == ArgKind::Hardmax {
        let one = store(dt, "(j == bi ? 1.0f : 0.0f)");
        (
            t,
            format!(
                "        for (long long j = 0; j < {d}LL; ++j) out[base + j * {inner}LL] = {one};\n",
                d = sp.d
            ),
        )
    } else {
        ("long long", "        out[o] = bi;\n".to_string())
    };
    let better = if sp.max() { "v > best" } else { "v < best" };
    let last = if sp.last { "true" } else { "false" };
    let source = fill(
        TEMPLATE,
        &[
            ("what", sp.site.op),
            ("name", name),
            ("t", t),
            ("ot", ot),
            ("ct", cmp.ct),
            ("d", &sp.d.to_string()),
            ("inner", &inner.to_string()),
            ("span", &sp.span().to_string()),
            ("lanes", &sp.lanes.to_string()),
            ("tie", if sp.last { "higher" } else { "lower" }),
            ("first", &cmp.read("base")),
            ("bnan", &cmp.isnan("best")),
            ("load", &cmp.read(&format!("base + j * {inner}LL"))),
            ("vnan", &cmp.isnan("v")),
            ("last", last),
            ("better", &format!("({better})")),
            ("write", &write),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &sp.site.node,
        source,
        sp.lanes,
        vec![sp.x.0],
        vec![sp.out.0],
    ))
}
