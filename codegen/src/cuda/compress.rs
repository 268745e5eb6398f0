//! Compress in CUDA ([`crate::lower::counted::compress`]): the slices of the data along
//! the axis (elements when flattened) whose condition entry is true, in order, laid out
//! at the output's bound; the kernel writes how many it kept to the output's status
//! word ([`crate::plan::Count`]). One block scans the condition in chunks and copies
//! each chunk's kept slices together (`compress.cu`). A true entry past the axis is an
//! error in the reference, so it raises the node's code in the error word
//! ([`crate::plan::IndexCheck`]) and is never read. Data of every dtype is copied as
//! stored. The WGSL kernel (`wgsl/compress.rs`) is the same algorithm line by line.

use super::elementwise::storage;
use super::Kernel;
use crate::lower::counted::CompressSpec;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;

const TEMPLATE: &str = include_str!("compress.cu");

/// The block-wide scan Compress and NonZero share (`{{scan_init}}` before the chunk
/// loop, `{{scan_step}}` turning each chunk's flags `f` into inclusive ranks in
/// `scan`), filled into both templates.
pub const SCAN: [(&str, &str); 2] = [
    ("scan_init", include_str!("scan_init.cu")),
    ("scan_step", include_str!("scan_step.cu")),
];

/// Emits the kernel of Compress spec `sp`, counting into status word `slot`, with the
/// index check raising `code` where the condition can select past the axis.
pub fn emit(sp: &CompressSpec, slot: u32, code: Option<u32>, name: &str) -> Result<Kernel> {
    if u32::try_from(sp.bound).is_err() {
        return Err(sp.site.unsupported("a count of 2^32 slices or more"));
    }
    let check = code.map(|code| IndexCheck {
        code,
        op: sp.site.op.into(),
        what: sp.out_of_range(),
    });
    let raise = match &check {
        Some(c) => format!("                    atomicMax(status, {}u);\n", c.code),
        None => String::new(),
    };
    let holes = sp.holes(slot, raise);
    let mut holes: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    holes.extend([("name", name), ("t", storage(sp.dtype))]);
    holes.extend(SCAN);
    let source = fill(TEMPLATE, &holes)?;
    let mut k = Kernel::flat(
        name,
        &sp.site.node,
        source,
        1024,
        vec![sp.x.0, sp.cond.0],
        vec![sp.y.0],
    );
    k.grid = 1;
    k.block = 1024;
    k.index_check = check;
    Ok(k)
}
