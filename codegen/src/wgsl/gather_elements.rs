//! GatherElements in WGSL: data of any dtype WGSL storage holds (copied as storage
//! elements), i64 or i32 indices, negative ones counted from the end of the axis, each
//! checked against it ([`super::bounds`]: one out of range fails the run).
//! The node is read once, for both backends, by [`crate::lower::gather_elements`].

use super::WgslKernel;
use crate::lower::gather_elements::Spec;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("gather_elements.wgsl");

/// Emits the shader for GatherElements node `node` of `g`.
pub fn emit(sp: &Spec, name: &str) -> Result<WgslKernel> {
    let unsupported = |what: &str| super::refuse(&sp.site, what);
    let dt = sp.dtype;
    let (t, _) = super::storage_type(dt).ok_or_else(|| unsupported(&format!("{dt} data")))?;
    let it = super::bounds::index_type(sp.index_dtype)
        .ok_or_else(|| unsupported(&format!("{} indices", sp.index_dtype)))?;
    let n = u32::try_from(sp.n).map_err(|_| unsupported("more than 2^32 elements"))?;
    if sp.data_len >= 1 << 31 {
        return Err(unsupported("a huge tensor"));
    }
    if i32::try_from(sp.axis_len).is_err() {
        return Err(unsupported("an axis of 2^31 elements or more"));
    }
    let check = IndexCheck {
        code: sp.code,
        op: sp.site.op.into(),
        what: sp.out_of_range(),
    };
    let read = super::bounds::read_index(sp.index_dtype, "idx[i]", sp.axis_len, check.code, "k");
    let mut coords = String::new();
    for (d, stride) in sp.axes_rev() {
        if stride != 0 {
            coords += &format!("        at = at + (r % {d}u) * {stride}u;\n");
        }
        coords += &format!("        r = r / {d}u;\n");
    }
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("axis", &sp.axis.to_string()),
            ("t", t),
            ("it", it),
            ("n", &n.to_string()),
            ("read", &read),
            ("kstride", &sp.axis_stride.to_string()),
            ("coords", &coords),
        ],
    )?;
    Ok(WgslKernel {
        index_check: Some(check),
        ..WgslKernel::flat(
            name,
            &sp.site.node,
            source,
            n,
            vec![sp.data.0, sp.indices.0],
            vec![sp.out.0],
        )
    })
}
