//! Builders for small ONNX models written with the prost structs, so tests can state
//! exactly the protobuf they feed the importer (including malformed ones).
#![allow(dead_code)]

use gopt_frontends::onnx::proto::{
    self, attribute_proto::AttributeType, tensor_shape_proto, type_proto, AttributeProto,
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto,
    TypeProto, ValueInfoProto,
};
use prost::Message;
use std::path::{Path, PathBuf};

/// A dim of a declared shape.
pub enum D {
    /// A size.
    N(i64),
    /// A symbol.
    S(&'static str),
    /// Neither.
    U,
}

pub fn vi(name: &str, elem: i32, dims: &[D]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| tensor_shape_proto::Dimension {
            denotation: None,
            value: match d {
                D::N(n) => Some(tensor_shape_proto::dimension::Value::DimValue(*n)),
                D::S(s) => Some(tensor_shape_proto::dimension::Value::DimParam(
                    s.to_string(),
                )),
                D::U => None,
            },
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            denotation: None,
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto { dim }),
            })),
        }),
        ..Default::default()
    }
}

/// A float value of known shape.
pub fn vf(name: &str, dims: &[i64]) -> ValueInfoProto {
    vi(name, 1, &dims.iter().map(|&d| D::N(d)).collect::<Vec<_>>())
}

/// A value with no type at all.
pub fn untyped(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        ..Default::default()
    }
}

pub fn tf32(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(1),
        float_data: data.to_vec(),
        ..Default::default()
    }
}

pub fn ti64(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(7),
        int64_data: data.to_vec(),
        ..Default::default()
    }
}

pub fn node(op: &str, inputs: &[&str], outputs: &[&str], name: &str) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: Some(name.into()),
        ..Default::default()
    }
}

pub fn with(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute = attrs;
    n
}

pub fn in_domain(mut n: NodeProto, domain: &str) -> NodeProto {
    n.domain = Some(domain.into());
    n
}

fn attr(name: &str, t: AttributeType) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(t as i32),
        ..Default::default()
    }
}

pub fn a_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        i: Some(v),
        ..attr(name, AttributeType::Int)
    }
}

pub fn a_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        f: Some(v),
        ..attr(name, AttributeType::Float)
    }
}

pub fn a_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        ints: v.to_vec(),
        ..attr(name, AttributeType::Ints)
    }
}

pub fn a_floats(name: &str, v: &[f32]) -> AttributeProto {
    AttributeProto {
        floats: v.to_vec(),
        ..attr(name, AttributeType::Floats)
    }
}

pub fn a_str(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        s: Some(v.as_bytes().to_vec()),
        ..attr(name, AttributeType::String)
    }
}

pub fn a_tensor(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        t: Some(t),
        ..attr(name, AttributeType::Tensor)
    }
}

pub fn a_graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        g: Some(g),
        ..attr(name, AttributeType::Graph)
    }
}

pub fn a_sparse(name: &str, s: proto::SparseTensorProto) -> AttributeProto {
    AttributeProto {
        sparse_tensor: Some(s),
        ..attr(name, AttributeType::SparseTensor)
    }
}

pub fn graph(
    name: &str,
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
) -> GraphProto {
    GraphProto {
        name: Some(name.into()),
        node: nodes,
        input: inputs,
        output: outputs,
        initializer: inits,
        ..Default::default()
    }
}

/// A model importing the default domain at `opset`.
pub fn model(g: GraphProto, opset: i64) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        producer_name: Some("gopt-tests".into()),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(g),
        ..Default::default()
    }
}

pub fn bytes(m: &ModelProto) -> Vec<u8> {
    m.encode_to_vec()
}

/// A fresh directory under the system temp dir, unique to this process and `tag`.
pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gopt-fe-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

pub fn write(path: &Path, data: &[u8]) {
    std::fs::write(path, data).expect("write test file");
}

/// True when the IR implements every named op (tests of upgrades into ops another
/// family provides check the conversion only once that op exists).
pub fn has_ops(names: &[&str]) -> bool {
    names
        .iter()
        .all(|n| gopt_ir::Op::from_onnx_name(n).is_some())
}

/// The repository root (for tests/data).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crate in a workspace")
        .to_path_buf()
}
