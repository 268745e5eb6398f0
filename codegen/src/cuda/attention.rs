//! Scaled dot-product attention (ONNX `Attention`, read by [`crate::lower::attention`]:
//! 4-D `[batch, heads, seq, head]` or 3-D inputs with the heads packed in the hidden
//! dim) as one flash-style kernel: one block per (batch, query head, tile of query rows)
//! streams K and V through shared memory tile by tile with an online softmax (fp32
//! running max and sum per row, fp32 accumulation, one rounding at the store), so the
//! `[seq, seq]` score matrix never reaches global memory. Causal attention stops at the
//! diagonal tile. bf16/fp16 use tensor cores (`mma.sync` m16n8k16, fp32 accumulate,
//! fragments in registers, the head size zero-padded to a multiple of 16 in shared
//! memory; the row sum adds the probabilities as rounded for the P·V product); fp32 uses
//! CUDA cores in fp32 (no TF32, so it matches the interpreter). Both layouts are the
//! same kernel with other batch, head and row strides. The mask (additive float or
//! boolean, broadcast like the reference, a short last dim padded with `-inf`) is read
//! in place. Rows whose keys are all masked give zeros, as the reference does. Nodes
//! with more ([`Attention::general`]: a KV cache, `nonpad_kv_seqlen`, the present and
//! qk outputs, softcap, windows, a value head size of its own) go to the general
//! kernel ([`general`]).

use super::elementwise::storage;
use super::Kernel;
use crate::lower::attention::{Attention, Dims, Mask};
use crate::lower::support::Site;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::DType;

#[path = "attention_decode.rs"]
pub mod decode;
#[path = "attention_general.rs"]
mod general;

const MMA: &str = include_str!("attention_mma.cu");
const FLASH: &str = include_str!("attention_flash.cu");
const MMA_HELPERS: &str = include_str!("conv_mma.cuh");
const SIMT: &str = include_str!("attention.cu");
/// Largest head size of the tensor-core kernel (its fp32 output tile lives in registers).
pub const MMA_MAX_HEAD: usize = 128;
/// Static shared memory a block may use without an opt-in launch attribute.
const SMEM_LIMIT: usize = 48 * 1024;

fn unsupported(site: &Site, what: &str) -> CodegenError {
    site.unsupported(what).for_backend("CUDA")
}

/// The mask in CUDA C: the statement that sets `mb` (its batch and head offset) and the
/// term adding its bias at query row `i`, key `j` (both in range).
fn mask_code(m: &Mask, skv: usize) -> (String, String) {
    let [sb, sh, si] = m.strides;
    let terms: Vec<String> = [("b", sb), ("h", sh)]
        .into_iter()
        .filter(|(_, s)| *s != 0)
        .map(|(x, s)| format!("(long long){x} * {s}LL"))
        .collect();
    let base = format!(
        "    const long long mb = {};",
        if terms.is_empty() {
            "0".to_string()
        } else {
            terms.join(" + ")
        }
    );
    let row = match si {
        0 => String::new(),
        s => format!(" + (long long)i * {s}LL"),
    };
    let at = format!("mask[mb{row} + j]");
    let load = if m.dtype == DType::Bool {
        format!("({at} ? 0.0f : NEG)")
    } else {
        format!("gopt_ld({at})")
    };
    let bias = if m.cols < skv {
        format!(" + (j < {} ? {load} : NEG)", m.cols)
    } else {
        format!(" + {load}")
    };
    (base, bias)
}

/// The statements that point `qg`, `kg`, `vg` and `og` (elements of type `t`) at the
/// head of batch `b` and query head `h` (`bh = b · HQ + h`) this block reads and writes.
fn bases(d: &Dims, t: &str) -> String {
    if !d.packed {
        // Each head a contiguous [seq, head] block.
        return format!(
            "    const long long kvh = (long long)b * HK + h / (HQ / HK);\n    \
             const {t}* __restrict__ qg = q + (long long)bh * SQ * D;\n    \
             const {t}* __restrict__ kg = k + kvh * SKV * D;\n    \
             const {t}* __restrict__ vg = v + kvh * SKV * D;\n    \
             {t}* __restrict__ og = out + (long long)bh * SQ * D;\n"
        );
    }
    // Heads packed in the hidden dim: a head is D columns of each row.
    let ([qb, qh, _], [kb, kh, _], [ob, oh, _]) = (d.q_strides, d.kv_strides, d.out_strides);
    let [qf, kf, vf] = d.offsets;
    format!(
        "    const long long qo = (long long)b * {qb}LL + (long long)h * {qh}LL;\n    \
         const long long ko = (long long)b * {kb}LL + (long long)(h / (HQ / HK)) * {kh}LL;\n    \
         const long long oo = (long long)b * {ob}LL + (long long)h * {oh}LL;\n    \
         const {t}* __restrict__ qg = q + qo + {qf}LL;\n    \
         const {t}* __restrict__ kg = k + ko + {kf}LL;\n    \
         const {t}* __restrict__ vg = v + ko + {vf}LL;\n    {t}* __restrict__ og = out + oo;\n"
    )
}

/// Emits the attention kernel of `a`.
pub fn emit(a: &Attention, name: &str) -> Result<Kernel> {
    let site = &a.site;
    if a.general() {
        return general::emit(site, name, a);
    }
    if decode::applies(a) {
        return decode::emit(site, name, a);
    }
    let Attention {
        dtype: dt,
        dims,
        scale,
        causal,
        ..
    } = *a;
    let tensor_cores = dt != DType::F32 && dims.head <= MMA_MAX_HEAD;
    let vw = vector_width(&dims);
    let flash = tensor_cores && flash_applies(&dims, vw);
    let layout = if flash {
        Layout {
            bn: 64,
            ..mma_layout(&dims)
        }
    } else if tensor_cores {
        mma_layout(&dims)
    } else {
        simt_layout(site, &dims)?
    };

    let t = storage(dt);
    let mut params = vec![
        format!("const {t}* __restrict__ q"),
        format!("const {t}* __restrict__ k"),
        format!("const {t}* __restrict__ v"),
    ];
    let mut inputs = vec![a.q.0, a.k.0, a.v.0];
    if let Some(m) = &a.mask {
        params.push(format!("const {}* __restrict__ mask", storage(m.dtype)));
        inputs.push(m.value.0);
    }
    params.push(format!("{t}* __restrict__ out"));
    let (mask_base, bias) = match &a.mask {
        Some(m) => mask_code(m, dims.skv),
        None => (String::new(), String::new()),
    };
    let bm = layout.bm;
    let kv_end = if causal {
        format!("(q0 + {bm} < {0} ? q0 + {bm} : {0})", dims.sq.min(dims.skv))
    } else {
        dims.skv.to_string()
    };
    let store = if dt == DType::F16 {
        "__float2half_rn"
    } else if dt == DType::BF16 {
        "__float2bfloat16_rn"
    } else {
        ""
    };
    let q_tiles = dims.sq.div_ceil(bm);
    let blocks = dims.batch * dims.q_heads * q_tiles;
    let grid = u32::try_from(blocks).map_err(|_| CodegenError::Plan("too many blocks".into()))?;
    let row = |s: usize| {
        i32::try_from(s)
            .map(|s| s.to_string())
            .map_err(|_| unsupported(site, "rows past 2^31 elements"))
    };
    let s = |n: usize| n.to_string();
    let [_, _, qi] = dims.q_strides;
    let [_, _, ki] = dims.kv_strides;
    let [_, _, oi] = dims.out_strides;
    let mut holes: Vec<(&str, String)> = vec![
        ("name", name.to_string()),
        ("params", params.join(", ")),
        ("dtype", dt.to_string()),
        ("threads", s(layout.threads)),
        ("sq", s(dims.sq)),
        ("skv", s(dims.skv)),
        ("d", s(dims.head)),
        ("bm", s(bm)),
        ("bn", s(layout.bn)),
        ("qt", s(q_tiles)),
        ("hq", s(dims.q_heads)),
        ("hk", s(dims.kv_heads)),
        ("bases", bases(&dims, t)),
        ("qi", row(qi)?),
        ("ki", row(ki)?),
        ("oi", row(oi)?),
        ("scale", format!("{scale:e}f")),
        ("mask_base", mask_base),
        (
            "causal_ok",
            if causal { " && j <= i" } else { "" }.to_string(),
        ),
        ("kv_end", kv_end),
    ];
    // 16-byte loads where the head size allows (the tensor-core kernel's tiles).
    let mut vectorized = false;
    let mut shared_mem = 0u32;
    let template = if tensor_cores {
        let dp = dims.head.next_multiple_of(16);
        // `one`: a register of two 1.0s.
        let (pack_t, pack_fn, ptx, one) = if dt == DType::BF16 {
            (
                "__nv_bfloat162",
                "__floats2bfloat162_rn",
                "bf16",
                "0x3f803f80u",
            )
        } else {
            ("__half2", "__floats2half2_rn", "f16", "0x3c003c00u")
        };
        holes.extend([
            ("dp", s(dp)),
            ("ld", s(dp + 8)),
            ("pack_t", pack_t.to_string()),
            ("pack_fn", pack_fn.to_string()),
            ("ptx", ptx.to_string()),
            ("t", t.to_string()),
            ("one", one.to_string()),
        ]);
        vectorized = vw == 8;
        if flash {
            // A mask the same for every query row (`[.., 1, Skv]`, a padding mask) is
            // read once per tile into registers, before the scores' MMAs hide the loads.
            let row_mask = a.mask.as_ref().is_some_and(|m| m.strides[2] == 0);
            let (tile_code, term) = if row_mask {
                (
                    format!(
                        "        float mk[BN / 8][2];\n#pragma unroll\n        \
                         for (int nt = 0; nt < BN / 8; ++nt) {{\n#pragma unroll\n            \
                         for (int c = 0; c < 2; ++c) {{\n                \
                         const int j = n0 + nt * 8 + tg * 2 + c;\n                \
                         mk[nt][c] = j < SKV ? 0.0f{bias} : 0.0f;\n            }}\n        }}\n"
                    ),
                    " + mk[nt][e & 1]".to_string(),
                )
            } else {
                (String::new(), bias.clone())
            };
            holes.extend([("mask_tile", tile_code), ("bias", term)]);
            shared_mem = u32::try_from(flash_shared_bytes(&layout, dp))
                .map_err(|_| unsupported(site, "shared memory past 4 GiB"))?;
            Template::Flash
        } else {
            let vec_t = match vw {
                8 => "uint4",
                4 => "uint2",
                2 => "unsigned int",
                1 => "unsigned short",
                w => {
                    return Err(CodegenError::Plan(format!(
                        "attention: a vector of {w} elements"
                    )))
                }
            };
            holes.extend([
                ("vw", s(vw)),
                ("vec_t", vec_t.to_string()),
                ("store", store.to_string()),
                ("bias", bias.clone()),
            ]);
            Template::Mma
        }
    } else {
        let e = dims.head.div_ceil(4);
        holes.extend([
            ("e", s(e)),
            ("ld", s(4 * e + 1)),
            ("store", store.to_string()),
            ("bias", bias.clone()),
        ]);
        Template::Simt
    };
    let refs: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let source = match template {
        Template::Flash => format!("{MMA_HELPERS}{}", fill(FLASH, &refs)?),
        Template::Mma => fill(MMA, &refs)?,
        Template::Simt => fill(SIMT, &refs)?,
    };
    Ok(Kernel {
        name: name.to_string(),
        node: site.node.clone(),
        source,
        threads: blocks * layout.threads,
        vectorized,
        inputs,
        outputs: vec![a.out.0],
        shared_mem,
        grid,
        block: layout.threads as u32,
        index_check: None,
    })
}

/// Which kernel runs the node.
enum Template {
    /// Tensor cores, K and V tiles fetched by cp.async in two stages (16-byte aligned
    /// rows and even output strides).
    Flash,
    /// Tensor cores, tiles loaded then computed (any alignment).
    Mma,
    /// CUDA cores (fp32, or a head past [`MMA_MAX_HEAD`]).
    Simt,
}

/// The widest access (elements, up to 8 = 16 bytes) every row start and column offset
/// of Q, K and V allows.
fn vector_width(d: &Dims) -> usize {
    let (qi, ki) = (d.q_strides[2], d.kv_strides[2]);
    [8, 4, 2, 1]
        .into_iter()
        .find(|w| {
            [d.head, qi, ki]
                .iter()
                .chain(&d.offsets)
                .all(|x| x.is_multiple_of(*w))
        })
        .unwrap_or(1)
}

/// Whether the pipelined kernel runs these dims: its cp.async copies move 16 bytes
/// (`vw`, the widest access every row start and offset allows, must be 8 elements) and
/// it stores column pairs as one 4-byte word (even output strides).
fn flash_applies(d: &Dims, vw: usize) -> bool {
    vw == 8 && d.out_strides.iter().all(|s| s % 2 == 0)
}

/// Dynamic shared memory of the pipelined kernel, bytes: the Q tile and two stages of
/// the K and V tiles, rows of `dp + 8` two-byte elements.
fn flash_shared_bytes(l: &Layout, dp: usize) -> usize {
    (l.bm + 4 * l.bn) * (dp + 8) * 2
}

/// Block shape: query rows per block, keys per tile, threads.
struct Layout {
    bm: usize,
    bn: usize,
    threads: usize,
}

/// Tensor cores: a warp per 16 query rows (at most four warps), 64 keys per tile (32
/// above a padded head of 64, to keep shared memory under 48 KB).
fn mma_layout(dims: &Dims) -> Layout {
    let warps = dims.sq.div_ceil(16).min(4);
    let dp = dims.head.next_multiple_of(16);
    let bn = if dp <= 64 { 64 } else { 32 };
    Layout {
        bm: 16 * warps,
        bn,
        threads: 32 * warps,
    }
}

/// CUDA cores: four threads per query row; 32 rows and 32 keys per tile, 16 when the
/// fp32 tiles of a large head would pass 48 KB of shared memory.
fn simt_layout(site: &Site, dims: &Dims) -> Result<Layout> {
    let ld = 4 * dims.head.div_ceil(4) + 1;
    for tile in [32, 16] {
        let bytes = (3 * tile * ld + tile * (tile + 1)) * 4;
        if bytes <= SMEM_LIMIT {
            return Ok(Layout {
                bm: tile,
                bn: tile,
                threads: 4 * tile,
            });
        }
    }
    Err(unsupported(
        site,
        &format!("a head size of {} (shared memory)", dims.head),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shared memory of the tensor-core kernel, bytes (Q, K and V tiles of 2-byte values).
    fn mma_shared_bytes(head: usize, sq: usize) -> usize {
        let l = mma_layout(&Dims::new(1, (1, 1), (sq, 1), head, false));
        (l.bm + 2 * l.bn) * (head.next_multiple_of(16) + 8) * 2
    }

    #[test]
    fn tiles_fit_in_static_shared_memory() {
        for head in [16, 32, 36, 64, 80, 96, 128] {
            for sq in [1, 17, 64, 512] {
                assert!(mma_shared_bytes(head, sq) <= SMEM_LIMIT, "{head} {sq}");
            }
        }
    }
}
