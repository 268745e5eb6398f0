//! GatherElements in WGSL: data of any dtype WGSL storage holds (copied as storage
//! elements), i64 or i32 indices, negative ones counted from the end of the axis, each
//! checked against it ([`super::bounds`]: one out of range fails the run).

use super::unsupported;
use super::WgslKernel;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::ShapeOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

const TEMPLATE: &str = include_str!("gather_elements.wgsl");

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(op, Op::Shape(ShapeOp::GatherElements))
}

/// Emits the shader for GatherElements node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let plan = |e: gopt_ir::IrError| CodegenError::Plan(e.to_string());
    let input = |k: usize| {
        node.inputs
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| unsupported(node, "a missing input"))
    };
    let typed = |v: ValueId| -> Result<(DType, Vec<usize>)> {
        let t = g.ty(v).map_err(plan)?;
        let s =
            gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
        Ok((t.dtype, s))
    };
    let (x, iv) = (input(0)?, input(1)?);
    let out = *node
        .outputs
        .first()
        .ok_or_else(|| unsupported(node, "no output"))?;
    let (dt, ds) = typed(x)?;
    let (idt, is) = typed(iv)?;
    let (t, _) = super::storage_type(dt).ok_or_else(|| unsupported(node, format!("{dt} data")))?;
    let it = super::bounds::index_type(idt)
        .ok_or_else(|| unsupported(node, format!("{idt} indices")))?;
    if ds.len() != is.len() || ds.is_empty() {
        return Err(unsupported(node, "indices of another rank than the data"));
    }
    let axis = gopt_ir::ops::util::norm_axis(node.attrs.int_or("axis", 0).map_err(plan)?, ds.len())
        .map_err(plan)?;
    let n = u32::try_from(is.iter().product::<usize>())
        .map_err(|_| unsupported(node, "more than 2^32 elements"))?;
    if n == 0 || ds[axis] == 0 || ds.iter().product::<usize>() >= 1 << 31 {
        return Err(unsupported(node, "an empty or huge tensor"));
    }
    let check = super::bounds::check(
        g,
        node,
        ds[axis],
        format!("an index out of range for an axis of length {}", ds[axis]),
    )?;
    let read = super::bounds::read_index(idt, "idx[i]", ds[axis], check.code, "k");
    let mut strides = vec![1usize; ds.len()];
    for a in (0..ds.len().saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * ds[a + 1];
    }
    let mut coords = String::new();
    for a in (0..is.len()).rev() {
        if a != axis {
            coords += &format!(
                "        at = at + (r % {d}u) * {}u;\n",
                strides[a],
                d = is[a]
            );
        }
        coords += &format!("        r = r / {}u;\n", is[a]);
    }
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("axis", &axis.to_string()),
            ("t", t),
            ("it", it),
            ("n", &n.to_string()),
            ("read", &read),
            ("kstride", &strides[axis].to_string()),
            ("coords", &coords),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [n.div_ceil(super::WORKGROUP).clamp(1, 65535), 1, 1],
        inputs: vec![x.0, iv.0],
        outputs: vec![out.0],
        index_check: Some(check),
    })
}
