//! Convolutions in WGSL: ONNX `Conv` and `FusedConv` (`act(conv(X, W) + B) + residual`,
//! or `act(conv(X, W) + B + residual)` with `epilogue="bias_residual_act"`), 1-D and
//! 2-D, any group, strides, dilations, explicit pads or `auto_pad`, NCHW or
//! channels-last (`layout="NHWC"`), f32/f16 data with f32 accumulation and one rounding
//! at the store. The node is read by [`crate::lower::conv::spec`], as on CUDA (so
//! both backends accept and refuse the same modes; bf16 has no WGSL form and is
//! refused here). One input channel per group (depthwise) runs a direct shader, one
//! invocation per output; every other convolution runs as an implicit GEMM per group
//! with the GEMM's register tiling (`gemm_tile.rs`: tile by problem size, 8×8 / 4×4
//! vec4 outer products per invocation), the im2col tile gathered on the fly into
//! workgroup memory (`conv.wgsl`), with K in the order that makes the gather
//! contiguous: (channel, tap) for NCHW, (tap, channel) for NHWC, loaded as vec4 along
//! channels for NHWC when a group's channels come in fours. Sizes are baked into the source so index math divides by constants.

use super::gemm_tile::{tile, Operand};
use super::WgslKernel;
use crate::lower::conv::ConvSpec;
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::fused::{Activation, EpilogueOrder};
use gopt_ir::DType;

const GEMM: &str = include_str!("conv.wgsl");
const DIRECT: &str = include_str!("conv_direct.wgsl");

/// The activation helpers every convolution shader carries.
const HELPERS: &str = include_str!("conv_act.wgsl");

fn storage(s: &ConvSpec, dt: DType, what: &str) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(s.site.unsupported(&format!("{other} {what}"))),
    }
}

/// `act(v)` for the f32 variable `v` (NaN stays NaN through relu and clip).
fn activation(act: Activation) -> String {
    match act {
        Activation::None => String::new(),
        Activation::Relu => "v = select(v, 0.0, v <= 0.0);".into(),
        Activation::Clip { lo, hi } => {
            // Infinite bounds clamp to the largest finite f32.
            let f = |v: f64| format!("{:?}", v.clamp(f32::MIN.into(), f32::MAX.into()) as f32);
            format!("v = select(select(v, {}, v > {}), {}, v < {});", f(hi), f(hi), f(lo), f(lo))
        }
        Activation::Silu => "v = v * gopt_sigmoid(v);".into(),
        Activation::Sigmoid => "v = gopt_sigmoid(v);".into(),
        Activation::Tanh => "v = tanh(clamp(v, -10.0, 10.0));".into(),
        Activation::Gelu => "v = 0.5 * v * (1.0 + gopt_erf(v * 0.7071067812));".into(),
        Activation::GeluTanh => {
            "v = 0.5 * v * (1.0 + tanh(clamp(0.7978845608 * (v + 0.044715 * v * v * v), -10.0, 10.0)));".into()
        }
    }
}

/// The epilogue for `acc_` of output channel `oc`, image `n`, position `p` (u32 in
/// scope): bias, then activation and broadcast residual in the node's order, one
/// rounding at the store.
fn epilogue(s: &ConvSpec, ost: &str, indent: usize) -> String {
    let y = s.y_index("u");
    let mut lines = vec!["var v: f32 = acc_;".to_string()];
    if s.bias.is_some() {
        lines.push("v = v + f32(bias[oc]);".into());
    }
    let act_at = lines.len();
    if let Some((_, rs)) = &s.residual {
        let idx = s.residual_index(rs, &y, "u", "0u");
        lines.push(format!("v = v + f32(res[{idx}]);"));
    }
    match s.order {
        EpilogueOrder::ActThenResidual => lines.insert(act_at, activation(s.act)),
        EpilogueOrder::ResidualThenAct => lines.push(activation(s.act)),
    }
    lines.push(format!("y[{y}] = {ost}(v);"));
    let pad = " ".repeat(indent);
    lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| format!("{pad}{l}\n"))
        .collect()
}

/// Emits the shader for a Conv or FusedConv node.
pub fn emit(s: &ConvSpec, name: &str) -> Result<WgslKernel> {
    let ost = storage(s, s.out_dt, "outputs")?;
    let mut operands = vec![("x", s.x_dt, "convolutions"), ("w", s.x_dt, "convolutions")];
    operands.extend(s.bias.map(|b| ("bias", b, "biases")));
    operands.extend(s.residual.as_ref().map(|r| ("res", r.0, "residuals")));
    let mut bindings = Vec::new();
    let (w_vec, x_vec) = if s.cg() == 1 {
        (false, false)
    } else {
        vec_loads(s)
    };
    for (i, &(v, dt, what)) in operands.iter().enumerate() {
        let t = storage(s, dt, what)?;
        let vec = (v == "w" && w_vec) || (v == "x" && x_vec);
        let t = if vec {
            format!("vec4<{t}>")
        } else {
            t.to_string()
        };
        bindings.push(format!(
            "@group(0) @binding({i}) var<storage, read> {v}: array<{t}>;"
        ));
    }
    let i = operands.len();
    bindings.push(format!(
        "@group(0) @binding({i}) var<storage, read_write> y: array<{ost}>;"
    ));
    let f16 = s.out_dt == DType::F16 || operands.iter().any(|o| o.1 == DType::F16);
    let big = (s.n * s.c * s.h * s.w)
        .max(s.y_shape.iter().product())
        .max(s.m * s.cg() * s.taps());
    if big >= 1 << 31 || s.h.max(s.w) * s.stride.0.max(s.stride.1) >= 1 << 20 {
        return Err(s.site.unsupported("tensors of 2^31 elements or more"));
    }
    let common = [
        ("enable", super::enable_f16(f16).to_string()),
        ("what", s.site.op.to_string()),
        ("bindings", bindings.join("\n")),
        ("helpers", HELPERS.to_string()),
    ];
    let (source, workgroups) = if s.cg() == 1 {
        direct(s, ost, &common)?
    } else {
        gemm(s, ost, &common)?
    };
    Ok(WgslKernel {
        name: name.to_string(),
        node: s.site.node.clone(),
        source,
        workgroups,
        inputs: s.site.inputs.iter().flatten().copied().collect(),
        outputs: vec![s.site.output(0)?],
        index_check: None,
        loop_iterations: None,
    })
}

type Holes = [(&'static str, String); 4];

fn filled(template: &str, common: &Holes, rest: &[(&'static str, String)]) -> Result<String> {
    let all: Vec<(&str, &str)> = common
        .iter()
        .chain(rest)
        .map(|(k, v)| (*k, v.as_str()))
        .collect();
    fill(template, &all)
}

/// One input channel per group: one invocation per output element.
fn direct(s: &ConvSpec, ost: &str, common: &Holes) -> Result<(String, [u32; 3])> {
    let total = s.n * s.m * s.p();
    let (m, oh, ow, hw) = (s.m, s.oh, s.ow, s.h * s.w);
    let (decode, xplane, xoff) = if s.nhwc {
        (
            format!("        let oc = i % {m}u; var r = i / {m}u;\n        let ow = r % {ow}u; r = r / {ow}u;\n        let oh = r % {oh}u; let n = r / {oh}u;\n"),
            format!("n * {}u + ic", hw * s.c),
            format!("(u32(ih) * {}u + u32(iw)) * {}u", s.w, s.c),
        )
    } else {
        (
            format!("        let ow = i % {ow}u; var r = i / {ow}u;\n        let oh = r % {oh}u; r = r / {oh}u;\n        let oc = r % {m}u; let n = r / {m}u;\n"),
            format!("(n * {}u + ic) * {hw}u", s.c),
            format!("u32(ih) * {}u + u32(iw)", s.w),
        )
    };
    let n = |v: usize| v.to_string();
    let src = filled(
        DIRECT,
        common,
        &[
            ("desc", s.describe()),
            ("total", n(total)),
            ("decode", decode),
            ("mult", n(s.mg())),
            ("ow", n(ow)),
            ("xplane", xplane),
            ("taps", n(s.taps())),
            ("kh", n(s.kh)),
            ("kw", n(s.kw)),
            ("sh", n(s.stride.0)),
            ("sw", n(s.stride.1)),
            ("dh", n(s.dilation.0)),
            ("dw", n(s.dilation.1)),
            ("ph", n(s.pad.0)),
            ("pw", n(s.pad.1)),
            ("h", n(s.h)),
            ("w", n(s.w)),
            ("xoff", xoff),
            ("epilogue", epilogue(s, ost, 8)),
        ],
    )?;
    let wg = total.div_ceil(256).clamp(1, 65535) as u32;
    Ok((src, [wg, 1, 1]))
}

/// vec4 loads for the implicit GEMM: (W, X). W rows are K long and read in order
/// unless NHWC with taps (K is (tap, channel), W rows (channel, tap)); X along channels
/// for NHWC when a group's channels come in fours (so a vec4 never straddles a tap).
fn vec_loads(s: &ConvSpec) -> (bool, bool) {
    let permuted = s.nhwc && s.taps() > 1;
    (
        !permuted && (s.cg() * s.taps()).is_multiple_of(4),
        s.nhwc && s.cg().is_multiple_of(4),
    )
}

/// Every other convolution: the register-tiled implicit GEMM of `conv.wgsl` (the
/// tiling of `gemm_tile.rs`), with W as the A operand and im2col(X) as B.
fn gemm(s: &ConvSpec, ost: &str, common: &Holes) -> Result<(String, [u32; 3])> {
    let (k, mg, ncol) = (s.cg() * s.taps(), s.mg(), s.n * s.p());
    let t = tile(s.group, mg, ncol);
    let (w_vec, x_vec) = vec_loads(s);
    let (c, cg, h, w, kw, taps, p, ow) = (s.c, s.cg(), s.h, s.w, s.kw, s.taps(), s.p(), s.ow);
    let ((sh, sw), (dh, dw), (ph, pw)) = (s.stride, s.dilation, s.pad);
    let pointwise = taps == 1 && s.stride == (1, 1) && s.pad == (0, 0);
    let (p8, p16) = (" ".repeat(8), " ".repeat(16));
    // W's element (m0 + t, kl + k) when W rows are (channel, tap) and K is (tap, channel).
    let w_gather = |_: usize, _: &str| {
        let idx = format!("wbase + (m0 + t) * K + ((kl + k) % {cg}u) * {taps}u + (kl + k) / {cg}u");
        (String::new(), String::new(), "true".to_string(), idx)
    };
    // im2col(X)'s element (kl + k, n0 + t): the column's image and input origin once per
    // tile, the tap and bounds per load; a 1x1 stride-1 conv reads the input directly.
    let x_gather = |r: usize, col: &str| {
        let mut prep = format!("{p8}let cc{r} = n0 + {col};\n");
        if !pointwise || !s.nhwc {
            prep += &format!(
                "{p8}let cn{r} = cc{r} / {p}u;\n{p8}let cp{r} = cc{r} % {p}u;\n{p8}let ch{r} = i32((cp{r} / {ow}u) * {sh}u) - {ph};\n{p8}let cw{r} = i32((cp{r} % {ow}u) * {sw}u) - {pw};\n"
            );
        }
        let hw = h * w;
        let (pre, cond, idx) = match (s.nhwc, pointwise) {
            (true, true) => (
                String::new(),
                "true".to_string(),
                format!("cc{r} * {c}u + g * {cg}u + kl + k"),
            ),
            (false, true) => (
                String::new(),
                "true".to_string(),
                format!("(cn{r} * {c}u + g * {cg}u + kl + k) * {hw}u + cp{r}"),
            ),
            (nhwc, false) => {
                let tap = if nhwc {
                    format!("(kl + k) / {cg}u")
                } else {
                    format!("(kl + k) % {taps}u")
                };
                let pre = format!(
                    "{p16}let tap = {tap};\n{p16}let ih = ch{r} + i32((tap / {kw}u) * {dh}u);\n{p16}let iw = cw{r} + i32((tap % {kw}u) * {dw}u);\n"
                );
                let idx = if nhwc {
                    format!("((cn{r} * {h}u + u32(ih)) * {w}u + u32(iw)) * {c}u + g * {cg}u + (kl + k) % {cg}u")
                } else {
                    format!("((cn{r} * {c}u + g * {cg}u + (kl + k) / {taps}u) * {h}u + u32(ih)) * {w}u + u32(iw)")
                };
                (
                    pre,
                    format!("ih >= 0 && ih < {h} && iw >= 0 && iw < {w}"),
                    idx,
                )
            }
        };
        let idx = if x_vec { format!("({idx}) / 4u") } else { idx };
        (prep, pre, cond, idx)
    };
    let a_op = Operand {
        buf: "w",
        reg: "ra",
        smem: "As",
        stride: "SA",
        tile: t.bm,
        origin: "m0",
        bound: "MG",
        base: "wbase",
        k_rows: true,
        vec: w_vec,
        gather: if s.nhwc && taps > 1 {
            Some(&w_gather)
        } else {
            None
        },
    };
    // NHWC: K (channels) contiguous per column, as a transposed B; NCHW: columns are.
    let b_op = Operand {
        buf: "x",
        reg: "rb",
        smem: "Bs",
        stride: "SB",
        tile: t.bn,
        origin: "n0",
        bound: "NCOL",
        base: "",
        k_rows: s.nhwc,
        vec: x_vec,
        gather: Some(&x_gather),
    };
    let (da, la, sa) = a_op.code(&t);
    let (db, lb, sb) = b_op.code(&t);
    let (fma, decls, out) = t.body();
    let (tiles_m, tiles_n) = (mg.div_ceil(t.bm), ncol.div_ceil(t.bn));
    if tiles_m > 65535 || s.group > 65535 {
        return Err(s
            .site
            .unsupported("more than 65535 tiles of output channels or groups"));
    }
    let korder = if s.nhwc {
        "(kernel tap, channel)"
    } else {
        "(channel, kernel tap)"
    };
    let n = |v: usize| v.to_string();
    let mut rest = t.holes();
    rest.extend([
        ("desc", s.describe()),
        ("korder", korder.to_string()),
        ("k", n(k)),
        ("mg", n(mg)),
        ("ncol", n(ncol)),
        ("p", n(p)),
        ("tiles_m", n(tiles_m)),
        ("tiles_n", n(tiles_n)),
        ("epilogue", epilogue(s, ost, 8)),
        ("decls", da + &db + &decls),
        ("load", la + &lb),
        ("stage", sa + &sb),
        ("fma", fma),
        ("out", out),
    ]);
    let src = filled(GEMM, common, &rest)?;
    let wg = [
        tiles_n.clamp(1, 65535) as u32,
        tiles_m as u32,
        s.group as u32,
    ];
    Ok((src, wg))
}
