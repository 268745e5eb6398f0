//! TopK in CUDA ([`crate::lower::topk`]): one thread per data element ranks it in its
//! lane by counting (floats compared in f32, f64 in double, NaN above every number;
//! integers in their own type, exactly) and stores the ones ranked below `k`, values as
//! stored and indices as i64. The WGSL kernel is the same algorithm line by line.

use super::elementwise::storage;
use super::support::Compared;
use super::Kernel;
use crate::lower::topk::TopKSpec;
use crate::template::fill;
use crate::Result;

const TEMPLATE: &str = include_str!("topk.cu");

/// Emits the kernel of TopK spec `sp`.
pub fn emit(sp: &TopKSpec, name: &str) -> Result<Kernel> {
    let dt = sp.dtype;
    let t = storage(dt);
    let cmp = Compared::of(dt);
    let before = sp.before(|a, b| format!("{a} > {b}"), |v| cmp.isnan(v));
    let inner = sp.inner;
    let source = fill(
        TEMPLATE,
        &[
            ("what", if sp.largest { "largest" } else { "smallest" }),
            ("name", name),
            ("t", t),
            ("ct", cmp.ct),
            ("before", &before),
            ("n", &sp.n().to_string()),
            ("d", &sp.d.to_string()),
            ("k", &sp.k.to_string()),
            ("inner", &inner.to_string()),
            ("span", &(sp.d * inner).to_string()),
            ("load_v", &cmp.read("i")),
            ("load_w", &cmp.read(&format!("base + j * {inner}LL"))),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &sp.site.node,
        source,
        sp.n(),
        vec![sp.x.0],
        vec![sp.values.0, sp.indices.0],
    ))
}
