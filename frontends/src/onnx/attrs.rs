//! Node attributes: ONNX `AttributeProto` → `gopt_ir::Attr`, and the ONNX value types
//! (`TypeProto`) of graph inputs, outputs and intermediate values.

use super::error::{ImportError, Result};
use super::proto::{self, attribute_proto::AttributeType};
use super::tensor::{dtype_from_onnx, onnx_dtype_name, sparse_to_dense, tensor_from_proto};
use gopt_ir::{Attr, Dim, TensorType};
use std::path::Path;

/// Attributes holding an ONNX element-type code, imported as `Attr::DType`.
pub(crate) const DTYPE_ATTRS: [&str; 3] = ["to", "dtype", "output_dtype"];

/// The attribute's kind: its `type` field, or (for old producers that leave it unset)
/// the value field that is set.
pub(crate) fn kind(a: &proto::AttributeProto) -> AttributeType {
    if let Some(t) = a.r#type.and_then(|t| AttributeType::try_from(t).ok()) {
        if t != AttributeType::Undefined {
            return t;
        }
    }
    if a.f.is_some() {
        AttributeType::Float
    } else if a.i.is_some() {
        AttributeType::Int
    } else if a.s.is_some() {
        AttributeType::String
    } else if a.t.is_some() {
        AttributeType::Tensor
    } else if a.g.is_some() {
        AttributeType::Graph
    } else if a.sparse_tensor.is_some() {
        AttributeType::SparseTensor
    } else if a.tp.is_some() {
        AttributeType::TypeProto
    } else if !a.floats.is_empty() {
        AttributeType::Floats
    } else if !a.ints.is_empty() {
        AttributeType::Ints
    } else if !a.strings.is_empty() {
        AttributeType::Strings
    } else if !a.tensors.is_empty() {
        AttributeType::Tensors
    } else if !a.graphs.is_empty() {
        AttributeType::Graphs
    } else if !a.sparse_tensors.is_empty() {
        AttributeType::SparseTensors
    } else if !a.type_protos.is_empty() {
        AttributeType::TypeProtos
    } else {
        AttributeType::Undefined
    }
}

/// Why gopt cannot take this attribute, if it cannot (a kind with no IR form, a
/// function-attribute reference, a dtype code outside gopt's set).
pub(crate) fn unsupported_reason(a: &proto::AttributeProto) -> Option<String> {
    let name = a.name.as_deref().unwrap_or("");
    if a.ref_attr_name.as_deref().is_some_and(|r| !r.is_empty()) {
        return Some(format!(
            "attribute `{name}` refers to a function attribute, which gopt does not bind"
        ));
    }
    let k = kind(a);
    match k {
        AttributeType::Tensors
        | AttributeType::Graphs
        | AttributeType::TypeProto
        | AttributeType::TypeProtos
        | AttributeType::SparseTensors => Some(format!(
            "attribute `{name}` has kind {}, which gopt does not support",
            k.as_str_name()
        )),
        AttributeType::Int if DTYPE_ATTRS.contains(&name) => {
            let code = a.i.unwrap_or(0);
            let ok = i32::try_from(code).ok().and_then(dtype_from_onnx).is_some();
            (!ok).then(|| {
                format!(
                    "attribute `{name}` is element type {}",
                    onnx_dtype_name(i32::try_from(code).unwrap_or(-1))
                )
            })
        }
        AttributeType::Tensor => {
            let code = a.t.as_ref().and_then(|t| t.data_type).unwrap_or(0);
            dtype_from_onnx(code)
                .is_none()
                .then(|| format!("attribute `{name}` is a {} tensor", onnx_dtype_name(code)))
        }
        AttributeType::SparseTensor => {
            let code = a
                .sparse_tensor
                .as_ref()
                .and_then(|s| s.values.as_ref())
                .and_then(|t| t.data_type)
                .unwrap_or(0);
            dtype_from_onnx(code).is_none().then(|| {
                format!(
                    "attribute `{name}` is a {} sparse tensor",
                    onnx_dtype_name(code)
                )
            })
        }
        AttributeType::Undefined
        | AttributeType::Float
        | AttributeType::Int
        | AttributeType::String
        | AttributeType::Graph
        | AttributeType::Floats
        | AttributeType::Ints
        | AttributeType::Strings => None,
    }
}

/// An attribute converted to the IR, or a sub-graph the caller converts.
pub(crate) enum Converted<'a> {
    /// A plain attribute.
    Attr(Attr),
    /// A sub-graph (converted by the graph converter, which tracks scopes).
    Graph(&'a proto::GraphProto),
}

fn utf8(node: &str, name: &str, bytes: &[u8]) -> Result<String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| ImportError::invalid(node, format!("attribute `{name}` is not valid UTF-8")))
}

/// Converts one attribute of the node described by `node`.
pub(crate) fn convert<'a>(
    a: &'a proto::AttributeProto,
    node: &str,
    base_dir: Option<&Path>,
) -> Result<Converted<'a>> {
    let name = a.name.as_deref().unwrap_or("");
    if let Some(reason) = unsupported_reason(a) {
        return Err(ImportError::invalid(node, reason));
    }
    let missing = || ImportError::invalid(node, format!("attribute `{name}` has no value"));
    let attr = match kind(a) {
        AttributeType::Int if DTYPE_ATTRS.contains(&name) => {
            let code = a.i.ok_or_else(missing)?;
            let d = i32::try_from(code)
                .ok()
                .and_then(dtype_from_onnx)
                .ok_or_else(|| {
                    ImportError::invalid(node, format!("attribute `{name}` is not a dtype"))
                })?;
            Attr::DType(d)
        }
        AttributeType::Int => Attr::Int(a.i.ok_or_else(missing)?),
        AttributeType::Float => Attr::Float(a.f.ok_or_else(missing)?),
        AttributeType::String => Attr::Str(utf8(node, name, a.s.as_deref().ok_or_else(missing)?)?),
        AttributeType::Ints => Attr::Ints(a.ints.clone()),
        AttributeType::Floats => Attr::Floats(a.floats.clone()),
        AttributeType::Strings => Attr::Strs(
            a.strings
                .iter()
                .map(|s| utf8(node, name, s))
                .collect::<Result<_>>()?,
        ),
        AttributeType::Tensor => {
            let t = a.t.as_ref().ok_or_else(missing)?;
            Attr::Tensor(tensor_from_proto(t, base_dir).map_err(|e| in_attr(e, node, name))?)
        }
        AttributeType::SparseTensor => {
            let s = a.sparse_tensor.as_ref().ok_or_else(missing)?;
            Attr::Tensor(sparse_to_dense(s, base_dir).map_err(|e| in_attr(e, node, name))?)
        }
        AttributeType::Graph => return Ok(Converted::Graph(a.g.as_ref().ok_or_else(missing)?)),
        AttributeType::Undefined => return Err(missing()),
        AttributeType::Tensors
        | AttributeType::Graphs
        | AttributeType::TypeProto
        | AttributeType::TypeProtos
        | AttributeType::SparseTensors => {
            return Err(ImportError::invalid(
                node,
                format!("attribute `{name}` kind"),
            ))
        }
    };
    Ok(Converted::Attr(attr))
}

/// Adds the node and attribute to an `Invalid` error about a tensor.
pub(crate) fn in_attr(e: ImportError, node: &str, name: &str) -> ImportError {
    match e {
        ImportError::Invalid { node: n, msg } if n.is_empty() => {
            ImportError::invalid(node, format!("attribute `{name}`: {msg}"))
        }
        e => e,
    }
}

/// A readable name for an ONNX type (`tensor(float)`, `seq(tensor(int64))`).
pub(crate) fn type_name(t: &proto::TypeProto) -> String {
    use proto::type_proto::Value;
    let inner = |e: &Option<Box<proto::TypeProto>>| {
        e.as_deref().map(type_name).unwrap_or_else(|| "?".into())
    };
    match &t.value {
        None => "undefined".into(),
        Some(Value::TensorType(x)) => onnx_dtype_name(x.elem_type.unwrap_or(0)),
        Some(Value::SparseTensorType(x)) => {
            format!(
                "sparse_tensor({})",
                onnx_dtype_name(x.elem_type.unwrap_or(0))
            )
        }
        Some(Value::SequenceType(s)) => format!("seq({})", inner(&s.elem_type)),
        Some(Value::OptionalType(o)) => format!("optional({})", inner(&o.elem_type)),
        Some(Value::MapType(m)) => format!(
            "map({}, {})",
            onnx_dtype_name(m.key_type.unwrap_or(0)),
            inner(&m.value_type)
        ),
        Some(Value::OpaqueType(o)) => format!("opaque({})", o.name.as_deref().unwrap_or("")),
    }
}

/// The element-type code a value is declared with (0 when it has none).
pub(crate) fn elem_code(vi: &proto::ValueInfoProto) -> i32 {
    match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(proto::type_proto::Value::TensorType(tt)) => tt.elem_type.unwrap_or(0),
        _ => 0,
    }
}

/// Converts a value's declared type. `Ok(None)` when the type, its element type or its
/// rank is not declared; `UnsupportedDType` for types gopt cannot hold (strings,
/// sequences, maps, ...). `fresh` names dims that are neither a size nor a symbol.
pub(crate) fn value_type(
    vi: &proto::ValueInfoProto,
    fresh: &mut dyn FnMut() -> Dim,
) -> Result<Option<TensorType>> {
    use proto::tensor_shape_proto::dimension::Value as D;
    use proto::type_proto::Value;
    let name = vi.name.as_deref().unwrap_or("");
    let Some(t) = &vi.r#type else { return Ok(None) };
    let tt = match &t.value {
        None => return Ok(None),
        Some(Value::TensorType(tt)) => tt,
        Some(_) => {
            return Err(ImportError::UnsupportedDType {
                tensor: name.to_string(),
                dtype: type_name(t),
            })
        }
    };
    let code = tt.elem_type.unwrap_or(0);
    if code == 0 {
        return Ok(None);
    }
    if let Some(dtype) = super::int4::value_reason(code) {
        return Err(ImportError::UnsupportedDType {
            tensor: name.to_string(),
            dtype,
        });
    }
    let dtype = super::tensor::require_dtype(code, name)?;
    let Some(shape) = &tt.shape else {
        return Ok(None);
    };
    let dims = shape
        .dim
        .iter()
        .map(|d| match &d.value {
            Some(D::DimValue(v)) if *v >= 0 => Dim::Known(*v as u64),
            Some(D::DimParam(p)) if !p.is_empty() => Dim::parse(p),
            _ => fresh(),
        })
        .collect();
    Ok(Some(TensorType::new(dtype, dims)))
}
