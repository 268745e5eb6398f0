//! ArgMax and ArgMin in WGSL along one axis (`keepdims`, `select_last_index`), over
//! floats (compared in f32, NaN first-wins as the reference), 8/16/32-bit integers and
//! i64/u64 (compared as their words); the i64 output as `vec2<u32>` words. Hardmax
//! (floats) is ArgMax writing its lane: 1 at the index, 0 elsewhere.
//! The node is read once, for both backends, by [`crate::lower::arg`].

use super::types::{self, kind, Kind};
use super::WgslKernel;
use crate::lower::arg::{ArgKind, Spec};
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("arg.wgsl");

/// Emits the shader of spec `sp`.
pub fn emit(sp: &Spec, name: &str) -> Result<WgslKernel> {
    let unsupported = |what: &str| super::refuse(&sp.site, what);
    let (dt, d, inner) = (sp.dtype, sp.d, sp.inner);
    let (t, _) = super::storage_type(dt).ok_or_else(|| unsupported(&format!("{dt} data")))?;
    let (hard, last) = (sp.kind == ArgKind::Hardmax, sp.last);
    let n = u32::try_from(sp.lanes).map_err(|_| unsupported("more than 2^32 elements"))?;
    if n == 0 {
        // Its i64 output buffer would be one word, short of one `vec2<u32>`.
        return Err(unsupported("an empty output"));
    }
    let load = |at: &str| types::load(dt, &format!("x[{at}]"));
    let isnan = |v: &str| match kind(dt) {
        Some(Kind::Float) => format!("((bitcast<u32>({v}) & 0x7fffffffu) > 0x7f800000u)"),
        Some(Kind::Int | Kind::Uint | Kind::Wide | Kind::Bool) | None => "false".into(),
    };
    let (less, equal) = match kind(dt) {
        Some(Kind::Float | Kind::Int | Kind::Uint) => ("({a} < {b})", "(v == best)"),
        Some(Kind::Wide) if dt == DType::I64 => ("gopt_lt_i64({a}, {b})", "all(v == best)"),
        Some(Kind::Wide) => ("gopt_lt_u64({a}, {b})", "all(v == best)"),
        Some(Kind::Bool) | None => return Err(unsupported(&format!("{dt} data"))),
    };
    let (a, b) = if sp.max() {
        ("best", "v")
    } else {
        ("v", "best")
    };
    let better = less.replace("{a}", a).replace("{b}", b);
    let first = load("base");
    let vload = load(&format!("base + j * {inner}u"));
    let helpers = types::helpers_for(&better);
    let (ot, write) = if hard {
        (
            t,
            format!(
                "        for (var j: u32 = 0u; j < {d}u; j = j + 1u) {{\n            out[base + j * {inner}u] = {t}(select(0.0, 1.0, j == bi));\n        }}\n"
            ),
        )
    } else {
        (
            "vec2<u32>",
            "        out[o] = vec2<u32>(bi, 0u);\n".to_string(),
        )
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", sp.site.op),
            ("d", &d.to_string()),
            ("inner", &inner.max(1).to_string()),
            ("span", &sp.span().to_string()),
            ("tie", if last { "higher" } else { "lower" }),
            ("t", t),
            ("helpers", &helpers),
            ("n", &n.to_string()),
            ("first", &first),
            ("bnan", &isnan("best")),
            ("load", &vload),
            ("vnan", &isnan("v")),
            ("last", if last { "true" } else { "false" }),
            ("better", &better),
            ("equal", equal),
            ("ot", ot),
            ("write", &write),
        ],
    )?;
    Ok(WgslKernel::flat(
        name,
        &sp.site.node,
        source,
        n,
        vec![sp.x.0],
        vec![sp.out.0],
    ))
}
