//! CUDA kernels for the element-wise, row and reduction ops the WGSL backend had first:
//! BitShift, Mod (fmod 0 and 1, integers and floats, mixed signs), the bitwise ops,
//! IsInf, Selu, ThresholdedRelu, Shrink, PRelu, Celu, Mish, NaN-propagating Max/Min and
//! Relu, Dropout's mask and its run-time training check; LayerNorm/RMSNorm over leading axes (LayerNorm's Mean and
//! InvStdDev outputs, scales broadcast within the row), Softmax, LogSoftmax and
//! LpNormalization along any axis (register-cached, block-per-row and thread-per-row
//! kernels); ReduceProd, ReduceLogSum and ReduceLogSumExp.
//!
//! Each case is a small graph in the IR's text form. Without a GPU: its whole CUDA plan
//! builds and NVRTC compiles it for sm_90 (the H200), and so does every conformance
//! case of these ops that the wgpu manifest lists. On a GPU (`#[ignore]`d here;
//! scripts/gpu-check.sh runs it with `--ignored`): each kernel matches the CPU
//! interpreter on the graph's constants (the edge cases) or seeded random inputs — fp32
//! within rtol 1e-5 / atol 1e-6, f16/bf16 within rtol 1e-2 / atol 1e-3, integers and
//! booleans exactly.

use gopt::codegen::cuda::{emit_kernels, module_source, plan};
use gopt::ir::{DType, Tensor};
use std::path::Path;

mod common;
use common::{close, compile, node_inputs, nvrtc_ready, reference, KERNEL_TOL};

/// The graphs: a name and the IR text.
const CASES: &[(&str, &str)] = &[
    (
        "bitshift",
        r#"graph "bitshift"(%0 "seed": f32[1]) -> (%3, %4, %7, %8, %11, %12, %15) {
  %1 "x8": i8[5] = const [-8, 4, -1, 64, 1]
  %2 "y8": i8[5] = const [8, 9, 127, 1, 7]
  %3 "l8": i8[5] = BitShift "shl8"(%1, %2) {direction="LEFT"}
  %4 "r8": i8[5] = BitShift "shr8"(%1, %2) {direction="RIGHT"}
  %5 "xu": u64[3] = const [16, 4, 1]
  %6 "yu": u64[3] = const [1, 2, 64]
  %7 "lu": u64[3] = BitShift "shlu"(%5, %6) {direction="LEFT"}
  %8 "ru": u64[3] = BitShift "shru"(%5, %6) {direction="RIGHT"}
  %9 "x32": i32[4] = const [-8, 5, -64, 2147483647]
  %10 "y32": i32[4] = const [-1, 31, 3, 32]
  %11 "l32": i32[4] = BitShift "shl32"(%9, %10) {direction="LEFT"}
  %12 "r32": i32[4] = BitShift "shr32"(%9, %10) {direction="RIGHT"}
  %13 "xu8": u8[4] = const [255, 128, 3, 1]
  %14 "yu8": u8[4] = const [1, 7, 8, 0]
  %15 "lu8": u8[4] = BitShift "shlu8"(%13, %14) {direction="LEFT"}
}"#,
    ),
    (
        "mod",
        r#"graph "mod"(%0 "seed": f32[1]) -> (%3, %4, %7, %8, %11, %12, %15, %18, %21) {
  %1 "a": f32[6] = const [5.5, -5.5, 5.5, -5.5, 4.0, -0.0]
  %2 "b": f32[6] = const [2.0, 2.0, -2.0, -2.0, 2.0, 3.0]
  %3 "m0": f32[6] = Mod "fmod0"(%1, %2) {fmod=0}
  %4 "m1": f32[6] = Mod "fmod1"(%1, %2) {fmod=1}
  %5 "ia": i32[6] = const [7, -7, 7, -7, 6, -2147483648]
  %6 "ib": i32[6] = const [3, 3, -3, -3, 3, -1]
  %7 "i0": i32[6] = Mod "imod0"(%5, %6) {fmod=0}
  %8 "i1": i32[6] = Mod "imod1"(%5, %6) {fmod=1}
  %9 "ua": u8[3] = const [250, 7, 9]
  %10 "ub": u8[3] = const [7, 250, 3]
  %11 "u0": u8[3] = Mod "umod0"(%9, %10) {}
  %12 "u1": u8[3] = Mod "umod1"(%9, %10) {fmod=1}
  %13 "la": i64[3] = const [-9000000000, 9000000000, -5]
  %14 "lb": i64[3] = const [7, -7, 3]
  %15 "l0": i64[3] = Mod "lmod0"(%13, %14) {}
  %16 "qa": u64[2] = const [9223372036854775807, 10]
  %17 "qb": u64[2] = const [10, 3]
  %18 "q0": u64[2] = Mod "qmod0"(%16, %17) {}
  %19 "ha": f16[4] = const [5.5, -5.5, 3.0, -1.0]
  %20 "hb": f16[4] = const [-2.0, 2.0, 1.5, 0.5]
  %21 "h0": f16[4] = Mod "hmod0"(%19, %20) {fmod=0}
}"#,
    ),
    (
        "bitwise",
        r#"graph "bitwise"(%0 "seed": f32[1]) -> (%3, %4, %5, %7, %10) {
  %1 "a": i16[4] = const [-1, 12, -32768, 255]
  %2 "b": i16[4] = const [7, 10, -1, 256]
  %3 "and": i16[4] = BitwiseAnd "and"(%1, %2)
  %4 "or": i16[4] = BitwiseOr "or"(%1, %2)
  %5 "xor": i16[4] = BitwiseXor "xor"(%1, %2)
  %6 "q": u64[2] = const [0, 9223372036854775806]
  %7 "not": u64[2] = BitwiseNot "not"(%6)
  %8 "u": u8[2,3] = const [1, 2, 255, 4, 5, 6]
  %9 "v": u8[3] = const [255, 3, 15]
  %10 "andb": u8[2,3] = BitwiseAnd "andb"(%8, %9)
}"#,
    ),
    (
        "isinf",
        r#"graph "isinf"(%0 "seed": f32[1]) -> (%2, %3, %4, %6) {
  %1 "x": f32[5] = const [inf, -inf, NaN, 1.0, -0.0]
  %2 "both": bool[5] = IsInf "both"(%1)
  %3 "pos": bool[5] = IsInf "pos"(%1) {detect_negative=0}
  %4 "neg": bool[5] = IsInf "neg"(%1) {detect_positive=0}
  %5 "h": f16[3] = const [inf, -inf, 2.0]
  %6 "h_both": bool[3] = IsInf "h_both"(%5)
}"#,
    ),
    (
        "activations",
        r#"graph "activations"(%0 "x": f32[4,33]) -> (%1, %2, %3, %4, %5, %6, %7, %8, %9) {
  %1 "selu": f32[4,33] = Selu "selu"(%0) {alpha=2.0, gamma=3.0}
  %2 "selu_d": f32[4,33] = Selu "selu_d"(%0)
  %3 "trelu": f32[4,33] = ThresholdedRelu "trelu"(%0) {alpha=0.5}
  %4 "trelu_d": f32[4,33] = ThresholdedRelu "trelu_d"(%0)
  %5 "shrink": f32[4,33] = Shrink "shrink"(%0) {bias=1.5, lambd=1.5}
  %6 "shrink_d": f32[4,33] = Shrink "shrink_d"(%0)
  %7 "celu": f32[4,33] = Celu "celu"(%0) {alpha=2.0}
  %8 "mish": f32[4,33] = Mish "mish"(%0)
  %9 "hs": f32[4,33] = HardSigmoid "hs"(%0) {alpha=0.3, beta=0.4}
}"#,
    ),
    (
        "activations_half",
        r#"graph "activations_half"(%0 "x": f16[3,8], %1 "b": bf16[3,8]) -> (%2, %3, %4, %5) {
  %2 "mish": f16[3,8] = Mish "mish_h"(%0)
  %3 "selu": f16[3,8] = Selu "selu_h"(%0)
  %4 "celu": bf16[3,8] = Celu "celu_b"(%1)
  %5 "shrink": bf16[3,8] = Shrink "shrink_b"(%1)
}"#,
    ),
    (
        "prelu_nan_dropout",
        r#"graph "prelu_nan_dropout"(%0 "x": f32[2,3]) -> (%2, %5, %7, %8, %10, %11, %12, %13, %15, %16) {
  %1 "slope": f32[3] = const [0.5, -1.0, 2.0]
  %2 "prelu": f32[2,3] = PRelu "prelu"(%0, %1)
  %3 "ix": i32[2,3] = const [-4, 5, -6, 7, -8, 0]
  %4 "islope": i32[3] = const [2, 3, -1]
  %5 "iprelu": i32[2,3] = PRelu "iprelu"(%3, %4)
  %6 "n": f32[4] = const [NaN, -1.0, 2.0, NaN]
  %7 "relu": f32[4] = Relu "relu"(%6)
  %9 "m": f32[4] = const [1.0, NaN, 3.0, 0.0]
  %8 "max": f32[4] = Max "max"(%6, %9)
  %10 "min": f32[4] = Min "min"(%9, %6)
  %11 "drop": f32[2,3], %12 "mask": bool[2,3] = Dropout "drop"(%0)
  %13 "sign": f32[4] = Sign "sign"(%6)
  %14 "big": f32[4] = const [100.0, -100.0, 0.0, 20.0]
  %15 "softplus": f32[4] = Softplus "softplus"(%14)
  %16 "elu": f32[2,3] = Elu "elu"(%0) {alpha=0.5}
}"#,
    ),
    (
        "dropout_runtime_mode",
        r#"graph "dropout_runtime_mode"(%0 "x": f32[2,3], %1 "r": f32[], %2 "t": bool[]) -> (%3, %4) {
  %3 "y": f32[2,3], %4 "m": bool[2,3] = Dropout "dt"(%0, %1, %2)
}"#,
    ),
    (
        "layernorm_axes",
        r#"graph "layernorm_axes"(%0 "x": f32[2,3,8], %1 "scale": f32[3,8], %2 "bias": f32[8]) -> (%3, %4, %5, %6, %8) {
  %3 "y": f32[2,3,8], %4 "mean": f32[2,1,1], %5 "rstd": f32[2,1,1] = LayerNormalization "ln1"(%0, %1, %2) {axis=1, epsilon=0.001}
  %7 "s0": f32[1] = const [1.5]
  %6 "y0": f32[2,3,8] = LayerNormalization "ln0"(%0, %7) {axis=0}
  %8 "rms": f32[2,3,8] = RMSNormalization "rms1"(%0, %1) {axis=1}
}"#,
    ),
    (
        "layernorm_last",
        r#"graph "layernorm_last"(%0 "x": f32[4,128], %1 "scale": f32[128], %2 "bias": f32[128], %6 "h": bf16[4,64], %7 "hs": bf16[64]) -> (%3, %4, %5, %8) {
  %3 "y": f32[4,128], %4 "mean": f32[4,1], %5 "rstd": f32[4,1] = LayerNormalization "ln"(%0, %1, %2)
  %8 "hy": bf16[4,64] = LayerNormalization "lnh"(%6, %7, %7)
}"#,
    ),
    (
        "softmax_axes",
        r#"graph "softmax_axes"(%0 "a": f32[3,64], %1 "b": f32[2,5,4], %2 "c": f32[4,128], %3 "d": f32[3,50], %4 "h": f16[5,40]) -> (%5, %6, %7, %8, %9, %10, %11) {
  %5 "s0": f32[3,64] = Softmax "s0"(%0) {axis=0}
  %6 "s1": f32[2,5,4] = Softmax "s1"(%1) {axis=1}
  %7 "l_reg": f32[4,128] = LogSoftmax "l_reg"(%2)
  %8 "l_loop": f32[3,50] = LogSoftmax "l_loop"(%3) {axis=-1}
  %9 "l_lanes": f16[5,40] = LogSoftmax "l_lanes"(%4) {axis=0}
  %10 "l_mid": f32[2,5,4] = LogSoftmax "l_mid"(%1) {axis=1}
  %11 "s_last": f32[2,5,4] = Softmax "s_last"(%1)
}"#,
    ),
    (
        "lpnorm",
        r#"graph "lpnorm"(%0 "x": f32[3,4], %1 "r": f32[2,64]) -> (%3, %4, %5, %6) {
  %2 "z": f32[2,3] = const [0.0, 0.0, 0.0, 3.0, -4.0, 0.0]
  %3 "l1": f32[3,4] = LpNormalization "l1"(%0) {axis=0, p=1}
  %4 "l2": f32[2,64] = LpNormalization "l2"(%1)
  %5 "l2z": f32[2,3] = LpNormalization "l2z"(%2) {axis=-1, p=2}
  %6 "l1z": f32[2,3] = LpNormalization "l1z"(%2) {axis=1, p=1}
}"#,
    ),
    (
        "reductions",
        r#"graph "reductions"(%0 "x": f32[2,3,4], %1 "long": f32[2,2048], %2 "h": f16[3,5]) -> (%3, %4, %5, %6, %8, %9, %10, %13, %14) {
  %3 "prod": f32[2,1,4] = ReduceProd "prod"(%0) {axes=ints[1]}
  %11 "abs": f32[2,3,4] = Abs "abs"(%0)
  %4 "logsum": f32[2,3] = ReduceLogSum "logsum"(%11) {axes=ints[2], keepdims=0}
  %5 "lse": f32[3] = ReduceLogSumExp "lse"(%0) {axes=ints[0,2], keepdims=0}
  %6 "lse_long": f32[2,1] = ReduceLogSumExp "lse_long"(%1) {axes=ints[1]}
  %7 "inf": f32[2,3] = const [inf, -inf, 1.0, -inf, -inf, NaN]
  %8 "lse_inf": f32[2] = ReduceLogSumExp "lse_inf"(%7) {axes=ints[1], keepdims=0}
  %9 "hprod": f16[1,5] = ReduceProd "hprod"(%2) {axes=ints[0]}
  %10 "all": f32[1,1,1] = ReduceLogSumExp "all"(%0)
  %12 "d": f64[2,3] = const [1.0, 2.0, -3.0, 1000.0, 1000.0, -inf]
  %13 "dlse": f64[2] = ReduceLogSumExp "dlse"(%12) {axes=ints[1], keepdims=0}
  %14 "dl1": f64[1,3] = ReduceL1 "dl1"(%12) {axes=ints[0]}
}"#,
    ),
];

fn graph(name: &str, text: &str) -> gopt::ir::Verified {
    let g = gopt::ir::text::parse(text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
    gopt::ir::verify(g).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"))
}

#[test]
fn every_case_plans_and_compiles_for_sm90() {
    nvrtc_ready();
    let mut kernels = 0;
    for (name, text) in CASES {
        let g = graph(name, text);
        let (p, _) = plan::build(&g).unwrap_or_else(|e| panic!("{name}: {e}"));
        let src = module_source(&p.kernels);
        if let Err(e) = compile(&src) {
            panic!("{name}: NVRTC rejected the module:\n{e}\n{src}");
        }
        kernels += p.kernels.len();
    }
    println!(
        "cuda: {kernels} kernels of {} graphs compiled for sm_90",
        CASES.len()
    );
}

/// The kernels the rows and reductions choose: the thread-per-row kernel for a strided
/// axis, the register-cached one on the transformer path, stats outputs bound.
#[test]
fn row_kernels_pick_their_variant() {
    let find = |case: &str, node: &str| {
        let (_, text) = CASES.iter().find(|c| c.0 == case).expect("case");
        let g = graph(case, text);
        let (ks, others) = emit_kernels(&g).unwrap_or_else(|e| panic!("{e}"));
        assert!(others.is_empty(), "{case}: {others:?}");
        ks.into_iter().find(|k| k.node == node).expect("kernel")
    };
    let k = find("softmax_axes", "s0");
    assert!(k.source.contains("one thread per row"), "{}", k.source);
    let k = find("softmax_axes", "s1");
    assert!(k.source.contains("one block of 256"), "{}", k.source);
    let k = find("softmax_axes", "l_reg");
    assert!(k.vectorized && k.source.contains("register-cached"));
    let k = find("layernorm_last", "ln");
    assert!(k.vectorized && k.outputs.len() == 3, "{}", k.source);
    assert!(k.source.contains("rstd_out[row]"), "{}", k.source);
    let k = find("dropout_runtime_mode", "dt");
    let c = k
        .index_check
        .as_ref()
        .expect("a run-time training mode is checked");
    assert_eq!((c.code, c.op.as_str()), (1, "Dropout"));
    assert!(k.source.contains("atomicMax(gopt_err, 1u)"), "{}", k.source);
    let k = find("layernorm_axes", "ln1");
    assert_eq!((k.inputs.len(), k.outputs.len()), (3, 3));
    assert!(k.source.contains("% 8)"), "scale broadcast: {}", k.source);
}

/// The conformance cases of these ops that pass through wgpu, compiled for CUDA as
/// `gopt test` compiles them (inputs that decide shapes made constants, the bucket of
/// the first data set), planned, and compiled by NVRTC for sm_90.
#[test]
fn conformance_cases_of_these_ops_compile_for_sm90() {
    nvrtc_ready();
    const PREFIXES: &[&str] = &[
        "bitshift",
        "mod_",
        "bitwise_",
        "isinf",
        "selu",
        "thresholdedrelu",
        "shrink",
        "prelu",
        "celu",
        "mish",
        "layer_normalization",
        "rms_normalization",
        "softmax",
        "logsoftmax",
        "lpnormalization",
        "l1normalization",
        "l2normalization",
        "reduce_",
        "dropout",
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = std::fs::read_to_string(root.join("tests/conformance/wgpu.manifest"))
        .expect("the wgpu manifest");
    let mut failed = Vec::new();
    let mut n = 0;
    for case in listed.lines().map(str::trim) {
        let Some(op) = case.strip_prefix("test_") else {
            continue;
        };
        if !PREFIXES.iter().any(|p| op.starts_with(p)) {
            continue;
        }
        n += 1;
        if let Err(e) = compile_case(&root.join("tests/data/conformance").join(case)) {
            failed.push(format!("{case}: {e}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {n} cases do not compile for CUDA:\n{}",
        failed.len(),
        failed.join("\n")
    );
    println!("cuda: {n} conformance cases compiled for sm_90");
    assert!(
        n >= 100,
        "only {n} cases: the manifest or the prefixes changed"
    );
}

fn compile_case(dir: &Path) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let model = gopt::load_model(&dir.join("model.onnx")).map_err(|x| e(&x))?;
    let set = dir.join("test_data_set_0");
    let mut inputs = Vec::new();
    for k in 0.. {
        let p = set.join(format!("input_{k}.pb"));
        if !p.exists() {
            break;
        }
        inputs.push(gopt::tensor_io::read_tensor(&p).map_err(|x| e(&x))?.1);
    }
    let pos = gopt::value_inputs::positions(&model.model.graph);
    let model = gopt::value_inputs::specialize(&model, &inputs, &pos);
    let inputs = gopt::value_inputs::rest(&inputs, &pos);
    let opts = gopt::Options::new().backend(gopt::Backend::Cuda);
    let actual = gopt::ir::interp::check_inputs(&model.model.graph, &inputs).map_err(|x| e(&x))?;
    let bucket = gopt::pipeline::bucket_for(&model.model, &actual, &opts).map_err(|x| e(&x))?;
    let v = gopt::pipeline::specialize(&model.model, &bucket, &opts).map_err(|x| e(&x))?;
    let (p, _) = plan::build(&v.graph).map_err(|x| e(&x))?;
    compile(&module_source(&p.kernels))
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn kernels_match_the_interpreter_on_the_gpu() {
    let dev = gopt::runtime::cuda::Device::open().unwrap_or_else(|e| panic!("{e}"));
    println!("device: {} ({})", dev.name, dev.arch);
    let mut checked = 0;
    for (name, text) in CASES {
        let g = graph(name, text);
        let (kernels, others) = emit_kernels(&g).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(others.is_empty(), "{name}: {others:?}");
        let module = dev
            .compile(name, &module_source(&kernels))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for (ki, k) in kernels.iter().enumerate() {
            let node = g.nodes.iter().find(|n| n.name == k.node).expect("node");
            let values = node_inputs(&g, node, (ki * 31) as u64 + 7);
            let want = reference(node, &values);
            let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
            let outs: Vec<(DType, Vec<usize>)> = k
                .outputs
                .iter()
                .map(|o| {
                    let ty = g.ty(gopt::ir::ValueId(*o)).expect("typed");
                    (
                        ty.dtype,
                        gopt::ir::dim::concrete(&ty.shape).expect("static"),
                    )
                })
                .collect();
            let got = dev
                .run_kernel(&module, k, &params, &outs)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            for (o, got) in k.outputs.iter().zip(&got) {
                let j = node
                    .outputs
                    .iter()
                    .position(|v| v.0 == *o)
                    .expect("a kernel writes its node's outputs");
                close(got, &want[j], KERNEL_TOL).unwrap_or_else(|m| {
                    panic!(
                        "{name}: kernel {} for node `{}` output {j}: {m}\n{}",
                        k.name, k.node, k.source
                    )
                });
            }
            checked += 1;
        }
    }
    println!("cuda: {checked} kernels match the interpreter on the GPU");
}
