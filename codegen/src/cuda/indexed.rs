//! The indexing ops in CUDA ([`crate::lower::indexed`]): GatherND, Tile, DepthToSpace,
//! SpaceToDepth, CenterCropPad, ReverseSequence, OneHot, EyeLike, Range and
//! ConstantOfShape, each one thread per output element (one template, `indexed.cu`,
//! with the body spelled here). Data is copied as stored; indices and sequence lengths
//! read on the device are checked there ([`crate::plan::IndexCheck`]: one out of range
//! raises the node's code in the run's error word and reads element 0). Every body
//! mirrors the WGSL writer's line by line, so the two backends compute alike.

use super::elementwise::storage;
use super::support::{flit, one_output, store};
use super::Kernel;
use crate::lower::indexed::{
    AxisRead, EyeSpec, FillSpec, GatherNdSpec, Indexed, IndexedSpec, MapSpec, OneHotSpec,
    RangeSpec, ReverseSpec, Scalar,
};
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, Tensor, ValueId};

const TEMPLATE: &str = include_str!("indexed.cu");

/// A diagonal this far out keeps or drops the same elements as any farther one (and its
/// literal, unlike `i64::MIN`'s, is valid C).
const FAR: i64 = 1 << 62;

/// One kernel's parts before the template is filled.
struct Parts {
    what: String,
    how: &'static str,
    params: Vec<String>,
    inputs: Vec<ValueId>,
    out: ValueId,
    pre: String,
    body: String,
    n: usize,
    check: Option<IndexCheck>,
}

impl Parts {
    /// A kernel of `n` threads reading `reads` (parameter name, dtype, value) as stored,
    /// with no preamble and no index check.
    fn reading(
        what: String,
        how: &'static str,
        reads: &[(&str, DType, ValueId)],
        out: ValueId,
        body: String,
        n: usize,
    ) -> Parts {
        Parts {
            what,
            how,
            params: reads
                .iter()
                .map(|(name, dt, _)| format!("const {}* __restrict__ {name}", storage(*dt)))
                .collect(),
            inputs: reads.iter().map(|r| r.2).collect(),
            out,
            pre: String::new(),
            body,
            n,
            check: None,
        }
    }

    /// These parts raising spec `sp`'s code for a read out of range (`what`).
    fn checked(self, sp: &Indexed, what: String) -> Parts {
        Parts {
            check: Some(IndexCheck {
                code: sp.code,
                op: sp.site.op.into(),
                what,
            }),
            ..self
        }
    }
}

/// Emits the kernel of indexing spec `sp`.
pub fn emit(sp: &Indexed, name: &str) -> Result<Kernel> {
    let parts = match &sp.form {
        IndexedSpec::Map(m) => map(sp, m),
        IndexedSpec::GatherNd(s) => gather_nd(sp, s)?,
        IndexedSpec::Reverse(s) => reverse(sp, s)?,
        IndexedSpec::OneHot(s) => one_hot(sp, s)?,
        IndexedSpec::Eye(s) => eye(s),
        IndexedSpec::Range(s) => range(sp, s)?,
        IndexedSpec::Fill(s) => constant(s),
    };
    let mut params = parts.params;
    params.push(format!("{}* __restrict__ out", storage(sp.out_dtype)));
    if parts.check.is_some() {
        params.push("unsigned int* __restrict__ gopt_err".into());
    }
    let source = fill(
        TEMPLATE,
        &[
            ("what", &parts.what),
            ("how", parts.how),
            ("name", name),
            ("params", &params.join(", ")),
            ("pre", &parts.pre),
            ("n", &parts.n.to_string()),
            ("body", &parts.body),
        ],
    )?;
    let inputs = parts.inputs.iter().map(|v| v.0).collect();
    Ok(Kernel {
        index_check: parts.check,
        ..one_output(&sp.site, name, source, parts.n, inputs, parts.out)
    })
}

/// Tile, DepthToSpace, SpaceToDepth, CenterCropPad: the output coordinates, last axis
/// first, each adding its input coordinate times the input's stride; a shifted axis
/// outside the input makes the element zero.
fn map(sp: &Indexed, m: &MapSpec) -> Parts {
    let mut body = String::from("        long long r = i;\n        long long at = 0;\n");
    if m.pads() {
        body += "        bool inside = true;\n";
    }
    for (a, &(d, read)) in m.axes.iter().enumerate().rev() {
        match read {
            AxisRead::Direct { stride } if d > 1 => {
                body += &format!(
                    "        const long long c{a} = r % {d}LL; r /= {d}LL; at += c{a} * {stride}LL;\n"
                )
            }
            AxisRead::Wrap { len, stride } if d > 1 => {
                body += &format!(
                    "        const long long c{a} = r % {d}LL; r /= {d}LL; at += (c{a} % {len}LL) * {stride}LL;\n"
                )
            }
            AxisRead::Direct { .. } | AxisRead::Wrap { .. } => {}
            AxisRead::Shift { shift, len, stride } => {
                body += &format!(
                    "        const long long c{a} = r % {d}LL - ({shift}LL); r /= {d}LL;\n        \
                     if (c{a} < 0 || c{a} >= {len}LL) inside = false;\n        at += c{a} * {stride}LL;\n"
                )
            }
        }
    }
    body += "        (void)r;\n";
    body += &if m.pads() {
        format!(
            "        out[i] = inside ? x[at] : {};\n",
            store(m.dtype, "0")
        )
    } else {
        "        out[i] = x[at];\n".to_string()
    };
    Parts::reading(
        sp.site.op.to_string(),
        "the output coordinates mapped back to the input's element",
        &[("x", m.dtype, m.x)],
        m.out,
        body,
        m.n,
    )
}

/// GatherND: each coordinate of the row read, wrapped, checked, and added times its
/// axis' stride to the batch entry's and the chunk element's offset.
fn gather_nd(sp: &Indexed, s: &GatherNdSpec) -> Result<Parts> {
    let code = sp.code;
    let mut body = format!(
        "        const long long r = i / {chunk}LL;\n        \
         long long at = (r / {rpb}LL) * {bs}LL + i % {chunk}LL;\n",
        chunk = s.chunk,
        rpb = s.rows_per_batch.max(1),
        bs = s.batch_stride,
    );
    for (t, &(len, stride)) in s.coords.iter().enumerate() {
        body += &format!(
            "        long long k{t} = (long long)idx[r * {depth}LL + {t}LL];\n        \
             if (k{t} < 0) k{t} += {len}LL;\n        \
             if (k{t} < 0 || k{t} >= {len}LL) {{ atomicMax(gopt_err, {code}u); k{t} = 0; }}\n        \
             at += k{t} * {stride}LL;\n",
            depth = s.depth
        );
    }
    body += "        out[i] = data[at];\n";
    let reads = [("data", s.dtype, s.data), ("idx", s.index_dtype, s.indices)];
    let how = "each index row's coordinates checked and added to the slice's offset";
    Ok(
        Parts::reading("GatherND".into(), how, &reads, s.out, body, s.n)
            .checked(sp, s.out_of_range()),
    )
}

/// ReverseSequence: the batch entry's length read and checked, the time coordinate
/// mirrored below it.
fn reverse(sp: &Indexed, s: &ReverseSpec) -> Result<Parts> {
    let code = sp.code;
    let ((blen, bst), (tlen, tst)) = (s.batch, s.time);
    let body = format!(
        "        const long long b = (i / {bst}LL) % {blen}LL;\n        \
         const long long t = (i / {tst}LL) % {tlen}LL;\n        \
         long long len = (long long)lens[b];\n        \
         if (len < 0 || len > {tlen}LL) {{ atomicMax(gopt_err, {code}u); len = 0; }}\n        \
         long long at = i;\n        \
         if (t < len) at = i - t * {tst}LL + (len - 1 - t) * {tst}LL;\n        \
         out[i] = x[at];\n"
    );
    let reads = [("x", s.dtype, s.x), ("lens", s.lens_dtype, s.lens)];
    let how = "the time coordinate mirrored below the batch entry's checked length";
    Ok(
        Parts::reading("ReverseSequence".into(), how, &reads, s.out, body, s.n)
            .checked(sp, s.out_of_range()),
    )
}

/// The floats whose integers are exact up to this (f16 stops at 2048, but an f16
/// index that large is never in range of a depth below it either).
const EXACT_F32: usize = 1 << 24;

/// OneHot: `hit` where the index (a negative one plus the depth) equals `j`; floats
/// compare against `j - depth` for negatives, exact in f32 below 2^24.
fn one_hot(sp: &Indexed, s: &OneHotSpec) -> Result<Parts> {
    let depth = s.depth;
    let hit = match s.index_dtype {
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => format!(
            "        long long k = (long long)v;\n        if (k < 0) k += {depth}LL;\n        \
             const bool hit = k == j;\n"
        ),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
            "        const bool hit = (unsigned long long)v == (unsigned long long)j;\n".into()
        }
        DType::F32 | DType::F16 | DType::BF16 => {
            if depth >= EXACT_F32 {
                return Err(sp
                    .site
                    .unsupported("float indices with a depth of 2^24 or more"));
            }
            format!(
                "        const float f = gopt_ld(v);\n        \
                 const bool hit = f < 0.0f ? f == (float)j - {depth}.0f : f == (float)j;\n"
            )
        }
        DType::F64 => format!(
            "        const double f = v;\n        \
             const bool hit = f < 0.0 ? f == (double)j - {depth}.0 : f == (double)j;\n"
        ),
        DType::Bool => return Err(sp.site.unsupported("bool indices")),
    };
    let body = format!(
        "        const long long inner = i % {inner}LL;\n        \
         const long long j = (i / {inner}LL) % {depth}LL;\n        \
         const long long outer = i / {block}LL;\n        \
         const {it} v = idx[outer * {inner}LL + inner];\n{hit}        \
         out[i] = hit ? values[1] : values[0];\n",
        inner = s.inner,
        block = s.inner * depth,
        it = storage(s.index_dtype),
    );
    let reads = [
        ("idx", s.index_dtype, s.indices),
        ("values", s.dtype, s.values),
    ];
    let how = "on where the index (negative ones plus depth) is the coordinate along the new axis";
    Ok(Parts::reading(
        "OneHot".into(),
        how,
        &reads,
        s.out,
        body,
        s.n,
    ))
}

/// EyeLike: one where column minus row is `k`.
fn eye(s: &EyeSpec) -> Parts {
    let body = format!(
        "        const long long c = i % {cols}LL;\n        \
         const long long r = i / {cols}LL;\n        \
         out[i] = (c - r == {k}LL) ? {one} : {zero};\n",
        cols = s.cols,
        k = s.k.clamp(-FAR, FAR),
        one = store(s.dtype, "1"),
        zero = store(s.dtype, "0"),
    );
    let what = format!("EyeLike ({} x {})", s.rows, s.cols);
    let how = "one on the k-th diagonal, zero elsewhere";
    Parts::reading(what, how, &[], s.out, body, s.rows * s.cols)
}

/// A literal of one-element `t` in the compute type of its dtype (float, double or
/// long long).
fn compute_literal(t: &Tensor) -> String {
    match t.dtype() {
        DType::F32 | DType::F16 | DType::BF16 => {
            flit(t.to_f64_vec().first().copied().unwrap_or(0.0) as f32)
        }
        DType::F64 => format!("{:e}", t.to_f64_vec().first().copied().unwrap_or(0.0)),
        DType::Bool
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => match t.to_i64_vec().first().copied().unwrap_or(0) {
            i64::MIN => "(-9223372036854775807LL - 1)".into(),
            v => format!("{v}LL"),
        },
    }
}

/// Range: `start + i × delta`, floats with the interpreter's roundings (f32 fused, f16
/// and bf16 a product then a sum in f32, f64 unfused), integers wrapped.
fn range(sp: &Indexed, s: &RangeSpec) -> Result<Parts> {
    let dt = s.dtype;
    let ct = match dt {
        DType::F32 | DType::F16 | DType::BF16 => "float",
        DType::F64 => "double",
        DType::I16 | DType::I32 | DType::I64 => "long long",
        other => return Err(sp.site.unsupported(&format!("{other} values"))),
    };
    let t = storage(dt);
    let mut params = Vec::new();
    let mut inputs = Vec::new();
    let mut pre = String::new();
    for (name, sc) in [("s", &s.start), ("d", &s.delta)] {
        let v = match sc {
            Scalar::Const(c) => compute_literal(c),
            Scalar::Input(v) => {
                params.push(format!("const {t}* __restrict__ {name}in"));
                inputs.push(*v);
                format!("({ct})gopt_ld({name}in[0])")
            }
        };
        pre += &format!("    const {ct} {name} = {v};\n");
    }
    let value = match dt {
        DType::F32 => "fmaf((float)i, d, s)".to_string(),
        DType::F16 | DType::BF16 if s.stash_f32 => {
            store(dt, "__fadd_rn(s, __fmul_rn((float)i, d))")
        }
        DType::F16 | DType::BF16 => store(dt, "fmaf((float)i, d, s)"),
        DType::F64 => "__dadd_rn(s, __dmul_rn((double)i, d))".to_string(),
        DType::Bool
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => {
            format!("({t})((unsigned long long)s + (unsigned long long)i * (unsigned long long)d)")
        }
    };
    Ok(Parts {
        what: "Range".into(),
        how: "start + i * delta",
        params,
        inputs,
        out: s.out,
        pre,
        body: format!("        out[i] = {value};\n"),
        n: s.n,
        check: None,
    })
}

/// ConstantOfShape: the value's literal in every element.
fn constant(s: &FillSpec) -> Parts {
    let v = &s.value;
    let lit = match s.dtype {
        DType::F16 | DType::BF16 | DType::F32 => store(s.dtype, &compute_literal(v)),
        DType::F64 => compute_literal(v),
        other => format!("({})({})", storage(other), compute_literal(v)),
    };
    let body = format!("        out[i] = {lit};\n");
    Parts::reading(
        "ConstantOfShape".into(),
        "every element the value",
        &[],
        s.out,
        body,
        s.n,
    )
}
