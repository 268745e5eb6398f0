//! The normalization kernels ([`super::norm`]) described once: the statements of the
//! per-element kernels (BatchNormalization with stored statistics, LRN) and the parts
//! of the statistics kernel (GroupNormalization, InstanceNormalization,
//! BatchNormalization in training mode, MeanVarianceNormalization) that each writer
//! spells in its language ([`Syntax`]) and places in its template.

use super::index::strides;
use super::norm::{Formula, NormKind, NormSpec, Operand, Stats};
use crate::twin::Syntax;

/// A normalization kernel's text.
pub enum Text {
    /// A per-element kernel's body (it sees the element `i`).
    Elements(String),
    /// The statistics kernel's parts.
    Stats(Box<StatsText>),
}

/// The parts of a statistics kernel, one block (workgroup) per group.
pub struct StatsText {
    /// The groups and their runs.
    pub stats: Stats,
    /// What the second pass sums, for the header.
    pub second: &'static str,
    /// The second pass's step over element value `v`.
    pub accumulate: String,
    /// What is computed once the statistics are known.
    pub prepare: String,
    /// The store of element `j` of the group, value `v`.
    pub normalize: String,
    /// What the first thread does at the end.
    pub finish: String,
    /// The group's first element, `base`, from the group `grp`.
    pub base: String,
}

/// The text of `sp`'s kernel in syntax `syn`.
pub fn text(sp: &NormSpec, syn: &impl Syntax) -> Text {
    let n = |v: usize| syn.lit().n(v);
    let load = |e: &str| syn.load_f32(e);
    match &sp.kind {
        NormKind::Batch { c, s, eps } => {
            let y = syn.store(
                sp.dtype,
                &format!(
                    "({} - {}) * k + {}",
                    load("x[i]"),
                    load("input_mean[c]"),
                    load("bias[c]")
                ),
            );
            Text::Elements(format!(
                "        {} = (i / {}) % {};\n        {} = {} / {}({} + {});\n        y[i] = {y};\n",
                syn.let_index("c"),
                n(*s),
                n(*c),
                syn.let_float("k"),
                load("scale[c]"),
                syn.sqrt(),
                load("input_var[c]"),
                syn.f32(*eps)
            ))
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
            let y = syn.store(
                sp.dtype,
                &format!(
                    "{} / {}({} + {} * sq, {})",
                    load("x[i]"),
                    syn.pow(),
                    syn.f32(*bias),
                    syn.f32(*scale),
                    syn.f32(*beta)
                ),
            );
            let top = format!("c + {}", n(after + 1));
            Text::Elements(format!(
                "        {} = (i / {}) % {};\n        \
                 {} = i - c * {};\n        \
                 {} = {};\n        \
                 {} = {};\n        \
                 {};\n        \
                 {}\n            \
                 {} = {};\n            \
                 sq = sq + w * w;\n        \
                 }}\n        \
                 y[i] = {y};\n",
                syn.let_index("c"),
                n(*s),
                n(*c),
                syn.let_index("base"),
                n(*s),
                syn.let_index("lo"),
                syn.ternary(
                    &format!("c < {}", n(*before)),
                    &n(0),
                    &format!("c - {}", n(*before))
                ),
                syn.let_index("hi"),
                syn.min_index(&top, &n(*c)),
                syn.var_float("sq", &syn.fl("0.0")),
                syn.index_from("j", "lo", "j < hi"),
                syn.let_float("w"),
                load(&format!("x[base + j * {}]", n(*s))),
            ))
        }
        NormKind::Stats(st) => Text::Stats(Box::new(stats(sp, st, syn))),
    }
}

/// The parts of the statistics kernel of `st`.
fn stats(sp: &NormSpec, st: &Stats, syn: &impl Syntax) -> StatsText {
    let n = |v: usize| syn.lit().n(v);
    let load = |e: &str| syn.load_f32(e);
    let pad = "            ";
    let deviations = format!(
        "{pad}{} = v - mean;\n{pad}s2 = s2 + d * d;\n",
        syn.let_float("d")
    );
    let base = decode(syn, &st.runs, false, "grp", "base", "        ");
    match &st.formula {
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
                    format!("ch / {}", n(*per_group))
                } else {
                    "ch".to_string()
                }
            };
            let y = syn.store(
                sp.dtype,
                &format!(
                    "(v - mean) * inv * {} + {}",
                    load(&format!("scale[{}]", at(*scale_per_group))),
                    load(&format!("bias[{}]", at(*bias_per_group)))
                ),
            );
            StatsText {
                second: "squared deviations",
                accumulate: deviations,
                prepare: format!(
                    "        {} = {} / {}(second + {});\n",
                    syn.let_float("inv"),
                    syn.fl("1.0"),
                    syn.sqrt(),
                    syn.f32(*eps)
                ),
                normalize: format!(
                    "{pad}{} = (grp % {}) * {} + j / {};\n{pad}y[base + at(j)] = {y};\n",
                    syn.let_index("ch"),
                    n(*groups),
                    n(*per_group),
                    n(*s)
                ),
                finish: String::new(),
                base,
                stats: st.clone(),
            }
        }
        Formula::Train {
            eps,
            momentum,
            running: [rm, rv],
        } => {
            let m = syn.f32(*momentum);
            let one = syn.fl("1.0");
            let running = |o: &Operand, input: &str, batch: &str| {
                format!(
                    "            {}[grp] = {};\n",
                    o.name,
                    syn.store(
                        o.dtype,
                        &format!(
                            "{} * {m} + {batch} * ({one} - {m})",
                            load(&format!("{input}[grp]"))
                        )
                    )
                )
            };
            StatsText {
                second: "squared deviations",
                accumulate: deviations,
                prepare: format!(
                    "        {} = {} / {}(second + {});\n",
                    syn.let_float("k"),
                    load("scale[grp]"),
                    syn.sqrt(),
                    syn.f32(*eps)
                ),
                normalize: format!(
                    "{pad}y[base + at(j)] = {};\n",
                    syn.store(sp.dtype, &format!("(v - mean) * k + {}", load("bias[grp]")))
                ),
                finish: format!(
                    "        if ({}) {{\n{}{}        }}\n",
                    syn.first_thread(),
                    running(rm, "input_mean", "mean"),
                    running(rv, "input_var", "second")
                ),
                base,
                stats: st.clone(),
            }
        }
        Formula::Mvn => StatsText {
            second: "squares",
            accumulate: format!("{pad}s2 = s2 + v * v;\n"),
            prepare: format!(
                "        {} = {}(second - mean * mean) + {};\n",
                syn.let_float("den"),
                syn.sqrt(),
                syn.fl("1e-9")
            ),
            normalize: format!(
                "{pad}y[base + at(j)] = {};\n",
                syn.store(sp.dtype, "(v - mean) / den")
            ),
            finish: String::new(),
            base,
            stats: st.clone(),
        },
    }
}

/// The body of `at(j)`, indented `pad`: element `j` of a group's offset from the
/// group's first element.
pub fn offset(syn: &impl Syntax, st: &Stats, pad: &str) -> String {
    decode(syn, &st.runs, true, "j", "off", pad) + &format!("{pad}return off;\n")
}

/// Statements (indented `pad`) that decode `var` over the runs of `runs` whose reduced
/// flag is `red` into the immutable index `out` (an offset in the data).
fn decode(
    syn: &impl Syntax,
    runs: &[(usize, bool)],
    red: bool,
    var: &str,
    out: &str,
    pad: &str,
) -> String {
    let n = |v: usize| syn.lit().n(v);
    let sizes: Vec<usize> = runs.iter().map(|r| r.0).collect();
    let st = strides(&sizes);
    let mut code = format!(
        "{pad}{};\n{pad}{};\n",
        syn.var_index("r_", var),
        syn.var_index("o_", syn.index_zero())
    );
    for (k, &(s, r)) in runs.iter().enumerate().rev() {
        if r == red {
            code += &format!(
                "{pad}o_ = o_ + (r_ % {}) * {};\n{pad}r_ = r_ / {};\n",
                n(s),
                n(st[k]),
                n(s)
            );
        }
    }
    let used = syn.unused("r_");
    if !used.is_empty() {
        code += &format!("{pad}{used}\n");
    }
    code + &format!("{pad}{} = o_;\n", syn.let_index(out))
}
