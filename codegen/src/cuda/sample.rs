//! GridSample, AffineGrid and RoiAlign in CUDA ([`crate::lower::sample`]): one thread
//! per output element (grid-stride), f32, f16 or bf16 storage computed in f32. The
//! statements are the WGSL writer's ([`crate::twin::sample`]): the same filter, the
//! same index arithmetic, the same roundings (`__f*_rn` where NVRTC would otherwise
//! contract a product into a sum), so the WGSL run on lavapipe vouches for the logic.
//! RoiAlign's region batch indices are checked on the device
//! ([`crate::plan::IndexCheck`]): one outside the batch raises the node's code in the
//! run's error word and reads batch 0.

use super::elementwise::storage;
use super::support::{one_output, store};
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::sample::{AffineGridSpec, GridSampleSpec, RoiAlignSpec, SampleSpec};
use crate::template::fill_owned;
use crate::twin::sample::{affine_fills, grid_fills, roi_fills, taps};
use crate::Result;

const GRID_SAMPLE: &str = include_str!("grid_sample.cu");
const AFFINE_GRID: &str = include_str!("affine_grid.cu");
const ROI_ALIGN: &str = include_str!("roi_align.cu");

/// Emits the kernel of sampling spec `sp` (its float dtypes are f32, f16 or bf16 and
/// its images below 2^31 elements, as [`crate::lower::sample`] checks).
pub fn emit(sp: &SampleSpec, name: &str) -> Result<Kernel> {
    match sp {
        SampleSpec::Grid(sp) => grid_sample(name, sp),
        SampleSpec::Affine(sp) => affine_grid(name, sp),
        SampleSpec::Roi(sp) => roi_align(name, sp),
    }
}

/// The GridSample kernel.
fn grid_sample(name: &str, sp: &GridSampleSpec) -> Result<Kernel> {
    let sx = Cuda { name };
    let tp = taps(&sx, sp.interp);
    let [i0, i1, i2, i3] = &tp.idx;
    let [w0, w1, w2, w3] = &tp.w;
    let mut values = grid_fills(&sx, sp);
    values.extend([
        ("name", name.to_string()),
        (
            "taps",
            format!(
                "{}    r.idx[0] = {i0}; r.idx[1] = {i1}; r.idx[2] = {i2}; r.idx[3] = {i3};\n    \
                 r.w[0] = {w0}; r.w[1] = {w1}; r.w[2] = {w2}; r.w[3] = {w3};\n",
                tp.pre
            ),
        ),
        ("t", storage(sp.dtype).to_string()),
        ("gt", storage(sp.grid_dtype).to_string()),
        ("store", store(sp.dtype, "acc")),
    ]);
    let source = fill_owned(GRID_SAMPLE, &values)?;
    let inputs = vec![sp.x.0, sp.grid.0];
    Ok(one_output(&sp.site, name, source, sp.n, inputs, sp.out))
}

/// The AffineGrid kernel.
fn affine_grid(name: &str, sp: &AffineGridSpec) -> Result<Kernel> {
    let mut values = affine_fills(&Cuda { name }, sp);
    values.extend([
        ("name", name.to_string()),
        ("t", storage(sp.dtype).to_string()),
        ("store", store(sp.dtype, "acc")),
    ]);
    let source = fill_owned(AFFINE_GRID, &values)?;
    let inputs = vec![sp.theta.0];
    Ok(one_output(&sp.site, name, source, sp.n, inputs, sp.out))
}

/// The RoiAlign kernel.
fn roi_align(name: &str, sp: &RoiAlignSpec) -> Result<Kernel> {
    let mut values = roi_fills(&Cuda { name }, sp);
    values.extend([
        ("name", name.to_string()),
        ("t", storage(sp.dtype).to_string()),
        ("rt", storage(sp.rois_dtype).to_string()),
        ("bt", storage(sp.batch_dtype).to_string()),
        ("nb", sp.batch_len.to_string()),
        ("code", sp.check.code.to_string()),
        ("store", store(sp.dtype, "acc")),
    ]);
    let source = fill_owned(ROI_ALIGN, &values)?;
    let inputs = vec![sp.x.0, sp.rois.0, sp.batch.0];
    Ok(Kernel {
        index_check: Some(sp.check.clone()),
        ..one_output(&sp.site, name, source, sp.n, inputs, sp.out)
    })
}
