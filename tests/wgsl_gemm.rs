//! The WGSL GEMM (`MatMul` / `FusedMatMul`, codegen/src/wgsl/matmul.rs) on hand-built
//! graphs against the CPU interpreter, on a real wgpu adapter (CI: Mesa's lavapipe; no
//! adapter fails, never skips). The cases cover what the shader specializes on: odd
//! sizes (M, N, K from 1 to 200: partial tiles, scalar loads), rows that are multiples
//! of 4 (vec4 loads), every tile size (problems big enough for 128×128 and 128×64
//! tiles, batch-1 transformer shapes for the small 32×64 / 32×32 / 16×32 tiles), B
//! transposed or not, split K inside the workgroup (small problems with K >= 256:
//! BERT-base batch-1 shapes, odd sizes, batched), batched B and a shared B (batch folded into M), every epilogue
//! (bias, each activation, residual, alpha), f32 and f16. Sums compare by relative L2
//! error: 1e-5 for f32 outputs, 1e-2 for f16. An ignored test times the
//! BERT-base-sized GEMMs with GPU timestamps (`--ignored gemm_timing`), for tuning on
//! a real GPU (lavapipe's timings mean nothing).

use gopt::codegen::wgsl::{emit_kernels, WgslKernel};
use gopt::ir::{DType, Graph, Tensor};
use gopt::runtime::wgpu::{WgpuDevice, WgpuExecutable, WgpuWeights};
use std::sync::Arc;

mod common;
use common::{node_inputs, random, reference};

/// One GEMM graph: `batch` (A's leading dims; `shared_b`: B has none), sizes, the
/// FusedMatMul attributes (None: a plain MatMul) and optional bias / residual.
struct Case {
    dt: &'static str,
    batch: Option<usize>,
    shared_b: bool,
    m: usize,
    n: usize,
    k: usize,
    trans_b: bool,
    attrs: Option<String>,
    bias: bool,
    residual: bool,
}

fn dims(batch: Option<usize>, r: usize, c: usize) -> String {
    match batch {
        Some(b) => format!("[{b},{r},{c}]"),
        None => format!("[{r},{c}]"),
    }
}

impl Case {
    fn plain(dt: &'static str, m: usize, n: usize, k: usize) -> Case {
        Case {
            dt,
            batch: None,
            shared_b: false,
            m,
            n,
            k,
            trans_b: false,
            attrs: None,
            bias: false,
            residual: false,
        }
    }

    fn fused(dt: &'static str, m: usize, n: usize, k: usize, attrs: &str) -> Case {
        Case {
            attrs: Some(attrs.to_string()),
            ..Case::plain(dt, m, n, k)
        }
    }

    fn name(&self) -> String {
        format!(
            "{} {:?}{} {}x{}x{}{} {} bias={} res={}",
            self.dt,
            self.batch,
            if self.shared_b { " (shared B)" } else { "" },
            self.m,
            self.n,
            self.k,
            if self.trans_b { " B^T" } else { "" },
            self.attrs.as_deref().unwrap_or("MatMul"),
            self.bias,
            self.residual
        )
    }

    fn text(&self) -> String {
        let dt = self.dt;
        let bb = if self.shared_b { None } else { self.batch };
        let b_shape = if self.trans_b {
            dims(bb, self.n, self.k)
        } else {
            dims(bb, self.k, self.n)
        };
        let y = dims(self.batch, self.m, self.n);
        let mut ins = vec![
            format!("%0 \"a\": {dt}{}", dims(self.batch, self.m, self.k)),
            format!("%1 \"b\": {dt}{b_shape}"),
        ];
        let mut args = vec!["%0".to_string(), "%1".to_string()];
        let op = match &self.attrs {
            None => "MatMul".to_string(),
            Some(attrs) => {
                let mut a = attrs.clone();
                if self.trans_b {
                    a = if a.is_empty() { a } else { a + ", " } + "trans_b=1";
                }
                if self.bias {
                    ins.push(format!("%2 \"bias\": {dt}[{}]", self.n));
                    args.push("%2".into());
                } else {
                    args.push("_".into());
                }
                if self.residual {
                    ins.push(format!("%3 \"r\": {dt}{y}"));
                    args.push("%3".into());
                } else {
                    args.push("_".into());
                }
                if a.is_empty() {
                    "FusedMatMul".to_string()
                } else {
                    format!("FusedMatMul {{{a}}}")
                }
            }
        };
        let (op, attrs) = op.split_once(' ').unwrap_or((op.as_str(), ""));
        format!(
            "graph \"g\"({}) -> (%9) {{\n  %9 \"y\": {dt}{y} = {op} \"mm\"({}) {attrs}\n}}",
            ins.join(", "),
            args.join(", ")
        )
    }
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in ["f32", "f16"] {
        // Odd and aligned sizes, plain MatMul, both B layouts.
        for &(m, n, k) in &[
            (1, 7, 13),
            (7, 13, 65),
            (13, 65, 129),
            (65, 129, 200),
            (129, 200, 7),
            (200, 1, 129),
            (200, 129, 65),
            (1, 1, 1),
            (64, 64, 16),
            (128, 256, 64),
            (65, 200, 200),
        ] {
            v.push(Case::plain(dt, m, n, k));
            v.push(Case {
                trans_b: true,
                ..Case::fused(dt, m, n, k, "")
            });
        }
        // Big enough for 128x128 (aligned, then not) and 128x64 tiles.
        v.push(Case::plain(dt, 2304, 2048, 20));
        v.push(Case {
            trans_b: true,
            ..Case::fused(dt, 2303, 2047, 13, "")
        });
        v.push(Case::fused(dt, 1152, 2048, 20, "activation=\"relu\""));
        v.push(Case {
            trans_b: true,
            bias: true,
            residual: true,
            ..Case::fused(dt, 1151, 2045, 17, "activation=\"gelu\"")
        });
        // Batch-1 transformer shapes and odd ones for the small tiles (32x64, 32x32,
        // 16x32: M = 128 with N from 768 to 3072), batched too.
        for &(m, n, k, batch) in &[
            (128, 768, 64, None),
            (128, 2304, 24, None),
            (128, 1030, 40, None),
            (127, 3071, 9, None),
            (33, 130, 200, Some(3)),
            (17, 33, 31, Some(2)),
        ] {
            v.push(Case {
                batch,
                trans_b: true,
                bias: true,
                residual: true,
                ..Case::fused(dt, m, n, k, "activation=\"gelu\"")
            });
            v.push(Case {
                batch,
                ..Case::plain(dt, m, n, k)
            });
        }
        // Split K inside the workgroup (K >= 256 on problems that leave the GPU idle):
        // BERT-base batch-1 shapes, odd sizes (K not a multiple of the staged block,
        // scalar loads), batched.
        for &(m, n, k, batch) in &[
            (128, 768, 3072, None),
            (128, 768, 768, None),
            (128, 2304, 768, None),
            (128, 1100, 500, None),
            (33, 70, 1000, None),
            (33, 70, 1001, Some(3)),
            (5, 3, 257, None),
            (17, 130, 300, Some(2)),
        ] {
            v.push(Case {
                batch,
                bias: true,
                residual: true,
                ..Case::fused(dt, m, n, k, "activation=\"gelu\"")
            });
            v.push(Case {
                batch,
                trans_b: true,
                ..Case::fused(dt, m, n, k, "")
            });
            v.push(Case {
                batch,
                ..Case::plain(dt, m, n, k)
            });
        }
        v.push(Case {
            batch: Some(2),
            shared_b: true,
            bias: true,
            residual: true,
            ..Case::fused(dt, 64, 768, 3072, "activation=\"gelu\"")
        });
        // Every epilogue, on odd and aligned sizes.
        let acts = [
            "activation=\"relu\"",
            "activation=\"gelu\"",
            "activation=\"gelu_tanh\"",
            "activation=\"silu\"",
            "activation=\"tanh\"",
            "activation=\"sigmoid\"",
            "alpha=0.125",
            "activation=\"gelu\", alpha=0.5",
        ];
        for (i, a) in acts.iter().enumerate() {
            let (m, n, k) = if i % 2 == 0 {
                (65, 129, 200)
            } else {
                (64, 128, 96)
            };
            v.push(Case {
                bias: true,
                residual: i % 3 != 1,
                trans_b: i % 4 == 0,
                ..Case::fused(dt, m, n, k, a)
            });
        }
        v.push(Case {
            residual: true,
            ..Case::fused(dt, 13, 65, 129, "")
        });
        // Batched B, shared B.
        for &(m, n, k) in &[(13, 65, 129), (64, 128, 32), (1, 7, 13)] {
            v.push(Case {
                batch: Some(3),
                ..Case::plain(dt, m, n, k)
            });
            v.push(Case {
                batch: Some(2),
                trans_b: true,
                bias: true,
                residual: true,
                ..Case::fused(dt, m, n, k, "activation=\"silu\", alpha=0.25")
            });
            v.push(Case {
                batch: Some(2),
                shared_b: true,
                bias: true,
                residual: true,
                ..Case::fused(dt, m, n, k, "activation=\"tanh\"")
            });
        }
    }
    v
}

fn graph(text: &str) -> gopt::ir::Verified {
    let g = gopt::ir::text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    gopt::ir::verify(g).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn kernel(g: &gopt::ir::Verified, what: &str) -> WgslKernel {
    let (mut ks, others) = emit_kernels(g).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(others.is_empty(), "{what}: no shader for {others:?}");
    assert_eq!(ks.len(), 1, "{what}");
    ks.remove(0)
}

/// The relative L2 error of the shader against the interpreter.
fn l2_error(dev: &WgpuDevice, g: &Graph, k: &WgslKernel, seed: u64) -> f64 {
    let node = &g.nodes[0];
    let values = node_inputs(g, node, seed);
    let want = reference(node, &values);
    let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
    let ty = g.ty(node.outputs[0]).expect("typed");
    let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
    let got = dev
        .run_kernel(k, &params, &[(ty.dtype, shape)])
        .unwrap_or_else(|e| panic!("{}: {e}", k.name));
    assert_eq!(got[0].dtype(), want[0].dtype());
    assert_eq!(got[0].shape(), want[0].shape());
    let (a, w) = (got[0].to_f64_vec(), want[0].to_f64_vec());
    let num: f64 = a.iter().zip(&w).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = w.iter().map(|y| y * y).sum();
    (num / den.max(1e-30)).sqrt()
}

#[test]
fn hand_built_gemms_match_the_interpreter_on_an_adapter() {
    let dev = WgpuDevice::open(None).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "wgsl: adapter {} ({})",
        dev.adapter.name, dev.adapter.backend
    );
    let (mut failures, mut worst) = (Vec::new(), [0.0f64; 2]);
    let all = cases();
    for (i, c) in all.iter().enumerate() {
        let name = c.name();
        let g = graph(&c.text());
        let k = kernel(&g, &name);
        let l2 = l2_error(&dev, &g, &k, i as u64 * 13 + 5);
        let f16 = c.dt == "f16";
        let bound = if f16 { 1e-2 } else { 1e-5 };
        worst[f16 as usize] = worst[f16 as usize].max(l2);
        let first = k
            .source
            .lines()
            .find(|l| l.contains("GEMM ("))
            .unwrap_or("");
        let tile = first.split_once("GEMM (").map_or(first, |t| t.1);
        println!("{name}: relative L2 {l2:.2e} ({tile})");
        if !(l2 <= bound) {
            failures.push(format!("{name}: relative L2 {l2:.3e}\n{}", k.source));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} GEMMs failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
    println!(
        "wgsl: {} hand-built GEMMs match; worst relative L2 f32 {:.2e}, f16 {:.2e}",
        all.len(),
        worst[0],
        worst[1]
    );
}

#[test]
fn gemm_modes_without_a_shader_are_refused_by_name() {
    for text in [
        "graph \"g\"(%0 \"a\": bf16[4,8], %1 \"b\": bf16[8,4]) -> (%2) {\n  %2 \"y\": bf16[4,4] = MatMul \"mm\"(%0, %1)\n}",
        "graph \"g\"(%0 \"a\": f32[2,4,8], %1 \"b\": f32[3,1,8,4]) -> (%2) {\n  %2 \"y\": f32[3,2,4,4] = MatMul \"mm\"(%0, %1)\n}",
    ] {
        let g = graph(text);
        let (ks, others) = emit_kernels(&g).unwrap_or_else(|e| panic!("{e}"));
        assert!(ks.is_empty(), "expected no kernel for\n{text}");
        assert!(others[0].1.contains("WGSL"), "{others:?}");
    }
}

/// GPU time of the GEMMs of a BERT-base layer (M = 4096 tokens): median of 20 runs.
#[test]
#[ignore = "timing: run on a real GPU with --ignored"]
fn gemm_timing() {
    let dev = Arc::new(WgpuDevice::open(None).unwrap_or_else(|e| panic!("{e}")));
    println!(
        "wgsl: adapter {} ({})",
        dev.adapter.name, dev.adapter.backend
    );
    for dt in ["f16", "f32"] {
        for &(m, n, k) in &[(4096, 3072, 768), (4096, 768, 3072), (4096, 50304, 768)] {
            let c = Case::plain(dt, m, n, k);
            let g = graph(&c.text());
            let k_src = kernel(&g, &c.name());
            let (plan, blob) = gopt::codegen::wgsl::plan::build(&g).expect("plan");
            let mut exe =
                WgpuExecutable::new(dev.clone(), plan, &mut WgpuWeights::default(), &blob)
                    .unwrap_or_else(|e| panic!("{e}"));
            let dtype = if dt == "f16" { DType::F16 } else { DType::F32 };
            let ins = [random(dtype, &[m, k], 1), random(dtype, &[k, n], 2)];
            exe.set_inputs(&ins).expect("inputs");
            exe.execute().expect("warm-up");
            let prof = exe.profile(20).expect("profile");
            let ms = prof.iter().map(|p| p.ms).sum::<f64>();
            let tflops = 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
            println!(
                "gemm {dt} {m}x{n}x{k}: {ms:.3} ms, {tflops:.2} TFLOP/s ({})",
                k_src
                    .source
                    .lines()
                    .find(|l| l.contains("GEMM ("))
                    .unwrap_or("")
            );
        }
    }
}
