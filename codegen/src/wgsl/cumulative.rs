//! CumSum and CumProd in WGSL (`exclusive`, `reverse`; the axis a constant or read at
//! run time, i32 or i64), over floats (f32 math in the reference's order, one rounding
//! at the store), 8/16/32-bit integers (wrapped to their width) and i64/u64 (exact, as
//! `vec2<u32>`). One invocation per element loops over its lane: quadratic in the
//! axis' length, for the short axes these ops have in models.
//! The node is read once, for both backends, by [`crate::lower::cumulative`].

use super::types::{self, kind, Kind};
use super::WgslKernel;
use crate::lower::cumulative::{ScanAxis, Spec};
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("cumulative.wgsl");

/// Emits the shader of spec `sp`.
pub fn emit(sp: &Spec, name: &str) -> Result<WgslKernel> {
    let unsupported = |what: &str| super::refuse(&sp.site, what);
    let (dt, shape, prod) = (sp.dtype, &sp.shape, sp.prod);
    let (exclusive, reverse) = (sp.exclusive, sp.reverse);
    let (st, _) = super::storage_type(dt).ok_or_else(|| unsupported(&format!("{dt} data")))?;
    let n = u32::try_from(sp.n).map_err(|_| unsupported("more than 2^32 elements"))?;
    let (init, combine) = match (kind(dt), prod) {
        (Some(Kind::Float), false) => ("0.0", "acc + v"),
        (Some(Kind::Float), true) => ("1.0", "acc * v"),
        (Some(Kind::Int), false) => ("0i", "acc + v"),
        (Some(Kind::Int), true) => ("1i", "acc * v"),
        (Some(Kind::Uint), false) => ("0u", "acc + v"),
        (Some(Kind::Uint), true) => ("1u", "acc * v"),
        (Some(Kind::Wide), false) => ("vec2<u32>(0u, 0u)", "gopt_add64(acc, v)"),
        (Some(Kind::Wide), true) => ("vec2<u32>(1u, 0u)", "gopt_mul64(acc, v)"),
        (Some(Kind::Bool) | None, _) => return Err(unsupported(&format!("{dt} data"))),
    };
    let rank = shape.len();
    let mut bindings = vec![format!("var<storage, read> x: array<{st}>;")];
    let mut inputs = vec![sp.x.0];
    let axis = match sp.axis {
        ScanAxis::Const { d, inner } => format!("    let d = {d}u;\n    let inner = {inner}u;\n"),
        ScanAxis::Input { value, dtype } => {
            let (read, elem) = if dtype == DType::I64 {
                ("bitcast<i32>(ax[0].x)", "vec2<u32>")
            } else {
                ("ax[0]", "i32")
            };
            bindings.push(format!("var<storage, read> ax: array<{elem}>;"));
            inputs.push(value.0);
            let dims: Vec<String> = shape.iter().map(|d| format!("{d}u")).collect();
            format!(
                "    let dims = array<u32, {rank}>({});\n    var a = {read};\n    if (a < 0i) {{ a = a + {rank}i; }}\n    let au = u32(clamp(a, 0i, {}i));\n    let d = dims[au];\n    var inner = 1u;\n    for (var k: u32 = au + 1u; k < {rank}u; k = k + 1u) {{ inner = inner * dims[k]; }}\n",
                dims.join(", "),
                rank - 1
            )
        }
    };
    bindings.push(format!("var<storage, read_write> out: array<{st}>;"));
    let bindings: Vec<String> = bindings
        .iter()
        .enumerate()
        .map(|(k, b)| format!("@group(0) @binding({k}) {b}"))
        .collect();
    let (lo, hi, t) = match (reverse, exclusive) {
        (false, false) => ("0u", "j + 1u", "lo + s"),
        (false, true) => ("0u", "j", "lo + s"),
        (true, false) => ("j", "d", "hi - 1u - s"),
        (true, true) => ("j + 1u", "d", "hi - 1u - s"),
    };
    let store = types::store(dt, &types::wrap(dt, "acc"));
    let helpers = types::helpers_for(combine);
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", sp.site.op),
            ("mode", sp.mode()),
            ("bindings", &bindings.join("\n")),
            ("helpers", &helpers),
            ("axis", &axis),
            ("n", &n.to_string()),
            ("lo", lo),
            ("hi", hi),
            ("init", init),
            ("t", t),
            ("load", &types::load(dt, "x[base + t * inner]")),
            ("combine", combine),
            ("store", &store),
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
