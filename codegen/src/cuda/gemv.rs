//! Matrix products with few rows (LLM decode: `M` = the batch, 1 to [`MAX_ROWS`]) as a
//! generated GEMV kernel instead of cuBLASLt. Decode runs every weight once per token,
//! so such a product is bound by reading the weight: one group of lanes per output
//! column, streaming its contiguous row of B (stored `[N, K]`), reads it at close to
//! copy bandwidth with no cost beyond the launch, where cuBLASLt's tiny-`M` GEMMs pay
//! microseconds of their own (on an H200, a 4096 × 4096 bf16 weight at `M` = 1: 7 µs
//! here, 10 µs through cuBLASLt).
//!
//! [`applies`] says which GEMM nodes the kernel takes (constant B of rank 2 stored
//! transposed, A not transposed and unbatched against it, `M` ≤ [`MAX_ROWS`], f32 /
//! bf16 / f16, a bias of one value per column and a residual of the output's size);
//! [`emit`] writes the kernel, its whole epilogue included:
//! `y = act(alpha·A·Bᵀ + beta·bias) + residual`, fp32 throughout, rounded once at the
//! store. The template (`gemv.cu`) describes the kernel; [`layout`] picks its sizes.

use super::elementwise::storage;
use super::support::{activation, flit, store};
use super::Kernel;
use crate::lower::gemm::{GemmSpec, Operand};
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::fused::Activation;
use gopt_ir::{DType, ValueId};

const TEMPLATE: &str = include_str!("gemv.cu");

/// Most rows (M) the GEMV kernel takes; larger products stay on cuBLASLt. On CUDA cores
/// every weight element costs `M` fp32 FMAs, plus its conversion and a share of A's:
/// at the H200's ~4.2 TB/s a bf16 weight arrives at 2.1 G elements/ms, so `M` = 8
/// already needs half the SMs' 33 TFMA/s and most of their issue slots, while
/// cuBLASLt's tensor cores read large weights at ~3.9 TB/s whatever `M`. Measured on an
/// H200, µs for `M` = 1, 2, 3, 4 (cuBLASLt in brackets): bf16 K = 2048, N = 32000: 31.9,
/// 32.5, 36.6, 37.2 (34.0, 34.2, 34.3, 35.4), and 51 / 87 at 8 / 16 rows; N = 5632:
/// 5.7, 6.4, 6.9, 7.7 (6.2, 6.2, 6.1, 6.2); 4096 × 4096: 6.9, 7.5, 8.8, 9.5 (10.4,
/// 10.4, 9.7, 9.6). So 2: up to two rows the kernel is faster or within 4%; from three
/// on, cuBLASLt is faster on two of the three.
pub const MAX_ROWS: usize = 2;

/// Threads per block (4 warps: enough blocks to spread over every SM at decode sizes).
const BLOCK: usize = 128;
/// Bytes of each of its columns' rows a lane loads per pass (4 loads of 16 bytes).
/// Little's law wants ~4.2 TB/s × ~0.8 µs ≈ 3.4 MB in flight, 26 KB an SM; at one row
/// (48 registers, 40 warps an SM) this is 80 KB. Measured on an H200, 4 loads beat 2
/// and 8 (more registers, fewer warps).
const ROW_BYTES: usize = 64;
/// Blocks per SM `__launch_bounds__` asks room for: 2, up to 255 registers a thread.
/// With its default (the block size alone) ptxas stops near 64 registers and spills,
/// since it issues a pass's loads of A as early as those of B.
const MIN_BLOCKS: usize = 2;
/// Lanes below which columns per group shrink, so that narrow products still occupy
/// every SM (1024 warps ≈ 8 per SM on an H200).
const MIN_LANES: usize = 32 * 1024;

/// Whether GEMM `sp` runs as the GEMV kernel.
pub fn applies(sp: &GemmSpec) -> bool {
    check(sp).is_ok()
}

/// The GEMV kernel of `sp` (named `name`, its `Kernel::inputs`/`outputs` the graph
/// values it reads/writes, in kernel-parameter order: A, B, the bias, the residual,
/// then the output). A node [`applies`] refuses is an `Unsupported` error saying why.
pub fn emit(sp: &GemmSpec, name: &str) -> Result<Kernel> {
    let p = check(sp)?;
    let es = p.dtype.size();
    let l = layout(p.m, p.n, p.k, es);
    let t = storage(p.dtype);
    let mut params = vec![
        format!("const {t}* __restrict__ a"),
        format!("const {t}* __restrict__ b"),
    ];
    let mut inputs = vec![p.a.0, p.b.0];
    let mut formula = if p.alpha == 1.0 {
        "A.B^T".to_string()
    } else {
        format!("{} A.B^T", p.alpha)
    };
    let mut bias = String::new();
    if let Some((v, dt, beta)) = p.bias {
        params.push(format!("const {}* __restrict__ bias", storage(dt)));
        inputs.push(v.0);
        let term = widen(dt, "bias[n]");
        bias = if beta == 1.0 {
            formula.push_str(" + bias");
            format!("                v += {term};\n")
        } else {
            formula.push_str(&format!(" + {beta} C"));
            format!("                v += {} * {term};\n", flit(beta))
        };
    }
    if p.act != Activation::None {
        formula = format!("{}({formula})", p.act.name());
    }
    let mut residual = String::new();
    if let Some((v, dt)) = p.residual {
        params.push(format!("const {}* __restrict__ res", storage(dt)));
        inputs.push(v.0);
        let term = widen(dt, "res[(long long)i * N + n]");
        residual = format!("                v += {term};\n");
        formula.push_str(" + residual");
    }
    params.push(format!("{}* __restrict__ y", storage(p.out_dtype)));
    let scaled = if p.alpha == 1.0 {
        "s".to_string()
    } else {
        format!("s * {}", flit(p.alpha))
    };
    let cols = (BLOCK / l.lanes) * l.cols;
    let grid = p.n.div_ceil(cols);
    if grid * BLOCK > i32::MAX as usize {
        return Err(CodegenError::Plan(format!(
            "node `{}`: GEMV grid of {grid} blocks too large",
            sp.site.node
        )));
    }
    let s = |x: usize| x.to_string();
    let source = fill(
        TEMPLATE,
        &[
            ("formula", &formula),
            ("name", name),
            ("params", &params.join(", ")),
            ("t", t),
            ("m", &s(p.m)),
            ("n", &s(p.n)),
            ("k", &s(p.k)),
            ("g", &s(l.lanes)),
            ("c", &s(l.cols)),
            ("u", &s(l.unroll)),
            ("w", &s(l.word.bytes())),
            ("ve", &s(l.word.bytes() / es)),
            ("kw", &s(l.words)),
            ("step", &s(l.lanes * l.unroll)),
            ("block", &s(BLOCK)),
            ("min_blocks", &s(MIN_BLOCKS)),
            ("word_t", l.word.ctype()),
            ("scaled", &scaled),
            ("bias", &bias),
            ("act", &activation(p.act, "v")),
            ("residual", &residual),
            ("store", &store(p.out_dtype, "v")),
        ],
    )?;
    Ok(Kernel {
        name: name.to_string(),
        node: sp.site.node.clone(),
        source,
        threads: grid * BLOCK,
        vectorized: l.word == Word::B16,
        inputs,
        outputs: vec![p.out.0],
        shared_mem: 0,
        grid: grid as u32,
        block: BLOCK as u32,
        index_check: None,
    })
}

/// `x` (an element of dtype `dt`) as an fp32 expression.
fn widen(dt: DType, x: &str) -> String {
    if dt == DType::F64 {
        format!("(float)gopt_ld({x})")
    } else {
        format!("gopt_ld({x})")
    }
}

/// A GEMM node the kernel takes, read and checked.
struct Gemv {
    a: ValueId,
    b: ValueId,
    out: ValueId,
    /// Added before the activation, with its dtype and scale (Gemm's beta).
    bias: Option<(ValueId, DType, f32)>,
    /// Added after the activation, with its dtype.
    residual: Option<(ValueId, DType)>,
    act: Activation,
    alpha: f32,
    dtype: DType,
    out_dtype: DType,
    m: usize,
    n: usize,
    k: usize,
}

/// Reads `sp` as [`Gemv`], or says why the kernel does not take it.
fn check(sp: &GemmSpec) -> Result<Gemv> {
    let no = |what: &str| {
        sp.site
            .unsupported(&format!("a GEMV of {what}"))
            .for_backend("CUDA")
    };
    let (p, pr) = (&sp.parts, &sp.problem);
    if !p.trans_b {
        return Err(no("a B stored [K, N] (it reads B as [N, K] rows)"));
    }
    if p.trans_a {
        return Err(no("a transposed A"));
    }
    if pr.batch != 1 {
        return Err(no("batched B"));
    }
    if pr.m > MAX_ROWS {
        return Err(no(&format!("{} rows (at most {MAX_ROWS})", pr.m)));
    }
    if pr.m == 0 || pr.n == 0 || pr.k == 0 {
        return Err(no("an empty product"));
    }
    if !sp.b.konst {
        return Err(no("a B that is not a constant"));
    }
    if sp.b.shape.len() != 2 {
        return Err(no("a B not of rank 2"));
    }
    for dt in [pr.dtype, pr.out_dtype] {
        match dt {
            DType::F32 | DType::BF16 | DType::F16 => {}
            other => return Err(no(&format!("{other} operands"))),
        }
    }
    // A bias or residual of `count` elements, of any float dtype.
    let float = |v: &Operand, what: &str, count: usize| -> Result<(DType, Vec<usize>)> {
        let (dt, s) = (v.dtype, v.shape.clone());
        match dt {
            DType::F32 | DType::BF16 | DType::F16 | DType::F64 => {}
            other => return Err(no(&format!("a {other} {what}"))),
        }
        if s.iter().product::<usize>() != count {
            return Err(no(&format!("a {what} of shape {s:?}")));
        }
        Ok((dt, s))
    };
    let bias = match &sp.tail.bias {
        Some(v) => {
            let (dt, s) = float(v, "bias", pr.n)?;
            if s.last().copied().unwrap_or(1) != pr.n {
                return Err(no(&format!(
                    "a bias of shape {s:?} (not one value per column)"
                )));
            }
            Some((v.id, dt, p.beta))
        }
        None => None,
    };
    let residual = match &sp.tail.residual {
        Some(v) => Some((v.id, float(v, "residual", pr.m * pr.n)?.0)),
        None => None,
    };
    Ok(Gemv {
        a: pr.a,
        b: pr.b,
        out: pr.out,
        bias,
        residual,
        act: p.act,
        alpha: p.alpha,
        dtype: pr.dtype,
        out_dtype: pr.out_dtype,
        m: pr.m,
        n: pr.n,
        k: pr.k,
    })
}

/// The width of each load of A and B: the widest a row of `K` elements keeps aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Word {
    B16,
    B8,
    B4,
    B2,
}

impl Word {
    fn bytes(self) -> usize {
        match self {
            Word::B16 => 16,
            Word::B8 => 8,
            Word::B4 => 4,
            Word::B2 => 2,
        }
    }

    /// The CUDA type loaded (one `__ldg`/`__ldcs`).
    fn ctype(self) -> &'static str {
        match self {
            Word::B16 => "uint4",
            Word::B8 => "uint2",
            Word::B4 => "unsigned int",
            Word::B2 => "unsigned short",
        }
    }
}

/// How the kernel covers the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// The load width.
    word: Word,
    /// Words per row of A and B.
    words: usize,
    /// Lanes per column group (a power of two, at most a warp).
    lanes: usize,
    /// Columns per group.
    cols: usize,
    /// Words per row each lane loads per pass.
    unroll: usize,
}

/// Sizes for `M` × `N` × `K` with elements of `es` bytes. Rows start at multiples of
/// 256 bytes (arena slots and weights are aligned so, and views alias whole buffers),
/// so a row of `K` elements is aligned to the largest word dividing its bytes.
fn layout(m: usize, n: usize, k: usize, es: usize) -> Layout {
    let word = [Word::B16, Word::B8, Word::B4, Word::B2]
        .into_iter()
        .find(|w| w.bytes() >= es && (k * es).is_multiple_of(w.bytes()))
        .unwrap_or(Word::B2);
    let words = k * es / word.bytes();
    // A short row is covered by fewer lanes, so no lane idles.
    let lanes = words.next_power_of_two().min(32);
    // Columns per group share each word of A they load: without that, L1 serves
    // `M` bytes of A per byte of B. One column a row up to 4 (measured best on an H200
    // from 1 to 4 rows).
    let mut cols = m.next_power_of_two().min(4);
    while cols > 1 && n.div_ceil(cols) * lanes < MIN_LANES {
        cols /= 2;
    }
    let unroll = (ROW_BYTES / word.bytes())
        .min(words.div_ceil(lanes))
        .clamp(1, 16);
    Layout {
        word,
        words,
        lanes,
        cols,
        unroll,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_keep_loads_aligned_and_lanes_busy() {
        // Llama-sized decode: one warp per column, 4 loads of 16 bytes in flight a lane.
        let l = layout(1, 5632, 2048, 2);
        assert_eq!(
            (l.word, l.words, l.lanes, l.cols, l.unroll),
            (Word::B16, 256, 32, 1, 4)
        );
        // 2 rows: two columns per warp share each word of A.
        let l = layout(2, 5632, 2048, 2);
        assert_eq!((l.cols, l.unroll), (2, 4));
        // ... unless that leaves too few warps.
        assert_eq!(layout(2, 1024, 2048, 2).cols, 1);
        // A 64-element row: 8 lanes of 16 bytes, 4 groups per warp.
        let l = layout(1, 64, 64, 2);
        assert_eq!((l.lanes, l.unroll), (8, 1));
        // Rows not 16-byte aligned load narrower words, more of them.
        let l = layout(1, 5, 100, 2);
        assert_eq!((l.word, l.unroll), (Word::B8, 1));
        let l = layout(1, 5, 1001, 2);
        assert_eq!((l.word, l.unroll), (Word::B2, 16));
        assert_eq!(layout(1, 5, 101, 4).word, Word::B4);
        assert_eq!(layout(1, 5, 100, 4).word, Word::B16);
    }
}
