//! The general attention kernel (CUDA): what the flash kernels ([`crate::cuda::attention`]) leave out —
//! a KV cache with its `present_key`/`present_value` outputs, `nonpad_kv_seqlen`,
//! `qk_matmul_output` in every mode, softcap, sliding windows and a value head size of
//! its own — in one simple kernel that follows the interpreter step by step, for
//! coverage rather than speed: one block per (query row, query head, batch) makes
//! three passes over the keys (max, sum, weighted sum of V). The same blocks copy the
//! cache and the new keys and values into the present outputs. It is the WGSL general
//! shader's algorithm line by line (lavapipe runs that one in the tests here).

use crate::cuda::elementwise::storage;
use crate::cuda::support::store;
use crate::cuda::Kernel;
use crate::lower::attention::{Attention, Mask};
use crate::lower::support::Site;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("attention_general.cu");
/// Threads per block (the template's `WG`).
const WG: usize = 64;

fn unsupported(site: &Site, what: &str) -> CodegenError {
    site.unsupported(what).for_backend("CUDA")
}

/// `x` (an f32 expression) rounded to `dt` and back.
fn round_expr(site: &Site, dt: DType) -> Result<String> {
    Ok(match dt {
        DType::F32 => "x".into(),
        DType::F16 => "__half2float(__float2half_rn(x))".into(),
        DType::BF16 => "__bfloat162float(__float2bfloat16_rn(x))".into(),
        other => return Err(unsupported(site, &format!("a {other} softmax precision"))),
    })
}

/// The body of `mask_at`: the mask's bias at key `j` of this block's row, 0 without one.
fn mask_at(m: Option<&Mask>) -> String {
    let Some(m) = m else {
        return "        return 0.0f;\n".into();
    };
    let [sb, sh, si] = m.strides;
    let at = format!("mask[b * {sb}LL + h * {sh}LL + i * {si}LL + j]");
    let value = if m.dtype == DType::Bool {
        format!("({at} != 0 ? 0.0f : NEG_INF)")
    } else {
        format!("gopt_ld({at})")
    };
    format!(
        "        if (j >= {}LL) {{ return NEG_INF; }}\n        return {value};\n",
        m.cols
    )
}

/// The statements defining `n` (keys at or past it are padding) and `off`.
fn positions(a: &Attention) -> (String, String) {
    let kv_len = if a.extras.nonpad.is_some() {
        "    const long long n = np[b] < -LIM ? -LIM : (np[b] > LIM ? LIM : np[b]);\n".to_string()
    } else {
        "    const long long n = TOTAL;\n".to_string()
    };
    let offset = if a.extras.past.is_some() {
        "    const long long off = PAST;\n".to_string()
    } else if a.extras.nonpad.is_some() {
        format!("    const long long off = n - {}LL;\n", a.dims.sq)
    } else {
        "    const long long off = 0;\n".to_string()
    };
    (kv_len, offset)
}

/// The grid-stride copy of the cache and the new rows into `out` (`present_k` or
/// `present_v`), `hd` elements a row, read with `read` (`kraw` or `vraw`).
fn present_copy(out: &str, read: &str, hd: &str) -> String {
    format!(
        "    for (long long e = flat; e < HK * TOTAL * {hd} * BATCH; e += NBLK * WG) {{\n        const long long c = e % {hd};\n        const long long r = e / {hd};\n        const long long j = r % TOTAL;\n        const long long r2 = r / TOTAL;\n        {out}[e] = {read}(r2 / HK, r2 % HK, j, c);\n    }}\n"
    )
}

/// Emits the general attention kernel for `node`, lowered as `a`.
pub fn emit(site: &Site, name: &str, a: &Attention) -> Result<Kernel> {
    let d = &a.dims;
    let e = &a.extras;
    let t = storage(a.dtype);
    let mut inputs = vec![a.q.0, a.k.0, a.v.0];
    let mut params = vec![
        format!("const {t}* __restrict__ q"),
        format!("const {t}* __restrict__ k"),
        format!("const {t}* __restrict__ v"),
    ];
    if let Some(m) = &a.mask {
        params.push(format!("const {}* __restrict__ mask", storage(m.dtype)));
        inputs.push(m.value.0);
    }
    let (mut past_k, mut past_v) = (String::new(), String::new());
    if let Some([pk, pv]) = e.past {
        params.push(format!("const {t}* __restrict__ past_k"));
        params.push(format!("const {t}* __restrict__ past_v"));
        inputs.extend([pk.0, pv.0]);
        let read = |arr: &str, hd: &str| {
            format!("        if (j < PAST) {{ return {arr}[((bb * HK + hh) * PAST + j) * {hd} + c]; }}\n")
        };
        past_k = read("past_k", "DK");
        past_v = read("past_v", "DV");
    }
    if let Some(np) = e.nonpad {
        params.push("const long long* __restrict__ np".into());
        inputs.push(np.0);
    }
    params.push(format!("{t}* __restrict__ y"));
    let mut outputs = vec![a.out.0];
    let mut present = String::new();
    for (k, out) in e.present.iter().enumerate() {
        if let Some(v) = out {
            let (arr, read, hd) = [("present_k", "kraw", "DK"), ("present_v", "vraw", "DV")][k];
            params.push(format!("{t}* __restrict__ {arr}"));
            outputs.push(v.0);
            present += &present_copy(arr, read, hd);
        }
    }
    let qk_store = match e.qk {
        Some((v, mode)) => {
            params.push(format!("{t}* __restrict__ qk"));
            outputs.push(v.0);
            let value = ["raw", "cp", "x", "p"][mode.code() as usize];
            format!(
                "            qk[((b * HQ + h) * SQ + i) * TOTAL + j] = {};\n",
                store(a.dtype, value)
            )
        }
        None => String::new(),
    };

    let blocks = d.batch * d.q_heads * d.sq;
    let grid = u32::try_from(blocks)
        .ok()
        .filter(|&g| g < i32::MAX as u32)
        .ok_or_else(|| unsupported(site, "more than 2^31 query rows"))?;
    let [q_sb, q_sh, q_si] = d.q_strides;
    let [k_sb, k_sh, k_si] = d.kv_strides;
    let [v_sb, v_sh, v_si] = d.v_strides;
    let [o_sb, o_sh, o_si] = d.out_strides;
    let [q_off, k_off, v_off] = d.offsets;
    let s = |n: usize| n.to_string();
    let window = |w: i64| format!("{w}LL");
    let holes: Vec<(&str, String)> = vec![
        ("what", site.op.to_string()),
        ("dtype", a.dtype.to_string()),
        ("name", name.to_string()),
        ("params", params.join(", ")),
        ("batch", s(d.batch)),
        ("sq", s(d.sq)),
        ("hq", s(d.q_heads)),
        ("hk", s(d.kv_heads)),
        ("group", s(d.group())),
        ("dk", s(d.head)),
        ("dv", s(d.head_v)),
        ("past", s(d.past)),
        ("total", s(d.total())),
        ("q_off", s(q_off)),
        ("q_sb", s(q_sb)),
        ("q_sh", s(q_sh)),
        ("q_si", s(q_si)),
        ("k_off", s(k_off)),
        ("k_sb", s(k_sb)),
        ("k_sh", s(k_sh)),
        ("k_si", s(k_si)),
        ("v_off", s(v_off)),
        ("v_sb", s(v_sb)),
        ("v_sh", s(v_sh)),
        ("v_si", s(v_si)),
        ("o_sb", s(o_sb)),
        ("o_sh", s(o_sh)),
        ("o_si", s(o_si)),
        ("e", s(d.head_v.div_ceil(WG))),
        ("nblk", s(blocks)),
        ("sqs", format!("{:e}f", a.sqrt_scale)),
        ("cap", format!("{:e}f", e.softcap)),
        ("left", window(e.window[0])),
        ("right", window(e.window[1])),
        ("causal", a.causal.to_string()),
        ("sm_seq", (a.softmax == DType::BF16).to_string()),
        ("rnd", round_expr(site, a.dtype)?),
        ("smr", round_expr(site, a.softmax)?),
        ("kv_len", positions(a).0),
        ("offset", positions(a).1),
        ("t", t.to_string()),
        ("past_k", past_k),
        ("past_v", past_v),
        ("mask_at", mask_at(a.mask.as_ref())),
        ("present", present),
        ("qk_store", qk_store),
        ("store", store(a.dtype, "acc[e]")),
    ];
    let refs: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Ok(Kernel {
        name: name.to_string(),
        node: site.node.clone(),
        source: fill(TEMPLATE, &refs)?,
        threads: blocks * WG,
        vectorized: false,
        inputs,
        outputs,
        shared_mem: 0,
        grid,
        block: WG as u32,
        index_check: None,
    })
}
