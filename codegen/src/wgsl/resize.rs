//! Resize in WGSL: every mode of ONNX Resize (nearest with each `nearest_mode`, linear
//! and cubic, antialiased or not, `exclude_outside`, every
//! `coordinate_transformation_mode`, `tf_crop_and_resize` with its extrapolation value)
//! over any rank. One invocation per output element computes, for each resampled axis,
//! its source coordinate, taps and weights in f32, then sums the separable product of
//! the axes' weights over the taps (one loop per axis) and rounds once at the store,
//! saturated to the dtype's range as the interpreter saturates. Nearest resampling
//! copies one element as stored (any dtype WGSL storage holds); linear and cubic
//! resampling takes f32 or f16 data. The node is read once, for both backends, by
//! [`crate::lower::resize`]; the CUDA writer spells the same code line for line.

use super::types::{f32_literal, helpers_for, kind, Kind};
use super::unsupported;
use super::WgslKernel;
use crate::lower::resize::{spec, Axis, ResizeSpec, Rounding, Weights};
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, Graph, Node};

const TEMPLATE: &str = include_str!("resize.wgsl");

/// The indentation of the loop body.
const IN: &str = "        ";

/// Emits the shader for Resize node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let sp = spec(g, node)?;
    let dt = sp.dtype;
    let (t, _) = super::storage_type(dt).ok_or_else(|| unsupported(node, format!("{dt} data")))?;
    let n = u32::try_from(sp.n).map_err(|_| unsupported(node, "more than 2^32 elements"))?;
    if sp.n >= 1 << 31 || sp.in_len >= 1 << 31 {
        return Err(unsupported(node, "tensors of 2^31 elements or more"));
    }
    let nearest = sp.nearest();
    let mut axes = state(&sp, nearest);
    for (a, ax) in sp.axes.iter().enumerate() {
        axes += &coord(a, ax);
        axes += &if nearest {
            nearest_axis(a, ax, &sp)?
        } else {
            filter_axis(a, ax, &sp)?
        };
        axes += &extrapolates(a, ax, &sp, nearest);
    }
    let body = if nearest {
        nearest_body(&sp, t)?
    } else {
        filter_body(&sp)?
    };
    let max = sp.float_max().unwrap_or(f32::MAX);
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", &describe(&sp)),
            (
                "how",
                if nearest {
                    "the tap each axis picks, copied"
                } else {
                    "the sum of the taps' products"
                },
            ),
            ("t", t),
            ("max", &f32_literal(max)),
            ("n", &n.to_string()),
            ("decode", &decode(&sp)),
            ("axes", &axes),
            ("body", &body),
        ],
    )?;
    // `gopt_div`: WGSL's `/` may be 2.5 ULP off, which moves a coordinate that must be
    // an integer below it.
    let source = format!("{source}\n{}", helpers_for(&source));
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [n.div_ceil(super::WORKGROUP).clamp(1, 65535), 1, 1],
        inputs: vec![sp.x.0],
        outputs: vec![sp.out.0],
        index_check: None,
        loop_iterations: None,
    })
}

/// The resampled axes for the shader's header comment.
fn describe(sp: &ResizeSpec) -> String {
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

/// Output coordinates `c{d}` of element `i`, and `base`, the input offset of the axes
/// that are not resampled.
fn decode(sp: &ResizeSpec) -> String {
    let mut s = format!("{IN}var r: u32 = i;\n");
    for (d, len) in sp.out_shape.iter().enumerate().rev() {
        s += &format!("{IN}let c{d} = r % {len}u; r = r / {len}u;\n");
    }
    let mut base = String::from("0u");
    for (d, stride) in sp.in_strides.iter().enumerate() {
        if !sp.resampled(d) {
            base += &format!(" + c{d} * {stride}u");
        }
    }
    s + &format!("{IN}let base = {base};\n")
}

/// Axis `a`'s source coordinate `x{a}`, its floor `f{a}` and fractional part `r{a}`
/// (1 on a sample).
fn coord(a: usize, ax: &Axis) -> String {
    let c = ax.coord;
    format!(
        "{IN}// axis {d}: {i} -> {o}\n{IN}let x{a} = gopt_div((f32(c{d}) + {pre}) * {mul}, {div}) + {add};\n{IN}let f{a} = floor(x{a});\n{IN}let r{a} = select(x{a} - f{a}, 1.0, x{a} == f{a});\n",
        d = ax.axis,
        i = ax.in_len,
        o = ax.out_len,
        pre = f32_literal(c.pre),
        mul = f32_literal(c.mul),
        div = f32_literal(c.div),
        add = f32_literal(c.add),
    )
}

/// Nearest on axis `a`: the tap `t{a}` it picks, `u{a}` that tap clamped to the axis.
fn nearest_axis(a: usize, ax: &Axis, sp: &ResizeSpec) -> Result<String> {
    let Weights::Nearest(rounding) = ax.weights else {
        return Err(crate::CodegenError::Plan(
            "Resize: a nearest kernel with another filter".into(),
        ));
    };
    let up = match rounding {
        Rounding::RoundPreferFloor => format!("r{a} == 1.0 || r{a} > 0.5"),
        Rounding::RoundPreferCeil => format!("r{a} == 1.0 || r{a} >= 0.5"),
        Rounding::Floor => format!("r{a} == 1.0"),
        Rounding::Ceil => "true".into(),
    };
    let last = ax.in_len - 1;
    let mut s = format!(
        "{IN}let t{a} = first_tap(x{a}, 2) + select(0, 1, {up});\n{IN}let u{a} = clamp(t{a}, 0, {last});\n{IN}off = off + u32(u{a}) * {}u;\n",
        ax.stride
    );
    if sp.exclude_outside {
        s += &format!("{IN}let in{a} = t{a} == u{a};\n");
    }
    Ok(s)
}

/// A linear or cubic filter on axis `a`: weights `w{a}` and input offsets `j{a}` of its
/// taps.
fn filter_axis(a: usize, ax: &Axis, sp: &ResizeSpec) -> Result<String> {
    let n = ax.weights.taps();
    let last = ax.in_len - 1;
    let mut s = format!(
        "{IN}let t{a} = first_tap(x{a}, {n});\n{IN}var w{a}: array<f32, {n}>;\n{IN}var j{a}: array<u32, {n}>;\n"
    );
    s += &match ax.weights {
        Weights::Nearest(_) => {
            return Err(crate::CodegenError::Plan(
                "Resize: a nearest axis in a filter kernel".into(),
            ))
        }
        Weights::Linear => format!("{IN}w{a}[0] = 1.0 - r{a};\n{IN}w{a}[1] = r{a};\n"),
        Weights::Cubic { a: coef } => format!(
            "{IN}let q{a} = cubic4({}, r{a});\n{IN}w{a}[0] = q{a}.x;\n{IN}w{a}[1] = q{a}.y;\n{IN}w{a}[2] = q{a}.z;\n{IN}w{a}[3] = q{a}.w;\n",
            f32_literal(coef)
        ),
        Weights::WideLinear { start, scale, .. } => normalized(
            a,
            n,
            &format!(
                "clamp(1.0 - abs((f32(k + {start}) - r{a}) * {}), 0.0, 1.0)",
                f32_literal(scale)
            ),
        ),
        Weights::WideCubic {
            a: coef,
            start,
            scale,
            ..
        } => normalized(
            a,
            n,
            &format!(
                "cubic({}, {} * (f32(k + {start}) - r{a}))",
                f32_literal(coef),
                f32_literal(scale)
            ),
        ),
    };
    if sp.exclude_outside {
        s += &format!(
            "{IN}var e{a}: f32 = 0.0;\n{IN}for (var k: i32 = 0; k < {n}; k = k + 1) {{\n{IN}    if (t{a} + k < 0 || t{a} + k > {last}) {{ w{a}[k] = 0.0; }}\n{IN}    e{a} = e{a} + w{a}[k];\n{IN}}}\n{IN}if (e{a} == 0.0) {{ e{a} = 1.0; }}\n{IN}for (var k: i32 = 0; k < {n}; k = k + 1) {{ w{a}[k] = w{a}[k] / e{a}; }}\n"
        );
    }
    s += &format!(
        "{IN}for (var k: i32 = 0; k < {n}; k = k + 1) {{ j{a}[k] = u32(clamp(t{a} + k, 0, {last})) * {}u; }}\n",
        ax.stride
    );
    Ok(s)
}

/// Weights `w{a}[k] = v` (an expression of `k`) over `n` taps, divided by their sum.
fn normalized(a: usize, n: usize, v: &str) -> String {
    format!(
        "{IN}var s{a}: f32 = 0.0;\n{IN}for (var k: i32 = 0; k < {n}; k = k + 1) {{\n{IN}    let v = {v};\n{IN}    w{a}[k] = v;\n{IN}    s{a} = s{a} + v;\n{IN}}}\n{IN}for (var k: i32 = 0; k < {n}; k = k + 1) {{ w{a}[k] = w{a}[k] / s{a}; }}\n"
    )
}

/// With `tf_crop_and_resize`: whether axis `a`'s coordinate is off the axis (`ext`, and
/// the factor its extrapolated rows are scaled by restarts), else the factor takes this
/// axis' weight sum (nearest: whether its tap counts, `keep`).
fn extrapolates(a: usize, ax: &Axis, sp: &ResizeSpec, nearest: bool) -> String {
    if sp.extrapolation.is_none() {
        return if nearest && sp.exclude_outside {
            format!("{IN}keep = keep && in{a};\n")
        } else {
            String::new()
        };
    }
    let off = format!(
        "x{a} < 0.0 || x{a} > {}",
        f32_literal((ax.in_len - 1) as f32)
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
        "{IN}var z{a}: f32 = 0.0;\n{IN}for (var k: i32 = 0; k < {n}; k = k + 1) {{ z{a} = z{a} + w{a}[k]; }}\n{IN}if ({off}) {{ ext = true; fac = 1.0; }} else {{ fac = fac * z{a}; }}\n"
    )
}

/// The state the axes' code updates, declared before it.
fn state(sp: &ResizeSpec, nearest: bool) -> String {
    let mut s = String::new();
    if nearest {
        s += &format!("{IN}var off: u32 = base;\n{IN}var keep = true;\n");
    }
    if sp.extrapolation.is_some() {
        s += &format!("{IN}var ext = false;\n");
        if !nearest {
            s += &format!("{IN}var fac: f32 = 1.0;\n");
        }
    }
    s
}

/// The nearest element's store: copied (saturated for floats), or the extrapolation
/// value, or zero where an excluded tap was picked.
fn nearest_body(sp: &ResizeSpec, t: &str) -> Result<String> {
    let dt = sp.dtype;
    let (load, extrap) = match kind(dt) {
        Some(Kind::Float) => (
            store_float(dt, "sat(f32(x[off]))"),
            sp.extrapolation
                .map(|v| store_float(dt, &format!("sat({})", f32_literal(v)))),
        ),
        Some(Kind::Int | Kind::Uint | Kind::Wide) => (
            "x[off]".to_string(),
            sp.int_extrapolation().and_then(|v| int_literal(dt, v)),
        ),
        Some(Kind::Bool) | None => {
            return Err(crate::CodegenError::Plan(format!("Resize of {dt} data")))
        }
    };
    let mut s = format!("{IN}var v = {load};\n");
    if let Some(e) = extrap {
        s += &format!("{IN}if (ext) {{ v = {e}; }}\n");
    }
    s += &format!("{IN}if (!keep) {{ v = {t}(); }}\n{IN}out[i] = v;\n");
    Ok(s)
}

/// The filter's sum over every axis' taps (one loop per axis, outermost first), the
/// extrapolation value where an axis is off, saturated and stored.
fn filter_body(sp: &ResizeSpec) -> Result<String> {
    let dt = sp.dtype;
    if kind(dt) != Some(Kind::Float) {
        return Err(crate::CodegenError::Plan(format!(
            "Resize: a linear or cubic filter over {dt} data"
        )));
    }
    let mut s = format!("{IN}var acc: f32 = 0.0;\n");
    let (mut off, mut w) = ("base".to_string(), "1.0".to_string());
    let mut close = String::new();
    for (a, ax) in sp.axes.iter().enumerate() {
        let ind = " ".repeat(8 + 4 * a);
        let n = ax.weights.taps();
        s += &format!(
            "{ind}for (var k{a}: i32 = 0; k{a} < {n}; k{a} = k{a} + 1) {{\n{ind}    let o{a} = {off} + j{a}[k{a}];\n{ind}    let p{a} = {w} * w{a}[k{a}];\n"
        );
        close = format!("{ind}}}\n{close}");
        (off, w) = (format!("o{a}"), format!("p{a}"));
    }
    let ind = " ".repeat(8 + 4 * sp.axes.len());
    s += &format!("{ind}acc = acc + {w} * f32(x[{off}]);\n{close}");
    s += &format!("{IN}var v = acc;\n");
    if let Some(e) = sp.extrapolation {
        s += &format!("{IN}if (ext) {{ v = {} * fac; }}\n", f32_literal(e));
    }
    s += &format!("{IN}out[i] = {};\n", store_float(dt, "sat(v)"));
    Ok(s)
}

/// An f32 value as a float dtype's storage element.
fn store_float(dt: DType, v: &str) -> String {
    match dt {
        DType::F16 => format!("f16({v})"),
        _ => v.to_string(),
    }
}

/// The integer `v` (in `dt`'s range) as `dt`'s storage element (`None` for floats).
fn int_literal(dt: DType, v: i128) -> Option<String> {
    Some(match dt {
        DType::I64 | DType::U64 => {
            let b = v as u64;
            format!("vec2<u32>({}u, {}u)", b as u32, (b >> 32) as u32)
        }
        DType::I8 | DType::I16 | DType::I32 => format!("bitcast<i32>({}u)", v as i32 as u32),
        DType::U8 | DType::U16 | DType::U32 | DType::Bool => format!("{}u", v as u32),
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 => return None,
    })
}
