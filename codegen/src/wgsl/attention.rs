//! Scaled dot-product attention (ONNX `Attention`) in WGSL, the CUDA emitter's flash
//! algorithm (codegen/src/cuda/attention.rs) without tensor cores: the `[seq, seq]`
//! score matrix never reaches memory. One workgroup per (tile of query rows, query head,
//! batch) keeps its Q tile in workgroup memory and streams K and V through one shared
//! buffer (K, then V in its place), as fp32 vec4 rows; scores, the online softmax
//! (running max and sum per row) and the accumulation are fp32, with one rounding at the
//! store. Tiles are sized to WebGPU's guaranteed 16 KiB of workgroup memory, so the
//! shader runs on any adapter. Covered: f32 and f16 data, 4-D `[batch, heads, seq,
//! head]` and 3-D (heads packed in the hidden dim) layouts, any head size, grouped-query
//! heads, `scale`, `is_causal`, additive (f32/f16) and boolean masks broadcast like the
//! reference (a short last dim masks the keys past it); keys masked with `-inf` or
//! `false` never enter the softmax, so fully masked rows give zeros as the reference's.
//! Refused, by name: a KV cache, the extra outputs, softcap, sliding windows, a value
//! head size other than the key's, bf16 and other data or mask types.

use super::WgslKernel;
use super::{typed, unsupported};
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::AttentionOp;
use gopt_ir::{Attr, DType, Graph, Node, Op, ValueId};

const TEMPLATE: &str = include_str!("attention.wgsl");
/// Workgroup memory a shader may use on every WebGPU adapter.
pub const SHARED_BUDGET: usize = 16 * 1024;

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(op, Op::Attention(AttentionOp::Attention))
}

/// Sizes and element strides (batch, head, sequence) of one attention node.
struct Dims {
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    sq: usize,
    skv: usize,
    head: usize,
    q_strides: [usize; 3],
    kv_strides: [usize; 3],
}

/// The attributes the shader follows: the scale, whether attention is causal and the
/// head counts (needed for 3-D inputs).
struct Attrs(Option<f32>, bool, Option<usize>, Option<usize>);

/// Reads the attributes, rejecting every one that changes the result in a way the shader
/// does not implement.
fn attributes(node: &Node) -> Result<Attrs> {
    let (mut scale, mut causal, mut hq, mut hk) = (None, false, None, None);
    for (key, value) in &node.attrs.0 {
        let bad = |what: &str| Err(unsupported(node, what));
        match (key.as_str(), value) {
            ("scale", Attr::Float(s)) => scale = Some(*s),
            ("is_causal", Attr::Int(c)) => causal = *c != 0,
            ("softcap", Attr::Float(c)) if *c == 0.0 => {}
            ("softcap", _) => return bad("softcap"),
            ("left_window_size" | "right_window_size", Attr::Int(-1)) => {}
            ("left_window_size" | "right_window_size", _) => return bad("sliding windows"),
            ("q_num_heads", Attr::Int(h)) if *h > 0 => hq = Some(*h as usize),
            ("kv_num_heads", Attr::Int(h)) if *h > 0 => hk = Some(*h as usize),
            // Only selects what the fourth output holds; the shader writes the first only.
            ("qk_matmul_output_mode", Attr::Int(_)) => {}
            // The shader's softmax is fp32, at least as precise as any of these.
            (
                "softmax_precision",
                Attr::DType(DType::F32 | DType::F16 | DType::BF16) | Attr::Int(1 | 10 | 16),
            ) => {}
            ("softmax_precision", _) => return bad("a softmax precision above fp32"),
            (other, _) => return bad(&format!("the attribute `{other}` = {value:?}")),
        }
    }
    Ok(Attrs(scale, causal, hq, hk))
}

/// Sizes from Q, K, V and the output, 4-D or 3-D.
fn dims(node: &Node, qs: &[usize], ks: &[usize], vs: &[usize], os: &[usize]) -> Result<Dims> {
    let Attrs(_, _, hq_attr, hk_attr) = attributes(node)?;
    let bad = || unsupported(node, format!("Q {qs:?}, K {ks:?}, V {vs:?}, output {os:?}"));
    let four = match (qs.len(), ks.len(), vs.len()) {
        (4, 4, 4) => true,
        (3, 3, 3) => false,
        _ => return Err(unsupported(node, "Q, K and V not all 4-D or all 3-D")),
    };
    if vs.last() != ks.last() && vs[..vs.len() - 1] == ks[..ks.len() - 1] {
        return Err(unsupported(node, "a value head size other than the key's"));
    }
    let (hq, hk) = match (four, hq_attr, hk_attr) {
        (true, _, _)
            if hq_attr.is_some_and(|h| h != qs[1]) || hk_attr.is_some_and(|h| h != ks[1]) =>
        {
            return Err(unsupported(node, "head counts that differ from the shapes"))
        }
        (true, _, _) => (qs[1], ks[1]),
        (false, Some(hq), Some(hk)) => (hq, hk),
        _ => {
            return Err(unsupported(
                node,
                "3-D inputs without q_num_heads/kv_num_heads",
            ))
        }
    };
    if hq == 0 || hk == 0 || !hq.is_multiple_of(hk) {
        return Err(bad());
    }
    let r = qs.len();
    let (batch, sq, skv, head) = (
        qs[0],
        qs[r - 2],
        ks[r - 2],
        qs[r - 1] / if four { 1 } else { hq },
    );
    let shape = |h: usize, s: usize| {
        if four {
            vec![batch, h, s, head]
        } else {
            vec![batch, s, h * head]
        }
    };
    let strides = |h: usize, s: usize| {
        if four {
            [h * s * head, s * head, head]
        } else {
            [s * h * head, head, h * head]
        }
    };
    if qs != shape(hq, sq) || ks != shape(hk, skv) || vs != ks || os != qs {
        return Err(bad());
    }
    if qs.contains(&0) || skv == 0 {
        return Err(unsupported(node, "empty tensors"));
    }
    Ok(Dims {
        batch,
        q_heads: hq,
        kv_heads: hk,
        sq,
        skv,
        head,
        q_strides: strides(hq, sq),
        kv_strides: strides(hk, skv),
    })
}

/// The mask's bindings and code: the statement setting `mb` (its batch and head offset)
/// and, for key `{i}`, the statement that folds it into `ok{i}` and `x{i}`.
fn mask(g: &Graph, node: &Node, d: &Dims) -> Result<Option<(ValueId, DType, String, String)>> {
    let Some(v) = node.inputs.get(3).copied().flatten() else {
        return Ok(None);
    };
    let (dtype, ms) = typed(g, node, v)?;
    if !matches!(dtype, DType::F32 | DType::F16 | DType::Bool) {
        return Err(unsupported(node, format!("a {dtype} mask")));
    }
    if ms.is_empty() || ms.len() > 4 {
        return Err(unsupported(node, "a mask that is not 1-D to 4-D"));
    }
    let mut m4 = vec![1usize; 4 - ms.len()];
    m4.extend_from_slice(&ms);
    let full = [d.batch, d.q_heads, d.sq, d.skv];
    // As the reference: a last dim shorter than the keys is padded with -inf; other dims
    // broadcast from 1.
    let cols = m4[3];
    if cols == 0 || cols > d.skv || (0..3).any(|a| m4[a] != 1 && m4[a] != full[a]) {
        return Err(unsupported(
            node,
            format!("a mask of shape {ms:?} that does not broadcast to {full:?}"),
        ));
    }
    let st = [cols * m4[2] * m4[1], cols * m4[2], cols];
    let stride = |a: usize| if m4[a] == 1 { 0 } else { st[a] };
    let base = format!("    let mb = b * {}u + h * {}u;\n", stride(0), stride(1));
    let at = format!("mask[mb + i * {}u + j{{i}}]", stride(2));
    let mut code = String::new();
    if cols < d.skv {
        code += &format!("ok{{i}} = ok{{i}} && j{{i}} < {cols}u; ");
    }
    code += &if dtype == DType::Bool {
        format!("if (ok{{i}}) {{ ok{{i}} = {at} != 0u; }}")
    } else {
        format!("if (ok{{i}}) {{ let m = f32({at}); ok{{i}} = m >= NEG; x{{i}} = x{{i}} + m; }}")
    };
    Ok(Some((v, dtype, base, code)))
}

/// Workgroup memory of a layout, bytes.
fn shared_bytes(bm: usize, bn: usize, tpr: usize, ldv: usize) -> usize {
    16 * ldv * (bm + bn) + 4 * bm * bn + 4 * bm * tpr
}

/// A loader `fn load_{name}(base, c)`: the `c`-th vec4 of the row at element `base`,
/// zero past the head size.
fn loader(name: &str, head: usize, vec4: bool) -> String {
    let body = if vec4 {
        format!("    return vec4<f32>({name}[base / 4u + c]);\n")
    } else {
        let mut s = format!(
            "    let d = c * 4u;\n    var e = vec4<f32>(f32({name}[base + d]), 0.0, 0.0, 0.0);\n"
        );
        for (j, f) in ["y", "z", "w"].iter().enumerate() {
            s += &format!(
                "    if (d + {0}u < {head}u) {{ e.{f} = f32({name}[base + d + {0}u]); }}\n",
                j + 1
            );
        }
        s + "    return e;\n"
    };
    format!("\nfn load_{name}(base: u32, c: u32) -> vec4<f32> {{\n{body}}}\n")
}

/// Emits the attention shader for `node`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    if node.outputs.len() != 1 {
        return Err(unsupported(
            node,
            "the present_key/present_value/qk_matmul outputs",
        ));
    }
    if node.inputs.iter().skip(4).any(Option::is_some) {
        return Err(unsupported(
            node,
            "a KV cache (past_key/past_value/nonpad_kv_seqlen)",
        ));
    }
    let input = |k: usize| {
        node.inputs
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| unsupported(node, "a missing Q, K or V"))
    };
    let (q, k, v, out) = (input(0)?, input(1)?, input(2)?, node.outputs[0]);
    let (dt, qs) = typed(g, node, q)?;
    let (kdt, ks) = typed(g, node, k)?;
    let (vdt, vs) = typed(g, node, v)?;
    let (odt, os) = typed(g, node, out)?;
    if kdt != dt || vdt != dt || odt != dt {
        return Err(unsupported(
            node,
            "Q, K, V and the output in different types",
        ));
    }
    let t = match dt {
        DType::F32 => "f32",
        DType::F16 => "f16",
        other => return Err(unsupported(node, format!("{other} data"))),
    };
    let d = dims(node, &qs, &ks, &vs, &os)?;
    let Attrs(scale, causal, _, _) = attributes(node)?;
    let scale = scale.unwrap_or_else(|| (1.0 / (d.head as f64).sqrt()) as f32);
    if !scale.is_finite() {
        return Err(unsupported(node, format!("a scale of {scale}")));
    }
    let mask = mask(g, node, &d)?;

    // Invocations per row: 8 for heads of 32 and more, 4 below; tiles as large as the
    // budget allows, no taller than the sequence needs.
    let d4 = d.head.div_ceil(4);
    let tpr = if d.head >= 32 { 8 } else { 4 };
    let e4 = d4.div_ceil(tpr);
    let ldv = tpr * e4 + 1;
    let bm_max = d.sq.next_power_of_two().clamp(4, 32);
    let candidates = [32, 32, 32, 16, 16, 32, 16, 16, 16, 8, 8, 8, 4, 8];
    let (bm, bn) = candidates
        .chunks(2)
        .map(|c| (c[0].min(bm_max), c[1].max(tpr)))
        .find(|&(m, n)| shared_bytes(m, n, tpr, ldv) <= SHARED_BUDGET)
        .ok_or_else(|| {
            unsupported(
                node,
                format!("a head size of {} (workgroup memory)", d.head),
            )
        })?;
    let threads = bm * tpr;
    let ns = bn / tpr;

    let vec4 = d.head.is_multiple_of(4);
    let arr = if vec4 {
        format!("vec4<{t}>")
    } else {
        t.to_string()
    };
    let mut bindings = vec![
        format!("var<storage, read> q: array<{arr}>;"),
        format!("var<storage, read> k: array<{arr}>;"),
        format!("var<storage, read> v: array<{arr}>;"),
    ];
    let mut inputs = vec![q.0, k.0, v.0];
    let mut f16 = dt == DType::F16;
    let (mask_base, mask_code) = match &mask {
        Some((mv, mdt, base, code)) => {
            let mt = super::storage_type(*mdt).map_or("f32", |(s, _)| s);
            f16 |= *mdt == DType::F16;
            bindings.push(format!("var<storage, read> mask: array<{mt}>;"));
            inputs.push(mv.0);
            (base.clone(), code.clone())
        }
        None => (String::new(), String::new()),
    };
    bindings.push(format!("var<storage, read_write> y: array<{arr}>;"));
    let bindings: Vec<String> = bindings
        .iter()
        .enumerate()
        .map(|(i, s)| format!("@group(0) @binding({i}) {s}"))
        .collect();

    // Unrolled code: `{i}` is the key or vec4 (0..n), `{o}` its column `{i} * tpr`.
    let rep = |n: usize, text: &str| -> String {
        let one = |i: usize| {
            text.replace("{i}", &i.to_string())
                .replace("{o}", &(i * tpr).to_string())
        };
        (0..n).map(one).collect()
    };
    let causal_ok = if causal { " && j{i} <= i" } else { "" };
    let mask_line = match mask_code.as_str() {
        "" => String::new(),
        c => format!("        {c}\n"),
    };
    let s_post = rep(ns, &format!(
        "        let j{{i}} = n0 + qd + {{o}}u;\n        var ok{{i}} = i < SQ && j{{i}} < SKV{causal_ok};\n        var x{{i}} = s{{i}} * {scale:e};\n{mask_line}        if (ok{{i}}) {{ lm = max(lm, x{{i}}); }}\n"
    ));
    let stores = if vec4 {
        rep(e4, &format!("        if (qd + {{o}}u < D4) {{ y[obase / 4u + qd + {{o}}u] = vec4<{t}>(acc{{i}} * inv); }}\n"))
    } else {
        let comp: String = ["x", "y", "z", "w"].iter().enumerate().map(|(j, f)| {
            format!("            if (c * 4u + {j}u < D) {{ y[obase + c * 4u + {j}u] = {t}(o.{f}); }}\n")
        }).collect();
        rep(e4, &format!("        {{\n            let c = qd + {{o}}u;\n            let o = acc{{i}} * inv;\n{comp}        }}\n"))
    };
    let [q_sb, q_sh, q_si] = d.q_strides;
    let [k_sb, k_sh, k_si] = d.kv_strides;
    let (group, q_total, kv_total) = (d.q_heads / d.kv_heads, d.batch * q_sb, d.batch * k_sb);
    let names = "SQ SKV D D4 LDV BM BN TPR T GROUP Q_SB Q_SH Q_SI K_SB K_SH K_SI Q_TOTAL KV_TOTAL";
    let values = [
        d.sq, d.skv, d.head, d4, ldv, bm, bn, tpr, threads, group, q_sb, q_sh, q_si, k_sb, k_sh,
        k_si, q_total, kv_total,
    ];
    let mut consts = String::new();
    for (c, x) in names.split(' ').zip(values) {
        let x = u32::try_from(x).map_err(|_| unsupported(node, "sizes past 2^32"))?;
        consts += &format!("const {c}: u32 = {x}u;\n");
    }
    let count = |x: usize| u32::try_from(x).ok().filter(|&w| w <= 65535);
    let (Some(x), Some(y), Some(z)) = (count(d.sq.div_ceil(bm)), count(d.q_heads), count(d.batch))
    else {
        return Err(unsupported(
            node,
            "more than 65535 workgroups along one axis",
        ));
    };
    let loaders = ["q", "k", "v"]
        .iter()
        .map(|n| loader(n, d.head, vec4))
        .collect();
    let holes: Vec<(&str, String)> = vec![
        ("enable", super::enable_f16(f16).to_string()),
        ("what", node.op.name().to_string()),
        ("dtype", dt.to_string()),
        ("bindings", bindings.join("\n")),
        ("consts", consts),
        ("loaders", loaders),
        ("mask_base", mask_base),
        ("acc_decl", rep(e4, "    var acc{i} = vec4<f32>(0.0);\n")),
        ("causal", causal.to_string()),
        ("s_decl", rep(ns, "        var s{i}: f32 = 0.0;\n")),
        ("s_dot", rep(ns, "            s{i} = s{i} + dot(qv, kv[(qd + {o}u) * LDV + d]);\n")),
        ("s_post", s_post),
        ("p_store", rep(ns, "        let p{i} = select(0.0, exp(x{i} - mx), ok{i});\n        lrun = lrun + p{i};\n        pp[r * BN + qd + {o}u] = p{i};\n")),
        ("acc_scale", rep(e4, "        acc{i} = acc{i} * alpha;\n")),
        ("acc_fma", rep(e4, "            acc{i} = acc{i} + p * kv[c * LDV + qd + {o}u];\n")),
        ("stores", stores),
    ];
    let refs: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source: fill(TEMPLATE, &refs)?,
        workgroups: [x, y, z],
        inputs,
        outputs: vec![out.0],
        index_check: None,
    })
}
