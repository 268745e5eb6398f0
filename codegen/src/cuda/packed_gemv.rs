//! The fused MatMulNBits GEMV of [`super`] (few rows): one kernel that reads each
//! packed byte of the weight once and dequantizes it in registers. bf16/f16 run on
//! tensor cores (`packed_gemv.cu`): on CUDA cores every weight would still cost one fp32
//! FMA per row and A one conversion per element, which with the unpacking is about the
//! ~4 instructions a weight an H200 can issue when 4-bit weights arrive at ~4 TB/s.
//! f32 runs on CUDA cores (`packed_gemv_f32.cu`; tf32 would round A). The layout
//! functions pick each kernel's sizes.

use super::super::elementwise::storage;
use super::super::support::store;
use super::super::Kernel;
use super::{a_elems, bias_code, common, fill_owned, grid_u32, inputs, unsupported, word_bytes};
use super::{word_elems, word_type, zero_form};
use crate::lower::packed::PackedSpec;
use crate::Result;
use gopt_ir::ops::nn::nbits::ZeroPoints;
use gopt_ir::DType;

const MMA: &str = include_str!("packed_gemv.cu");
const F32: &str = include_str!("packed_gemv_f32.cu");

/// Warps below which the tensor-core GEMV splits K over more warps per 16-column tile,
/// so that narrow products still occupy every SM (16 a SM on an H200's 132).
const MMA_MIN_WARPS: usize = 2048;
/// Most warps splitting K in one tile's block (512 threads).
const MMA_MAX_SPLIT: usize = 16;
/// Chunks (4 loads of B, one a lane t, for each of a lane's 2 columns) in flight over the
/// whole product below which each lane takes more per pass. A chunk is 1 KB a warp:
/// 4096 of them are 4 MB, ~31 KB an SM, past what Little's law asks at ~4 TB/s and
/// ~0.8 µs (~26 KB an SM). The 4-bit 2048 × 5632 weight (5.8 MB) is then all in flight
/// at once.
const MMA_MIN_CHUNKS: usize = 4096;
/// Most chunks a lane has in flight per pass.
const MMA_MAX_CHUNKS: usize = 4;
/// The tensor-core GEMV's `__launch_bounds__` asks room for this many threads' blocks
/// per SM, which lets a thread have up to 65536 / 512 = 128 registers: with the block
/// size alone ptxas stops near 64 registers and spills on the 8-warp blocks.
const MMA_RESIDENT_THREADS: usize = 512;
/// Threads per block of the f32 GEMV.
const F32_BLOCK: usize = 128;
/// Lanes below which the f32 GEMV's columns per group shrink (1024 warps ≈ 8 per SM).
const F32_MIN_LANES: usize = 32 * 1024;

/// The fused GEMV of `p`, on the unit its dtype runs on.
pub(super) fn emit(p: &PackedSpec, name: &str) -> Result<Kernel> {
    match p.dtype {
        DType::F16 => gemv_mma(p, name, Half::F16),
        DType::BF16 => gemv_mma(p, name, Half::BF16),
        DType::F32 => gemv_f32(p, name),
        DType::F64
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64
        | DType::Bool => Err(unsupported(&p.site, &format!("{} activations", p.dtype))),
    }
}

/// How the tensor-core GEMV covers the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MmaLayout {
    /// Warps splitting K in each block (one block per 16 columns).
    split: usize,
    /// Chunks each lane has in flight per pass.
    chunks: usize,
}

/// Sizes for `n` columns and `chunks` chunks of 4 loads per row.
fn mma_layout(n: usize, chunks: usize) -> MmaLayout {
    let tiles = n.div_ceil(16);
    let split = MMA_MIN_WARPS
        .div_ceil(tiles)
        .next_power_of_two()
        .clamp(1, MMA_MAX_SPLIT)
        .min(chunks.max(1));
    let per_warp = chunks.div_ceil(split);
    let mut u = 1;
    while u < MMA_MAX_CHUNKS && 2 * u <= per_warp && tiles * split * u < MMA_MIN_CHUNKS {
        u *= 2;
    }
    MmaLayout { split, chunks: u }
}

/// The 16-bit float types the tensor-core GEMV takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Half {
    F16,
    BF16,
}

fn gemv_mma(p: &PackedSpec, name: &str, half: Half) -> Result<Kernel> {
    let nb = &p.nb;
    let t = storage(p.dtype);
    // The pair type, its constructors from two floats and from 16 bits, its widening to
    // two floats, the mma's operand type, and the 16 bits of 2^(mantissa bits): OR-ing a
    // small q into its mantissa adds q.
    let (t2, pack2, from_bits, to_float2, ptx, magic) = match half {
        Half::BF16 => (
            "__nv_bfloat162",
            "__floats2bfloat162_rn",
            "__ushort_as_bfloat16",
            "__bfloat1622float2",
            "bf16",
            "0x4300",
        ),
        Half::F16 => (
            "__half2",
            "__floats2half2_rn",
            "__ushort_as_half",
            "__half22float2",
            "f16",
            "0x6400",
        ),
    };
    let wb = word_bytes(nb);
    let ve = word_elems(nb);
    let kw = nb.k.div_ceil(ve);
    let l = mma_layout(nb.n, kw.div_ceil(4));
    let ae = a_elems(nb.k, 8);
    let (zf, zp_decl, zero) = zero_form(nb, t);
    let (mut params, ids) = inputs(p, t, true);
    params.push(format!("{t}* __restrict__ y"));
    let (bias, formula) = bias_code(p);
    let pairs = nb.bits == 4 || half == Half::F16;
    // The scale waits for the fp32 sums when a chunk (4 loads) lies in one block.
    let post = nb.block >= 4 * ve;
    let dequant = match (pairs, nb.zero) {
        (true, ZeroPoints::Default | ZeroPoints::Packed) if post => {
            "q | magic is magic + q; less magic + z on pairs, exact; the scale on the fp32 sums"
        }
        (true, ZeroPoints::Default | ZeroPoints::Packed) => {
            "q | magic is magic + q; less magic + z, times the scale, on pairs"
        }
        (true, ZeroPoints::Float) => "q | magic is magic + q; widened, one fp32 FMA each",
        (false, ZeroPoints::Default | ZeroPoints::Packed | ZeroPoints::Float) => {
            "through fp32: byte | 0x4B000000 is 2^23 + q; (q − z) · s"
        }
    };
    let grid = nb.n.div_ceil(16);
    let threads = 32 * l.split;
    let mut holes = common(p);
    holes.extend([
        ("name", name.to_string()),
        ("params", params.join(", ")),
        ("formula", formula),
        ("t", t.to_string()),
        ("t2", t2.to_string()),
        ("pack2", pack2.to_string()),
        ("from_bits", from_bits.to_string()),
        ("ptx", ptx.to_string()),
        ("to_float2", to_float2.to_string()),
        ("f16", (half == Half::F16).to_string()),
        ("magic", magic.to_string()),
        ("m", p.rows.to_string()),
        ("zero", zero.to_string()),
        ("w", wb.to_string()),
        ("wu", (wb / 4).to_string()),
        ("rw", (nb.blocks * nb.blob / wb).to_string()),
        ("ve", ve.to_string()),
        ("s", l.split.to_string()),
        ("u", l.chunks.to_string()),
        ("ae", ae.to_string()),
        ("word_t", word_type(wb).to_string()),
        ("aword_t", word_type(ae * 2).to_string()),
        ("dequant", dequant.to_string()),
        ("zf", zf.to_string()),
        ("zp_decl", zp_decl),
        ("threads", threads.to_string()),
        (
            "min_blocks",
            (MMA_RESIDENT_THREADS / threads).max(1).to_string(),
        ),
        ("bias", bias),
        ("store", store(p.dtype, "v")),
    ]);
    Ok(Kernel {
        name: name.to_string(),
        node: p.site.node.clone(),
        source: fill_owned(MMA, &holes)?,
        threads: grid * threads,
        vectorized: wb == 16,
        inputs: ids,
        outputs: vec![p.out.0],
        shared_mem: 0,
        grid: grid_u32(&p.site, grid)?,
        block: threads as u32,
        index_check: None,
    })
}

/// How the f32 GEMV covers the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct F32Layout {
    /// Lanes per column group (a power of two, at most a warp).
    lanes: usize,
    /// Columns per group.
    cols: usize,
    /// Loads per column each lane has in flight per pass.
    unroll: usize,
}

/// Sizes for `m` rows, `n` columns and `words` loads per row.
fn f32_layout(m: usize, n: usize, words: usize) -> F32Layout {
    let lanes = words.next_power_of_two().min(32);
    // Columns per group share each load of A; at most 16 (column, row) sums a lane.
    let mut cols = m.next_power_of_two().min(4);
    while cols > 1 && (cols * m > 16 || n.div_ceil(cols) * lanes < F32_MIN_LANES) {
        cols /= 2;
    }
    // Past 4 rows the FMAs bound the kernel, not the loads in flight; and ptxas issues
    // a pass's loads of A as early as those of B, 16 rows of them overflowing the
    // registers at 2 loads a column.
    let most = if m > 4 { 1 } else { 2 };
    F32Layout {
        lanes,
        cols,
        unroll: words.div_ceil(lanes).clamp(1, most),
    }
}

fn gemv_f32(p: &PackedSpec, name: &str) -> Result<Kernel> {
    let nb = &p.nb;
    let wb = word_bytes(nb);
    let ve = word_elems(nb);
    let l = f32_layout(p.rows, nb.n, nb.k.div_ceil(ve));
    let ae = a_elems(nb.k, 4);
    let (zf, zp_decl, zero) = zero_form(nb, "float");
    let (mut params, ids) = inputs(p, "float", true);
    params.push("float* __restrict__ y".to_string());
    let (bias, formula) = bias_code(p);
    let cols = (F32_BLOCK / l.lanes) * l.cols;
    let grid = nb.n.div_ceil(cols);
    let aword = if ae == 4 {
        "float4"
    } else if ae == 2 {
        "float2"
    } else {
        "float"
    };
    let mut holes = common(p);
    holes.extend([
        ("name", name.to_string()),
        ("params", params.join(", ")),
        ("formula", formula),
        ("m", p.rows.to_string()),
        ("zero", zero.to_string()),
        ("w", wb.to_string()),
        ("wu", (wb / 4).to_string()),
        ("rw", (nb.blocks * nb.blob / wb).to_string()),
        ("ve", ve.to_string()),
        ("g", l.lanes.to_string()),
        ("c", l.cols.to_string()),
        ("u", l.unroll.to_string()),
        ("ae", ae.to_string()),
        ("word_t", word_type(wb).to_string()),
        ("aword_t", aword.to_string()),
        ("zf", zf.to_string()),
        ("zp_decl", zp_decl),
        ("block_threads", F32_BLOCK.to_string()),
        ("bias", bias),
    ]);
    Ok(Kernel {
        name: name.to_string(),
        node: p.site.node.clone(),
        source: fill_owned(F32, &holes)?,
        threads: grid * F32_BLOCK,
        vectorized: wb == 16,
        inputs: ids,
        outputs: vec![p.out.0],
        shared_mem: 0,
        grid: grid_u32(&p.site, grid)?,
        block: F32_BLOCK as u32,
        index_check: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mma_layouts_spread_narrow_products_over_warps() {
        let l = |n, chunks| {
            let l = mma_layout(n, chunks);
            (l.split, l.chunks)
        };
        // Llama MLP decode, 4-bit K = 2048 (16 chunks a row): 352 tiles, 8 warps split K,
        // each with its 2 chunks in flight at once.
        assert_eq!(l(5632, 16), (8, 2));
        // The vocabulary projection has tiles enough: 2 warps, 4 passes of 2 chunks.
        assert_eq!(l(32000, 16), (2, 2));
        // 128 tiles: 16 warps each; K = 5632 (44 chunks) gives them 2 chunks a pass.
        assert_eq!(l(2048, 16), (16, 1));
        assert_eq!(l(2048, 44), (16, 2));
        // Few tiles and a long K: 4 chunks a pass.
        assert_eq!(l(24, 64), (16, 4));
        // No more warps than chunks.
        assert_eq!(l(5, 1), (1, 1));
        assert_eq!(l(5, 3), (3, 1));
    }

    #[test]
    fn f32_layouts_keep_lanes_busy() {
        let l = f32_layout(1, 5632, 64);
        assert_eq!((l.lanes, l.cols, l.unroll), (32, 1, 2));
        // 4 rows: four columns a group share A's loads; 16 rows: one.
        assert_eq!(f32_layout(4, 1 << 20, 64).cols, 4);
        assert_eq!(f32_layout(16, 1 << 20, 64).cols, 1);
        // Short rows take fewer lanes.
        assert_eq!(f32_layout(1, 5, 3).lanes, 4);
    }
}
