//! ScatterElements, Scatter, ScatterND and TensorScatter in CUDA
//! ([`crate::lower::scatter`]): one thread per output element copies its data element
//! and applies, in order, the updates that land on it, so duplicates resolve as on the
//! CPU without atomics. Indices are wrapped and checked on the device
//! ([`crate::plan::IndexCheck`]: one out of range raises the node's code in the run's
//! error word and reads as 0). Every body mirrors the WGSL writer's line by line.

use super::elementwise::storage;
use super::support::{one_output, store};
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::scatter::{CacheSpec, Operands, Reduction, Scatter, ScatterSpec};
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::twin::scatter::{self as twin, Body};
use crate::Result;
use gopt_ir::{DType, ValueId};

const TEMPLATE: &str = include_str!("scatter.cu");
const IN_PLACE: &str = include_str!("scatter_in_place.cu");

/// One kernel's parts before the template is filled.
struct Parts {
    how: &'static str,
    /// The inputs after the data (`data` is always first), as (value, parameter).
    inputs: Vec<(ValueId, String)>,
    data: ValueId,
    out: ValueId,
    dtype: DType,
    body: String,
    n: usize,
    check: Option<IndexCheck>,
}

/// Emits the kernel of scatter spec `sp`.
pub fn emit(sp: &Scatter, name: &str) -> Result<Kernel> {
    let parts = match &sp.form {
        ScatterSpec::Elements(s) => indexed(
            sp,
            &s.ops,
            "the positions along the indices' axis in the element's row",
            &|sx, read, t, c| twin::elements(sx, s, read, t, c),
        ),
        ScatterSpec::Nd(s) => indexed(
            sp,
            &s.ops,
            "every index row in order, compared with the element's slice",
            &|sx, read, t, c| twin::nd(sx, s, read, t, c),
        ),
        ScatterSpec::Cache(s) if sp.in_place => return cache_in_place(sp, name, s),
        ScatterSpec::Cache(s) => cache(sp, s),
    };
    let t = storage(parts.dtype);
    let mut params = vec![format!("const {t}* __restrict__ data")];
    params.extend(parts.inputs.iter().map(|(_, p)| p.clone()));
    params.push(format!("{t}* __restrict__ out"));
    if parts.check.is_some() {
        params.push("unsigned int* __restrict__ gopt_err".into());
    }
    let source = fill(
        TEMPLATE,
        &[
            ("what", sp.site.op),
            ("how", parts.how),
            ("name", name),
            ("params", &params.join(", ")),
            ("n", &parts.n.to_string()),
            ("t", t),
            ("body", &parts.body),
        ],
    )?;
    let mut inputs = vec![parts.data.0];
    inputs.extend(parts.inputs.iter().map(|(v, _)| v.0));
    Ok(Kernel {
        index_check: parts.check,
        ..one_output(&sp.site, name, source, parts.n, inputs, parts.out)
    })
}

/// `v` combined with the update `u` (both storage elements of `dt`) by `red`, as a
/// storage element: floats in f32 (f64 for f64) rounded back, integers wrapped, bool
/// add and mul as or and and; max and min keep `v` unless `u` compares greater (less).
fn combine(dt: DType, red: Reduction) -> String {
    let t = storage(dt);
    let arith = |op: &str| -> String {
        match dt {
            DType::F32 | DType::F16 | DType::BF16 => {
                store(dt, &format!("gopt_ld(v) {op} gopt_ld(u)"))
            }
            DType::F64 => format!("v {op} u"),
            DType::Bool if op == "+" => "(unsigned char)(v | u)".into(),
            DType::Bool => "(unsigned char)(v & u)".into(),
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => format!(
                "({t})((unsigned long long)(long long)v {op} (unsigned long long)(long long)u)"
            ),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                format!("({t})((unsigned long long)v {op} (unsigned long long)u)")
            }
        }
    };
    let float = matches!(dt, DType::F32 | DType::F16 | DType::BF16);
    let pick = |cmp: &str| {
        if float {
            format!("(gopt_ld(u) {cmp} gopt_ld(v) ? u : v)")
        } else {
            format!("(u {cmp} v ? u : v)")
        }
    };
    match red {
        Reduction::None => "u".into(),
        Reduction::Add => arith("+"),
        Reduction::Mul => arith("*"),
        Reduction::Max => pick(">"),
        Reduction::Min => pick("<"),
    }
}

/// The check every index read makes: wrapped, then out of range raises `code` and
/// reads as 0.
fn read_index(elem: &str, len: usize, code: u32, k: &str) -> String {
    format!(
        "            long long {k} = (long long){elem};\n            \
         if ({k} < 0) {k} += {len}LL;\n            \
         if ({k} < 0 || {k} >= {len}LL) {{ atomicMax(gopt_err, {code}u); {k} = 0; }}\n"
    )
}

/// ScatterElements or ScatterND over `ops`: the body [`twin`] writes (`body`, given the
/// index read, the update's storage type and the combination).
fn indexed(sp: &Scatter, ops: &Operands, how: &'static str, body: Body) -> Parts {
    let code = sp.check.code;
    let t = storage(ops.dtype);
    let read = |elem: &str, len: usize, k: &str| read_index(elem, len, code, k);
    let combine = combine(ops.dtype, ops.reduction);
    Parts {
        how,
        inputs: vec![
            (
                ops.indices,
                format!("const {}* __restrict__ idx", storage(ops.index_dtype)),
            ),
            (ops.updates, format!("const {t}* __restrict__ upd")),
        ],
        data: ops.data,
        out: ops.out,
        dtype: ops.dtype,
        body: body(&Cuda { name: "" }, &read, t, &combine),
        n: ops.n,
        check: Some(sp.check.clone()),
    }
}

/// TensorScatter in place ([`in_place`]): one thread per update element, written at
/// its row's write index (checked like the copying kernel's: linear windows must fit,
/// circular ones wrap); the output parameter is the cache's own memory.
fn cache_in_place(sp: &Scatter, name: &str, s: &CacheSpec) -> Result<Kernel> {
    let t = storage(s.dtype);
    let (inner, m, seq) = (s.inner, s.max_seq, s.seq);
    let mut params = vec![
        format!("const {t}* __restrict__ data"),
        format!("const {t}* __restrict__ upd"),
    ];
    let mut inputs = vec![s.past.0, s.update.0];
    let mut position = String::new();
    if let Some(w) = s.writes {
        params.push(format!(
            "const {}* __restrict__ wi",
            storage(s.writes_dtype)
        ));
        inputs.push(w.0);
        position += &format!(
            "        const long long ww = (long long)wi[p / {}LL];\n",
            s.per_batch.max(1)
        );
    } else {
        position += "        const long long ww = 0;\n";
    }
    params.push(format!("{t}* __restrict__ out"));
    let mut check = None;
    if s.circular {
        position +=
            &format!("        const long long s = (((ww % {m}LL) + {m}LL) % {m}LL + q) % {m}LL;\n");
    } else {
        let code = sp.check.code;
        position += &format!(
            "        if (ww < 0 || ww > {last}LL) {{ atomicMax(gopt_err, {code}u); continue; }}\n        \
             const long long s = ww + q;\n",
            last = m - seq
        );
        params.push("unsigned int* __restrict__ gopt_err".into());
        check = Some(sp.check.clone());
    }
    let n = s.n / m * seq;
    let source = fill(
        IN_PLACE,
        &[
            (
                "how",
                if s.circular {
                    "positions wrap around the cache"
                } else {
                    "a window past the cache raises the run's error word and is not written"
                },
            ),
            ("name", name),
            ("params", &params.join(", ")),
            ("n", &n.to_string()),
            ("inner", &inner.to_string()),
            ("seq", &seq.to_string()),
            ("row", &(seq * inner).to_string()),
            ("max_seq", &m.to_string()),
            ("position", &position),
        ],
    )?;
    Ok(Kernel {
        index_check: check,
        ..Kernel::flat(name, &sp.site.node, source, n.max(1), inputs, vec![s.out.0])
    })
}

/// TensorScatter: the position's offset from its batch entry's write index picks the
/// update row's entry (linear: the window is checked to fit the cache; circular: the
/// offset wraps, the write index taken modulo the cache's length first).
fn cache(sp: &Scatter, s: &CacheSpec) -> Parts {
    let t = storage(s.dtype);
    let (inner, m, seq) = (s.inner, s.max_seq, s.seq);
    let mut inputs = vec![(s.update, format!("const {t}* __restrict__ upd"))];
    let mut body = format!(
        "        const long long in_ = i % {inner}LL;\n        \
         const long long s = (i / {inner}LL) % {m}LL;\n        \
         const long long p = i / {row}LL;\n",
        row = inner * m,
    );
    if let Some(w) = s.writes {
        inputs.push((
            w,
            format!("const {}* __restrict__ wi", storage(s.writes_dtype)),
        ));
        body += &format!(
            "        const long long ww = (long long)wi[p / {}LL];\n",
            s.per_batch.max(1)
        );
    }
    let mut check = None;
    match (s.circular, s.writes.is_some()) {
        (true, true) => {
            body += &format!("        const long long wm = ((ww % {m}LL) + {m}LL) % {m}LL;\n");
        }
        (true, false) | (false, false) => body += "        const long long wm = 0;\n",
        (false, true) => {
            let code = sp.check.code;
            body += &format!(
                "        long long wm = 0;\n        \
                 if (ww < 0 || ww > {last}LL) {{ atomicMax(gopt_err, {code}u); }} else {{ wm = ww; }}\n",
                last = m - seq
            );
            check = Some(sp.check.clone());
        }
    }
    body += &if s.circular {
        format!("        const long long q = (s + {m}LL - wm) % {m}LL;\n")
    } else {
        "        const long long q = s - wm;\n".to_string()
    };
    body += &format!(
        "        if (q >= 0 && q < {seq}LL) v = upd[(p * {seq}LL + q) * {inner}LL + in_];\n"
    );
    Parts {
        how: if s.circular {
            "the position's offset from the write index, wrapped around the cache"
        } else {
            "the position's offset from the checked write index"
        },
        inputs,
        data: s.past,
        out: s.out,
        dtype: s.dtype,
        body,
        n: s.n,
        check,
    }
}
