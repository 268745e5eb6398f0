//! Weight-only quantized models end to end on the CPU: ONNX Runtime's
//! `com.microsoft.MatMulNBits` and int8 / int4 / uint4 `DequantizeLinear → MatMul`
//! (tests/data/quantized, written by scripts/make-quantized.py with numpy reference
//! outputs) each match their reference interpreted as imported and compiled with the
//! default options; malformed MatMulNBits nodes and 4-bit values gopt does not compute
//! are refused by the CLI with exit code 2 and one line naming the node and the problem.
//!
//! Tolerances are each case's `tolerance.json`: f32 rtol 1e-5 / atol 1e-6, f16 rtol
//! 2e-3 / atol 2e-3 (scripts/make-quantized.py says why).

use gopt::testing::{compare, discover, run_case, Case, Options, Status, Tolerance};
use gopt_frontends::onnx::proto as pb;
use pb::tensor_shape_proto::{dimension::Value as DimValue, Dimension};
use prost::Message;
use std::path::{Path, PathBuf};

mod common;
use common::cli::{assert_error, gopt, root, scratch};

/// The cases scripts/make-quantized.py writes.
const CASES: usize = 14;

fn cases() -> Vec<Case> {
    let dir = root().join("tests/data/quantized");
    let cases = discover(&[dir]).unwrap_or_else(|e| panic!("tests/data/quantized: {e}"));
    assert_eq!(cases.len(), CASES, "run scripts/make-quantized.py");
    cases
}

#[test]
fn every_case_matches_its_reference_interpreted() {
    for case in cases() {
        let r = run_case(&case, &Options::default());
        assert_eq!(r.status, Status::Pass, "{r}");
        assert_eq!(r.data_sets_passed, 1, "{r}");
    }
}

#[test]
fn every_case_matches_its_reference_optimized() {
    let opts = Options {
        pipeline: Some(gopt::Options::new()),
        ..Options::default()
    };
    for case in cases() {
        let r = run_case(&case, &opts);
        assert_eq!(r.status, Status::Pass, "{r}");
        assert!(r.note.is_none(), "{} was not optimized: {r}", case.name);
    }
}

/// `gopt::compile` with the default options (every bucket), then a run.
#[test]
fn every_case_compiles_and_runs() {
    for case in cases() {
        let model = gopt::load_model(&case.dir.join("model.onnx")).expect("import");
        let set = case.dir.join("test_data_set_0");
        let read = |f: &str| {
            gopt_frontends::onnx::read_tensor_file(&set.join(f))
                .unwrap_or_else(|e| panic!("{}: {e}", case.name))
                .1
        };
        let tol: Tolerance = std::fs::read_to_string(case.dir.join("tolerance.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| panic!("{}: tolerance.json", case.name));
        let mut compiled = gopt::compile(&model, &gopt::Options::new())
            .unwrap_or_else(|e| panic!("{}: compile: {e}", case.name));
        let got = compiled
            .run(&[read("input_0.pb")])
            .unwrap_or_else(|e| panic!("{}: run: {e}", case.name));
        compare(&got[0], &read("output_0.pb"), tol)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    }
}

#[test]
fn int4_weights_import_widened_and_nbits_stays_one_node() {
    let path = root().join("tests/data/quantized/qdq_int4_blocked/model.onnx");
    let g = gopt::load_model(&path).expect("import").model.graph;
    let w = g.find_value("W").and_then(|v| g.constant(v)).expect("W");
    assert_eq!(w.dtype(), gopt::DType::I8);
    assert!(w.to_i64_vec().iter().all(|q| (-8..=7).contains(q)));
    let path = root().join("tests/data/quantized/nbits_b4_blk16/model.onnx");
    let g = gopt::load_model(&path).expect("import").model.graph;
    let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, ["MatMulNBits"]);
}

// ---- bad input through the CLI ------------------------------------------------------

const F32: i32 = 1;
const U8: i32 = 2;
const INT4: i32 = 22;

fn value_info(name: &str, elem: i32, dims: &[i64]) -> pb::ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            denotation: None,
            value: Some(DimValue::DimValue(d)),
        })
        .collect();
    pb::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(pb::TypeProto {
            denotation: None,
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(pb::TensorShapeProto { dim }),
            })),
        }),
        ..Default::default()
    }
}

/// A tensor of `elem` filled with `len(dims)` bytes per element set to 1.
fn tensor(name: &str, elem: i32, dims: &[i64]) -> pb::TensorProto {
    let n: i64 = dims.iter().product();
    let width = match elem {
        F32 | 6 => 4,
        _ => 1,
    };
    pb::TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(elem),
        raw_data: Some(vec![0u8; (n * width) as usize].into()),
        ..Default::default()
    }
}

fn int_attr(name: &str, v: i64) -> pb::AttributeProto {
    pb::AttributeProto {
        name: Some(name.into()),
        r#type: Some(pb::attribute_proto::AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

/// A MatMulNBits model to break: A f32 [2, K], K 32, N 4, 4 bits, blocks of 16, so B
/// is u8 [4, 2, 8] and scales f32 [8].
struct Nbits {
    attrs: Vec<(&'static str, i64)>,
    b: Vec<i64>,
    scales: Vec<i64>,
    a_k: i64,
    g_idx: bool,
    op: &'static str,
    domain: &'static str,
    contrib_opset: bool,
}

impl Default for Nbits {
    fn default() -> Nbits {
        Nbits {
            attrs: vec![("K", 32), ("N", 4), ("bits", 4), ("block_size", 16)],
            b: vec![4, 2, 8],
            scales: vec![8],
            a_k: 32,
            g_idx: false,
            op: "MatMulNBits",
            domain: "com.microsoft",
            contrib_opset: true,
        }
    }
}

impl Nbits {
    fn with_attr(mut self, name: &'static str, v: i64) -> Nbits {
        match self.attrs.iter_mut().find(|(n, _)| *n == name) {
            Some(a) => a.1 = v,
            None => self.attrs.push((name, v)),
        }
        self
    }

    fn proto(&self) -> pb::ModelProto {
        let mut inputs: Vec<String> = ["A", "B", "scales"].map(String::from).to_vec();
        let mut inits = vec![
            tensor("B", U8, &self.b),
            tensor("scales", F32, &self.scales),
        ];
        if self.g_idx {
            inputs.extend(["".into(), "g_idx".into()]);
            inits.push(tensor("g_idx", 6, &[self.a_k]));
        }
        let node = pb::NodeProto {
            op_type: Some(self.op.into()),
            domain: Some(self.domain.into()),
            name: Some("mm_q4".into()),
            input: inputs,
            output: vec!["Y".into()],
            attribute: self.attrs.iter().map(|&(n, v)| int_attr(n, v)).collect(),
            ..Default::default()
        };
        let mut opsets = vec![("", 21)];
        if self.contrib_opset {
            opsets.push(("com.microsoft", 1));
        }
        let a = value_info("A", F32, &[2, self.a_k]);
        let y = value_info("Y", F32, &[2, 4]);
        model(node, a, y, inits, &opsets)
    }
}

/// A one-node model.
fn model(
    node: pb::NodeProto,
    input: pb::ValueInfoProto,
    output: pb::ValueInfoProto,
    inits: Vec<pb::TensorProto>,
    opsets: &[(&str, i64)],
) -> pb::ModelProto {
    pb::ModelProto {
        ir_version: Some(10),
        opset_import: opsets
            .iter()
            .map(|&(d, v)| pb::OperatorSetIdProto {
                domain: Some(d.into()),
                version: Some(v),
            })
            .collect(),
        graph: Some(pb::GraphProto {
            name: Some("g".into()),
            node: vec![node],
            input: vec![input],
            output: vec![output],
            initializer: inits,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn write_model(dir: &Path, m: &pb::ModelProto) -> String {
    let path: PathBuf = dir.join("model.onnx");
    std::fs::write(&path, m.encode_to_vec()).expect("write model");
    path.display().to_string()
}

/// `gopt compile` (and `gopt run`, on an input of A's shape) refuse the model with one
/// error line naming every needle.
#[track_caller]
fn refused(test: &str, m: &Nbits, needles: &[&str]) {
    let dir = scratch(test);
    let path = write_model(&dir, &m.proto());
    assert_error(&gopt(&["compile", &path]), needles);
    let a = dir.join("a.npy");
    let k = m.a_k as usize;
    let x = gopt::Tensor::from_f64s(gopt::DType::F32, &[2, k], &vec![0.5; 2 * k]).expect("A");
    gopt::tensor_io::write_npy(&a, &x).expect("write npy");
    let a = a.display().to_string();
    assert_error(
        &gopt(&["run", &path, "-i", &a, "--backend", "cpu"]),
        needles,
    );
}

#[test]
fn matmul_nbits_attributes_out_of_range() {
    let m = Nbits::default().with_attr("bits", 3);
    refused("bits3", &m, &["mm_q4", "bits=3"]);
    let m = Nbits::default().with_attr("block_size", 24);
    refused("block24", &m, &["mm_q4", "block_size", "24"]);
    let m = Nbits::default().with_attr("block_size", 8);
    refused("block8", &m, &["mm_q4", "block_size", "8"]);
    let m = Nbits::default().with_attr("K", 48);
    refused("k48", &m, &["mm_q4", "attribute K is 48", "32"]);
}

#[test]
fn matmul_nbits_operands_of_the_wrong_shape() {
    let m = Nbits {
        scales: vec![7],
        ..Nbits::default()
    };
    refused("scales", &m, &["mm_q4", "scales", "[7]"]);
    let m = Nbits {
        b: vec![4, 2, 9],
        ..Nbits::default()
    };
    refused("b_shape", &m, &["mm_q4", "B has shape [4,2,9]"]);
    let m = Nbits {
        g_idx: true,
        ..Nbits::default()
    };
    refused("g_idx", &m, &["mm_q4", "g_idx"]);
}

#[test]
fn matmul_nbits_in_the_wrong_domain_and_other_contrib_ops() {
    let m = Nbits {
        domain: "",
        ..Nbits::default()
    };
    refused("default_domain", &m, &["mm_q4", "com.microsoft", "ai.onnx"]);
    let m = Nbits {
        op: "FusedMatMul",
        ..Nbits::default()
    };
    refused("fused", &m, &["mm_q4", "FusedMatMul", "only MatMulNBits"]);
    let m = Nbits {
        contrib_opset: false,
        ..Nbits::default()
    };
    refused(
        "no_opset",
        &m,
        &["mm_q4", "does not import domain `com.microsoft`"],
    );
}

#[test]
fn four_bit_values_gopt_would_compute_are_refused() {
    let node = |op: &str, inputs: &[&str]| pb::NodeProto {
        op_type: Some(op.into()),
        name: Some("q4".into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec!["Y".into()],
        ..Default::default()
    };
    let zp = pb::TensorProto {
        data_type: Some(INT4),
        ..tensor("zp", U8, &[])
    };
    let s = tensor("s", F32, &[]);
    let dir = scratch("int4_input");
    let m = model(
        node("DequantizeLinear", &["A", "s"]),
        value_info("A", INT4, &[4]),
        value_info("Y", F32, &[4]),
        vec![s.clone()],
        &[("", 21)],
    );
    let path = write_model(&dir, &m);
    assert_error(&gopt(&["compile", &path]), &["`A`", "int4"]);
    let dir = scratch("int4_quantize");
    let m = model(
        node("QuantizeLinear", &["A", "s", "zp"]),
        value_info("A", F32, &[4]),
        value_info("Y", INT4, &[4]),
        vec![s, zp],
        &[("", 21)],
    );
    let path = write_model(&dir, &m);
    assert_error(&gopt(&["compile", &path]), &["`Y`", "int4"]);
    // Undeclared, the output is refused at the node that would compute it.
    let mut m = m;
    if let Some(g) = m.graph.as_mut() {
        g.output[0].r#type = None;
    }
    let path = write_model(&dir, &m);
    let needles = ["`q4`", "QuantizeLinear", "zero point `zp` is int4"];
    assert_error(&gopt(&["compile", &path]), &needles);
}
