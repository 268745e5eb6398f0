//! The compute side of the kernels that do more than stream bytes: GEMMs (cuBLASLt),
//! packed low-bit products, convolutions and fused attention. Each is a [`Compute`]:
//! seconds on its unit with the device's parallelism taken into account (a kernel runs
//! on at most as many SMs as it has blocks, and the last wave of tiles runs part-empty),
//! its operations, its blocks, and the latency a tiled kernel adds to its launch. Kept
//! apart from the roofline rules of `cost` so that each kernel's shape arithmetic sits
//! in one place.

use super::{Target, Unit};
use gopt_ir::ops::FusedOp;
use gopt_ir::{Attrs, DType, Op};

/// The compute side of a kernel: seconds on its unit, operations, its parallel work in
/// blocks (for the occupancy rule of [`super::classify_estimate`]), the share of the
/// SMs it keeps busy (its memory term is slowed by the idle rest), and seconds it adds
/// outside the roofline (a tiled kernel's pipeline latency, an im2col step).
#[derive(Clone, Copy, Debug)]
pub(super) struct Compute {
    pub seconds: f64,
    pub flops: f64,
    pub unit: Unit,
    pub blocks: f64,
    pub occupancy: f64,
    pub fixed: f64,
}

impl Compute {
    /// A kernel bound by its bytes alone: `elems` operations (one per element, so that
    /// it has a place on a roofline), blocks of 256 elements.
    pub fn streaming(elems: f64) -> Compute {
        Compute {
            seconds: 0.0,
            flops: elems,
            unit: Unit::Cores,
            blocks: elems / 256.0,
            occupancy: 1.0,
            fixed: 0.0,
        }
    }
}

/// The share of the SMs a kernel of `blocks` blocks keeps busy: all of them from one
/// block per SM on (or when the SM count is unknown), else `blocks / SMs`.
pub(super) fn occupancy(t: &Target, blocks: f64) -> f64 {
    let sms = t.sms as f64;
    if t.sms == 0 || blocks >= sms {
        1.0
    } else {
        blocks.max(1.0) / sms
    }
}

/// How much longer whole waves of tiles take than the tiles' work: `blocks` tiles run
/// in `ceil(blocks / SMs)` waves and the last one is part-empty. 1 below one wave (the
/// occupancy rule's case) and when the SM count is unknown.
pub(super) fn wave_factor(t: &Target, blocks: f64) -> f64 {
    let sms = t.sms as f64;
    if t.sms == 0 || blocks < sms {
        return 1.0;
    }
    let waves = blocks / sms;
    waves.ceil() / waves
}

/// The slowdown of a tiled kernel's compute from its block count: the SMs it leaves
/// idle below one wave, the part-empty last wave above.
fn spread(t: &Target, blocks: f64) -> f64 {
    wave_factor(t, blocks) / occupancy(t, blocks)
}

/// The unit a GEMM-like op on `dt` inputs runs on.
pub(super) fn gemm_unit(t: &Target, dt: DType) -> Unit {
    match dt {
        DType::BF16 | DType::F16 => Unit::TensorF16,
        DType::F32 if t.tf32 => Unit::TensorTf32,
        _ => Unit::Cores,
    }
}

/// A cuBLASLt GEMM's 128×128 output tiles, the size a large kernel takes on Hopper (in
/// f64: dims from a hostile model must not overflow a usize product).
fn gemm_tiles(batch: usize, m: usize, n: usize) -> f64 {
    batch as f64 * m.div_ceil(128) as f64 * n.div_ceil(128) as f64
}

/// A GEMM on cuBLASLt: FLOPs over the unit's rate with tile rounding, the alignment
/// penalty and wave quantization, plus the tiled kernel's latency. Below one wave
/// cuBLASLt splits K over the idle SMs, so few tiles cost latency, not occupancy.
pub(super) fn gemm_time(
    t: &Target,
    trans_b: bool,
    a: Option<Vec<usize>>,
    b: Option<Vec<usize>>,
    dt: Option<DType>,
) -> Option<Compute> {
    let (a, b, dt) = (a?, b?, dt?);
    let (kb, n) = match b.as_slice() {
        [.., x, y] if trans_b => (*y, *x),
        [.., x, y] => (*x, *y),
        _ => return None,
    };
    let m: usize = a.iter().rev().skip(1).product::<usize>().max(1);
    let batch: usize = if b.len() > 2 {
        b[..b.len() - 2].iter().product::<usize>().max(1)
    } else {
        1
    };
    let m = if b.len() > 2 { m / batch.max(1) } else { m };
    let f = |x: usize| x as f64;
    let tiles = gemm_tiles(batch, m, n);
    Some(Compute {
        seconds: gemm_compute(t, batch, m, n, kb, dt) * wave_factor(t, tiles),
        flops: 2.0 * f(batch) * f(m) * f(n) * f(kb),
        unit: gemm_unit(t, dt),
        blocks: tiles,
        occupancy: 1.0,
        fixed: t.tile_latency,
    })
}

/// A product with a packed low-bit weight (MatMulNBits): its memory term is the packed
/// bytes (B's u8 type, counted with the inputs). Up to `gopt_codegen`'s 16 rows it is a
/// GEMV: with bf16/f16 activations on tensor cores (two instructions per weight to
/// unpack: bound by the bytes), with fp32 ones on CUDA cores, where unpacking, the
/// conversion and one FMA per weight and row cost about eight fp32 operations' issue
/// slots per multiply-add (`2·m·n·k` FLOPs at an eighth of the fp32 rate). Above, the
/// weight is dequantized into scratch (written at bandwidth) and multiplied on tensor
/// cores like any GEMM, cuBLASLt's latency included.
pub(super) fn packed_time(
    t: &Target,
    attrs: &Attrs,
    a: Option<Vec<usize>>,
    dt: Option<DType>,
) -> Option<Compute> {
    let (a, dt) = (a?, dt?);
    let k = usize::try_from(attrs.int("K").ok()??).ok()?;
    let n = usize::try_from(attrs.int("N").ok()??).ok()?;
    let m: usize = a.iter().rev().skip(1).product::<usize>().max(1);
    let f = |x: usize| x as f64;
    let flops = 2.0 * f(m) * f(n) * f(k);
    if m <= 16 {
        let (rate, unit) = match dt {
            DType::F32 => (t.fp32 / 8.0, Unit::Cores),
            _ => (t.gemm_rate(dt), gemm_unit(t, dt)),
        };
        return Some(Compute {
            seconds: flops / rate,
            flops,
            unit,
            blocks: f(n) / 16.0,
            occupancy: 1.0,
            fixed: 0.0,
        });
    }
    let scratch = f(n) * f(k) * dt.size() as f64 / t.bandwidth;
    let tiles = gemm_tiles(1, m, n);
    Some(Compute {
        seconds: gemm_compute(t, 1, m, n, k, dt) * wave_factor(t, tiles) + scratch,
        flops,
        unit: gemm_unit(t, dt),
        blocks: tiles,
        occupancy: 1.0,
        fixed: t.tile_latency,
    })
}

/// Compute time of a (batched) `m×k · k×n` GEMM: dims rounded up to the tile, half
/// efficiency when rows are not 16-byte aligned (n or k not a multiple of 8).
pub fn gemm_compute(t: &Target, batch: usize, m: usize, n: usize, k: usize, dt: DType) -> f64 {
    let up = |x: usize| (x.div_ceil(t.tile) * t.tile) as f64;
    let flops = 2.0 * batch as f64 * up(m) * up(n) * up(k);
    let aligned = n.is_multiple_of(8) && k.is_multiple_of(8);
    let eff = if aligned { 1.0 } else { 0.5 };
    flops / (t.gemm_rate(dt) * eff)
}

/// A convolution as the CUDA backend runs it (`gopt_codegen`'s `conv`, `conv_gemm`):
/// - one input channel per group (depthwise): one thread per output on CUDA cores;
/// - a channels-last 2-D FusedConv with one group: an im2col step (skipped for 1×1,
///   stride 1) and a cuBLASLt GEMM of `N·OH·OW` rows, priced as [`gemm_time`];
/// - otherwise an implicit GEMM per group in tiles of 128×128 (64×64 when those would
///   not fill the SMs twice; half those edges on CUDA cores), slowed by the SMs its
///   tiles leave idle, plus the tiled kernel's latency.
///
/// `x`, `w`, `y`: X's, W's (`[M, C/g, kh, kw]`) and Y's shapes.
pub(super) fn conv_time(
    t: &Target,
    op: Op,
    attrs: &Attrs,
    x: Option<Vec<usize>>,
    w: Option<Vec<usize>>,
    y: Option<Vec<usize>>,
    dt: Option<DType>,
) -> Option<Compute> {
    let (w, y, dt) = (w?, y?, dt?);
    let per_out: usize = w.get(1..)?.iter().product();
    let f = |x: usize| x as f64;
    let outs: f64 = y.iter().map(|&d| f(d)).product();
    let flops = 2.0 * outs * f(per_out);
    if w.get(1) == Some(&1) {
        let blocks = outs / 256.0;
        return Some(Compute {
            seconds: flops / t.fp32 * spread(t, blocks),
            flops,
            unit: Unit::Cores,
            blocks,
            occupancy: occupancy(t, blocks),
            fixed: 0.0,
        });
    }
    let (rate, unit) = (t.gemm_rate(dt), gemm_unit(t, dt));
    let m = *w.first()?;
    let group = usize::try_from(attrs.int_or("group", 1).ok()?).ok()?.max(1);
    let nhwc = attrs.str_or("layout", "NCHW").ok()? == "NHWC";
    if op == Op::Fused(FusedOp::FusedConv) && nhwc && group == 1 && w.len() == 4 {
        let rows = y[..y.len() - 1].iter().product::<usize>();
        let strided = attrs
            .ints("strides")
            .ok()
            .flatten()
            .is_some_and(|s| s.iter().any(|&v| v != 1));
        let direct = w[2..] == [1, 1] && !strided && x.as_ref()?.get(1..3) == y.get(1..3);
        let kp = if direct {
            per_out
        } else {
            per_out.div_ceil(8) * 8
        };
        let tiles = gemm_tiles(1, rows, m);
        // The im2col step: a launch, X read and the column matrix written, which the
        // GEMM then reads in X's place.
        let im2col = if direct {
            0.0
        } else {
            let es = dt.size() as f64;
            let xb = x?.iter().map(|&d| f(d)).product::<f64>() * es;
            let col = f(rows) * f(kp) * es;
            t.launch() + (xb + col + (col - xb).max(0.0)) / t.bandwidth
        };
        return Some(Compute {
            seconds: gemm_compute(t, 1, rows, m, kp, dt) * wave_factor(t, tiles),
            flops,
            unit,
            blocks: tiles,
            occupancy: 1.0,
            fixed: t.tile_latency + im2col,
        });
    }
    let (mg, ncol) = (m / group, rows_of(&y, nhwc));
    let edge = match unit {
        Unit::Cores => 64,
        Unit::TensorF16 | Unit::TensorTf32 => 128,
    };
    let tiles = |e: usize| f(group) * f(mg.div_ceil(e)) * f(ncol.div_ceil(e));
    let blocks = if tiles(edge) >= 2.0 * t.sms as f64 {
        tiles(edge)
    } else {
        tiles(edge / 2)
    };
    Some(Compute {
        seconds: flops / rate * spread(t, blocks),
        flops,
        unit,
        blocks,
        occupancy: occupancy(t, blocks),
        fixed: t.tile_latency,
    })
}

/// Output positions times images of a convolution's output `y` (every dim but the
/// channels').
fn rows_of(y: &[usize], nhwc: bool) -> usize {
    let channel = if nhwc { y.len().saturating_sub(1) } else { 1 };
    y.iter()
        .enumerate()
        .filter(|&(i, _)| i != channel)
        .map(|(_, &d)| d)
        .product()
}

/// Fused attention: FLOPs (`Q·Kᵀ` and `P·V`) over the tensor-core rate, for 4-D
/// `[b, h, s, d]` inputs or 3-D `[b, s, h · d]` ones with `q_num_heads`, run as blocks
/// of 64 query rows per head: slowed by the SMs those blocks leave idle, plus the tiled
/// kernel's latency.
pub(super) fn attention_time(
    t: &Target,
    attrs: &Attrs,
    q: Option<Vec<usize>>,
    k: Option<Vec<usize>>,
    dt: Option<DType>,
) -> Option<Compute> {
    let (q, k, dt) = (q?, k?, dt?);
    // batch · heads · query rows · head size, keys, and the blocks.
    let f = |x: usize| x as f64;
    let (rows_x_width, keys, blocks) = match (q.as_slice(), k.as_slice()) {
        ([b, h, s, d], [_, _, skv, _]) => (
            f(*b) * f(*h) * f(*s) * f(*d),
            f(*skv),
            f(*b) * f(*h) * f(s.div_ceil(64)),
        ),
        ([b, s, hd], [_, skv, _]) => {
            let h = attrs.int_or("q_num_heads", 0).ok().filter(|h| *h > 0)?;
            (
                f(*b) * f(*s) * f(*hd),
                f(*skv),
                f(*b) * h as f64 * f(s.div_ceil(64)),
            )
        }
        _ => return None,
    };
    let flops = 4.0 * rows_x_width * keys;
    Some(Compute {
        seconds: flops / t.gemm_rate(dt) * spread(t, blocks),
        flops,
        unit: gemm_unit(t, dt),
        blocks,
        occupancy: occupancy(t, blocks),
        fixed: t.tile_latency,
    })
}
