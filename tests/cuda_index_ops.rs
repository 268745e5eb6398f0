//! The index family on CUDA (ArgMax, ArgMin, Hardmax, Trilu, CumSum, CumProd,
//! GatherElements, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) without a GPU:
//! each kernel, over the dtypes it takes, compiles with NVRTC for sm_90 (the H200);
//! the ones that read indices computed on the device (GatherElements, the losses'
//! targets, a CumSum axis that is not a constant) take the run's error word and raise
//! their node's code; and every conformance case of these ops lowers to kernels that
//! compile. NVRTC comes from the pinned wheels (scripts/test.sh sets `LD_LIBRARY_PATH`
//! and `GOPT_CUDA_INCLUDE`); without it these tests fail, they never skip.
//!
//! On a GPU (`#[ignore]`d here: scripts/gpu-check.sh runs them with `--ignored`) each
//! kernel must match the CPU interpreter on seeded inputs at awkward sizes (integers
//! and indices exactly, f32 within rtol 1e-5 — 1e-4 for the losses, whose exp, log and
//! sums differ from the CPU's in the last bits — and f16/bf16 within 1e-2), and an
//! index out of range must fail the run naming the node, never read outside the data.
//!
//! Slices that are row crops (rows of contiguous input runs, such as logits cut back
//! from a padded GEMM) get the row kernel of `codegen/src/cuda/movement.rs`: chosen
//! and compiled here for every dtype size, and on a GPU equal to the interpreter's
//! result element for element at awkward rows and columns (odd row lengths, so each
//! row starts at another offset within 16 bytes).

mod common;

use common::{close, compile, nvrtc_ready, KERNEL_TOL};

/// The f32/f64 tolerance of a loss: its sum or mean over the batch adds in another
/// order on the GPU than on the CPU.
const LOSS_TOL: (f64, f64) = (1e-4, 1e-5);
use gopt::codegen::cuda::{emit_kernels, module_source, Kernel};
use gopt::ir::{DType, Graph, Tensor};
use std::collections::BTreeMap;
use std::path::Path;

/// A one-node graph, and the values its inputs take instead of random ones (input
/// index, values), for a NaN, a negative index or an axis that must be in range.
struct Case {
    what: &'static str,
    text: &'static str,
    fixed: &'static [(usize, &'static [f64])],
}

const fn case(what: &'static str, text: &'static str) -> Case {
    Case {
        what,
        text,
        fixed: &[],
    }
}

const NAN: f64 = f64::NAN;

const CASES: &[Case] = &[
    Case {
        what: "ArgMax f32 with NaN, middle axis",
        text: r#"graph "g"(%0 "x": f32[3,50,7]) -> (%1) {
  %1 "y": i64[3,1,7] = ArgMax "arg"(%0) {axis=1}
}"#,
        fixed: &[],
    },
    case(
        "ArgMin f16, last index, no keepdims",
        r#"graph "g"(%0 "x": f16[4,33]) -> (%1) {
  %1 "y": i64[4] = ArgMin "arg"(%0) {axis=-1, keepdims=0, select_last_index=1}
}"#,
    ),
    case(
        "ArgMax bf16 axis 0",
        r#"graph "g"(%0 "x": bf16[2,3,5]) -> (%1) {
  %1 "y": i64[1,3,5] = ArgMax "arg"(%0) {}
}"#,
    ),
    case(
        "ArgMax i32 ties to the last",
        r#"graph "g"(%0 "x": i32[6,9]) -> (%1) {
  %1 "y": i64[6,1] = ArgMax "arg"(%0) {axis=1, select_last_index=1}
}"#,
    ),
    case(
        "ArgMin u8",
        r#"graph "g"(%0 "x": u8[5,8]) -> (%1) {
  %1 "y": i64[1,8] = ArgMin "arg"(%0) {axis=0}
}"#,
    ),
    case(
        "ArgMax i64",
        r#"graph "g"(%0 "x": i64[7,4]) -> (%1) {
  %1 "y": i64[7] = ArgMax "arg"(%0) {axis=1, keepdims=0}
}"#,
    ),
    Case {
        what: "ArgMin f64 with NaN",
        text: r#"graph "g"(%0 "x": f64[3,4]) -> (%1) {
  %1 "y": i64[3,1] = ArgMin "arg"(%0) {axis=1}
}"#,
        fixed: &[(
            0,
            &[1.0, NAN, 0.5, NAN, 2.0, 2.0, -1.0, -1.0, NAN, NAN, 0.0, 3.0],
        )],
    },
    case(
        "Hardmax f32 axis 1",
        r#"graph "g"(%0 "x": f32[3,4,5]) -> (%1) {
  %1 "y": f32[3,4,5] = Hardmax "hm"(%0) {axis=1}
}"#,
    ),
    case(
        "Hardmax f16 last axis",
        r#"graph "g"(%0 "x": f16[6,10]) -> (%1) {
  %1 "y": f16[6,10] = Hardmax "hm"(%0) {}
}"#,
    ),
    case(
        "Hardmax bf16 axis 0",
        r#"graph "g"(%0 "x": bf16[3,7]) -> (%1) {
  %1 "y": bf16[3,7] = Hardmax "hm"(%0) {axis=0}
}"#,
    ),
    case(
        "Trilu f32 upper",
        r#"graph "g"(%0 "x": f32[2,5,7]) -> (%1) {
  %1 "y": f32[2,5,7] = Trilu "tri"(%0) {}
}"#,
    ),
    case(
        "Trilu f16 lower, constant k",
        r#"graph "g"(%0 "x": f16[3,6,4]) -> (%2) {
  %1 "k": i64[] = const [2]
  %2 "y": f16[3,6,4] = Trilu "tri"(%0, %1) {upper=0}
}"#,
    ),
    Case {
        what: "Trilu i64 upper, k read on the device",
        text: r#"graph "g"(%0 "x": i64[4,5], %1 "k": i64[]) -> (%2) {
  %2 "y": i64[4,5] = Trilu "tri"(%0, %1) {}
}"#,
        fixed: &[(1, &[-2.0])],
    },
    case(
        "Trilu u8 lower",
        r#"graph "g"(%0 "x": u8[3,3]) -> (%2) {
  %1 "k": i64[] = const [-1]
  %2 "y": u8[3,3] = Trilu "tri"(%0, %1) {upper=0}
}"#,
    ),
    case(
        "Trilu bf16 far diagonal",
        r#"graph "g"(%0 "x": bf16[2,3,3]) -> (%2) {
  %1 "k": i64[] = const [-9223372036854775808]
  %2 "y": bf16[2,3,3] = Trilu "tri"(%0, %1) {}
}"#,
    ),
    case(
        "CumSum f32 last axis",
        r#"graph "g"(%0 "x": f32[4,50]) -> (%2) {
  %1 "a": i64[] = const [1]
  %2 "y": f32[4,50] = CumSum "cs"(%0, %1) {}
}"#,
    ),
    case(
        "CumSum f16 exclusive reversed, middle axis",
        r#"graph "g"(%0 "x": f16[3,5,7]) -> (%2) {
  %1 "a": i32[] = const [-2]
  %2 "y": f16[3,5,7] = CumSum "cs"(%0, %1) {exclusive=1, reverse=1}
}"#,
    ),
    case(
        "CumProd f32 reversed axis 0",
        r#"graph "g"(%0 "x": f32[6,3]) -> (%2) {
  %1 "a": i64[] = const [0]
  %2 "y": f32[6,3] = CumProd "cp"(%0, %1) {reverse=1}
}"#,
    ),
    Case {
        what: "CumSum i32 exclusive, axis read on the device",
        text: r#"graph "g"(%0 "x": i32[5,9], %1 "a": i32[]) -> (%2) {
  %2 "y": i32[5,9] = CumSum "cs"(%0, %1) {exclusive=1}
}"#,
        fixed: &[(1, &[-1.0])],
    },
    case(
        "CumProd i64",
        r#"graph "g"(%0 "x": i64[4,6]) -> (%2) {
  %1 "a": i64[] = const [1]
  %2 "y": i64[4,6] = CumProd "cp"(%0, %1) {}
}"#,
    ),
    case(
        "CumSum u8 wrapping",
        r#"graph "g"(%0 "x": u8[3,300]) -> (%2) {
  %1 "a": i64[] = const [1]
  %2 "y": u8[3,300] = CumSum "cs"(%0, %1) {}
}"#,
    ),
    case(
        "CumSum i8 exclusive reversed",
        r#"graph "g"(%0 "x": i8[2,200]) -> (%2) {
  %1 "a": i64[] = const [-1]
  %2 "y": i8[2,200] = CumSum "cs"(%0, %1) {exclusive=1, reverse=1}
}"#,
    ),
    case(
        "CumSum f64",
        r#"graph "g"(%0 "x": f64[783]) -> (%2) {
  %1 "a": i64[] = const [0]
  %2 "y": f64[783] = CumSum "cs"(%0, %1) {}
}"#,
    ),
    case(
        "CumProd bf16",
        r#"graph "g"(%0 "x": bf16[3,4]) -> (%2) {
  %1 "a": i64[] = const [1]
  %2 "y": bf16[3,4] = CumProd "cp"(%0, %1) {exclusive=1}
}"#,
    ),
    case(
        "GatherElements f32 axis 1",
        r#"graph "g"(%0 "x": f32[3,4], %1 "i": i64[3,2]) -> (%2) {
  %2 "y": f32[3,2] = GatherElements "ge"(%0, %1) {axis=1}
}"#,
    ),
    case(
        "GatherElements f16 i32 indices axis 0",
        r#"graph "g"(%0 "x": f16[5,3,4], %1 "i": i32[2,3,4]) -> (%2) {
  %2 "y": f16[2,3,4] = GatherElements "ge"(%0, %1) {axis=0}
}"#,
    ),
    case(
        "GatherElements i64 last axis",
        r#"graph "g"(%0 "x": i64[4,6], %1 "i": i64[4,6]) -> (%2) {
  %2 "y": i64[4,6] = GatherElements "ge"(%0, %1) {axis=-1}
}"#,
    ),
    Case {
        what: "GatherElements bf16 negative indices",
        text: r#"graph "g"(%0 "x": bf16[2,7,3], %1 "i": i64[1,2,3]) -> (%2) {
  %2 "y": bf16[1,2,3] = GatherElements "ge"(%0, %1) {axis=1}
}"#,
        fixed: &[(1, &[-1.0, -7.0, 6.0, 0.0, -3.0, 2.0])],
    },
    case(
        "GatherElements u8",
        r#"graph "g"(%0 "x": u8[6,5], %1 "i": i64[4,5]) -> (%2) {
  %2 "y": u8[4,5] = GatherElements "ge"(%0, %1) {}
}"#,
    ),
    case(
        "NegativeLogLikelihoodLoss none, 600 targets",
        r#"graph "g"(%0 "x": f32[600,4], %1 "t": i64[600]) -> (%2) {
  %2 "y": f32[600] = NegativeLogLikelihoodLoss "nll"(%0, %1) {reduction="none"}
}"#,
    ),
    case(
        "NegativeLogLikelihoodLoss mean, weights, ignore_index",
        r#"graph "g"(%0 "x": f32[3,5,2], %1 "t": i64[3,2]) -> (%3) {
  %2 "w": f32[5] = const [0.5, 1.0, 2.0, 1.5, 0.25]
  %3 "y": f32[] = NegativeLogLikelihoodLoss "nll"(%0, %1, %2) {ignore_index=1}
}"#,
    ),
    case(
        "NegativeLogLikelihoodLoss f16 sum, i32 targets",
        r#"graph "g"(%0 "x": f16[6,4,3], %1 "t": i32[6,3]) -> (%2) {
  %2 "y": f16[] = NegativeLogLikelihoodLoss "nll"(%0, %1) {reduction="sum"}
}"#,
    ),
    case(
        "SoftmaxCrossEntropyLoss mean with log-probabilities",
        r#"graph "g"(%0 "x": f32[3,5], %1 "t": i64[3]) -> (%2, %3) {
  %2 "y": f32[], %3 "logp": f32[3,5] = SoftmaxCrossEntropyLoss "sce"(%0, %1) {}
}"#,
    ),
    case(
        "SoftmaxCrossEntropyLoss bf16 none, weights, negative ignore_index",
        r#"graph "g"(%0 "x": bf16[4,6,2], %1 "t": i64[4,2]) -> (%3, %4) {
  %2 "w": bf16[6] = const [1.0, 0.5, 2.0, 1.0, 0.25, 1.5]
  %3 "y": bf16[4,2], %4 "logp": bf16[4,6,2] = SoftmaxCrossEntropyLoss "sce"(%0, %1, %2) {ignore_index=-1, reduction="none"}
}"#,
    ),
    case(
        "SoftmaxCrossEntropyLoss sum, 300 i32 targets",
        r#"graph "g"(%0 "x": f32[300,7], %1 "t": i32[300]) -> (%2) {
  %2 "y": f32[] = SoftmaxCrossEntropyLoss "sce"(%0, %1) {reduction="sum"}
}"#,
    ),
];

fn graph(text: &str) -> gopt::ir::Verified {
    let g = gopt::ir::text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    gopt::ir::verify(g).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The one kernel of a one-node graph (it must not be left to another path).
fn kernel(c: &Case, g: &gopt::ir::Verified) -> Kernel {
    let (mut kernels, others) =
        emit_kernels(g).unwrap_or_else(|e| panic!("{}: {e}\n{}", c.what, c.text));
    assert!(others.is_empty(), "{}: no CUDA kernel: {others:?}", c.what);
    assert_eq!(kernels.len(), 1, "{}", c.what);
    kernels.remove(0)
}

/// Whether a kernel of `g`'s only node must check indices computed on the device.
fn reads_device_indices(g: &Graph) -> bool {
    let n = &g.nodes[0];
    match n.op.name() {
        "GatherElements" | "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => true,
        "CumSum" | "CumProd" => n.inputs[1].is_some_and(|a| g.constant(a).is_none()),
        _ => false,
    }
}

#[test]
fn every_index_kernel_compiles_for_sm90() {
    nvrtc_ready();
    let mut kernels = Vec::new();
    for (i, c) in CASES.iter().enumerate() {
        let g = graph(c.text);
        let mut k = kernel(c, &g);
        // One module for all: each entry point renamed apart.
        let unique = format!("{}_{i}", k.name);
        k.source = k.source.replace(&k.name, &unique);
        k.name = unique;
        kernels.push(k);
    }
    let src = module_source(&kernels);
    compile(&src).unwrap_or_else(|e| panic!("NVRTC rejected the module:\n{e}\n{src}"));
    println!(
        "cuda: {} index-family kernels compiled for sm_90",
        kernels.len()
    );
}

#[test]
fn kernels_that_read_device_indices_check_them() {
    for c in CASES {
        let g = graph(c.text);
        let k = kernel(c, &g);
        let word = "unsigned int* __restrict__ gopt_err";
        if reads_device_indices(&g) {
            let check = k
                .index_check
                .as_ref()
                .unwrap_or_else(|| panic!("{}: no index check\n{}", c.what, k.source));
            // One node: the graph's last, code 1.
            assert_eq!(check.code, 1, "{}", c.what);
            assert_eq!(check.op, g.nodes[0].op.name(), "{}", c.what);
            assert!(
                check.what.contains("out of range") || check.what.contains("outside"),
                "{}: {}",
                c.what,
                check.what
            );
            assert!(
                k.source.contains(word) && k.source.contains("atomicMax(gopt_err, 1u)"),
                "{}: the error word is not the last parameter or is never raised\n{}",
                c.what,
                k.source
            );
        } else {
            assert!(k.index_check.is_none(), "{}", c.what);
            assert!(!k.source.contains(word), "{}\n{}", c.what, k.source);
        }
    }
}

#[test]
fn unsupported_modes_are_refused_by_name() {
    // Hardmax takes floats only and GatherElements integer indices, as on the CPU:
    // refused before any source is written, by the verifier (naming the node) or else
    // by the emitter (naming the reason and the backend).
    for (text, what) in [
        (
            r#"graph "g"(%0 "x": i32[3,4]) -> (%1) {
  %1 "y": i32[3,4] = Hardmax "hm"(%0) {}
}"#,
            "i32 data",
        ),
        (
            r#"graph "g"(%0 "x": f32[3,4], %1 "i": f32[3,4]) -> (%2) {
  %2 "y": f32[3,4] = GatherElements "ge"(%0, %1) {}
}"#,
            "f32 indices",
        ),
    ] {
        let g = gopt::ir::text::parse(text).expect("parses");
        let name = g.nodes[0].name.clone();
        match gopt::ir::verify(g) {
            Err(e) => assert!(e.to_string().contains(&name), "{what}: {e}"),
            Ok(v) => {
                let (kernels, others) = emit_kernels(&v).unwrap_or_else(|e| panic!("{e}"));
                assert!(kernels.is_empty(), "{}", kernels[0].source);
                assert!(
                    others
                        .iter()
                        .any(|(_, why)| why.contains(what) && why.contains("CUDA")),
                    "{others:?}"
                );
            }
        }
    }
}

/// The conformance cases of the index family (tests/data/conformance), each lowered
/// to CUDA kernels (every node of these ops gets one), all compiled in one module.
#[test]
fn every_conformance_case_of_the_index_ops_compiles_for_sm90() {
    nvrtc_ready();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/conformance");
    let prefixes = [
        "test_argmax",
        "test_argmin",
        "test_hardmax",
        "test_tril",
        "test_triu",
        "test_cumsum",
        "test_cumprod",
        "test_gather_elements",
        "test_nllloss",
        "test_sce",
    ];
    let mut cases: Vec<String> = std::fs::read_dir(&data)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/test.sh)", data.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| prefixes.iter().any(|p| n.starts_with(p)))
        .collect();
    cases.sort();
    assert!(cases.len() >= 150, "only {} cases found", cases.len());
    let family = [
        "ArgMax",
        "ArgMin",
        "Hardmax",
        "Trilu",
        "CumSum",
        "CumProd",
        "GatherElements",
        "NegativeLogLikelihoodLoss",
        "SoftmaxCrossEntropyLoss",
    ];
    let mut kernels: Vec<Kernel> = Vec::new();
    let mut bodies = std::collections::HashSet::new();
    let mut ours = 0;
    for (i, case) in cases.iter().enumerate() {
        let path = data.join(case).join("model.onnx");
        let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{case}: {e}"));
        let opts = gopt::pipeline::Options::default();
        let v = gopt::pipeline::specialize(&model.model, &BTreeMap::new(), &opts)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let (ks, others) = emit_kernels(&v.graph).unwrap_or_else(|e| panic!("{case}: {e}"));
        for n in &v.graph.nodes {
            if family.contains(&n.op.name()) {
                ours += 1;
                assert!(
                    !others.iter().any(|(name, _)| *name == n.name),
                    "{case}: node `{}` ({}) has no CUDA kernel: {others:?}",
                    n.name,
                    n.op.name()
                );
            }
        }
        // Kernels that differ only in their names compile once (as the runtime does).
        for mut k in ks {
            if bodies.insert(k.source.replace(&k.name, "\u{1}")) {
                let unique = format!("{}_c{i}", k.name);
                k.source = k.source.replace(&k.name, &unique);
                k.name = unique;
                kernels.push(k);
            }
        }
    }
    let src = module_source(&kernels);
    compile(&src).unwrap_or_else(|e| panic!("NVRTC rejected the module:\n{e}"));
    println!(
        "cuda: {} conformance cases, {ours} index-family nodes, {} distinct kernels compiled for sm_90",
        cases.len(),
        kernels.len()
    );
}

/// The inputs of `c`'s node: its fixed values, the graph's constants, seeded random
/// tensors otherwise (NaN in every 7th float of an Arg case's data).
fn inputs(c: &Case, g: &Graph, seed: u64) -> BTreeMap<u32, Tensor> {
    let node = &g.nodes[0];
    let mut values = common::node_inputs(g, node, seed);
    for (k, v) in node.inputs.iter().enumerate() {
        let Some(v) = v else { continue };
        let ty = g.ty(*v).expect("typed");
        let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
        if let Some((_, fixed)) = c.fixed.iter().find(|(i, _)| *i == k) {
            let t = Tensor::from_f64s(ty.dtype, &shape, fixed).expect("fixed input");
            values.insert(v.0, t);
        } else if k == 0 && c.what.starts_with("ArgMax f32") && ty.dtype.is_float() {
            let mut x = values[&v.0].to_f64_vec();
            x.iter_mut().step_by(7).for_each(|e| *e = NAN);
            values.insert(
                v.0,
                Tensor::from_f64s(ty.dtype, &shape, &x).expect("tensor"),
            );
        }
    }
    values
}

fn outputs(g: &Graph, k: &Kernel) -> Vec<(DType, Vec<usize>)> {
    k.outputs
        .iter()
        .map(|o| {
            let ty = g.ty(gopt::ir::ValueId(*o)).expect("typed");
            (
                ty.dtype,
                gopt::ir::dim::concrete(&ty.shape).expect("static"),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn index_kernels_match_the_interpreter_on_the_gpu() {
    let dev = gopt::runtime::cuda::Device::open().unwrap_or_else(|e| panic!("{e}"));
    println!("device: {} ({})", dev.name, dev.arch);
    for (i, c) in CASES.iter().enumerate() {
        let g = graph(c.text);
        let node = &g.nodes[0];
        let k = kernel(c, &g);
        let module = dev
            .compile(c.what, &module_source(std::slice::from_ref(&k)))
            .unwrap_or_else(|e| panic!("{}: {e}", c.what));
        let values = inputs(c, &g, i as u64 * 13 + 5);
        let want = common::reference(node, &values);
        let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
        let got = dev
            .run_kernel(&module, &k, &params, &outputs(&g, &k))
            .unwrap_or_else(|e| panic!("{}: {e}", c.what));
        let loss = c.what.contains("Loss");
        for (o, got) in k.outputs.iter().zip(&got) {
            let j = node
                .outputs
                .iter()
                .position(|v| v.0 == *o)
                .expect("a kernel writes its node's outputs");
            close(got, &want[j], if loss { LOSS_TOL } else { KERNEL_TOL })
                .unwrap_or_else(|m| panic!("{}: output {j}: {m}\n{}", c.what, k.source));
        }
    }
    println!(
        "cuda: {} index-family kernels match the interpreter",
        CASES.len()
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn indices_out_of_range_fail_the_run_on_the_gpu() {
    let dev = gopt::runtime::cuda::Device::open().unwrap_or_else(|e| panic!("{e}"));
    // (graph, input index, values out of range, values in range after them).
    let bad: &[(&str, usize, &[f64], &[f64])] = &[
        (
            r#"graph "g"(%0 "x": f32[3,4], %1 "i": i64[3,2]) -> (%2) {
  %2 "y": f32[3,2] = GatherElements "ge"(%0, %1) {axis=1}
}"#,
            1,
            &[0.0, 4.0, 1.0, -5.0, 2.0, 3.0],
            &[0.0, -4.0, 1.0, 3.0, 2.0, -1.0],
        ),
        (
            r#"graph "g"(%0 "x": f32[4,3], %1 "t": i32[4]) -> (%2) {
  %2 "y": f32[] = NegativeLogLikelihoodLoss "nll"(%0, %1) {ignore_index=7, reduction="sum"}
}"#,
            1,
            &[0.0, 3.0, 7.0, 1.0],
            &[0.0, 2.0, 7.0, 1.0],
        ),
        (
            r#"graph "g"(%0 "x": f32[2,5], %1 "t": i64[2]) -> (%2) {
  %2 "y": f32[2] = SoftmaxCrossEntropyLoss "sce"(%0, %1) {reduction="none"}
}"#,
            1,
            &[-1.0, 4.0],
            &[0.0, 4.0],
        ),
        (
            r#"graph "g"(%0 "x": f32[3,4], %1 "a": i64[]) -> (%2) {
  %2 "y": f32[3,4] = CumSum "cs"(%0, %1) {}
}"#,
            1,
            &[2.0],
            &[-2.0],
        ),
    ];
    for (text, at, out_of_range, in_range) in bad {
        let g = graph(text);
        let node = &g.nodes[0];
        let c = case("out of range", "");
        let k = kernel(&c, &g);
        let module = dev
            .compile(&node.name, &module_source(std::slice::from_ref(&k)))
            .unwrap_or_else(|e| panic!("{e}"));
        let run = |vals: &[f64]| {
            let mut values = common::node_inputs(&g, node, 3);
            let v = node.inputs[*at].expect("input");
            let ty = g.ty(v).expect("typed");
            let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
            values.insert(
                v.0,
                Tensor::from_f64s(ty.dtype, &shape, vals).expect("tensor"),
            );
            let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
            (
                dev.run_kernel(&module, &k, &params, &outputs(&g, &k)),
                values,
            )
        };
        let (res, _) = run(out_of_range);
        let e = res
            .map(|o| o.iter().map(Tensor::to_f64_vec).collect::<Vec<_>>())
            .expect_err("indices out of range ran")
            .to_string();
        let named = format!("node `{}` ({})", node.name, node.op.name());
        assert!(
            e.contains(&named) && (e.contains("out of range") || e.contains("outside")),
            "{e}"
        );
        // The same kernel on good indices afterwards: the CPU's answer.
        let (res, values) = run(in_range);
        let got = res.unwrap_or_else(|e| panic!("{}: {e}", node.name));
        let want = common::reference(node, &values);
        close(&got[0], &want[0], LOSS_TOL).unwrap_or_else(|m| panic!("{}: {m}", node.name));
    }
}

/// A one-Slice graph `{dt}[{xs}] -> {dt}[{ys}]` with constant bounds.
fn slice_graph(dt: &str, xs: &str, ys: &str, [starts, ends, axes, steps]: [&str; 4]) -> String {
    let k = starts.split(',').count();
    format!(
        r#"graph "g"(%0 "x": {dt}[{xs}]) -> (%5) {{
  %1 "s": i64[{k}] = const [{starts}]
  %2 "e": i64[{k}] = const [{ends}]
  %3 "a": i64[{k}] = const [{axes}]
  %4 "p": i64[{k}] = const [{steps}]
  %5 "y": {dt}[{ys}] = Slice "slice"(%0, %1, %2, %3, %4)
}}"#
    )
}

/// Row crops (name, graph): the last axis cut at awkward sizes and offsets, rows 3, 50
/// and 783, GPT-2's padded vocabulary, in f32, bf16, i64 and u8; then crops of other
/// shapes (a 3-d tensor, the last token of each sequence, every other row, a middle
/// axis with the whole axes after it).
fn row_crops() -> Vec<(String, String)> {
    let mut cases = Vec::new();
    for dt in ["f32", "bf16", "i64", "u8"] {
        for (rows, cols, out, start) in [
            (3, 1000, 997, 0),
            (50, 1000, 990, 5),
            (783, 1000, 997, 3),
            (3, 50304, 50257, 0),
            (5, 50304, 50257, 5),
        ] {
            let end = (start + out).to_string();
            cases.push((
                format!("{dt} [{rows},{cols}] -> [{rows},{out}] from column {start}"),
                slice_graph(
                    dt,
                    &format!("{rows},{cols}"),
                    &format!("{rows},{out}"),
                    [&start.to_string(), &end, "1", "1"],
                ),
            ));
        }
    }
    for (what, dt, xs, ys, bounds) in [
        ("3-d", "f32", "2,3,7", "2,3,5", ["1", "6", "-1", "1"]),
        (
            "last token",
            "bf16",
            "4,9,16",
            "4,1,16",
            ["8", "9", "1", "1"],
        ),
        (
            "every other row",
            "i64",
            "8,10",
            "4,6",
            ["1,2", "8,8", "0,1", "2,1"],
        ),
        ("middle axis", "f32", "2,7,5", "2,3,5", ["2", "5", "1", "1"]),
        (
            "f16 odd rows",
            "f16",
            "50,33",
            "50,31",
            ["1", "32", "1", "1"],
        ),
    ] {
        cases.push((format!("{dt} {what}"), slice_graph(dt, xs, ys, bounds)));
    }
    cases
}

/// The one kernel of a row-crop case, checked to be the row kernel.
fn crop_kernel(what: &str, text: &str) -> (gopt::ir::Verified, Kernel) {
    let g = graph(text);
    let c = case("row crop", "");
    let k = kernel(&c, &g);
    assert!(
        k.source.contains("as a row crop") && k.vectorized,
        "{what}: not the row kernel\n{}",
        k.source
    );
    (g, k)
}

#[test]
fn row_crops_get_the_row_kernel_and_compile_for_sm90() {
    nvrtc_ready();
    let mut kernels = Vec::new();
    for (i, (what, text)) in row_crops().iter().enumerate() {
        let (_, mut k) = crop_kernel(what, text);
        let unique = format!("{}_{i}", k.name);
        k.source = k.source.replace(&k.name, &unique);
        k.name = unique;
        kernels.push(k);
    }
    // A slice that is not a row crop keeps the one-thread-per-element kernel.
    let text = slice_graph("f32", "2,7,5", "2,3,5", ["1", "7", "1", "2"]);
    let g = graph(&text);
    let mut k = kernel(&case("strided middle axis", ""), &g);
    assert!(
        k.source.contains("one thread per output element") && !k.vectorized,
        "{}",
        k.source
    );
    k.source = k.source.replace(&k.name, "generic_slice");
    kernels.push(k);
    let src = module_source(&kernels);
    compile(&src).unwrap_or_else(|e| panic!("NVRTC rejected the module:\n{e}\n{src}"));
    println!(
        "cuda: {} row-crop kernels compiled for sm_90",
        kernels.len() - 1
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn row_crops_match_the_interpreter_exactly_on_the_gpu() {
    let dev = gopt::runtime::cuda::Device::open().unwrap_or_else(|e| panic!("{e}"));
    let cases = row_crops();
    for (i, (what, text)) in cases.iter().enumerate() {
        let (g, k) = crop_kernel(what, text);
        let node = &g.nodes[0];
        let module = dev
            .compile(what, &module_source(std::slice::from_ref(&k)))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        // Each element its own position where the dtype holds it (a misplaced copy
        // shows where from), seeded random 16-bit floats otherwise.
        let mut values = common::node_inputs(&g, node, i as u64 * 7 + 1);
        let x = node.inputs[0].expect("data");
        let ty = g.ty(x).expect("typed");
        if matches!(ty.dtype, DType::F32 | DType::I64 | DType::U8) {
            let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
            let wrap = if ty.dtype == DType::U8 {
                251
            } else {
                usize::MAX
            };
            let iota: Vec<f64> = (0..shape.iter().product::<usize>())
                .map(|j| (j % wrap) as f64)
                .collect();
            let t = Tensor::from_f64s(ty.dtype, &shape, &iota).expect("tensor");
            values.insert(x.0, t);
        }
        let want = common::reference(node, &values);
        let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
        let got = dev
            .run_kernel(&module, &k, &params, &outputs(&g, &k))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        if got[0] != want[0] {
            let (a, b) = (got[0].to_f64_vec(), want[0].to_f64_vec());
            let at = (0..b.len()).find(|&j| a.get(j) != Some(&b[j]));
            panic!("{what}: first difference at element {at:?}\n{}", k.source);
        }
    }
    println!(
        "cuda: {} row crops equal the interpreter's slices",
        cases.len()
    );
}
