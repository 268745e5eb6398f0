//! Resize's statements ([`crate::lower::resize`]) for both writers: one invocation per
//! output element decodes its coordinates, computes each resampled axis' source
//! coordinate, taps and weights in f32, then copies the tap nearest resampling picks
//! or sums the separable product of the axes' weights over the taps (one loop per
//! axis). The writers fill their templates (`cuda/resize.cu`, `wgsl/resize.wgsl`, which
//! hold the helper functions `first_tap`, `cubic`, `cubic4` and `sat`) with these.

use super::{Syntax, Ty};
use crate::lower::resize::{Axis, ResizeSpec, Rounding, Weights};
use crate::{CodegenError, Result};

/// The indentation of the loop body.
const IN: &str = "        ";

/// How the element is stored, which the writer spells: nearest resampling copies the
/// tap it picks, linear and cubic resampling store their f32 sum.
pub enum Element {
    /// The picked element as stored (`x[off]`, saturated for floats), the
    /// extrapolated element with `tf_crop_and_resize`, and a zero of the storage type.
    Copy {
        /// The storage type.
        t: &'static str,
        /// The picked element.
        load: String,
        /// The extrapolation value as an element.
        extrapolated: Option<String>,
        /// Zero as an element.
        zero: String,
    },
    /// The f32 sum `v`, saturated, as an element.
    Sum {
        /// The stored expression.
        store: String,
    },
}

/// The statements the writers' templates take: `decode` (coordinates and `base`),
/// `axes` (each resampled axis' taps and weights) and `body` (the element stored).
pub struct Texts {
    /// Output coordinates `c{d}` of element `i`, and the input offset `base` of the
    /// axes that are not resampled.
    pub decode: String,
    /// The resampled axes' statements.
    pub axes: String,
    /// The store.
    pub body: String,
}

/// The statements of `sp` in `sx`'s syntax, the element stored as `element` says.
pub fn texts(sp: &ResizeSpec, sx: &dyn Syntax, element: &Element) -> Result<Texts> {
    let nearest = sp.nearest();
    let mut axes = state(sp, sx, nearest);
    for (a, ax) in sp.axes.iter().enumerate() {
        axes += &coord(sx, a, ax);
        axes += &if nearest {
            nearest_axis(sx, a, ax, sp)?
        } else {
            filter_axis(sx, a, ax, sp)?
        };
        axes += &extrapolates(sx, a, ax, sp, nearest);
    }
    let body = match element {
        Element::Copy {
            t,
            load,
            extrapolated,
            zero,
        } => {
            let mut s = format!("{IN}{}\n", sx.var(Ty::Named(t), "v", load));
            if let Some(e) = extrapolated {
                s += &format!("{IN}if (ext) {{ v = {e}; }}\n");
            }
            s + &format!("{IN}if (!keep) {{ v = {zero}; }}\n{IN}out[i] = v;\n")
        }
        Element::Sum { store } => filter_body(sx, sp, store),
    };
    Ok(Texts {
        decode: decode(sp, sx),
        axes,
        body,
    })
}

/// The resampled axes for the kernel's header comment.
pub fn describe(sp: &ResizeSpec) -> String {
    let axes: Vec<String> = sp
        .axes
        .iter()
        .map(|a| format!("axis {}: {} -> {}", a.axis, a.in_len, a.out_len))
        .collect();
    if axes.is_empty() {
        "no axis resampled".into()
    } else {
        axes.join(", ")
    }
}

/// What the element is, for the header comment.
pub fn how(sp: &ResizeSpec) -> &'static str {
    if sp.nearest() {
        "the tap each axis picks, copied"
    } else {
        "the sum of the taps' products"
    }
}

/// Output coordinates `c{d}` of element `i`, and `base`, the input offset of the axes
/// that are not resampled.
fn decode(sp: &ResizeSpec, sx: &dyn Syntax) -> String {
    let mut s = format!("{IN}{}\n", sx.var(Ty::Index, "r", "i"));
    for (d, &len) in sp.out_shape.iter().enumerate().rev() {
        let l = sx.index(len);
        let c = sx.let_(Ty::Index, &format!("c{d}"), &format!("r % {l}"));
        s += &format!("{IN}{c} r = r / {l};\n");
    }
    let mut base = sx.index(0);
    for (d, &stride) in sp.in_strides.iter().enumerate() {
        if !sp.resampled(d) {
            base += &format!(" + c{d} * {}", sx.index(stride));
        }
    }
    let unused = sx.unused("r");
    if !unused.is_empty() {
        s += &format!("{IN}{unused}\n");
    }
    s + &format!("{IN}{}\n", sx.let_(Ty::Index, "base", &base))
}

/// Axis `a`'s source coordinate `x{a}`, its floor `f{a}` and fractional part `r{a}`
/// (1 on a sample).
fn coord(sx: &dyn Syntax, a: usize, ax: &Axis) -> String {
    let c = ax.coord;
    let num = format!(
        "({} + {}) * {}",
        sx.to_f32(&format!("c{}", ax.axis)),
        sx.f32(c.pre),
        sx.f32(c.mul)
    );
    let x = format!("{} + {}", sx.div(&num, &sx.f32(c.div)), sx.f32(c.add));
    let (xa, fa) = (format!("x{a}"), format!("f{a}"));
    let r = sx.select(
        &format!("{xa} == {fa}"),
        &sx.fl("1.0"),
        &format!("{xa} - {fa}"),
    );
    format!(
        "{IN}// axis {d}: {i} -> {o}\n{IN}{}\n{IN}{}\n{IN}{}\n",
        sx.let_(Ty::F32, &xa, &x),
        sx.let_(Ty::F32, &fa, &sx.floor(&xa)),
        sx.let_(Ty::F32, &format!("r{a}"), &r),
        d = ax.axis,
        i = ax.in_len,
        o = ax.out_len,
    )
}

/// Nearest on axis `a`: the tap `t{a}` it picks, `u{a}` that tap clamped to the axis.
fn nearest_axis(sx: &dyn Syntax, a: usize, ax: &Axis, sp: &ResizeSpec) -> Result<String> {
    let Weights::Nearest(rounding) = ax.weights else {
        return Err(CodegenError::Plan(
            "Resize: a nearest kernel with another filter".into(),
        ));
    };
    let (one, half) = (sx.fl("1.0"), sx.fl("0.5"));
    let up = match rounding {
        Rounding::RoundPreferFloor => format!("r{a} == {one} || r{a} > {half}"),
        Rounding::RoundPreferCeil => format!("r{a} == {one} || r{a} >= {half}"),
        Rounding::Floor => format!("r{a} == {one}"),
        Rounding::Ceil => "true".into(),
    };
    let last = (ax.in_len - 1).to_string();
    let t = format!(
        "{}(x{a}, 2) + {}",
        sx.helper("first_tap"),
        sx.select(&up, "1", "0")
    );
    let mut s = format!(
        "{IN}{}\n{IN}{}\n{IN}off = off + {} * {};\n",
        sx.let_(Ty::I32, &format!("t{a}"), &t),
        sx.let_(
            Ty::I32,
            &format!("u{a}"),
            &sx.clamp_i(&format!("t{a}"), "0", &last)
        ),
        sx.to_index(&format!("u{a}")),
        sx.index(ax.stride),
    );
    if sp.exclude_outside {
        let inside = sx.let_(Ty::Bool, &format!("in{a}"), &format!("t{a} == u{a}"));
        s += &format!("{IN}{inside}\n");
    }
    Ok(s)
}

/// A linear or cubic filter on axis `a`: weights `w{a}` and input offsets `j{a}` of its
/// taps.
fn filter_axis(sx: &dyn Syntax, a: usize, ax: &Axis, sp: &ResizeSpec) -> Result<String> {
    let n = ax.weights.taps();
    let last = (ax.in_len - 1).to_string();
    let first = format!("{}(x{a}, {n})", sx.helper("first_tap"));
    let mut s = format!(
        "{IN}{}\n{IN}{}\n{IN}{}\n",
        sx.let_(Ty::I32, &format!("t{a}"), &first),
        sx.array(Ty::F32, &format!("w{a}"), n),
        sx.array(Ty::Index, &format!("j{a}"), n),
    );
    let (zero, one) = (sx.fl("0.0"), sx.fl("1.0"));
    // The tap's offset from r{a} in f32 for a wide filter starting at `start`.
    let dist = |start: i64| format!("{} - r{a}", sx.to_f32(&format!("k + {start}")));
    s += &match ax.weights {
        Weights::Nearest(_) => {
            return Err(CodegenError::Plan(
                "Resize: a nearest axis in a filter kernel".into(),
            ))
        }
        Weights::Linear => format!("{IN}w{a}[0] = {one} - r{a};\n{IN}w{a}[1] = r{a};\n"),
        Weights::Cubic { a: coef } => {
            let q = format!("{}({}, r{a})", sx.helper("cubic4"), sx.f32(coef));
            format!(
                "{IN}{}\n{IN}w{a}[0] = q{a}.x;\n{IN}w{a}[1] = q{a}.y;\n{IN}w{a}[2] = q{a}.z;\n{IN}w{a}[3] = q{a}.w;\n",
                sx.let_(Ty::F32x4, &format!("q{a}"), &q)
            )
        }
        Weights::WideLinear { start, scale, .. } => {
            let tri = sx.abs(&format!("({}) * {}", dist(start), sx.f32(scale)));
            normalized(
                sx,
                a,
                n,
                &sx.clamp_f(&format!("{one} - {tri}"), &zero, &one),
            )
        }
        Weights::WideCubic {
            a: coef,
            start,
            scale,
            ..
        } => normalized(
            sx,
            a,
            n,
            &format!(
                "{}({}, {} * ({}))",
                sx.helper("cubic"),
                sx.f32(coef),
                sx.f32(scale),
                dist(start)
            ),
        ),
    };
    let each = sx.for_("k", n);
    if sp.exclude_outside {
        s += &format!(
            "{IN}{}\n{IN}{each} {{\n{IN}    if (t{a} + k < 0 || t{a} + k > {last}) {{ w{a}[k] = {zero}; }}\n{IN}    e{a} = e{a} + w{a}[k];\n{IN}}}\n{IN}if (e{a} == {zero}) {{ e{a} = {one}; }}\n{IN}{each} {{ w{a}[k] = w{a}[k] / e{a}; }}\n",
            sx.var(Ty::F32, &format!("e{a}"), &zero),
        );
    }
    let tap = sx.to_index(&sx.clamp_i(&format!("t{a} + k"), "0", &last));
    s += &format!(
        "{IN}{each} {{ j{a}[k] = {tap} * {}; }}\n",
        sx.index(ax.stride)
    );
    Ok(s)
}

/// Weights `w{a}[k] = v` (an expression of `k`) over `n` taps, divided by their sum.
fn normalized(sx: &dyn Syntax, a: usize, n: usize, v: &str) -> String {
    let each = sx.for_("k", n);
    format!(
        "{IN}{}\n{IN}{each} {{\n{IN}    {}\n{IN}    w{a}[k] = v;\n{IN}    s{a} = s{a} + v;\n{IN}}}\n{IN}{each} {{ w{a}[k] = w{a}[k] / s{a}; }}\n",
        sx.var(Ty::F32, &format!("s{a}"), &sx.fl("0.0")),
        sx.let_(Ty::F32, "v", v),
    )
}

/// With `tf_crop_and_resize`: whether axis `a`'s coordinate is off the axis (`ext`, and
/// the factor its extrapolated rows are scaled by restarts), else the factor takes this
/// axis' weight sum (nearest: whether its tap counts, `keep`).
fn extrapolates(sx: &dyn Syntax, a: usize, ax: &Axis, sp: &ResizeSpec, nearest: bool) -> String {
    if sp.extrapolation.is_none() {
        return if nearest && sp.exclude_outside {
            format!("{IN}keep = keep && in{a};\n")
        } else {
            String::new()
        };
    }
    let off = format!(
        "x{a} < {} || x{a} > {}",
        sx.fl("0.0"),
        sx.f32((ax.in_len - 1) as f32)
    );
    if nearest {
        let kept = if sp.exclude_outside {
            format!("keep = keep && in{a};")
        } else {
            String::new()
        };
        return format!("{IN}if ({off}) {{ ext = true; keep = true; }} else {{ {kept} }}\n");
    }
    let n = ax.weights.taps();
    format!(
        "{IN}{}\n{IN}{} {{ z{a} = z{a} + w{a}[k]; }}\n{IN}if ({off}) {{ ext = true; fac = {}; }} else {{ fac = fac * z{a}; }}\n",
        sx.var(Ty::F32, &format!("z{a}"), &sx.fl("0.0")),
        sx.for_("k", n),
        sx.fl("1.0"),
    )
}

/// The state the axes' code updates, declared before it.
fn state(sp: &ResizeSpec, sx: &dyn Syntax, nearest: bool) -> String {
    let mut s = String::new();
    if nearest {
        s += &format!(
            "{IN}{}\n{IN}{}\n",
            sx.var(Ty::Index, "off", "base"),
            sx.var(Ty::Bool, "keep", "true")
        );
    }
    if sp.extrapolation.is_some() {
        s += &format!("{IN}{}\n", sx.var(Ty::Bool, "ext", "false"));
        if !nearest {
            s += &format!("{IN}{}\n", sx.var(Ty::F32, "fac", &sx.fl("1.0")));
        }
    }
    s
}

/// The filter's sum over every axis' taps (one loop per axis, outermost first), the
/// extrapolation value where an axis is off, saturated and stored as `store` (an
/// expression of `v`).
fn filter_body(sx: &dyn Syntax, sp: &ResizeSpec, store: &str) -> String {
    let mut s = format!("{IN}{}\n", sx.var(Ty::F32, "acc", &sx.fl("0.0")));
    let (mut off, mut w) = ("base".to_string(), sx.fl("1.0"));
    let mut close = String::new();
    for (a, ax) in sp.axes.iter().enumerate() {
        let ind = " ".repeat(8 + 4 * a);
        let k = format!("k{a}");
        s += &format!(
            "{ind}{} {{\n{ind}    {}\n{ind}    {}\n",
            sx.for_(&k, ax.weights.taps()),
            sx.let_(Ty::Index, &format!("o{a}"), &format!("{off} + j{a}[{k}]")),
            sx.let_(Ty::F32, &format!("p{a}"), &format!("{w} * w{a}[{k}]")),
        );
        close = format!("{ind}}}\n{close}");
        (off, w) = (format!("o{a}"), format!("p{a}"));
    }
    let ind = " ".repeat(8 + 4 * sp.axes.len());
    s += &format!(
        "{ind}acc = acc + {w} * {};\n{close}",
        sx.load_f32(&format!("x[{off}]"))
    );
    s += &format!("{IN}{}\n", sx.var(Ty::F32, "v", "acc"));
    if let Some(e) = sp.extrapolation {
        s += &format!("{IN}if (ext) {{ v = {} * fac; }}\n", sx.f32(e));
    }
    s + &format!("{IN}out[i] = {store};\n")
}
