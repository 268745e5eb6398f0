//! The indexing ops in WGSL ([`crate::lower::indexed`]): GatherND, Tile, DepthToSpace,
//! SpaceToDepth, CenterCropPad, ReverseSequence, OneHot, EyeLike, Range and
//! ConstantOfShape, each one invocation per output element (one template,
//! `indexed.wgsl`, with the body spelled here, line by line as the CUDA writer's).
//! Data of any dtype WGSL storage holds is copied as storage elements; GatherND's
//! indices and ReverseSequence's lengths are checked on the device ([`super::bounds`]:
//! one out of range fails the run). Coordinates are u32 (outputs below 2^32 elements,
//! inputs below 2^31), i64 values `vec2<u32>` words with the `helpers.wgsl` arithmetic.

use super::bounds;
use super::types::{self, Kind};
use super::WgslKernel;
use crate::lower::indexed::{
    AxisRead, EyeSpec, FillSpec, GatherNdSpec, Indexed, IndexedSpec, MapSpec, OneHotSpec,
    RangeSpec, ReverseSpec, Scalar,
};
use crate::lower::support::Site;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, Tensor, ValueId};

const TEMPLATE: &str = include_str!("indexed.wgsl");

/// Sizes whose coordinates and offsets stay in i32 arithmetic.
const LIM: usize = 1 << 30;

/// One shader's parts before the template is filled.
struct Parts {
    what: String,
    how: &'static str,
    /// The inputs, with the WGSL element type each is bound as.
    inputs: Vec<(ValueId, &'static str)>,
    out: ValueId,
    out_type: &'static str,
    pre: String,
    body: String,
    n: usize,
    check: Option<IndexCheck>,
}

/// Emits the shader of indexing spec `sp`.
pub fn emit(sp: &Indexed, name: &str) -> Result<WgslKernel> {
    let parts = match &sp.form {
        IndexedSpec::Map(m) => map(sp, m)?,
        IndexedSpec::GatherNd(s) => gather_nd(sp, s)?,
        IndexedSpec::Reverse(s) => reverse(sp, s)?,
        IndexedSpec::OneHot(s) => one_hot(sp, s)?,
        IndexedSpec::Eye(s) => eye(sp, s)?,
        IndexedSpec::Range(s) => range(sp, s)?,
        IndexedSpec::Fill(s) => constant(sp, s)?,
    };
    let n = u32::try_from(parts.n).map_err(|_| sp.site.unsupported("2^32 elements or more"))?;
    let mut bindings: Vec<String> = parts
        .inputs
        .iter()
        .enumerate()
        .map(|(k, (_, t))| format!("@group(0) @binding({k}) var<storage, read> in{k}: array<{t}>;"))
        .collect();
    bindings.push(format!(
        "@group(0) @binding({}) var<storage, read_write> out: array<{}>;",
        bindings.len(),
        parts.out_type
    ));
    if parts.check.is_some() {
        bindings.push(bounds::error_binding(bindings.len()));
    }
    let f16 = parts.out_type == "f16" || parts.inputs.iter().any(|(_, t)| *t == "f16");
    let code = format!("{}{}", parts.pre, parts.body);
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(f16)),
            ("what", &parts.what),
            ("how", parts.how),
            ("bindings", &bindings.join("\n")),
            ("helpers", &types::helpers_for(&code)),
            ("pre", &parts.pre),
            ("n", &n.to_string()),
            ("body", &parts.body),
        ],
    )?;
    Ok(WgslKernel {
        index_check: parts.check,
        ..WgslKernel::flat(
            name,
            &sp.site.node,
            source,
            n,
            parts.inputs.iter().map(|(v, _)| v.0).collect(),
            vec![parts.out.0],
        )
    })
}

/// The node's index check, for indices checked against an axis of `len` (one too long
/// for an i32 index is refused: no WGSL binding holds one).
fn checked(sp: &Indexed, len: usize, what: String) -> Result<IndexCheck> {
    if i32::try_from(len).is_err() {
        return Err(sp.site.unsupported("an axis of 2^31 elements or more"));
    }
    Ok(IndexCheck {
        code: sp.code,
        op: sp.site.op.into(),
        what,
    })
}

/// The storage element of `dt`, or the refusal.
fn element(site: &Site, dt: DType, what: &str) -> Result<&'static str> {
    super::storage_type(dt)
        .map(|(t, _)| t)
        .ok_or_else(|| site.unsupported(&format!("{dt} {what}")))
}

/// Refuses a size past what i32 coordinates hold.
fn small(site: &Site, v: usize, what: &str) -> Result<()> {
    if v < LIM {
        Ok(())
    } else {
        Err(site.unsupported(&format!("{what} of 2^30 or more")))
    }
}

/// Tile, DepthToSpace, SpaceToDepth, CenterCropPad: the output coordinates, last axis
/// first, each adding its input coordinate times the input's stride; a shifted axis
/// outside the input makes the element zero.
fn map(sp: &Indexed, m: &MapSpec) -> Result<Parts> {
    let t = element(&sp.site, m.dtype, "data")?;
    small(&sp.site, m.x_len, "an input")?;
    let mut body = String::from("        var r: u32 = i;\n        var at: u32 = 0u;\n");
    if m.pads() {
        body += "        var inside = true;\n";
    }
    for (a, &(d, read)) in m.axes.iter().enumerate().rev() {
        match read {
            AxisRead::Direct { stride } if d > 1 => {
                body += &format!(
                    "        let c{a} = r % {d}u; r = r / {d}u; at = at + c{a} * {stride}u;\n"
                )
            }
            AxisRead::Wrap { len, stride } if d > 1 => {
                body += &format!(
                    "        let c{a} = r % {d}u; r = r / {d}u; at = at + (c{a} % {len}u) * {stride}u;\n"
                )
            }
            AxisRead::Direct { .. } | AxisRead::Wrap { .. } => {}
            AxisRead::Shift { shift, len, stride } => {
                small(&sp.site, d, "an axis")?;
                if shift.unsigned_abs() >= LIM as u64 {
                    return Err(sp.site.unsupported("a crop or pad of 2^30 or more"));
                }
                body += &format!(
                    "        let c{a} = i32(r % {d}u) - ({shift}i); r = r / {d}u;\n        \
                     if (c{a} < 0i || c{a} >= {len}i) {{ inside = false; }}\n        \
                     at = at + u32(c{a}) * {stride}u;\n"
                )
            }
        }
    }
    body += &if m.pads() {
        format!("        if (inside) {{ out[i] = in0[at]; }} else {{ out[i] = {t}(); }}\n")
    } else {
        "        out[i] = in0[at];\n".to_string()
    };
    Ok(Parts {
        what: sp.site.op.to_string(),
        how: "the output coordinates mapped back to the input's element",
        inputs: vec![(m.x, t)],
        out: m.out,
        out_type: t,
        pre: String::new(),
        body,
        n: m.n,
        check: None,
    })
}

/// GatherND: each coordinate of the row read, wrapped, checked, and added times its
/// axis' stride to the batch entry's and the chunk element's offset.
fn gather_nd(sp: &Indexed, s: &GatherNdSpec) -> Result<Parts> {
    let t = element(&sp.site, s.dtype, "data")?;
    let it = bounds::index_type(s.index_dtype)
        .ok_or_else(|| sp.site.unsupported(&format!("{} indices", s.index_dtype)))?;
    small(&sp.site, s.data_len, "data")?;
    let check = checked(sp, s.max_len(), s.out_of_range())?;
    let mut body = format!(
        "        let r = i / {chunk}u;\n        var at: u32 = (r / {rpb}u) * {bs}u + i % {chunk}u;\n",
        chunk = s.chunk,
        rpb = s.rows_per_batch.max(1),
        bs = s.batch_stride,
    );
    for (t, &(len, stride)) in s.coords.iter().enumerate() {
        let at = format!("in1[r * {}u + {t}u]", s.depth);
        body += &bounds::read_index(s.index_dtype, &at, len, check.code, &format!("k{t}"));
        body += &format!("        at = at + k{t} * {stride}u;\n");
    }
    body += "        out[i] = in0[at];\n";
    Ok(Parts {
        what: "GatherND".into(),
        how: "each index row's coordinates checked and added to the slice's offset",
        inputs: vec![(s.data, t), (s.indices, it)],
        out: s.out,
        out_type: t,
        pre: String::new(),
        body,
        n: s.n,
        check: Some(check),
    })
}

/// ReverseSequence: the batch entry's length read and checked, the time coordinate
/// mirrored below it.
fn reverse(sp: &Indexed, s: &ReverseSpec) -> Result<Parts> {
    let t = element(&sp.site, s.dtype, "data")?;
    let lt = bounds::index_type(s.lens_dtype)
        .ok_or_else(|| sp.site.unsupported(&format!("{} lengths", s.lens_dtype)))?;
    small(&sp.site, s.n, "an input")?;
    let ((blen, bst), (tlen, tst)) = (s.batch, s.time);
    let check = checked(sp, tlen + 1, s.out_of_range())?;
    let code = check.code;
    let load = if s.lens_dtype == DType::I64 {
        "        let lw = in1[b];\n        var len: i32 = bitcast<i32>(lw.x);\n        \
         if (lw.y != select(0u, 0xffffffffu, len < 0i)) { len = -1i; }\n"
    } else {
        "        var len: i32 = in1[b];\n"
    };
    let body = format!(
        "        let b = (i / {bst}u) % {blen}u;\n        \
         let t = (i / {tst}u) % {tlen}u;\n{load}        \
         if (len < 0i || len > {tlen}i) {{ atomicMax(&gopt_err, {code}u); len = 0i; }}\n        \
         var at: u32 = i;\n        \
         if (i32(t) < len) {{ at = i - t * {tst}u + (u32(len) - 1u - t) * {tst}u; }}\n        \
         out[i] = in0[at];\n"
    );
    Ok(Parts {
        what: "ReverseSequence".into(),
        how: "the time coordinate mirrored below the batch entry's checked length",
        inputs: vec![(s.x, t), (s.lens, lt)],
        out: s.out,
        out_type: t,
        pre: String::new(),
        body,
        n: s.n,
        check: Some(check),
    })
}

/// OneHot: `hit` where the index (a negative one plus the depth) equals `j`; floats
/// compare against `j - depth` for negatives, exact in f32 below 2^24; an i64 index
/// beyond i32 is out of range (no hit).
fn one_hot(sp: &Indexed, s: &OneHotSpec) -> Result<Parts> {
    let t = element(&sp.site, s.dtype, "values")?;
    let it = element(&sp.site, s.index_dtype, "indices")?;
    let depth = s.depth;
    small(&sp.site, s.n, "an output")?;
    let kind = types::kind(s.index_dtype)
        .ok_or_else(|| sp.site.unsupported(&format!("{} indices", s.index_dtype)))?;
    let hit = match kind {
        Kind::Int => format!(
            "        var k: i32 = v;\n        if (k < 0i) {{ k = k + {depth}i; }}\n        \
             let hit = k == i32(j);\n"
        ),
        Kind::Uint => "        let hit = v == j;\n".to_string(),
        Kind::Wide if s.index_dtype == DType::I64 => format!(
            "        var k: i32 = bitcast<i32>(v.x);\n        \
             let fits = v.y == select(0u, 0xffffffffu, k < 0i);\n        \
             if (k < 0i) {{ k = k + {depth}i; }}\n        \
             let hit = fits && k == i32(j);\n"
        ),
        Kind::Wide => "        let hit = v.y == 0u && v.x == j;\n".to_string(),
        Kind::Float if depth >= 1 << 24 => {
            return Err(sp
                .site
                .unsupported("float indices with a depth of 2^24 or more"))
        }
        Kind::Float => format!(
            "        let f = f32(v);\n        \
             let hit = select(f == f32(j), f == f32(j) - {depth}.0, f < 0.0);\n"
        ),
        Kind::Bool => return Err(sp.site.unsupported("bool indices")),
    };
    let body = format!(
        "        let inner = i % {inner}u;\n        \
         let j = (i / {inner}u) % {depth}u;\n        \
         let outer = i / {block}u;\n        \
         let v = in0[outer * {inner}u + inner];\n{hit}        \
         out[i] = select(in1[0], in1[1], hit);\n",
        inner = s.inner,
        block = s.inner * depth,
    );
    Ok(Parts {
        what: "OneHot".into(),
        how: "on where the index (negative ones plus depth) is the coordinate along the new axis",
        inputs: vec![(s.indices, it), (s.values, t)],
        out: s.out,
        out_type: t,
        pre: String::new(),
        body,
        n: s.n,
        check: None,
    })
}

/// A storage literal of `v` in `dt`.
fn storage_literal(site: &Site, dt: DType, v: f64) -> Result<String> {
    types::storage_literal(&Tensor::scalar_f64(dt, v))
        .ok_or_else(|| site.unsupported(&format!("{dt} values")))
}

/// EyeLike: one where column minus row is `k` (clamped to +-2^30, which keeps the same
/// diagonal inside any matrix of fewer than 2^30 rows and columns).
fn eye(sp: &Indexed, s: &EyeSpec) -> Result<Parts> {
    let t = element(&sp.site, s.dtype, "values")?;
    small(&sp.site, s.rows.max(s.cols), "a matrix side")?;
    let lim = LIM as i64;
    let body = format!(
        "        let c = i32(i % {cols}u);\n        \
         let r = i32(i / {cols}u);\n        \
         out[i] = select({zero}, {one}, c - r == {k}i);\n",
        cols = s.cols,
        k = s.k.clamp(-lim, lim),
        one = storage_literal(&sp.site, s.dtype, 1.0)?,
        zero = storage_literal(&sp.site, s.dtype, 0.0)?,
    );
    Ok(Parts {
        what: format!("EyeLike ({} x {})", s.rows, s.cols),
        how: "one on the k-th diagonal, zero elsewhere",
        inputs: Vec::new(),
        out: s.out,
        out_type: t,
        pre: String::new(),
        body,
        n: s.rows * s.cols,
        check: None,
    })
}

/// Range: `start + i × delta`, f32 fused, f16 a product then a sum in f32 (by default;
/// fused with `stash_type` double, which WGSL has not), i16/i32 wrapped, i64 exact.
fn range(sp: &Indexed, s: &RangeSpec) -> Result<Parts> {
    let dt = s.dtype;
    let t = element(&sp.site, dt, "values")?;
    let mut inputs = Vec::new();
    let mut pre = String::new();
    for (name, sc) in [("s", &s.start), ("d", &s.delta)] {
        let v = match sc {
            Scalar::Const(c) => {
                types::literal(c).ok_or_else(|| sp.site.unsupported(&format!("{dt} values")))?
            }
            Scalar::Input(v) => {
                let k = inputs.len();
                inputs.push((*v, t));
                types::load(dt, &format!("in{k}[0]"))
            }
        };
        pre += &format!("    let {name} = {v};\n");
    }
    let value = match dt {
        DType::F32 => "fma(f32(i), d, s)".to_string(),
        DType::F16 if s.stash_f32 => "f16(s + f32(i) * d)".to_string(),
        DType::F16 => "f16(fma(f32(i), d, s))".to_string(),
        DType::I16 => types::wrap(dt, "(s + bitcast<i32>(i) * d)"),
        DType::I32 => "s + bitcast<i32>(i) * d".to_string(),
        DType::I64 => "gopt_add64(s, gopt_mul64(vec2<u32>(i, 0u), d))".to_string(),
        other => return Err(sp.site.unsupported(&format!("{other} values"))),
    };
    Ok(Parts {
        what: "Range".into(),
        how: "start + i * delta",
        inputs,
        out: s.out,
        out_type: t,
        pre,
        body: format!("        out[i] = {value};\n"),
        n: s.n,
        check: None,
    })
}

/// ConstantOfShape: the value's storage literal in every element.
fn constant(sp: &Indexed, s: &FillSpec) -> Result<Parts> {
    let t = element(&sp.site, s.dtype, "values")?;
    let lit = types::storage_literal(&s.value)
        .ok_or_else(|| sp.site.unsupported(&format!("{} values", s.dtype)))?;
    Ok(Parts {
        what: "ConstantOfShape".into(),
        how: "every element the value",
        inputs: Vec::new(),
        out: s.out,
        out_type: t,
        pre: String::new(),
        body: format!("        out[i] = {lit};\n"),
        n: s.n,
        check: None,
    })
}
