//! Conv and FusedConv of 3 spatial dims in CUDA: a direct kernel, one thread per output
//! element summing its group's input channels × kernel taps in f32, with strides,
//! dilations, begin pads, groups, NCDHW or channels-last, and FusedConv's epilogue
//! (bias, activation, broadcast residual in the node's order), one rounding at the
//! store. The node is read by [`crate::lower::conv_nd`]; the kernel is a line-by-line
//! mirror of the WGSL one (same decode, loops, bounds checks and epilogue), so what
//! lavapipe verifies there holds here. f32/f16/bf16 storage; sizes are baked into the
//! source (offsets in 64-bit integers, tap coordinates in `int`).

use super::elementwise::storage;
use super::support::{activation, store, unsupported};
use super::Kernel;
use crate::lower::conv_nd::{spec, ConvNdSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::fused::{Activation, EpilogueOrder};
use gopt_ir::{Graph, Node};

const TEMPLATE: &str = include_str!("conv_nd.cu");

/// Spatial sizes, strides and pads at or above this are refused (the tap coordinates
/// are computed in `int`).
const COORD_LIMIT: usize = 1 << 24;

/// The output coordinates `n, oc, od, oh, ow` of element `i` (Y's layout order, last
/// axis fastest).
fn decode(s: &ConvNdSpec) -> String {
    let [od, oh, ow] = s.output;
    let m = s.m;
    let p = " ".repeat(8);
    if s.channels_last {
        format!(
            "{p}const long long oc = i % {m}LL; long long r = i / {m}LL;\n{p}const long long ow = r % {ow}LL; r = r / {ow}LL;\n{p}const long long oh = r % {oh}LL; r = r / {oh}LL;\n{p}const long long od = r % {od}LL; const long long n = r / {od}LL;\n"
        )
    } else {
        format!(
            "{p}const long long ow = i % {ow}LL; long long r = i / {ow}LL;\n{p}const long long oh = r % {oh}LL; r = r / {oh}LL;\n{p}const long long od = r % {od}LL; r = r / {od}LL;\n{p}const long long oc = r % {m}LL; const long long n = r / {m}LL;\n"
        )
    }
}

/// X's offset of the output's image and group's first channel (`xbase`), of input
/// position (`xd`, `xh`, `xw`) from there (`xoff`), and the stride between channels.
fn x_index(s: &ConvNdSpec) -> (String, String, usize) {
    let ([_, h, w], c, cg, pos) = (s.input, s.c, s.cg(), s.in_positions());
    let spatial = format!("((long long)xd * {h}LL + xh) * {w}LL + xw");
    if s.channels_last {
        (
            format!("n * {}LL + g * {cg}LL", pos * c),
            format!("({spatial}) * {c}LL"),
            1,
        )
    } else {
        (format!("(n * {c}LL + g * {cg}LL) * {pos}LL"), spatial, pos)
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
        .map(|(c, st)| format!("{c} * {st}LL"))
        .collect();
    crate::lower::index::sum(&terms, "0LL")
}

/// The epilogue for `acc_`: bias, then activation and residual in the node's order, one
/// rounding at the store of `out[i]`.
fn epilogue(s: &ConvNdSpec) -> String {
    let mut lines = vec!["float v = acc_;".to_string()];
    if s.bias.is_some() {
        lines.push("v = v + gopt_ld(bias[oc]);".into());
    }
    let act = if s.act == Activation::None {
        String::new()
    } else {
        format!("v = {};", activation(s.act, "v"))
    };
    let res = s
        .residual
        .as_ref()
        .map(|r| {
            format!(
                "v = v + gopt_ld(res[{}]);",
                residual_index(s, &r.strides, r.full)
            )
        })
        .unwrap_or_default();
    match s.order {
        EpilogueOrder::ActThenResidual => lines.extend([act, res]),
        EpilogueOrder::ResidualThenAct => lines.extend([res, act]),
    }
    lines.push(format!("out[i] = {};", store(s.out_dt, "v")));
    lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| format!("        {l}\n"))
        .collect()
}

/// The kernel parameter list: x, w, bias?, res?, out.
fn params(s: &ConvNdSpec) -> String {
    let t = storage(s.x_dt);
    let mut p = vec![
        format!("const {t}* __restrict__ x"),
        format!("const {t}* __restrict__ w"),
    ];
    if let Some(b) = s.bias {
        p.push(format!("const {}* __restrict__ bias", storage(b.dtype)));
    }
    if let Some(r) = &s.residual {
        p.push(format!(
            "const {}* __restrict__ res",
            storage(r.operand.dtype)
        ));
    }
    p.push(format!("{}* __restrict__ out", storage(s.out_dt)));
    p.join(", ")
}

/// Refuses sizes the `int` tap coordinates cannot hold.
fn check_sizes(s: &ConvNdSpec, node: &Node) -> Result<()> {
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

/// Emits the kernel for a Conv or FusedConv node of 3 spatial dims.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let s = spec(g, node).map_err(|e| e.for_backend("CUDA"))?;
    check_sizes(&s, node)?;
    let (xbase, xoff, xcs) = x_index(&s);
    let total = s.total();
    let ([d, h, w], [kd, kh, kw]) = (s.input, s.kernel);
    let ([sd, sh, sw], [dd, dh, dw], [pd, ph, pw]) = (s.stride, s.dilation, s.pad);
    let n = |v: usize| v.to_string();
    let source = fill(
        TEMPLATE,
        &[
            ("what", node.op.name()),
            ("desc", &s.describe()),
            ("name", name),
            ("params", &params(&s)),
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
            ("epilogue", &epilogue(&s)),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &node.name,
        source,
        total,
        s.inputs(),
        vec![s.y.0],
    ))
}
