//! GridSample, AffineGrid and RoiAlign ([`crate::lower::sample`]) for both writers:
//! the statements their templates (`grid_sample`, `affine_grid`, `roi_align`, `.cu`
//! and `.wgsl`) are filled with, spelled in each backend's [`Syntax`]. Products and
//! sums that the reference rounds separately go through [`Syntax::mul_rn`] and
//! [`Syntax::add_rn`] (CUDA's `__f*_rn`, which NVRTC never contracts into a fused
//! multiply-add).

use super::{Math, Syntax, Ty};
use crate::lower::sample::{AffineGridSpec, GridSampleSpec, Interp, Padding, RoiAlignSpec};

/// GridSample's values by template name: `pad`, `denorm`, `fold`, `dims`, `loops`;
/// `taps` is the writer's to assemble from [`taps`].
pub fn grid_fills(sx: &dyn Syntax, sp: &GridSampleSpec) -> Vec<(&'static str, String)> {
    let denorm = if sp.align {
        sx.mul_rn(&sx.floats("(v + 1.0) / 2.0"), &sx.floats("len - 1.0"))
    } else {
        let scaled = sx.sub_rn(&sx.mul_rn("v + 1.0", "len"), "1.0");
        sx.floats(&format!("{scaled} / 2.0"))
    };
    vec![
        ("mode", sp.interp.name().to_string()),
        ("padding", sp.padding.name().to_string()),
        ("align", if sp.align { "1" } else { "0" }.to_string()),
        ("k", sp.k().to_string()),
        ("pad", pad_body(sx, sp.padding)),
        ("denorm", denorm),
        ("fold", fold_body(sx, sp.interp, sp.padding)),
        ("n", sp.n.to_string()),
        ("points", sp.points.to_string()),
        ("c", sp.c.to_string()),
        ("plane", sp.plane().to_string()),
        ("dims", dims(sx, sp)),
        ("loops", loops(sx, sp)),
    ]
}

/// GridSample's body of `pad`: a tap index mapped by the padding rule.
fn pad_body(sx: &dyn Syntax, padding: Padding) -> String {
    let (zero, one) = (sx.int(0), sx.int(1));
    let last = format!("len - {one}");
    let e = match padding {
        Padding::Zeros => sx.select(&format!("i >= {zero} && i < len"), "i", &format!("-{one}")),
        Padding::Border => sx.clamp_i("i", &zero, &last),
        Padding::Reflection => {
            let folded = format!("{}({}, lo, hi)", sx.helper("reflect"), sx.to_f32("i"));
            sx.clamp_i(&sx.to_i32(&folded), &zero, &last)
        }
    };
    format!("    return {e};\n")
}

/// GridSample's statements after denormalizing `c`: nearest rounds it (half to even),
/// border and reflection move a coordinate outside `[lo, hi]` into the image.
fn fold_body(sx: &dyn Syntax, interp: Interp, padding: Padding) -> String {
    let round = match interp {
        Interp::Nearest => format!("    c = {};\n", sx.math(Math::RoundEven, "c")),
        Interp::Linear | Interp::Cubic => String::new(),
    };
    let folded = match padding {
        Padding::Zeros => return round,
        Padding::Border => sx.clamp_f("c", &sx.fl("0.0"), &sx.floats("len - 1.0")),
        Padding::Reflection => format!("{}(c, lo, hi)", sx.helper("reflect")),
    };
    format!("{round}    if (c < lo || c > hi) {{\n        c = {folded};\n    }}\n")
}

/// The taps of one dim at coordinate `c`: the statements before, then the four tap
/// indices (-1: none) and weights, which each writer stores in its `taps` value.
pub struct Taps {
    /// Statements (indented four spaces) the expressions read.
    pub pre: String,
    /// Tap indices.
    pub idx: [String; 4],
    /// Tap weights.
    pub w: [String; 4],
}

/// GridSample's taps at `c` for the filter `interp`.
pub fn taps(sx: &dyn Syntax, interp: Interp) -> Taps {
    let pad = |off: i64| {
        let b = match off {
            0 => "b".to_string(),
            o if o < 0 => format!("b - {}", sx.int(-o)),
            o => format!("b + {}", sx.int(o)),
        };
        format!("{}({b}, len, lo, hi)", sx.helper("pad"))
    };
    let none = format!("-{}", sx.int(1));
    let zero = sx.fl("0.0");
    let line = |t: Ty, name: &str, e: &str| format!("    {}\n", sx.let_(t, name, e));
    let base = |v: &str| {
        let hi = format!("{} + {}", sx.to_f32("len"), sx.fl("8.0"));
        line(
            Ty::I32,
            "b",
            &sx.to_i32(&sx.clamp_f(v, &sx.fl("-8.0"), &hi)),
        )
    };
    match interp {
        Interp::Nearest => Taps {
            pre: base("c"),
            idx: [pad(0), none.clone(), none.clone(), none],
            w: [sx.fl("1.0"), zero.clone(), zero.clone(), zero],
        },
        Interp::Linear => Taps {
            pre: format!(
                "{}{}{}",
                line(Ty::F32, "x0", &sx.floor("c")),
                line(Ty::F32, "t", "c - x0"),
                base("x0")
            ),
            idx: [pad(0), pad(1), none.clone(), none],
            w: [sx.floats("1.0 - t"), "t".into(), zero.clone(), zero],
        },
        Interp::Cubic => Taps {
            pre: format!(
                "{}{}{}{}",
                line(Ty::F32, "x0", &sx.floor("c")),
                line(Ty::F32, "s", &sx.abs("c - x0")),
                line(Ty::F32, "a", &sx.fl("-0.75")),
                base("x0")
            ),
            idx: [pad(-1), pad(0), pad(1), pad(2)],
            w: [
                "((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a",
                "((a + 2.0) * s - (a + 3.0)) * s * s + 1.0",
                "((a + 2.0) * (1.0 - s) - (a + 3.0)) * (1.0 - s) * (1.0 - s) + 1.0",
                "((a * (2.0 - s) - 5.0 * a) * (2.0 - s) + 8.0 * a) * (2.0 - s) - 4.0 * a",
            ]
            .map(|e| sx.floats(e)),
        },
    }
}

/// GridSample's per-dim taps: `tp{d}` for spatial dim `d`, from grid component
/// `k - 1 - d` (the grid runs x, y, (z)).
fn dims(sx: &dyn Syntax, sp: &GridSampleSpec) -> String {
    let k = sp.k();
    (0..k)
        .map(|d| {
            let (lo, hi) = sp.bounds(d);
            let (lo, hi) = (sx.f32(lo), sx.f32(hi));
            let len = sp.dims[d];
            let v = sx.load_f32(&format!("grid[g + {}]", sx.index(k - 1 - d)));
            let c = format!(
                "{}({v}, {}, {lo}, {hi})",
                sx.helper("coord"),
                sx.f32(len as f32)
            );
            let tap = format!(
                "{}({c}, {}, {lo}, {hi})",
                sx.helper("tap"),
                sx.int(len as i64)
            );
            format!("        {}\n", sx.let_(Ty::Auto, &format!("tp{d}"), &tap))
        })
        .collect()
}

/// GridSample's nested loops over the taps of every dim (tensor product), dropping
/// taps that read the zero padding.
fn loops(sx: &dyn Syntax, sp: &GridSampleSpec) -> String {
    let (k, taps) = (sp.k(), sp.interp.taps());
    let mut s = String::new();
    for d in 0..k {
        let ind = "    ".repeat(d + 2);
        let w = if d == 0 {
            sx.fl("1.0")
        } else {
            format!("w{}", d - 1)
        };
        let a = if d == 0 {
            "xb".to_string()
        } else {
            format!("a{}", d - 1)
        };
        if let Some(u) = sx.unroll() {
            s += &format!("{ind}{u}\n");
        }
        let at = format!(
            "{a} + {} * {}",
            sx.to_index(&format!("j{d}")),
            sx.index(sp.stride(d))
        );
        s += &format!(
            "{ind}{} {{\n{ind}    {}\n{ind}    if (j{d} < {}) {{\n{ind}        continue;\n{ind}    }}\n{ind}    {}\n{ind}    {}\n",
            sx.for_(&format!("t{d}"), taps),
            sx.let_(Ty::I32, &format!("j{d}"), &format!("tp{d}.idx[t{d}]")),
            sx.int(0),
            sx.let_(Ty::F32, &format!("w{d}"), &sx.mul_rn(&w, &format!("tp{d}.w[t{d}]"))),
            sx.let_(Ty::Index, &format!("a{d}"), &at),
        );
    }
    let ind = "    ".repeat(k + 2);
    let l = k - 1;
    let term = sx.mul_rn(&format!("w{l}"), &sx.load_f32(&format!("x[a{l}]")));
    s += &format!("{ind}acc = {};\n", sx.add_rn("acc", &term));
    for d in (0..k).rev() {
        s += &format!("{}}}\n", "    ".repeat(d + 2));
    }
    s
}

/// AffineGrid's values by template name: `k`, `sizes`, `align`, `n`, `coords` (the
/// base grid's coordinates `c{d}` of output position `p`), `mat`, `row` and `dot` (the
/// row of theta times the homogeneous point).
pub fn affine_fills(sx: &dyn Syntax, sp: &AffineGridSpec) -> Vec<(&'static str, String)> {
    let k = sp.k();
    let mut coords = String::new();
    for d in (0..k).rev() {
        let (b, s) = (sp.base(sp.sizes[d]), sp.sizes[d]);
        let step = sx.to_i32(&format!("p % {}", sx.index(s)));
        let num = format!("{step} * {} + {}", sx.int(b.scale), sx.int(b.offset));
        let c = format!("{} / {}", sx.to_f32(&num), sx.f32(b.den as f32));
        coords += &format!(
            "        {}\n        p = p / {};\n",
            sx.let_(Ty::F32, &format!("c{d}"), &c),
            sx.index(s)
        );
    }
    // Component j of the homogeneous point is spatial dim k - 1 - j.
    let dot: String = (0..k)
        .map(|j| {
            let th = sx.load_f32(&format!("theta[tb + {}]", sx.index(j)));
            format!(
                "        acc = {};\n",
                sx.fma(&th, &format!("c{}", k - 1 - j), "acc")
            )
        })
        .collect();
    let sizes: Vec<String> = sp.sizes.iter().map(|s| s.to_string()).collect();
    vec![
        ("k", k.to_string()),
        ("sizes", sizes.join("x")),
        ("align", if sp.align { "1" } else { "0" }.to_string()),
        ("n", sp.n.to_string()),
        ("coords", coords),
        ("mat", (k * (k + 1)).to_string()),
        ("row", (k + 1).to_string()),
        ("dot", dot),
    ]
}

/// RoiAlign's values by template name: the attributes for the header, the sizes, the
/// region's offset (`off`), the least region size (`least`), the samples per bin
/// (`grid`, capped at 2^24 so a wild region cannot loop for ever), and the pooling
/// (`init`, `each`, `finish`).
pub fn roi_fills(sx: &dyn Syntax, sp: &RoiAlignSpec) -> Vec<(&'static str, String)> {
    let one = sx.fl("1.0");
    let least = if sp.half_pixel {
        String::new()
    } else {
        format!(
            "        rw = {};\n        rh = {};\n",
            sx.max_f("rw", &one),
            sx.max_f("rh", &one)
        )
    };
    let grid = if sp.ratio > 0 {
        let r = format!("{}u", sp.ratio);
        format!(
            "        {}\n        {}\n",
            sx.let_(Ty::U32, "gh", &r),
            sx.let_(Ty::U32, "gw", &r)
        )
    } else {
        let per = |len: &str, bins: usize| {
            let q = sx.math(
                Math::Ceil,
                &format!("{len} / {}", sx.floats(&format!("{bins}.0"))),
            );
            sx.to_u32(&sx.clamp_f(&q, &sx.fl("0.0"), &sx.fl("16777216.0")))
        };
        format!(
            "        {}\n        {}\n",
            sx.let_(Ty::U32, "gh", &per("rh", sp.ph)),
            sx.let_(Ty::U32, "gw", &per("rw", sp.pw))
        )
    };
    let (init, each, finish) = if sp.max {
        let m = sx.max_f(&sx.max_f(&sx.max_f("v.x", "v.y"), "v.z"), "v.w");
        (
            sx.f32(f32::NEG_INFINITY),
            format!("                acc = {};\n", sx.max_f("acc", &m)),
            format!(
                "        if (gh == 0u || gw == 0u) {{\n            acc = {};\n        }}\n",
                sx.fl("0.0")
            ),
        )
    } else {
        let sum = sx.add_rn(&sx.add_rn(&sx.add_rn("v.x", "v.y"), "v.z"), "v.w");
        let count = sx.mul_rn(&sx.to_f32("gh"), &sx.to_f32("gw"));
        (
            sx.fl("0.0"),
            format!("                acc = {};\n", sx.add_rn("acc", &sum)),
            format!("        acc = acc / {};\n", sx.max_f(&count, &one)),
        )
    };
    vec![
        ("mode", if sp.max { "max" } else { "avg" }.to_string()),
        (
            "ctm",
            if sp.half_pixel {
                "half_pixel"
            } else {
                "output_half_pixel"
            }
            .to_string(),
        ),
        ("ratio", sp.ratio.to_string()),
        ("scale", sp.scale.to_string()),
        ("h", sp.h.to_string()),
        ("w", sp.w.to_string()),
        ("n", sp.n.to_string()),
        ("pw", sp.pw.to_string()),
        ("ph", sp.ph.to_string()),
        ("bins", (sp.ph * sp.pw).to_string()),
        ("c", sp.c.to_string()),
        ("scalef", sx.f32(sp.scale)),
        ("off", sx.fl(if sp.half_pixel { "0.5" } else { "0.0" })),
        ("least", least),
        ("grid", grid),
        ("plane", (sp.h * sp.w).to_string()),
        ("init", init),
        ("each", each),
        ("finish", finish),
    ]
}
