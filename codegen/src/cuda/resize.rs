//! Resize in CUDA ([`crate::lower::resize`]): every mode of ONNX Resize (nearest with
//! each `nearest_mode`, linear and cubic, antialiased or not, `exclude_outside`, every
//! `coordinate_transformation_mode`, `tf_crop_and_resize` with its extrapolation value)
//! over any rank. One thread per output element computes, for each resampled axis, its
//! source coordinate, taps and weights in f32, then sums the separable product of the
//! axes' weights over the taps (one loop per axis) and rounds once at the store,
//! saturated to the dtype's range as the interpreter saturates. Nearest resampling
//! copies one element as stored (any dtype but bool); linear and cubic resampling takes
//! f32, f16 or bf16 data. The statements are the WGSL writer's ([`crate::twin::resize`]),
//! so what lavapipe runs vouches for them.

use super::elementwise::storage;
use super::support::{flit, one_output, store};
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::resize::ResizeSpec;
use crate::template::fill;
use crate::twin::resize::{describe, how, texts, Element};
use crate::{CodegenError, Result};
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("resize.cu");

/// Emits the kernel of Resize spec `sp`.
pub fn emit(sp: &ResizeSpec, name: &str) -> Result<Kernel> {
    let element = if sp.nearest() {
        copy(sp, name)?
    } else {
        Element::Sum {
            store: store(sp.dtype, &format!("{name}_sat(v)")),
        }
    };
    let tx = texts(sp, &Cuda { name }, &element)?;
    let max = sp.float_max().unwrap_or(f32::MAX);
    let source = fill(
        TEMPLATE,
        &[
            ("what", &describe(sp)),
            ("how", how(sp)),
            ("name", name),
            ("t", storage(sp.dtype)),
            ("max", &flit(max)),
            ("n", &sp.n.to_string()),
            ("decode", &tx.decode),
            ("axes", &tx.axes),
            ("body", &tx.body),
        ],
    )?;
    let inputs = vec![sp.x.0];
    Ok(one_output(&sp.site, name, source, sp.n, inputs, sp.out))
}

/// The nearest element's copy: as stored (saturated for f32, f16 and bf16), the
/// extrapolation value, zero.
fn copy(sp: &ResizeSpec, name: &str) -> Result<Element> {
    let dt = sp.dtype;
    let t = storage(dt);
    let (load, extrapolated) = match dt {
        DType::F32 | DType::F16 | DType::BF16 => (
            store(dt, &format!("{name}_sat(gopt_ld(x[off]))")),
            sp.extrapolation
                .map(|v| store(dt, &format!("{name}_sat({})", flit(v)))),
        ),
        // f64 is copied (the interpreter does not clamp it); its extrapolation value
        // is the f32 attribute widened.
        DType::F64 => (
            "x[off]".to_string(),
            sp.extrapolation.map(|v| format!("(double){}", flit(v))),
        ),
        DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => (
            "x[off]".to_string(),
            sp.int_extrapolation()
                .map(|v| format!("(({t}){}ULL)", v as u64)),
        ),
        DType::Bool => return Err(CodegenError::Plan("Resize of bool data".into())),
    };
    Ok(Element::Copy {
        t,
        load,
        extrapolated,
        zero: format!("({t})0"),
    })
}
