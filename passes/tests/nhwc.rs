//! The channels-last pass on small graphs in the IR text format: which convolutions
//! flip, which transposes survive the cleanup, that names of graph inputs and outputs
//! stay, and that the interpreter computes the same numbers before and after.

mod common;

use common::{inputs, vals};
use gopt_ir::text::{parse, print};
use gopt_ir::{interp, verify, Graph, Op, Verified};
use gopt_passes::nhwc::to_channels_last;

fn load(src: &str) -> Verified {
    let g = parse(src).unwrap_or_else(|e| panic!("does not parse: {e}\n{src}"));
    verify(g).unwrap_or_else(|e| panic!("does not verify: {e}\n{src}"))
}

/// Runs the pass on `src`; returns the original, the rewritten graph (verified) and
/// the number of converted convs, after checking numerics and interface names.
fn convert(src: &str) -> (Verified, Verified, usize) {
    let before = load(src);
    let mut g = before.clone().into_inner();
    let n = to_channels_last(&mut g).expect("pass runs");
    let after = verify(g.clone()).unwrap_or_else(|e| panic!("{e}\n{}", print(&g)));
    let ins = inputs(&before);
    let want = interp::run(&before, &ins).expect("original runs");
    let got = interp::run(&after, &ins).unwrap_or_else(|e| panic!("{e}\n{}", print(&after)));
    assert_eq!(want.len(), got.len());
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w.shape(), g.shape());
        for (a, b) in w.to_f64_vec().iter().zip(g.to_f64_vec()) {
            assert!(
                (a - b).abs() <= 1e-5 * a.abs().max(b.abs()) + 1e-7,
                "{a} vs {b}\n{}",
                print(&after)
            );
        }
    }
    let names = |g: &Graph, vs: &[gopt_ir::ValueId]| -> Vec<String> {
        vs.iter().map(|&v| g.value(v).name.clone()).collect()
    };
    assert_eq!(names(&before, &before.inputs), names(&after, &after.inputs));
    assert_eq!(
        names(&before, &before.outputs),
        names(&after, &after.outputs)
    );
    (before, after, n)
}

fn count(g: &Graph, op: &str) -> usize {
    g.nodes.iter().filter(|n| n.op.name() == op).count()
}

fn nhwc_convs(g: &Graph) -> usize {
    g.nodes
        .iter()
        .filter(|n| {
            n.op.name() == "FusedConv" && n.attrs.str_or("layout", "NCHW").unwrap() == "NHWC"
        })
        .count()
}

/// No transpose reads another transpose (the cleanup composes or cancels every pair).
fn assert_no_transpose_pairs(g: &Graph) {
    let prod = g.producers();
    for n in g.nodes.iter().filter(|n| n.op.name() == "Transpose") {
        let src = n.inputs[0].and_then(|v| prod.get(&v));
        if let Some((p, _)) = src {
            assert_ne!(
                g.node(*p).op.name(),
                "Transpose",
                "`{}` transposes a transpose:\n{}",
                n.name,
                print(g)
            );
        }
    }
}

/// ResNet-like: stem conv (relu fused), MaxPool, 1x1 conv, 3x3 conv with the block
/// input as residual, a separate Relu, a depthwise conv, Clip(0, 6) with scalar
/// constants, GlobalAveragePool, Flatten and a Gemm head.
fn resnet_like() -> String {
    format!(
        r#"graph "resnet_like"(%0 "x": f32[2,3,8,8]) -> (%21) {{
  %1 "w1": f32[8,3,3,3] = const {w1}
  %2 "b1": f32[8] = const {b1}
  %3 "w2": f32[8,8,1,1] = const {w2}
  %4 "b2": f32[8] = const {b2}
  %5 "w3": f32[8,8,3,3] = const {w3}
  %6 "b3": f32[8] = const {b3}
  %7 "w4": f32[8,1,3,3] = const {w4}
  %8 "lo": f32[] = const [0.0]
  %9 "hi": f32[] = const [6.0]
  %10 "wf": f32[10,8] = const {wf}
  %11 "bf": f32[10] = const {bf}
  %12 "c1": f32[2,8,8,8] = FusedConv "c1"(%0, %1, %2, _) {{activation="relu", kernel_shape=ints[3,3], pads=ints[1,1,1,1]}}
  %13 "p": f32[2,8,4,4] = MaxPool "pool"(%12) {{kernel_shape=ints[2,2], strides=ints[2,2]}}
  %14 "c2": f32[2,8,4,4] = FusedConv "c2"(%13, %3, %4, _) {{activation="relu", kernel_shape=ints[1,1]}}
  %15 "c3": f32[2,8,4,4] = FusedConv "c3"(%14, %5, %6, %13) {{kernel_shape=ints[3,3], pads=ints[1,1,1,1]}}
  %16 "r": f32[2,8,4,4] = Relu "relu"(%15)
  %17 "c4": f32[2,8,4,4] = FusedConv "c4"(%16, %7, _, _) {{group=8, kernel_shape=ints[3,3], pads=ints[1,1,1,1]}}
  %18 "k": f32[2,8,4,4] = Clip "relu6"(%17, %8, %9)
  %19 "gap": f32[2,8,1,1] = GlobalAveragePool "gap"(%18)
  %20 "f": f32[2,8] = Flatten "flat"(%19) {{axis=1}}
  %21 "y": f32[2,10] = Gemm "fc"(%20, %10, %11) {{transB=1}}
}}"#,
        w1 = vals(216, 1),
        b1 = vals(8, 2),
        w2 = vals(64, 3),
        b2 = vals(8, 4),
        w3 = vals(576, 5),
        b3 = vals(8, 6),
        w4 = vals(72, 7),
        wf = vals(80, 8),
        bf = vals(10, 9),
    )
}

#[test]
fn resnet_like_runs_channels_last() {
    let (before, after, n) = convert(&resnet_like());
    assert_eq!(n, 4);
    assert_eq!(nhwc_convs(&after), count(&after, "FusedConv"));
    assert_eq!(count(&after, "FusedConv"), count(&before, "FusedConv"));
    assert_no_transpose_pairs(&after);
    // One at the input, one before GlobalAveragePool: MaxPool runs channels-last
    // between two reshapes, and the pooled value feeds c2's X and c3's residual as is.
    assert_eq!(count(&after, "Transpose"), 2, "{}", print(&after));
    assert_eq!(count(&after, "Reshape"), 2, "{}", print(&after));
    let pool = after
        .nodes
        .iter()
        .find(|n| n.op.name() == "MaxPool")
        .unwrap();
    assert_eq!(
        pool.attrs.ints("kernel_shape").unwrap(),
        Some(&[2, 2, 1][..])
    );
    assert_eq!(
        after.ty(pool.outputs[0]).unwrap().shape,
        gopt_ir::dim::shape_of(&[2, 1, 4, 4, 8])
    );
    // Relu and Clip run on the NHWC values.
    let prod = after.producers();
    for op in ["Relu", "Clip"] {
        let n = after.nodes.iter().find(|n| n.op.name() == op).expect(op);
        let (p, _) = prod[&n.inputs[0].unwrap()];
        assert_eq!(after.node(p).op.name(), "FusedConv", "{op} reads the conv");
    }
    // Everything else is as before.
    for op in [
        "MaxPool",
        "GlobalAveragePool",
        "Flatten",
        "Gemm",
        "Relu",
        "Clip",
    ] {
        assert_eq!(count(&after, op), count(&before, op), "{op}");
    }
}

/// Two convs around an AveragePool with padding, `ceil_mode` and
/// `count_include_pad`, and a MaxPool with dilations and `auto_pad`, whose result is
/// also a graph output (in NCHW, through a transpose).
fn pools(avg_attrs: &str, max_attrs: &str) -> String {
    format!(
        r#"graph "pools"(%0 "x": f32[1,3,9,9]) -> (%6, %7) {{
  %1 "w1": f32[8,3,3,3] = const {w1}
  %2 "w2": f32[4,8,1,1] = const {w2}
  %3 "c1": f32[1,8,9,9] = FusedConv "c1"(%0, %1, _, _) {{kernel_shape=ints[3,3], pads=ints[1,1,1,1]}}
  %4 "avg": f32[1,8,5,5] = AveragePool "avg"(%3) {{{avg_attrs}}}
  %5 "max": f32[1,8,5,5] = MaxPool "max"(%4) {{{max_attrs}}}
  %6 "y": f32[1,4,5,5] = FusedConv "c2"(%5, %2, _, _) {{kernel_shape=ints[1,1]}}
  %7 "m": f32[1,8,5,5] = Relu "r"(%5)
}}"#,
        w1 = vals(216, 41),
        w2 = vals(32, 42),
    )
}

#[test]
fn pools_run_channels_last() {
    let src = pools(
        "ceil_mode=1, count_include_pad=1, kernel_shape=ints[3,3], pads=ints[1,0,1,1], strides=ints[2,2]",
        "auto_pad=\"SAME_UPPER\", dilations=ints[2,2], kernel_shape=ints[2,2]",
    );
    let (_, after, n) = convert(&src);
    assert_eq!(n, 2);
    assert_no_transpose_pairs(&after);
    // The input's, and the one back to NCHW for the graph outputs (sunk below the
    // Relu, then c2's output).
    assert_eq!(count(&after, "Transpose"), 3, "{}", print(&after));
    for op in ["AveragePool", "MaxPool"] {
        let p = after.nodes.iter().find(|n| n.op.name() == op).unwrap();
        assert_eq!(
            after.ty(p.inputs[0].unwrap()).unwrap().shape.len(),
            5,
            "{op}"
        );
    }
    let avg = after.nodes.iter().find(|n| n.name == "avg").unwrap();
    assert_eq!(
        avg.attrs.ints("pads").unwrap(),
        Some(&[1, 0, 0, 1, 1, 0][..])
    );
}

#[test]
fn pool_alone_stays_nchw() {
    // A pool of the graph input reads no transpose: nothing to sink.
    let src = format!(
        r#"graph "p"(%0 "x": f32[1,8,6,6]) -> (%5) {{
  %1 "w": f32[8,8,1,1] = const {w}
  %2 "p": f32[1,8,3,3] = MaxPool "pool"(%0) {{kernel_shape=ints[2,2], strides=ints[2,2]}}
  %3 "a": f32[1,8,3,3] = FusedConv "a"(%2, %1, _, _) {{kernel_shape=ints[1,1]}}
  %5 "b": f32[1,8,3,3] = FusedConv "b"(%3, %1, _, _) {{kernel_shape=ints[1,1]}}
}}"#,
        w = vals(64, 43),
    );
    let (_, after, _) = convert(&src);
    let pool = after.nodes.iter().find(|n| n.name == "pool").unwrap();
    assert_eq!(after.ty(pool.inputs[0].unwrap()).unwrap().shape.len(), 4);
    assert_eq!(count(&after, "Reshape"), 0);
}

#[test]
fn pass_is_deterministic() {
    let (_, a, _) = convert(&resnet_like());
    let (_, b, _) = convert(&resnet_like());
    assert_eq!(print(&a), print(&b));
    assert!(print(&a).contains("\"c1/nhwc_in\""), "{}", print(&a));
}

/// MobileNet-like: an unfused residual Add of two conv outputs sinks below the Add, so
/// the next conv reads it without a transpose; a conv output that is a graph output
/// keeps its name (through the transpose back).
#[test]
fn residual_add_stays_channels_last() {
    let src = format!(
        r#"graph "mb"(%0 "x": f32[1,4,5,5]) -> (%9, %10) {{
  %1 "w1": f32[4,4,1,1] = const {w1}
  %2 "w2": f32[4,1,3,3] = const {w2}
  %3 "w3": f32[4,4,1,1] = const {w3}
  %4 "two": f32[1] = const [2.0]
  %5 "a": f32[1,4,5,5] = FusedConv "a"(%0, %1, _, _) {{kernel_shape=ints[1,1]}}
  %6 "b": f32[1,4,5,5] = FusedConv "b"(%5, %2, _, _) {{group=4, kernel_shape=ints[3,3], pads=ints[1,1,1,1]}}
  %7 "s": f32[1,4,5,5] = Add "add"(%5, %6)
  %8 "m": f32[1,4,5,5] = Mul "scale"(%7, %4)
  %9 "c": f32[1,4,5,5] = FusedConv "c"(%8, %3, _, _) {{kernel_shape=ints[1,1]}}
  %10 "out_b": f32[1,4,5,5] = Relu "r"(%6)
}}"#,
        w1 = vals(16, 11),
        w2 = vals(36, 12),
        w3 = vals(16, 13),
    );
    let (_, after, n) = convert(&src);
    assert_eq!(n, 3);
    assert_eq!(nhwc_convs(&after), 3);
    assert_no_transpose_pairs(&after);
    // In front of `a`, after `c` (an output), after the Relu (an output).
    assert_eq!(count(&after, "Transpose"), 3, "{}", print(&after));
    let add = after.nodes.iter().find(|n| n.name == "add").unwrap();
    let prod = after.producers();
    for v in add.inputs.iter().flatten() {
        assert_eq!(after.node(prod[v].0).op.name(), "FusedConv");
    }
}

#[test]
fn single_conv_is_unchanged() {
    let src = format!(
        r#"graph "one"(%0 "x": f32[1,3,6,6]) -> (%3) {{
  %1 "w": f32[4,3,3,3] = const {w}
  %2 "b": f32[4] = const [0.1, -0.1, 0.2, -0.2]
  %3 "y": f32[1,4,6,6] = FusedConv "c"(%0, %1, %2, _) {{activation="relu", kernel_shape=ints[3,3], pads=ints[1,1,1,1]}}
}}"#,
        w = vals(108, 21)
    );
    let (before, after, n) = convert(&src);
    assert_eq!(n, 0);
    assert_eq!(print(&before), print(&after));
}

/// A 1-D convolution or a symbolic batch is not a candidate.
#[test]
fn only_static_2d_convs_are_candidates() {
    let src = format!(
        r#"graph "oned"(%0 "x": f32[1,3,6]) -> (%4) {{
  %1 "w": f32[3,3,3] = const {w}
  %3 "y": f32[1,3,6] = FusedConv "c"(%0, %1, _, _) {{kernel_shape=ints[3], pads=ints[1,1]}}
  %4 "z": f32[1,3,6] = FusedConv "d"(%3, %1, _, _) {{kernel_shape=ints[3], pads=ints[1,1]}}
}}"#,
        w = vals(27, 22)
    );
    let (before, after, n) = convert(&src);
    assert_eq!(n, 0);
    assert_eq!(print(&before), print(&after));
    let mut g = load(
        &resnet_like()
            .replace("f32[2,3,8,8]", "f32[batch,3,8,8]")
            .replace(": f32[2,", ": f32[batch,"),
    )
    .into_inner();
    let text = print(&g);
    assert_eq!(to_channels_last(&mut g).unwrap(), 0);
    assert_eq!(print(&g), text);
    assert!(g
        .nodes
        .iter()
        .all(|n| n.op != Op::Shape(gopt_ir::ops::ShapeOp::Transpose)));
}
