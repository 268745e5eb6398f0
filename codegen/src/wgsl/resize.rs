//! Resize in WGSL: every mode of ONNX Resize (nearest with each `nearest_mode`, linear
//! and cubic, antialiased or not, `exclude_outside`, every
//! `coordinate_transformation_mode`, `tf_crop_and_resize` with its extrapolation value)
//! over any rank. One invocation per output element computes, for each resampled axis,
//! its source coordinate, taps and weights in f32, then sums the separable product of
//! the axes' weights over the taps (one loop per axis) and rounds once at the store,
//! saturated to the dtype's range as the interpreter saturates. Nearest resampling
//! copies one element as stored (any dtype WGSL storage holds); linear and cubic
//! resampling takes f32 or f16 data. The node is read once, for both backends, by
//! [`crate::lower::resize`]; the statements are the CUDA writer's
//! ([`crate::twin::resize`]).

use super::syntax::Wgsl;
use super::types::{f32_literal, helpers_for, kind, Kind};
use super::WgslKernel;
use crate::lower::resize::ResizeSpec;
use crate::template::fill;
use crate::twin::resize::{describe, how, texts, Element};
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("resize.wgsl");

/// Emits the shader of Resize spec `sp`.
pub fn emit(sp: &ResizeSpec, name: &str) -> Result<WgslKernel> {
    let dt = sp.dtype;
    let site = &sp.site;
    let (t, _) = super::storage_type(dt).ok_or_else(|| site.unsupported(&format!("{dt} data")))?;
    let n = u32::try_from(sp.n).map_err(|_| site.unsupported("more than 2^32 elements"))?;
    if sp.n >= 1 << 31 || sp.in_len >= 1 << 31 {
        return Err(site.unsupported("tensors of 2^31 elements or more"));
    }
    let element = if sp.nearest() {
        copy(sp, t)?
    } else {
        Element::Sum {
            store: store_float(dt, "sat(v)"),
        }
    };
    let tx = texts(sp, &Wgsl::PLAIN, &element)?;
    let max = sp.float_max().unwrap_or(f32::MAX);
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", &describe(sp)),
            ("how", how(sp)),
            ("t", t),
            ("max", &f32_literal(max)),
            ("n", &n.to_string()),
            ("decode", &tx.decode),
            ("axes", &tx.axes),
            ("body", &tx.body),
        ],
    )?;
    // `gopt_div`: WGSL's `/` may be 2.5 ULP off, which moves a coordinate that must be
    // an integer below it.
    let source = format!("{source}\n{}", helpers_for(&source));
    Ok(WgslKernel::flat(
        name,
        &site.node,
        source,
        n,
        vec![sp.x.0],
        vec![sp.out.0],
    ))
}

/// The nearest element's copy: as stored (saturated for floats), the extrapolation
/// value, zero.
fn copy(sp: &ResizeSpec, t: &'static str) -> Result<Element> {
    let dt = sp.dtype;
    let (load, extrapolated) = match kind(dt) {
        Some(Kind::Float) => (
            store_float(dt, "sat(f32(x[off]))"),
            sp.extrapolation
                .map(|v| store_float(dt, &format!("sat({})", f32_literal(v)))),
        ),
        Some(Kind::Int | Kind::Uint | Kind::Wide) => (
            "x[off]".to_string(),
            sp.int_extrapolation().and_then(|v| int_literal(dt, v)),
        ),
        Some(Kind::Bool) | None => {
            return Err(crate::CodegenError::Plan(format!("Resize of {dt} data")))
        }
    };
    Ok(Element::Copy {
        t,
        load,
        extrapolated,
        zero: format!("{t}()"),
    })
}

/// An f32 value as a float dtype's storage element.
fn store_float(dt: DType, v: &str) -> String {
    if dt == DType::F16 {
        format!("f16({v})")
    } else {
        v.to_string()
    }
}

/// The integer `v` (in `dt`'s range) as `dt`'s storage element (`None` for floats).
fn int_literal(dt: DType, v: i128) -> Option<String> {
    Some(match dt {
        DType::I64 | DType::U64 => {
            let b = v as u64;
            format!("vec2<u32>({}u, {}u)", b as u32, (b >> 32) as u32)
        }
        DType::I8 | DType::I16 | DType::I32 => format!("bitcast<i32>({}u)", v as i32 as u32),
        DType::U8 | DType::U16 | DType::U32 | DType::Bool => format!("{}u", v as u32),
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 => return None,
    })
}
