//! Control family: If/Loop/Scan run through the interpreter with bodies that capture
//! outer values (and their types inferred from the bodies), and the recurrent ops'
//! output shapes, directions and sequence lengths.

use gopt_ir::dim::shape_of;
use gopt_ir::ops::EvalCx;
use gopt_ir::{
    infer_types, interp, Attr, Attrs, DType, Graph, Node, Op, Tensor, TensorType, ValueId,
};

fn ty(dtype: DType, shape: &[usize]) -> TensorType {
    TensorType::new(dtype, shape_of(shape))
}

fn f32s(shape: &[usize], vals: &[f64]) -> Tensor {
    Tensor::from_f64s(DType::F32, shape, vals).unwrap()
}

fn op(name: &str) -> Op {
    Op::from_name(name).unwrap()
}

fn attrs(list: Vec<(&str, Attr)>) -> Attrs {
    let mut a = Attrs::default();
    for (k, v) in list {
        a.set(k, v);
    }
    a
}

#[test]
fn if_runs_the_selected_branch_with_captures() {
    let t3 = ty(DType::F32, &[3]);
    let mut then_g = Graph::new("then");
    let x = then_g.add_value("x", Some(t3.clone()));
    then_g.captures.push(x);
    then_g.add_node(
        "a",
        op("Add"),
        Attrs::default(),
        vec![Some(x), Some(x)],
        &["twice"],
    );
    then_g.outputs = vec![then_g.find_value("twice").unwrap()];
    let mut else_g = Graph::new("else");
    let x = else_g.add_value("x", Some(t3.clone()));
    else_g.captures.push(x);
    else_g.add_node(
        "i",
        op("Identity"),
        Attrs::default(),
        vec![Some(x)],
        &["same"],
    );
    else_g.outputs = vec![else_g.find_value("same").unwrap()];

    let mut g = Graph::new("main");
    let c = g.add_input("cond", ty(DType::Bool, &[]));
    g.add_input("x", t3.clone());
    let a = attrs(vec![
        ("then_branch", Attr::Graph(Box::new(then_g))),
        ("else_branch", Attr::Graph(Box::new(else_g))),
    ]);
    g.add_node("if", op("If"), a, vec![Some(c)], &["y"]);
    g.outputs = vec![g.find_value("y").unwrap()];
    infer_types(&mut g).unwrap();
    assert_eq!(g.value(g.outputs[0]).ty.as_ref(), Some(&t3));

    let x = f32s(&[3], &[1., 2., 3.]);
    for (cond, want) in [(true, vec![2., 4., 6.]), (false, vec![1., 2., 3.])] {
        let c = Tensor::Bool(ndarray::arr0(cond).into_dyn());
        let out = interp::run(&g, &[c, x.clone()]).unwrap();
        assert_eq!(out[0].to_f64_vec(), want);
    }
}

#[test]
fn loop_carries_state_and_stacks_scan_outputs() {
    let t1 = ty(DType::F32, &[1]);
    let mut body = Graph::new("body");
    body.add_input("i", ty(DType::I64, &[]));
    let cond = body.add_input("cond", ty(DType::Bool, &[]));
    let acc = body.add_input("acc", t1.clone());
    let x = body.add_value("x", Some(t1.clone()));
    body.captures.push(x);
    body.add_node(
        "add",
        op("Add"),
        Attrs::default(),
        vec![Some(acc), Some(x)],
        &["acc_out"],
    );
    body.add_node(
        "c",
        op("Identity"),
        Attrs::default(),
        vec![Some(cond)],
        &["cond_out"],
    );
    let acc_out = body.find_value("acc_out").unwrap();
    body.add_node(
        "s",
        op("Identity"),
        Attrs::default(),
        vec![Some(acc_out)],
        &["scan"],
    );
    body.outputs = ["cond_out", "acc_out", "scan"]
        .iter()
        .map(|n| body.find_value(n).unwrap())
        .collect();

    let mut g = Graph::new("main");
    let m = g.add_const("m", Tensor::from_i64s(&[4]).reshape(&[]).unwrap());
    let init = g.add_input("init", t1.clone());
    g.add_input("x", t1.clone());
    let a = attrs(vec![("body", Attr::Graph(Box::new(body)))]);
    g.add_node(
        "loop",
        op("Loop"),
        a,
        vec![Some(m), None, Some(init)],
        &["final", "scans"],
    );
    g.outputs = vec![
        g.find_value("final").unwrap(),
        g.find_value("scans").unwrap(),
    ];
    infer_types(&mut g).unwrap();
    assert_eq!(g.value(g.outputs[0]).ty.as_ref(), Some(&t1));
    assert_eq!(
        g.value(g.outputs[1]).ty.as_ref(),
        Some(&ty(DType::F32, &[4, 1]))
    );

    let out = interp::run(&g, &[f32s(&[1], &[-2.]), f32s(&[1], &[1.5])]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![4.0]);
    assert_eq!(out[1].shape(), [4, 1]);
    assert_eq!(out[1].to_f64_vec(), vec![-0.5, 1.0, 2.5, 4.0]);
}

#[test]
fn scan_reverses_inputs_and_stacks_on_the_requested_axis() {
    let t2 = ty(DType::F32, &[2]);
    // Body: state s, scan slice e: s' = s + e, output y = s'.
    let mut body = Graph::new("body");
    let s = body.add_input("s", t2.clone());
    let e = body.add_input("e", t2.clone());
    body.add_node(
        "add",
        op("Add"),
        Attrs::default(),
        vec![Some(s), Some(e)],
        &["s_out"],
    );
    let s_out = body.find_value("s_out").unwrap();
    body.add_node(
        "y",
        op("Identity"),
        Attrs::default(),
        vec![Some(s_out)],
        &["y"],
    );
    body.outputs = vec![s_out, body.find_value("y").unwrap()];

    let mut g = Graph::new("main");
    let s0 = g.add_input("s0", t2.clone());
    let xs = g.add_input("xs", ty(DType::F32, &[3, 2]));
    let a = attrs(vec![
        ("body", Attr::Graph(Box::new(body))),
        ("num_scan_inputs", Attr::Int(1)),
        ("scan_input_directions", Attr::Ints(vec![1])),
        ("scan_output_axes", Attr::Ints(vec![-1])),
    ]);
    g.add_node(
        "scan",
        op("Scan"),
        a,
        vec![Some(s0), Some(xs)],
        &["s_final", "ys"],
    );
    g.outputs = vec![
        g.find_value("s_final").unwrap(),
        g.find_value("ys").unwrap(),
    ];
    infer_types(&mut g).unwrap();
    assert_eq!(
        g.value(g.outputs[1]).ty.as_ref(),
        Some(&ty(DType::F32, &[2, 3]))
    );

    let xs = f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let out = interp::run(&g, &[f32s(&[2], &[0., 0.]), xs]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![9., 12.]);
    // Iterations see rows 2, 1, 0: running sums [5,6], [8,10], [9,12], stacked on axis 1.
    assert_eq!(out[1].shape(), [2, 3]);
    assert_eq!(out[1].to_f64_vec(), vec![5., 8., 9., 6., 10., 12.]);
}

fn rnn_node(name: &str, list: Vec<(&str, Attr)>, n_in: usize, n_out: usize) -> Node {
    Node {
        name: "r".into(),
        op: op(name),
        attrs: attrs(list),
        inputs: (0..n_in).map(|i| Some(ValueId(i as u32))).collect(),
        outputs: (0..n_out).map(|i| ValueId(100 + i as u32)).collect(),
    }
}

fn ramp(shape: &[usize], scale: f64) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| ((i * 37 % 17) as f64 - 8.0) * scale)
        .collect();
    f32s(shape, &v)
}

#[test]
fn lstm_bidirectional_shapes_and_final_states() {
    let (seq, batch, input, hidden) = (4, 3, 5, 7);
    let x = ramp(&[seq, batch, input], 0.05);
    let w = ramp(&[2, 4 * hidden, input], 0.02);
    let r = ramp(&[2, 4 * hidden, hidden], 0.03);
    let n = rnn_node(
        "LSTM",
        vec![
            ("direction", Attr::Str("bidirectional".into())),
            ("hidden_size", Attr::Int(7)),
        ],
        3,
        3,
    );
    let cx = EvalCx { lookup: &|_| None };
    let outs = n.op.eval(&cx, &n, &[Some(&x), Some(&w), Some(&r)]).unwrap();
    assert_eq!(outs[0].shape(), [seq, 2, batch, hidden]);
    assert_eq!(outs[1].shape(), [2, batch, hidden]);
    assert_eq!(outs[2].shape(), [2, batch, hidden]);
    let y = outs[0].as_array::<f32>().unwrap();
    let yh = outs[1].as_array::<f32>().unwrap();
    // Forward ends at the last step, backward at the first.
    for b in 0..batch {
        for h in 0..hidden {
            assert_eq!(y[[seq - 1, 0, b, h]], yh[[0, b, h]]);
            assert_eq!(y[[0, 1, b, h]], yh[[1, b, h]]);
        }
    }

    // Batch-major layout gives the same numbers transposed.
    let xb = Tensor::F32(
        x.as_array::<f32>()
            .unwrap()
            .clone()
            .permuted_axes(vec![1, 0, 2])
            .as_standard_layout()
            .into_owned(),
    );
    let n1 = rnn_node(
        "LSTM",
        vec![
            ("direction", Attr::Str("bidirectional".into())),
            ("layout", Attr::Int(1)),
        ],
        3,
        3,
    );
    let outs1 = n1
        .op
        .eval(&cx, &n1, &[Some(&xb), Some(&w), Some(&r)])
        .unwrap();
    assert_eq!(outs1[0].shape(), [batch, seq, 2, hidden]);
    assert_eq!(outs1[1].shape(), [batch, 2, hidden]);
    let y1 = outs1[0].as_array::<f32>().unwrap();
    for (idx, v) in y.indexed_iter() {
        assert_eq!(*v, y1[[idx[2], idx[0], idx[1], idx[3]]]);
    }
}

#[test]
fn gru_sequence_lens_zero_the_tail_and_keep_the_last_valid_state() {
    let (seq, batch, input, hidden) = (5, 2, 3, 4);
    let x = ramp(&[seq, batch, input], 0.1);
    let w = ramp(&[1, 3 * hidden, input], 0.05);
    let r = ramp(&[1, 3 * hidden, hidden], 0.05);
    let lens = Tensor::I32(ndarray::arr1(&[5, 2]).into_dyn());
    let n = rnn_node("GRU", vec![("linear_before_reset", Attr::Int(1))], 5, 2);
    let cx = EvalCx { lookup: &|_| None };
    let outs =
        n.op.eval(&cx, &n, &[Some(&x), Some(&w), Some(&r), None, Some(&lens)])
            .unwrap();
    let y = outs[0].as_array::<f32>().unwrap();
    let yh = outs[1].as_array::<f32>().unwrap();
    for h in 0..hidden {
        assert_eq!(yh[[0, 1, h]], y[[1, 0, 1, h]]);
        assert_eq!(yh[[0, 0, h]], y[[4, 0, 0, h]]);
        for t in 2..seq {
            assert_eq!(y[[t, 0, 1, h]], 0.0);
        }
    }
}

/// An `If` listed before the node producing the value its branch captures: ordering,
/// inference and pruning must all see the capture as a use.
#[test]
fn captured_values_order_type_and_stay_live() {
    let t2 = ty(DType::F32, &[2]);
    let branch = |name: &str| {
        let mut b = Graph::new(name);
        let c = b.add_value("h", None);
        b.captures.push(c);
        b.add_node("i", op("Identity"), Attrs::default(), vec![Some(c)], &["o"]);
        b.outputs = vec![b.find_value("o").unwrap()];
        b
    };
    let mut g = Graph::new("main");
    let cond = g.add_input("cond", ty(DType::Bool, &[]));
    let x = g.add_input("x", t2.clone());
    let a = attrs(vec![
        ("then_branch", Attr::Graph(Box::new(branch("then")))),
        ("else_branch", Attr::Graph(Box::new(branch("else")))),
    ]);
    g.add_node("if", op("If"), a, vec![Some(cond)], &["y"]);
    g.add_node("relu", op("Relu"), Attrs::default(), vec![Some(x)], &["h"]);
    g.outputs = vec![g.find_value("y").unwrap()];
    g.prune();
    assert_eq!(g.nodes.len(), 2, "the captured producer is live");
    g.sort_nodes().unwrap();
    assert_eq!(g.nodes[0].name, "relu");
    infer_types(&mut g).unwrap();
    assert_eq!(g.value(g.outputs[0]).ty.as_ref(), Some(&t2));
    let c = Tensor::Bool(ndarray::arr0(true).into_dyn());
    let out = interp::run(&g, &[c, f32s(&[2], &[-1., 2.])]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![0., 2.]);
}

/// Scan bodies often leave their inputs untyped: the verifier accepts them and
/// inference types them from the scan's inputs.
#[test]
fn untyped_scan_body_inputs_are_typed_from_the_scan() {
    let mut body = Graph::new("body");
    let s = body.add_value("s", None);
    let e = body.add_value("e", None);
    body.inputs = vec![s, e];
    body.add_node(
        "add",
        op("Add"),
        Attrs::default(),
        vec![Some(s), Some(e)],
        &["s_out"],
    );
    body.outputs = vec![body.find_value("s_out").unwrap()];
    let mut g = Graph::new("main");
    let s0 = g.add_input("s0", ty(DType::F32, &[3]));
    let xs = g.add_input("xs", ty(DType::F32, &[5, 3]));
    let a = attrs(vec![
        ("body", Attr::Graph(Box::new(body))),
        ("num_scan_inputs", Attr::Int(1)),
    ]);
    g.add_node(
        "scan",
        op("Scan"),
        a,
        vec![Some(s0), Some(xs)],
        &["s_final"],
    );
    g.outputs = vec![g.find_value("s_final").unwrap()];
    let v = gopt_ir::verify(g).unwrap();
    assert_eq!(
        v.value(v.outputs[0]).ty.as_ref(),
        Some(&ty(DType::F32, &[3]))
    );
}
