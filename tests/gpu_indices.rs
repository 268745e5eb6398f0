//! Indices computed inside the graph (issue 11, item 3): the host checks only indices
//! fed straight from a graph input, so the GPU kernels that read indices (Gather,
//! GatherElements, the losses' targets) check each one themselves and raise an error
//! word the executor reads back with the outputs. An index out of range must fail the
//! run naming the node, as the CPU interpreter does, never give zeros, a clamped row or
//! (on CUDA) an illegal address; in-range ones (negative ones counted from the end)
//! must still give the CPU's answer, on the same executable after a failed run.
//!
//! The wgpu tests run here on lavapipe. The CUDA run needs an NVIDIA GPU
//! (`scripts/gpu-check.sh` runs it there); here the CUDA kernels are checked for the
//! error word and compiled with NVRTC.

mod common;

use gopt::ir::{DType, Graph, Tensor};
use gopt::runtime::wgpu::{WgpuExecutable, WgpuWeights};

fn graph(text: &str) -> gopt::ir::Verified {
    let g = gopt::ir::text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    gopt::ir::verify(g).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn t(dt: DType, shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64s(dt, shape, v).expect("tensor")
}

fn cpu(g: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    gopt::ir::interp::run(g, inputs).map_err(|e| e.to_string())
}

fn wgpu_exe(g: &gopt::ir::Verified) -> WgpuExecutable {
    let (plan, blob) = gopt::codegen::wgsl::plan::build(g).unwrap_or_else(|e| panic!("{e}"));
    let dev = gopt::wgpu::device(None).unwrap_or_else(|e| panic!("{e}"));
    WgpuExecutable::new(dev, plan, &mut WgpuWeights::default(), &blob)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `good` (CPU answer), then each of `bad` (an error naming `node` and `op` on
/// the CPU, and one of `gpu_nodes` and `op` on the GPU), then `good` again, on one
/// executable.
#[track_caller]
fn check(
    run: &mut dyn FnMut(&[Tensor]) -> Result<Vec<Tensor>, String>,
    g: &Graph,
    good: &[Tensor],
    bad: &[&[Tensor]],
    node: &str,
    gpu_nodes: &[&str],
    op: &str,
) {
    let want = cpu(g, good).unwrap_or_else(|e| panic!("CPU on good indices: {e}"));
    let same = |got: Vec<Tensor>, when: &str| {
        let got: Vec<Vec<f64>> = got.iter().map(Tensor::to_f64_vec).collect();
        let want: Vec<Vec<f64>> = want.iter().map(Tensor::to_f64_vec).collect();
        assert_eq!(got, want, "{node}: GPU and CPU differ {when}");
    };
    same(
        run(good).unwrap_or_else(|e| panic!("{node}: GPU on good indices: {e}")),
        "on good indices",
    );
    let named = format!("node `{node}` ({op})");
    for inputs in bad {
        let c = cpu(g, inputs).expect_err("the CPU accepted indices out of range");
        assert!(c.contains(&named), "CPU: {c}");
        let named: Vec<String> = gpu_nodes
            .iter()
            .map(|n| format!("node `{n}` ({op})"))
            .collect();
        match run(inputs) {
            Ok(outs) => panic!(
                "{node}: the GPU ran indices out of range: {:?}",
                outs.iter().map(Tensor::to_f64_vec).collect::<Vec<_>>()
            ),
            Err(e) => assert!(
                named.iter().any(|n| e.contains(n))
                    && (e.contains("out of range") || e.contains("outside")),
                "{e}"
            ),
        }
    }
    // The error word is cleared for the next run.
    same(
        run(good).unwrap_or_else(|e| panic!("{node}: GPU after a failed run: {e}")),
        "after a failed run",
    );
}

#[track_caller]
fn check_wgpu(g: &gopt::ir::Verified, good: &[Tensor], bad: &[&[Tensor]], node: &str, op: &str) {
    let mut exe = wgpu_exe(g);
    check(
        &mut |x| exe.run(x).map_err(|e| e.to_string()),
        g,
        good,
        bad,
        node,
        &[node],
        op,
    );
}

/// An embedding lookup whose token ids are shifted by one inside the graph: the host
/// sees only the unshifted input.
const GATHER_I64: &str = r#"graph "g"(%0 "ids": i64[2,3]) -> (%4) {
  %1 "table": f32[5,2] = const [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]
  %2 "one": i64[1] = const [1]
  %3 "shifted": i64[2,3] = Add "shift"(%0, %2) {}
  %4 "rows": f32[2,3,2] = Gather "embed"(%1, %3) {axis=0}
}"#;

fn ids(v: &[f64]) -> Vec<Tensor> {
    vec![t(DType::I64, &[2, 3], v)]
}

#[test]
fn gather_of_computed_i64_indices_out_of_range_fails_on_wgpu() {
    let g = graph(GATHER_I64);
    check_wgpu(
        &g,
        // 1, 2, 3, 4, -5 (row 0), -1 (row 4).
        &ids(&[0.0, 1.0, 2.0, 3.0, -6.0, -2.0]),
        &[
            // 5: one past the end.
            &ids(&[0.0, 1.0, 2.0, 3.0, 4.0, 0.0]),
            // -6: one before the start after the wrap.
            &ids(&[0.0, -7.0, 2.0, 3.0, 0.0, 0.0]),
            // 2^32 + 1: its low word alone (1) would be in range.
            &ids(&[0.0, 1.0, 4294967296.0, 3.0, 0.0, 0.0]),
        ],
        "embed",
        "Gather",
    );
}

#[test]
fn gather_of_computed_i32_indices_along_axis_1_fails_on_wgpu() {
    let g = graph(
        r#"graph "g"(%0 "x": f32[2,4], %1 "cols": i32[3]) -> (%4) {
  %2 "minus": i32[1] = const [-1]
  %3 "shifted": i32[3] = Add "shift"(%1, %2) {}
  %4 "picked": f32[2,3] = Gather "pick"(%0, %3) {axis=1}
}"#,
    );
    let x = t(
        DType::F32,
        &[2, 4],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
    );
    let cols = |v: &[f64]| vec![x.clone(), t(DType::I32, &[3], v)];
    check_wgpu(
        &g,
        // 3, -4 (column 0), 0.
        &cols(&[4.0, -3.0, 1.0]),
        &[&cols(&[5.0, 0.0, 1.0]), &cols(&[1.0, -4.0, 1.0])],
        "pick",
        "Gather",
    );
}

#[test]
fn gather_elements_of_computed_indices_out_of_range_fails_on_wgpu() {
    let g = graph(
        r#"graph "g"(%0 "x": f32[3,4], %1 "idx": i64[3,2]) -> (%4) {
  %2 "one": i64[1] = const [1]
  %3 "shifted": i64[3,2] = Add "shift"(%1, %2) {}
  %4 "picked": f32[3,2] = GatherElements "pick"(%0, %3) {axis=1}
}"#,
    );
    let x = t(
        DType::F32,
        &[3, 4],
        &(0..12).map(|v| v as f64 * 0.5).collect::<Vec<_>>(),
    );
    let idx = |v: &[f64]| vec![x.clone(), t(DType::I64, &[3, 2], v)];
    check_wgpu(
        &g,
        &idx(&[0.0, 2.0, -5.0, -2.0, 1.0, 0.0]),
        &[
            &idx(&[0.0, 2.0, 3.0, 0.0, 1.0, 0.0]),
            &idx(&[0.0, 2.0, 0.0, -6.0, 1.0, 0.0]),
        ],
        "pick",
        "GatherElements",
    );
}

#[test]
fn loss_target_outside_the_classes_fails_on_wgpu() {
    // Targets shifted by one inside the graph: 4 is ignore_index (weighs 0), 3 and -1
    // are outside the 3 classes, an error as on the CPU.
    let g = graph(
        r#"graph "g"(%0 "logp": f32[2,3], %1 "t": i64[2]) -> (%4) {
  %2 "one": i64[1] = const [1]
  %3 "target": i64[2] = Add "shift"(%1, %2) {}
  %4 "loss": f32[] = NegativeLogLikelihoodLoss "nll"(%0, %3) {reduction="sum", ignore_index=4}
}"#,
    );
    let x = t(DType::F32, &[2, 3], &[-1.0, -2.0, -0.5, -0.25, -3.0, -1.5]);
    let tg = |v: &[f64]| vec![x.clone(), t(DType::I64, &[2], v)];
    check_wgpu(
        &g,
        // Class 2, and 4: ignored.
        &tg(&[1.0, 3.0]),
        &[&tg(&[2.0, 0.0]), &tg(&[-2.0, 0.0])],
        "nll",
        "NegativeLogLikelihoodLoss",
    );
}

#[test]
fn the_earliest_failing_node_is_named_on_wgpu() {
    // Both gathers read the same bad index; the second one may only have seen what the
    // first one made of it, so the first is named.
    let g = graph(
        r#"graph "g"(%0 "ids": i64[2]) -> (%5, %6) {
  %1 "table": f32[3,2] = const [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %2 "one": i64[1] = const [1]
  %3 "shifted": i64[2] = Add "shift"(%0, %2) {}
  %4 "again": i64[2] = Add "shift2"(%3, %2) {}
  %5 "a": f32[2,2] = Gather "first"(%1, %3) {axis=0}
  %6 "b": f32[2,2] = Gather "second"(%1, %4) {axis=0}
}"#,
    );
    let mut exe = wgpu_exe(&g);
    let e = exe
        .run(&[t(DType::I64, &[2], &[0.0, 5.0])])
        .expect_err("indices out of range ran")
        .to_string();
    assert!(e.contains("node `first` (Gather)"), "{e}");
    // Only the second out of range: it is the one named.
    let e = exe
        .run(&[t(DType::I64, &[2], &[0.0, 1.0])])
        .expect_err("indices out of range ran")
        .to_string();
    assert!(e.contains("node `second` (Gather)"), "{e}");
}

/// The whole facade path (`gopt::compile`, the optimizer, `Compiled::run`): the
/// host-side check does not see computed indices, the kernel does.
#[test]
fn compiled_wgpu_run_names_the_node_of_a_computed_index() {
    use gopt::pipeline::Backend;
    let dev = gopt::wgpu::device(None).unwrap_or_else(|e| panic!("{e}"));
    let imported = gopt::Imported {
        model: gopt::Model {
            graph: gopt::ir::text::parse(GATHER_I64).expect("parses"),
            meta: Default::default(),
        },
        opsets: vec![(String::new(), 17)],
        ir_version: 8,
        producer: "gpu_indices".into(),
        source: None,
    };
    let opts = gopt::pipeline::Options::new()
        .backend(Backend::Wgpu)
        .wgsl_f16(dev.adapter.f16);
    let mut c = gopt::compile(&imported, &opts).unwrap_or_else(|e| panic!("{e}"));
    let g = graph(GATHER_I64);
    check(
        &mut |x| c.run(x).map_err(|e| e.to_string()),
        &g,
        &ids(&[0.0, 1.0, 2.0, 3.0, -6.0, -2.0]),
        &[&ids(&[0.0, 1.0, 2.0, 3.0, 4.0, 0.0])],
        "embed",
        // The optimizer names the nodes it rebuilds after their output (`rows`).
        &["embed", "rows"],
        "Gather",
    );
}

/// The CUDA Gather kernel takes the error word, raises the node's code and compiles
/// with NVRTC for sm_90 (the run itself is `gather_out_of_range_fails_on_cuda`).
#[test]
fn cuda_gather_kernel_checks_its_indices_and_compiles() {
    common::nvrtc_ready();
    let g = graph(GATHER_I64);
    let (plan, _) = gopt::codegen::cuda::plan::build(&g).unwrap_or_else(|e| panic!("{e}"));
    let k = plan
        .kernels
        .iter()
        .find(|k| k.node == "embed")
        .expect("a kernel for the gather");
    let c = k
        .index_check
        .as_ref()
        .expect("the gather checks its indices");
    assert_eq!(
        (c.code, c.op.as_str()),
        (1, "Gather"),
        "the last node's code"
    );
    assert!(
        k.source.contains("unsigned int* __restrict__ gopt_err")
            && k.source.contains("atomicMax(gopt_err, 1u)"),
        "{}",
        k.source
    );
    assert!(plan
        .kernels
        .iter()
        .filter(|k| k.node != "embed")
        .all(|k| k.index_check.is_none()));
    common::compile(&gopt::codegen::cuda::module_source(&plan.kernels))
        .unwrap_or_else(|e| panic!("NVRTC: {e}\n{}", k.source));
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn gather_out_of_range_fails_on_cuda() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    for text in [GATHER_I64] {
        let g = graph(text);
        // With the CUDA graph (the memset that clears the word is captured) and step
        // by step.
        for use_graph in [true, false] {
            let (plan, blob) =
                gopt::codegen::cuda::plan::build(&g).unwrap_or_else(|e| panic!("{e}"));
            let w = gopt::runtime::cuda::Weights::upload(&dev, &blob).expect("weights");
            let mut exe = gopt::runtime::cuda::Executable::new(&dev, plan, w, use_graph)
                .unwrap_or_else(|e| panic!("{e}"));
            check(
                &mut |x| exe.run(x).map_err(|e| e.to_string()),
                &g,
                &ids(&[0.0, 1.0, 2.0, 3.0, -6.0, -2.0]),
                &[
                    &ids(&[0.0, 1.0, 2.0, 3.0, 4.0, 0.0]),
                    &ids(&[0.0, -7.0, 2.0, 3.0, 0.0, 0.0]),
                    &ids(&[0.0, 1.0, 4294967296.0, 3.0, 0.0, 0.0]),
                ],
                "embed",
                &["embed"],
                "Gather",
            );
        }
    }
}
