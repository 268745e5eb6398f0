//! The CUDA MatMulNBits kernels (codegen/src/cuda/packed.rs) on one-node graphs: the
//! fused GEMV for up to `GEMV_MAX_ROWS` rows (tensor cores for bf16/f16, CUDA cores for
//! f32) and, above, the dequantize kernel followed by cuBLASLt. Weights are random
//! quantized values packed with `nbits::pack`, zero points with
//! `nbits::pack_zero_points` (or random non-integer floats); scales, the bias and A are
//! random. The cases cover f32, bf16 and f16; 4 and 8 bits; every zero-point form
//! (default, packed u8, float); bias or none; K a multiple of the block (2048 in blocks
//! of 32, 8192 in blocks of 64: 4 chunks a pass, 256 in blocks of 16: two blocks per
//! 16-byte load) and not (4160 in blocks of 128, 48 in 32, 160 in 64, 20 in 16: rows of B
//! 8-byte aligned only, 101 in 32: rows of A of odd length); M = 1, 2, 3, 4, 8 (a 3-D A),
//! 16 on the GEMV and 17, 18, 64 on the dequantize path; N = 5 and 9 (less than one
//! 16-column tile), 24, 33, 70, 300 and 2048.
//!
//! Without a GPU (CI): every kernel compiles with NVRTC for sm_90 down to machine code
//! with no spills and no stack frame, and the plan has the expected steps (one GEMV
//! kernel; or the dequantize kernel into scratch, then a GEMM reading it as a
//! transposed B with the bias in its epilogue). On a GPU (`#[ignore]`d here;
//! scripts/gpu-check.sh runs them): every case through the plan against the CPU
//! interpreter, and the weight bandwidth of Llama-sized decode products.
//!
//! Tolerance, against the interpreter on the same inputs (f64 throughout, one rounding
//! of the output): f32 outputs within 1e-4 · (|want| + rms(want)) element by element
//! (sums of K fp32 products in another order; the RMS term keeps an output that cancels
//! to near zero from asking more); bf16/f16 outputs within 2e-2 relative L2 and every
//! element within 5e-2 · (|want| + rms(want)): the GEMV rounds each dequantized weight
//! to A's type before the tensor cores (2^-9 relative for bf16), then the output once.

use gopt::codegen::cuda::plan::{self, Step};
use gopt::codegen::cuda::{module_source, packed, Kernel};
use gopt::codegen::lower::packed::{self as packed_spec, GEMV_MAX_ROWS};
use gopt::ir::ops::nn::nbits::{NBits, ZeroPoints};
use gopt::ir::{DType, Graph, Tensor};

mod common;
use common::packed::Product;
use common::{compile_sass, nvrtc_ready, ptxas_report, random};

const DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];
const ZEROS: [ZeroPoints; 3] = [ZeroPoints::Default, ZeroPoints::Packed, ZeroPoints::Float];

/// One MatMulNBits graph.
#[derive(Clone, Debug)]
struct Case {
    dt: DType,
    bits: usize,
    zero: ZeroPoints,
    bias: bool,
    k: usize,
    block: usize,
    /// A's dims but the last.
    lead: Vec<usize>,
    n: usize,
}

impl Case {
    fn product(&self) -> Product {
        let mut a_shape = self.lead.clone();
        a_shape.push(self.k);
        Product {
            dt: self.dt,
            a_shape,
            n: self.n,
            bits: self.bits,
            block: self.block,
            zero: self.zero,
            bias: self.bias,
        }
    }

    fn nbits(&self) -> NBits {
        self.product().nbits()
    }

    fn rows(&self) -> usize {
        self.lead.iter().product()
    }

    fn gemv(&self) -> bool {
        self.rows() <= GEMV_MAX_ROWS
    }

    fn label(&self) -> String {
        let lead: Vec<String> = self.lead.iter().map(|d| d.to_string()).collect();
        format!(
            "{}_q{}_{:?}_{}_m{}_k{}_b{}_n{}",
            self.dt,
            self.bits,
            self.zero,
            if self.bias { "bias" } else { "nobias" },
            lead.join("x"),
            self.k,
            self.block,
            self.n
        )
        .to_lowercase()
    }

    fn a_shape(&self) -> Vec<usize> {
        let mut s = self.lead.clone();
        s.push(self.k);
        s
    }

    /// The one-node graph, its constants drawn from `seed` (tests/common/packed.rs).
    fn graph(&self, seed: u64) -> gopt::ir::Verified {
        gopt::ir::verify(self.product().graph(seed)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The node's kernels (named from the label), and its GEMM if any.
    fn steps(&self, g: &Graph) -> packed::PackedSteps {
        let scratch = g.values.len() as u32;
        packed_spec::spec(g, &g.nodes[0])
            .and_then(|sp| packed::lower(&sp, &format!("p_{}", self.label()), scratch))
            .unwrap_or_else(|e| panic!("{}: {e}", self.label()))
    }
}

/// (A's leading dims, K, block, N) of the matrix; the bias alternates over them.
const SHAPES: &[(&[usize], usize, usize, usize)] = &[
    (&[1], 4160, 128, 5),
    (&[3], 48, 32, 70),
    (&[16], 2048, 32, 300),
    (&[1], 20, 16, 5),
    (&[2], 256, 16, 33),
    (&[3], 101, 32, 9),
    (&[2, 4], 160, 64, 70),
    (&[1], 2048, 128, 2048),
    (&[4], 8192, 64, 24),
    (&[17], 160, 64, 70),
    (&[3, 6], 48, 32, 9),
    (&[64], 4160, 128, 40),
];

/// Every shape for every dtype, bit width and zero-point form.
fn cases(dt: DType) -> Vec<Case> {
    let mut v = Vec::new();
    for bits in [4, 8] {
        for (zi, zero) in ZEROS.into_iter().enumerate() {
            for (i, &(lead, k, block, n)) in SHAPES.iter().enumerate() {
                v.push(Case {
                    dt,
                    bits,
                    zero,
                    bias: (i + zi + bits) % 2 == 0,
                    k,
                    block,
                    lead: lead.to_vec(),
                    n,
                });
            }
        }
    }
    v
}

#[test]
fn packed_kernels_compile_for_sm90_without_spills() {
    nvrtc_ready();
    let mut count = 0;
    let mut spills = Vec::new();
    for dt in DTYPES {
        let kernels: Vec<Kernel> = cases(dt)
            .iter()
            .flat_map(|c| c.steps(&c.graph(1)).kernels)
            .collect();
        let log = compile_sass(&module_source(&kernels), "sm_90")
            .unwrap_or_else(|e| panic!("{dt}: NVRTC rejected the module:\n{e}"));
        let report = ptxas_report(&log);
        for k in &kernels {
            let (regs, frame) = report
                .get(&k.name)
                .unwrap_or_else(|| panic!("{}: no ptxas report:\n{log}", k.name));
            // No local memory at all: no spills, and no array left unpromoted.
            if !frame.contains("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") {
                spills.push(format!("{}: {frame} ({regs} registers)", k.name));
            }
        }
        count += kernels.len();
        for c in cases(dt).iter().filter(|c| c.gemv() && c.n == 2048) {
            let name = format!("p_{}_packed_gemv", c.label());
            println!("cuda: {name}: {} registers", report[&name].0);
        }
    }
    assert!(spills.is_empty(), "{}", spills.join("\n"));
    println!("cuda: {count} MatMulNBits kernels compiled for sm_90 (machine code, no spills)");
}

#[test]
fn plans_take_the_gemv_or_dequantize_then_gemm() {
    for dt in DTYPES {
        for c in cases(dt) {
            let g = c.graph(1);
            let (p, _) = plan::build(&g).unwrap_or_else(|e| panic!("{}: {e}", c.label()));
            let kinds = p.step_kinds();
            if c.gemv() {
                assert_eq!(kinds, ["packed_gemv"], "{}", c.label());
                continue;
            }
            assert_eq!(kinds, ["packed_dequant", "gemm"], "{}", c.label());
            let Step::Kernel(ki) = p.steps[0] else {
                panic!("{}: {:?}", c.label(), p.steps)
            };
            let Step::Gemm(gm) = &p.steps[1] else {
                panic!("{}: {:?}", c.label(), p.steps)
            };
            let scratch = p.kernels[ki].outputs[0];
            assert!(scratch as usize >= g.values.len(), "{}", c.label());
            assert_eq!(gm.b, scratch, "{}: the GEMM reads the scratch", c.label());
            assert_eq!(gm.a, g.inputs[0].0, "{}", c.label());
            assert!(gm.trans_b && !gm.trans_a, "{}", c.label());
            assert_eq!(
                (gm.m, gm.k, gm.n, gm.batch),
                (c.rows() as u64, c.k as u64, c.n as u64, 1),
                "{}",
                c.label()
            );
            assert_eq!(
                gm.bias.is_some(),
                c.bias,
                "{}: bias in the epilogue",
                c.label()
            );
            assert!(gm.post.is_none(), "{}: no post kernel", c.label());
            let bytes = c.n * c.k * c.dt.size();
            assert_eq!(
                p.frame.value_bytes.get(&scratch),
                Some(&bytes),
                "{}",
                c.label()
            );
            assert!(p.arena_bytes >= bytes, "{}", c.label());
        }
    }
}

// ---------------------------------------------------------------------------------
// On a GPU.

fn rms(x: &[f64]) -> f64 {
    (x.iter().map(|v| v * v).sum::<f64>() / x.len().max(1) as f64).sqrt()
}

/// The comparison the header states; the worst error measured, or what failed.
fn compare(c: &Case, got: &Tensor, want: &Tensor) -> Result<f64, String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "{:?}{:?} vs {:?}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let scale = rms(&w);
    let tol = if c.dt == DType::F32 { 1e-4 } else { 5e-2 };
    let mut worst: f64 = 0.0;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let e = (a - b).abs() / (b.abs() + scale).max(1e-30);
        if !a.is_finite() || e > tol {
            return Err(format!("element {i}: GPU {a}, CPU {b} (rms {scale:.3e})"));
        }
        worst = worst.max(e);
    }
    if c.dt == DType::F32 {
        return Ok(worst);
    }
    let num: f64 = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum();
    let rel = (num / w.iter().map(|b| b * b).sum::<f64>().max(1e-30)).sqrt();
    if rel > 2e-2 {
        return Err(format!("relative L2 error {rel:.3e}"));
    }
    Ok(rel)
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn packed_matches_the_interpreter_on_the_gpu() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    println!("device: {} ({})", dev.name, dev.arch);
    let mut checked = 0;
    let mut failures = Vec::new();
    for dt in DTYPES {
        let mut worst = [0.0f64; 2];
        for (i, c) in cases(dt).iter().enumerate() {
            let g = c.graph(100 + i as u64);
            let inputs = vec![random(dt, &c.a_shape(), 7 + i as u64)];
            let want = gopt::ir::interp::run(&g, &inputs).expect("interpreter");
            let (p, blob) = plan::build(&g).unwrap_or_else(|e| panic!("{}: {e}", c.label()));
            let w = gopt::runtime::cuda::Weights::upload(&dev, &blob).expect("weights");
            let mut exe = gopt::runtime::cuda::Executable::new(&dev, p, w, true).expect("loads");
            match exe.run(&inputs) {
                Ok(got) => match compare(c, &got[0], &want[0]) {
                    Ok(e) => {
                        let at = usize::from(!c.gemv());
                        worst[at] = worst[at].max(e);
                    }
                    Err(m) => failures.push(format!("{}: {m}", c.label())),
                },
                Err(e) => failures.push(format!("{}: {e}", c.label())),
            }
            checked += 1;
        }
        println!(
            "cuda: MatMulNBits {dt}: worst error GEMV {:.3e}, dequantize + GEMM {:.3e} ({})",
            worst[0],
            worst[1],
            if dt == DType::F32 {
                "per element, relative to |y| + rms"
            } else {
                "relative L2"
            }
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!("cuda: {checked} MatMulNBits cases match the interpreter on the GPU");
}

/// Bytes of the packed weight (and its scales) read per second on Llama-sized decode
/// products (K × N: the attention projections 2048 × 2048, the MLP's 2048 × 5632 and
/// 5632 × 2048, a 32000-token vocabulary), 4- and 8-bit, blocks of 32 and 128, default
/// zero points, bf16, one row (and, for 4 bits in blocks of 32, 4 and 16 rows), each
/// launch timed between CUDA events: the median over 50 batches of 20 launches after
/// warm-up. Weights this small stay in the H200's 50 MB L2 between launches, so a
/// figure may exceed DRAM's; the copy roof is printed first.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn packed_gemv_weight_bandwidth() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    let copy = dev
        .copy_bandwidth(1 << 30, 5)
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "bandwidth: {}; device-to-device copy {:.0} GB/s (read + write)",
        dev.name,
        copy / 1e9
    );
    println!("bandwidth: | product | grid x block | median µs | GB/s of B + scales |");
    for (k, n) in [(2048, 2048), (2048, 5632), (5632, 2048), (2048, 32000)] {
        for (bits, block) in [(4, 32), (4, 128), (8, 32), (8, 128)] {
            let rows: &[usize] = if (bits, block) == (4, 32) {
                &[1, 4, 16]
            } else {
                &[1]
            };
            for &m in rows {
                let c = Case {
                    dt: DType::BF16,
                    bits,
                    zero: ZeroPoints::Default,
                    bias: false,
                    k,
                    block,
                    lead: vec![m],
                    n,
                };
                let g = c.graph(1);
                let mut ks = c.steps(&g).kernels;
                let kernel = ks.remove(0);
                let module = dev
                    .compile(&c.label(), &module_source(std::slice::from_ref(&kernel)))
                    .unwrap_or_else(|e| panic!("{e}"));
                let nb = c.nbits();
                let ins = [
                    (c.dt, c.a_shape()),
                    (DType::U8, vec![n, nb.blocks, nb.blob]),
                    (c.dt, vec![n, nb.blocks]),
                ];
                let t = dev
                    .time_kernel(&module, &kernel, &ins, (c.dt, &[m, n]), 50, 20)
                    .unwrap_or_else(|e| panic!("{e}"));
                let read = nb.weight_bytes() + n * nb.blocks * c.dt.size();
                let gbs = read as f64 / (t.median_us * 1e-6) / 1e9;
                println!(
                    "bandwidth: | bf16 {bits}-bit block {block} M={m} K={k} N={n} | {} x {} | {:.2} | {gbs:.0} |",
                    kernel.grid, kernel.block, t.median_us
                );
            }
        }
    }
}
