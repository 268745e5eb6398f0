//! BatchNormalization, InstanceNormalization, GroupNormalization, LRN and
//! MeanVarianceNormalization in WGSL, f32 or f16 data and parameters, f32 math with one
//! rounding at the store: BatchNormalization with stored statistics and LRN one
//! invocation per element, the others one workgroup per group of elements summing its
//! statistics through workgroup memory, then normalizing (the CUDA kernels' algorithm
//! line by line). The node is read once, for both backends, by [`crate::lower::norm`].

use super::types::{self, f32_literal};
use super::WgslKernel;
use crate::lower::index::strides;
use crate::lower::norm::{Formula, NormKind, NormSpec, Operand, Stats};
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const ELEMENTS: &str = include_str!("norm.wgsl");
const STATS: &str = include_str!("norm_stats.wgsl");

/// Emits the shader of normalization spec `sp`.
pub fn emit(sp: &NormSpec, name: &str) -> Result<WgslKernel> {
    let n = u32::try_from(sp.n)
        .ok()
        .filter(|&n| n < 1 << 31)
        .ok_or_else(|| sp.site.unsupported("2^31 elements or more"))?;
    let bindings = bindings(sp)?;
    let f16 = sp
        .inputs
        .iter()
        .chain(&sp.outputs)
        .any(|o| o.dtype == DType::F16);
    let what = sp.site.op;
    let (source, groups) = match &sp.kind {
        NormKind::Batch { c, s, eps } => {
            let eps = f32_literal(*eps);
            let y = store(sp, "(f32(x[i]) - f32(input_mean[c])) * k + f32(bias[c])");
            let body = format!(
                "        let c = (i / {s}u) % {c}u;\n        \
                 let k = f32(scale[c]) / sqrt(f32(input_var[c]) + {eps});\n        \
                 y[i] = {y};\n"
            );
            (
                elements(sp, what, &bindings, &body, f16)?,
                n.div_ceil(super::WORKGROUP),
            )
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
                &sp,
                &format!(
                    "f32(x[i]) / gopt_pow({} + {} * sq, {})",
                    f32_literal(*bias),
                    f32_literal(*scale),
                    f32_literal(*beta)
                ),
            );
            let body = format!(
                "        let c = (i / {s}u) % {c}u;\n        \
                 let base = i - c * {s}u;\n        \
                 let lo = select(c - {before}u, 0u, c < {before}u);\n        \
                 let hi = min(c + {}u, {c}u);\n        \
                 var sq: f32 = 0.0;\n        \
                 for (var j: u32 = lo; j < hi; j = j + 1u) {{\n            \
                 let w = f32(x[base + j * {s}u]);\n            \
                 sq = sq + w * w;\n        \
                 }}\n        \
                 y[i] = {y};\n",
                after + 1
            );
            (
                elements(sp, what, &bindings, &body, f16)?,
                n.div_ceil(super::WORKGROUP),
            )
        }
        NormKind::Stats(st) => {
            let groups =
                u32::try_from(st.groups).map_err(|_| sp.site.unsupported("2^32 groups"))?;
            (stats(sp, st, what, &bindings, f16)?, groups)
        }
    };
    Ok(WgslKernel {
        name: name.to_string(),
        node: sp.site.node.clone(),
        source,
        workgroups: [groups.clamp(1, 65535), 1, 1],
        inputs: sp.inputs.iter().map(|o| o.value.0).collect(),
        outputs: sp.outputs.iter().map(|o| o.value.0).collect(),
        index_check: None,
        loop_iterations: None,
    })
}

/// The bindings: the inputs read-only, then the outputs.
fn bindings(sp: &NormSpec) -> Result<String> {
    let ty = |o: &Operand| {
        if o.dtype == DType::F32 {
            Ok("f32")
        } else if o.dtype == DType::F16 {
            Ok("f16")
        } else {
            Err(sp.site.unsupported(&format!("{} `{}`", o.dtype, o.name)))
        }
    };
    let mut s = String::new();
    for (k, o) in sp.inputs.iter().enumerate() {
        s += &format!(
            "@group(0) @binding({k}) var<storage, read> {}: array<{}>;\n",
            o.name,
            ty(o)?
        );
    }
    for (k, o) in sp.outputs.iter().enumerate() {
        s += &format!(
            "@group(0) @binding({}) var<storage, read_write> {}: array<{}>;\n",
            sp.inputs.len() + k,
            o.name,
            ty(o)?
        );
    }
    Ok(s)
}

/// `v` (f32) as an element of `y`.
fn store(sp: &NormSpec, v: &str) -> String {
    types::store(sp.dtype, v)
}

/// A per-element shader around `body` (which sees `i`).
fn elements(sp: &NormSpec, what: &str, bindings: &str, body: &str, f16: bool) -> Result<String> {
    fill(
        ELEMENTS,
        &[
            ("enable", super::enable_f16(f16)),
            ("what", what),
            ("n", &sp.n.to_string()),
            ("bindings", bindings),
            ("helpers", &types::helpers_for(body)),
            ("body", body),
        ],
    )
}

/// Statements (indented `pad`) that decode `var` over the runs of `runs` whose reduced
/// flag is `red` into `let {out}` (an offset in the data).
fn decode(runs: &[(usize, bool)], red: bool, var: &str, out: &str, pad: &str) -> String {
    let sizes: Vec<usize> = runs.iter().map(|r| r.0).collect();
    let st = strides(&sizes);
    let mut code = format!("{pad}var r_: u32 = {var};\n{pad}var o_: u32 = 0u;\n");
    for (k, &(s, r)) in runs.iter().enumerate().rev() {
        if r == red {
            code += &format!(
                "{pad}o_ = o_ + (r_ % {s}u) * {}u;\n{pad}r_ = r_ / {s}u;\n",
                st[k]
            );
        }
    }
    code + &format!("{pad}let {out} = o_;\n")
}

/// The statistics shader of `st`.
fn stats(sp: &NormSpec, st: &Stats, what: &str, bindings: &str, f16: bool) -> Result<String> {
    let len = st.len;
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
                    format!("ch / {per_group}u")
                } else {
                    "ch".to_string()
                }
            };
            let y = store(
                sp,
                &format!(
                    "(v - mean) * inv * f32(scale[{}]) + f32(bias[{}])",
                    at(*scale_per_group),
                    at(*bias_per_group)
                ),
            );
            (
                "squared deviations",
                format!("{pad}let d = v - mean;\n{pad}s2 = s2 + d * d;\n"),
                format!(
                    "        let inv = 1.0 / sqrt(second + {});\n",
                    f32_literal(*eps)
                ),
                format!(
                    "{pad}let ch = (grp % {groups}u) * {per_group}u + j / {s}u;\n{pad}y[base + at(j)] = {y};\n"
                ),
                String::new(),
            )
        }
        Formula::Train {
            eps,
            momentum,
            running: [rm, rv],
        } => {
            let m = f32_literal(*momentum);
            let running = |o: &Operand, input: &str, batch: &str| {
                format!(
                    "            {}[grp] = {};\n",
                    o.name,
                    types::store(
                        o.dtype,
                        &format!("f32({input}[grp]) * {m} + {batch} * (1.0 - {m})")
                    )
                )
            };
            (
                "squared deviations",
                format!("{pad}let d = v - mean;\n{pad}s2 = s2 + d * d;\n"),
                format!(
                    "        let k = f32(scale[grp]) / sqrt(second + {});\n",
                    f32_literal(*eps)
                ),
                format!(
                    "{pad}y[base + at(j)] = {};\n",
                    store(sp, "(v - mean) * k + f32(bias[grp])")
                ),
                format!(
                    "        if (lid == 0u) {{\n{}{}        }}\n",
                    running(rm, "input_mean", "mean"),
                    running(rv, "input_var", "second")
                ),
            )
        }
        Formula::Mvn => (
            "squares",
            format!("{pad}s2 = s2 + v * v;\n"),
            "        let den = sqrt(second - mean * mean) + 1e-9;\n".to_string(),
            format!(
                "{pad}y[base + at(j)] = {};\n",
                store(sp, "(v - mean) / den")
            ),
            String::new(),
        ),
    };
    fill(
        STATS,
        &[
            ("enable", super::enable_f16(f16)),
            ("what", what),
            ("groups", &st.groups.to_string()),
            ("len", &len.to_string()),
            ("second", second),
            ("bindings", bindings),
            (
                "offset",
                &(decode(&st.runs, true, "j", "off", "    ") + "    return off;\n"),
            ),
            ("base", &decode(&st.runs, false, "grp", "base", "        ")),
            ("accumulate", &accumulate),
            ("prepare", &prepare),
            ("normalize", &normalize),
            ("finish", &finish),
        ],
    )
}
