//! GatherElements in CUDA ([`crate::lower::gather_elements`]): one thread per output
//! element, data of any dtype copied as stored, i32 or i64 indices each checked on the
//! device (they may be computed there): one out of range raises the node's code in the
//! run's error word ([`crate::plan::IndexCheck`]) and reads element 0 of the axis.

use super::elementwise::storage;
use super::support::one_output;
use super::Kernel;
use crate::lower::gather_elements::Spec;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;

const TEMPLATE: &str = include_str!("gather_elements.cu");

/// Emits the kernel for GatherElements node `node` of `g`.
pub fn emit(sp: &Spec, name: &str) -> Result<Kernel> {
    let code = sp.code;
    let mut coords = String::new();
    for (d, stride) in sp.axes_rev() {
        let term = match stride {
            0 => String::new(),
            s => format!("at += (r % {d}LL) * {s}LL; "),
        };
        coords += &format!("        {term}r /= {d}LL;\n");
    }
    let source = fill(
        TEMPLATE,
        &[
            ("axis", &sp.axis.to_string()),
            ("name", name),
            ("t", storage(sp.dtype)),
            ("it", storage(sp.index_dtype)),
            ("n", &sp.n.to_string()),
            ("len", &sp.axis_len.to_string()),
            ("code", &code.to_string()),
            ("kstride", &sp.axis_stride.to_string()),
            ("coords", &coords),
        ],
    )?;
    let inputs = vec![sp.data.0, sp.indices.0];
    Ok(Kernel {
        index_check: Some(IndexCheck {
            code,
            op: sp.site.op.into(),
            what: sp.out_of_range(),
        }),
        ..one_output(&sp.site, name, source, sp.n, inputs, sp.out)
    })
}
