//! Issue 15, items 3 and 4, on lavapipe: ops whose output size depends on the data
//! (NonZero, Compress, Unique, NonMaxSuppression) laid out at a bound with the count read
//! back after the run, and control flow made straight-line (a Loop over an input trip
//! count, a Scan, an If on a computed condition), each against the interpreter on
//! inputs larger than the conformance cases' (several chunks of a workgroup's scan).
//! The CUDA kernels are the same algorithms; scripts/gpu-check.sh runs the conformance
//! cases of both on the H200.

use gopt::ir::ops::{ControlOp, ElementwiseOp, ImageOp, ShapeOp};
use gopt::ir::{Attr, Attrs, DType, Graph, Op, Tensor, TensorType, ValueId};
use gopt::pipeline::{specialize, Backend, Options};
use std::collections::BTreeMap;

mod common;
use common::random;

fn imported(g: Graph) -> gopt::Imported {
    gopt::Imported {
        model: gopt::Model {
            graph: g,
            meta: Default::default(),
        },
        opsets: vec![(String::new(), 21)],
        ir_version: 10,
        producer: "wgpu_counted".into(),
        source: None,
    }
}

fn ty(dt: DType, shape: &[usize]) -> TensorType {
    TensorType::new(dt, gopt::ir::dim::shape_of(shape))
}

fn node(
    g: &mut Graph,
    name: &str,
    op: Op,
    attrs: Attrs,
    ins: &[Option<ValueId>],
    outs: &[&str],
) -> Vec<ValueId> {
    let id = g.add_node(name, op, attrs, ins.to_vec(), outs);
    g.nodes[id.index()].outputs.clone()
}

fn wgpu() -> Options {
    let dev = gopt::wgpu::device(None).unwrap_or_else(|e| panic!("{e}"));
    Options::new()
        .backend(Backend::Wgpu)
        .wgsl_f16(dev.adapter.f16)
}

/// Runs `m` on wgpu (compiled at the first run, as `gopt run` does, so inputs that
/// decide a trip count are specialized on their values) and on the interpreter: the
/// outputs must be equal, shapes included.
fn same_as_interpreter(m: &gopt::Imported, inputs: &[Tensor]) {
    let want = gopt::run_cpu(m, inputs).unwrap_or_else(|e| panic!("interpreter: {e}"));
    let mut c = gopt::Compiled::empty(m, &wgpu());
    let got = c.run(inputs).unwrap_or_else(|e| panic!("wgpu: {e}"));
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.shape(), w.shape(), "output {k}: shape");
        common::close(g, w, (1e-6, 1e-6)).unwrap_or_else(|e| panic!("output {k}: {e}"));
    }
}

fn bools(shape: &[usize], seed: u64) -> Tensor {
    let r = random(DType::I32, shape, seed).to_i64_vec();
    let v: Vec<f64> = r.iter().map(|&x| f64::from(u8::from(x % 3 != 0))).collect();
    Tensor::from_f64s(DType::Bool, shape, &v).expect("shape")
}

#[test]
fn nonzero_over_many_chunks() {
    let mut g = Graph::new("nonzero");
    let x = g.add_input("x", ty(DType::I32, &[40, 50, 3]));
    let y = node(
        &mut g,
        "nz",
        Op::Shape(ShapeOp::NonZero),
        Attrs::default(),
        &[Some(x)],
        &["y"],
    );
    g.outputs = y;
    same_as_interpreter(&imported(g), &[random(DType::I32, &[40, 50, 3], 1)]);
}

#[test]
fn compress_along_an_axis() {
    let mut g = Graph::new("compress");
    let x = g.add_input("x", ty(DType::F32, &[3, 700, 4]));
    let c = g.add_input("c", ty(DType::Bool, &[700]));
    let mut a = Attrs::default();
    a.set("axis", Attr::Int(1));
    let y = node(
        &mut g,
        "cp",
        Op::Shape(ShapeOp::Compress),
        a,
        &[Some(x), Some(c)],
        &["y"],
    );
    g.outputs = y;
    same_as_interpreter(
        &imported(g),
        &[random(DType::F32, &[3, 700, 4], 2), bools(&[700], 3)],
    );
}

#[test]
fn unique_with_every_output() {
    for sorted in [1, 0] {
        let mut g = Graph::new("unique");
        let x = g.add_input("x", ty(DType::I64, &[2, 300]));
        let mut a = Attrs::default();
        a.set("sorted", Attr::Int(sorted));
        let outs = node(
            &mut g,
            "u",
            Op::Shape(ShapeOp::Unique),
            a,
            &[Some(x)],
            &["y", "indices", "inverse", "counts"],
        );
        g.outputs = outs;
        let data: Vec<f64> = (0..600).map(|i| f64::from((i * 37 % 101) - 50)).collect();
        let t = Tensor::from_f64s(DType::I64, &[2, 300], &data).expect("shape");
        same_as_interpreter(&imported(g), &[t]);
    }
}

#[test]
fn non_max_suppression_of_many_boxes() {
    let (b, c, n) = (2, 3, 400);
    let mut g = Graph::new("nms");
    let boxes = g.add_input("boxes", ty(DType::F32, &[b, n, 4]));
    let scores = g.add_input("scores", ty(DType::F32, &[b, c, n]));
    let max_out = g.add_const("max_out", Tensor::from_i64s(&[40]));
    let iou = g.add_const(
        "iou",
        Tensor::from_f64s(DType::F32, &[1], &[0.4]).expect("shape"),
    );
    let thr = g.add_const(
        "thr",
        Tensor::from_f64s(DType::F32, &[1], &[0.2]).expect("shape"),
    );
    let y = node(
        &mut g,
        "nms",
        Op::Image(ImageOp::NonMaxSuppression),
        Attrs::default(),
        &[
            Some(boxes),
            Some(scores),
            Some(max_out),
            Some(iou),
            Some(thr),
        ],
        &["selected"],
    );
    g.outputs = y;
    // Corners in [-2, 2): some boxes overlap, some are flipped (y2 < y1).
    let bx = random(DType::F32, &[b, n, 4], 4);
    let sc = random(DType::F32, &[b, c, n], 5);
    same_as_interpreter(&imported(g), &[bx, sc]);
}

#[test]
fn a_counted_output_read_by_another_node_is_refused_with_the_reader() {
    let mut g = Graph::new("nonzero_fed");
    let x = g.add_input("x", ty(DType::I32, &[10]));
    let y = node(
        &mut g,
        "nz",
        Op::Shape(ShapeOp::NonZero),
        Attrs::default(),
        &[Some(x)],
        &["y"],
    );
    let z = node(
        &mut g,
        "neg",
        Op::Elementwise(ElementwiseOp::Neg),
        Attrs::default(),
        &[Some(y[0])],
        &["z"],
    );
    g.outputs = z;
    let err = gopt::Compiled::empty(&imported(g), &wgpu())
        .run(&[random(DType::I32, &[10], 6)])
        .map(|_| ())
        .expect_err("a GPU plan cannot lay out the Neg");
    let msg = err.to_string();
    assert!(
        msg.contains("feeding node") && msg.contains("(Neg)"),
        "{msg}"
    );
}

/// A Loop over an input trip count: a carried running sum and a scan output.
fn loop_model() -> gopt::Imported {
    let mut body = Graph::new("body");
    let i = body.add_input("i", ty(DType::I64, &[]));
    let cond = body.add_input("cond", ty(DType::Bool, &[]));
    let acc = body.add_input("acc", ty(DType::F32, &[64]));
    let x = body.add_value("x", Some(ty(DType::F32, &[64])));
    body.captures.push(x);
    let fi = node(
        &mut body,
        "fi",
        Op::Elementwise(ElementwiseOp::Cast),
        {
            let mut a = Attrs::default();
            a.set("to", Attr::DType(DType::F32));
            a
        },
        &[Some(i)],
        &["fi"],
    );
    let sx = node(
        &mut body,
        "sx",
        Op::Elementwise(ElementwiseOp::Mul),
        Attrs::default(),
        &[Some(x), Some(fi[0])],
        &["sx"],
    );
    let next = node(
        &mut body,
        "next",
        Op::Elementwise(ElementwiseOp::Add),
        Attrs::default(),
        &[Some(acc), Some(sx[0])],
        &["next"],
    );
    let c_out = node(
        &mut body,
        "c",
        Op::Shape(ShapeOp::Identity),
        Attrs::default(),
        &[Some(cond)],
        &["c_out"],
    );
    let scan = node(
        &mut body,
        "s",
        Op::Elementwise(ElementwiseOp::Tanh),
        Attrs::default(),
        &[Some(next[0])],
        &["scan"],
    );
    body.outputs = vec![c_out[0], next[0], scan[0]];

    let mut g = Graph::new("loop");
    let m = g.add_input("m", ty(DType::I64, &[]));
    let x = g.add_input("x", ty(DType::F32, &[64]));
    let _ = x;
    let init = g.add_const("init", Tensor::zeros(DType::F32, &[64]));
    let mut a = Attrs::default();
    a.set("body", Attr::Graph(Box::new(body)));
    let outs = node(
        &mut g,
        "loop",
        Op::Control(ControlOp::Loop),
        a,
        &[Some(m), None, Some(init)],
        &["sum", "steps"],
    );
    g.outputs = outs;
    imported(g)
}

#[test]
fn a_loop_over_an_input_count_is_unrolled_per_count() {
    let m = loop_model();
    let x = random(DType::F32, &[64], 7);
    for trips in [1i64, 5, 12] {
        let count = Tensor::scalar_f64(DType::I64, trips as f64);
        same_as_interpreter(&m, &[count, x.clone()]);
    }
}

#[test]
fn control_flow_that_stays_is_named_with_its_reason() {
    // Without the count's value (no specialization), the Loop cannot be unrolled.
    let v = specialize(&loop_model().model, &BTreeMap::new(), &wgpu()).expect("specialize");
    assert!(
        v.control_flow
            .iter()
            .any(|l| l.contains("left: Loop `loop`") && l.contains("trip count")),
        "{:?}",
        v.control_flow
    );
}

#[test]
fn an_if_on_a_computed_condition_selects_between_both_branches() {
    let branch = |name: &str, op: ElementwiseOp| {
        let mut b = Graph::new(name);
        let x = b.add_value("x", Some(ty(DType::F32, &[8, 16])));
        b.captures.push(x);
        let y = node(
            &mut b,
            &format!("{name}_op"),
            Op::Elementwise(op),
            Attrs::default(),
            &[Some(x)],
            &[&format!("{name}_y")],
        );
        b.outputs = y;
        b
    };
    let mut g = Graph::new("if");
    let x = g.add_input("x", ty(DType::F32, &[8, 16]));
    let s = node(
        &mut g,
        "sum",
        Op::Reduce(gopt::ir::ops::ReduceOp::ReduceSum),
        {
            let mut a = Attrs::default();
            a.set("keepdims", Attr::Int(0));
            a
        },
        &[Some(x)],
        &["s"],
    );
    let zero = g.add_const("zero", Tensor::scalar_f64(DType::F32, 0.0));
    let cond = node(
        &mut g,
        "pos",
        Op::Elementwise(ElementwiseOp::Greater),
        Attrs::default(),
        &[Some(s[0]), Some(zero)],
        &["cond"],
    );
    let mut a = Attrs::default();
    a.set(
        "then_branch",
        Attr::Graph(Box::new(branch("then", ElementwiseOp::Exp))),
    );
    a.set(
        "else_branch",
        Attr::Graph(Box::new(branch("else", ElementwiseOp::Neg))),
    );
    let y = node(
        &mut g,
        "if",
        Op::Control(ControlOp::If),
        a,
        &[Some(cond[0])],
        &["y"],
    );
    g.outputs = y;
    let m = imported(g);
    let v = specialize(&m.model, &BTreeMap::new(), &wgpu()).expect("specialize");
    assert!(
        v.control_flow.iter().any(|l| l.contains("Where")),
        "{:?}",
        v.control_flow
    );
    for seed in [8, 9, 10, 11] {
        same_as_interpreter(&m, &[random(DType::F32, &[8, 16], seed)]);
    }
}

/// Lavapipe ends an invocation's loops after 65,535 iterations without an error: a
/// Unique over 5,000 distinct elements (about 140,000 iterations per invocation) is
/// refused there, naming the kernel; on a GPU it runs and matches.
#[test]
fn a_kernel_that_loops_past_lavapipe_s_limit_is_refused_there() {
    let mut g = Graph::new("unique_long");
    let x = g.add_input("x", ty(DType::I32, &[5000]));
    let outs = node(
        &mut g,
        "u",
        Op::Shape(ShapeOp::Unique),
        Attrs::default(),
        &[Some(x)],
        &["y"],
    );
    g.outputs = outs;
    let m = imported(g);
    let data: Vec<f64> = (0..5000).map(|i| f64::from((i * 7919) % 5000)).collect();
    let t = Tensor::from_f64s(DType::I32, &[5000], &data).expect("shape");
    let dev = gopt::wgpu::device(None).unwrap_or_else(|e| panic!("{e}"));
    if dev.adapter.name.contains("llvmpipe") {
        let err = gopt::Compiled::empty(&m, &wgpu())
            .run(std::slice::from_ref(&t))
            .map(|_| ())
            .expect_err("refused on lavapipe");
        let msg = err.to_string();
        assert!(
            msg.contains("k0_unique") && msg.contains("ends loops"),
            "{msg}"
        );
    } else {
        same_as_interpreter(&m, &[t]);
    }
}
