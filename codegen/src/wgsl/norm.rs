//! BatchNormalization, InstanceNormalization, GroupNormalization, LRN and
//! MeanVarianceNormalization in WGSL, f32 or f16 data and parameters, f32 math with one
//! rounding at the store: BatchNormalization with stored statistics and LRN one
//! invocation per element, the others one workgroup per group of elements summing its
//! statistics through workgroup memory, then normalizing. The statements are the
//! lowering's ([`crate::lower::norm_kernel`]), spelled in WGSL ([`Wgsl`]), as the CUDA
//! kernels spell them in CUDA C.

use super::syntax::Wgsl;
use super::types;
use super::WgslKernel;
use crate::lower::norm::{NormSpec, Operand};
use crate::lower::norm_kernel::{offset, text, StatsText, Text};
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const ELEMENTS: &str = include_str!("norm.wgsl");
const STATS: &str = include_str!("norm_stats.wgsl");

/// Emits the shader of normalization spec `sp`.
pub fn emit(sp: &NormSpec, name: &str) -> Result<WgslKernel> {
    let n = u32::try_from(sp.n)
        .ok()
        .filter(|&n| n < 1 << 31)
        .ok_or_else(|| sp.site.unsupported("2^31 elements or more"))?;
    let bindings = bindings(sp)?;
    let f16 = sp
        .inputs
        .iter()
        .chain(&sp.outputs)
        .any(|o| o.dtype == DType::F16);
    let what = sp.site.op;
    let (source, groups) = match text(sp, &Wgsl::PLAIN) {
        Text::Elements(body) => (
            elements(sp, what, &bindings, &body, f16)?,
            n.div_ceil(super::WORKGROUP),
        ),
        Text::Stats(parts) => {
            let groups = u32::try_from(parts.stats.groups)
                .map_err(|_| sp.site.unsupported("2^32 groups"))?;
            (stats(&parts, what, &bindings, f16)?, groups)
        }
    };
    Ok(WgslKernel {
        name: name.to_string(),
        node: sp.site.node.clone(),
        source,
        workgroups: [groups.clamp(1, 65535), 1, 1],
        inputs: sp.inputs.iter().map(|o| o.value.0).collect(),
        outputs: sp.outputs.iter().map(|o| o.value.0).collect(),
        index_check: None,
        loop_iterations: None,
    })
}

/// The bindings: the inputs read-only, then the outputs.
fn bindings(sp: &NormSpec) -> Result<String> {
    let ty = |o: &Operand| {
        if o.dtype == DType::F32 {
            Ok("f32")
        } else if o.dtype == DType::F16 {
            Ok("f16")
        } else {
            Err(sp.site.unsupported(&format!("{} `{}`", o.dtype, o.name)))
        }
    };
    let mut s = String::new();
    for (k, o) in sp.inputs.iter().enumerate() {
        s += &format!(
            "@group(0) @binding({k}) var<storage, read> {}: array<{}>;\n",
            o.name,
            ty(o)?
        );
    }
    for (k, o) in sp.outputs.iter().enumerate() {
        s += &format!(
            "@group(0) @binding({}) var<storage, read_write> {}: array<{}>;\n",
            sp.inputs.len() + k,
            o.name,
            ty(o)?
        );
    }
    Ok(s)
}

/// A per-element shader around `body` (which sees `i`).
fn elements(sp: &NormSpec, what: &str, bindings: &str, body: &str, f16: bool) -> Result<String> {
    fill(
        ELEMENTS,
        &[
            ("enable", super::enable_f16(f16)),
            ("what", what),
            ("n", &sp.n.to_string()),
            ("bindings", bindings),
            ("helpers", &types::helpers_for(body)),
            ("body", body),
        ],
    )
}

/// The statistics shader of `parts`.
fn stats(parts: &StatsText, what: &str, bindings: &str, f16: bool) -> Result<String> {
    let st = &parts.stats;
    fill(
        STATS,
        &[
            ("enable", super::enable_f16(f16)),
            ("what", what),
            ("groups", &st.groups.to_string()),
            ("len", &st.len.to_string()),
            ("second", parts.second),
            ("bindings", bindings),
            ("offset", &offset(&Wgsl::PLAIN, st, "    ")),
            ("base", &parts.base),
            ("accumulate", &parts.accumulate),
            ("prepare", &parts.prepare),
            ("normalize", &parts.normalize),
            ("finish", &parts.finish),
            ("reduce_sum", super::rows::REDUCE_SUM),
        ],
    )
}
