//! Flash decoding: attention of a few query rows (one per head and step while a language
//! model generates) against a long KV cache. The flash kernels ([`super`]) give each
//! (batch, query head) a block with a 16-row query tile, so a single query row wastes most
//! of it, every query head reads its KV head's keys again, and a batch of one launches a
//! few dozen blocks; decoding is bound by reading K and V once, so this kernel is built
//! around that read instead.
//!
//! One block per (batch, KV head, chunk of the rows it serves, split of the keys): the
//! rows are the [`Dims::group`] query heads of the KV head times the query rows, so K and
//! V are read from memory once for all of them. When batch · KV heads is small the keys
//! are split over up to eight blocks that form one thread-block cluster (sm_90's
//! `__cluster_dims__`, fixed at compile time, so the ordinary launch makes the cluster):
//! the splits combine through distributed shared memory, with no second launch and no
//! scratch buffer, which the plan has no place for. Before sm_90 the first block of each
//! cluster's worth takes every key and the others return. Inside a block each warp
//! streams its own tiles of keys (every `warps`th tile, 16-byte loads straight into the
//! product's fragments, the next step loading while one is computed, and with a split the
//! step after that prefetched into L2) with its own online softmax, and the warps combine
//! in shared memory at the end.
//!
//! Measured on an H200, replayed from a CUDA graph with K and V read from memory (bf16,
//! 32 query heads over 4 KV heads of 64, one query row; tests/cuda_attention_decode.rs):
//! 2.8 µs at batch 1 and 128 keys; 760 GB/s at batch 1 and 4096 keys, where a kernel
//! that only reads those 4 MiB gets 1.67 TB/s and the eight blocks a cluster allows per
//! KV head keep 32 of the 132 multiprocessors busy; 1.9 TB/s at batch 8, 3.6-3.9 TB/s at
//! batch 32 (the read-only kernel: 4.1).
//!
//! bf16/f16 use tensor cores (`mma.sync` m16n8k16: S^T = K Q^T and O^T += V^T P^T, eight
//! query rows per product, P transposed in registers); f32 uses CUDA cores in fp32 (no
//! TF32, so it matches the interpreter). Scores, softmax and accumulation are fp32 with
//! one rounding at the store; the mask, causality (key `j` seen by query row `i` when
//! `j <= i`, no offset, as the interpreter without a cache) and fully masked rows (zeros)
//! follow the flash kernels. [`applies`] says which nodes take it.

use super::{mask_code, unsupported};
use crate::cuda::elementwise::storage;
use crate::cuda::Kernel;
use crate::lower::attention::{Attention, Dims};
use crate::lower::support::Site;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("attention_decode.cu");
/// Most query rows per head the kernel takes: past a few, the flash kernels' query tiles
/// are no longer mostly empty.
pub const MAX_SQ: usize = 4;
/// Largest head size (its fp32 accumulators live in registers).
pub const MAX_HEAD: usize = 256;
/// Most blocks per cluster that every sm_90 part schedules (the portable cluster size).
const MAX_SPLITS: usize = 8;
/// Multiprocessors of an H200. A block (up to 256 threads of up to ~200 registers) takes
/// one, so keys are split while the launch stays one wave of at most this many blocks
/// and the splits keep [`MIN_SPLIT_KEYS`].
const SMS: usize = 132;
/// Fewest keys per split: below, one block reads its keys in a single round trip and a
/// cluster's combine costs more than it saves.
const MIN_SPLIT_KEYS: usize = 128;
/// Rows times padded head columns of one warp's fp32 accumulator (at most 64 registers a
/// thread) and of each warp's partial in shared memory.
const ACC: usize = 2048;
/// Registers a thread spends on its accumulators, Q fragments and tiles (tensor cores):
/// what is left after the first two sets how many tiles a step takes, and whether two
/// steps (one computed, one loading) fit.
const TILE_REGS: usize = 180;
/// Most tiles a warp's step takes (tensor cores; CUDA cores take one). On an H200 two
/// beat one for long caches split over a cluster, four lost everywhere.
const MAX_STEP: usize = 2;
/// Static shared memory a block may use without an opt-in launch attribute.
const SMEM_LIMIT: usize = 48 * 1024;

/// Whether the decode kernel takes this node: at most [`MAX_SQ`] query rows per head, a
/// head of at most [`MAX_HEAD`], and nothing only the general kernel does. Any layout the
/// flash kernels take (4-D, 3-D packed, read in place from a wider tensor), any mask,
/// causal or not.
pub fn applies(a: &Attention) -> bool {
    !a.general() && a.dims.sq <= MAX_SQ && a.dims.head <= MAX_HEAD
}

/// How one node's work is laid out over blocks, warps and registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// Tensor cores (bf16/f16) or CUDA cores (f32).
    mma: bool,
    /// The head size padded for the products: to 16 (tensor cores) or 32 (a lane per
    /// column and 32-column steps).
    dp: usize,
    /// Rows per KV head: query heads per KV head times query rows.
    rows: usize,
    /// Rows per block (a multiple of 8 on tensor cores, eight rows per product).
    rb: usize,
    /// Blocks over one KV head's rows.
    chunks: usize,
    warps: usize,
    /// Keys per tile: 16 (one k-step of the P·V product) or 32 (a key per lane).
    tk: usize,
    /// Keys every row may see: all, or the first `sq` when causal (no offset).
    keys: usize,
    /// Blocks (one cluster) splitting the keys, and the keys of each.
    splits: usize,
    kps: usize,
    /// Tiles a warp computes at once (a step), and whether the next step loads into
    /// registers meanwhile (tensor cores).
    step: usize,
    double: bool,
    /// Steps a warp prefetches into L2 ahead of its loads: one when a cluster's few
    /// blocks carry all the keys (about 5% faster on an H200), none when the grid is
    /// wide (the prefetches then cost more than they hide, up to 8%).
    prefetch: usize,
}

impl Layout {
    fn new(dt: DType, d: &Dims, causal: bool) -> Layout {
        let mma = dt != DType::F32;
        let rows = d.group() * d.sq;
        let (dp, rb, tk) = if mma {
            let dp = d.head.next_multiple_of(16);
            let nt = rows.div_ceil(8).min((ACC / (8 * dp)).clamp(1, 4));
            (dp, 8 * nt, 16)
        } else {
            let dp = d.head.next_multiple_of(32);
            (dp, rows.min(ACC / dp).clamp(1, 32), 32)
        };
        let chunks = rows.div_ceil(rb);
        let warps = if rb * dp <= ACC / 2 { 8 } else { 4 };
        let keys = if causal { d.sq.min(d.skv) } else { d.skv };
        let base = d.batch * d.kv_heads * chunks;
        let mut splits = 1;
        while splits < MAX_SPLITS
            && 2 * base * splits <= SMS
            && keys.div_ceil(2 * splits) >= MIN_SPLIT_KEYS
        {
            splits *= 2;
        }
        let kps = keys.div_ceil(splits).next_multiple_of(tk);
        // Accumulators (rb·dp/32 a thread), Q's fragments (half that) and four row sums per
        // 8 rows stay; a tile takes dp/2 registers (two K rows of dp/4 columns, four V rows
        // of dp/8, two bytes each), and two steps of `step` tiles dp · step.
        let fixed = rb * dp / 32 + rb * dp / 64 + rb / 2;
        let left = TILE_REGS.saturating_sub(fixed);
        let (step, double) = if mma && left >= dp {
            ((left / dp).min(MAX_STEP), true)
        } else {
            (1, false)
        };
        Layout {
            mma,
            dp,
            rows,
            rb,
            chunks,
            warps,
            tk,
            keys,
            splits,
            kps,
            step,
            double,
            prefetch: usize::from(splits > 1),
        }
    }

    /// Static shared memory, floats: the warps' partials and statistics, or the CUDA-core
    /// loop's Q rows and per-warp probabilities, whichever is larger.
    fn smem_floats(&self) -> usize {
        let (w, rb, dp) = (self.warps, self.rb, self.dp);
        let combine = w * rb * (dp + 1) + 2 * w * rb + 2 * rb;
        let tiles = if self.mma { 0 } else { rb * dp + w * rb * 32 };
        combine.max(tiles)
    }

    /// Shared memory, floats, the other blocks of a cluster write into: each block's
    /// share of every block's output columns, and their maxima and sums per row.
    fn recv_floats(&self, head: usize) -> usize {
        match self.splits {
            1 => 1,
            s => s * (self.rb * head).div_ceil(s) + 2 * s * self.rb,
        }
    }

    fn blocks(&self, d: &Dims) -> usize {
        d.batch * d.kv_heads * self.chunks * self.splits
    }
}

/// The widest access, in elements, every row start and column offset of Q, K and V allows
/// (8 for 16-bit data, 4 for f32: 16 bytes).
fn vector_width(d: &Dims, dt: DType) -> usize {
    let widest = if dt == DType::F32 { 4 } else { 8 };
    let starts: Vec<usize> = [d.q_strides, d.kv_strides, d.v_strides]
        .iter()
        .flatten()
        .chain(&d.offsets)
        .chain(std::iter::once(&d.head))
        .copied()
        .collect();
    [8, 4, 2, 1]
        .into_iter()
        .filter(|w| *w <= widest)
        .find(|w| starts.iter().all(|x| x.is_multiple_of(*w)))
        .unwrap_or(1)
}

/// L2 lines a prefetch of one K or V row touches: one more than the row's bytes need when
/// rows need not start on a 128-byte line (buffers start on 256 bytes).
fn prefetch_lines(d: &Dims, esize: usize) -> usize {
    let aligned = [d.kv_strides, d.v_strides]
        .iter()
        .flatten()
        .chain(&d.offsets[1..])
        .all(|x| (x * esize).is_multiple_of(128));
    (d.head * esize).div_ceil(128) + usize::from(!aligned)
}

/// Emits the decode kernel for `node`, lowered as `a`.
pub fn emit(site: &Site, name: &str, a: &Attention) -> Result<Kernel> {
    if !applies(a) {
        return Err(unsupported(
            site,
            &format!(
                "the decode kernel with {} query rows and a head of {}",
                a.dims.sq, a.dims.head
            ),
        ));
    }
    let (dt, d) = (a.dtype, &a.dims);
    let l = Layout::new(dt, d, a.causal);
    let (smem, recv) = (l.smem_floats(), l.recv_floats(d.head));
    if (smem + recv) * 4 > SMEM_LIMIT {
        return Err(unsupported(
            site,
            "a decode layout past 48 KB of shared memory",
        ));
    }
    let blocks = l.blocks(d);
    let grid = u32::try_from(blocks).map_err(|_| CodegenError::Plan("too many blocks".into()))?;
    if i32::try_from(l.keys + l.kps + 4 * l.tk * (MAX_STEP + 1) * l.warps).is_err() {
        return Err(unsupported(site, "2^31 keys or more"));
    }
    let threads = 32 * l.warps;
    let t = storage(dt);
    let esize = if dt == DType::F32 { 4 } else { 2 };

    let mut params = vec![
        format!("const {t}* __restrict__ q"),
        format!("const {t}* __restrict__ k"),
        format!("const {t}* __restrict__ v"),
    ];
    let mut args = vec!["q", "k", "v"];
    let mut inputs = vec![a.q.0, a.k.0, a.v.0];
    let (mask_param, mask_arg, (mask_base, bias)) = match &a.mask {
        Some(m) => {
            params.push(format!("const {}* __restrict__ mask", storage(m.dtype)));
            args.push("mask");
            inputs.push(m.value.0);
            (
                format!("const {}* __restrict__ mask, ", storage(m.dtype)),
                "mask, ",
                mask_code(m, d.total()),
            )
        }
        None => (String::new(), "", (String::new(), String::new())),
    };
    params.push(format!("{t}* __restrict__ out"));
    args.push("out");

    // bf16 and f16 differ only in the product's types; f32 leaves these in the template's
    // tensor-core half, which it does not compile.
    let bf16 = |store| {
        (
            "bf16",
            "__nv_bfloat162",
            "__floats2bfloat162_rn",
            "0x3f803f80u",
            store,
        )
    };
    let (ptx, pack_t, pack_fn, one, store) = if dt == DType::F16 {
        (
            "f16",
            "__half2",
            "__floats2half2_rn",
            "0x3c003c00u",
            "__float2half_rn",
        )
    } else if dt == DType::BF16 {
        bf16("__float2bfloat16_rn")
    } else {
        bf16("")
    };
    let s = |n: usize| n.to_string();
    let ll = |n: usize| format!("{n}LL");
    let ([qb, qh, qi], [kb, kh, ki], [vb, vh, vi], [ob, oh, oi]) =
        (d.q_strides, d.kv_strides, d.v_strides, d.out_strides);
    let [qf, kf, vf] = d.offsets;
    let vw = vector_width(d, dt);
    let holes: Vec<(&str, String)> = vec![
        ("name", name.to_string()),
        ("dtype", dt.to_string()),
        (
            "engine",
            if l.mma { "tensor cores" } else { "CUDA cores" }.into(),
        ),
        ("t", t.to_string()),
        ("params", params.join(", ")),
        ("args", args.join(", ")),
        ("threads", s(threads)),
        ("sq", s(d.sq)),
        ("keys", s(l.keys)),
        ("d", s(d.head)),
        ("dp", s(l.dp)),
        ("rows", s(l.rows)),
        ("rb", s(l.rb)),
        ("group", s(d.group())),
        ("hk", s(d.kv_heads)),
        ("chunks", s(l.chunks)),
        ("splits", s(l.splits)),
        ("kps", s(l.kps)),
        ("warps", s(l.warps)),
        ("tk", s(l.tk)),
        ("step", s(l.step)),
        ("double", l.double.to_string()),
        ("pf", s(l.prefetch)),
        ("vw", s(vw)),
        ("lines", s(prefetch_lines(d, esize))),
        ("scale", format!("{:e}f", a.scale)),
        ("qb", ll(qb)),
        ("qh", ll(qh)),
        ("qi", ll(qi)),
        ("qf", ll(qf)),
        ("kb", ll(kb)),
        ("kh", ll(kh)),
        ("ki", ll(ki)),
        ("kf", ll(kf)),
        ("vb", ll(vb)),
        ("vh", ll(vh)),
        ("vi", ll(vi)),
        ("vf", ll(vf)),
        ("ob", ll(ob)),
        ("oh", ll(oh)),
        ("oi", ll(oi)),
        ("smem", s(smem)),
        ("recv", s(recv)),
        ("mask_param", mask_param),
        ("mask_arg", mask_arg.to_string()),
        ("mask_base", mask_base),
        ("bias", bias),
        (
            "causal_ok",
            if a.causal { " && j <= i" } else { "" }.to_string(),
        ),
        ("store", store.to_string()),
        ("mma", s(usize::from(l.mma))),
        ("ptx", ptx.to_string()),
        ("pack_t", pack_t.to_string()),
        ("pack_fn", pack_fn.to_string()),
        ("one", one.to_string()),
        (
            "cluster",
            if l.splits > 1 {
                format!("__cluster_dims__({}, 1, 1)", l.splits)
            } else {
                String::new()
            },
        ),
    ];
    let refs: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Ok(Kernel {
        name: name.to_string(),
        node: site.node.clone(),
        source: fill(TEMPLATE, &refs)?,
        threads: blocks * threads,
        vectorized: vw * esize == 16,
        inputs,
        outputs: vec![a.out.0],
        shared_mem: 0,
        grid,
        block: threads as u32,
        index_check: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(batch: usize, heads: (usize, usize), sq: usize, skv: usize, head: usize) -> Dims {
        Dims::new(batch, heads, (sq, skv), head, false)
    }

    #[test]
    fn every_layout_fits_static_shared_memory_and_the_register_budget() {
        for dt in [DType::F32, DType::BF16] {
            for heads in [(32, 4), (12, 12), (8, 2), (32, 1), (64, 2)] {
                for head in [1, 16, 36, 64, 80, 128, 160, 256] {
                    for sq in 1..=MAX_SQ {
                        let l = Layout::new(dt, &dims(1, heads, sq, 4096, head), false);
                        let floats = l.smem_floats() + l.recv_floats(head);
                        assert!(floats * 4 <= SMEM_LIMIT, "{dt} {heads:?} {head} {sq}");
                        assert!(l.rb * l.dp <= ACC || l.rb == 8, "{l:?}");
                        assert!(l.chunks * l.rb >= l.rows, "{l:?}");
                        if l.mma {
                            assert_eq!(l.rb % 8, 0);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn keys_split_over_a_cluster_only_when_blocks_are_few_and_keys_many() {
        let l = Layout::new(DType::BF16, &dims(1, (32, 4), 1, 4096, 64), false);
        assert_eq!(
            (l.rb, l.chunks, l.splits, l.kps, l.warps),
            (8, 1, 8, 512, 8)
        );
        let l = Layout::new(DType::BF16, &dims(1, (32, 4), 1, 128, 64), false);
        assert_eq!(l.splits, 1);
        let l = Layout::new(DType::BF16, &dims(1, (32, 4), 1, 1000, 64), false);
        assert_eq!((l.splits, l.kps), (4, 256));
        let l = Layout::new(DType::BF16, &dims(8, (32, 4), 1, 4096, 64), false);
        assert_eq!(l.splits, 4);
        let l = Layout::new(DType::BF16, &dims(64, (32, 8), 1, 8192, 128), false);
        assert_eq!(l.splits, 1);
        // Causal without a cache: row i sees keys 0..=i only.
        let l = Layout::new(DType::F32, &dims(1, (8, 2), 2, 4096, 64), true);
        assert_eq!((l.keys, l.splits), (2, 1));
    }
}
