//! Convolutions in WGSL: ONNX `Conv` and `FusedConv` (`act(conv(X, W) + B) + residual`),
//! 1-D and 2-D, any group, strides, dilations, explicit pads or `auto_pad`, NCHW or
//! channels-last (`layout="NHWC"`), f32/f16 data with f32 accumulation and one rounding
//! at the store. The node is read by the CUDA emitter's [`crate::cuda::conv::spec`] (so
//! both backends accept and refuse the same modes; bf16 has no WGSL form and is
//! refused here). One input channel per group (depthwise) runs a direct shader, one
//! invocation per output; every other convolution runs as an implicit GEMM per group,
//! the im2col tile gathered on the fly into workgroup memory (`conv.wgsl`), with K in
//! the order that makes the gather contiguous: (channel, tap) for NCHW, (tap, channel)
//! for NHWC. Sizes are baked into the source so index math divides by constants.

use super::WgslKernel;
use crate::cuda::conv_spec::ConvSpec;
use crate::index::strides;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::fused::Activation;
use gopt_ir::ops::{FusedOp, NnOp};
use gopt_ir::{DType, Graph, Node, Op};

const GEMM: &str = include_str!("conv.wgsl");
const DIRECT: &str = include_str!("conv_direct.wgsl");

/// Workgroups that fill a large GPU (132 SMs) twice: below this, smaller tiles.
const FULL_GRID: usize = 264;

/// The activation helpers every convolution shader carries.
const HELPERS: &str = include_str!("conv_act.wgsl");

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(op, Op::Nn(NnOp::Conv) | Op::Fused(FusedOp::FusedConv))
}

fn unsupported(node: &Node, what: impl Into<String>) -> CodegenError {
    CodegenError::Unsupported {
        node: node.name.clone(),
        op: node.op.name().into(),
        backend: "WGSL",
        what: what.into(),
    }
}

fn storage(node: &Node, dt: DType, what: &str) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(unsupported(node, format!("{other} {what}"))),
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
/// scope): bias, activation, broadcast residual, one rounding at the store.
fn epilogue(s: &ConvSpec, ost: &str, indent: usize) -> String {
    let (m, p) = (s.m, s.p());
    let y = if s.nhwc {
        format!("(n * {p}u + p) * {m}u + oc")
    } else {
        format!("(n * {m}u + oc) * {p}u + p")
    };
    let mut lines = vec!["var v: f32 = acc_;".to_string()];
    if s.bias.is_some() {
        lines.push("v = v + f32(bias[oc]);".into());
    }
    lines.push(activation(s.act));
    if let Some((_, rs)) = &s.residual {
        let idx = if rs == &s.y_shape {
            y.clone()
        } else {
            let ow = s.ow;
            let sp: Vec<String> = if s.spatial == 1 {
                vec!["p".into()]
            } else {
                vec![format!("(p / {ow}u)"), format!("(p % {ow}u)")]
            };
            let n = || vec!["n".to_string()];
            let coords: Vec<String> = if s.nhwc {
                [n(), sp, vec!["oc".into()]].concat()
            } else {
                [n(), vec!["oc".into()], sp].concat()
            };
            let lead = coords.len() - rs.len();
            let st = strides(rs);
            let terms: Vec<String> = (0..rs.len())
                .filter(|&a| rs[a] != 1)
                .map(|a| format!("{} * {}u", coords[a + lead], st[a]))
                .collect();
            crate::index::sum(&terms, "0u")
        };
        lines.push(format!("v = v + f32(res[{idx}]);"));
    }
    lines.push(format!("y[{y}] = {ost}(v);"));
    let pad = " ".repeat(indent);
    lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| format!("{pad}{l}\n"))
        .collect()
}

fn describe(s: &ConvSpec) -> String {
    format!(
        "{}x{} kernel, stride {:?}, dilation {:?}, pad {:?}, {} -> {} channels in {} group(s), {} {}x{} -> {}x{}",
        s.kh, s.kw, s.stride, s.dilation, s.pad, s.c, s.m, s.group,
        if s.nhwc { "NHWC" } else { "NCHW" }, s.h, s.w, s.oh, s.ow
    )
}

/// Emits the shader for a Conv or FusedConv node.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let s = crate::cuda::conv::spec(g, node).map_err(|e| match e {
        CodegenError::Unsupported { what, .. } => unsupported(node, what),
        e => e,
    })?;
    let ost = storage(node, s.out_dt, "outputs")?;
    let mut operands = vec![("x", s.x_dt, "convolutions"), ("w", s.x_dt, "convolutions")];
    operands.extend(s.bias.map(|b| ("bias", b, "biases")));
    operands.extend(s.residual.as_ref().map(|r| ("res", r.0, "residuals")));
    let mut bindings = Vec::new();
    for (i, &(v, dt, what)) in operands.iter().enumerate() {
        let t = storage(node, dt, what)?;
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
        return Err(unsupported(node, "tensors of 2^31 elements or more"));
    }
    let common = [
        ("enable", if f16 { "enable f16;\n" } else { "" }.to_string()),
        ("what", node.op.name().to_string()),
        ("bindings", bindings.join("\n")),
        ("helpers", HELPERS.to_string()),
    ];
    let (source, workgroups) = if s.cg() == 1 {
        direct(&s, ost, &common)?
    } else {
        gemm(&s, node, ost, &common)?
    };
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups,
        inputs: node.inputs.iter().flatten().map(|v| v.0).collect(),
        outputs: vec![node.outputs[0].0],
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
            ("desc", describe(s)),
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

/// Every other convolution: the tiled implicit GEMM of `conv.wgsl`, unrolled here.
fn gemm(s: &ConvSpec, node: &Node, ost: &str, common: &Holes) -> Result<(String, [u32; 3])> {
    let (k, mg, ncol) = (s.cg() * s.taps(), s.mg(), s.n * s.p());
    let tiles = |b: usize| s.group * mg.div_ceil(b) * ncol.div_ceil(b);
    let (bm, bn, threads) = if tiles(64) >= FULL_GRID {
        (64, 64, 256)
    } else {
        (32, 32, 64)
    };
    let (ra, rb) = (bm * 16 / threads, 16 * bn / threads);
    let (c, cg, h, w, kw, taps) = (s.c, s.cg(), s.h, s.w, s.kw, s.taps());
    let ((sh, sw), (dh, dw), (ph, pw)) = (s.stride, s.dilation, s.pad);
    let pointwise = taps == 1 && s.stride == (1, 1) && s.pad == (0, 0);
    let (p12, p16) = (" ".repeat(12), " ".repeat(16));
    // W's element for tile row `m`, K index `k` (W rows are (channel, tap)).
    let w_index = if s.nhwc && taps > 1 {
        format!("(g * MG + m0 + m) * K + (k % {cg}u) * {taps}u + k / {cg}u")
    } else {
        "(g * MG + m0 + m) * K + k".to_string()
    };
    let mut decls = String::new();
    let mut load = String::new();
    let mut store = String::new();
    for r in 0..ra {
        decls += &format!("        var ra{r}: f32;\n");
        load += &format!(
            "{p12}{{\n{p16}let e = lid + {}u;\n{p16}let m = e / BK;\n{p16}let k = kl + e % BK;\n{p16}ra{r} = 0.0;\n{p16}if (m0 + m < MG && k < K) {{ ra{r} = f32(w[{w_index}]); }}\n{p12}}}\n",
            threads * r
        );
        store += &format!(
            "{p12}As[({e} % BK) * SA + {e} / BK] = ra{r};\n",
            e = format!("(lid + {}u)", threads * r)
        );
    }
    // This thread's im2col columns for the tile: one (NCHW: consecutive invocations
    // take consecutive positions) or RB (NHWC: consecutive invocations take
    // consecutive channels of one position).
    let col_setup = |ix: &str, col: &str| {
        format!(
            "        let bcol{ix} = {col};
        let bok{ix} = bcol{ix} < NCOL;
        let bn{ix} = select(0u, bcol{ix} / {p}u, bok{ix});
        let bp{ix} = select(0u, bcol{ix} % {p}u, bok{ix});
        let ih0{ix} = i32((bp{ix} / {ow}u) * {sh}u) - {ph};
        let iw0{ix} = i32((bp{ix} % {ow}u) * {sw}u) - {pw};
",
            p = s.p(),
            ow = s.ow
        )
    };
    let mut columns = String::new();
    let (korder, thread_map) = if s.nhwc {
        let xi = if pointwise {
            format!("bcol{{r}} * {c}u + g * {cg}u + ci")
        } else {
            format!("((bn{{r}} * {h}u + u32(ih)) * {w}u + u32(iw)) * {c}u + g * {cg}u + ci")
        };
        load += &format!(
            "{p12}let k = kl + lid % BK;\n{p12}let ci = k % {cg}u;\n{p12}let tap = k / {cg}u;\n{p12}let dh_ = i32((tap / {kw}u) * {dh}u);\n{p12}let dw_ = i32((tap % {kw}u) * {dw}u);\n"
        );
        for r in 0..rb {
            columns += &col_setup(
                &r.to_string(),
                &format!("col0 + lid / BK + {}u", threads / 16 * r),
            );
            decls += &format!("        var rb{r}: f32;\n");
            load += &format!(
                "{p12}{{\n{p16}let ih = ih0{r} + dh_;\n{p16}let iw = iw0{r} + dw_;\n{p16}rb{r} = 0.0;\n{p16}if (bok{r} && k < K && ih >= 0 && ih < {h} && iw >= 0 && iw < {w}) {{ rb{r} = f32(x[{}]); }}\n{p12}}}\n",
                xi.replace("{r}", &r.to_string())
            );
            store += &format!(
                "{p12}Bs[({e} % BK) * SB + {e} / BK] = rb{r};\n",
                e = format!("(lid + {}u)", threads * r)
            );
        }
        (
            "(kernel tap, channel)",
            "    let ty = lid % RY;\n    let tx = lid / RY;\n",
        )
    } else {
        columns += &col_setup("", "col0 + lid % BN");
        let xi = if pointwise {
            format!("(bn * {c}u + g * {cg}u + k) * {hw}u + bp", hw = h * w)
        } else {
            format!("((bn * {c}u + g * {cg}u + k / {taps}u) * {h}u + u32(ih)) * {w}u + u32(iw)")
        };
        for r in 0..rb {
            decls += &format!("        var rb{r}: f32;\n");
            load += &format!(
                "{p12}{{\n{p16}let k = kl + lid / BN + {}u;\n{p16}let tap = k % {taps}u;\n{p16}let ih = ih0 + i32((tap / {kw}u) * {dh}u);\n{p16}let iw = iw0 + i32((tap % {kw}u) * {dw}u);\n{p16}rb{r} = 0.0;\n{p16}if (bok && k < K && ih >= 0 && ih < {h} && iw >= 0 && iw < {w}) {{ rb{r} = f32(x[{xi}]); }}\n{p12}}}\n",
                threads / bn * r
            );
            store += &format!(
                "{p12}Bs[({e} / BN) * SB + {e} % BN] = rb{r};\n",
                e = format!("(lid + {}u)", threads * r)
            );
        }
        (
            "(channel, kernel tap)",
            "    let tx = lid % TX;\n    let ty = lid / TX;\n",
        )
    };
    // The 4x4 outer product per K step and the epilogue per output, unrolled.
    let mut fma = String::new();
    let mut out = String::new();
    for i in 0..4 {
        fma += &format!("{p16}let a{i} = As[kk * SA + ty + {}u];\n", bm / 4 * i);
        fma += &format!("{p16}let b{i} = Bs[kk * SB + tx + {}u];\n", bn / 4 * i);
    }
    for i in 0..4 {
        for j in 0..4 {
            decls += &format!("        var acc{i}{j}: f32 = 0.0;\n");
            fma += &format!("{p16}acc{i}{j} = fma(a{i}, b{j}, acc{i}{j});\n");
            out += &format!(
                "        {{\n            let m = m0 + ty + {}u;\n            let col = col0 + tx + {}u;\n            if (m < MG && col < NCOL) {{\n                let oc = g * MG + m;\n                let n = col / {p}u;\n                let p = col % {p}u;\n                let acc_ = acc{i}{j};\n{}            }}\n        }}\n",
                bm / 4 * i,
                bn / 4 * j,
                epilogue(s, ost, 16),
                p = s.p()
            );
        }
    }
    let tiles_n = ncol.div_ceil(bn);
    let tiles_m = mg.div_ceil(bm);
    if tiles_m > 65535 || s.group > 65535 {
        return Err(unsupported(
            node,
            "more than 65535 tiles of output channels or groups",
        ));
    }
    let n = |v: usize| v.to_string();
    let src = filled(
        GEMM,
        common,
        &[
            ("desc", describe(s)),
            ("korder", korder.to_string()),
            ("bm", n(bm)),
            ("bn", n(bn)),
            ("threads", n(threads)),
            ("k", n(k)),
            ("mg", n(mg)),
            ("ncol", n(ncol)),
            ("tiles_n", n(tiles_n)),
            ("as_len", n(16 * (bm + 4))),
            ("bs_len", n(16 * (bn + 4))),
            ("thread_map", thread_map.to_string()),
            ("columns", columns),
            ("decls", decls),
            ("load", load),
            ("store", store),
            ("fma", fma),
            ("epilogue", out),
        ],
    )?;
    let wg = [
        tiles_n.clamp(1, 65535) as u32,
        tiles_m as u32,
        s.group as u32,
    ];
    Ok((src, wg))
}
