//! RotaryEmbedding in WGSL ([`crate::lower::rotary`]): one invocation per output
//! element, f32 or f16 data and caches (bf16 has no WGSL storage), fp32 math and one
//! rounding at the store. Position ids are i64 read on the device: each is wrapped
//! (negative counts from the end) and checked against the caches' rows
//! ([`super::bounds`]: one out of range fails the run and reads row 0).

use super::syntax::Wgsl;
use super::WgslKernel;
use crate::lower::rotary::{CacheRows, RotarySpec};
use crate::lower::support::Site;
use crate::plan::IndexCheck;
use crate::template::fill_owned;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("rotary.wgsl");

/// The WGSL storage type of float data of `dt`.
fn float_type(site: &Site, dt: DType) -> Result<&'static str> {
    if dt == DType::F32 {
        Ok("f32")
    } else if dt == DType::F16 {
        Ok("f16")
    } else {
        Err(site.unsupported(&format!("{dt} data")))
    }
}

/// Emits the shader of RotaryEmbedding spec `sp`.
pub fn emit(sp: &RotarySpec, name: &str) -> Result<WgslKernel> {
    let site = &sp.site;
    let t = float_type(site, sp.dtype)?;
    let ct = float_type(site, sp.cache_dtypes[0])?;
    let st = float_type(site, sp.cache_dtypes[1])?;
    let n = u32::try_from(sp.n())
        .ok()
        .filter(|&n| n < 1 << 31)
        .ok_or_else(|| site.unsupported("more than 2^31 elements"))?;
    let s = sp.dims[1];
    let mut inputs = vec![sp.x.0, sp.cos.0, sp.sin.0];
    let mut bindings = vec![
        format!("var<storage, read> x: array<{t}>;"),
        format!("var<storage, read> cos_c: array<{ct}>;"),
        format!("var<storage, read> sin_c: array<{st}>;"),
    ];
    let (row, check) = match sp.rows {
        CacheRows::Positions { ids, rows, code } => {
            inputs.push(ids.0);
            bindings.push("var<storage, read> pos: array<vec2<u32>>;".into());
            // No WGSL binding holds an axis too long for an i32 index.
            if i32::try_from(rows).is_err() {
                return Err(site.unsupported("an axis of 2^31 elements or more"));
            }
            let check = IndexCheck {
                code,
                op: site.op.into(),
                what: sp.out_of_range(),
            };
            let read = super::bounds::read_index(
                DType::I64,
                &format!("pos[b * {s}u + s]"),
                rows,
                check.code,
                "k",
            );
            (format!("{read}        let row = k * HALF;\n"), Some(check))
        }
        CacheRows::Broadcast([sb, ss]) => {
            (format!("        let row = b * {sb}u + s * {ss}u;\n"), None)
        }
    };
    bindings.push(format!("var<storage, read_write> y: array<{t}>;"));
    let mut bindings: Vec<String> = bindings
        .iter()
        .enumerate()
        .map(|(i, s)| format!("@group(0) @binding({i}) {s}"))
        .collect();
    if check.is_some() {
        bindings.push(super::bounds::error_binding(bindings.len()));
    }
    let f16 = [t, ct, st].contains(&"f16");
    let mut holes = sp.holes(&Wgsl::PLAIN);
    holes.extend([
        ("enable", super::enable_f16(f16).to_string()),
        ("bindings", bindings.join("\n")),
        ("row", row),
        ("t", t.to_string()),
    ]);
    let source = fill_owned(TEMPLATE, &holes)?;
    Ok(WgslKernel {
        index_check: check,
        ..WgslKernel::flat(name, &site.node, source, n, inputs, vec![sp.out.0])
    })
}
