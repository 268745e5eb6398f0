//! Scaled dot-product attention (ONNX `Attention`, read by [`crate::lower::attention`])
//! in WGSL as flash attention on plain invocations: the `[seq, seq]` score matrix never
//! reaches memory. One workgroup per (tile of query rows, query head, batch) keeps its Q
//! tile in workgroup memory and streams K and V through one shared buffer (K, then V in
//! its place), as fp32 vec4 rows; scores, the online softmax (running max and sum per
//! row) and the accumulation are fp32, with one rounding at the store. Tiles are sized
//! to WebGPU's guaranteed 16 KiB of workgroup memory, so the shader runs on any adapter.
//! Covered: f32 and f16 data, 4-D `[batch, heads, seq, head]` and 3-D (heads packed in
//! the hidden dim) layouts, any head size, grouped-query heads, `scale`, `is_causal`,
//! additive (f32/f16) and boolean masks broadcast like the reference (a short last dim
//! masks the keys past it); keys masked with `-inf` or `false` never enter the softmax,
//! so fully masked rows give zeros as the reference's. Refused here: bf16 data and
//! masks (WGSL has no bf16). Nodes with more ([`crate::lower::attention::Attention::general`]: a KV cache,
//! `nonpad_kv_seqlen`, the present and qk outputs, softcap, windows, a value head size
//! of its own) go to the general shader ([`general`]).

use super::WgslKernel;
use crate::lower::attention::{Attention, Mask};
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

#[path = "attention_general.rs"]
mod general;

const TEMPLATE: &str = include_str!("attention.wgsl");
/// Workgroup memory a shader may use on every WebGPU adapter.
pub const SHARED_BUDGET: usize = 16 * 1024;

/// The mask in WGSL: the statement setting `mb` (its batch and head offset) and, for key
/// `{i}`, the statement that folds it into `ok{i}` and `x{i}`.
fn mask_code(m: &Mask, skv: usize) -> (String, String) {
    let [sb, sh, si] = m.strides;
    let base = format!("    let mb = b * {sb}u + h * {sh}u;\n");
    let at = format!("mask[mb + i * {si}u + j{{i}}]");
    let mut code = String::new();
    if m.cols < skv {
        code += &format!("ok{{i}} = ok{{i}} && j{{i}} < {}u; ", m.cols);
    }
    code += &if m.dtype == DType::Bool {
        format!("if (ok{{i}}) {{ ok{{i}} = {at} != 0u; }}")
    } else {
        format!("if (ok{{i}}) {{ let m = f32({at}); ok{{i}} = m >= NEG; x{{i}} = x{{i}} + m; }}")
    };
    (base, code)
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

/// The error for a form of the node the WGSL shaders do not cover.
fn unsupported(site: &Site, what: impl Into<String>) -> crate::CodegenError {
    site.unsupported(&what.into()).for_backend("WGSL")
}

/// Emits the attention shader of `a`.
pub fn emit(a: &Attention, name: &str) -> Result<WgslKernel> {
    let site = &a.site;
    if a.general() {
        return general::emit(site, name, a);
    }
    let (dt, d, scale, causal) = (a.dtype, a.dims, a.scale, a.causal);
    // The shader writes the output with Q's strides from element 0 (VIEWS has no
    // strided reads, so lowering never asks otherwise).
    if d.offsets != [0; 3] || d.out_strides != d.q_strides {
        return Err(unsupported(
            site,
            "Q, K and V read in place from a wider tensor",
        ));
    }
    let t = match dt {
        DType::F32 => "f32",
        DType::F16 => "f16",
        other => return Err(unsupported(site, format!("{other} data"))),
    };
    if let Some(m) = a.mask.filter(|m| m.dtype == DType::BF16) {
        return Err(unsupported(site, format!("a {} mask", m.dtype)));
    }

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
                site,
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
    let mut inputs = vec![a.q.0, a.k.0, a.v.0];
    let mut f16 = dt == DType::F16;
    let (mask_base, mask_code) = match &a.mask {
        Some(m) => {
            let mt = super::storage_type(m.dtype).map_or("f32", |(s, _)| s);
            f16 |= m.dtype == DType::F16;
            bindings.push(format!("var<storage, read> mask: array<{mt}>;"));
            inputs.push(m.value.0);
            mask_code(m, d.skv)
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
        let x = u32::try_from(x).map_err(|_| unsupported(site, "sizes past 2^32"))?;
        consts += &format!("const {c}: u32 = {x}u;\n");
    }
    let count = |x: usize| u32::try_from(x).ok().filter(|&w| w <= 65535);
    let (Some(x), Some(y), Some(z)) = (count(d.sq.div_ceil(bm)), count(d.q_heads), count(d.batch))
    else {
        return Err(unsupported(
            site,
            "more than 65535 workgroups along one axis",
        ));
    };
    let loaders = ["q", "k", "v"]
        .iter()
        .map(|n| loader(n, d.head, vec4))
        .collect();
    let holes: Vec<(&str, String)> = vec![
        ("enable", super::enable_f16(f16).to_string()),
        ("what", site.op.to_string()),
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
        node: site.node.clone(),
        source: fill(TEMPLATE, &refs)?,
        workgroups: [x, y, z],
        inputs,
        outputs: vec![a.out.0],
        index_check: None,
        loop_iterations: None,
    })
}
