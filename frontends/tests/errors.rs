//! Bad input: every malformed or unsupported model fails with an error (never a panic)
//! whose message names the file, node, op, opset or tensor at fault.

mod common;
use common::*;
use gopt_frontends::onnx::{self, proto, ImportError};
use prost::Message;

fn import_err(m: &proto::ModelProto) -> ImportError {
    match onnx::import(&bytes(m), None) {
        Ok(_) => panic!("import should fail"),
        Err(e) => e,
    }
}

fn relu_model() -> proto::ModelProto {
    model(
        graph(
            "g",
            vec![node("Relu", &["x"], &["y"], "act")],
            vec![vf("x", &[2, 3])],
            vec![vf("y", &[2, 3])],
            vec![],
        ),
        17,
    )
}

#[test]
fn truncated_file_is_a_decode_error_naming_the_file() {
    let dir = tmpdir("truncated");
    let full = bytes(&relu_model());
    let path = dir.join("model.onnx");
    write(&path, &full[..full.len() / 2]);
    let e = onnx::load(&path).unwrap_err();
    let msg = e.to_string();
    assert!(!e.is_unsupported());
    assert!(msg.contains("model.onnx"), "{msg}");
    assert!(msg.contains("not a valid ONNX protobuf"), "{msg}");
}

#[test]
fn random_bytes_are_rejected() {
    // A deterministic pseudo-random byte string.
    let mut x: u32 = 0x1234_5678;
    let data: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let e = onnx::import(&data, None).unwrap_err();
    assert!(
        matches!(
            e,
            ImportError::Decode { .. } | ImportError::NotAModel { .. }
        ),
        "{e}"
    );
    assert!(!e.is_unsupported());
}

#[test]
fn missing_file_is_an_io_error_naming_it() {
    let e = onnx::load(std::path::Path::new("/nonexistent/dir/model.onnx")).unwrap_err();
    assert!(matches!(e, ImportError::Io { .. }));
    assert!(e.to_string().contains("/nonexistent/dir/model.onnx"), "{e}");
}

#[test]
fn a_tensor_proto_is_not_a_model() {
    let t = tf32("w", &[2], &[1.0, 2.0]).encode_to_vec();
    let e = onnx::import(&t, None).unwrap_err();
    assert!(
        matches!(
            e,
            ImportError::NotAModel { .. } | ImportError::Decode { .. }
        ),
        "{e}"
    );
    // An empty message decodes but has no graph.
    let e = onnx::import(&[], None).unwrap_err();
    assert!(matches!(e, ImportError::NotAModel { .. }), "{e}");
    assert!(e.to_string().contains("no graph"), "{e}");
}

#[test]
fn model_without_opset_import_is_not_a_model() {
    let mut m = relu_model();
    m.opset_import.clear();
    let e = import_err(&m);
    assert!(matches!(e, ImportError::NotAModel { .. }), "{e}");
    assert!(e.to_string().contains("opset"), "{e}");
    let mut m = relu_model();
    m.ir_version = None;
    assert!(matches!(import_err(&m), ImportError::NotAModel { .. }));
}

#[test]
fn undefined_input_names_node_and_value() {
    let m = model(
        graph(
            "g",
            vec![node("Add", &["x", "w"], &["y"], "add_w")],
            vec![vf("x", &[2])],
            vec![vf("y", &[2])],
            vec![],
        ),
        17,
    );
    let e = import_err(&m);
    let msg = e.to_string();
    assert!(matches!(e, ImportError::Invalid { .. }), "{msg}");
    assert!(msg.contains("`add_w` (Add, opset 17)"), "{msg}");
    assert!(msg.contains("`w`"), "{msg}");
}

#[test]
fn missing_graph_output_is_invalid() {
    let mut m = relu_model();
    m.graph.as_mut().unwrap().output.push(vf("z", &[1]));
    let msg = import_err(&m).to_string();
    assert!(msg.contains("graph output `z`"), "{msg}");
}

#[test]
fn duplicate_value_names_are_invalid() {
    let m = model(
        graph(
            "g",
            vec![
                node("Relu", &["x"], &["y"], "a"),
                node("Relu", &["x"], &["y"], "b"),
            ],
            vec![vf("x", &[2])],
            vec![vf("y", &[2])],
            vec![],
        ),
        17,
    );
    let msg = import_err(&m).to_string();
    assert!(msg.contains("`y` is defined twice"), "{msg}");
    assert!(msg.contains("`b` (Relu, opset 17)"), "{msg}");
}

#[test]
fn cycle_is_reported_with_a_node_name() {
    let m = model(
        graph(
            "g",
            vec![
                node("Add", &["x", "b"], &["a"], "first"),
                node("Relu", &["a"], &["b"], "second"),
            ],
            vec![vf("x", &[2])],
            vec![vf("b", &[2])],
            vec![],
        ),
        17,
    );
    let e = import_err(&m);
    let msg = e.to_string();
    assert!(matches!(e, ImportError::Ir(_)), "{msg}");
    assert!(msg.contains("cycle"), "{msg}");
    assert!(msg.contains("first") || msg.contains("second"), "{msg}");
}

#[test]
fn unknown_ops_are_listed_together() {
    let then_g = graph(
        "then",
        vec![node("NoSuchOpInside", &["x"], &["t"], "inner")],
        vec![],
        vec![vf("t", &[2])],
        vec![],
    );
    let else_g = graph(
        "else",
        vec![node("Identity", &["x"], &["e"], "inner_ok")],
        vec![],
        vec![vf("e", &[2])],
        vec![],
    );
    let m = model(
        graph(
            "g",
            vec![
                node("FancyOp", &["x"], &["a"], "fancy"),
                node("Relu", &["a"], &["b"], "ok"),
                node("OtherOp", &["b"], &["c"], ""),
                in_domain(node("MyOp", &["c"], &["d"], "custom"), "com.example"),
                with(
                    node("If", &["cond"], &["y"], "branch"),
                    vec![
                        a_graph("then_branch", then_g),
                        a_graph("else_branch", else_g),
                    ],
                ),
            ],
            vec![vf("x", &[2]), vi("cond", 9, &[])],
            vec![vf("y", &[2]), vf("d", &[2])],
            vec![],
        ),
        17,
    );
    let e = import_err(&m);
    assert!(e.is_unsupported());
    let items = e.unsupported_items();
    let names: Vec<(&str, &str)> = items
        .iter()
        .map(|i| (i.node.as_str(), i.op.as_str()))
        .collect();
    assert!(names.contains(&("fancy", "FancyOp")), "{e}");
    assert!(names.contains(&("OtherOp_2", "OtherOp")), "{e}");
    assert!(names.contains(&("custom", "MyOp")), "{e}");
    assert!(names.contains(&("inner", "NoSuchOpInside")), "{e}");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{} unsupported", items.len())),
        "{msg}"
    );
    assert!(
        msg.contains("node `fancy` (FancyOp, ai.onnx opset 17)"),
        "{msg}"
    );
    assert!(msg.contains("domain `com.example`"), "{msg}");
}

#[test]
fn unsupported_opset_names_the_opset() {
    for opset in [0, 29] {
        let e = import_err(&model(relu_model().graph.unwrap(), opset));
        assert!(e.is_unsupported(), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("domain ai.onnx opset {opset}")),
            "{msg}"
        );
    }
    // Before opset 7, only ops whose opset-7 form already existed import: Relu took
    // its current form in opset 6.
    let e = import_err(&model(relu_model().graph.unwrap(), 5));
    assert!(e.is_unsupported(), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("node `act` (Relu, ai.onnx opset 5)"), "{msg}");
    assert!(msg.contains("from opset 6"), "{msg}");
    assert!(onnx::import(&bytes(&model(relu_model().graph.unwrap(), 6)), None).is_ok());
}

#[test]
fn load_errors_name_the_file() {
    let dir = tmpdir("load_ctx");
    let path = dir.join("bad.onnx");
    let m = model(
        graph(
            "g",
            vec![node("FancyOp", &["x"], &["y"], "fancy")],
            vec![vf("x", &[2])],
            vec![vf("y", &[2])],
            vec![],
        ),
        13,
    );
    write(&path, &bytes(&m));
    let e = onnx::load(&path).unwrap_err();
    assert!(e.is_unsupported());
    let msg = e.to_string();
    assert!(msg.starts_with(&path.display().to_string()), "{msg}");
    assert!(
        msg.contains("node `fancy` (FancyOp, ai.onnx opset 13)"),
        "{msg}"
    );
}

#[test]
fn unsupported_dtypes_are_reported_as_unsupported() {
    // A string graph input.
    let m = model(
        graph(
            "g",
            vec![node("Identity", &["s"], &["y"], "id")],
            vec![vi("s", 8, &[D::N(2)])],
            vec![vi("y", 8, &[D::N(2)])],
            vec![],
        ),
        17,
    );
    let e = import_err(&m);
    assert!(e.is_unsupported(), "{e}");
    assert!(e.to_string().contains("string"), "{e}");
    // A float8 initializer.
    let mut t = tf32("w", &[2], &[]);
    t.data_type = Some(17);
    t.raw_data = Some(vec![1, 2].into());
    let m = model(
        graph(
            "g",
            vec![node("Add", &["x", "w"], &["y"], "add")],
            vec![vf("x", &[2])],
            vec![vf("y", &[2])],
            vec![t],
        ),
        19,
    );
    let e = import_err(&m);
    assert!(matches!(e, ImportError::UnsupportedDType { .. }), "{e}");
    assert!(e.to_string().contains("float8e4m3fn"), "{e}");
    assert!(e.to_string().contains("`w`"), "{e}");
    // Cast to a complex type.
    let m = model(
        graph(
            "g",
            vec![with(
                node("Cast", &["x"], &["y"], "to_c"),
                vec![a_int("to", 14)],
            )],
            vec![vf("x", &[2])],
            vec![vf("y", &[2])],
            vec![],
        ),
        17,
    );
    let e = import_err(&m);
    assert!(e.is_unsupported(), "{e}");
    assert!(e.to_string().contains("complex64"), "{e}");
}

#[test]
fn unsupported_attribute_kinds_are_named() {
    let mut a = a_int("xs", 0);
    a.r#type = Some(proto::attribute_proto::AttributeType::Tensors as i32);
    a.i = None;
    a.tensors = vec![tf32("t", &[1], &[1.0])];
    let mut r = a_int("alpha", 0);
    r.i = None;
    r.ref_attr_name = Some("outer_alpha".into());
    let m = model(
        graph(
            "g",
            vec![with(node("Relu", &["x"], &["y"], "act"), vec![a, r])],
            vec![vf("x", &[2])],
            vec![vf("y", &[2])],
            vec![],
        ),
        17,
    );
    let e = import_err(&m);
    assert!(e.is_unsupported());
    let msg = e.to_string();
    assert!(msg.contains("`xs` has kind TENSORS"), "{msg}");
    assert!(
        msg.contains("`alpha` refers to a function attribute"),
        "{msg}"
    );
}

#[test]
fn bad_tensor_data_is_invalid() {
    // Raw data of the wrong length.
    let mut t = tf32("w", &[3], &[]);
    t.raw_data = Some(vec![0; 8].into());
    let m = model(
        graph(
            "g",
            vec![node("Add", &["x", "w"], &["y"], "add")],
            vec![vf("x", &[3])],
            vec![vf("y", &[3])],
            vec![t],
        ),
        17,
    );
    let msg = import_err(&m).to_string();
    assert!(msg.contains("`w`") && msg.contains("8 bytes"), "{msg}");
    // Typed data of the wrong length.
    let m = model(
        graph(
            "g",
            vec![node("Add", &["x", "w"], &["y"], "add")],
            vec![vf("x", &[3])],
            vec![vf("y", &[3])],
            vec![tf32("w", &[3], &[1.0])],
        ),
        17,
    );
    let msg = import_err(&m).to_string();
    assert!(msg.contains("`w`") && msg.contains("float_data"), "{msg}");
    // Dims whose product overflows.
    let m = model(
        graph(
            "g",
            vec![node("Add", &["x", "w"], &["y"], "add")],
            vec![vf("x", &[3])],
            vec![vf("y", &[3])],
            vec![tf32("w", &[1 << 40, 1 << 40], &[])],
        ),
        17,
    );
    let e = import_err(&m);
    assert!(matches!(e, ImportError::ShapeOverflow { .. }), "{e}");
    // A negative dim.
    let m = model(
        graph(
            "g",
            vec![node("Add", &["x", "w"], &["y"], "add")],
            vec![vf("x", &[3])],
            vec![vf("y", &[3])],
            vec![tf32("w", &[-3], &[])],
        ),
        17,
    );
    let msg = import_err(&m).to_string();
    assert!(msg.contains("negative dim"), "{msg}");
}

#[test]
fn graph_input_without_type_is_invalid() {
    let m = model(
        graph(
            "g",
            vec![node("Relu", &["x"], &["y"], "act")],
            vec![untyped("x")],
            vec![vf("y", &[2])],
            vec![],
        ),
        17,
    );
    let msg = import_err(&m).to_string();
    assert!(msg.contains("graph input `x`"), "{msg}");
}

/// A model whose initializer `w` lives in external data described by `entries`.
fn external_model(entries: &[(&str, &str)]) -> proto::ModelProto {
    let w = proto::TensorProto {
        name: Some("w".into()),
        dims: vec![4],
        data_type: Some(1),
        data_location: Some(proto::tensor_proto::DataLocation::External as i32),
        external_data: entries
            .iter()
            .map(|(k, v)| proto::StringStringEntryProto {
                key: Some(k.to_string()),
                value: Some(v.to_string()),
            })
            .collect(),
        ..Default::default()
    };
    model(
        graph(
            "g",
            vec![node("Add", &["x", "w"], &["y"], "add")],
            vec![vf("x", &[4])],
            vec![vf("y", &[4])],
            vec![w],
        ),
        17,
    )
}

fn external_err(dir: &std::path::Path, entries: &[(&str, &str)]) -> String {
    let path = dir.join("model.onnx");
    write(&path, &bytes(&external_model(entries)));
    let e = onnx::load(&path).unwrap_err();
    assert!(!e.is_unsupported(), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("tensor `w`: external data"), "{msg}");
    msg
}

#[test]
fn external_data_is_read_from_the_models_directory() {
    let dir = tmpdir("ext_ok");
    let data: Vec<u8> = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::create_dir_all(dir.join("weights")).unwrap();
    write(&dir.join("weights/w.bin"), &data);
    let path = dir.join("model.onnx");
    write(
        &path,
        &bytes(&external_model(&[
            ("location", "weights/w.bin"),
            ("offset", "8"),
            ("length", "16"),
        ])),
    );
    let imp = onnx::load(&path).unwrap();
    let g = &imp.model.graph;
    let w = g.find_value("w").unwrap();
    assert_eq!(
        g.constant(w).unwrap().to_f64_vec(),
        vec![2.0, 3.0, 4.0, 5.0]
    );
    // From bytes, there is no directory to resolve against.
    let e = onnx::import(&std::fs::read(&path).unwrap(), None).unwrap_err();
    assert!(e.to_string().contains("not read from a file"), "{e}");
}

#[test]
fn external_data_outside_the_directory_is_refused() {
    let dir = tmpdir("ext_bad");
    let inner = dir.join("model_dir");
    std::fs::create_dir_all(&inner).unwrap();
    write(&dir.join("secret.bin"), &[0u8; 64]);
    write(&inner.join("short.bin"), &[0u8; 10]);
    write(&inner.join("w.bin"), &[0u8; 16]);
    let msg = external_err(&inner, &[("location", "../secret.bin")]);
    assert!(msg.contains("leaves the model's directory"), "{msg}");
    let abs = dir.join("secret.bin").display().to_string();
    let msg = external_err(&inner, &[("location", &abs)]);
    assert!(msg.contains("absolute"), "{msg}");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.join("secret.bin"), inner.join("link.bin")).unwrap();
        let msg = external_err(&inner, &[("location", "link.bin"), ("length", "16")]);
        assert!(msg.contains("outside the model's directory"), "{msg}");
    }
    let msg = external_err(&inner, &[("location", "missing.bin")]);
    assert!(msg.contains("cannot open"), "{msg}");
    let msg = external_err(&inner, &[("location", "short.bin"), ("length", "16")]);
    assert!(msg.contains("shorter than offset 0 + length 16"), "{msg}");
    let msg = external_err(
        &inner,
        &[("location", "w.bin"), ("offset", "4"), ("length", "16")],
    );
    assert!(msg.contains("shorter"), "{msg}");
    let msg = external_err(&inner, &[("location", "w.bin"), ("length", "12")]);
    assert!(msg.contains("declared length 12"), "{msg}");
    let msg = external_err(&inner, &[("location", "w.bin"), ("offset", "x")]);
    assert!(msg.contains("not a byte count"), "{msg}");
}

#[test]
fn bad_constant_nodes_are_invalid() {
    let m = model(
        graph(
            "g",
            vec![node("Constant", &[], &["c"], "k")],
            vec![],
            vec![vf("c", &[1])],
            vec![],
        ),
        17,
    );
    let msg = import_err(&m).to_string();
    assert!(msg.contains("`k` (Constant, opset 17)"), "{msg}");
    let mut s = a_str("value_string", "hi");
    s.r#type = Some(proto::attribute_proto::AttributeType::String as i32);
    let m = model(
        graph(
            "g",
            vec![with(node("Constant", &[], &["c"], "k"), vec![s])],
            vec![],
            vec![vf("c", &[])],
            vec![],
        ),
        17,
    );
    let e = import_err(&m);
    assert!(e.is_unsupported(), "{e}");
}

#[test]
fn sub_graph_reading_an_unknown_name_is_invalid() {
    let then_g = graph(
        "then",
        vec![node("Identity", &["nowhere"], &["t"], "inner")],
        vec![],
        vec![vf("t", &[2])],
        vec![],
    );
    let else_g = graph(
        "else",
        vec![node("Identity", &["x"], &["e"], "inner2")],
        vec![],
        vec![vf("e", &[2])],
        vec![],
    );
    let m = model(
        graph(
            "g",
            vec![with(
                node("If", &["cond"], &["y"], "branch"),
                vec![
                    a_graph("then_branch", then_g),
                    a_graph("else_branch", else_g),
                ],
            )],
            vec![vf("x", &[2]), vi("cond", 9, &[])],
            vec![vf("y", &[2])],
            vec![],
        ),
        17,
    );
    let msg = import_err(&m).to_string();
    assert!(msg.contains("`branch` (If, opset 17)"), "{msg}");
    assert!(msg.contains("`nowhere`"), "{msg}");
}

#[test]
fn bad_tensor_files_name_the_file() {
    let dir = tmpdir("pb");
    let path = dir.join("input_0.pb");
    write(&path, &[0xff, 0xff, 0xff]);
    let msg = onnx::read_tensor_file(&path).unwrap_err().to_string();
    assert!(msg.contains("input_0.pb"), "{msg}");
    let mut t = tf32("x", &[2], &[]);
    t.data_type = Some(8);
    t.string_data = vec![b"a".to_vec(), b"b".to_vec()];
    write(&path, &t.encode_to_vec());
    let e = onnx::read_tensor_file(&path).unwrap_err();
    assert!(e.is_unsupported());
    assert!(e.to_string().contains("input_0.pb"), "{e}");
    assert!(e.to_string().contains("string"), "{e}");
}

#[test]
fn internal_fused_op_names_are_not_onnx_ops() {
    // gopt's fused ops (what its optimizer produces) are not ONNX ops: a model naming
    // one, even in the default domain, is unsupported like any unknown op.
    let m = model(
        graph(
            "g",
            vec![
                node("FusedMatMul", &["a", "b"], &["y"], "fmm"),
                node("FusedConv", &["x", "w"], &["z"], "fconv"),
                node("FusedElementwise", &["y"], &["e"], "fe"),
            ],
            vec![
                vf("a", &[2, 3]),
                vf("b", &[3, 4]),
                vf("x", &[1, 2, 5, 5]),
                vf("w", &[3, 2, 3, 3]),
            ],
            vec![vf("e", &[2, 4]), vf("z", &[1, 3, 3, 3])],
            vec![],
        ),
        17,
    );
    let e = import_err(&m);
    assert!(e.is_unsupported(), "{e}");
    let items = e.unsupported_items();
    let found: Vec<(&str, &str, &str)> = items
        .iter()
        .map(|i| (i.node.as_str(), i.op.as_str(), i.reason.as_str()))
        .collect();
    for (n, op) in [
        ("fmm", "FusedMatMul"),
        ("fconv", "FusedConv"),
        ("fe", "FusedElementwise"),
    ] {
        assert!(
            found.contains(&(n, op, "gopt does not implement this op")),
            "{op}: {e}"
        );
        assert!(gopt_ir::Op::from_name(op).is_some(), "the IR has {op}");
        assert!(
            gopt_ir::Op::from_onnx_name(op).is_none(),
            "{op} is internal"
        );
    }
    assert_eq!(items.len(), 3, "{e}");
}
