//! GridSample, AffineGrid and RoiAlign in WGSL: one invocation per output element in a
//! grid-stride loop, f32 or f16 storage computed in f32 (WGSL has no f64 or bf16).
//! GridSample's filter is spelled per mode and padding rule and its per-dim taps
//! unrolled into nested loops; AffineGrid's base grid is a constant integer ratio per
//! dim; RoiAlign's region batch indices (i64 words or i32) are checked against the
//! batch ([`super::bounds`]'s error word: one outside it fails the run).
//! The nodes are read once, for both backends, by [`crate::lower::sample`].

use super::types::f32_literal;
use super::WgslKernel;
use crate::lower::sample::{
    AffineGridSpec, GridSampleSpec, Interp, Padding, RoiAlignSpec, SampleSpec,
};
use crate::lower::support::Site;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const GRID_SAMPLE: &str = include_str!("grid_sample.wgsl");
const AFFINE_GRID: &str = include_str!("affine_grid.wgsl");
const ROI_ALIGN: &str = include_str!("roi_align.wgsl");

/// Emits the shader of sampling spec `sp`.
pub fn emit(sp: &SampleSpec, name: &str) -> Result<WgslKernel> {
    match sp {
        SampleSpec::Grid(sp) => grid_sample(name, sp),
        SampleSpec::Affine(sp) => affine_grid(name, sp),
        SampleSpec::Roi(sp) => roi_align(name, sp),
    }
}

/// The WGSL storage of float `dt` (f32 or f16; bf16 has no WGSL form).
fn float(site: &Site, dt: DType, what: &str) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        DType::BF16
        | DType::F64
        | DType::Bool
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => Err(site.unsupported(&format!("{dt} {what}"))),
    }
}

/// `len` as a u32 below 2^31 (WGSL indexes with u32 and converts taps through i32).
fn small(site: &Site, len: usize, what: &str) -> Result<u32> {
    u32::try_from(len)
        .ok()
        .filter(|&v| v < 1 << 31)
        .ok_or_else(|| site.unsupported(&format!("{what} of 2^31 elements or more")))
}

/// The kernel of `site` dispatched over `n` elements.
fn kernel(
    site: &Site,
    name: &str,
    source: String,
    n: u32,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    index_check: Option<IndexCheck>,
) -> WgslKernel {
    WgslKernel {
        name: name.to_string(),
        node: site.node.clone(),
        source,
        workgroups: [n.div_ceil(super::WORKGROUP).clamp(1, 65535), 1, 1],
        inputs,
        outputs,
        index_check,
        loop_iterations: None,
    }
}

/// GridSample's body of `gs_pad`: a tap index mapped by the padding rule.
fn pad_body(padding: Padding) -> &'static str {
    match padding {
        Padding::Zeros => "    return select(-1i, i, i >= 0i && i < len);\n",
        Padding::Border => "    return clamp(i, 0i, len - 1i);\n",
        Padding::Reflection => "    return clamp(i32(gs_reflect(f32(i), lo, hi)), 0i, len - 1i);\n",
    }
}

/// GridSample's statements after denormalizing `c`: nearest rounds it, border and
/// reflection move a coordinate outside `[lo, hi]` into the image.
fn fold_body(interp: Interp, padding: Padding) -> String {
    let round = match interp {
        Interp::Nearest => "    c = round(c);\n",
        Interp::Linear | Interp::Cubic => "",
    };
    let fold = match padding {
        Padding::Zeros => "",
        Padding::Border => {
            "    if (c < lo || c > hi) {\n        c = clamp(c, 0.0, len - 1.0);\n    }\n"
        }
        Padding::Reflection => {
            "    if (c < lo || c > hi) {\n        c = gs_reflect(c, lo, hi);\n    }\n"
        }
    };
    format!("{round}{fold}")
}

/// GridSample's body of `gs_taps`: fills `r` with the filter's taps at `c`.
fn taps_body(interp: Interp) -> &'static str {
    match interp {
        Interp::Nearest => concat!(
            "    let b = i32(clamp(c, -8.0, f32(len) + 8.0));\n",
            "    r.idx = vec4<i32>(gs_pad(b, len, lo, hi), -1i, -1i, -1i);\n",
            "    r.w = vec4<f32>(1.0, 0.0, 0.0, 0.0);\n",
        ),
        Interp::Linear => concat!(
            "    let x0 = floor(c);\n",
            "    let t = c - x0;\n",
            "    let b = i32(clamp(x0, -8.0, f32(len) + 8.0));\n",
            "    r.idx = vec4<i32>(gs_pad(b, len, lo, hi), gs_pad(b + 1i, len, lo, hi), -1i, -1i);\n",
            "    r.w = vec4<f32>(1.0 - t, t, 0.0, 0.0);\n",
        ),
        Interp::Cubic => concat!(
            "    let x0 = floor(c);\n",
            "    let s = abs(c - x0);\n",
            "    let a = -0.75;\n",
            "    let b = i32(clamp(x0, -8.0, f32(len) + 8.0));\n",
            "    r.idx = vec4<i32>(gs_pad(b - 1i, len, lo, hi), gs_pad(b, len, lo, hi), gs_pad(b + 1i, len, lo, hi), gs_pad(b + 2i, len, lo, hi));\n",
            "    r.w = vec4<f32>(\n",
            "        ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a,\n",
            "        ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,\n",
            "        ((a + 2.0) * (1.0 - s) - (a + 3.0)) * (1.0 - s) * (1.0 - s) + 1.0,\n",
            "        ((a * (2.0 - s) - 5.0 * a) * (2.0 - s) + 8.0 * a) * (2.0 - s) - 4.0 * a,\n",
            "    );\n",
        ),
    }
}

/// GridSample's per-dim taps: `tp{d}` for spatial dim `d`, from grid component
/// `k - 1 - d` (the grid runs x, y, (z)).
fn dims_code(sp: &GridSampleSpec) -> String {
    let k = sp.k();
    (0..k)
        .map(|d| {
            let (lo, hi) = sp.bounds(d);
            let (lo, hi) = (f32_literal(lo), f32_literal(hi));
            let len = sp.dims[d];
            format!(
                "        let tp{d} = gs_taps(gs_coord(f32(grid[g + {c}u]), {lenf}, {lo}, {hi}), {len}i, {lo}, {hi});\n",
                c = k - 1 - d,
                lenf = f32_literal(len as f32),
            )
        })
        .collect()
}

/// GridSample's nested loops over the taps of every dim (tensor product), dropping
/// taps that read the zero padding.
fn loops_code(sp: &GridSampleSpec) -> String {
    let (k, taps) = (sp.k(), sp.interp.taps());
    let mut s = String::new();
    for d in 0..k {
        let ind = "    ".repeat(d + 2);
        let w = if d == 0 {
            "1.0".to_string()
        } else {
            format!("w{}", d - 1)
        };
        let a = if d == 0 {
            "xb".to_string()
        } else {
            format!("a{}", d - 1)
        };
        s += &format!(
            "{ind}for (var t{d}: u32 = 0u; t{d} < {taps}u; t{d} = t{d} + 1u) {{\n\
             {ind}    let j{d} = tp{d}.idx[t{d}];\n\
             {ind}    if (j{d} < 0i) {{\n\
             {ind}        continue;\n\
             {ind}    }}\n\
             {ind}    let w{d} = {w} * tp{d}.w[t{d}];\n\
             {ind}    let a{d} = {a} + u32(j{d}) * {stride}u;\n",
            stride = sp.stride(d),
        );
    }
    let ind = "    ".repeat(k + 2);
    s += &format!("{ind}acc = acc + w{l} * f32(x[a{l}]);\n", l = k - 1);
    for d in (0..k).rev() {
        s += &format!("{}}}\n", "    ".repeat(d + 2));
    }
    s
}

/// The GridSample shader.
fn grid_sample(name: &str, sp: &GridSampleSpec) -> Result<WgslKernel> {
    let site = &sp.site;
    let t = float(site, sp.dtype, "data")?;
    let gt = float(site, sp.grid_dtype, "grids")?;
    let n = small(site, sp.n, "an output")?;
    small(site, sp.grid_len, "a grid")?;
    let denorm = if sp.align {
        "(v + 1.0) / 2.0 * (len - 1.0)"
    } else {
        "((v + 1.0) * len - 1.0) / 2.0"
    };
    let source = fill(
        GRID_SAMPLE,
        &[
            ("enable", super::enable_f16(t == "f16" || gt == "f16")),
            ("mode", sp.interp.name()),
            ("padding", sp.padding.name()),
            ("align", if sp.align { "1" } else { "0" }),
            ("k", &sp.k().to_string()),
            ("t", t),
            ("gt", gt),
            ("pad", pad_body(sp.padding)),
            ("denorm", denorm),
            ("fold", &fold_body(sp.interp, sp.padding)),
            ("taps", taps_body(sp.interp)),
            ("n", &n.to_string()),
            ("points", &sp.points.to_string()),
            ("c", &sp.c.to_string()),
            ("plane", &sp.plane().to_string()),
            ("dims", &dims_code(sp)),
            ("loops", &loops_code(sp)),
        ],
    )?;
    Ok(kernel(
        site,
        name,
        source,
        n,
        vec![sp.x.0, sp.grid.0],
        vec![sp.out.0],
        None,
    ))
}

/// The AffineGrid shader.
fn affine_grid(name: &str, sp: &AffineGridSpec) -> Result<WgslKernel> {
    let site = &sp.site;
    let t = float(site, sp.dtype, "matrices")?;
    let n = small(site, sp.n, "a grid")?;
    let k = sp.k();
    let mut coords = String::new();
    for d in (0..k).rev() {
        let (b, s) = (sp.base(sp.sizes[d]), sp.sizes[d]);
        coords += &format!(
            "        let c{d} = f32(i32(p % {s}u) * {}i + {}i) / {};\n        p = p / {s}u;\n",
            b.scale,
            b.offset,
            f32_literal(b.den as f32),
        );
    }
    // Component j of the homogeneous point is spatial dim k - 1 - j.
    let dot: String = (0..k)
        .map(|j| {
            format!(
                "        acc = fma(f32(theta[tb + {j}u]), c{}, acc);\n",
                k - 1 - j
            )
        })
        .collect();
    let sizes: Vec<String> = sp.sizes.iter().map(|s| s.to_string()).collect();
    let source = fill(
        AFFINE_GRID,
        &[
            ("enable", super::enable_f16(t == "f16")),
            ("k", &k.to_string()),
            ("sizes", &sizes.join("x")),
            ("align", if sp.align { "1" } else { "0" }),
            ("t", t),
            ("n", &n.to_string()),
            ("coords", &coords),
            ("mat", &(k * (k + 1)).to_string()),
            ("row", &(k + 1).to_string()),
            ("dot", &dot),
        ],
    )?;
    Ok(kernel(
        site,
        name,
        source,
        n,
        vec![sp.theta.0],
        vec![sp.out.0],
        None,
    ))
}

/// RoiAlign's statements that read region `ri`'s batch index into `b: u32`, checked.
fn read_batch(sp: &RoiAlignSpec, code: u32) -> String {
    let nb = sp.batch_len;
    if sp.batch_dtype == DType::I64 {
        format!(
            "        let bword = bidx[ri];\n        var b: u32 = bword.x;\n        \
             if (bword.y != 0u || bword.x >= {nb}u) {{\n            atomicMax(&gopt_err, {code}u);\n            b = 0u;\n        }}\n"
        )
    } else {
        format!(
            "        var bs: i32 = bidx[ri];\n        \
             if (bs < 0i || bs >= {nb}i) {{\n            atomicMax(&gopt_err, {code}u);\n            bs = 0i;\n        }}\n        let b = u32(bs);\n"
        )
    }
}

/// The RoiAlign shader.
fn roi_align(name: &str, sp: &RoiAlignSpec) -> Result<WgslKernel> {
    let site = &sp.site;
    let t = float(site, sp.dtype, "data")?;
    let rt = float(site, sp.rois_dtype, "regions")?;
    let bt = super::bounds::index_type(sp.batch_dtype)
        .ok_or_else(|| site.unsupported(&format!("{} batch indices", sp.batch_dtype)))?;
    let n = small(site, sp.n, "an output")?;
    if i32::try_from(sp.batch_len).is_err() {
        return Err(site.unsupported("a batch of 2^31 or more"));
    }
    let check: IndexCheck = sp.check.clone();
    let off = if sp.half_pixel { "0.5" } else { "0.0" };
    let least = if sp.half_pixel {
        ""
    } else {
        "        rw = max(rw, 1.0);\n        rh = max(rh, 1.0);\n"
    };
    // Samples per bin: the ratio, or the bin's length rounded up (capped at 2^24 so a
    // wild region cannot loop for ever).
    let grid = if sp.ratio > 0 {
        format!(
            "        let gh = {r}u;\n        let gw = {r}u;\n",
            r = sp.ratio
        )
    } else {
        format!(
            "        let gh = u32(clamp(ceil(rh / {ph}.0), 0.0, 16777216.0));\n        \
             let gw = u32(clamp(ceil(rw / {pw}.0), 0.0, 16777216.0));\n",
            ph = sp.ph,
            pw = sp.pw
        )
    };
    let (init, each, finish) = if sp.max {
        (
            "bitcast<f32>(0xff800000u)",
            "                acc = max(acc, max(max(max(v.x, v.y), v.z), v.w));\n",
            "        if (gh == 0u || gw == 0u) {\n            acc = 0.0;\n        }\n",
        )
    } else {
        (
            "0.0",
            "                acc = acc + (((v.x + v.y) + v.z) + v.w);\n",
            "        acc = acc / max(f32(gh) * f32(gw), 1.0);\n",
        )
    };
    let source = fill(
        ROI_ALIGN,
        &[
            ("enable", super::enable_f16(t == "f16" || rt == "f16")),
            ("mode", if sp.max { "max" } else { "avg" }),
            (
                "ctm",
                if sp.half_pixel {
                    "half_pixel"
                } else {
                    "output_half_pixel"
                },
            ),
            ("ratio", &sp.ratio.to_string()),
            ("scale", &sp.scale.to_string()),
            ("t", t),
            ("rt", rt),
            ("bt", bt),
            ("h", &sp.h.to_string()),
            ("w", &sp.w.to_string()),
            ("n", &n.to_string()),
            ("pw", &sp.pw.to_string()),
            ("ph", &sp.ph.to_string()),
            ("bins", &(sp.ph * sp.pw).to_string()),
            ("c", &sp.c.to_string()),
            ("read", &read_batch(sp, check.code)),
            ("scalef", &f32_literal(sp.scale)),
            ("off", off),
            ("least", least),
            ("grid", &grid),
            ("plane", &(sp.h * sp.w).to_string()),
            ("init", init),
            ("each", each),
            ("finish", finish),
        ],
    )?;
    Ok(kernel(
        site,
        name,
        source,
        n,
        vec![sp.x.0, sp.rois.0, sp.batch.0],
        vec![sp.out.0],
        Some(check),
    ))
}
