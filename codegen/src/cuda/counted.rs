//! The counted kernels in CUDA ([`crate::lower::counted`]): NonZero here, Compress,
//! Unique and NonMaxSuppression in their own files. Each takes the run's status buffer
//! as its last parameter and writes the size of each counted output to the output's
//! word. The WGSL kernels (`wgsl/counted.rs`) are the same algorithms line by line.

use super::compress::SCAN;
use super::elementwise::storage;
use super::Kernel;
use crate::lower::counted::{CountedSpec, NonZeroSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const NONZERO: &str = include_str!("counted_nonzero.cu");

/// Emits the kernel of counted spec `sp`.
pub fn emit(sp: &CountedSpec, name: &str) -> Result<Kernel> {
    match sp {
        CountedSpec::NonZero(sp) => nonzero(sp, name),
        CountedSpec::Compress { spec, slot, code } => {
            super::compress::emit(spec, *slot, *code, name)
        }
        CountedSpec::Unique { spec, slots } => super::unique::emit(spec, slots, name),
        CountedSpec::Nms { spec, slot } => super::nms::emit(spec, *slot, name),
    }
}

/// Whether an element read as `x[i]` of dtype `dt` is nonzero, in CUDA C (NaN is).
pub fn nonzero_test(dt: DType, at: &str) -> String {
    if matches!(dt, DType::F16 | DType::BF16) {
        format!("gopt_ld(x[{at}]) != 0.0f")
    } else {
        format!("x[{at}] != 0")
    }
}

fn nonzero(sp: &NonZeroSpec, name: &str) -> Result<Kernel> {
    let (dt, dims, bound) = (sp.dtype, &sp.dims, sp.bound);
    let n = sp.n();
    let mut coords = String::new();
    for (d, &len) in dims.iter().enumerate().rev() {
        coords.push_str(&format!(
            "            y[{d}LL * {bound}LL + pos] = r % {len}LL;\n            r /= {len}LL;\n",
            len = len.max(1)
        ));
    }
    let source = fill(
        NONZERO,
        &[
            ("name", name),
            ("t", storage(dt)),
            ("n", &n.to_string()),
            ("dims", &format!("{dims:?}")),
            ("rank", &dims.len().to_string()),
            ("bound", &bound.to_string()),
            ("slot", &sp.slot.to_string()),
            ("nonzero", &nonzero_test(dt, "i")),
            ("coords", &coords),
            SCAN[0],
            SCAN[1],
        ],
    )?;
    let mut k = Kernel::flat(
        name,
        &sp.site.node,
        source,
        1024,
        vec![sp.x.0],
        vec![sp.y.0],
    );
    k.grid = 1;
    k.block = 1024;
    Ok(k)
}
