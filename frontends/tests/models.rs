//! The real models under tests/data/models: inspection, import and their reference
//! tensors.

mod common;
use common::*;
use gopt_frontends::onnx;
use gopt_ir::{DType, Dim};

struct Expect {
    name: &'static str,
    nodes: usize,
    inputs: &'static [(&'static str, &'static str, &'static [&'static str])],
    params: u64,
}

const MODELS: [Expect; 3] = [
    Expect {
        name: "mobilenet_v2",
        nodes: 100,
        inputs: &[("input", "f32", &["batch", "3", "224", "224"])],
        params: 797_138,
    },
    Expect {
        name: "bert_small",
        nodes: 286,
        inputs: &[
            ("input_ids", "i64", &["batch", "seq"]),
            ("attention_mask", "i64", &["batch", "seq"]),
        ],
        params: 322_893,
    },
    Expect {
        name: "gpt2_small",
        nodes: 447,
        inputs: &[("input_ids", "i64", &["batch", "seq"])],
        params: 823_824,
    },
];

fn model_path(name: &str) -> std::path::PathBuf {
    repo()
        .join("tests/data/models")
        .join(name)
        .join("model.onnx")
}

#[test]
fn inspect_real_models() {
    for m in &MODELS {
        let i = onnx::inspect(&model_path(m.name)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(i.node_count, m.nodes, "{}", m.name);
        assert_eq!(i.opsets, vec![("ai.onnx".to_string(), 18)], "{}", m.name);
        assert!(i.producer.starts_with("pytorch"), "{}", m.name);
        assert!(
            (i.param_count as i64 - m.params as i64).abs() < 1000,
            "{}: {} params (Constant nodes add a few)",
            m.name,
            i.param_count
        );
        let got: Vec<(String, String, Vec<String>)> = i
            .inputs
            .iter()
            .map(|x| (x.name.clone(), x.dtype.clone(), x.dims.clone()))
            .collect();
        let want: Vec<(String, String, Vec<String>)> = m
            .inputs
            .iter()
            .map(|(n, d, s)| {
                (
                    n.to_string(),
                    d.to_string(),
                    s.iter().map(|x| x.to_string()).collect(),
                )
            })
            .collect();
        assert_eq!(got, want, "{}", m.name);
        assert_eq!(i.outputs.len(), 1);
        let total: usize = i.op_histogram.iter().map(|h| h.2).sum();
        assert_eq!(total, m.nodes);
    }
}

#[test]
fn import_real_models() {
    for m in &MODELS {
        let path = model_path(m.name);
        let inspection = onnx::inspect(&path).unwrap();
        match onnx::load(&path) {
            Ok(imp) => {
                assert!(inspection.unsupported.is_empty());
                let g = &imp.model.graph;
                let consts = inspection
                    .op_histogram
                    .iter()
                    .find(|h| h.1 == "Constant")
                    .map_or(0, |h| h.2);
                // Constant nodes become constants; old-opset rewrites add none at 18.
                assert_eq!(g.nodes.len(), m.nodes - consts, "{}", m.name);
                assert_eq!(g.inputs.len(), m.inputs.len());
                for (&v, (name, dtype, _)) in g.inputs.iter().zip(m.inputs) {
                    let value = g.value(v);
                    assert_eq!(value.name, *name);
                    let ty = value.ty.as_ref().unwrap();
                    assert_eq!(ty.dtype.name(), *dtype);
                    assert_eq!(ty.shape[0], Dim::sym("batch"));
                }
                assert_eq!(imp.opsets, inspection.opsets);
            }
            Err(e) => {
                // Until every op these models use is in the IR, import must list exactly
                // the missing ops and nothing else.
                assert!(e.is_unsupported(), "{}: {e}", m.name);
                let items = e.unsupported_items();
                assert!(!items.is_empty());
                assert_eq!(items, &inspection.unsupported[..], "{}", m.name);
                for it in items {
                    assert!(gopt_ir::Op::from_onnx_name(&it.op).is_none(), "{e}");
                }
            }
        }
    }
}

#[test]
fn read_reference_tensors() {
    for m in &MODELS {
        let dir = repo().join("tests/data/models").join(m.name);
        for set in ["test_data_set_0", "test_data_set_1"] {
            for (k, (name, dtype, _)) in m.inputs.iter().enumerate() {
                let (n, t) = onnx::read_tensor_file(&dir.join(set).join(format!("input_{k}.pb")))
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(n, *name);
                assert_eq!(t.dtype().name(), *dtype);
            }
            let (_, out) = onnx::read_tensor_file(&dir.join(set).join("output_0.pb")).unwrap();
            assert_eq!(out.dtype(), DType::F32);
            assert!(out.to_f64_vec().iter().all(|x| x.is_finite()));
        }
    }
    let (_, x) = onnx::read_tensor_file(
        &repo().join("tests/data/models/bert_small/test_data_set_1/input_0.pb"),
    )
    .unwrap();
    assert_eq!(x.shape(), &[2, 77]);
    assert!(x.to_i64_vec().iter().all(|&t| (0..1000).contains(&t)));
}
