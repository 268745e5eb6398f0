//! Graph conversion: constants, tensors of every dtype, declared types, names, optional
//! inputs and outputs, and sub-graph captures.

mod common;
use common::*;
use gopt_frontends::onnx::{self, proto};
use gopt_ir::{Attr, DType, Dim, Graph, Tensor, TensorType};

fn import(m: &proto::ModelProto) -> Graph {
    match onnx::import(&bytes(m), None) {
        Ok(i) => i.model.graph,
        Err(e) => panic!("import failed: {e}"),
    }
}

fn value<'a>(g: &'a Graph, name: &str) -> &'a Tensor {
    let v = g
        .find_value(name)
        .unwrap_or_else(|| panic!("no value `{name}`"));
    g.constant(v)
        .unwrap_or_else(|| panic!("`{name}` is not a constant"))
}

#[test]
fn constant_nodes_become_constants() {
    let sparse = proto::SparseTensorProto {
        values: Some(tf32("v", &[2], &[5.0, 6.0])),
        indices: Some(ti64("i", &[2], &[1, 3])),
        dims: vec![4],
    };
    let sparse_2d = proto::SparseTensorProto {
        values: Some(tf32("v2", &[2], &[7.0, 8.0])),
        indices: Some(ti64("i2", &[2, 2], &[0, 1, 1, 0])),
        dims: vec![2, 2],
    };
    let nodes = vec![
        with(
            node("Constant", &[], &["c_tensor"], "k1"),
            vec![a_tensor("value", tf32("", &[2, 2], &[1.0, 2.0, 3.0, 4.0]))],
        ),
        with(
            node("Constant", &[], &["c_float"], "k2"),
            vec![a_float("value_float", 0.25)],
        ),
        with(
            node("Constant", &[], &["c_floats"], "k3"),
            vec![a_floats("value_floats", &[1.0, 2.0])],
        ),
        with(
            node("Constant", &[], &["c_int"], "k4"),
            vec![a_int("value_int", 7)],
        ),
        with(
            node("Constant", &[], &["c_ints"], "k5"),
            vec![a_ints("value_ints", &[2, 2])],
        ),
        with(
            node("Constant", &[], &["c_sparse"], "k6"),
            vec![a_sparse("sparse_value", sparse)],
        ),
        with(
            node("Constant", &[], &["c_sparse2"], ""),
            vec![a_sparse("sparse_value", sparse_2d)],
        ),
    ];
    let outs = [
        "c_tensor",
        "c_float",
        "c_floats",
        "c_int",
        "c_ints",
        "c_sparse",
        "c_sparse2",
    ];
    let m = model(
        graph(
            "g",
            nodes,
            vec![],
            outs.iter().map(|o| untyped(o)).collect(),
            vec![],
        ),
        13,
    );
    let g = import(&m);
    assert!(g.nodes.is_empty());
    assert_eq!(g.outputs.len(), 7);
    let t = value(&g, "c_tensor");
    assert_eq!((t.dtype(), t.shape()), (DType::F32, &[2usize, 2][..]));
    let t = value(&g, "c_float");
    assert_eq!(
        (t.dtype(), t.shape(), t.to_f64_vec()),
        (DType::F32, &[][..], vec![0.25])
    );
    let t = value(&g, "c_floats");
    assert_eq!((t.shape(), t.to_f64_vec()), (&[2usize][..], vec![1.0, 2.0]));
    let t = value(&g, "c_int");
    assert_eq!(
        (t.dtype(), t.shape(), t.to_i64_vec()),
        (DType::I64, &[][..], vec![7])
    );
    let t = value(&g, "c_ints");
    assert_eq!((t.dtype(), t.to_i64_vec()), (DType::I64, vec![2, 2]));
    assert_eq!(value(&g, "c_sparse").to_f64_vec(), vec![0.0, 5.0, 0.0, 6.0]);
    assert_eq!(
        value(&g, "c_sparse2").to_f64_vec(),
        vec![0.0, 7.0, 8.0, 0.0]
    );
}

#[test]
fn inputs_with_initializers_are_constants() {
    let m = model(
        graph(
            "g",
            vec![node("Add", &["x", "w"], &["y"], "add")],
            vec![vf("x", &[2]), vf("w", &[2])],
            vec![vf("y", &[2])],
            vec![tf32("w", &[2], &[1.0, 2.0])],
        ),
        17,
    );
    let g = import(&m);
    assert_eq!(g.inputs.len(), 1);
    assert_eq!(g.value(g.inputs[0]).name, "x");
    assert_eq!(value(&g, "w").to_f64_vec(), vec![1.0, 2.0]);
}

fn typed(
    name: &str,
    code: i32,
    dims: &[i64],
    f: impl FnOnce(&mut proto::TensorProto),
) -> proto::TensorProto {
    let mut t = proto::TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(code),
        ..Default::default()
    };
    f(&mut t);
    t
}

#[test]
fn typed_data_fields_of_every_dtype() {
    let cases: Vec<(proto::TensorProto, DType, Vec<f64>)> = vec![
        (
            typed("f32", 1, &[2], |t| t.float_data = vec![1.5, -2.0]),
            DType::F32,
            vec![1.5, -2.0],
        ),
        (
            typed("u8", 2, &[2], |t| t.int32_data = vec![0, 255]),
            DType::U8,
            vec![0.0, 255.0],
        ),
        (
            typed("i8", 3, &[2], |t| t.int32_data = vec![-128, 127]),
            DType::I8,
            vec![-128.0, 127.0],
        ),
        (
            typed("u16", 4, &[1], |t| t.int32_data = vec![65535]),
            DType::U16,
            vec![65535.0],
        ),
        (
            typed("i16", 5, &[1], |t| t.int32_data = vec![-300]),
            DType::I16,
            vec![-300.0],
        ),
        (
            typed("i32", 6, &[1], |t| t.int32_data = vec![-7]),
            DType::I32,
            vec![-7.0],
        ),
        (
            typed("i64", 7, &[1], |t| t.int64_data = vec![1 << 40]),
            DType::I64,
            vec![(1u64 << 40) as f64],
        ),
        (
            typed("b", 9, &[3], |t| t.int32_data = vec![1, 0, 1]),
            DType::Bool,
            vec![1.0, 0.0, 1.0],
        ),
        // 0x3C00 is 1.0 in binary16; 0x3F80 is 1.0 in bfloat16.
        (
            typed("f16", 10, &[1], |t| t.int32_data = vec![0x3C00]),
            DType::F16,
            vec![1.0],
        ),
        (
            typed("f64", 11, &[1], |t| t.double_data = vec![0.125]),
            DType::F64,
            vec![0.125],
        ),
        (
            typed("u32", 12, &[1], |t| t.uint64_data = vec![4_000_000_000]),
            DType::U32,
            vec![4e9],
        ),
        (
            typed("u64", 13, &[1], |t| t.uint64_data = vec![5]),
            DType::U64,
            vec![5.0],
        ),
        (
            typed("bf16", 16, &[1], |t| t.int32_data = vec![0x3F80]),
            DType::BF16,
            vec![1.0],
        ),
        (typed("empty", 1, &[0, 3], |_| {}), DType::F32, vec![]),
        (
            typed("scalar", 7, &[], |t| t.int64_data = vec![3]),
            DType::I64,
            vec![3.0],
        ),
    ];
    for (t, dtype, want) in cases {
        let name = t.name.clone().unwrap();
        let x = onnx::tensor_from_proto(&t, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(x.dtype(), dtype, "{name}");
        assert_eq!(x.to_f64_vec(), want, "{name}");
        let dims: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
        assert_eq!(x.shape(), &dims[..], "{name}");
        // Raw little-endian round trip.
        let p = onnx::tensor_to_proto(&name, &x);
        assert!(p.raw_data.is_some());
        assert_eq!(onnx::tensor_from_proto(&p, None).unwrap(), x, "{name}");
    }
    // i64 beyond 2^53 survives exactly.
    let big = typed("big", 7, &[1], |t| t.int64_data = vec![i64::MAX - 1]);
    let x = onnx::tensor_from_proto(&big, None).unwrap();
    assert_eq!(x.to_i64_vec(), vec![i64::MAX - 1]);
    let back = onnx::tensor_from_proto(&onnx::tensor_to_proto("big", &x), None).unwrap();
    assert_eq!(back.to_i64_vec(), vec![i64::MAX - 1]);
}

#[test]
fn tensor_files_round_trip() {
    let dir = tmpdir("tensor_files");
    let path = dir.join("t.pb");
    let t = Tensor::from_f64s(DType::F16, &[2, 3], &[0.5, 1.0, -2.0, 3.0, 4.0, 65504.0]).unwrap();
    onnx::write_tensor_file(&path, "out", &t).unwrap();
    let (name, back) = onnx::read_tensor_file(&path).unwrap();
    assert_eq!(name, "out");
    assert_eq!(back, t);
}

#[test]
fn declared_types_symbols_and_names() {
    let m = model(
        graph(
            "g",
            vec![
                node("Relu", &["x"], &["h"], ""),
                node("Identity", &["h"], &["y"], ""),
                node("Relu", &["y"], &["z"], "Identity_1"),
            ],
            vec![vi("x", 1, &[D::S("batch"), D::U, D::N(4)])],
            vec![
                vi("y", 1, &[D::S("batch"), D::U, D::N(4)]),
                vi("z", 1, &[D::S("batch"), D::S("seq"), D::N(4)]),
            ],
            vec![],
        ),
        17,
    );
    let mut m = m;
    m.graph
        .as_mut()
        .unwrap()
        .value_info
        .push(vi("h", 1, &[D::S("batch"), D::N(3), D::N(4)]));
    let g = import(&m);
    let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["Relu_0", "Identity_1_1", "Identity_1"]);
    let ty = |n: &str| g.value(g.find_value(n).unwrap()).ty.clone();
    let x = ty("x").unwrap();
    assert_eq!(x.dtype, DType::F32);
    assert_eq!(x.shape[0], Dim::sym("batch"));
    assert!(matches!(&x.shape[1], Dim::Sym(s) if s.starts_with("unk__")));
    assert_eq!(x.shape[2], Dim::Known(4));
    assert_eq!(
        ty("h"),
        Some(TensorType::new(
            DType::F32,
            vec![Dim::sym("batch"), Dim::Known(3), Dim::Known(4)]
        ))
    );
    let y = ty("y").unwrap();
    assert!(
        matches!(&y.shape[1], Dim::Sym(s) if s.starts_with("unk__") && y.shape[1] != x.shape[1])
    );
    assert_eq!(ty("z").unwrap().shape[1], Dim::sym("seq"));
    let imp = onnx::import(&bytes(&m), None).unwrap();
    assert_eq!(imp.opsets, vec![("ai.onnx".to_string(), 17)]);
    assert_eq!(imp.ir_version, 8);
    assert_eq!(imp.producer, "gopt-tests");
    assert_eq!(
        imp.model.meta.get("onnx.opset.ai.onnx").map(String::as_str),
        Some("17")
    );
}

#[test]
fn omitted_inputs_and_trailing_outputs() {
    // Identity takes one input; the empty names model omitted optional slots.
    let m = model(
        graph(
            "g",
            vec![
                node("Add", &["x", "x"], &["y", "", ""], "add"),
                node("Relu", &["y", ""], &["z"], "r"),
            ],
            vec![vf("x", &[2])],
            vec![vf("z", &[2])],
            vec![],
        ),
        17,
    );
    let g = import(&m);
    assert_eq!(g.nodes[0].outputs.len(), 1);
    assert_eq!(
        g.nodes[1].inputs,
        vec![Some(g.find_value("y").unwrap()), None]
    );
    // No value without a producer is left behind.
    assert_eq!(g.values.len(), 3);
}

#[test]
fn sub_graph_captures_propagate_through_nesting() {
    // main: If(cond) { then: If(cond) { then: Add(x, w) } else: Identity(x) } else: Identity(bias)
    let inner_then = graph(
        "inner_then",
        vec![node("Add", &["x", "w"], &["it"], "inner_add")],
        vec![],
        vec![untyped("it")],
        vec![],
    );
    let inner_else = graph(
        "inner_else",
        vec![node("Identity", &["x"], &["ie"], "inner_id")],
        vec![],
        vec![untyped("ie")],
        vec![],
    );
    let outer_then = graph(
        "outer_then",
        vec![with(
            node("If", &["cond"], &["ot"], "inner_if"),
            vec![
                a_graph("then_branch", inner_then),
                a_graph("else_branch", inner_else),
            ],
        )],
        vec![],
        vec![untyped("ot")],
        vec![],
    );
    let outer_else = graph("outer_else", vec![], vec![], vec![untyped("bias")], vec![]);
    let m = model(
        graph(
            "g",
            vec![with(
                node("If", &["cond"], &["y"], "outer_if"),
                vec![
                    a_graph("then_branch", outer_then),
                    a_graph("else_branch", outer_else),
                ],
            )],
            vec![vi("cond", 9, &[]), vf("x", &[3])],
            vec![vf("y", &[3])],
            vec![
                tf32("w", &[3], &[1.0, 2.0, 3.0]),
                tf32("bias", &[3], &[0.0; 3]),
            ],
        ),
        16,
    );
    let g = import(&m);
    let captures = |g: &Graph| -> Vec<String> {
        let mut v: Vec<String> = g
            .captures
            .iter()
            .map(|&c| g.value(c).name.clone())
            .collect();
        v.sort();
        v
    };
    let outer_if = &g.nodes[0];
    let ot = outer_if.attrs.graph("then_branch").unwrap();
    let oe = outer_if.attrs.graph("else_branch").unwrap();
    // The middle graph captures `w` only because its nested branch reads it.
    assert_eq!(captures(ot), ["cond", "w", "x"]);
    assert_eq!(captures(oe), ["bias"]);
    // A sub-graph output may be a captured value directly.
    assert_eq!(oe.outputs, oe.captures);
    let inner = &ot.nodes[0];
    assert_eq!(
        captures(inner.attrs.graph("then_branch").unwrap()),
        ["w", "x"]
    );
    assert_eq!(captures(inner.attrs.graph("else_branch").unwrap()), ["x"]);
    gopt_ir::verify::check_structure(&g, &[]).unwrap();
}

#[test]
fn dtype_attributes_become_dtypes() {
    let m = model(
        graph(
            "g",
            vec![with(
                node("Identity", &["x"], &["y"], "id"),
                vec![a_int("to", 10), a_int("other", 10)],
            )],
            vec![vf("x", &[2])],
            vec![vf("y", &[2])],
            vec![],
        ),
        17,
    );
    let g = import(&m);
    assert_eq!(g.nodes[0].attrs.get("to"), Some(&Attr::DType(DType::F16)));
    assert_eq!(g.nodes[0].attrs.get("other"), Some(&Attr::Int(10)));
}

#[test]
fn attributes_of_every_plain_kind() {
    let m = model(
        graph(
            "g",
            vec![with(
                node("Identity", &["x"], &["y"], "id"),
                vec![
                    a_int("i", -3),
                    a_float("f", 0.5),
                    a_str("s", "héllo"),
                    a_ints("is", &[1, 2]),
                    a_floats("fs", &[0.5]),
                    a_tensor("t", ti64("", &[1], &[9])),
                    a_broadcast_legacy(),
                ],
            )],
            vec![vf("x", &[2])],
            vec![vf("y", &[2])],
            vec![],
        ),
        17,
    );
    let g = import(&m);
    let a = &g.nodes[0].attrs;
    assert_eq!(a.int("i").unwrap(), Some(-3));
    assert_eq!(a.float("f").unwrap(), Some(0.5));
    assert_eq!(a.str("s").unwrap(), Some("héllo"));
    assert_eq!(a.ints("is").unwrap(), Some(&[1i64, 2][..]));
    assert_eq!(a.floats("fs").unwrap(), Some(&[0.5f32][..]));
    assert_eq!(a.tensor("t").unwrap().unwrap().to_i64_vec(), vec![9]);
    // Legacy hints with no modern meaning are dropped.
    assert!(!a.has("consumed_inputs"));
}

fn a_broadcast_legacy() -> proto::AttributeProto {
    a_ints("consumed_inputs", &[0])
}

#[test]
fn attributes_without_a_type_field_are_read_by_their_value() {
    let mut i = a_int("k", 4);
    i.r#type = None;
    let mut f = a_floats("fs", &[1.0]);
    f.r#type = None;
    let m = model(
        graph(
            "g",
            vec![with(node("Identity", &["x"], &["y"], "id"), vec![i, f])],
            vec![vf("x", &[2])],
            vec![vf("y", &[2])],
            vec![],
        ),
        17,
    );
    let g = import(&m);
    assert_eq!(g.nodes[0].attrs.int("k").unwrap(), Some(4));
    assert_eq!(g.nodes[0].attrs.floats("fs").unwrap(), Some(&[1.0f32][..]));
}

#[test]
fn inspect_reports_without_converting() {
    let dir = tmpdir("inspect");
    let path = dir.join("m.onnx");
    let m = model(
        graph(
            "g",
            vec![
                node("Add", &["x", "w"], &["a"], "add"),
                node("FancyOp", &["a"], &["b"], "fancy"),
                node("Add", &["b", "w"], &["y"], "add2"),
            ],
            vec![vi("x", 1, &[D::S("batch"), D::U, D::N(2)]), vf("w", &[2])],
            vec![vi("y", 1, &[D::S("batch"), D::U, D::N(2)])],
            vec![tf32("w", &[2], &[1.0, 2.0]), ti64("idx", &[3], &[0, 1, 2])],
        ),
        17,
    );
    write(&path, &bytes(&m));
    let i = onnx::inspect(&path).unwrap();
    assert_eq!(i.node_count, 3);
    assert_eq!(i.param_count, 2);
    assert_eq!(i.weight_bytes, 8 + 24);
    assert_eq!(i.inputs.len(), 1);
    assert_eq!(i.inputs[0].dtype, "f32");
    assert_eq!(i.inputs[0].dims, ["batch", "?", "2"]);
    assert_eq!(i.op_histogram[0], ("ai.onnx".into(), "Add".into(), 2));
    assert_eq!(i.unsupported.len(), 1);
    assert_eq!(i.unsupported[0].node, "fancy");
    assert_eq!(i.opsets, vec![("ai.onnx".to_string(), 17)]);
}
