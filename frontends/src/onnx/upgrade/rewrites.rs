//! Upgrades that replace one old node by several: the 2-D coercion of old Softmax,
//! Upsample and Resize 10 as Resize, per-group GroupNormalization parameters, and the
//! typed mask of old Dropout.

use super::{slot, OnnxNode};
use crate::onnx::convert::Builder;
use crate::onnx::error::{ImportError, Result, UnsupportedItem};
use gopt_ir::{Attr, Attrs, DType, Tensor};

/// Softmax, LogSoftmax and Hardmax before opset 13 coerce the input to 2-D at `axis`.
/// When the rank is known and `axis` is the last dim that is the modern op; otherwise
/// `Shape → Flatten(axis) → op(axis=-1) → Reshape`, as ONNX's adapter does.
pub(super) fn softmax_2d(b: &mut Builder, mut n: OnnxNode) -> Result<()> {
    let axis = n
        .attrs
        .int("axis")
        .map_err(|e| ImportError::invalid(&n.desc, e.to_string()))?;
    let axis = axis.unwrap_or(1);
    let x = slot(&n, 0)
        .ok_or_else(|| ImportError::invalid(&n.desc, "input 0 is required but missing"))?;
    let rank = b.declared(x).map(|t| t.shape.len() as i64);
    let last = rank.is_some_and(|r| axis == r - 1 || axis == -1);
    n.attrs.set("axis", Attr::Int(-1));
    if last {
        return b.push(n.name, n.op_type, n.attrs, n.inputs, n.outputs);
    }
    let [y] = n.outputs.as_slice() else {
        return Err(ImportError::invalid(&n.desc, "expected one output"));
    };
    let y = *y;
    let shape = b.new_value(&format!("{}__shape", n.name));
    let flat = b.new_value(&format!("{}__flat", n.name));
    let out2d = b.new_value(&format!("{}__2d", n.name));
    let shape_node = b.fresh_node_name(&format!("{}__shape", n.name));
    b.push(
        shape_node,
        "Shape",
        Attrs::default(),
        vec![Some(x)],
        vec![shape],
    )?;
    let mut fa = Attrs::default();
    fa.set("axis", Attr::Int(axis));
    let flat_node = b.fresh_node_name(&format!("{}__flatten", n.name));
    b.push(flat_node, "Flatten", fa, vec![Some(x)], vec![flat])?;
    b.push(
        n.name.clone(),
        n.op_type,
        n.attrs,
        vec![Some(flat)],
        vec![out2d],
    )?;
    let mut ra = Attrs::default();
    ra.set("allowzero", Attr::Int(1));
    let reshape_node = b.fresh_node_name(&format!("{}__reshape", n.name));
    b.push(
        reshape_node,
        "Reshape",
        ra,
        vec![Some(out2d), Some(shape)],
        vec![y],
    )
}

/// Dropout before opset 10 gives its mask the input's dtype; since 10 it is bool, so
/// the mask is cast back with `CastLike`.
pub(super) fn dropout_mask_like_input(b: &mut Builder, mut n: OnnxNode) -> Result<()> {
    let x = slot(&n, 0)
        .ok_or_else(|| ImportError::invalid(&n.desc, "input 0 is required but missing"))?;
    let mask = n.outputs[1];
    let bool_mask = b.new_value(&format!("{}__mask", n.name));
    n.outputs[1] = bool_mask;
    b.push(n.name.clone(), n.op_type, n.attrs, n.inputs, n.outputs)?;
    let cast = b.fresh_node_name(&format!("{}__mask_cast", n.name));
    b.push(
        cast,
        "CastLike",
        Attrs::default(),
        vec![Some(bool_mask), Some(x)],
        vec![mask],
    )
}

/// `Upsample` (any opset) and `Resize` 10 → `Resize` with roi omitted, asymmetric
/// coordinates, and ONNX Runtime's nearest rounding for these ops (floor when
/// upsampling, ceil when downsampling).
pub(super) fn upsample_to_resize(b: &mut Builder, n: &mut OnnxNode) -> Result<()> {
    let scales_attr = n.attrs.0.remove("scales");
    n.attrs.0.remove("height_scale");
    n.attrs.0.remove("width_scale");
    let scales = match scales_attr {
        Some(Attr::Floats(s)) => {
            let c = b.add_const(
                &format!("{}__scales", n.name),
                Tensor::from_f64s(
                    DType::F32,
                    &[s.len()],
                    &s.iter().map(|&x| x as f64).collect::<Vec<_>>(),
                )?,
            );
            Some(c)
        }
        Some(_) => {
            return Err(ImportError::invalid(
                &n.desc,
                "`scales` is not a list of floats",
            ))
        }
        None => slot(n, 1),
    };
    let scales =
        scales.ok_or_else(|| ImportError::invalid(&n.desc, "no scales (attribute or input 1)"))?;
    let known: Option<Vec<f64>> = b.g.constant(scales).map(|t| t.to_f64_vec());
    let nearest = match known {
        Some(s) if s.iter().any(|&x| x < 1.0) && s.iter().any(|&x| x > 1.0) => {
            return Err(ImportError::unsupported_one(UnsupportedItem {
                node: n.name.clone(),
                op: n.op_type.to_string(),
                domain: n.domain.to_string(),
                opset: n.opset,
                reason: "nearest resampling that upsamples some axes and downsamples others".into(),
            }))
        }
        Some(s) if s.iter().any(|&x| x < 1.0) => "ceil",
        _ => "floor",
    };
    let x = slot(n, 0);
    n.inputs = vec![x, None, Some(scales)];
    let mode = n
        .attrs
        .str_or("mode", "nearest")
        .unwrap_or("nearest")
        .to_string();
    n.attrs.set("mode", Attr::Str(mode));
    n.attrs.set(
        "coordinate_transformation_mode",
        Attr::Str("asymmetric".into()),
    );
    n.attrs.set("nearest_mode", Attr::Str(nearest.into()));
    Ok(())
}

/// GroupNormalization 18–20 takes scale and bias per group; 21 per channel. Repeats each
/// group's value C/num_groups times, as ONNX's 20→21 adapter does.
pub(super) fn group_norm_per_channel(b: &mut Builder, n: &mut OnnxNode) -> Result<()> {
    let groups = n
        .attrs
        .int("num_groups")
        .ok()
        .flatten()
        .ok_or_else(|| ImportError::invalid(&n.desc, "`num_groups` is required"))?;
    let x = slot(n, 0)
        .ok_or_else(|| ImportError::invalid(&n.desc, "input 0 is required but missing"))?;
    let name = n.name.clone();
    if let Some(d) = b.declared(x).map(|t| t.dtype) {
        if !n.attrs.has("stash_type") {
            n.attrs.set(
                "stash_type",
                Attr::Int(crate::onnx::tensor::dtype_to_onnx(d) as i64),
            );
        }
    }
    let c = b.new_value(&format!("{name}__channels"));
    let mut sa = Attrs::default();
    sa.set("start", Attr::Int(1));
    sa.set("end", Attr::Int(2));
    let nn = b.fresh_node_name(&format!("{name}__channels"));
    b.push(nn, "Shape", sa, vec![Some(x)], vec![c])?;
    let g = b.add_const(&format!("{name}__groups"), Tensor::from_i64s(&[groups]));
    let per = b.new_value(&format!("{name}__per_group"));
    let nn = b.fresh_node_name(&format!("{name}__per_group"));
    b.push(
        nn,
        "Div",
        Attrs::default(),
        vec![Some(c), Some(g)],
        vec![per],
    )?;
    let one = b.add_const(&format!("{name}__one"), Tensor::from_i64s(&[1]));
    let expand_shape = b.new_value(&format!("{name}__expand_shape"));
    let mut ca = Attrs::default();
    ca.set("axis", Attr::Int(0));
    let nn = b.fresh_node_name(&format!("{name}__expand_shape"));
    b.push(
        nn,
        "Concat",
        ca,
        vec![Some(one), Some(per)],
        vec![expand_shape],
    )?;
    let col = b.add_const(&format!("{name}__col"), Tensor::from_i64s(&[-1, 1]));
    let flat = b.add_const(&format!("{name}__flat"), Tensor::from_i64s(&[-1]));
    for (i, what) in [(1usize, "scale"), (2, "bias")] {
        let Some(v) = slot(n, i) else { continue };
        let base = format!("{name}__{what}");
        let (r0, e, r1) = (
            b.new_value(&format!("{base}_col")),
            b.new_value(&format!("{base}_rep")),
            b.new_value(&format!("{base}_c")),
        );
        let nn = b.fresh_node_name(&format!("{base}_col"));
        b.push(
            nn,
            "Reshape",
            Attrs::default(),
            vec![Some(v), Some(col)],
            vec![r0],
        )?;
        let nn = b.fresh_node_name(&format!("{base}_rep"));
        b.push(
            nn,
            "Expand",
            Attrs::default(),
            vec![Some(r0), Some(expand_shape)],
            vec![e],
        )?;
        let nn = b.fresh_node_name(&format!("{base}_c"));
        b.push(
            nn,
            "Reshape",
            Attrs::default(),
            vec![Some(e), Some(flat)],
            vec![r1],
        )?;
        n.inputs[i] = Some(r1);
    }
    Ok(())
}
