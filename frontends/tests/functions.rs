//! Model-local functions are inlined: formals bound to the call's names, internal names
//! made unique per call, attribute references resolved, nested calls expanded.

mod common;
use common::*;
use gopt_frontends::onnx::{self, proto};
use gopt_ir::{DType, Tensor};

fn func(
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    nodes: Vec<proto::NodeProto>,
) -> proto::FunctionProto {
    proto::FunctionProto {
        name: Some(name.into()),
        domain: Some("pkg".into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        node: nodes,
        opset_import: vec![proto::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(18),
        }],
        ..Default::default()
    }
}

fn with_pkg(mut m: proto::ModelProto, fns: Vec<proto::FunctionProto>) -> proto::ModelProto {
    m.opset_import.push(proto::OperatorSetIdProto {
        domain: Some("pkg".into()),
        version: Some(1),
    });
    m.functions = fns;
    m
}

/// `Scale(x) = x * alpha` with `alpha` an attribute of the call (default 2).
fn scale() -> proto::FunctionProto {
    let mut c = a_float("value_float", 0.0);
    c.f = None;
    c.ref_attr_name = Some("alpha".into());
    let mut f = func(
        "Scale",
        &["x"],
        &["y"],
        vec![
            with(node("Constant", &[], &["a"], "k"), vec![c]),
            node("Mul", &["x", "a"], &["y"], "mul"),
        ],
    );
    f.attribute_proto = vec![a_float("alpha", 2.0)];
    f
}

/// `Twice(x) = Scale(Scale(x, alpha=3))` (default alpha for the second).
fn twice() -> proto::FunctionProto {
    func(
        "Twice",
        &["x"],
        &["y"],
        vec![
            in_domain(
                with(
                    node("Scale", &["x"], &["t"], "first"),
                    vec![a_float("alpha", 3.0)],
                ),
                "pkg",
            ),
            in_domain(node("Scale", &["t"], &["y"], ""), "pkg"),
        ],
    )
}

fn run(m: &proto::ModelProto, x: &[f64]) -> Vec<f64> {
    let imp = onnx::import(&bytes(m), None).unwrap_or_else(|e| panic!("{e}"));
    let g = gopt_ir::verify(imp.model.graph).unwrap_or_else(|e| panic!("{e}"));
    let x = Tensor::from_f64s(DType::F32, &[x.len()], x).unwrap();
    gopt_ir::interp::run(&g, &[x]).unwrap()[0].to_f64_vec()
}

#[test]
fn calls_are_inlined_with_attributes_and_nesting() {
    let m = with_pkg(
        model(
            graph(
                "g",
                vec![
                    in_domain(node("Twice", &["x"], &["a"], "call1"), "pkg"),
                    in_domain(
                        with(
                            node("Scale", &["a"], &["y"], "call2"),
                            vec![a_float("alpha", 0.5)],
                        ),
                        "pkg",
                    ),
                ],
                vec![vf("x", &[2])],
                vec![vf("y", &[2])],
                vec![],
            ),
            18,
        ),
        vec![scale(), twice()],
    );
    // x * 3 * 2 * 0.5
    assert_eq!(run(&m, &[1.0, -2.0]), vec![3.0, -6.0]);
    let g = onnx::import(&bytes(&m), None).unwrap().model.graph;
    let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["call1/first/mul", "call1/Scale_1/mul", "call2/mul"]);
    let i = onnx::inspect_bytes(&bytes(&m)).unwrap();
    assert!(i.unsupported.is_empty(), "{:?}", i.unsupported);
}

#[test]
fn function_opset_mismatch_and_recursion_are_unsupported() {
    let mut f = scale();
    f.opset_import[0].version = Some(13);
    let m = with_pkg(
        model(
            graph(
                "g",
                vec![in_domain(node("Scale", &["x"], &["y"], "call"), "pkg")],
                vec![vf("x", &[2])],
                vec![vf("y", &[2])],
                vec![],
            ),
            18,
        ),
        vec![f],
    );
    let e = onnx::import(&bytes(&m), None).unwrap_err();
    assert!(e.is_unsupported());
    assert!(e.to_string().contains("`call` (Scale, pkg opset 1)"), "{e}");
    assert!(
        e.to_string().contains("ai.onnx opset 13, the model 18"),
        "{e}"
    );
    let rec = func(
        "Loopy",
        &["x"],
        &["y"],
        vec![in_domain(node("Loopy", &["x"], &["y"], "again"), "pkg")],
    );
    let m = with_pkg(
        model(
            graph(
                "g",
                vec![in_domain(node("Loopy", &["x"], &["y"], "call"), "pkg")],
                vec![vf("x", &[2])],
                vec![vf("y", &[2])],
                vec![],
            ),
            18,
        ),
        vec![rec],
    );
    let e = onnx::import(&bytes(&m), None).unwrap_err();
    assert!(e.is_unsupported());
    assert!(e.to_string().contains("recursion"), "{e}");
}
