//! The CUDA attention kernel (codegen/src/cuda/attention.rs) on a matrix of cases:
//! fp32, bf16 and fp16; no mask, an additive `[B,1,1,S]` mask in the data's type, a
//! BERT-style fp32 `[1,1,S,S]` mask, a boolean `[B,1,S,S]` mask, causal; head sizes 32,
//! 36 (not a multiple of 16) and 64; sequences of 1, 77 and 128 (one partial tile, one
//! exact); plus grouped-query heads, cross attention, a mask shorter than the keys, a
//! 512 sequence, head sizes 16, 128 and 160 (past the tensor-core kernel), and 3-D
//! inputs (heads packed in the hidden dim, `q_num_heads`/`kv_num_heads`).
//!
//! Without a GPU (CI): every kernel compiles with NVRTC for sm_90 down to machine code
//! (NVRTC runs ptxas for a real architecture, so the inline `mma.sync` PTX is checked
//! too) without spills, unsupported modes are errors naming the node, and two kernels'
//! source is snapshotted. On a GPU (`#[ignore]`d here; scripts/gpu-check.sh runs them):
//! every case against the interpreter, and the BERT-base timing.

use gopt::codegen::cuda::{attention, Kernel};
use gopt::codegen::CodegenError;
use gopt::ir::ops::EvalCx;
use gopt::ir::{DType, Graph, Tensor};
use gopt::runtime::cuda::Device;
use std::path::Path;

mod common;
use common::{compile, compile_sass, nvrtc_ready, random};

/// The attention kernel of `node` as the planner makes it: lowered, then written.
fn emit_attention(
    g: &Graph,
    node: &gopt::ir::Node,
    name: &str,
) -> Result<Kernel, gopt::codegen::CodegenError> {
    let a =
        gopt::codegen::lower::attention::lower(g, node, gopt::codegen::cuda::VIEWS.strided_reads)
            .map_err(|e| e.for_backend("CUDA"))?;
    attention::emit(&a, name)
}

/// The mask a case gives the node.
#[derive(Clone, Copy, Debug, PartialEq)]
enum MaskKind {
    None,
    /// Additive, `[B,1,1,Skv]`, in the data's type.
    Keys,
    /// Additive fp32 `[1,1,Sq,Skv]` (the BERT export's form).
    Full,
    /// Boolean `[B,1,Sq,Skv]`.
    Bool,
    /// `is_causal=1`, no mask.
    Causal,
    /// Boolean `[1,1,1,keys]` with `keys` < Skv: the rest are masked.
    Short(usize),
}

#[derive(Clone, Copy, Debug)]
struct Case {
    dt: DType,
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    sq: usize,
    skv: usize,
    head: usize,
    mask: MaskKind,
    /// 3-D inputs: the heads packed in the hidden dim.
    three_d: bool,
}

impl Case {
    fn label(&self) -> String {
        format!(
            "{}_b{}_h{}x{}_q{}_k{}_d{}_{:?}{}",
            self.dt,
            self.batch,
            self.q_heads,
            self.kv_heads,
            self.sq,
            self.skv,
            self.head,
            self.mask,
            if self.three_d { "_3d" } else { "" }
        )
        .to_lowercase()
        .replace(['(', ')'], "")
    }

    fn mask_type(&self) -> Option<(DType, Vec<usize>)> {
        let (b, sq, skv) = (self.batch, self.sq, self.skv);
        match self.mask {
            MaskKind::None | MaskKind::Causal => None,
            MaskKind::Keys => Some((self.dt, vec![b, 1, 1, skv])),
            MaskKind::Full => Some((DType::F32, vec![1, 1, sq, skv])),
            MaskKind::Bool => Some((DType::Bool, vec![b, 1, sq, skv])),
            MaskKind::Short(n) => Some((DType::Bool, vec![1, 1, 1, n])),
        }
    }

    /// The shapes of Q (and the output) and of K and V.
    fn shapes(&self) -> [Vec<usize>; 2] {
        let (b, d) = (self.batch, self.head);
        if self.three_d {
            [
                vec![b, self.sq, self.q_heads * d],
                vec![b, self.skv, self.kv_heads * d],
            ]
        } else {
            [
                vec![b, self.q_heads, self.sq, d],
                vec![b, self.kv_heads, self.skv, d],
            ]
        }
    }

    /// The one-node graph, written in gopt's text form.
    fn graph(&self) -> Graph {
        let t = |s: &[usize]| {
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let dt = self.dt;
        let [q, kv] = self.shapes();
        let (q, kv) = (t(&q), t(&kv));
        let mut params = format!("%0 \"q\": {dt}[{q}], %1 \"k\": {dt}[{kv}], %2 \"v\": {dt}[{kv}]");
        let mut args = "%0, %1, %2".to_string();
        if let Some((mdt, ms)) = self.mask_type() {
            params += &format!(", %3 \"m\": {mdt}[{}]", t(&ms));
            args += ", %3";
        }
        let scale = 1.0 / (self.head as f64).sqrt();
        let causal = if self.mask == MaskKind::Causal {
            "is_causal=1, "
        } else {
            ""
        };
        let heads = if self.three_d {
            format!(
                "kv_num_heads={}, q_num_heads={}, ",
                self.kv_heads, self.q_heads
            )
        } else {
            String::new()
        };
        let src = format!(
            "graph \"g\"({params}) -> (%4) {{\n  %4 \"y\": {dt}[{q}] = Attention \"attn\"({args}) {{{causal}{heads}scale={scale:.8}}}\n}}"
        );
        let g = gopt::ir::text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        gopt::ir::verify(g)
            .unwrap_or_else(|e| panic!("{e}\n{src}"))
            .into_inner()
    }

    fn kernel(&self, g: &Graph) -> Kernel {
        emit_attention(g, &g.nodes[0], &format!("attn_{}", self.label()))
            .unwrap_or_else(|e| panic!("{}: {e}", self.label()))
    }
}

/// The compile and GPU matrix: every dtype x mask x head size x sequence, and a few
/// shapes beyond it (grouped-query heads, cross attention, a short mask, batch 1).
fn cases(dt: DType) -> Vec<Case> {
    let mut v = Vec::new();
    for mask in [
        MaskKind::None,
        MaskKind::Keys,
        MaskKind::Full,
        MaskKind::Bool,
        MaskKind::Causal,
    ] {
        for head in [32, 36, 64] {
            for s in [1, 77, 128] {
                v.push(Case {
                    dt,
                    batch: 2,
                    q_heads: 3,
                    kv_heads: 3,
                    sq: s,
                    skv: s,
                    head,
                    mask,
                    three_d: false,
                });
            }
        }
    }
    let base = Case {
        dt,
        batch: 1,
        q_heads: 4,
        kv_heads: 2,
        sq: 77,
        skv: 128,
        head: 64,
        mask: MaskKind::None,
        three_d: false,
    };
    v.push(base);
    v.push(Case {
        mask: MaskKind::Causal,
        ..base
    });
    v.push(Case {
        sq: 128,
        skv: 77,
        head: 36,
        mask: MaskKind::Causal,
        ..base
    });
    v.push(Case {
        sq: 200,
        skv: 200,
        head: 36,
        mask: MaskKind::Short(150),
        ..base
    });
    v.push(Case {
        kv_heads: 4,
        sq: 512,
        skv: 512,
        head: 64,
        mask: MaskKind::Keys,
        ..base
    });
    v.push(Case {
        q_heads: 2,
        kv_heads: 1,
        sq: 33,
        skv: 17,
        head: 16,
        mask: MaskKind::Full,
        ..base
    });
    // The largest tensor-core head (32-key tiles), and a head past it (CUDA cores, 16-row
    // tiles, for every dtype).
    v.push(Case {
        sq: 100,
        skv: 100,
        head: 128,
        mask: MaskKind::Causal,
        ..base
    });
    v.push(Case {
        sq: 40,
        skv: 40,
        head: 160,
        mask: MaskKind::Keys,
        ..base
    });
    // 3-D inputs (heads packed in the hidden dim): grouped-query heads with a mask,
    // causal cross attention with a head size off the 16-byte loads, a single query, and
    // a head past the tensor-core kernel.
    let packed = Case {
        three_d: true,
        ..base
    };
    v.extend([
        Case {
            batch: 2,
            q_heads: 6,
            kv_heads: 2,
            sq: 37,
            skv: 37,
            mask: MaskKind::Keys,
            ..packed
        },
        Case {
            sq: 77,
            skv: 50,
            head: 36,
            mask: MaskKind::Causal,
            ..packed
        },
        Case {
            batch: 3,
            sq: 1,
            skv: 19,
            head: 32,
            mask: MaskKind::Full,
            ..packed
        },
        Case {
            sq: 40,
            skv: 40,
            head: 160,
            mask: MaskKind::Bool,
            ..packed
        },
    ]);
    v
}

const DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];

#[test]
fn attention_kernels_compile_for_sm90() {
    nvrtc_ready();
    let mut n = 0;
    for dt in DTYPES {
        let kernels: Vec<Kernel> = cases(dt).iter().map(|c| c.kernel(&c.graph())).collect();
        let src = gopt::codegen::cuda::module_source(&kernels);
        // The runtime's PTX compilation with ptxas' report (one NVRTC run, not two).
        let log = compile_sass(&src, "sm_90")
            .unwrap_or_else(|e| panic!("{dt}: NVRTC rejected the module:\n{e}"));
        // ptxas reports per kernel; none may spill to local memory.
        let spills: Vec<&str> = log.lines().filter(|l| l.contains("spill")).collect();
        assert!(
            spills.len() >= kernels.len(),
            "{dt}: no ptxas report:\n{log}"
        );
        for line in spills {
            assert!(
                line.contains(" 0 bytes spill stores, 0 bytes spill loads"),
                "{dt}: {line}\n{log}"
            );
        }
        if dt == DType::BF16 {
            let report: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("Used") && l.contains("registers"))
                .take(3)
                .collect();
            println!("{dt} ptxas: {report:#?}");
        }
        n += kernels.len();
    }
    println!("cuda: {n} attention kernels compiled for sm_90 (PTX and machine code)");
}

#[test]
fn sm90_compilation_checks_inline_ptx() {
    nvrtc_ready();
    // For a real architecture NVRTC runs ptxas, so a bad `mma.sync` fails here, not at
    // module load on the GPU.
    let bad = "extern \"C\" __global__ void k(float* x) { asm volatile(\"mma.sync.bogus;\"); }";
    let err = compile(bad).expect_err("ptxas must reject the bogus instruction");
    assert!(err.contains("bogus"), "{err}");
    let err = compile_sass(bad, "sm_90").expect_err("ptxas must reject the bogus instruction");
    assert!(err.contains("bogus"), "{err}");
}

#[test]
fn the_shared_models_get_attention_kernels() {
    for (name, causal) in [("bert_small", false), ("gpt2_small", true)] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/models")
            .join(name)
            .join("model.onnx");
        let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let b = [("batch", 1u64), ("seq", 128)]
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        let opts = gopt::Options::new().precision(gopt::Precision::Bf16);
        let v = gopt::pipeline::specialize(&model.model, &b, &opts)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (kernels, others) =
            gopt::codegen::cuda::emit_kernels(&v.graph).unwrap_or_else(|e| panic!("{e}"));
        let attn: Vec<&Kernel> = kernels
            .iter()
            .filter(|k| k.name.ends_with("_attention"))
            .collect();
        assert!(!attn.is_empty(), "{name}: no attention kernel");
        assert!(
            others.iter().all(|(_, op)| op != "Attention"),
            "{name}: {others:?}"
        );
        for k in attn {
            assert!(
                k.source.contains("mma.sync"),
                "{name}: bf16 attention must use tensor cores"
            );
            assert_eq!(k.source.contains("j <= i"), causal, "{name}: {}", k.name);
        }
    }
}

fn unsupported(src: &str) -> (String, String) {
    let g = gopt::ir::verify(gopt::ir::text::parse(src).expect("parses"))
        .expect("verifies")
        .into_inner();
    match emit_attention(&g, &g.nodes[0], "k") {
        Err(CodegenError::Unsupported { node, what, .. }) => (node, what),
        Err(e) => panic!("expected Unsupported, got {e}"),
        Ok(_) => panic!("expected Unsupported, got a kernel"),
    }
}

/// The attention forms past the flash kernel's (softcap, a narrower value head, a
/// window, a KV cache) run on the general kernel, which NVRTC compiles; what no kernel
/// runs is an error naming the node.
#[test]
fn general_forms_compile_and_refusals_name_the_node() {
    nvrtc_ready();
    for (name, src) in [
        (
            "capped",
            r#"graph "g"(%0 "q": bf16[1,2,8,32], %1 "k": bf16[1,2,8,32], %2 "v": bf16[1,2,8,32]) -> (%3) {
  %3 "y": bf16[1,2,8,32] = Attention "capped"(%0, %1, %2) {softcap=30.0}
}"#,
        ),
        (
            "narrow_v",
            r#"graph "g"(%0 "q": f32[1,2,8,32], %1 "k": f32[1,2,8,32], %2 "v": f32[1,2,8,16]) -> (%3) {
  %3 "y": f32[1,2,8,16] = Attention "narrow_v"(%0, %1, %2)
}"#,
        ),
        (
            "windowed",
            r#"graph "g"(%0 "q": f16[1,2,8,32], %1 "k": f16[1,2,8,32], %2 "v": f16[1,2,8,32]) -> (%3) {
  %3 "y": f16[1,2,8,32] = Attention "windowed"(%0, %1, %2) {left_window_size=4}
}"#,
        ),
        (
            "cached",
            r#"graph "g"(%0 "q": bf16[1,2,8,32], %1 "k": bf16[1,2,8,32], %2 "v": bf16[1,2,8,32], %3 "pk": bf16[1,2,4,32], %4 "pv": bf16[1,2,4,32]) -> (%5, %6, %7) {
  %5 "y": bf16[1,2,8,32], %6 "present_k": bf16[1,2,12,32], %7 "present_v": bf16[1,2,12,32] = Attention "cached"(%0, %1, %2, _, %3, %4)
}"#,
        ),
    ] {
        let g = gopt::ir::verify(gopt::ir::text::parse(src).expect("parses"))
            .expect("verifies")
            .into_inner();
        let k = emit_attention(&g, &g.nodes[0], "k").unwrap_or_else(|e| panic!("{name}: {e}"));
        let src = gopt::codegen::cuda::module_source(std::slice::from_ref(&k));
        compile(&src).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let (node, what) = unsupported(
        r#"graph "g"(%0 "q": f32[1,2,8,32], %1 "k": f32[1,2,8,32], %2 "v": f32[1,2,8,32], %3 "pk": f32[1,2,4,32], %4 "pv": f32[1,2,4,32], %5 "lens": i64[1]) -> (%6) {
  %6 "y": f32[1,2,8,32] = Attention "padded_cache"(%0, %1, %2, _, %3, %4, %5)
}"#,
    );
    assert_eq!(node, "padded_cache");
    assert!(what.contains("nonpad_kv_seqlen"), "{what}");
}

#[test]
fn attention_source_snapshot() {
    let c = Case {
        dt: DType::BF16,
        batch: 2,
        q_heads: 3,
        kv_heads: 3,
        sq: 77,
        skv: 77,
        head: 36,
        mask: MaskKind::Keys,
        three_d: false,
    };
    let g = c.graph();
    let k = emit_attention(&g, &g.nodes[0], "k0_attention").expect("kernel");
    let f = Case {
        dt: DType::F32,
        mask: MaskKind::Causal,
        ..c
    };
    let gf = f.graph();
    let kf = emit_attention(&gf, &gf.nodes[0], "k1_attention").expect("kernel");
    let src = format!(
        "// grid {} x block {}\n{}\n// grid {} x block {}\n{}",
        k.grid, k.block, k.source, kf.grid, kf.block, kf.source
    );
    insta::with_settings!({snapshot_path => "../snapshots/cuda", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("attention_bf16_d36_s77_mask_f32_causal", src);
    });
}

// ---------------------------------------------------------------------------------
// On a GPU.

/// The case's mask: random values with masked entries, and some rows masked entirely
/// (those must come out as zeros). Fully masked rows use -inf: a row of only
/// `f32::MIN` differs in the reference between fp32 (uniform weights) and bf16/fp16
/// (rounds to -inf, zeros), so `f32::MIN` appears only next to unmasked keys.
fn mask_tensor(c: &Case, seed: u64) -> Option<Tensor> {
    let (dt, shape) = c.mask_type()?;
    let n: usize = shape.iter().product();
    let (rows, cols) = (shape[2], shape[3]);
    let r = random(DType::F32, &shape, seed).to_f64_vec();
    let vals: Vec<f64> = (0..n)
        .map(|x| {
            let (i, j) = ((x / cols) % rows, x % cols);
            let dead_row = rows > 1 && i % 7 == 3;
            match c.mask {
                MaskKind::Bool | MaskKind::Short(_) => {
                    if dead_row || r[x] < -1.0 {
                        0.0
                    } else {
                        1.0
                    }
                }
                MaskKind::Keys if j % 5 == 4 => f64::NEG_INFINITY,
                MaskKind::Full if dead_row => f64::NEG_INFINITY,
                MaskKind::Full if j % 3 == 1 => f32::MIN as f64,
                _ => r[x],
            }
        })
        .collect();
    Some(Tensor::from_f64s(dt, &shape, &vals).expect("mask"))
}

/// fp32: elementwise within rtol 1e-4 / atol 1e-5 (exp, summation order and the
/// reference's split of the scale over Q and K differ in the last bits; a CPU model of
/// both stays within a tenth of that). bf16/fp16: relative L2 error at most 1e-2, and
/// every element within 2e-2 + 2e-2 relative, against the interpreter in fp32 on the
/// same rounded inputs. Not against the interpreter in bf16: it mirrors the ONNX
/// reference's bf16 arithmetic (scores and probabilities rounded, each row summed with
/// one bf16 rounding per key), which is itself 1e-2 off the exact result at 77 keys and
/// 1e-1 off at 512; the kernel, fp32 until the store, is about 2e-3 off.
fn compare(c: &Case, got: &Tensor, want: &Tensor) -> Result<f64, String> {
    if got.dtype() != c.dt || got.shape() != want.shape() {
        return Err(format!(
            "{:?}{:?} vs {:?}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    if let Some(i) = g.iter().position(|x| !x.is_finite()) {
        return Err(format!("element {i} is {}", g[i]));
    }
    if c.dt == DType::F32 {
        let mut worst: f64 = 0.0;
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let err = (a - b).abs();
            if err > 1e-5 + 1e-4 * b.abs() {
                return Err(format!("element {i}: GPU {a}, CPU {b}"));
            }
            worst = worst.max(err);
        }
        return Ok(worst);
    }
    // A loose elementwise bound as well, so a few wrong elements cannot hide in the
    // norm (a CPU model of the kernel stays within a tenth of it).
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if (a - b).abs() > 2e-2 + 2e-2 * b.abs() {
            return Err(format!("element {i}: GPU {a}, CPU {b}"));
        }
    }
    let rel = rel_l2(&g, &w);
    if rel > 1e-2 {
        return Err(format!("relative L2 error {rel:.3e}"));
    }
    Ok(rel)
}

fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
    let den: f64 = want.iter().map(|b| b * b).sum();
    (num / den.max(1e-30)).sqrt()
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn attention_matches_the_interpreter_on_the_gpu() {
    let dev = Device::open().unwrap_or_else(|e| panic!("{e}"));
    println!("device: {} ({})", dev.name, dev.arch);
    let mut checked = 0;
    let mut failures = Vec::new();
    for dt in DTYPES {
        let cases = cases(dt);
        let graphs: Vec<Graph> = cases.iter().map(Case::graph).collect();
        let kernels: Vec<Kernel> = cases
            .iter()
            .zip(&graphs)
            .map(|(c, g)| c.kernel(g))
            .collect();
        let module = dev
            .compile(
                &format!("attention {dt}"),
                &gopt::codegen::cuda::module_source(&kernels),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let mut worst: f64 = 0.0;
        let mut native_worst: f64 = 0.0;
        for (ci, ((c, g), k)) in cases.iter().zip(&graphs).zip(&kernels).enumerate() {
            let node = &g.nodes[0];
            let seed = 1000 * ci as u64;
            let [qs, kvs] = c.shapes();
            let q = random(dt, &qs, seed + 1);
            let kt = random(dt, &kvs, seed + 2);
            let v = random(dt, &kvs, seed + 3);
            let m = mask_tensor(c, seed + 4);
            let mut ins: Vec<Option<&Tensor>> = vec![Some(&q), Some(&kt), Some(&v)];
            if let Some(m) = &m {
                ins.push(Some(m));
            }
            let lookup = |_: &str| None;
            let eval = |ins: &[Option<&Tensor>]| {
                node.op
                    .eval(&EvalCx { lookup: &lookup }, node, ins)
                    .unwrap_or_else(|e| panic!("{}: {e}", c.label()))
                    .swap_remove(0)
            };
            // The reference in fp32 on the same (rounded) values; bool masks stay bool.
            let wide: Vec<Tensor> = ins
                .iter()
                .flatten()
                .map(|t| match t.dtype() {
                    DType::F16 | DType::BF16 => t.cast(DType::F32),
                    _ => (*t).clone(),
                })
                .collect();
            let want = eval(&wide.iter().map(Some).collect::<Vec<_>>());
            let params: Vec<&Tensor> = ins.iter().flatten().copied().collect();
            let out = (dt, qs);
            let got = dev
                .run_kernel(&module, k, &params, &[out])
                .unwrap_or_else(|e| panic!("{}: {e}", c.label()));
            if dt != DType::F32 {
                // For information: the distance to the interpreter's own bf16/fp16 result.
                let native = eval(&ins).to_f64_vec();
                native_worst = native_worst.max(rel_l2(&got[0].to_f64_vec(), &native));
            }
            match compare(c, &got[0], &want) {
                Ok(e) => worst = worst.max(e),
                Err(m) => failures.push(format!("{}: {m}", c.label())),
            }
            checked += 1;
        }
        if dt == DType::F32 {
            println!("{dt}: worst abs error {worst:.3e}");
        } else {
            println!(
                "{dt}: worst relative L2 {worst:.3e} (to the interpreter in {dt}: {native_worst:.3e})"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!("cuda: {checked} attention cases match the interpreter on the GPU");
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn attention_timing() {
    let dev = Device::open().unwrap_or_else(|e| panic!("{e}"));
    println!("| case | median µs | min µs | TFLOP/s |");
    println!("|---|---:|---:|---:|");
    // (dtype, batch, heads, seq, head size, mask): BERT-base's shape at batch 32 and 1,
    // and a long-sequence shape (S 2048, D 128) for the pipelined kernel's upper range.
    for (dt, batch, heads, seq, head, mask) in [
        (DType::BF16, 32, 12, 128, 64, MaskKind::None),
        (DType::BF16, 32, 12, 128, 64, MaskKind::Keys),
        (DType::BF16, 32, 12, 128, 64, MaskKind::Full),
        (DType::BF16, 32, 12, 128, 64, MaskKind::Causal),
        (DType::F16, 32, 12, 128, 64, MaskKind::None),
        (DType::BF16, 1, 12, 128, 64, MaskKind::None),
        (DType::BF16, 1, 12, 128, 64, MaskKind::Keys),
        (DType::BF16, 4, 16, 2048, 128, MaskKind::None),
        (DType::BF16, 4, 16, 2048, 128, MaskKind::Causal),
        (DType::BF16, 4, 32, 2048, 64, MaskKind::None),
        (DType::F32, 32, 12, 128, 64, MaskKind::None),
        (DType::F32, 1, 12, 128, 64, MaskKind::None),
    ] {
        let c = Case {
            dt,
            batch,
            q_heads: heads,
            kv_heads: heads,
            sq: seq,
            skv: seq,
            head,
            mask,
            three_d: false,
        };
        let g = c.graph();
        let k = c.kernel(&g);
        let module = dev
            .compile(
                &c.label(),
                &gopt::codegen::cuda::module_source(std::slice::from_ref(&k)),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let mut ins = vec![
            (dt, vec![c.batch, c.q_heads, c.sq, c.head]),
            (dt, vec![c.batch, c.kv_heads, c.skv, c.head]),
            (dt, vec![c.batch, c.kv_heads, c.skv, c.head]),
        ];
        ins.extend(c.mask_type());
        let oshape = [c.batch, c.q_heads, c.sq, c.head];
        let t = dev
            .time_kernel(&module, &k, &ins, (dt, &oshape), 20, 20)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut flops = 4.0 * (c.batch * c.q_heads * c.sq * c.skv * c.head) as f64;
        if mask == MaskKind::Causal {
            flops /= 2.0;
        }
        println!(
            "| {dt} B={batch} H={heads} S={seq} D={head} {mask:?} (grid {} x {}, {} B shared) | {:.1} | {:.1} | {:.1} |",
            k.grid,
            k.block,
            k.shared_mem,
            t.median_us,
            t.min_us,
            flops / (t.median_us * 1e-6) / 1e12
        );
    }
}
