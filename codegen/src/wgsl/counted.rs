//! The counted kernels in WGSL ([`crate::lower::counted`]): NonZero here, Compress,
//! Unique and NonMaxSuppression in their own files. Each binds the run's status buffer
//! last (`array<u32>`) and writes the size of each counted output to the output's word.
//! The CUDA kernels (`cuda/counted.rs`) are the same algorithms line by line. f64 data
//! is refused: WGSL stores it as f32, which rounds small values to zero and so would
//! change which elements count.

use super::compress::SCAN;
use super::{storage_type, WgslKernel};
use crate::lower::counted::{CountedSpec, NonZeroSpec};
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const NONZERO: &str = include_str!("counted_nonzero.wgsl");

/// Emits the shader of counted spec `sp`.
pub fn emit(sp: &CountedSpec, name: &str) -> Result<WgslKernel> {
    match sp {
        CountedSpec::NonZero(sp) => nonzero(sp, name),
        CountedSpec::Compress { spec, slot, code } => {
            super::compress::emit(spec, *slot, *code, name)
        }
        CountedSpec::Unique { spec, slots } => super::unique::emit(spec, slots, name),
        CountedSpec::Nms { spec, slot } => super::nms::emit(spec, *slot, name),
    }
}

/// The storage type of counted data of dtype `dt` (f64 and bf16 refused).
pub fn data_type(site: &Site, dt: DType) -> Result<&'static str> {
    match (dt, storage_type(dt)) {
        (DType::F64, _) | (_, None) => Err(site.unsupported(&format!("{dt} data"))),
        (_, Some((t, _))) => Ok(t),
    }
}

/// Whether the storage element `e` of dtype `dt` is nonzero, in WGSL (NaN is).
pub fn nonzero_test(dt: DType, e: &str) -> String {
    match dt {
        DType::F32 => format!("({e} != 0.0)"),
        DType::F16 => format!("(f32({e}) != 0.0)"),
        DType::I64 | DType::U64 => format!("any({e} != vec2<u32>(0u, 0u))"),
        DType::I8 | DType::I16 | DType::I32 => format!("({e} != 0i)"),
        // f64 and bf16 data are refused before ([`data_type`]).
        DType::U8 | DType::U16 | DType::U32 | DType::Bool | DType::F64 | DType::BF16 => {
            format!("({e} != 0u)")
        }
    }
}

fn nonzero(sp: &NonZeroSpec, name: &str) -> Result<WgslKernel> {
    let (dt, dims, bound) = (sp.dtype, &sp.dims, sp.bound);
    let t = data_type(&sp.site, dt)?;
    let n = sp.n();
    let mut coords = String::new();
    for (d, &len) in dims.iter().enumerate().rev() {
        coords.push_str(&format!(
            "            y[{d}u * {bound}u + pos] = vec2<u32>(r % {len}u, 0u);\n            r = r / {len}u;\n",
            len = len.max(1)
        ));
    }
    let source = fill(
        NONZERO,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("n", &n.to_string()),
            ("dims", &format!("{dims:?}")),
            ("rank", &dims.len().to_string()),
            ("bound", &bound.to_string()),
            ("slot", &sp.slot.to_string()),
            ("t", t),
            ("nonzero", &nonzero_test(dt, "x[i]")),
            ("coords", &coords),
            SCAN[0],
            SCAN[1],
        ],
    )?;
    Ok(WgslKernel {
        // Chunks of 256, each a flag and 8 scan steps.
        loop_iterations: Some(n.div_ceil(256) as u64 * 9),
        ..WgslKernel::one_workgroup(name, &sp.site.node, source, vec![sp.x.0], vec![sp.y.0])
    })
}
