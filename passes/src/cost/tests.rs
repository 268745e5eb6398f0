//! The cost model's structural terms, one property each: a gather is priced on the rows
//! it reads, a tiled kernel never costs less than its launch and latency, idle SMs and
//! part-empty waves slow a kernel, and one-thread-per-element kernels are bound by
//! their threads.

use super::{op_work, Target, Work};
use gopt_ir::ops::{AttentionOp, ElementwiseOp, FusedOp, NnOp, ShapeOp};
use gopt_ir::{Attr, Attrs, DType, Dim, Op, TensorType};

fn ty(dtype: DType, shape: &[u64]) -> TensorType {
    TensorType::new(dtype, shape.iter().map(|&d| Dim::Known(d)).collect())
}

fn work(t: &Target, op: Op, attrs: &Attrs, ins: &[TensorType], out: TensorType) -> Work {
    let ins: Vec<&TensorType> = ins.iter().collect();
    op_work(t, op, attrs, &ins, &[out])
}

/// An embedding lookup of `tokens` rows of 768 f32 from a table of `rows` rows.
fn gather(t: &Target, rows: u64, tokens: u64) -> Work {
    work(
        t,
        Op::Shape(ShapeOp::Gather),
        &Attrs::default(),
        &[ty(DType::F32, &[rows, 768]), ty(DType::I64, &[1, tokens])],
        ty(DType::F32, &[1, tokens, 768]),
    )
}

#[test]
fn gather_is_priced_on_the_rows_it_reads_not_the_table() {
    let t = Target::h200();
    let (small, large) = (gather(&t, 10_000, 4096), gather(&t, 50_000, 4096));
    assert_eq!(small.bytes, large.bytes, "the table's size must not count");
    assert_eq!(small.seconds, large.seconds);
    // Rows read + indices + rows written.
    assert_eq!(large.bytes, 4096.0 * 768.0 * 4.0 * 2.0 + 4096.0 * 8.0);
    // Four times the indices: about four times the work above the launch.
    let more = gather(&t, 50_000, 16_384);
    let ratio = (more.seconds - t.launch()) / (large.seconds - t.launch());
    assert!((3.9..=4.1).contains(&ratio), "{ratio}");
    // A table smaller than the output is read at most once.
    let tiny = gather(&t, 8, 4096);
    assert_eq!(
        tiny.bytes,
        8.0 * 768.0 * 4.0 + 4096.0 * 8.0 + 4096.0 * 768.0 * 4.0
    );
}

fn matmul(t: &Target, m: u64, n: u64, k: u64) -> Work {
    work(
        t,
        Op::Fused(FusedOp::FusedMatMul),
        &Attrs::default(),
        &[ty(DType::BF16, &[m, k]), ty(DType::BF16, &[k, n])],
        ty(DType::BF16, &[m, n]),
    )
}

fn attention(t: &Target, batch: u64, heads: u64, seq: u64) -> Work {
    let q = ty(DType::BF16, &[batch, heads, seq, 64]);
    work(
        t,
        Op::Attention(AttentionOp::Attention),
        &Attrs::default(),
        &[q.clone(), q.clone(), q.clone()],
        q,
    )
}

fn conv(t: &Target, batch: u64, c: u64, m: u64, hw: u64, nhwc: bool) -> Work {
    let mut attrs = Attrs::default();
    attrs.set("pads", Attr::Ints(vec![1, 1, 1, 1]));
    let (x, y) = if nhwc {
        attrs.set("layout", Attr::Str("NHWC".into()));
        ([batch, hw, hw, c], [batch, hw, hw, m])
    } else {
        ([batch, c, hw, hw], [batch, m, hw, hw])
    };
    work(
        t,
        Op::Fused(FusedOp::FusedConv),
        &attrs,
        &[ty(DType::BF16, &x), ty(DType::BF16, &[m, c, 3, 3])],
        ty(DType::BF16, &y),
    )
}

#[test]
fn tiled_kernels_never_cost_less_than_their_launch_and_latency() {
    for t in [Target::h200(), {
        let mut eager = Target::h200();
        eager.cuda_graph = false;
        eager
    }] {
        let floor = t.launch() + t.tile_latency;
        let tiny = [
            ("GEMM 1x8x8", matmul(&t, 1, 8, 8)),
            ("GEMM 128x768x768", matmul(&t, 128, 768, 768)),
            ("attention b1 h1 s1", attention(&t, 1, 1, 1)),
            ("attention b1 h12 s128", attention(&t, 1, 12, 128)),
            ("conv NCHW 8x8", conv(&t, 1, 8, 8, 8, false)),
            ("conv NHWC 8x8", conv(&t, 1, 8, 8, 8, true)),
        ];
        for (what, w) in tiny {
            assert!(w.seconds >= floor, "{what}: {} < {floor}", w.seconds);
        }
    }
}

#[test]
fn few_blocks_use_few_sms_and_the_last_wave_runs_part_empty() {
    let t = Target::h200();
    // Attention: 24 blocks (one head's 128 rows in two blocks of 64, 12 heads) use 24
    // of 132 SMs, so 1/32 of batch 32's work takes more than 1/32 of its time.
    let (b1, b32) = (attention(&t, 1, 12, 128), attention(&t, 32, 12, 128));
    assert!(b1.compute_s > 5.0 * b32.compute_s / 32.0, "{b1:?} {b32:?}");
    // A GEMM of 133 tiles runs two waves: close to the time of 264 tiles.
    let one = matmul(&t, 128 * 132, 128, 4096);
    let just_over = matmul(&t, 128 * 133, 128, 4096);
    let two = matmul(&t, 128 * 264, 128, 4096);
    assert!(just_over.compute_s > 1.9 * one.compute_s);
    assert!((just_over.compute_s - two.compute_s).abs() < 1e-3 * two.compute_s);
    // An implicit-GEMM convolution of few tiles is slower per operation than one that
    // fills the device; the NHWC form on cuBLASLt adds its im2col step.
    let (small, big) = (
        conv(&t, 1, 256, 256, 14, false),
        conv(&t, 32, 256, 256, 14, false),
    );
    assert!(small.compute_s / small.flops > 2.0 * big.compute_s / big.flops);
    let gemm = conv(&t, 1, 256, 256, 14, true);
    assert!(gemm.seconds > t.launch() * 2.0 + t.tile_latency);
}

#[test]
fn one_thread_per_element_kernels_are_bound_by_their_threads() {
    let t = Target::h200();
    let and = |rows: u64| {
        work(
            &t,
            Op::Elementwise(ElementwiseOp::And),
            &Attrs::default(),
            &[
                ty(DType::Bool, &[1, 1, 128, 1]),
                ty(DType::Bool, &[rows, 1, 1, 128]),
            ],
            ty(DType::Bool, &[rows, 1, 128, 128]),
        )
    };
    let w = and(32);
    let outs = 32.0 * 128.0 * 128.0;
    assert_eq!(w.memory_s, outs / t.scalar_rate);
    assert!(w.memory_s > w.bytes / t.bandwidth);
    // The same add with every operand of the output's shape and type is vectorized:
    // bytes bind it.
    let x = ty(DType::F32, &[32, 128, 768]);
    let add = work(
        &t,
        Op::Elementwise(ElementwiseOp::Add),
        &Attrs::default(),
        &[x.clone(), x.clone()],
        x,
    );
    assert_eq!(add.memory_s, add.bytes / t.bandwidth);
    // Without a measured rate (wgpu), no such bound.
    let none = Target {
        scalar_rate: 0.0,
        ..Target::h200()
    };
    let w = work(
        &none,
        Op::Elementwise(ElementwiseOp::And),
        &Attrs::default(),
        &[
            ty(DType::Bool, &[1, 1, 128, 1]),
            ty(DType::Bool, &[32, 1, 1, 128]),
        ],
        ty(DType::Bool, &[32, 1, 128, 128]),
    );
    assert_eq!(w.memory_s, w.bytes / none.bandwidth);
}

#[test]
fn a_plain_matmul_is_priced_like_its_fused_form() {
    let t = Target::h200();
    let fused = matmul(&t, 4096, 768, 768);
    let plain = work(
        &t,
        Op::Nn(NnOp::MatMul),
        &Attrs::default(),
        &[ty(DType::BF16, &[4096, 768]), ty(DType::BF16, &[768, 768])],
        ty(DType::BF16, &[4096, 768]),
    );
    assert!(fused.seconds < plain.seconds);
    assert!((plain.seconds - fused.seconds) < 1e-5 * plain.seconds);
}
