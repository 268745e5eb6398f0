//! ScatterElements, Scatter, ScatterND and TensorScatter in WGSL
//! ([`crate::lower::scatter`]): one invocation per output element copies its data
//! element and applies, in order, the updates that land on it, so duplicates resolve
//! as on the CPU without atomics. Data of any dtype WGSL storage holds; reductions
//! compute floats in f32 (rounded back to f16 each time), integers wrapped (i64/u64 with
//! the `helpers.wgsl` word arithmetic). Indices are wrapped and checked on the device
//! ([`super::bounds`]: one out of range fails the run). Every body mirrors the CUDA
//! writer's line by line.

use super::bounds;
use super::syntax::Wgsl;
use super::types::{self, Kind};
use super::WgslKernel;
use crate::lower::scatter::{CacheSpec, Operands, Reduction, Scatter, ScatterSpec};
use crate::lower::support::Site;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::twin::scatter::{self as twin, Body};
use crate::Result;
use gopt_ir::{DType, ValueId};

const TEMPLATE: &str = include_str!("scatter.wgsl");

/// The exact 64-bit Euclidean remainder a circular TensorScatter wraps i64 write
/// indices with.
const REM64: &str = include_str!("scatter_rem.wgsl");

/// Sizes whose offsets stay below 2^31 (and sums of two below 2^32).
const LIM: usize = 1 << 31;

/// One shader's parts before the template is filled.
struct Parts {
    how: &'static str,
    /// The inputs after the data (bound first as `data`), as (value, name, element).
    inputs: Vec<(ValueId, &'static str, &'static str)>,
    data: ValueId,
    out: ValueId,
    dtype: DType,
    body: String,
    /// Functions the body calls besides `helpers.wgsl`'s.
    functions: &'static str,
    n: usize,
    check: Option<IndexCheck>,
}

/// Emits the shader of scatter spec `sp`.
pub fn emit(sp: &Scatter, name: &str) -> Result<WgslKernel> {
    let parts = match &sp.form {
        ScatterSpec::Elements(s) => indexed(
            sp,
            &s.ops,
            (
                s.axis_len(),
                (s.updates_len >= LIM).then_some("2^31 indices or more"),
            ),
            "the positions along the indices' axis in the element's row",
            &|sx, read, t, c| twin::elements(sx, s, read, t, c),
        )?,
        ScatterSpec::Nd(s) => {
            let big = s.rows.saturating_mul(s.depth.max(1)) >= LIM
                || s.rows.saturating_mul(s.chunk) >= LIM;
            indexed(
                sp,
                &s.ops,
                (
                    s.max_len(),
                    big.then_some("2^31 indices or updates or more"),
                ),
                "every index row in order, compared with the element's slice",
                &|sx, read, t, c| twin::nd(sx, s, read, t, c),
            )?
        }
        ScatterSpec::Cache(s) => cache(sp, s)?,
    };
    let t = element(&sp.site, parts.dtype, "data")?;
    if parts.n >= LIM {
        return Err(sp.site.unsupported("2^31 elements or more"));
    }
    let mut bindings = vec![format!("var<storage, read> data: array<{t}>;")];
    bindings.extend(
        parts
            .inputs
            .iter()
            .map(|(_, name, et)| format!("var<storage, read> {name}: array<{et}>;")),
    );
    bindings.push(format!("var<storage, read_write> out: array<{t}>;"));
    let mut bindings: Vec<String> = bindings
        .into_iter()
        .enumerate()
        .map(|(k, b)| format!("@group(0) @binding({k}) {b}"))
        .collect();
    if parts.check.is_some() {
        bindings.push(bounds::error_binding(bindings.len()));
    }
    let helpers = format!(
        "{}{}",
        parts.functions,
        types::helpers_for(&format!("{}{}", parts.body, parts.functions))
    );
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(parts.dtype == DType::F16)),
            ("what", sp.site.op),
            ("how", parts.how),
            ("bindings", &bindings.join("\n")),
            ("helpers", &helpers),
            ("n", &parts.n.to_string()),
            ("t", t),
            ("body", &parts.body),
        ],
    )?;
    let mut inputs = vec![parts.data.0];
    inputs.extend(parts.inputs.iter().map(|(v, _, _)| v.0));
    Ok(WgslKernel {
        name: name.to_string(),
        node: sp.site.node.clone(),
        source,
        workgroups: [
            (parts.n as u32).div_ceil(super::WORKGROUP).clamp(1, 65535),
            1,
            1,
        ],
        inputs,
        outputs: vec![parts.out.0],
        index_check: parts.check,
        loop_iterations: None,
    })
}

/// The node's index check, for indices checked against an axis of `len` (one too long
/// for an i32 index is refused: no WGSL binding holds one).
fn checked(sp: &Scatter, len: usize) -> Result<IndexCheck> {
    if i32::try_from(len).is_err() {
        return Err(sp.site.unsupported("an axis of 2^31 elements or more"));
    }
    Ok(sp.check.clone())
}

/// The storage element of `dt`, or the refusal.
fn element(site: &Site, dt: DType, what: &str) -> Result<&'static str> {
    super::storage_type(dt)
        .map(|(t, _)| t)
        .ok_or_else(|| site.unsupported(&format!("{dt} {what}")))
}

/// `v` combined with the update `u` (both storage elements of `dt`) by `red`, as a
/// storage element: floats in f32 rounded back, integers wrapped to their width, bool
/// add and mul as or and and; max and min keep `v` unless `u` compares greater (less).
fn combine(site: &Site, dt: DType, red: Reduction) -> Result<String> {
    let kind = types::kind(dt).ok_or_else(|| site.unsupported(&format!("{dt} data")))?;
    let arith = |op: &str| match kind {
        Kind::Float => types::store(
            dt,
            &format!("{} {op} {}", types::load(dt, "v"), types::load(dt, "u")),
        ),
        Kind::Bool if op == "+" => "(v | u)".into(),
        Kind::Bool => "(v & u)".into(),
        Kind::Int | Kind::Uint => types::wrap(dt, &format!("(v {op} u)")),
        Kind::Wide if op == "+" => "gopt_add64(v, u)".into(),
        Kind::Wide => "gopt_mul64(v, u)".into(),
    };
    let pick = |greater: bool| {
        let (a, b) = if greater { ("v", "u") } else { ("u", "v") };
        match (kind, dt) {
            (Kind::Wide, DType::I64) => format!("select(v, u, gopt_lt_i64({a}, {b}))"),
            (Kind::Wide, _) => format!("select(v, u, gopt_lt_u64({a}, {b}))"),
            (Kind::Float | Kind::Bool | Kind::Int | Kind::Uint, _) => {
                format!("select(v, u, {a} < {b})")
            }
        }
    };
    Ok(match red {
        Reduction::None => "u".into(),
        Reduction::Add => arith("+"),
        Reduction::Mul => arith("*"),
        Reduction::Max => pick(true),
        Reduction::Min => pick(false),
    })
}

/// The index element type of `dt`, or the refusal.
fn index_type(site: &Site, dt: DType) -> Result<&'static str> {
    bounds::index_type(dt).ok_or_else(|| site.unsupported(&format!("{dt} indices")))
}

/// ScatterElements or ScatterND over `ops`, its indices checked against an axis of
/// `len` (the refusal first, `too_many`, when its index or update counts pass 2^31):
/// the body [`twin`] writes (`body`, given the index read, the update's storage type
/// and the combination).
fn indexed(
    sp: &Scatter,
    ops: &Operands,
    (len, too_many): (usize, Option<&str>),
    how: &'static str,
    body: Body,
) -> Result<Parts> {
    let it = index_type(&sp.site, ops.index_dtype)?;
    if let Some(what) = too_many {
        return Err(sp.site.unsupported(what));
    }
    let check = checked(sp, len)?;
    let t = element(&sp.site, ops.dtype, "data")?;
    let dt = ops.index_dtype;
    let read = |elem: &str, len: usize, k: &str| bounds::read_index(dt, elem, len, check.code, k);
    let combine = combine(&sp.site, ops.dtype, ops.reduction)?;
    Ok(Parts {
        how,
        inputs: vec![(ops.indices, "idx", it), (ops.updates, "upd", t)],
        data: ops.data,
        out: ops.out,
        dtype: ops.dtype,
        body: body(&Wgsl::PLAIN, &read, t, &combine),
        functions: "",
        n: ops.n,
        check: Some(check),
    })
}

/// TensorScatter: the position's offset from its batch entry's write index picks the
/// update row's entry (linear: the window is checked to fit the cache; circular: the
/// offset wraps, the write index taken modulo the cache's length first, exactly for
/// i64). Offsets that fall below zero wrap in u32 and so miss the window.
fn cache(sp: &Scatter, s: &CacheSpec) -> Result<Parts> {
    let t = element(&sp.site, s.dtype, "data")?;
    let (inner, m, seq) = (s.inner, s.max_seq, s.seq);
    let mut inputs = vec![(s.update, "upd", t)];
    let mut body = format!(
        "        let in_ = i % {inner}u;\n        \
         let s = (i / {inner}u) % {m}u;\n        \
         let p = i / {row}u;\n",
        row = inner * m,
    );
    let wide = s.writes_dtype == DType::I64;
    if let Some(w) = s.writes {
        inputs.push((w, "wi", index_type(&sp.site, s.writes_dtype)?));
        body += &format!("        let ww = wi[p / {}u];\n", s.per_batch.max(1));
    }
    let mut check = None;
    let mut functions = "";
    match (s.circular, s.writes.is_some(), wide) {
        (true, true, true) => {
            functions = REM64;
            body += &format!("        let wm = gopt_rem_euclid64(ww, {m}u);\n");
        }
        (true, true, false) => {
            body += &format!("        let wm = u32(((ww % {m}i) + {m}i) % {m}i);\n");
        }
        (true, false, _) | (false, false, _) => body += "        let wm = 0u;\n",
        (false, true, _) => {
            let c = checked(sp, m)?;
            let last = m - seq;
            let bad = match wide {
                true => format!("ww.y != 0u || ww.x > {last}u"),
                false => format!("ww < 0i || ww > {last}i"),
            };
            let take = if wide { "ww.x" } else { "u32(ww)" };
            body += &format!(
                "        var wm: u32 = 0u;\n        \
                 if ({bad}) {{ atomicMax(&gopt_err, {code}u); }} else {{ wm = {take}; }}\n",
                code = c.code
            );
            check = Some(c);
        }
    }
    body += &if s.circular {
        format!("        let q = (s + {m}u - wm) % {m}u;\n")
    } else {
        "        let q = s - wm;\n".to_string()
    };
    body += &format!("        if (q < {seq}u) {{ v = upd[(p * {seq}u + q) * {inner}u + in_]; }}\n");
    Ok(Parts {
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
        functions,
        n: s.n,
        check,
    })
}
