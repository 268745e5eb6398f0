//! BatchNormalization, InstanceNormalization, GroupNormalization, LRN and
//! MeanVarianceNormalization in CUDA ([`crate::lower::norm`]): f32, f16 or bf16 data
//! and parameters, f32 math with one rounding at the store. BatchNormalization with
//! stored statistics and LRN run one thread per element; the others one block per
//! group of elements, summing its statistics with [`super::PRELUDE`]'s block sum, then
//! normalizing. The WGSL kernels are the same algorithm line by line.

use super::elementwise::storage;
use super::support::{flit, store};
use super::Kernel;
use crate::lower::index::strides;
use crate::lower::norm::{Formula, NormKind, NormSpec, Operand, Stats};
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
    let source = match &sp.kind {
        NormKind::Batch { c, s, eps } => {
            let y = store(
                sp.dtype,
                "(gopt_ld(x[i]) - gopt_ld(input_mean[c])) * k + gopt_ld(bias[c])",
            );
            let body = format!(
                "        const long long c = (i / {s}LL) % {c}LL;\n        \
                 const float k = gopt_ld(scale[c]) / sqrtf(gopt_ld(input_var[c]) + {});\n        \
                 y[i] = {y};\n",
                flit(*eps)
            );
            elements(sp, what, name, &params, &body)?
        }
        NormKind::Lrn {
            c,
            s,
            before,
            after,
            bias,
            scale,
            beta,
        } => {
            let y = store(
                sp.dtype,
                &format!(
                    "gopt_ld(x[i]) / powf({} + {} * sq, {})",
                    flit(*bias),
                    flit(*scale),
                    flit(*beta)
                ),
            );
            let body = format!(
                "        const long long c = (i / {s}LL) % {c}LL;\n        \
                 const long long base = i - c * {s}LL;\n        \
                 const long long lo = c < {before}LL ? 0LL : c - {before}LL;\n        \
                 const long long hi = c + {}LL < {c}LL ? c + {}LL : {c}LL;\n        \
                 float sq = 0.0f;\n        \
                 for (long long j = lo; j < hi; ++j) {{\n            \
                 const float w = gopt_ld(x[base + j * {s}LL]);\n            \
                 sq = sq + w * w;\n        \
                 }}\n        \
                 y[i] = {y};\n",
                after + 1,
                after + 1
            );
            elements(sp, what, name, &params, &body)?
        }
        NormKind::Stats(st) => {
            let source = stats(sp, st, what, name, &params)?;
            return Ok(Kernel {
                shared_mem: 0,
                grid: u32::try_from(st.groups.clamp(1, 65_535)).unwrap_or(65_535),
                block: 256,
                threads: st.groups.clamp(1, 65_535) * 256,
                ..Kernel::flat(name, &sp.site.node, source, sp.n, inputs, outputs)
            });
        }
    };
    Ok(Kernel::flat(
        name,
        &sp.site.node,
        source,
        sp.n,
        inputs,
        outputs,
    ))
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

/// A per-element kernel around `body` (which sees `i`).
fn elements(sp: &NormSpec, what: &str, name: &str, params: &str, body: &str) -> Result<String> {
    fill(
        ELEMENTS,
        &[
            ("what", what),
            ("name", name),
            ("params", params),
            ("n", &sp.n.to_string()),
            ("body", body),
        ],
    )
}

/// Statements (indented `pad`) that decode `var` over the runs of `runs` whose reduced
/// flag is `red` into `const long long {out}` (an offset in the data).
fn decode(runs: &[(usize, bool)], red: bool, var: &str, out: &str, pad: &str) -> String {
    let sizes: Vec<usize> = runs.iter().map(|r| r.0).collect();
    let st = strides(&sizes);
    let mut code = format!("{pad}long long r_ = {var};\n{pad}long long o_ = 0;\n");
    for (k, &(s, r)) in runs.iter().enumerate().rev() {
        if r == red {
            code += &format!(
                "{pad}o_ = o_ + (r_ % {s}LL) * {}LL;\n{pad}r_ = r_ / {s}LL;\n",
                st[k]
            );
        }
    }
    code + &format!("{pad}(void)r_;\n{pad}const long long {out} = o_;\n")
}

/// The statistics kernel of `st`.
fn stats(sp: &NormSpec, st: &Stats, what: &str, name: &str, params: &str) -> Result<String> {
    let pad = "            ";
    let (second, accumulate, prepare, normalize, finish) = match &st.formula {
        Formula::Group {
            groups,
            per_group,
            s,
            scale_per_group,
            bias_per_group,
            eps,
        } => {
            let at = |by_group: bool| {
                if by_group {
                    format!("ch / {per_group}LL")
                } else {
                    "ch".to_string()
                }
            };
            let y = store(
                sp.dtype,
                &format!(
                    "(v - mean) * inv * gopt_ld(scale[{}]) + gopt_ld(bias[{}])",
                    at(*scale_per_group),
                    at(*bias_per_group)
                ),
            );
            (
                "squared deviations",
                format!("{pad}const float d = v - mean;\n{pad}s2 = s2 + d * d;\n"),
                format!(
                    "        const float inv = 1.0f / sqrtf(second + {});\n",
                    flit(*eps)
                ),
                format!(
                    "{pad}const long long ch = (grp % {groups}LL) * {per_group}LL + j / {s}LL;\n{pad}y[base + at(j)] = {y};\n"
                ),
                String::new(),
            )
        }
        Formula::Train {
            eps,
            momentum,
            running: [rm, rv],
        } => {
            let m = flit(*momentum);
            let running = |o: &Operand, input: &str, batch: &str| {
                format!(
                    "            {}[grp] = {};\n",
                    o.name,
                    store(
                        o.dtype,
                        &format!("gopt_ld({input}[grp]) * {m} + {batch} * (1.0f - {m})")
                    )
                )
            };
            (
                "squared deviations",
                format!("{pad}const float d = v - mean;\n{pad}s2 = s2 + d * d;\n"),
                format!(
                    "        const float k = gopt_ld(scale[grp]) / sqrtf(second + {});\n",
                    flit(*eps)
                ),
                format!(
                    "{pad}y[base + at(j)] = {};\n",
                    store(sp.dtype, "(v - mean) * k + gopt_ld(bias[grp])")
                ),
                format!(
                    "        if (threadIdx.x == 0) {{\n{}{}        }}\n",
                    running(rm, "input_mean", "mean"),
                    running(rv, "input_var", "second")
                ),
            )
        }
        Formula::Mvn => (
            "squares",
            format!("{pad}s2 = s2 + v * v;\n"),
            "        const float den = sqrtf(second - mean * mean) + 1e-9f;\n".to_string(),
            format!(
                "{pad}y[base + at(j)] = {};\n",
                store(sp.dtype, "(v - mean) / den")
            ),
            String::new(),
        ),
    };
    fill(
        STATS,
        &[
            ("what", what),
            ("name", name),
            ("params", params),
            ("groups", &st.groups.to_string()),
            ("len", &st.len.to_string()),
            ("second", second),
            (
                "offset",
                &(decode(&st.runs, true, "j", "off", "        ") + "        return off;\n"),
            ),
            ("base", &decode(&st.runs, false, "grp", "base", "        ")),
            ("accumulate", &accumulate),
            ("prepare", &prepare),
            ("normalize", &normalize),
            ("finish", &finish),
        ],
    )
}
