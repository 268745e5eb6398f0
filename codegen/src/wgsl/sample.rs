//! GridSample, AffineGrid and RoiAlign in WGSL: one invocation per output element in a
//! grid-stride loop, f32 or f16 storage computed in f32 (WGSL has no f64 or bf16).
//! GridSample's filter is spelled per mode and padding rule and its per-dim taps
//! unrolled into nested loops; AffineGrid's base grid is a constant integer ratio per
//! dim; RoiAlign's region batch indices (i64 words or i32) are checked against the
//! batch ([`super::bounds`]'s error word: one outside it fails the run).
//! The nodes are read once, for both backends, by [`crate::lower::sample`]; the
//! statements are the CUDA writer's ([`crate::twin::sample`]).

use super::syntax::Wgsl;
use super::WgslKernel;
use crate::lower::sample::{AffineGridSpec, GridSampleSpec, RoiAlignSpec, SampleSpec};
use crate::lower::support::Site;
use crate::plan::IndexCheck;
use crate::template::fill_owned;
use crate::twin::sample::{affine_fills, grid_fills, roi_fills, taps};
use crate::Result;
use gopt_ir::DType;

const GRID_SAMPLE: &str = include_str!("grid_sample.wgsl");
const AFFINE_GRID: &str = include_str!("affine_grid.wgsl");
const ROI_ALIGN: &str = include_str!("roi_align.wgsl");

/// Emits the shader of sampling spec `sp`.
pub fn emit(sp: &SampleSpec, name: &str) -> Result<WgslKernel> {
    match sp {
        SampleSpec::Grid(sp) => grid_sample(name, sp),
        SampleSpec::Affine(sp) => affine_grid(name, sp),
        SampleSpec::Roi(sp) => roi_align(name, sp),
    }
}

/// The WGSL storage of float `dt` (f32 or f16; bf16 has no WGSL form).
fn float(site: &Site, dt: DType, what: &str) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(site.unsupported(&format!("{other} {what}"))),
    }
}

/// `len` as a u32 below 2^31 (WGSL indexes with u32 and converts taps through i32).
fn small(site: &Site, len: usize, what: &str) -> Result<u32> {
    u32::try_from(len)
        .ok()
        .filter(|&v| v < 1 << 31)
        .ok_or_else(|| site.unsupported(&format!("{what} of 2^31 elements or more")))
}

/// The kernel of `site` dispatched over `n` elements.
fn kernel(
    site: &Site,
    name: &str,
    source: String,
    n: u32,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    index_check: Option<IndexCheck>,
) -> WgslKernel {
    WgslKernel {
        name: name.to_string(),
        node: site.node.clone(),
        source,
        workgroups: [n.div_ceil(super::WORKGROUP).clamp(1, 65535), 1, 1],
        inputs,
        outputs,
        index_check,
        loop_iterations: None,
    }
}

/// The GridSample shader.
fn grid_sample(name: &str, sp: &GridSampleSpec) -> Result<WgslKernel> {
    let site = &sp.site;
    let t = float(site, sp.dtype, "data")?;
    let gt = float(site, sp.grid_dtype, "grids")?;
    let n = small(site, sp.n, "an output")?;
    small(site, sp.grid_len, "a grid")?;
    let sx = Wgsl { prefix: "gs_" };
    let tp = taps(&sx, sp.interp);
    let [i0, i1, i2, i3] = &tp.idx;
    let [w0, w1, w2, w3] = &tp.w;
    let mut values = grid_fills(&sx, sp);
    values.extend([
        (
            "enable",
            super::enable_f16(t == "f16" || gt == "f16").to_string(),
        ),
        ("t", t.to_string()),
        ("gt", gt.to_string()),
        (
            "taps",
            format!(
                "{}    r.idx = vec4<i32>({i0}, {i1}, {i2}, {i3});\n    r.w = vec4<f32>({w0}, {w1}, {w2}, {w3});\n",
                tp.pre
            ),
        ),
    ]);
    let source = fill_owned(GRID_SAMPLE, &values)?;
    Ok(kernel(
        site,
        name,
        source,
        n,
        vec![sp.x.0, sp.grid.0],
        vec![sp.out.0],
        None,
    ))
}

/// The AffineGrid shader.
fn affine_grid(name: &str, sp: &AffineGridSpec) -> Result<WgslKernel> {
    let site = &sp.site;
    let t = float(site, sp.dtype, "matrices")?;
    let n = small(site, sp.n, "a grid")?;
    let mut values = affine_fills(&Wgsl::PLAIN, sp);
    values.extend([
        ("enable", super::enable_f16(t == "f16").to_string()),
        ("t", t.to_string()),
    ]);
    let source = fill_owned(AFFINE_GRID, &values)?;
    Ok(kernel(
        site,
        name,
        source,
        n,
        vec![sp.theta.0],
        vec![sp.out.0],
        None,
    ))
}

/// RoiAlign's statements that read region `ri`'s batch index into `b: u32`, checked.
fn read_batch(sp: &RoiAlignSpec, code: u32) -> String {
    let nb = sp.batch_len;
    if sp.batch_dtype == DType::I64 {
        format!(
            "        let bword = bidx[ri];\n        var b: u32 = bword.x;\n        \
             if (bword.y != 0u || bword.x >= {nb}u) {{\n            atomicMax(&gopt_err, {code}u);\n            b = 0u;\n        }}\n"
        )
    } else {
        format!(
            "        var bs: i32 = bidx[ri];\n        \
             if (bs < 0i || bs >= {nb}i) {{\n            atomicMax(&gopt_err, {code}u);\n            bs = 0i;\n        }}\n        let b = u32(bs);\n"
        )
    }
}

/// The RoiAlign shader.
fn roi_align(name: &str, sp: &RoiAlignSpec) -> Result<WgslKernel> {
    let site = &sp.site;
    let t = float(site, sp.dtype, "data")?;
    let rt = float(site, sp.rois_dtype, "regions")?;
    let bt = super::bounds::index_type(sp.batch_dtype)
        .ok_or_else(|| site.unsupported(&format!("{} batch indices", sp.batch_dtype)))?;
    let n = small(site, sp.n, "an output")?;
    if i32::try_from(sp.batch_len).is_err() {
        return Err(site.unsupported("a batch of 2^31 or more"));
    }
    let check: IndexCheck = sp.check.clone();
    let mut values = roi_fills(&Wgsl::PLAIN, sp);
    values.extend([
        (
            "enable",
            super::enable_f16(t == "f16" || rt == "f16").to_string(),
        ),
        ("t", t.to_string()),
        ("rt", rt.to_string()),
        ("bt", bt.to_string()),
        ("read", read_batch(sp, check.code)),
    ]);
    let source = fill_owned(ROI_ALIGN, &values)?;
    Ok(kernel(
        site,
        name,
        source,
        n,
        vec![sp.x.0, sp.rois.0, sp.batch.0],
        vec![sp.out.0],
        Some(check),
    ))
}
