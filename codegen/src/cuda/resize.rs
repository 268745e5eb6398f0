//! Resize in CUDA ([`crate::lower::resize`]): every mode of ONNX Resize (nearest with
//! each `nearest_mode`, linear and cubic, antialiased or not, `exclude_outside`, every
//! `coordinate_transformation_mode`, `tf_crop_and_resize` with its extrapolation value)
//! over any rank. One thread per output element computes, for each resampled axis, its
//! source coordinate, taps and weights in f32, then sums the separable product of the
//! axes' weights over the taps (one loop per axis) and rounds once at the store,
//! saturated to the dtype's range as the interpreter saturates. Nearest resampling
//! copies one element as stored (any dtype but bool); linear and cubic resampling takes
//! f32, f16 or bf16 data. The code is the WGSL writer's (`wgsl/resize.rs`) line
//! for line, so what lavapipe runs vouches for it.

use super::elementwise::storage;
use super::support::{flit, store};
use super::Kernel;
use crate::lower::resize::{spec, Axis, ResizeSpec, Rounding, Weights};
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::{DType, Graph, Node};

const TEMPLATE: &str = include_str!("resize.cu");

/// The indentation of the loop body.
const IN: &str = "        ";

/// Emits the kernel for Resize node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let sp = spec(g, node)?;
    let nearest = sp.nearest();
    let mut axes = state(&sp, nearest);
    for (a, ax) in sp.axes.iter().enumerate() {
        axes += &coord(a, ax);
        axes += &if nearest {
            nearest_axis(a, ax, &sp, name)?
        } else {
            filter_axis(a, ax, &sp, name)?
        };
        axes += &extrapolates(a, ax, &sp, nearest);
    }
    let body = if nearest {
        nearest_body(&sp, name)?
    } else {
        filter_body(&sp, name)?
    };
    let max = sp.float_max().unwrap_or(f32::MAX);
    let source = fill(
        TEMPLATE,
        &[
            ("what", &describe(&sp)),
            (
                "how",
                if nearest {
                    "the tap each axis picks, copied"
                } else {
                    "the sum of the taps' products"
                },
            ),
            ("name", name),
            ("t", storage(sp.dtype)),
            ("max", &flit(max)),
            ("n", &sp.n.to_string()),
            ("decode", &decode(&sp)),
            ("axes", &axes),
            ("body", &body),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &node.name,
        source,
        sp.n,
        vec![sp.x.0],
        vec![sp.out.0],
    ))
}

/// The resampled axes for the kernel's header comment.
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
    let mut s = format!("{IN}long long r = i;\n");
    for (d, len) in sp.out_shape.iter().enumerate().rev() {
        s += &format!("{IN}const long long c{d} = r % {len}LL; r = r / {len}LL;\n");
    }
    let mut base = String::from("0LL");
    for (d, stride) in sp.in_strides.iter().enumerate() {
        if !sp.resampled(d) {
            base += &format!(" + c{d} * {stride}LL");
        }
    }
    s + &format!("{IN}(void)r;\n{IN}const long long base = {base};\n")
}

/// Axis `a`'s source coordinate `x{a}`, its floor `f{a}` and fractional part `r{a}`
/// (1 on a sample).
fn coord(a: usize, ax: &Axis) -> String {
    let c = ax.coord;
    format!(
        "{IN}// axis {d}: {i} -> {o}\n{IN}const float x{a} = (((float)c{d} + {pre}) * {mul}) / {div} + {add};\n{IN}const float f{a} = floorf(x{a});\n{IN}const float r{a} = (x{a} == f{a}) ? 1.0f : x{a} - f{a};\n",
        d = ax.axis,
        i = ax.in_len,
        o = ax.out_len,
        pre = flit(c.pre),
        mul = flit(c.mul),
        div = flit(c.div),
        add = flit(c.add),
    )
}

/// Nearest on axis `a`: the tap `t{a}` it picks, `u{a}` that tap clamped to the axis.
fn nearest_axis(a: usize, ax: &Axis, sp: &ResizeSpec, name: &str) -> Result<String> {
    let Weights::Nearest(rounding) = ax.weights else {
        return Err(CodegenError::Plan(
            "Resize: a nearest kernel with another filter".into(),
        ));
    };
    let up = match rounding {
        Rounding::RoundPreferFloor => format!("r{a} == 1.0f || r{a} > 0.5f"),
        Rounding::RoundPreferCeil => format!("r{a} == 1.0f || r{a} >= 0.5f"),
        Rounding::Floor => format!("r{a} == 1.0f"),
        Rounding::Ceil => "true".into(),
    };
    let last = ax.in_len - 1;
    let mut s = format!(
        "{IN}const int t{a} = {name}_first_tap(x{a}, 2) + (({up}) ? 1 : 0);\n{IN}const int u{a} = min(max(t{a}, 0), {last});\n{IN}off = off + (long long)u{a} * {}LL;\n",
        ax.stride,
    );
    if sp.exclude_outside {
        s += &format!("{IN}const bool in{a} = t{a} == u{a};\n");
    }
    Ok(s)
}

/// A linear or cubic filter on axis `a`: weights `w{a}` and input offsets `j{a}` of its
/// taps.
fn filter_axis(a: usize, ax: &Axis, sp: &ResizeSpec, name: &str) -> Result<String> {
    let n = ax.weights.taps();
    let last = ax.in_len - 1;
    let mut s = format!(
        "{IN}const int t{a} = {name}_first_tap(x{a}, {n});\n{IN}float w{a}[{n}];\n{IN}long long j{a}[{n}];\n"
    );
    s += &match ax.weights {
        Weights::Nearest(_) => {
            return Err(CodegenError::Plan(
                "Resize: a nearest axis in a filter kernel".into(),
            ))
        }
        Weights::Linear => format!("{IN}w{a}[0] = 1.0f - r{a};\n{IN}w{a}[1] = r{a};\n"),
        Weights::Cubic { a: coef } => format!(
            "{IN}const float4 q{a} = {name}_cubic4({}, r{a});\n{IN}w{a}[0] = q{a}.x;\n{IN}w{a}[1] = q{a}.y;\n{IN}w{a}[2] = q{a}.z;\n{IN}w{a}[3] = q{a}.w;\n",
            flit(coef)
        ),
        Weights::WideLinear { start, scale, .. } => normalized(
            a,
            n,
            &format!(
                "fminf(fmaxf(1.0f - fabsf(((float)(k + {start}) - r{a}) * {}), 0.0f), 1.0f)",
                flit(scale)
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
                "{name}_cubic({}, {} * ((float)(k + {start}) - r{a}))",
                flit(coef),
                flit(scale)
            ),
        ),
    };
    if sp.exclude_outside {
        s += &format!(
            "{IN}float e{a} = 0.0f;\n{IN}for (int k = 0; k < {n}; k = k + 1) {{\n{IN}    if (t{a} + k < 0 || t{a} + k > {last}) {{ w{a}[k] = 0.0f; }}\n{IN}    e{a} = e{a} + w{a}[k];\n{IN}}}\n{IN}if (e{a} == 0.0f) {{ e{a} = 1.0f; }}\n{IN}for (int k = 0; k < {n}; k = k + 1) {{ w{a}[k] = w{a}[k] / e{a}; }}\n"
        );
    }
    s += &format!(
        "{IN}for (int k = 0; k < {n}; k = k + 1) {{ j{a}[k] = (long long)min(max(t{a} + k, 0), {last}) * {}LL; }}\n",
        ax.stride
    );
    Ok(s)
}

/// Weights `w{a}[k] = v` (an expression of `k`) over `n` taps, divided by their sum.
fn normalized(a: usize, n: usize, v: &str) -> String {
    format!(
        "{IN}float s{a} = 0.0f;\n{IN}for (int k = 0; k < {n}; k = k + 1) {{\n{IN}    const float v = {v};\n{IN}    w{a}[k] = v;\n{IN}    s{a} = s{a} + v;\n{IN}}}\n{IN}for (int k = 0; k < {n}; k = k + 1) {{ w{a}[k] = w{a}[k] / s{a}; }}\n"
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
    let off = format!("x{a} < 0.0f || x{a} > {}", flit((ax.in_len - 1) as f32));
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
        "{IN}float z{a} = 0.0f;\n{IN}for (int k = 0; k < {n}; k = k + 1) {{ z{a} = z{a} + w{a}[k]; }}\n{IN}if ({off}) {{ ext = true; fac = 1.0f; }} else {{ fac = fac * z{a}; }}\n"
    )
}

/// The state the axes' code updates, declared before it.
fn state(sp: &ResizeSpec, nearest: bool) -> String {
    let mut s = String::new();
    if nearest {
        s += &format!("{IN}long long off = base;\n{IN}bool keep = true;\n");
    }
    if sp.extrapolation.is_some() {
        s += &format!("{IN}bool ext = false;\n");
        if !nearest {
            s += &format!("{IN}float fac = 1.0f;\n");
        }
    }
    s
}

/// The nearest element's store: copied (saturated for f32, f16 and bf16), or the
/// extrapolation value, or zero where an excluded tap was picked.
fn nearest_body(sp: &ResizeSpec, name: &str) -> Result<String> {
    let dt = sp.dtype;
    let t = storage(dt);
    let (load, extrap) = match dt {
        DType::F32 | DType::F16 | DType::BF16 => (
            store(dt, &format!("{name}_sat(gopt_ld(x[off]))")),
            sp.extrapolation
                .map(|v| store(dt, &format!("{name}_sat({})", flit(v)))),
        ),
        // f64 is copied (the interpreter does not clamp it); its extrapolation value
        // is the f32 attribute widened.
        DType::F64 => (
            "x[off]".to_string(),
            sp.extrapolation.map(|v| format!("(double){}", flit(v))),
        ),
        DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => (
            "x[off]".to_string(),
            sp.int_extrapolation()
                .map(|v| format!("(({t}){}ULL)", v as u64)),
        ),
        DType::Bool => return Err(CodegenError::Plan("Resize of bool data".into())),
    };
    let mut s = format!("{IN}{t} v = {load};\n");
    if let Some(e) = extrap {
        s += &format!("{IN}if (ext) {{ v = {e}; }}\n");
    }
    s += &format!("{IN}if (!keep) {{ v = ({t})0; }}\n{IN}out[i] = v;\n");
    Ok(s)
}

/// The filter's sum over every axis' taps (one loop per axis, outermost first), the
/// extrapolation value where an axis is off, saturated and stored.
fn filter_body(sp: &ResizeSpec, name: &str) -> Result<String> {
    let dt = sp.dtype;
    if !matches!(dt, DType::F32 | DType::F16 | DType::BF16) {
        return Err(CodegenError::Plan(format!(
            "Resize: a linear or cubic filter over {dt} data"
        )));
    }
    let mut s = format!("{IN}float acc = 0.0f;\n");
    let (mut off, mut w) = ("base".to_string(), "1.0f".to_string());
    let mut close = String::new();
    for (a, ax) in sp.axes.iter().enumerate() {
        let ind = " ".repeat(8 + 4 * a);
        let n = ax.weights.taps();
        s += &format!(
            "{ind}for (int k{a} = 0; k{a} < {n}; k{a} = k{a} + 1) {{\n{ind}    const long long o{a} = {off} + j{a}[k{a}];\n{ind}    const float p{a} = {w} * w{a}[k{a}];\n"
        );
        close = format!("{ind}}}\n{close}");
        (off, w) = (format!("o{a}"), format!("p{a}"));
    }
    let ind = " ".repeat(8 + 4 * sp.axes.len());
    s += &format!("{ind}acc = acc + {w} * gopt_ld(x[{off}]);\n{close}");
    s += &format!("{IN}float v = acc;\n");
    if let Some(e) = sp.extrapolation {
        s += &format!("{IN}if (ext) {{ v = {} * fac; }}\n", flit(e));
    }
    s += &format!("{IN}out[i] = {};\n", store(dt, &format!("{name}_sat(v)")));
    Ok(s)
}
