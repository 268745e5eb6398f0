//! The general attention shader (WGSL): what the flash shader ([`crate::wgsl::attention`]) leaves out —
//! a KV cache with its `present_key`/`present_value` outputs, `nonpad_kv_seqlen`,
//! `qk_matmul_output` in every mode, softcap, sliding windows and a value head size of
//! its own — in one simple shader that follows the interpreter step by step, for
//! coverage rather than speed: one workgroup per (query row, query head, batch) makes
//! three passes over the keys (max, sum, weighted sum of V). The same workgroups copy
//! the cache and the new keys and values into the present outputs. The CUDA writer's
//! general kernel is the same algorithm line by line.

use super::unsupported;
use crate::lower::attention::{Attention, Mask};
use crate::lower::support::Site;
use crate::template::fill;
use crate::wgsl::{enable_f16, storage_type, WgslKernel};
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("attention_general.wgsl");
/// Invocations per workgroup (the template's `WG`).
const WG: usize = 64;

/// The body of a function rounding `x` (f32) to `dt` and back: f16 by conversion, bf16
/// to nearest even on the bits (NaN kept), f32 not at all.
fn round_body(site: &Site, dt: DType) -> Result<String> {
    Ok(match dt {
        DType::F32 => "    return x;\n".into(),
        DType::F16 => "    return f32(f16(x));\n".into(),
        DType::BF16 => "    let u = bitcast<u32>(x);\n    if ((u & 0x7fffffffu) > 0x7f800000u) { return x; }\n    return bitcast<f32>((u + 0x7fffu + ((u >> 16u) & 1u)) & 0xffff0000u);\n".into(),
        other => return Err(unsupported(site, format!("a {other} softmax precision"))),
    })
}

/// The body of `mask_at`: the mask's bias at `(b, h, i, j)`, 0 without one.
fn mask_at(m: Option<&Mask>) -> String {
    let Some(m) = m else {
        return "    return 0.0;\n".into();
    };
    let [sb, sh, si] = m.strides;
    let at = format!("mask[b * {sb}u + h * {sh}u + i * {si}u + j]");
    let value = if m.dtype == DType::Bool {
        format!("select(neg_inf(), 0.0, {at} != 0u)")
    } else {
        format!("f32({at})")
    };
    format!(
        "    if (j >= {}u) {{ return neg_inf(); }}\n    return {value};\n",
        m.cols
    )
}

/// The bodies of `kv_len` and `offset`.
fn positions(a: &Attention) -> (String, String) {
    let d = &a.dims;
    let kv_len = if a.extras.nonpad.is_some() {
        "    let w = np[b];\n    let hi = bitcast<i32>(w.y);\n    var n = clamp(bitcast<i32>(w.x), -LIM, LIM);\n    if (hi < -1i || (hi == -1i && w.x < 0x80000000u)) { n = -LIM; }\n    if (hi > 0i || (hi == 0i && w.x >= 0x80000000u)) { n = LIM; }\n    return n;\n".to_string()
    } else {
        "    return i32(TOTAL);\n".to_string()
    };
    let offset = if a.extras.past.is_some() {
        "    return i32(PAST);\n".to_string()
    } else if a.extras.nonpad.is_some() {
        format!("    return kv_len(b) - {}i;\n", d.sq)
    } else {
        "    return 0i;\n".to_string()
    };
    (kv_len, offset)
}

/// The grid-stride copy of the cache and the new rows into `out` (`present_k` or
/// `present_v`), `hd` elements a row, read with `read` (`kraw` or `vraw`).
fn present_copy(out: &str, read: &str, hd: &str) -> String {
    format!(
        "    for (var e: u32 = flat; e < HK * TOTAL * {hd} * BATCH; e = e + NBLK * WG) {{\n        let c = e % {hd};\n        let r = e / {hd};\n        let j = r % TOTAL;\n        let r2 = r / TOTAL;\n        {out}[e] = {read}(r2 / HK, r2 % HK, j, c);\n    }}\n"
    )
}

/// Emits the general attention shader for `node`, lowered as `a`.
pub fn emit(site: &Site, name: &str, a: &Attention) -> Result<WgslKernel> {
    let d = &a.dims;
    let e = &a.extras;
    let t = match a.dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        other => return Err(unsupported(site, format!("{other} data"))),
    };
    let mut f16 = a.dtype == DType::F16 || a.softmax == DType::F16;
    let mut inputs = vec![a.q.0, a.k.0, a.v.0];
    let mut bindings = vec![
        format!("var<storage, read> q: array<{t}>;"),
        format!("var<storage, read> k: array<{t}>;"),
        format!("var<storage, read> v: array<{t}>;"),
    ];
    if let Some(m) = &a.mask {
        let (mt, _) = storage_type(m.dtype)
            .ok_or_else(|| unsupported(site, format!("a {} mask", m.dtype)))?;
        f16 |= m.dtype == DType::F16;
        bindings.push(format!("var<storage, read> mask: array<{mt}>;"));
        inputs.push(m.value.0);
    }
    let (mut past_k, mut past_v) = (String::new(), String::new());
    if let Some([pk, pv]) = e.past {
        bindings.push(format!("var<storage, read> past_k: array<{t}>;"));
        bindings.push(format!("var<storage, read> past_v: array<{t}>;"));
        inputs.extend([pk.0, pv.0]);
        let read = |arr: &str, hd: &str| {
            format!(
                "    if (j < PAST) {{ return {arr}[((b * HK + kh) * PAST + j) * {hd} + c]; }}\n"
            )
        };
        past_k = read("past_k", "DK");
        past_v = read("past_v", "DV");
    }
    if let Some(np) = e.nonpad {
        bindings.push("var<storage, read> np: array<vec2<u32>>;".into());
        inputs.push(np.0);
    }
    bindings.push(format!("var<storage, read_write> y: array<{t}>;"));
    let mut outputs = vec![a.out.0];
    let mut present = String::new();
    for (k, out) in e.present.iter().enumerate() {
        if let Some(v) = out {
            let (arr, read, hd) = [("present_k", "kraw", "DK"), ("present_v", "vraw", "DV")][k];
            bindings.push(format!("var<storage, read_write> {arr}: array<{t}>;"));
            outputs.push(v.0);
            present += &present_copy(arr, read, hd);
        }
    }
    let qk_store = match e.qk {
        Some((v, mode)) => {
            bindings.push(format!("var<storage, read_write> qk: array<{t}>;"));
            outputs.push(v.0);
            let value = ["raw", "cp", "x", "p"][mode.code() as usize];
            format!("            qk[((b * HQ + h) * SQ + i) * TOTAL + j] = {t}({value});\n")
        }
        None => String::new(),
    };
    let bindings: Vec<String> = bindings
        .iter()
        .enumerate()
        .map(|(i, s)| format!("@group(0) @binding({i}) {s}"))
        .collect();

    let count = |x: usize| u32::try_from(x).ok().filter(|&w| w <= 65535);
    let (Some(x), Some(y), Some(z)) = (count(d.sq), count(d.q_heads), count(d.batch)) else {
        return Err(unsupported(
            site,
            "more than 65535 workgroups along one axis",
        ));
    };
    let [q_sb, q_sh, q_si] = d.q_strides;
    let [k_sb, k_sh, k_si] = d.kv_strides;
    let [v_sb, v_sh, v_si] = d.v_strides;
    let [o_sb, o_sh, o_si] = d.out_strides;
    let [q_off, k_off, v_off] = d.offsets;
    let blocks = d.batch * d.q_heads * d.sq;
    let biggest = [
        d.batch * q_sb,
        d.batch * k_sb,
        d.batch * v_sb,
        d.batch * o_sb,
        d.batch * d.kv_heads * d.total() * d.head.max(d.head_v),
        d.batch * d.q_heads * d.sq * d.total(),
        blocks * WG * 2,
    ];
    if biggest.iter().any(|&n| n >= 1 << 31) {
        return Err(unsupported(site, "tensors of 2^31 elements"));
    }
    let names = "BATCH SQ HQ HK GROUP DK DV PAST TOTAL Q_OFF Q_SB Q_SH Q_SI K_OFF K_SB K_SH K_SI V_OFF V_SB V_SH V_SI O_SB O_SH O_SI E NBLK";
    let values = [
        d.batch,
        d.sq,
        d.q_heads,
        d.kv_heads,
        d.group(),
        d.head,
        d.head_v,
        d.past,
        d.total(),
        q_off,
        q_sb,
        q_sh,
        q_si,
        k_off,
        k_sb,
        k_sh,
        k_si,
        v_off,
        v_sb,
        v_sh,
        v_si,
        o_sb,
        o_sh,
        o_si,
        d.head_v.div_ceil(WG),
        blocks,
    ];
    let mut consts = String::new();
    for (c, x) in names.split(' ').zip(values) {
        consts += &format!("const {c}: u32 = {x}u;\n");
    }
    let window = |w: i64| i32::try_from(w).unwrap_or(i32::MAX);
    consts += &format!(
        "const SQS: f32 = {:e};\nconst CAP: f32 = {:e};\nconst LEFT: i32 = {}i;\nconst RIGHT: i32 = {}i;\nconst CAUSAL: bool = {};\nconst SM_SEQ: bool = {};\n",
        a.sqrt_scale,
        e.softcap,
        window(e.window[0]),
        window(e.window[1]),
        a.causal,
        a.softmax == DType::BF16,
    );
    let (kv_len, offset) = positions(a);
    let holes: Vec<(&str, String)> = vec![
        ("enable", enable_f16(f16).to_string()),
        ("what", site.op.to_string()),
        ("dtype", a.dtype.to_string()),
        ("bindings", bindings.join("\n")),
        ("consts", consts),
        ("t", t.to_string()),
        ("rnd", round_body(site, a.dtype)?),
        ("smr", round_body(site, a.softmax)?),
        ("past_k", past_k),
        ("past_v", past_v),
        ("kv_len", kv_len),
        ("offset", offset),
        ("mask_at", mask_at(a.mask.as_ref())),
        ("present", present),
        ("qk_store", qk_store),
    ];
    let refs: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Ok(WgslKernel {
        name: name.to_string(),
        node: site.node.clone(),
        source: fill(TEMPLATE, &refs)?,
        workgroups: [x, y, z],
        inputs,
        outputs,
        index_check: None,
        loop_iterations: None,
    })
}
