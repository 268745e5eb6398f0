//! The CUDA GEMV kernel (codegen/src/cuda/gemv.rs) for matrix products with few rows
//! (LLM decode) on a matrix of cases: f32, bf16 and f16; M of 1 and 2 (`MAX_ROWS`: one
//! and two columns per group of lanes); K of 64 (a row shorter than a warp's loads),
//! 100 (rows not 16-byte aligned), 2048 and 5632 (a row that ends mid-pass); N of 1, 5
//! (fewer columns than a block has), 64 and 2048; and, on two shapes, every epilogue:
//! bias in the operands' dtype and in another, each activation, a residual (also of
//! another dtype), alpha ≠ 1, an output dtype other than the operands', Gemm's C scaled
//! by beta, a 3-D A whose batch folds into M, and rows of odd length (2-byte loads).
//!
//! Without a GPU (CI): every kernel compiles with NVRTC for sm_90 down to machine code
//! with no spills and no stack frame, `applies` refuses the products the kernel is not
//! for (each with the reason), and one kernel's source is snapshotted. On a GPU
//! (`#[ignore]`d here; scripts/gpu-check.sh runs them): every case against the CPU
//! interpreter, and the weight bandwidth of Llama-sized decode products.

use gopt::codegen::cuda::plan::{self, Step};
use gopt::codegen::cuda::{gemv, Kernel};
use gopt::codegen::lower::gemm::{self, GemmSpec};
use gopt::codegen::lower::GemmForm;
use gopt::ir::dim::shape_of;
use gopt::ir::ops::{FusedOp, NnOp};
use gopt::ir::{Attr, Attrs, DType, Graph, Op, Tensor, TensorType};
use std::collections::BTreeMap;

mod common;
use common::{compile_sass, node_inputs, nvrtc_ready, ptxas_report, random, reference};

/// One GEMM node: `y = act(alpha·A·Bᵀ + bias) + residual`, B a constant `[N, K]`.
#[derive(Clone, Copy, Debug)]
struct Case {
    dt: DType,
    m: usize,
    k: usize,
    n: usize,
    /// The output's dtype (FusedMatMul's `output_dtype` when not `dt`).
    out: DType,
    alpha: f32,
    /// A bias `[N]` of this dtype.
    bias: Option<DType>,
    /// A residual of the output's shape and this dtype.
    residual: Option<DType>,
    act: &'static str,
    /// A Gemm node (transB=1) whose C (`[1, N]`, the bias) is scaled by this beta,
    /// instead of FusedMatMul.
    gemm_beta: Option<f32>,
    /// A is `[batch, M / batch, K]` (its batch dims fold into M) when above 1.
    batch: usize,
}

impl Case {
    fn plain(dt: DType, m: usize, k: usize, n: usize) -> Case {
        Case {
            dt,
            m,
            k,
            n,
            out: dt,
            alpha: 1.0,
            bias: None,
            residual: None,
            act: "none",
            gemm_beta: None,
            batch: 1,
        }
    }

    fn label(&self) -> String {
        let opt = |d: Option<DType>| d.map(|d| d.to_string()).unwrap_or("-".into());
        format!(
            "{}_m{}_k{}_n{}_out{}_a{}_bias{}_res{}_{}{}{}",
            self.dt,
            self.m,
            self.k,
            self.n,
            self.out,
            self.alpha,
            opt(self.bias),
            opt(self.residual),
            self.act,
            self.gemm_beta
                .map(|b| format!("_gemm_beta{b}"))
                .unwrap_or_default(),
            if self.batch > 1 { "_3d" } else { "" }
        )
        .replace(['.', '-'], "_")
    }

    fn a_shape(&self) -> Vec<usize> {
        match self.batch {
            1 => vec![self.m, self.k],
            b => vec![b, self.m / b, self.k],
        }
    }

    fn out_shape(&self) -> Vec<usize> {
        let mut s = self.a_shape();
        if let Some(last) = s.last_mut() {
            *last = self.n;
        }
        s
    }

    /// The one-node graph. B is random (seeded) on the GPU, zeros where only the
    /// source matters.
    fn graph(&self, random_b: bool) -> Graph {
        let mut g = Graph::new("g");
        let ty = |dt, s: &[usize]| TensorType::new(dt, shape_of(s));
        let a = g.add_input("a", ty(self.dt, &self.a_shape()));
        let b = if random_b {
            random(self.dt, &[self.n, self.k], 7)
        } else {
            Tensor::zeros(self.dt, &[self.n, self.k])
        };
        let b = g.add_const("b", b);
        let bias_shape = match self.gemm_beta {
            Some(_) => vec![1, self.n],
            None => vec![self.n],
        };
        let bias = self.bias.map(|dt| g.add_input("bias", ty(dt, &bias_shape)));
        let res = self
            .residual
            .map(|dt| g.add_input("res", ty(dt, &self.out_shape())));
        let mut attrs = Attrs::default();
        let (op, inputs) = match self.gemm_beta {
            Some(beta) => {
                attrs.set("transB", Attr::Int(1));
                attrs.set("alpha", Attr::Float(self.alpha));
                attrs.set("beta", Attr::Float(beta));
                (Op::Nn(NnOp::Gemm), vec![Some(a), Some(b), bias])
            }
            None => {
                attrs.set("trans_b", Attr::Int(1));
                attrs.set("alpha", Attr::Float(self.alpha));
                attrs.set("activation", Attr::Str(self.act.into()));
                if self.out != self.dt {
                    attrs.set("output_dtype", Attr::DType(self.out));
                }
                (
                    Op::Fused(FusedOp::FusedMatMul),
                    vec![Some(a), Some(b), bias, res],
                )
            }
        };
        let id = g.add_node("mm", op, attrs, inputs, &["y"]);
        let y = g.nodes[id.index()].outputs[0];
        g.outputs.push(y);
        gopt::ir::verify(g)
            .unwrap_or_else(|e| panic!("{}: {e}", self.label()))
            .into_inner()
    }

    fn kernel(&self, g: &Graph) -> Kernel {
        let sp = spec(g);
        assert!(gemv::applies(&sp), "{}: the GEMV must apply", self.label());
        gemv::emit(&sp, &format!("gemv_{}", self.label()))
            .unwrap_or_else(|e| panic!("{}: {e}", self.label()))
    }
}

const DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];
const ACTIVATIONS: &[&str] = gopt::ir::ops::fused::MATMUL_ACTIVATIONS;

/// Every M × K × N of the matrix, no epilogue.
fn shapes(dt: DType) -> Vec<Case> {
    let mut v = Vec::new();
    for m in 1..=gemv::MAX_ROWS {
        for k in [64, 100, 2048, 5632] {
            for n in [1, 5, 64, 2048] {
                v.push(Case::plain(dt, m, k, n));
            }
        }
    }
    v
}

/// Each epilogue form, on a small awkward shape and a decode-sized one.
fn epilogues(dt: DType) -> Vec<Case> {
    let other = if dt == DType::F32 {
        DType::BF16
    } else {
        DType::F32
    };
    let mut v = Vec::new();
    for base in [
        Case::plain(dt, gemv::MAX_ROWS, 100, 5),
        Case::plain(dt, 1, 2048, 64),
    ] {
        for act in ACTIVATIONS {
            v.push(Case {
                bias: Some(dt),
                act,
                ..base
            });
        }
        v.extend([
            Case {
                bias: Some(other),
                ..base
            },
            Case {
                residual: Some(dt),
                ..base
            },
            Case {
                alpha: 0.5,
                residual: Some(other),
                act: "silu",
                ..base
            },
            Case { out: other, ..base },
            Case {
                out: other,
                alpha: -1.25,
                bias: Some(DType::F16),
                residual: Some(other),
                act: "gelu",
                ..base
            },
            Case {
                alpha: 0.75,
                bias: Some(dt),
                gemm_beta: Some(0.5),
                ..base
            },
        ]);
    }
    v.extend([
        Case {
            batch: 2,
            bias: Some(dt),
            residual: Some(dt),
            ..Case::plain(dt, 2, 256, 40)
        },
        Case {
            bias: Some(dt),
            act: "relu",
            ..Case::plain(dt, gemv::MAX_ROWS, 101, 33)
        },
        Case::plain(dt, 2, 102, 9),
        Case {
            alpha: 2.0,
            bias: Some(other),
            residual: Some(dt),
            act: "gelu_tanh",
            ..Case::plain(dt, gemv::MAX_ROWS, 5632, 300)
        },
        // Wide enough for two columns per group.
        Case {
            bias: Some(dt),
            act: "silu",
            ..Case::plain(dt, gemv::MAX_ROWS, 2048, 4160)
        },
        Case {
            residual: Some(dt),
            act: "tanh",
            ..Case::plain(dt, 2, 1000, 2100)
        },
    ]);
    v
}

fn cases(dt: DType) -> Vec<Case> {
    let mut v = shapes(dt);
    v.extend(epilogues(dt));
    v
}

#[test]
fn gemv_kernels_compile_for_sm90_without_spills() {
    nvrtc_ready();
    let mut n = 0;
    let mut spills = Vec::new();
    for dt in DTYPES {
        let kernels: Vec<Kernel> = cases(dt)
            .iter()
            .map(|c| c.kernel(&c.graph(false)))
            .collect();
        let src = gopt::codegen::cuda::module_source(&kernels);
        let log = compile_sass(&src, "sm_90")
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
        if dt == DType::BF16 {
            for m in 1..=gemv::MAX_ROWS {
                let c = Case::plain(dt, m, 2048, 2048);
                let (regs, _) = &report[&format!("gemv_{}", c.label())];
                println!("bf16 M={m} K=2048 N=2048: {regs} registers");
            }
        }
        n += kernels.len();
    }
    assert!(spills.is_empty(), "{}", spills.join("\n"));
    println!("cuda: {n} GEMV kernels compiled for sm_90 (machine code, no spills)");
}

/// The spec of `g`'s one GEMM node, as the plan's lowering reads it.
fn spec(g: &Graph) -> GemmSpec {
    let node = &g.nodes[0];
    let form = if node.op == Op::Nn(NnOp::Gemm) {
        GemmForm::Gemm
    } else {
        GemmForm::MatMul
    };
    gemm::spec(g, node, form).expect("the GEMM parses")
}

/// A bf16 FusedMatMul of A (`a`) and B (`b`, a constant or a graph input).
fn one_node(a: &[usize], b: &[usize], trans_b: i64, b_const: bool) -> Graph {
    let mut g = Graph::new("g");
    let ty = |s: &[usize]| TensorType::new(DType::BF16, shape_of(s));
    let av = g.add_input("a", ty(a));
    let bv = if b_const {
        g.add_const("b", Tensor::zeros(DType::BF16, b))
    } else {
        g.add_input("b", ty(b))
    };
    let mut attrs = Attrs::default();
    attrs.set("trans_b", Attr::Int(trans_b));
    let op = Op::Fused(FusedOp::FusedMatMul);
    let id = g.add_node("mm", op, attrs, vec![Some(av), Some(bv)], &["y"]);
    let y = g.nodes[id.index()].outputs[0];
    g.outputs.push(y);
    gopt::ir::verify(g).expect("verifies").into_inner()
}

#[test]
fn gemv_applies_only_to_decode_products() {
    let refused = |g: &Graph, why: &str, reason: &str| {
        let sp = spec(g);
        assert!(!gemv::applies(&sp), "{why}");
        match gemv::emit(&sp, "k") {
            Err(gopt::codegen::CodegenError::Unsupported { what, .. }) => {
                assert!(what.contains(reason), "{why}: {what}")
            }
            other => panic!("{why}: {other:?}"),
        }
    };
    let m = gemv::MAX_ROWS;
    let decode = one_node(&[m, 64], &[32, 64], 1, true);
    assert!(gemv::applies(&spec(&decode)), "the decode form itself");
    // B stored [K, N]: an output column is a strided column of B, not a contiguous row
    // a group of lanes streams with 16-byte loads.
    refused(
        &one_node(&[m, 64], &[64, 32], 0, true),
        "trans_b = 0",
        "[K, N]",
    );
    // More rows than MAX_ROWS: M FMAs per weight element on CUDA cores fall behind
    // cuBLASLt's tensor cores (see MAX_ROWS).
    refused(
        &one_node(&[m + 1, 64], &[32, 64], 1, true),
        "M > MAX_ROWS",
        "rows",
    );
    // A B computed at run time (attention's keys, say): not a weight the plan laid out
    // as [N, K] rows, nor one a decode step streams once.
    refused(
        &one_node(&[m, 64], &[32, 64], 1, false),
        "non-constant B",
        "constant",
    );
    // A batch of B matrices: each batch has its own weight, the kernel streams one.
    refused(
        &one_node(&[2, m, 64], &[2, 32, 64], 1, true),
        "batched B",
        "batched",
    );
}

#[test]
fn gemv_source_snapshot() {
    let c = Case {
        alpha: 0.5,
        bias: Some(DType::F32),
        residual: Some(DType::BF16),
        act: "gelu",
        ..Case::plain(DType::BF16, 2, 100, 5)
    };
    let k = c.kernel(&c.graph(false));
    let src = format!("// grid {} x block {}\n{}", k.grid, k.block, k.source);
    insta::with_settings!({snapshot_path => "../snapshots/cuda", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("gemv_bf16_m2_k100_n5_bias_gelu_residual", src);
    });
}

// ---------------------------------------------------------------------------------
// On a GPU.

fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
    let den: f64 = want.iter().map(|b| b * b).sum();
    (num / den.max(1e-30)).sqrt()
}

fn rms(x: &[f64]) -> f64 {
    (x.iter().map(|v| v * v).sum::<f64>() / x.len().max(1) as f64).sqrt()
}

/// The RMS of the product alone (`alpha·A·Bᵀ`: the node without its bias, activation
/// and residual), by the interpreter.
fn product_rms(node: &gopt::ir::Node, values: &BTreeMap<u32, Tensor>) -> f64 {
    let mut plain = node.clone();
    plain.inputs.truncate(2);
    if plain.attrs.has("activation") {
        plain.attrs.set("activation", Attr::Str("none".into()));
    }
    rms(&reference(&plain, values).swap_remove(0).to_f64_vec())
}

/// An f32 output: every element within 1e-5 of the reference, relative to its own
/// magnitude plus `scale`, the larger of the output's RMS and the product's. The kernel
/// and the reference sum the K products in different orders, so an element may differ
/// by ~√K·2⁻²⁴ of the product's size whatever the epilogue makes of it: a sum that
/// cancels to near zero, or tanh mapping a product of ±60 to ±1, keeps that absolute
/// error. A bf16/f16 output: relative L2 error at most 1e-2, and every element within
/// 2e-2 of the same scale, so a few wrong elements cannot hide in the norm. The
/// reference is the interpreter in fp32 on the same rounded inputs.
fn compare(c: &Case, got: &Tensor, want: &Tensor, product: f64) -> Result<f64, String> {
    if got.dtype() != c.out || got.shape() != want.shape() {
        return Err(format!(
            "{:?}{:?} vs {:?}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let scale = rms(&w).max(product);
    let tol = if c.out == DType::F32 { 1e-5 } else { 2e-2 };
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if !a.is_finite() || (a - b).abs() > tol * (b.abs() + scale) {
            return Err(format!("element {i}: GPU {a}, CPU {b} (scale {scale:.3e})"));
        }
    }
    if c.out == DType::F32 {
        return Ok(g
            .iter()
            .zip(&w)
            .map(|(a, b)| (a - b).abs() / (b.abs() + scale))
            .fold(0.0, f64::max));
    }
    let rel = rel_l2(&g, &w);
    if rel > 1e-2 {
        return Err(format!("relative L2 error {rel:.3e}"));
    }
    Ok(rel)
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn gemv_matches_the_interpreter_on_the_gpu() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    println!("device: {} ({})", dev.name, dev.arch);
    let mut checked = 0;
    let mut failures = Vec::new();
    for dt in DTYPES {
        let cases = cases(dt);
        let graphs: Vec<Graph> = cases.iter().map(|c| c.graph(true)).collect();
        let kernels: Vec<Kernel> = cases
            .iter()
            .zip(&graphs)
            .map(|(c, g)| c.kernel(g))
            .collect();
        let module = dev
            .compile(
                &format!("gemv {dt}"),
                &gopt::codegen::cuda::module_source(&kernels),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let mut worst: f64 = 0.0;
        for (ci, ((c, g), k)) in cases.iter().zip(&graphs).zip(&kernels).enumerate() {
            let node = &g.nodes[0];
            let values = node_inputs(g, node, 100 * ci as u64);
            let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
            let got = dev
                .run_kernel(&module, k, &params, &[(c.out, c.out_shape())])
                .unwrap_or_else(|e| panic!("{}: {e}", c.label()));
            // The reference in fp32 on the same (rounded) values.
            let wide: BTreeMap<u32, Tensor> = values
                .iter()
                .map(|(v, t)| (*v, t.cast(DType::F32)))
                .collect();
            let want = reference(node, &wide).swap_remove(0);
            match compare(c, &got[0], &want, product_rms(node, &wide)) {
                Ok(e) => worst = worst.max(e),
                Err(m) => failures.push(format!("{}: {m}", c.label())),
            }
            checked += 1;
        }
        println!("{dt}: worst error {worst:.3e} (f32 outputs: relative to |y| + scale; else relative L2)");
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!("cuda: {checked} GEMV cases match the interpreter on the GPU");
}

/// Microseconds cuBLASLt takes for the same node (the plan as it stands, profiled step
/// by step inside a CUDA graph), for comparison.
fn cublaslt_us(dev: &gopt::runtime::cuda::Device, c: &Case) -> f64 {
    let g = gopt::ir::verify(c.graph(false)).expect("verifies");
    let (p, blob) = plan::build(&g).unwrap_or_else(|e| panic!("{}: {e}", c.label()));
    assert!(
        p.steps.iter().any(|s| matches!(s, Step::Gemm(_))),
        "{}: the plan has no cuBLASLt GEMM",
        c.label()
    );
    let w = gopt::runtime::cuda::Weights::upload(dev, &blob).expect("weights");
    let mut exe = gopt::runtime::cuda::Executable::new(dev, p, w, true).expect("loads");
    let steps = exe.profile(50).unwrap_or_else(|e| panic!("{e}"));
    steps.iter().map(|s| s.ms).sum::<f64>() * 1e3
}

/// Bytes of B read per second on Llama-sized decode products (bf16, K = 2048: the
/// MLP's N = 5632 and a 32000-token vocabulary; and a 4096 × 4096 projection), each
/// launch timed between CUDA events: the median over 50 batches of 20 launches after
/// warm-up. The 5632 × 2048 and 4096 × 4096 weights (23 and 34 MB) fit in the H200's
/// 50 MB L2, so their figures may exceed DRAM's; the 131 MB vocabulary weight cannot,
/// and must be read at ≥ 2.5 TB/s at M = 1 (the copy roof is ~4.2 TB/s). Every M up to
/// MAX_ROWS is printed, with cuBLASLt's time for the same node.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn gemv_weight_bandwidth() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    let copy = dev
        .copy_bandwidth(1 << 30, 5)
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "device: {}; device-to-device copy {:.0} GB/s (read + write)",
        dev.name,
        copy / 1e9
    );
    println!("| product | grid x block | median µs | GB/s of B | cuBLASLt µs |");
    println!("|---|---|---:|---:|---:|");
    let mut big = 0.0;
    for (n, k) in [(5632, 2048), (32000, 2048), (4096, 4096)] {
        for m in 1..=gemv::MAX_ROWS {
            let c = Case::plain(DType::BF16, m, k, n);
            let g = c.graph(false);
            let k = c.kernel(&g);
            let module = dev
                .compile(
                    &c.label(),
                    &gopt::codegen::cuda::module_source(std::slice::from_ref(&k)),
                )
                .unwrap_or_else(|e| panic!("{e}"));
            let ins = [(c.dt, c.a_shape()), (c.dt, vec![c.n, c.k])];
            let t = dev
                .time_kernel(&module, &k, &ins, (c.out, &c.out_shape()), 50, 20)
                .unwrap_or_else(|e| panic!("{e}"));
            let bytes = (c.n * c.k * c.dt.size()) as f64;
            let gbs = bytes / (t.median_us * 1e-6) / 1e9;
            println!(
                "| bf16 M={m} K={} N={n} | {} x {} | {:.2} | {gbs:.0} | {:.2} |",
                c.k,
                k.grid,
                k.block,
                t.median_us,
                cublaslt_us(&dev, &c)
            );
            if m == 1 && n == 32000 && c.k == 2048 {
                big = gbs;
            }
        }
    }
    assert!(
        big >= 2500.0,
        "M=1 N=32000 K=2048 bf16 reads B at {big:.0} GB/s, below 2500"
    );
}
