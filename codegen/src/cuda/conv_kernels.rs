//! The convolution kernels. One input channel per group (depthwise) runs a direct
//! kernel, one thread per output element. Every other convolution runs as an implicit
//! GEMM per group `g`: `W_g[M/g, K] x im2col(X)_g[K, N*OH*OW]` with `K = C/g * KH * KW`
//! in W's own row order (channel, kernel row, kernel column), so W tiles are contiguous
//! rows and only the im2col side is gathered, on the fly, into shared memory. f16/bf16
//! run on tensor cores through `mma.sync` m16n8k16 fed by `ldmatrix` (inline PTX with f32
//! accumulators: the `nvcuda::wmma` header needs CUDA's crt headers, which the pinned
//! NVRTC wheels lack); f32 runs on CUDA cores in exact f32 math. Tile sizes shrink when
//! the large tile would leave most of the H200's 132 SMs idle (batch-1 CNNs).

use super::conv_spec::{indent, ConvSpec};
use super::elementwise::storage;
use super::support::blocks;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const DIRECT: &str = include_str!("conv_direct.cu");
const SIMT: &str = include_str!("conv_simt.cu");
const MMA: &str = include_str!("conv_mma.cu");
const MMA_HELPERS: &str = include_str!("conv_mma.cuh");

/// Blocks that fill the H200 (132 SMs) twice.
const FULL_GRID: usize = 264;

/// The block's tile coordinates and the im2col column this thread gathers (the same in
/// every K tile): group `g`, first row `m0`, first column `col0`; column `bcl` of the
/// tile is image `bn`, output position `bp` (`boh`, `bow`).
fn tile_code(s: &ConvSpec, bm: usize, bn: usize) -> (String, usize) {
    let ncol = s.n * s.p();
    let (tm, tn) = (s.mg().div_ceil(bm), ncol.div_ceil(bn));
    let code = format!(
        "    long long blk_ = blockIdx.x;
    const long long m0 = (blk_ % {tm}LL) * BM; blk_ /= {tm}LL;
    const long long col0 = (blk_ % {tn}LL) * BN; blk_ /= {tn}LL;
    const long long g = blk_;
    const int bcl = tid % BN;
    const long long bcol = col0 + bcl;
    const bool bvalid = bcol < NCOL;
    const long long bn = bvalid ? bcol / {p}LL : 0, bp = bvalid ? bcol % {p}LL : 0;
    const int boh = (int)(bp / {ow}LL), bow = (int)(bp % {ow}LL);
    (void)boh; (void)bow;
",
        p = s.p(),
        ow = s.ow
    );
    (code, s.group * tm * tn)
}

/// Code that sets `ok_` (in bounds, not padding) and `xi_` (X's offset) for im2col row
/// `k` of this thread's column.
fn gather_code(s: &ConvSpec) -> String {
    let (cg, taps, h, w) = (s.cg(), s.taps(), s.h, s.w);
    let pointwise = s.taps() == 1 && s.stride == (1, 1) && s.pad == (0, 0);
    let pad = "            ";
    if pointwise && !s.nhwc {
        // 1x1, stride 1, no padding: the column is the input position itself.
        return format!(
            "{pad}const bool ok_ = bvalid && k < K;\n{pad}const long long xi_ = (bn * {c}LL + g * {cg}LL + k) * {hw}LL + bp;\n",
            c = s.c,
            hw = h * w
        );
    }
    let (kw, (sh, sw), (dh, dw), (ph, pw)) = (s.kw, s.stride, s.dilation, s.pad);
    let xi = if s.nhwc {
        format!(
            "((bn * {h}LL + ih) * {w}LL + iw) * {c}LL + g * {cg}LL + ci",
            c = s.c
        )
    } else {
        format!(
            "((bn * {c}LL + g * {cg}LL + ci) * {h}LL + ih) * {w}LL + iw",
            c = s.c
        )
    };
    format!(
        "{pad}const int ci = (int)(k / {taps}LL), rr_ = (int)(k % {taps}LL);
{pad}const int ih = boh * {sh} - {ph} + (rr_ / {kw}) * {dh}, iw = bow * {sw} - {pw} + (rr_ % {kw}) * {dw};
{pad}const bool ok_ = bvalid && k < K && ih >= 0 && ih < {h} && iw >= 0 && iw < {w};
{pad}const long long xi_ = {xi};
"
    )
}

/// The tensor-core kernel's gather: (per-thread base, per-tile table fill, per-element
/// code setting `ok_` and `xi_`). The table row of `k` holds X's offset for (channel,
/// kernel row, kernel column) and the row and column shifts; rows past K get shifts
/// that fail the bounds check. Pointwise NCHW convolutions need no table.
fn table_gather(s: &ConvSpec) -> Result<(String, String, String)> {
    let pointwise = s.taps() == 1 && s.stride == (1, 1) && s.pad == (0, 0);
    if pointwise && !s.nhwc {
        return Ok((String::new(), String::new(), gather_code(s)));
    }
    if s.c * s.h * s.w >= 1 << 30
        || s.h.max(s.w) * s.dilation.0.max(s.dilation.1) * s.kh.max(s.kw) >= 1 << 26
    {
        return Err(s
            .site
            .unsupported("an image too large for 32-bit tap offsets"));
    }
    let (c, cg, h, w, kw, taps) = (s.c, s.cg(), s.h, s.w, s.kw, s.taps());
    let ((sh, sw), (dh, dw), (ph, pw)) = (s.stride, s.dilation, s.pad);
    let (xb, off) = if s.nhwc {
        (
            format!("((bn * {h}LL + ih0_) * {w}LL + iw0_) * {c}LL + g * {cg}LL"),
            format!("(dh * {w} + dw) * {c} + ci"),
        )
    } else {
        (
            format!(
                "(bn * {c}LL + g * {cg}LL) * {hw}LL + (long long)ih0_ * {w}LL + iw0_",
                hw = h * w
            ),
            format!("ci * {hw} + dh * {w} + dw", hw = h * w),
        )
    };
    let base = format!(
        "    const int ih0_ = boh * {sh} - {ph}, iw0_ = bow * {sw} - {pw};
    const long long xb_ = {xb};
"
    );
    let table = format!(
        "        if (tid < BK) {{
            const long long k = k0 + tid;
            int4 t_ = make_int4(0, -(1 << 28), -(1 << 28), 0);
            if (k < K) {{
                const int ci = (int)(k / {taps}LL), rr_ = (int)(k % {taps}LL);
                const int dh = (rr_ / {kw}) * {dh}, dw = (rr_ % {kw}) * {dw};
                t_ = make_int4({off}, dh, dw, 0);
            }}
            ktab[buf][tid] = t_;
        }}
"
    );
    let p = "            ";
    let gather = format!(
        "{p}const int4 t_ = ktab[buf][kr];
{p}const int ih = ih0_ + t_.y, iw = iw0_ + t_.z;
{p}const bool ok_ = bvalid && (unsigned)ih < {h}u && (unsigned)iw < {w}u;
{p}const long long xi_ = xb_ + t_.x;
"
    );
    Ok((base, table, gather))
}

fn grid(blocks: usize, s: &ConvSpec) -> Result<u32> {
    u32::try_from(blocks).map_err(|_| s.site.unsupported("more than 2^32 tiles"))
}

/// f32 convolutions: the CUDA-core kernel (64x64 tiles, 32x32 for small problems).
pub fn cuda_cores(s: &ConvSpec, name: &str) -> Result<(String, u32, u32)> {
    let big = tile_code(s, 64, 64).1 >= FULL_GRID;
    let (bm, bn) = if big { (64, 64) } else { (32, 32) };
    let threads = (bm / 4) * (bn / 4);
    let (tile, blocks) = tile_code(s, bm, bn);
    let src = fill(
        SIMT,
        &[
            ("what", s.site.op),
            ("desc", &s.describe()),
            ("bm", &bm.to_string()),
            ("bn", &bn.to_string()),
            ("threads", &threads.to_string()),
            ("name", name),
            ("params", &s.params()),
            ("k", &(s.cg() * s.taps()).to_string()),
            ("mg", &s.mg().to_string()),
            ("ncol", &(s.n * s.p()).to_string()),
            ("tile", &tile),
            ("gather", &gather_code(s)),
            ("p", &s.p().to_string()),
            ("epilogue", &indent(&s.epilogue("acc[i][j]"), 12)),
        ],
    )?;
    Ok((src, grid(blocks, s)?, threads as u32))
}

/// f16/bf16 convolutions: the tensor-core kernel (128x128 tiles of 8 warps, 64x64 of 4
/// warps for small problems), after the MMA helpers (guarded, so once per module).
pub fn tensor_cores(s: &ConvSpec, name: &str) -> Result<(String, u32, u32)> {
    let big = tile_code(s, 128, 128).1 >= FULL_GRID;
    // (tile rows, tile columns, threads, warps along N, warp tile rows, columns)
    let (bm, bn, threads, warps_n, wm, wn) = if big {
        (128, 128, 256, 2, 32, 64)
    } else {
        (64, 64, 128, 2, 32, 32)
    };
    let (tile, blocks) = tile_code(s, bm, bn);
    let (base, table, gather) = table_gather(s)?;
    let k = s.cg() * s.taps();
    let (bits, mma) = if s.x_dt == DType::F16 {
        ("__half_as_ushort", "gopt_mma_f16")
    } else {
        ("__bfloat16_as_ushort", "gopt_mma_bf16")
    };
    let src = fill(
        MMA,
        &[
            ("what", s.site.op),
            ("t", storage(s.x_dt)),
            ("desc", &s.describe()),
            ("bm", &bm.to_string()),
            ("bn", &bn.to_string()),
            ("threads", &threads.to_string()),
            ("warps_n", &warps_n.to_string()),
            ("wm", &wm.to_string()),
            ("wn", &wn.to_string()),
            ("name", name),
            ("params", &s.params()),
            ("k", &(s.cg() * s.taps()).to_string()),
            ("mg", &s.mg().to_string()),
            ("ncol", &(s.n * s.p()).to_string()),
            ("bits", bits),
            ("avec", if k.is_multiple_of(8) { "true" } else { "false" }),
            ("tile", &tile),
            ("base", &base),
            ("table", &table),
            ("gather", &gather),
            ("mma", mma),
            ("p", &s.p().to_string()),
            ("epilogue", &indent(&s.epilogue("acc[i][j][e]"), 20)),
        ],
    )?;
    let src = format!("{MMA_HELPERS}{src}");
    Ok((src, grid(blocks, s)?, threads as u32))
}

/// One input channel per group (depthwise): one thread per output element.
pub fn direct(s: &ConvSpec, name: &str) -> Result<(String, u32, u32)> {
    let total = s.n * s.m * s.p();
    let (m, oh, ow) = (s.m, s.oh, s.ow);
    let (decode, xplane, xoff) = if s.nhwc {
        (
            format!("const long long oc = i % {m}LL; long long r_ = i / {m}LL;\n        const long long ow = r_ % {ow}LL; r_ /= {ow}LL;\n        const long long oh = r_ % {oh}LL; const long long n = r_ / {oh}LL;\n"),
            format!("n * {}LL + ic", s.h * s.w * s.c),
            format!("(ih * {} + iw) * {}LL", s.w, s.c),
        )
    } else {
        (
            format!("const long long ow = i % {ow}LL; long long r_ = i / {ow}LL;\n        const long long oh = r_ % {oh}LL; r_ /= {oh}LL;\n        const long long oc = r_ % {m}LL; const long long n = r_ / {m}LL;\n"),
            format!("(n * {}LL + ic) * {}LL", s.c, s.h * s.w),
            format!("ih * {} + iw", s.w),
        )
    };
    let block = 256u32;
    let grid = blocks(total, block);
    let desc = format!(
        "{}x{} kernel, stride {:?}, dilation {:?}, pad {:?}, {} channels x {} per group, {}",
        s.kh,
        s.kw,
        s.stride,
        s.dilation,
        s.pad,
        s.c,
        s.mg(),
        s.layout()
    );
    let src = fill(
        DIRECT,
        &[
            ("what", s.site.op),
            ("desc", &desc),
            ("name", name),
            ("params", &s.params()),
            ("total", &total.to_string()),
            ("decode", &decode),
            ("mult", &s.mg().to_string()),
            ("xplane", &xplane),
            ("xoff", &xoff),
            ("taps", &s.taps().to_string()),
            ("kh", &s.kh.to_string()),
            ("kw", &s.kw.to_string()),
            ("sh", &s.stride.0.to_string()),
            ("sw", &s.stride.1.to_string()),
            ("dh", &s.dilation.0.to_string()),
            ("dw", &s.dilation.1.to_string()),
            ("ph", &s.pad.0.to_string()),
            ("pw", &s.pad.1.to_string()),
            ("h", &s.h.to_string()),
            ("w", &s.w.to_string()),
            ("ow", &ow.to_string()),
            ("epilogue", &indent(&s.epilogue("acc"), 8)),
        ],
    )?;
    Ok((src, grid, block))
}
