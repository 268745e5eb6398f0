//! Data movement in WGSL, from the index maps of [`crate::lower::index`]: Transpose,
//! Slice (constant bounds, positive steps), Expand, Concat, Gather (i64 or i32 indices,
//! each checked: [`super::bounds`]) and the view ops as copies. Data of any dtype WGSL
//! storage holds (elements copied in their storage type).

use super::bounds;
use super::WgslKernel;
use crate::lower::index::{Lit, MovementSpec, Read};
use crate::lower::support::Site;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("movement.wgsl");

/// Code splitting `i` into output coordinates `c0..` (an empty output's zero extents
/// divide by 1 instead: its loop never runs, and naga refuses a constant `% 0u`).
fn coords(out: &[usize]) -> String {
    let mut code = String::from("        var r: u32 = i;\n");
    for a in (0..out.len()).rev() {
        code += &format!(
            "        let c{a} = r % {d}u; r = r / {d}u;\n",
            d = out[a].max(1)
        );
    }
    code
}

/// The storage element of `dt` (data movement copies storage elements as they are:
/// bool and 8/16-bit integers as one 32-bit word, i64/u64 as `vec2<u32>`).
fn data_type(site: &Site, dt: DType) -> Result<&'static str> {
    super::storage_type(dt)
        .map(|(t, _)| t)
        .ok_or_else(|| site.unsupported(&format!("{dt} data")))
}

/// Emits the shader of `mv`.
pub fn emit(mv: &MovementSpec, name: &str) -> Result<WgslKernel> {
    let (site, lit) = (&mv.site, Lit("u"));
    let t = data_type(site, mv.dtype)?;
    let n = u32::try_from(mv.shape.iter().product::<usize>())
        .map_err(|_| site.unsupported("more than 2^32 elements"))?;
    let mut check = None;
    let (body, index_dtype) = match &mv.read {
        Read::Copy => ("        out[i] = in0[i];\n".to_string(), None),
        Read::Strided(at) => (
            format!(
                "{}        out[i] = in0[{}];\n",
                coords(&mv.shape),
                at.write(lit)
            ),
            None,
        ),
        Read::Gather {
            index,
            data,
            axis_len,
            code,
        } => {
            // No WGSL binding holds an axis too long for an i32 index.
            if i32::try_from(*axis_len).is_err() {
                return Err(site.unsupported("an axis of 2^31 elements or more"));
            }
            let dt = mv.inputs.get(1).map_or(DType::I64, |(_, dt)| *dt);
            let at = format!("in1[{}]", index.write(lit));
            let read = bounds::read_index(dt, &at, *axis_len, *code, "k");
            check = Some(IndexCheck {
                code: *code,
                op: site.op.into(),
                what: MovementSpec::out_of_range(*axis_len),
            });
            let it =
                bounds::index_type(dt).ok_or_else(|| site.unsupported(&format!("{dt} indices")))?;
            (
                format!(
                    "{}{read}        out[i] = in0[{}];\n",
                    coords(&mv.shape),
                    data.write(lit)
                ),
                Some(it),
            )
        }
        Read::Concat { axis, parts } => {
            let mut code = coords(&mv.shape);
            for (k, (end, at)) in parts.iter().enumerate() {
                let other = if k == 0 { "" } else { "else " };
                code += &format!(
                    "        {other}if (c{axis} < {end}u) {{ out[i] = in{k}[{}]; }}\n",
                    at.write(lit)
                );
            }
            (code, None)
        }
    };
    // in0.. hold the data, except that Gather's in1 holds its indices.
    let mut bindings: Vec<String> = (0..mv.inputs.len())
        .map(|k| match index_dtype.filter(|_| k == 1) {
            Some(it) => format!("var<storage, read> in1: array<{it}>;"),
            None => format!("var<storage, read> in{k}: array<{t}>;"),
        })
        .chain([format!("var<storage, read_write> out: array<{t}>;")])
        .enumerate()
        .map(|(k, b)| format!("@group(0) @binding({k}) {b}"))
        .collect();
    if check.is_some() {
        bindings.push(bounds::error_binding(bindings.len()));
    }
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(mv.dtype == DType::F16)),
            ("what", site.op),
            ("bindings", &bindings.join("\n")),
            ("n", &n.to_string()),
            ("body", &body),
        ],
    )?;
    let inputs = mv.inputs.iter().map(|(v, _)| v.0).collect();
    Ok(WgslKernel {
        index_check: check,
        ..WgslKernel::flat(name, &site.node, source, n, inputs, vec![mv.out.0])
    })
}
