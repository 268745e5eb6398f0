//! A Llama decoder's prefill as transformers exports it for `input_ids` alone: the
//! positions are `0..seq`, so the rotary tables fold to constants. The repo's decoders
//! (tests/data/decoders/{llama,hf_llama}_decoder: RMSNorm, rotary, grouped-query heads,
//! SwiGLU), with `position_ids` made that constant (and the mask all ones, the caches
//! empty: a prompt alone), optimize to one Q/K/V GEMM, one
//! RotaryEmbedding per Q and K (no rotated-weight GEMMs), one gate/up GEMM and one
//! SwiGLU per layer; the optimized graph computes the imported one's numbers on the
//! CPU interpreter (fp32 within a relative L2 error of 1e-5, bf16 within 2e-2), and its
//! CUDA plan reads the merged GEMMs' pieces in place and compiles for sm_90.

use gopt::codegen::cuda::plan::{self, Step};
use gopt::ir::{DType, Model, Tensor};
use gopt::pipeline::{specialize, Options};
use gopt::{Backend, Precision};
use std::collections::BTreeMap;

mod common;

const BATCH: usize = 2;
const SEQ: usize = 12;

/// Decoder `name` as a prompt of BATCH x SEQ ([`common::decoders::prefill`]).
fn prefill(name: &str) -> Model {
    common::decoders::prefill(name, BATCH, SEQ)
}

fn bucket() -> BTreeMap<String, u64> {
    [
        ("batch_size", BATCH as u64),
        ("sequence_length", SEQ as u64),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The token ids (the graph's one input).
fn inputs() -> Vec<Tensor> {
    let ids: Vec<f64> = (0..BATCH * SEQ).map(|i| ((i * 37) % 500) as f64).collect();
    vec![Tensor::from_f64s(DType::I64, &[BATCH, SEQ], &ids).expect("ids")]
}

fn rel_l2(got: &Tensor, want: &Tensor) -> f64 {
    let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(1e-30)).sqrt()
}

fn count(g: &gopt::ir::Graph, op: &str) -> usize {
    g.nodes.iter().filter(|n| n.op.name() == op).count()
}

#[test]
fn constant_positions_rotate_in_one_kernel_and_match_the_imported_graph() {
    for name in ["llama_decoder", "hf_llama_decoder"] {
        let m = prefill(name);
        let ins = inputs();
        let want = gopt::ir::interp::run(&m.graph, &ins).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (precision, bound) in [(Precision::Fp32, 1e-5), (Precision::Bf16, 2e-2)] {
            let what = format!("{name} {precision:?}");
            let v = specialize(&m, &bucket(), &Options::new().precision(precision))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let g = &v.graph;
            let layers = 2;
            let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
            assert_eq!(count(g, "RotaryEmbedding"), 2 * layers, "{what}: {ops:?}");
            assert_eq!(count(g, "SwiGLU"), layers, "{what}: {ops:?}");
            // Per layer: Q/K/V, the output projection, gate/up, down; and the LM head.
            assert_eq!(count(g, "FusedMatMul"), 4 * layers + 1, "{what}: {ops:?}");
            let got = gopt::ir::interp::run(g, &ins).unwrap_or_else(|e| panic!("{what}: {e}"));
            for (k, (o, w)) in got.iter().zip(&want).enumerate() {
                let e = rel_l2(o, w);
                assert!(
                    e <= bound,
                    "{what}: output {k}: relative L2 {e:.3e} > {bound:e}"
                );
            }
        }
    }
}

#[test]
fn the_cuda_plan_reads_the_merged_gemms_in_place() {
    common::nvrtc_ready();
    for name in ["llama_decoder", "hf_llama_decoder"] {
        let m = prefill(name);
        let opts = Options::new()
            .precision(Precision::Bf16)
            .backend(Backend::Cuda);
        let v = specialize(&m, &bucket(), &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (p, _) = plan::build(&v.graph).unwrap_or_else(|e| panic!("{name}: {e}"));
        let kinds = p.kernel_kinds();
        assert_eq!(kinds.get("rotaryembedding"), Some(&4), "{name}: {kinds:?}");
        assert_eq!(kinds.get("swiglu"), Some(&2), "{name}: {kinds:?}");
        // SwiGLU reads both halves of the gate/up GEMM in place, and RotaryEmbedding its
        // rows of the Q/K/V GEMM where it rotates the rows (the decoders' attention and
        // cache outputs are in heads layout: at this size rotating a transposed copy
        // and transposing the result cost the same, and extraction may take either).
        let gemm_outs: Vec<u32> = p
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Gemm(g) => Some(g.out),
                Step::Kernel(_) | Step::Collective(_) => None,
            })
            .collect();
        let mut rows = 0;
        for k in &p.kernels {
            let reads_gemm = gemm_outs.contains(&k.inputs[0]);
            if k.name.ends_with("_swiglu") {
                assert!(
                    reads_gemm && k.inputs[0] == k.inputs[1],
                    "{name}: {}",
                    k.name
                );
            }
            rows += usize::from(k.name.ends_with("_rotaryembedding") && reads_gemm);
        }
        assert!(rows >= 1, "{name}: no RotaryEmbedding reads a GEMM's rows");
        let src = gopt::codegen::cuda::module_source(&p.kernels);
        common::compile(&src).unwrap_or_else(|e| panic!("{name}: NVRTC: {e}"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn the_prefill_on_cuda_matches_the_interpreter() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    for name in ["llama_decoder", "hf_llama_decoder"] {
        let m = prefill(name);
        let ins = inputs();
        let want = gopt::ir::interp::run(&m.graph, &ins).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (precision, bound) in [(Precision::Fp32, 1e-4), (Precision::Bf16, 2e-2)] {
            let opts = Options::new().precision(precision).backend(Backend::Cuda);
            let v = specialize(&m, &bucket(), &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (p, blob) = plan::build(&v.graph).unwrap_or_else(|e| panic!("{name}: {e}"));
            let w = gopt::runtime::cuda::Weights::upload(&dev, &blob).expect("weights");
            let mut exe = gopt::runtime::cuda::Executable::new(&dev, p, w, true).expect("loads");
            let got = exe.run(&ins).unwrap_or_else(|e| panic!("{name}: {e}"));
            for (k, (o, w)) in got.iter().zip(&want).enumerate() {
                let e = rel_l2(o, w);
                println!("{name} {precision:?}: output {k}: relative L2 {e:.2e}");
                assert!(
                    e <= bound,
                    "{name} {precision:?}: output {k}: {e:.3e} > {bound:e}"
                );
            }
        }
    }
}
