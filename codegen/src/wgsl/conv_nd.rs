//! Conv and FusedConv of 3 spatial dims in WGSL: a direct shader, one invocation per
//! output element summing its group's input channels × kernel taps in f32, with strides,
//! dilations, begin pads, groups, NCDHW or channels-last, and FusedConv's epilogue (bias,
//! activation, broadcast residual in the node's order), one rounding at the store. The
//! node is read by [`crate::lower::conv_nd`], as on CUDA, whose kernel mirrors this one
//! line by line. f32/f16 storage (bf16 has no WGSL form and is refused); sizes are
//! baked into the source so the index math divides by constants, in u32 (tensors below
//! 2^31 elements).

use super::types::helpers_for;
use super::unsupported;
use super::WgslKernel;
use crate::lower::conv_nd::{spec, ConvNdSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::fused::{Activation, EpilogueOrder};
use gopt_ir::{DType, Graph, Node};

const TEMPLATE: &str = include_str!("conv_nd.wgsl");

/// Spatial sizes, strides and pads at or above this are refused (the tap coordinates
/// are computed in i32).
const COORD_LIMIT: usize = 1 << 24;

/// The WGSL storage type of a float operand.
fn storage(node: &Node, dt: DType, what: &str) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(unsupported(node, format!("{other} {what}"))),
    }
}

/// A finite f32 literal of clip bound `v`.
fn lit(v: f64) -> String {
    format!("{:?}", v as f32)
}

/// `act(v)` for the f32 variable `v`, as a statement (NaN stays NaN through relu and
/// clip, as in the IR's `Activation::apply`; an infinite clip bound clamps nothing).
fn activation(act: Activation) -> String {
    match act {
        Activation::None => String::new(),
        Activation::Relu => "v = select(v, 0.0, v <= 0.0);".into(),
        Activation::Clip { lo, hi } => {
            let mut s = Vec::new();
            if lo > f64::NEG_INFINITY {
                s.push(format!("v = select(v, {}, v < {});", lit(lo), lit(lo)));
            }
            if hi < f64::INFINITY {
                s.push(format!("v = select(v, {}, v > {});", lit(hi), lit(hi)));
            }
            s.join(" ")
        }
        Activation::Silu => "v = v * gopt_sigmoid(v);".into(),
        Activation::Sigmoid => "v = gopt_sigmoid(v);".into(),
        Activation::Tanh => "v = gopt_tanh(v);".into(),
        Activation::Gelu => "v = 0.5 * v * (1.0 + gopt_erf(v * 0.70710678118654752));".into(),
        Activation::GeluTanh => {
            "v = 0.5 * v * (1.0 + gopt_tanh(0.79788456080286536 * (v + 0.044715 * v * v * v)));"
                .into()
        }
    }
}

/// The output coordinates `n, oc, od, oh, ow` of element `i` (Y's layout order, last
/// axis fastest).
fn decode(s: &ConvNdSpec) -> String {
    let [od, oh, ow] = s.output;
    let m = s.m;
    let p = " ".repeat(8);
    if s.channels_last {
        format!(
            "{p}let oc = i % {m}u; var r = i / {m}u;\n{p}let ow = r % {ow}u; r = r / {ow}u;\n{p}let oh = r % {oh}u; r = r / {oh}u;\n{p}let od = r % {od}u; let n = r / {od}u;\n"
        )
    } else {
        format!(
            "{p}let ow = i % {ow}u; var r = i / {ow}u;\n{p}let oh = r % {oh}u; r = r / {oh}u;\n{p}let od = r % {od}u; r = r / {od}u;\n{p}let oc = r % {m}u; let n = r / {m}u;\n"
        )
    }
}

/// X's offset of the output's image and group's first channel (`xbase`), of input
/// position (`xd`, `xh`, `xw`) from there (`xoff`), and the stride between channels.
fn x_index(s: &ConvNdSpec) -> (String, String, usize) {
    let ([_, h, w], c, cg, pos) = (s.input, s.c, s.cg(), s.in_positions());
    let spatial = format!("(u32(xd) * {h}u + u32(xh)) * {w}u + u32(xw)");
    if s.channels_last {
        (
            format!("n * {}u + g * {cg}u", pos * c),
            format!("({spatial}) * {c}u"),
            1,
        )
    } else {
        (format!("(n * {c}u + g * {cg}u) * {pos}u"), spatial, pos)
    }
}

/// The residual's offset for output element `i` (numpy broadcasting).
fn residual_index(s: &ConvNdSpec, strides: &[usize; 5], full: bool) -> String {
    if full {
        return "i".into();
    }
    let coords = if s.channels_last {
        ["n", "od", "oh", "ow", "oc"]
    } else {
        ["n", "oc", "od", "oh", "ow"]
    };
    let terms: Vec<String> = coords
        .iter()
        .zip(strides)
        .filter(|(_, &st)| st != 0)
        .map(|(c, st)| format!("{c} * {st}u"))
        .collect();
    crate::lower::index::sum(&terms, "0u")
}

/// The epilogue for `acc_`: bias, then activation and residual in the node's order, one
/// rounding at the store of `y[i]`.
fn epilogue(s: &ConvNdSpec, ost: &str) -> String {
    let mut lines = vec!["var v: f32 = acc_;".to_string()];
    if s.bias.is_some() {
        lines.push("v = v + f32(bias[oc]);".into());
    }
    let act = activation(s.act);
    let res = s
        .residual
        .as_ref()
        .map(|r| {
            format!(
                "v = v + f32(res[{}]);",
                residual_index(s, &r.strides, r.full)
            )
        })
        .unwrap_or_default();
    match s.order {
        EpilogueOrder::ActThenResidual => lines.extend([act, res]),
        EpilogueOrder::ResidualThenAct => lines.extend([res, act]),
    }
    lines.push(format!("y[i] = {ost}(v);"));
    lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| format!("        {l}\n"))
        .collect()
}

/// The bindings: x, w, bias?, res? (read), y (read-write); and whether any is f16.
fn bindings(s: &ConvNdSpec, node: &Node, ost: &str) -> Result<(String, bool)> {
    let mut operands = vec![("x", s.x_dt, "convolutions"), ("w", s.x_dt, "convolutions")];
    operands.extend(s.bias.map(|b| ("bias", b.dtype, "biases")));
    operands.extend(
        s.residual
            .as_ref()
            .map(|r| ("res", r.operand.dtype, "residuals")),
    );
    let mut lines = Vec::new();
    for (i, &(v, dt, what)) in operands.iter().enumerate() {
        let t = storage(node, dt, what)?;
        lines.push(format!(
            "@group(0) @binding({i}) var<storage, read> {v}: array<{t}>;"
        ));
    }
    lines.push(format!(
        "@group(0) @binding({}) var<storage, read_write> y: array<{ost}>;",
        operands.len()
    ));
    let f16 = ost == "f16" || operands.iter().any(|o| o.1 == DType::F16);
    Ok((lines.join("\n"), f16))
}

/// Refuses sizes the u32 offsets and i32 tap coordinates cannot hold.
fn check_sizes(s: &ConvNdSpec, node: &Node) -> Result<()> {
    if s.largest() >= 1 << 31 {
        return Err(unsupported(node, "tensors of 2^31 elements or more"));
    }
    let too_far = (0..3).any(|i| {
        s.input[i].max(s.output[i] * s.stride[i]) >= COORD_LIMIT
            || s.kernel[i] * s.dilation[i] >= COORD_LIMIT
            || s.pad[i] >= COORD_LIMIT
    });
    if too_far {
        return Err(unsupported(
            node,
            "spatial sizes, strides or pads of 2^24 or more",
        ));
    }
    Ok(())
}

/// Emits the shader for a Conv or FusedConv node of 3 spatial dims.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let s = spec(g, node).map_err(|e| e.for_backend(super::BACKEND))?;
    let ost = storage(node, s.out_dt, "outputs")?;
    let (bindings, f16) = bindings(&s, node, ost)?;
    check_sizes(&s, node)?;
    let epilogue = epilogue(&s, ost);
    let (xbase, xoff, xcs) = x_index(&s);
    let total = s.total();
    let ([d, h, w], [kd, kh, kw]) = (s.input, s.kernel);
    let ([sd, sh, sw], [dd, dh, dw], [pd, ph, pw]) = (s.stride, s.dilation, s.pad);
    let n = |v: usize| v.to_string();
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(f16)),
            ("what", node.op.name()),
            ("desc", &s.describe()),
            ("bindings", &bindings),
            ("helpers", &helpers_for(&epilogue)),
            ("total", &n(total)),
            ("decode", &decode(&s)),
            ("mg", &n(s.mg())),
            ("xbase", &xbase),
            ("wrow", &n(s.cg() * s.taps())),
            ("kd", &n(kd)),
            ("kh", &n(kh)),
            ("kw", &n(kw)),
            ("sd", &n(sd)),
            ("sh", &n(sh)),
            ("sw", &n(sw)),
            ("dd", &n(dd)),
            ("dh", &n(dh)),
            ("dw", &n(dw)),
            ("pd", &n(pd)),
            ("ph", &n(ph)),
            ("pw", &n(pw)),
            ("d", &n(d)),
            ("h", &n(h)),
            ("w", &n(w)),
            ("xoff", &xoff),
            ("cg", &n(s.cg())),
            ("xcs", &n(xcs)),
            ("taps", &n(s.taps())),
            ("epilogue", &epilogue),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [
            u32::try_from(total.div_ceil(super::WORKGROUP as usize).clamp(1, 65535))
                .unwrap_or(65535),
            1,
            1,
        ],
        inputs: s.inputs(),
        outputs: vec![s.y.0],
        index_check: None,
        loop_iterations: None,
    })
}
