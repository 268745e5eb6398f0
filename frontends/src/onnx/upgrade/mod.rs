//! Opset upgrades: the IR gives every op the semantics of its latest ONNX opset, so
//! older forms are rewritten here as nodes are converted (attributes that became
//! inputs, renamed modes, `Upsample` → `Resize`, the 2-D coercion of old `Softmax`).
//! Each rule mirrors ONNX's version-converter adapter for the same step
//! (`onnx/version_converter/adapters/`), or ONNX Runtime's behaviour where the
//! converter has none.

use super::convert::Builder;
use super::error::{ImportError, Result};
use super::proto;
use gopt_ir::{Attr, Attrs, DType, Tensor, ValueId};

mod rewrites;
use rewrites::{dropout_mask_like_input, group_norm_per_channel, softmax_2d, upsample_to_resize};

/// A node on its way into the IR: inputs resolved, attributes converted.
pub(crate) struct OnnxNode<'a> {
    /// Node name (unique in its graph).
    pub name: String,
    /// "`name` (Op, opset N)" for messages.
    pub desc: String,
    /// ONNX op type.
    pub op_type: &'a str,
    /// Canonical domain.
    pub domain: &'a str,
    /// Opset of that domain.
    pub opset: i64,
    /// Inputs (`None`: omitted).
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs.
    pub outputs: Vec<ValueId>,
    /// Attributes.
    pub attrs: Attrs,
}

/// Reduce ops whose `axes` attribute became an input in opset 18.
const REDUCE_18: [&str; 9] = [
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSumSquare",
];

/// Binary ops that had legacy (`broadcast`, `axis`) broadcasting before opset 7.
const LEGACY_BROADCAST: [&str; 12] = [
    "Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less", "PRelu",
];

fn pattr<'a>(node: &'a proto::NodeProto, name: &str) -> Option<&'a proto::AttributeProto> {
    node.attribute
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
}

fn pint(node: &proto::NodeProto, name: &str) -> Option<i64> {
    pattr(node, name).and_then(|a| a.i)
}

fn pstr(node: &proto::NodeProto, name: &str) -> Option<String> {
    pattr(node, name)
        .and_then(|a| a.s.as_deref())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

/// The IR ops a node becomes after upgrading (by ONNX name), or why its form cannot be
/// imported. `domain` is canonical.
pub(crate) fn needed_ops<'a>(
    node: &proto::NodeProto,
    op: &'a str,
    domain: &str,
    opset: i64,
) -> std::result::Result<Vec<&'a str>, String> {
    if domain != "ai.onnx" {
        return Ok(vec![op]);
    }
    if pattr(node, "broadcast").is_some()
        && pattr(node, "axis").is_some()
        && LEGACY_BROADCAST.contains(&op)
    {
        return Err("legacy broadcasting with an `axis` attribute is not supported".into());
    }
    Ok(match op {
        "Upsample" => vec!["Resize"],
        "Softmax" | "LogSoftmax" | "Hardmax" if opset < 13 => {
            vec![op, "Shape", "Flatten", "Reshape"]
        }
        "Dropout" if opset < 10 && node.output.iter().skip(1).any(|o| !o.is_empty()) => {
            vec![op, "CastLike"]
        }
        "GroupNormalization" if opset < 21 => {
            vec![op, "Shape", "Div", "Concat", "Reshape", "Expand"]
        }
        "Scatter" if gopt_ir::Op::from_onnx_name("Scatter").is_none() => vec!["ScatterElements"],
        "Scan" if opset < 9 => {
            return Err("Scan before opset 9 (with a batch axis) is not supported".into())
        }
        "BatchNormalization" if opset < 9 && pint(node, "spatial") == Some(0) => {
            return Err("BatchNormalization with spatial=0 is not supported".into())
        }
        "BatchNormalization"
            if opset < 14 && node.output.iter().skip(3).any(|o| !o.is_empty()) =>
        {
            return Err(
                "BatchNormalization outputs saved_mean/saved_var (before opset 14) are not supported"
                    .into(),
            )
        }
        "Resize"
            if pstr(node, "coordinate_transformation_mode").as_deref()
                == Some("tf_half_pixel_for_nn") =>
        {
            return Err("Resize coordinate mode `tf_half_pixel_for_nn` is not supported".into())
        }
        _ => vec![op],
    })
}

/// Emits the IR nodes for one ONNX node in its latest-opset form.
pub(crate) fn lower(b: &mut Builder, mut n: OnnxNode) -> Result<()> {
    n.attrs.0.remove("consumed_inputs");
    n.attrs.0.remove("broadcast");
    let mut op: &str = n.op_type;
    if n.domain == "ai.onnx" {
        let v = n.opset;
        match n.op_type {
            "ReduceSum" if v < 13 => axes_to_input(b, &mut n, "axes", 1)?,
            o if REDUCE_18.contains(&o) && v < 18 => axes_to_input(b, &mut n, "axes", 1)?,
            "Squeeze" | "Unsqueeze" if v < 13 => axes_to_input(b, &mut n, "axes", 1)?,
            "Split" => {
                if v < 13 {
                    axes_to_input(b, &mut n, "split", 1)?;
                }
                if v < 18 && slot(&n, 1).is_none() && !n.attrs.has("num_outputs") {
                    n.attrs
                        .set("num_outputs", Attr::Int(n.outputs.len() as i64));
                }
            }
            "Slice" if v < 10 => {
                axes_to_input(b, &mut n, "starts", 1)?;
                axes_to_input(b, &mut n, "ends", 2)?;
                axes_to_input(b, &mut n, "axes", 3)?;
            }
            "TopK" if v < 10 => axes_to_input(b, &mut n, "k", 1)?,
            "Clip" if v < 11 => {
                scalar_to_input(b, &mut n, "min", 1)?;
                scalar_to_input(b, &mut n, "max", 2)?;
            }
            "Pad" if v < 11 => {
                axes_to_input(b, &mut n, "pads", 1)?;
                scalar_to_input(b, &mut n, "value", 2)?;
            }
            "Dropout" if v < 12 => {
                if let Some(r) = n.attrs.0.remove("ratio") {
                    let r = attr_f64(&n, "ratio", &r)?;
                    let c = b.add_const(
                        &format!("{}__ratio", n.name),
                        Tensor::scalar_f64(DType::F32, r),
                    );
                    set_slot(&mut n, 1, c)?;
                }
                n.attrs.0.remove("is_test");
                if v < 10 && n.outputs.len() > 1 {
                    return dropout_mask_like_input(b, n);
                }
            }
            "BatchNormalization" => {
                n.attrs.0.remove("spatial");
                n.attrs.0.remove("is_test");
                if v < 14 {
                    n.outputs.truncate(3);
                    if n.outputs.len() > 1 {
                        n.attrs.set("training_mode", Attr::Int(1));
                    }
                }
            }
            "Softmax" | "LogSoftmax" | "Hardmax" if v < 13 => return softmax_2d(b, n),
            "Upsample" => {
                op = "Resize";
                upsample_to_resize(b, &mut n)?;
            }
            "Resize" if v < 11 => upsample_to_resize(b, &mut n)?,
            "GroupNormalization" if v < 21 => group_norm_per_channel(b, &mut n)?,
            "GridSample" if v < 20 => {
                let renamed = match n.attrs.str("mode").ok().flatten() {
                    Some("bilinear") => Some("linear"),
                    Some("bicubic") => Some("cubic"),
                    _ => None,
                };
                if let Some(m) = renamed {
                    n.attrs.set("mode", Attr::Str(m.into()));
                }
            }
            "DFT" if v < 20 => {
                let axis = match n.attrs.0.remove("axis") {
                    Some(Attr::Int(a)) => a,
                    Some(_) => return Err(ImportError::invalid(&n.desc, "`axis` is not an int")),
                    None => 1,
                };
                let c = b.add_const(
                    &format!("{}__axis", n.name),
                    Tensor::I64(ndarray::arr0(axis).into_dyn()),
                );
                set_slot(&mut n, 2, c)?;
            }
            "RoiAlign" if v < 16 && !n.attrs.has("coordinate_transformation_mode") => {
                n.attrs.set(
                    "coordinate_transformation_mode",
                    Attr::Str("output_half_pixel".into()),
                );
            }
            "Scatter" if gopt_ir::Op::from_onnx_name("Scatter").is_none() => op = "ScatterElements",
            _ => {}
        }
    }
    b.push(n.name, op, n.attrs, n.inputs, n.outputs)
}

/// Input `i` if present.
pub(super) fn slot(n: &OnnxNode, i: usize) -> Option<ValueId> {
    n.inputs.get(i).copied().flatten()
}

/// Puts `v` at input `i` (padding with omitted inputs); fails if the input is already
/// given (the attribute and the input both set).
fn set_slot(n: &mut OnnxNode, i: usize, v: ValueId) -> Result<()> {
    if slot(n, i).is_some() {
        return Err(ImportError::invalid(
            &n.desc,
            format!("input {i} is given both as an attribute and as an input"),
        ));
    }
    if n.inputs.len() <= i {
        n.inputs.resize(i + 1, None);
    }
    n.inputs[i] = Some(v);
    Ok(())
}

/// Moves an integer-list (or integer) attribute to input `i` as a 1-D i64 constant.
fn axes_to_input(b: &mut Builder, n: &mut OnnxNode, attr: &str, i: usize) -> Result<()> {
    let Some(a) = n.attrs.0.remove(attr) else {
        return Ok(());
    };
    let values = match a {
        Attr::Ints(v) => v,
        Attr::Int(k) => vec![k],
        _ => {
            return Err(ImportError::invalid(
                &n.desc,
                format!("attribute `{attr}` is not a list of integers"),
            ))
        }
    };
    let c = b.add_const(&format!("{}__{attr}", n.name), Tensor::from_i64s(&values));
    set_slot(n, i, c)
}

fn attr_f64(n: &OnnxNode, name: &str, a: &Attr) -> Result<f64> {
    match a {
        Attr::Float(f) => Ok(*f as f64),
        Attr::Int(i) => Ok(*i as f64),
        _ => Err(ImportError::invalid(
            &n.desc,
            format!("attribute `{name}` is not a number"),
        )),
    }
}

/// Moves a float attribute to input `i` as a scalar of the data input's dtype (f32
/// when that is not declared).
fn scalar_to_input(b: &mut Builder, n: &mut OnnxNode, attr: &str, i: usize) -> Result<()> {
    let Some(a) = n.attrs.0.remove(attr) else {
        return Ok(());
    };
    let v = attr_f64(n, attr, &a)?;
    let dtype = slot(n, 0)
        .and_then(|x| b.declared(x))
        .map(|t| t.dtype)
        .unwrap_or(DType::F32);
    let c = b.add_const(&format!("{}__{attr}", n.name), Tensor::scalar_f64(dtype, v));
    set_slot(n, i, c)
}
