//! GridSample, AffineGrid and RoiAlign in CUDA ([`crate::lower::sample`]): one thread
//! per output element (grid-stride), f32, f16 or bf16 storage computed in f32. Each
//! kernel mirrors its WGSL twin line by line (same filter, same index arithmetic, the
//! same roundings: `__f*_rn` where NVRTC would otherwise contract a product into a
//! sum), so the WGSL run on lavapipe vouches for the logic. RoiAlign's region batch
//! indices are checked on the device ([`crate::plan::IndexCheck`]): one outside the
//! batch raises the node's code in the run's error word and reads batch 0.

use super::elementwise::storage;
use super::support::{flit, store};
use super::Kernel;
use crate::lower::sample::{
    AffineGridSpec, GridSampleSpec, Interp, Padding, RoiAlignSpec, SampleSpec,
};
use crate::template::fill;
use crate::Result;

const GRID_SAMPLE: &str = include_str!("grid_sample.cu");
const AFFINE_GRID: &str = include_str!("affine_grid.cu");
const ROI_ALIGN: &str = include_str!("roi_align.cu");

/// Emits the kernel of sampling spec `sp` (its float dtypes are f32, f16 or bf16 and
/// its images below 2^31 elements, as [`crate::lower::sample`] checks).
pub fn emit(sp: &SampleSpec, name: &str) -> Result<Kernel> {
    match sp {
        SampleSpec::Grid(sp) => grid_sample(name, sp),
        SampleSpec::Affine(sp) => affine_grid(name, sp),
        SampleSpec::Roi(sp) => roi_align(name, sp),
    }
}

/// GridSample's body of `_pad`: a tap index mapped by the padding rule.
fn pad_body(name: &str, padding: Padding) -> String {
    match padding {
        Padding::Zeros => "    return (i >= 0 && i < len) ? i : -1;\n".into(),
        Padding::Border => "    return min(max(i, 0), len - 1);\n".into(),
        Padding::Reflection => {
            format!("    return min(max((int){name}_reflect((float)i, lo, hi), 0), len - 1);\n")
        }
    }
}

/// GridSample's statements after denormalizing `c`: nearest rounds it (half to even),
/// border and reflection move a coordinate outside `[lo, hi]` into the image.
fn fold_body(name: &str, interp: Interp, padding: Padding) -> String {
    let round = match interp {
        Interp::Nearest => "    c = rintf(c);\n",
        Interp::Linear | Interp::Cubic => "",
    };
    let fold = match padding {
        Padding::Zeros => String::new(),
        Padding::Border => {
            "    if (c < lo || c > hi) c = fminf(fmaxf(c, 0.0f), len - 1.0f);\n".to_string()
        }
        Padding::Reflection => {
            format!("    if (c < lo || c > hi) c = {name}_reflect(c, lo, hi);\n")
        }
    };
    format!("{round}{fold}")
}

/// GridSample's body of `_tap`: fills `r` with the filter's taps at `c`.
fn taps_body(name: &str, interp: Interp) -> String {
    let pad = |off: &str| format!("{name}_pad(b{off}, len, lo, hi)");
    match interp {
        Interp::Nearest => format!(
            "    const int b = (int)fminf(fmaxf(c, -8.0f), (float)len + 8.0f);\n    \
             r.idx[0] = {}; r.idx[1] = -1; r.idx[2] = -1; r.idx[3] = -1;\n    \
             r.w[0] = 1.0f; r.w[1] = 0.0f; r.w[2] = 0.0f; r.w[3] = 0.0f;\n",
            pad("")
        ),
        Interp::Linear => format!(
            "    const float x0 = floorf(c);\n    const float t = c - x0;\n    \
             const int b = (int)fminf(fmaxf(x0, -8.0f), (float)len + 8.0f);\n    \
             r.idx[0] = {}; r.idx[1] = {}; r.idx[2] = -1; r.idx[3] = -1;\n    \
             r.w[0] = 1.0f - t; r.w[1] = t; r.w[2] = 0.0f; r.w[3] = 0.0f;\n",
            pad(""),
            pad(" + 1")
        ),
        Interp::Cubic => format!(
            "    const float x0 = floorf(c);\n    const float s = fabsf(c - x0);\n    \
             const float a = -0.75f;\n    \
             const int b = (int)fminf(fmaxf(x0, -8.0f), (float)len + 8.0f);\n    \
             r.idx[0] = {}; r.idx[1] = {}; r.idx[2] = {}; r.idx[3] = {};\n    \
             r.w[0] = ((a * (s + 1.0f) - 5.0f * a) * (s + 1.0f) + 8.0f * a) * (s + 1.0f) - 4.0f * a;\n    \
             r.w[1] = ((a + 2.0f) * s - (a + 3.0f)) * s * s + 1.0f;\n    \
             r.w[2] = ((a + 2.0f) * (1.0f - s) - (a + 3.0f)) * (1.0f - s) * (1.0f - s) + 1.0f;\n    \
             r.w[3] = ((a * (2.0f - s) - 5.0f * a) * (2.0f - s) + 8.0f * a) * (2.0f - s) - 4.0f * a;\n",
            pad(" - 1"),
            pad(""),
            pad(" + 1"),
            pad(" + 2")
        ),
    }
}

/// GridSample's per-dim taps: `tp{d}` for spatial dim `d`, from grid component
/// `k - 1 - d` (the grid runs x, y, (z)).
fn dims_code(name: &str, sp: &GridSampleSpec) -> String {
    let k = sp.k();
    (0..k)
        .map(|d| {
            let (lo, hi) = sp.bounds(d);
            let (lo, hi) = (flit(lo), flit(hi));
            let len = sp.dims[d];
            format!(
                "        const {name}_taps tp{d} = {name}_tap({name}_coord(gopt_ld(grid[g + {c}]), {lenf}, {lo}, {hi}), {len}, {lo}, {hi});\n",
                c = k - 1 - d,
                lenf = flit(len as f32),
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
            "1.0f".to_string()
        } else {
            format!("w{}", d - 1)
        };
        let a = if d == 0 {
            "xb".to_string()
        } else {
            format!("a{}", d - 1)
        };
        s += &format!(
            "{ind}#pragma unroll\n\
             {ind}for (int t{d} = 0; t{d} < {taps}; ++t{d}) {{\n\
             {ind}    const int j{d} = tp{d}.idx[t{d}];\n\
             {ind}    if (j{d} < 0) continue;\n\
             {ind}    const float w{d} = __fmul_rn({w}, tp{d}.w[t{d}]);\n\
             {ind}    const long long a{d} = {a} + (long long)j{d} * {stride}LL;\n",
            stride = sp.stride(d),
        );
    }
    let ind = "    ".repeat(k + 2);
    s += &format!(
        "{ind}acc = __fadd_rn(acc, __fmul_rn(w{l}, gopt_ld(x[a{l}])));\n",
        l = k - 1
    );
    for d in (0..k).rev() {
        s += &format!("{}}}\n", "    ".repeat(d + 2));
    }
    s
}

/// The GridSample kernel.
fn grid_sample(name: &str, sp: &GridSampleSpec) -> Result<Kernel> {
    let (t, gt) = (storage(sp.dtype), storage(sp.grid_dtype));
    let denorm = if sp.align {
        "__fmul_rn((v + 1.0f) / 2.0f, len - 1.0f)"
    } else {
        "__fsub_rn(__fmul_rn(v + 1.0f, len), 1.0f) / 2.0f"
    };
    let source = fill(
        GRID_SAMPLE,
        &[
            ("mode", sp.interp.name()),
            ("padding", sp.padding.name()),
            ("align", if sp.align { "1" } else { "0" }),
            ("k", &sp.k().to_string()),
            ("name", name),
            ("pad", &pad_body(name, sp.padding)),
            ("denorm", denorm),
            ("fold", &fold_body(name, sp.interp, sp.padding)),
            ("taps", &taps_body(name, sp.interp)),
            ("t", t),
            ("gt", gt),
            ("n", &sp.n.to_string()),
            ("points", &sp.points.to_string()),
            ("c", &sp.c.to_string()),
            ("plane", &sp.plane().to_string()),
            ("dims", &dims_code(name, sp)),
            ("loops", &loops_code(sp)),
            ("store", &store(sp.dtype, "acc")),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &sp.site.node,
        source,
        sp.n,
        vec![sp.x.0, sp.grid.0],
        vec![sp.out.0],
    ))
}

/// The AffineGrid kernel.
fn affine_grid(name: &str, sp: &AffineGridSpec) -> Result<Kernel> {
    let t = storage(sp.dtype);
    let k = sp.k();
    let mut coords = String::new();
    for d in (0..k).rev() {
        let (b, s) = (sp.base(sp.sizes[d]), sp.sizes[d]);
        coords += &format!(
            "        const float c{d} = (float)((int)(p % {s}LL) * {} + {}) / {};\n        p /= {s}LL;\n",
            b.scale,
            b.offset,
            flit(b.den as f32),
        );
    }
    // Component j of the homogeneous point is spatial dim k - 1 - j.
    let dot: String = (0..k)
        .map(|j| {
            format!(
                "        acc = fmaf(gopt_ld(theta[tb + {j}]), c{}, acc);\n",
                k - 1 - j
            )
        })
        .collect();
    let sizes: Vec<String> = sp.sizes.iter().map(|s| s.to_string()).collect();
    let source = fill(
        AFFINE_GRID,
        &[
            ("k", &k.to_string()),
            ("sizes", &sizes.join("x")),
            ("align", if sp.align { "1" } else { "0" }),
            ("name", name),
            ("t", t),
            ("n", &sp.n.to_string()),
            ("coords", &coords),
            ("mat", &(k * (k + 1)).to_string()),
            ("row", &(k + 1).to_string()),
            ("dot", &dot),
            ("store", &store(sp.dtype, "acc")),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &sp.site.node,
        source,
        sp.n,
        vec![sp.theta.0],
        vec![sp.out.0],
    ))
}

/// The RoiAlign kernel.
fn roi_align(name: &str, sp: &RoiAlignSpec) -> Result<Kernel> {
    let (t, rt, bt) = (
        storage(sp.dtype),
        storage(sp.rois_dtype),
        storage(sp.batch_dtype),
    );
    let code = sp.check.code;
    let off = if sp.half_pixel { "0.5f" } else { "0.0f" };
    let least = if sp.half_pixel {
        ""
    } else {
        "        rw = fmaxf(rw, 1.0f);\n        rh = fmaxf(rh, 1.0f);\n"
    };
    // Samples per bin: the ratio, or the bin's length rounded up (capped at 2^24 so a
    // wild region cannot loop for ever).
    let grid = if sp.ratio > 0 {
        format!(
            "        const unsigned int gh = {r}u;\n        const unsigned int gw = {r}u;\n",
            r = sp.ratio
        )
    } else {
        format!(
            "        const unsigned int gh = (unsigned int)fminf(fmaxf(ceilf(rh / {ph}.0f), 0.0f), 16777216.0f);\n        \
             const unsigned int gw = (unsigned int)fminf(fmaxf(ceilf(rw / {pw}.0f), 0.0f), 16777216.0f);\n",
            ph = sp.ph,
            pw = sp.pw
        )
    };
    let (init, each, finish) = if sp.max {
        (
            "__int_as_float(0xff800000)",
            "                acc = fmaxf(acc, fmaxf(fmaxf(fmaxf(v.x, v.y), v.z), v.w));\n",
            "        if (gh == 0u || gw == 0u) acc = 0.0f;\n",
        )
    } else {
        (
            "0.0f",
            "                acc = __fadd_rn(acc, __fadd_rn(__fadd_rn(__fadd_rn(v.x, v.y), v.z), v.w));\n",
            "        acc = acc / fmaxf(__fmul_rn((float)gh, (float)gw), 1.0f);\n",
        )
    };
    let source = fill(
        ROI_ALIGN,
        &[
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
            ("name", name),
            ("t", t),
            ("rt", rt),
            ("bt", bt),
            ("h", &sp.h.to_string()),
            ("w", &sp.w.to_string()),
            ("n", &sp.n.to_string()),
            ("pw", &sp.pw.to_string()),
            ("ph", &sp.ph.to_string()),
            ("bins", &(sp.ph * sp.pw).to_string()),
            ("c", &sp.c.to_string()),
            ("nb", &sp.batch_len.to_string()),
            ("code", &code.to_string()),
            ("scalef", &flit(sp.scale)),
            ("off", off),
            ("least", least),
            ("grid", &grid),
            ("plane", &(sp.h * sp.w).to_string()),
            ("init", init),
            ("each", each),
            ("finish", finish),
            ("store", &store(sp.dtype, "acc")),
        ],
    )?;
    Ok(Kernel {
        index_check: Some(sp.check.clone()),
        ..Kernel::flat(
            name,
            &sp.site.node,
            source,
            sp.n,
            vec![sp.x.0, sp.rois.0, sp.batch.0],
            vec![sp.out.0],
        )
    })
}
