//! TopK in WGSL: one invocation per data element ranks it in its lane by counting and
//! stores the ones ranked below `k` (values as storage elements, indices as i64
//! words), over floats (compared in f32, NaN above every number), 8/16/32-bit integers
//! and i64/u64 (compared as their words, exactly): the CUDA kernel's algorithm line by
//! line. The node is read once, for both backends, by [`crate::lower::topk`].

use super::types::{self, kind, Kind};
use super::WgslKernel;
use crate::lower::topk::TopKSpec;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("topk.wgsl");

/// Emits the shader of TopK spec `sp`.
pub fn emit(sp: &TopKSpec, name: &str) -> Result<WgslKernel> {
    let (dt, site) = (sp.dtype, &sp.site);
    let unsupported = |what: &str| site.unsupported(what);
    let (t, _) = super::storage_type(dt).ok_or_else(|| unsupported(&format!("{dt} data")))?;
    let n = u32::try_from(sp.n()).map_err(|_| unsupported("more than 2^32 elements"))?;
    // The compared type, "a > b", and whether a value is NaN.
    let (ct, gt): (&str, fn(&str, &str) -> String) = match kind(dt) {
        Some(Kind::Float) => ("f32", |a, b| format!("({a} > {b})")),
        Some(Kind::Int) => ("i32", |a, b| format!("({a} > {b})")),
        Some(Kind::Uint) => ("u32", |a, b| format!("({a} > {b})")),
        Some(Kind::Wide) if dt == DType::I64 => {
            ("vec2<u32>", |a, b| format!("gopt_lt_i64({b}, {a})"))
        }
        Some(Kind::Wide) => ("vec2<u32>", |a, b| format!("gopt_lt_u64({b}, {a})")),
        Some(Kind::Bool) | None => return Err(unsupported(&format!("{dt} data"))),
    };
    let float = ct == "f32";
    let before = sp.before(gt, |v| {
        if float {
            format!("((bitcast<u32>({v}) & 0x7fffffffu) > 0x7f800000u)")
        } else {
            "false".to_string()
        }
    });
    let inner = sp.inner;
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", if sp.largest { "largest" } else { "smallest" }),
            ("t", t),
            ("ct", ct),
            ("helpers", &types::helpers_for(&before)),
            ("before", &before),
            ("n", &n.to_string()),
            ("d", &sp.d.to_string()),
            ("k", &sp.k.to_string()),
            ("inner", &inner.to_string()),
            ("span", &(sp.d * inner).to_string()),
            ("load_v", &types::load(dt, "x[i]")),
            (
                "load_w",
                &types::load(dt, &format!("x[base + j * {inner}u]")),
            ),
        ],
    )?;
    let (inputs, outputs) = (vec![sp.x.0], vec![sp.values.0, sp.indices.0]);
    Ok(WgslKernel::flat(
        name, &site.node, source, n, inputs, outputs,
    ))
}
