//! Compress in WGSL ([`crate::lower::counted::compress`]): the slices of the data along
//! the axis (elements when flattened) whose condition entry is true, in order, laid out
//! at the output's bound; the kernel writes how many it kept to the output's status
//! word ([`crate::plan::Count`]). One workgroup scans the condition in chunks and copies
//! each chunk's kept slices together (`compress.wgsl`). A true entry past the axis is
//! an error in the reference, so it raises the node's code in the error word
//! ([`crate::plan::IndexCheck`]) and is never read. Data is copied as stored: every
//! dtype WGSL storage holds but f64 ([`super::counted::data_type`]). The CUDA kernel
//! (`cuda/compress.rs`) is the same algorithm line by line.

use super::counted::data_type;
use super::WgslKernel;
use crate::lower::counted::CompressSpec;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("compress.wgsl");

/// The block-wide scan Compress and NonZero share (`{{scan_init}}` before the chunk
/// loop, `{{scan_step}}` turning each chunk's flags `f` into inclusive ranks in
/// `scan`), filled into both templates.
pub const SCAN: [(&str, &str); 2] = [
    ("scan_init", include_str!("scan_init.wgsl")),
    ("scan_step", include_str!("scan_step.wgsl")),
];

/// Emits the shader of Compress spec `sp`, counting into status word `slot`, with the
/// index check raising `code` where the condition can select past the axis.
pub fn emit(sp: &CompressSpec, slot: u32, code: Option<u32>, name: &str) -> Result<WgslKernel> {
    let site = &sp.site;
    let t = data_type(site, sp.dtype)?;
    let n = sp.outer * sp.d * sp.inner;
    if u32::try_from(n).is_err() || i32::try_from(sp.len).is_err() {
        return Err(site.unsupported("more than 2^31 condition entries or 2^32 elements"));
    }
    // No WGSL binding holds an axis too long for an i32 index.
    if i32::try_from(sp.d).is_err() {
        return Err(site.unsupported("an axis of 2^31 elements or more"));
    }
    let check = code.map(|code| IndexCheck {
        code,
        op: site.op.into(),
        what: sp.out_of_range(),
    });
    let raise = match &check {
        Some(c) => format!("                    atomicMax(&status[0], {}u);\n", c.code),
        None => String::new(),
    };
    let holes = sp.holes(slot, raise);
    let mut holes: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    holes.extend([
        ("enable", super::enable_f16(sp.dtype == DType::F16)),
        ("t", t),
    ]);
    holes.extend(SCAN);
    let source = fill(TEMPLATE, &holes)?;
    Ok(WgslKernel {
        index_check: check,
        // Chunks of 256 condition entries: 8 scan steps, then the selected slices.
        loop_iterations: Some(
            (sp.len.div_ceil(256) as u64).saturating_mul(9 + (sp.outer * sp.inner) as u64),
        ),
        ..WgslKernel::one_workgroup(
            name,
            &site.node,
            source,
            vec![sp.x.0, sp.cond.0],
            vec![sp.y.0],
        )
    })
}
