//! 4-bit tensors: int4 / uint4 constants (raw, `int32_data`, external, `Constant`
//! nodes, sparse) import widened to i8 / u8; every place a 4-bit value would be exposed
//! or computed is refused naming the value or node; float8 is refused by name.

mod common;
use common::*;
use gopt_frontends::onnx::{self, proto};
use gopt_ir::{DType, Graph, Tensor};

const INT4: i32 = 22;
const UINT4: i32 = 21;
const FLOAT8E4M3FN: i32 = 17;
const F32: i32 = 1;

fn import(m: &proto::ModelProto) -> Graph {
    match onnx::import(&bytes(m), None) {
        Ok(i) => i.model.graph,
        Err(e) => panic!("import failed: {e}"),
    }
}

fn import_err(m: &proto::ModelProto) -> String {
    match onnx::import(&bytes(m), None) {
        Ok(_) => panic!("import should fail"),
        Err(e) => {
            assert!(e.is_unsupported(), "not reported as unsupported: {e}");
            e.to_string()
        }
    }
}

fn konst<'a>(g: &'a Graph, name: &str) -> &'a Tensor {
    let v = g.find_value(name).unwrap_or_else(|| panic!("no `{name}`"));
    g.constant(v)
        .unwrap_or_else(|| panic!("`{name}` is not a constant"))
}

/// A 4-bit tensor of `code` with packed `raw_data`.
fn t4_raw(name: &str, code: i32, dims: &[i64], packed: &[u8]) -> proto::TensorProto {
    proto::TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(code),
        raw_data: Some(packed.to_vec().into()),
        ..Default::default()
    }
}

/// `y = DequantizeLinear(w, scale)` (per tensor) with w a constant, opset 21.
fn dequant_model(w: proto::TensorProto, n: i64) -> proto::ModelProto {
    model(
        graph(
            "g",
            vec![node("DequantizeLinear", &["w", "s"], &["y"], "dq")],
            vec![],
            vec![vf("y", &[n])],
            vec![w, tf32("s", &[], &[0.5])],
        ),
        21,
    )
}

#[test]
fn int4_and_uint4_initializers_widen_in_every_storage() {
    // -8, -1, 0, 3, 7: packed low nibble first, the odd count padded with a zero nibble.
    let want = vec![-8, -1, 0, 3, 7];
    let g = import(&dequant_model(
        t4_raw("w", INT4, &[5], &[0xf8, 0x30, 0x07]),
        5,
    ));
    assert_eq!(konst(&g, "w").dtype(), DType::I8);
    assert_eq!(konst(&g, "w").to_i64_vec(), want);

    let mut typed = t4_raw("w", INT4, &[5], &[]);
    typed.raw_data = None;
    typed.int32_data = vec![248, 48, 7];
    let g = import(&dequant_model(typed, 5));
    assert_eq!(konst(&g, "w").to_i64_vec(), want);

    let g = import(&dequant_model(t4_raw("w", UINT4, &[3], &[0xf1, 0x09]), 3));
    assert_eq!(konst(&g, "w").dtype(), DType::U8);
    assert_eq!(konst(&g, "w").to_i64_vec(), vec![1, 15, 9]);
}

#[test]
fn external_int4_data_is_read_packed() {
    let dir = tmpdir("int4-external");
    write(&dir.join("w.bin"), &[0xf8, 0x30, 0x07]);
    let mut w = t4_raw("w", INT4, &[5], &[]);
    w.raw_data = None;
    w.data_location = Some(proto::tensor_proto::DataLocation::External as i32);
    w.external_data = vec![proto::StringStringEntryProto {
        key: Some("location".into()),
        value: Some("w.bin".into()),
    }];
    let path = dir.join("model.onnx");
    write(&path, &bytes(&dequant_model(w, 5)));
    let g = onnx::load(&path).expect("import").model.graph;
    assert_eq!(konst(&g, "w").to_i64_vec(), vec![-8, -1, 0, 3, 7]);
}

#[test]
fn packed_data_of_the_wrong_length_names_the_tensor() {
    let m = dequant_model(t4_raw("w", INT4, &[5], &[0xf8, 0x30]), 5);
    let e = onnx::import(&bytes(&m), None).expect_err("short data");
    assert!(e.to_string().contains("`w`"), "{e}");
    assert!(e.to_string().contains("2 bytes"), "{e}");
}

#[test]
fn constant_nodes_and_layout_ops_carry_int4() {
    // zp from a Constant node, w through Reshape: both feed DequantizeLinear.
    let zp = t4_raw("", INT4, &[], &[0x0e]);
    let m = model(
        graph(
            "g",
            vec![
                with(
                    node("Constant", &[], &["zp"], "zp_const"),
                    vec![a_tensor("value", zp)],
                ),
                node("Reshape", &["w", "shape"], &["w2"], "reshape"),
                node("DequantizeLinear", &["w2", "s", "zp"], &["y"], "dq"),
            ],
            vec![],
            vec![vf("y", &[2, 2])],
            vec![
                t4_raw("w", INT4, &[4], &[0x21, 0x43]),
                ti64("shape", &[2], &[2, 2]),
                tf32("s", &[], &[1.0]),
            ],
        ),
        21,
    );
    let g = import(&m);
    assert_eq!(konst(&g, "zp").to_i64_vec(), vec![-2]);
    let y = gopt_ir::interp::run(&g, &[]).expect("run");
    assert_eq!(y[0].to_f64_vec(), vec![3.0, 4.0, 5.0, 6.0]);
    // A value_info declaring the moved value int4 is left to inference.
    let mut m = m;
    if let Some(g) = m.graph.as_mut() {
        g.value_info.push(vi("w2", INT4, &[D::N(2), D::N(2)]));
    }
    import(&m);
}

#[test]
fn inspect_counts_int4_initializers_as_supported() {
    let m = dequant_model(t4_raw("w", INT4, &[5], &[0xf8, 0x30, 0x07]), 5);
    let i = onnx::inspect_bytes(&bytes(&m)).expect("inspect");
    assert!(i.unsupported.is_empty(), "{:?}", i.unsupported);
}

#[test]
fn int4_graph_inputs_and_outputs_are_refused_by_name() {
    let m = model(
        graph(
            "g",
            vec![node("DequantizeLinear", &["q", "s"], &["y"], "dq")],
            vec![vi("q", INT4, &[D::N(4)])],
            vec![vf("y", &[4])],
            vec![tf32("s", &[], &[1.0])],
        ),
        21,
    );
    let e = import_err(&m);
    assert!(e.contains("`q`") && e.contains("int4"), "{e}");

    let out = |y: proto::ValueInfoProto| {
        model(
            graph(
                "g",
                vec![node("Identity", &["w"], &["y"], "id")],
                vec![],
                vec![y],
                vec![t4_raw("w", UINT4, &[2], &[0x21])],
            ),
            21,
        )
    };
    let e = import_err(&out(vi("y", UINT4, &[D::N(2)])));
    assert!(e.contains("`y`") && e.contains("uint4"), "{e}");
    // Undeclared, the output still carries the widened constant.
    let e = import_err(&out(untyped("y")));
    assert!(e.contains("`y`") && e.contains("uint4"), "{e}");
}

#[test]
fn ops_that_would_compute_int4_are_refused() {
    let zp = t4_raw("zp", INT4, &[], &[0x00]);
    let m = model(
        graph(
            "g",
            vec![node("QuantizeLinear", &["x", "s", "zp"], &["q"], "quant")],
            vec![vf("x", &[4])],
            vec![untyped("q")],
            vec![tf32("s", &[], &[1.0]), zp.clone()],
        ),
        21,
    );
    let e = import_err(&m);
    assert!(
        e.contains("`quant`") && e.contains("zero point `zp` is int4"),
        "{e}"
    );

    let m = model(
        graph(
            "g",
            vec![node("CastLike", &["x", "zp"], &["c"], "cast_like")],
            vec![vf("x", &[4])],
            vec![untyped("c")],
            vec![zp.clone()],
        ),
        21,
    );
    let e = import_err(&m);
    assert!(e.contains("`cast_like`") && e.contains("int4"), "{e}");

    for (op, attr) in [
        ("Cast", a_int("to", INT4 as i64)),
        ("ConstantOfShape", a_tensor("value", zp.clone())),
    ] {
        let m = model(
            graph(
                "g",
                vec![with(node(op, &["x"], &["y"], "n"), vec![attr])],
                vec![vi("x", 7, &[D::N(1)])],
                vec![untyped("y")],
                vec![],
            ),
            21,
        );
        let e = import_err(&m);
        assert!(e.contains("`n`") && e.contains("int4"), "{op}: {e}");
    }
}

#[test]
fn float8_is_refused_by_name_everywhere() {
    let e = import_err(&model(
        graph(
            "g",
            vec![node("Cast", &["x"], &["y"], "c")],
            vec![vi("x", FLOAT8E4M3FN, &[D::N(2)])],
            vec![vf("y", &[2])],
            vec![],
        ),
        21,
    ));
    assert!(e.contains("`x`") && e.contains("float8e4m3fn"), "{e}");
    let e = import_err(&model(
        graph(
            "g",
            vec![with(
                node("Cast", &["x"], &["y"], "to_f8"),
                vec![a_int("to", FLOAT8E4M3FN as i64)],
            )],
            vec![vf("x", &[2])],
            vec![untyped("y")],
            vec![],
        ),
        21,
    ));
    assert!(e.contains("`to_f8`") && e.contains("float8e4m3fn"), "{e}");
    let mut f8 = t4_raw("", FLOAT8E4M3FN, &[2], &[1, 2]);
    f8.name = None;
    let e = import_err(&model(
        graph(
            "g",
            vec![with(
                node("Constant", &[], &["k"], "k_const"),
                vec![a_tensor("value", f8)],
            )],
            vec![],
            vec![vi("k", F32, &[D::N(2)])],
            vec![],
        ),
        21,
    ));
    assert!(e.contains("`k_const`") && e.contains("float8e4m3fn"), "{e}");
}
