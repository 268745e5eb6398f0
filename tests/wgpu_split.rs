//! Weights above the WGSL storage binding limit (issue 15): a matrix product or a
//! gather whose constant operand is larger than one binding is split into pieces that
//! fit (gopt_passes::split_weights), on lavapipe, and the answer is the interpreter's.
//! One test lowers the limit so small weights exercise every kind of cut (MatMul with a
//! bias and activation fused into FusedMatMul, Gemm with transB and a C per column,
//! Gather from a table); the other binds a real 151 MB weight (AlexNet's classifier
//! shape, 9216 -> 4096) under lavapipe's own 128 MiB limit, which was refused before.

use gopt::ir::ops::{ElementwiseOp, NnOp, ShapeOp};
use gopt::ir::{Attr, Attrs, DType, Graph, Op, Tensor, TensorType};
use gopt::pipeline::{specialize, Backend, Options};
use std::collections::BTreeMap;

mod common;
use common::{close, random};

fn imported(g: Graph) -> gopt::Imported {
    gopt::Imported {
        model: gopt::Model {
            graph: g,
            meta: Default::default(),
        },
        opsets: vec![(String::new(), 21)],
        ir_version: 10,
        producer: "wgpu_split".into(),
        source: None,
    }
}

fn input(g: &mut Graph, name: &str, dt: DType, shape: &[usize]) -> gopt::ir::ValueId {
    g.add_input(name, TensorType::new(dt, gopt::ir::dim::shape_of(shape)))
}

fn node(
    g: &mut Graph,
    name: &str,
    op: Op,
    attrs: &[(&str, i64)],
    ins: &[gopt::ir::ValueId],
) -> gopt::ir::ValueId {
    let mut a = Attrs::default();
    for (k, v) in attrs {
        a.set(k, Attr::Int(*v));
    }
    let id = g.add_node(name, op, a, ins.iter().map(|&v| Some(v)).collect(), &[name]);
    g.nodes[id.index()].outputs[0]
}

/// The wgpu options for lavapipe (or whatever adapter this machine has).
fn wgpu_options(max_binding: Option<u64>) -> Options {
    let dev = gopt::wgpu::device(None).unwrap_or_else(|e| panic!("{e}"));
    let opts = Options::new()
        .backend(Backend::Wgpu)
        .wgsl_f16(dev.adapter.f16);
    match max_binding {
        Some(bytes) => opts.wgsl_max_binding(bytes),
        None => opts,
    }
}

/// Concat nodes the split added (named `<node>.join`) in the graph planned for wgpu.
fn joins(m: &gopt::Imported, opts: &Options) -> usize {
    let v = specialize(&m.model, &BTreeMap::new(), opts).unwrap_or_else(|e| panic!("{e}"));
    v.graph
        .nodes
        .iter()
        .filter(|n| n.op == Op::Shape(ShapeOp::Concat) && n.name.ends_with(".join"))
        .count()
}

/// Runs `m` on wgpu under `opts` and on the interpreter, and compares.
fn matches_interpreter(m: &gopt::Imported, opts: &Options, inputs: &[Tensor]) {
    let want = gopt::run_cpu(m, inputs).unwrap_or_else(|e| panic!("interpreter: {e}"));
    let mut c = gopt::compile(m, opts).unwrap_or_else(|e| panic!("compile: {e}"));
    let got = c.run(inputs).unwrap_or_else(|e| panic!("wgpu: {e}"));
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        close(g, w, (1e-4, 1e-4)).unwrap_or_else(|e| panic!("output {k}: {e}"));
    }
}

#[test]
fn products_and_gathers_over_big_weights_are_split_and_match() {
    let mut g = Graph::new("split");
    let x = input(&mut g, "x", DType::F32, &[4, 256]);
    let ids = input(&mut g, "ids", DType::I64, &[6]);
    // 256 x 384 f32 (384 KiB), a bias and a Relu: the optimizer fuses a FusedMatMul.
    let w1 = g.add_const("w1", random(DType::F32, &[256, 384], 1));
    let b1 = g.add_const("b1", random(DType::F32, &[384], 2));
    let mm = node(&mut g, "mm", Op::Nn(NnOp::MatMul), &[], &[x, w1]);
    let biased = node(
        &mut g,
        "bias",
        Op::Elementwise(ElementwiseOp::Add),
        &[],
        &[mm, b1],
    );
    let h = node(
        &mut g,
        "relu",
        Op::Elementwise(ElementwiseOp::Relu),
        &[],
        &[biased],
    );
    // Gemm with transB: 192 x 384 (288 KiB) and a C per output column.
    let w2 = g.add_const("w2", random(DType::F32, &[192, 384], 3));
    let c2 = g.add_const("c2", random(DType::F32, &[192], 4));
    let y1 = node(
        &mut g,
        "gemm",
        Op::Nn(NnOp::Gemm),
        &[("transB", 1)],
        &[h, w2, c2],
    );
    // A 1000 x 96 table (375 KiB), negative ids included.
    let table = g.add_const("table", random(DType::F32, &[1000, 96], 5));
    let y2 = node(
        &mut g,
        "embed",
        Op::Shape(ShapeOp::Gather),
        &[("axis", 0)],
        &[table, ids],
    );
    g.outputs = vec![y1, y2];
    let m = imported(gopt::ir::verify(g).expect("verifies").into_inner());
    let opts = wgpu_options(Some(64 << 10));
    assert_eq!(joins(&m, &opts), 3, "each big weight is split once");
    assert_eq!(
        joins(&m, &wgpu_options(None)),
        0,
        "nothing is split under the default 128 MiB"
    );
    let ids = Tensor::from_i64s(&[0, 999, 17, -1, -1000, 500]);
    matches_interpreter(&m, &opts, &[random(DType::F32, &[4, 256], 6), ids]);
}

#[test]
fn a_151_mb_classifier_weight_runs_under_a_128_mib_binding_limit() {
    let mut g = Graph::new("classifier");
    let x = input(&mut g, "x", DType::F32, &[1, 9216]);
    let w = g.add_const("fc_w", random(DType::F32, &[4096, 9216], 7));
    let b = g.add_const("fc_b", random(DType::F32, &[4096], 8));
    let y = node(
        &mut g,
        "fc",
        Op::Nn(NnOp::Gemm),
        &[("transB", 1)],
        &[x, w, b],
    );
    g.outputs = vec![y];
    let m = imported(gopt::ir::verify(g).expect("verifies").into_inner());
    let opts = wgpu_options(None);
    assert_eq!(joins(&m, &opts), 1);
    // Sums of 9216 products of values in [-2, 2): compared with a looser absolute bound.
    let want = gopt::run_cpu(&m, &[random(DType::F32, &[1, 9216], 9)]).expect("interpreter");
    let mut c = gopt::compile(&m, &opts).unwrap_or_else(|e| panic!("compile: {e}"));
    let got = c
        .run(&[random(DType::F32, &[1, 9216], 9)])
        .unwrap_or_else(|e| panic!("wgpu: {e}"));
    close(&got[0], &want[0], (1e-3, 1e-2)).unwrap_or_else(|e| panic!("{e}"));
}
