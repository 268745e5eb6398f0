//! Trilu in WGSL: the upper (or lower) triangle of the last two axes from diagonal `k`,
//! data of any dtype WGSL storage holds (copied as storage elements, the rest zero).
//! `k` is a constant or read at run time from its i64 words (clamped to +-2^30, which
//! keeps or drops the same elements of any matrix WGSL can index).
//! The node is read once, for both backends, by [`crate::lower::trilu`].

use super::WgslKernel;
use crate::lower::trilu::{Diagonal, Spec};
use crate::template::fill;
use crate::Result;

const TEMPLATE: &str = include_str!("trilu.wgsl");

/// Emits the shader of Trilu spec `sp`.
pub fn emit(sp: &Spec, name: &str) -> Result<WgslKernel> {
    let unsupported = |what: &str| super::refuse(&sp.site, what);
    let (h, w, upper) = (sp.h, sp.w, sp.upper);
    let (t, _) =
        super::storage_type(sp.dtype).ok_or_else(|| unsupported(&format!("{} data", sp.dtype)))?;
    let n = u32::try_from(sp.n).map_err(|_| unsupported("more than 2^32 elements"))?;
    // An empty tensor's buffer is one word: bound as u32 (nothing is read or written).
    let t = if n == 0 { "u32" } else { t };
    if h >= 1 << 30 || w >= 1 << 30 {
        return Err(unsupported("matrices of 2^30 rows or columns"));
    }
    const LIM: i64 = 1 << 30;
    let mut inputs = vec![sp.x.0];
    let (kbinding, k) = match sp.k {
        Diagonal::Const(k) => (
            String::new(),
            format!("    let k = {}i;\n", k.clamp(-LIM, LIM)),
        ),
        Diagonal::Input(kv) => {
            inputs.push(kv.0);
            (
                "@group(0) @binding(1) var<storage, read> kin: array<vec2<u32>>;\n".into(),
                format!(
                    "    let kw = kin[0];\n    let hi = bitcast<i32>(kw.y);\n    var k = clamp(bitcast<i32>(kw.x), -{LIM}i, {LIM}i);\n    if (hi < -1i || (hi == -1i && kw.x < 0x80000000u)) {{ k = -{LIM}i; }}\n    if (hi > 0i || (hi == 0i && kw.x >= 0x80000000u)) {{ k = {LIM}i; }}\n"
                ),
            )
        }
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(t == "f16")),
            ("what", if upper { "upper" } else { "lower" }),
            ("h", &h.max(1).to_string()),
            ("w", &w.max(1).to_string()),
            ("t", t),
            ("kbinding", &kbinding),
            ("obinding", &inputs.len().to_string()),
            ("k", &k),
            ("n", &n.to_string()),
            ("cmp", if upper { ">=" } else { "<=" }),
        ],
    )?;
    Ok(WgslKernel::flat(
        name,
        &sp.site.node,
        source,
        n,
        inputs,
        vec![sp.out.0],
    ))
}
