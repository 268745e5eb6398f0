//! BatchNormalization, InstanceNormalization, GroupNormalization, LRN and
//! MeanVarianceNormalization in CUDA ([`crate::lower::norm`]): f32, f16 or bf16 data
//! and parameters, f32 math with one rounding at the store. BatchNormalization with
//! stored statistics and LRN run one thread per element; the others one block per
//! group of elements, summing its statistics with [`super::PRELUDE`]'s block sum, then
//! normalizing. The statements are the lowering's ([`crate::lower::norm_kernel`]),
//! spelled in CUDA C ([`Cuda`]), as the WGSL kernels spell them in WGSL.

use super::elementwise::storage;
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::norm::{NormSpec, Operand};
use crate::lower::norm_kernel::{offset, text, StatsText, Text};
use crate::template::fill;
use crate::Result;

const ELEMENTS: &str = include_str!("norm.cu");
const STATS: &str = include_str!("norm_stats.cu");

/// Emits the kernel of normalization spec `sp`.
pub fn emit(sp: &NormSpec, name: &str) -> Result<Kernel> {
    let params = params(sp);
    let what = sp.site.op;
    let inputs = sp.inputs.iter().map(|o| o.value.0).collect();
    let outputs = sp.outputs.iter().map(|o| o.value.0).collect();
    let parts = match text(sp, &Cuda::PLAIN) {
        Text::Stats(parts) => parts,
        Text::Elements(body) => {
            let source = fill(
                ELEMENTS,
                &[
                    ("what", what),
                    ("name", name),
                    ("params", &params),
                    ("n", &sp.n.to_string()),
                    ("body", &body),
                ],
            )?;
            return Ok(Kernel::flat(
                name,
                &sp.site.node,
                source,
                sp.n,
                inputs,
                outputs,
            ));
        }
    };
    let st = &parts.stats;
    let source = stats(&parts, what, name, &params)?;
    Ok(Kernel {
        shared_mem: 0,
        grid: u32::try_from(st.groups.clamp(1, 65_535)).unwrap_or(65_535),
        block: 256,
        threads: st.groups.clamp(1, 65_535) * 256,
        ..Kernel::flat(name, &sp.site.node, source, sp.n, inputs, outputs)
    })
}

/// The parameters: the inputs read-only, then the outputs.
fn params(sp: &NormSpec) -> String {
    let p = |o: &Operand, c: &str| format!("{c}{}* __restrict__ {}", storage(o.dtype), o.name);
    sp.inputs
        .iter()
        .map(|o| p(o, "const "))
        .chain(sp.outputs.iter().map(|o| p(o, "")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The statistics kernel of `st`.
fn stats(parts: &StatsText, what: &str, name: &str, params: &str) -> Result<String> {
    let st = &parts.stats;
    fill(
        STATS,
        &[
            ("what", what),
            ("name", name),
            ("params", params),
            ("groups", &st.groups.to_string()),
            ("len", &st.len.to_string()),
            ("second", parts.second),
            ("offset", &offset(&Cuda::PLAIN, st, "        ")),
            ("base", &parts.base),
            ("accumulate", &parts.accumulate),
            ("prepare", &parts.prepare),
            ("normalize", &parts.normalize),
            ("finish", &parts.finish),
        ],
    )
}
