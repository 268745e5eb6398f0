//! ONNX Gemm on CUDA in the forms the optimizer leaves as Gemm: A stored transposed
//! (`transA`, cuBLASLt's transposed operand), B transposed, `alpha`, and C scaled by a
//! `beta` other than 1 (a post kernel after the GEMM adds `beta · C`, broadcast from a
//! scalar, a row, a column or a full matrix), in f32 at awkward sizes and in f16/bf16.
//!
//! Without a GPU (CI): every case plans (a cuBLASLt GEMM with the transposes recorded,
//! a post kernel exactly where C is scaled) and the plan's kernels compile with NVRTC
//! for sm_90. On a GPU (`#[ignore]`d here; scripts/gpu-check.sh runs it): every case
//! against the interpreter, f32 within rtol 1e-5 / atol 1e-5, f16/bf16 by relative L2
//! 1e-2 (inputs rounded alike, fp32 accumulation on both sides).

use gopt::codegen::cuda::plan::{self, Step};
use gopt::ir::{DType, Verified};

mod common;
use common::{compile, nvrtc_ready, random};

/// One Gemm node: `Y[M,N] = alpha · op(A)·op(B) + beta · C`.
#[derive(Clone, Copy, Debug)]
struct Case {
    dt: DType,
    m: usize,
    k: usize,
    n: usize,
    trans_a: bool,
    trans_b: bool,
    alpha: f32,
    beta: f32,
    /// C's shape, if the node has one.
    c: Option<&'static [usize]>,
}

impl Case {
    fn label(&self) -> String {
        format!(
            "{} {}x{}x{} transA={} transB={} alpha={} beta={} C={:?}",
            self.dt,
            self.m,
            self.k,
            self.n,
            u8::from(self.trans_a),
            u8::from(self.trans_b),
            self.alpha,
            self.beta,
            self.c
        )
    }

    /// C's shape with `M` and `N` filled in (0 in a case's shape stands for `M` in the
    /// first place and `N` in the last).
    fn c_shape(&self) -> Option<Vec<usize>> {
        let c = self.c?;
        let last = c.len().saturating_sub(1);
        Some(
            c.iter()
                .enumerate()
                .map(|(i, &d)| match (d, i == last) {
                    (0, true) => self.n,
                    (0, false) => self.m,
                    (d, _) => d,
                })
                .collect(),
        )
    }

    fn shapes(&self) -> Vec<Vec<usize>> {
        let a = if self.trans_a {
            vec![self.k, self.m]
        } else {
            vec![self.m, self.k]
        };
        let b = if self.trans_b {
            vec![self.n, self.k]
        } else {
            vec![self.k, self.n]
        };
        let mut v = vec![a, b];
        v.extend(self.c_shape());
        v
    }

    fn graph(&self) -> Verified {
        let t = |s: &[usize]| {
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let dt = self.dt;
        let names = ["a", "b", "c"];
        let shapes = self.shapes();
        let params: Vec<String> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| format!("%{i} \"{}\": {dt}[{}]", names[i], t(s)))
            .collect();
        let args: Vec<String> = (0..shapes.len()).map(|i| format!("%{i}")).collect();
        let src = format!(
            "graph \"g\"({}) -> (%9) {{\n  %9 \"y\": {dt}[{},{}] = Gemm \"gemm\"({}) {{alpha={:?}, beta={:?}, transA={}, transB={}}}\n}}",
            params.join(", "),
            self.m,
            self.n,
            args.join(", "),
            self.alpha,
            self.beta,
            u8::from(self.trans_a),
            u8::from(self.trans_b)
        );
        let g = gopt::ir::text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        gopt::ir::verify(g).unwrap_or_else(|e| panic!("{e}\n{src}"))
    }
}

fn cases() -> Vec<Case> {
    let base = Case {
        dt: DType::F32,
        m: 3,
        k: 50,
        n: 7,
        trans_a: true,
        trans_b: false,
        alpha: 1.0,
        beta: 1.0,
        c: None,
    };
    let mut v = vec![
        base,
        Case {
            trans_b: true,
            alpha: 0.25,
            beta: 0.35,
            c: Some(&[0, 0]),
            ..base
        },
        Case {
            m: 783,
            k: 33,
            n: 50,
            beta: 0.5,
            c: Some(&[0]),
            ..base
        },
        Case {
            trans_a: false,
            beta: 2.0,
            c: Some(&[0, 1]),
            ..base
        },
        Case {
            trans_a: false,
            trans_b: true,
            beta: -1.5,
            c: Some(&[]),
            ..base
        },
        // beta = 0: C is skipped, as the reference does.
        Case {
            beta: 0.0,
            c: Some(&[1, 0]),
            ..base
        },
        // beta = 1 with a C over N: cuBLASLt's fused bias, under a transposed A.
        Case {
            c: Some(&[0]),
            ..base
        },
    ];
    for dt in [DType::F16, DType::BF16] {
        v.push(Case {
            dt,
            m: 64,
            k: 96,
            n: 40,
            trans_b: true,
            alpha: 0.5,
            beta: 0.75,
            c: Some(&[1, 0]),
            ..base
        });
        v.push(Case {
            dt,
            m: 24,
            k: 40,
            n: 16,
            ..base
        });
    }
    v
}

#[test]
fn transposed_and_scaled_gemms_plan_and_compile() {
    nvrtc_ready();
    for c in cases() {
        let g = c.graph();
        let (p, _) = plan::build(&g).unwrap_or_else(|e| panic!("{}: {e}", c.label()));
        let gemms: Vec<_> = p
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Gemm(gm) => Some(gm),
                Step::Kernel(_) | Step::Collective(_) => None,
            })
            .collect();
        let [gm] = gemms[..] else {
            panic!("{}: {} GEMMs in {:?}", c.label(), gemms.len(), p.steps)
        };
        assert_eq!(gm.trans_a, c.trans_a, "{}", c.label());
        assert_eq!(gm.trans_b, c.trans_b, "{}", c.label());
        assert_eq!(
            (gm.m, gm.k, gm.n),
            (c.m as u64, c.k as u64, c.n as u64),
            "{}",
            c.label()
        );
        let scaled = c.c.is_some() && c.beta != 1.0 && c.beta != 0.0;
        assert_eq!(gm.post.is_some(), scaled, "{}", c.label());
        let fused = c.c.is_some() && c.beta == 1.0;
        assert_eq!(gm.bias.is_some(), fused, "{}", c.label());
        if scaled {
            let k = &p.kernels[gm.post.expect("a post kernel")];
            assert!(
                k.source.contains(&format!("{:e}f *", c.beta)),
                "{}",
                k.source
            );
        }
        let src = gopt::codegen::cuda::module_source(&p.kernels);
        compile(&src).unwrap_or_else(|e| panic!("{}: NVRTC: {e}\n{src}", c.label()));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn transposed_and_scaled_gemms_match_the_interpreter_on_the_gpu() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    let all = cases();
    for (i, c) in all.iter().enumerate() {
        let g = c.graph();
        let inputs: Vec<gopt::Tensor> = c
            .shapes()
            .iter()
            .enumerate()
            .map(|(j, s)| random(c.dt, s, 100 * i as u64 + j as u64))
            .collect();
        let want = gopt::ir::interp::run(&g, &inputs).expect("interpreter");
        let (p, blob) = plan::build(&g).expect("plans");
        let w = gopt::runtime::cuda::Weights::upload(&dev, &blob).expect("weights");
        let mut exe = gopt::runtime::cuda::Executable::new(&dev, p, w, true).expect("loads");
        let got = exe
            .run(&inputs)
            .unwrap_or_else(|e| panic!("{}: {e}", c.label()));
        let (a, b) = (got[0].to_f64_vec(), want[0].to_f64_vec());
        let result = if c.dt == DType::F32 {
            a.iter()
                .zip(&b)
                .position(|(x, y)| (x - y).abs() > 1e-5 + 1e-5 * y.abs())
                .map(|e| format!("element {e}: GPU {}, CPU {}", a[e], b[e]))
        } else {
            let num: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
            let den: f64 = b.iter().map(|y| y * y).sum();
            let l2 = (num / den.max(1e-30)).sqrt();
            (l2.is_nan() || l2 > 1e-2).then(|| format!("relative L2 {l2:.3e}"))
        };
        if let Some(e) = result {
            failures.push(format!("{}: {e}", c.label()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!(
        "cuda: {} transposed / scaled Gemm cases match the interpreter",
        all.len()
    );
}
