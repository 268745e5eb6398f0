//! Scaled dot-product attention (ONNX `Attention` on 4-D `[batch, heads, seq, head]`
//! inputs) as one flash-style kernel: one block per (batch, query head, tile of query
//! rows) streams K and V through shared memory tile by tile with an online softmax
//! (fp32 running max and sum per row, fp32 accumulation, one rounding at the store), so
//! the `[seq, seq]` score matrix never reaches global memory. Causal attention stops at
//! the diagonal tile. bf16/fp16 use tensor cores (`mma.sync` m16n8k16, fp32 accumulate,
//! fragments in registers, the head size zero-padded to a multiple of 16 in shared
//! memory); fp32 uses CUDA cores in fp32 (no TF32, so it matches the interpreter).
//! The mask (additive float or boolean, broadcast like the reference, a short last dim
//! padded with `-inf`) is read in place. Rows whose keys are all masked give zeros, as
//! the reference does. Modes the kernel does not implement (KV cache, 3-D inputs,
//! softcap, windows, the extra outputs) are reported, never ignored.

use super::elementwise::storage;
use super::Kernel;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::AttentionOp;
use gopt_ir::{Attr, DType, Graph, Node, Op, ValueId};

const MMA: &str = include_str!("attention_mma.cu");
const SIMT: &str = include_str!("attention.cu");
/// Largest head size of the tensor-core kernel (its fp32 output tile lives in registers).
pub const MMA_MAX_HEAD: usize = 128;
/// Static shared memory a block may use without an opt-in launch attribute.
const SMEM_LIMIT: usize = 48 * 1024;

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(op, Op::Attention(AttentionOp::Attention))
}

fn unsupported(node: &Node, what: &str) -> CodegenError {
    CodegenError::Unsupported {
        node: node.name.clone(),
        op: node.op.name().into(),
        backend: "CUDA",
        what: what.into(),
    }
}

fn plan(e: gopt_ir::IrError) -> CodegenError {
    CodegenError::Plan(e.to_string())
}

/// Sizes of one attention node.
struct Dims {
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    sq: usize,
    skv: usize,
    head: usize,
}

/// The mask's place in the kernel: its element type, the statement that sets `mb` (the
/// batch and head offset) and the term adding its bias at query row `i`, key `j` (both
/// in range).
struct Mask {
    value: ValueId,
    dtype: DType,
    base: String,
    bias: String,
}

fn shape(g: &Graph, node: &Node, v: ValueId) -> Result<(DType, Vec<usize>)> {
    let t = g.ty(v).map_err(plan)?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
    Ok((t.dtype, s))
}

/// Rejects every attribute whose value changes the result in a way the kernel does not
/// implement; returns the softmax scale and whether attention is causal.
fn attributes(node: &Node, dims: &Dims) -> Result<(f32, bool)> {
    let mut scale = None;
    let mut causal = false;
    for (key, value) in &node.attrs.0 {
        let bad = |what: &str| Err(unsupported(node, what));
        match (key.as_str(), value) {
            ("scale", Attr::Float(s)) => scale = Some(*s),
            ("is_causal", Attr::Int(c)) => causal = *c != 0,
            ("softcap", Attr::Float(c)) if *c == 0.0 => {}
            ("softcap", _) => return bad("softcap"),
            ("left_window_size" | "right_window_size", Attr::Int(-1)) => {}
            ("left_window_size" | "right_window_size", _) => return bad("sliding windows"),
            ("q_num_heads", Attr::Int(h)) if *h == dims.q_heads as i64 => {}
            ("kv_num_heads", Attr::Int(h)) if *h == dims.kv_heads as i64 => {}
            ("q_num_heads" | "kv_num_heads", _) => {
                return bad("head counts that differ from the inputs' shapes")
            }
            // Only selects what the fourth output holds; the kernel writes the first only.
            ("qk_matmul_output_mode", Attr::Int(_)) => {}
            // The kernel's softmax is fp32, at least as precise as any of these.
            (
                "softmax_precision",
                Attr::DType(DType::F32 | DType::F16 | DType::BF16) | Attr::Int(1 | 10 | 16),
            ) => {}
            ("softmax_precision", _) => return bad("a softmax precision above fp32"),
            (other, _) => return bad(&format!("the attribute `{other}`")),
        }
    }
    let scale = scale.unwrap_or_else(|| (1.0 / (dims.head as f64).sqrt()) as f32);
    if !scale.is_finite() {
        return Err(unsupported(node, &format!("a scale of {scale}")));
    }
    Ok((scale, causal))
}

/// The mask's kernel code; `None` when the node has none.
fn mask(g: &Graph, node: &Node, dims: &Dims) -> Result<Option<Mask>> {
    let Some(v) = node.inputs.get(3).copied().flatten() else {
        return Ok(None);
    };
    let (dtype, ms) = shape(g, node, v)?;
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::Bool) {
        return Err(unsupported(node, &format!("a {dtype} mask")));
    }
    if ms.is_empty() || ms.len() > 4 {
        return Err(unsupported(node, "a mask that is not 1-D to 4-D"));
    }
    let mut m4 = vec![1usize; 4 - ms.len()];
    m4.extend_from_slice(&ms);
    let full = [dims.batch, dims.q_heads, dims.sq, dims.skv];
    // As the reference: a last dim shorter than the keys is padded with -inf (so a last
    // dim of 1 masks every key but the first); other dims broadcast from 1.
    let cols = m4[3];
    if cols > dims.skv || (0..3).any(|a| m4[a] != 1 && m4[a] != full[a]) {
        return Err(unsupported(
            node,
            &format!("a mask of shape {ms:?} that does not broadcast to {full:?}"),
        ));
    }
    let st = [cols * m4[2] * m4[1], cols * m4[2], cols];
    let stride = |a: usize| if m4[a] == 1 { 0 } else { st[a] };
    let terms: Vec<String> = [("b", stride(0)), ("h", stride(1))]
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
    let row = match stride(2) {
        0 => String::new(),
        s => format!(" + (long long)i * {s}LL"),
    };
    let at = format!("mask[mb{row} + j]");
    let load = if dtype == DType::Bool {
        format!("({at} ? 0.0f : NEG)")
    } else {
        format!("gopt_ld({at})")
    };
    let bias = if cols < dims.skv {
        format!(" + (j < {cols} ? {load} : NEG)")
    } else {
        format!(" + {load}")
    };
    Ok(Some(Mask {
        value: v,
        dtype,
        base,
        bias,
    }))
}

/// Emits the attention kernel for `node`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
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
    let (q, k, v) = (input(0)?, input(1)?, input(2)?);
    let (dt, qs) = shape(g, node, q)?;
    let (kdt, ks) = shape(g, node, k)?;
    let (vdt, vs) = shape(g, node, v)?;
    let (odt, os) = shape(g, node, node.outputs[0])?;
    if qs.len() != 4 || ks.len() != 4 || vs.len() != 4 {
        return Err(unsupported(
            node,
            "3-D (heads packed in the hidden dim) inputs",
        ));
    }
    if kdt != dt || vdt != dt || odt != dt {
        return Err(unsupported(
            node,
            "Q, K, V and the output in different types",
        ));
    }
    if !matches!(dt, DType::F32 | DType::F16 | DType::BF16) {
        return Err(unsupported(node, &format!("{dt} data")));
    }
    let dims = Dims {
        batch: qs[0],
        q_heads: qs[1],
        kv_heads: ks[1],
        sq: qs[2],
        skv: ks[2],
        head: qs[3],
    };
    let agree = ks[0] == dims.batch
        && vs[0] == dims.batch
        && vs[1] == dims.kv_heads
        && vs[2] == dims.skv
        && ks[3] == dims.head
        && dims.kv_heads > 0
        && dims.q_heads.is_multiple_of(dims.kv_heads);
    if !agree {
        return Err(unsupported(node, &format!("Q {qs:?}, K {ks:?}, V {vs:?}")));
    }
    if vs[3] != dims.head {
        return Err(unsupported(
            node,
            "a value head size other than the key head size",
        ));
    }
    if os != [dims.batch, dims.q_heads, dims.sq, dims.head] {
        return Err(unsupported(node, &format!("an output of shape {os:?}")));
    }
    if qs.contains(&0) || dims.skv == 0 {
        return Err(unsupported(node, "empty tensors"));
    }
    let (scale, causal) = attributes(node, &dims)?;
    let mask = mask(g, node, &dims)?;
    let tensor_cores = dt != DType::F32 && dims.head <= MMA_MAX_HEAD;
    let layout = if tensor_cores {
        mma_layout(&dims)
    } else {
        simt_layout(node, &dims)?
    };

    let t = storage(dt);
    let mut params = vec![
        format!("const {t}* __restrict__ q"),
        format!("const {t}* __restrict__ k"),
        format!("const {t}* __restrict__ v"),
    ];
    let mut inputs = vec![q.0, k.0, v.0];
    if let Some(m) = &mask {
        params.push(format!("const {}* __restrict__ mask", storage(m.dtype)));
        inputs.push(m.value.0);
    }
    params.push(format!("{t}* __restrict__ out"));
    let (mask_base, bias) = match &mask {
        Some(m) => (m.base.clone(), m.bias.clone()),
        None => (String::new(), String::new()),
    };
    let bm = layout.bm;
    let kv_end = if causal {
        format!("(q0 + {bm} < {0} ? q0 + {bm} : {0})", dims.sq.min(dims.skv))
    } else {
        dims.skv.to_string()
    };
    let store = match dt {
        DType::F16 => "__float2half_rn",
        DType::BF16 => "__float2bfloat16_rn",
        _ => "",
    };
    let q_tiles = dims.sq.div_ceil(bm);
    let blocks = dims.batch * dims.q_heads * q_tiles;
    let grid = u32::try_from(blocks).map_err(|_| CodegenError::Plan("too many blocks".into()))?;
    let s = |n: usize| n.to_string();
    let mut holes: Vec<(&str, String)> = vec![
        ("name", name.to_string()),
        ("params", params.join(", ")),
        ("t", t.to_string()),
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
        ("scale", format!("{scale:e}f")),
        ("mask_base", mask_base),
        ("bias", bias),
        (
            "causal_ok",
            if causal { " && j <= i" } else { "" }.to_string(),
        ),
        ("kv_end", kv_end),
        ("store", store.to_string()),
    ];
    // 16-byte loads where the head size allows (the tensor-core kernel's tiles).
    let mut vectorized = false;
    let template = if tensor_cores {
        let dp = dims.head.next_multiple_of(16);
        let vw = [8, 4, 2, 1]
            .into_iter()
            .find(|w| dims.head.is_multiple_of(*w))
            .unwrap_or(1);
        let (pack_t, pack_fn, ptx) = if dt == DType::BF16 {
            ("__nv_bfloat162", "__floats2bfloat162_rn", "bf16")
        } else {
            ("__half2", "__floats2half2_rn", "f16")
        };
        let vec_t = match vw {
            8 => "uint4",
            4 => "uint2",
            2 => "unsigned int",
            _ => "unsigned short",
        };
        vectorized = vw == 8;
        holes.extend([
            ("dp", s(dp)),
            ("ld", s(dp + 8)),
            ("vw", s(vw)),
            ("vec_t", vec_t.to_string()),
            ("pack_t", pack_t.to_string()),
            ("pack_fn", pack_fn.to_string()),
            ("ptx", ptx.to_string()),
        ]);
        MMA
    } else {
        let e = dims.head.div_ceil(4);
        holes.extend([("e", s(e)), ("ld", s(4 * e + 1))]);
        SIMT
    };
    let refs: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let source = fill(template, &refs)?;
    Ok(Kernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        threads: blocks * layout.threads,
        vectorized,
        inputs,
        outputs: vec![node.outputs[0].0],
        shared_mem: 0,
        grid,
        block: layout.threads as u32,
        index_check: None,
    })
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
fn simt_layout(node: &Node, dims: &Dims) -> Result<Layout> {
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
        node,
        &format!("a head size of {} (shared memory)", dims.head),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shared memory of the tensor-core kernel, bytes (Q, K and V tiles of 2-byte values).
    fn mma_shared_bytes(head: usize, sq: usize) -> usize {
        let l = mma_layout(&Dims {
            batch: 1,
            q_heads: 1,
            kv_heads: 1,
            sq,
            skv: 1,
            head,
        });
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
