//! Data movement in WGSL: Transpose, Slice (constant bounds, positive steps), Expand,
//! Concat, Gather (i64 or i32 indices, each checked: [`super::bounds`]) and the view ops
//! as copies. Data of any dtype WGSL storage holds (elements copied in their storage
//! type).

use super::bounds;
use super::WgslKernel;
use super::{typed, unsupported};
use crate::lower::index::{movement, sum, Lit, Movement};
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::ShapeOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

const TEMPLATE: &str = include_str!("movement.wgsl");

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(
        op,
        Op::Shape(
            ShapeOp::Transpose
                | ShapeOp::Slice
                | ShapeOp::Gather
                | ShapeOp::Expand
                | ShapeOp::Concat
                | ShapeOp::Reshape
                | ShapeOp::Flatten
                | ShapeOp::Squeeze
                | ShapeOp::Unsqueeze
                | ShapeOp::Identity
        )
    )
}

fn input(node: &Node, k: usize) -> Result<ValueId> {
    node.inputs
        .get(k)
        .copied()
        .flatten()
        .ok_or_else(|| unsupported(node, "a missing input"))
}

/// Code splitting `i` into output coordinates `c0..` (an empty output's zero extents
/// divide by 1 instead: its loop never runs, and naga refuses a constant `% 0u`).
fn coords(out: &[usize]) -> String {
    let mut code = String::from("        var r: u32 = i;\n");
    for a in (0..out.len()).rev() {
        code += &format!(
            "        let c{a} = r % {d}u; r = r / {d}u;\n",
            d = out[a].max(1)
        );
    }
    code
}

/// The storage element of `dt` (data movement copies storage elements as they are:
/// bool and 8/16-bit integers as one 32-bit word, i64/u64 as `vec2<u32>`).
fn data_type(node: &Node, dt: DType) -> Result<&'static str> {
    super::storage_type(dt)
        .map(|(t, _)| t)
        .ok_or_else(|| unsupported(node, format!("{dt} data")))
}

/// Emits the shader for `node`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let out_v = *node
        .outputs
        .first()
        .ok_or_else(|| unsupported(node, "no output"))?;
    let (dt, out) = typed(g, node, out_v)?;
    let t = data_type(node, dt)?;
    let n = u32::try_from(out.iter().product::<usize>())
        .map_err(|_| unsupported(node, "more than 2^32 elements"))?;
    let x = input(node, 0)?;
    let mut bindings = vec![format!("var<storage, read> in0: array<{t}>;")];
    let mut inputs = vec![x.0];
    let shape = |v: ValueId| typed(g, node, v).map(|t| t.1).map_err(|e| e.to_string());
    let mv = movement(g, node, &shape, Lit("u")).map_err(|what| unsupported(node, what))?;
    let mut check = None;
    let body = match mv {
        Movement::Copy => "        out[i] = in0[i];\n".to_string(),
        Movement::Strided(terms) => format!(
            "{}        out[i] = in0[{}];\n",
            coords(&out),
            sum(&terms, "0u")
        ),
        Movement::Gather {
            indices,
            index_dtype,
            index_terms,
            data_terms,
            axis_len,
        } => {
            let it = bounds::index_type(index_dtype)
                .ok_or_else(|| unsupported(node, format!("{index_dtype} indices")))?;
            bindings.push(format!("var<storage, read> in1: array<{it}>;"));
            inputs.push(indices.0);
            let c = bounds::check(
                g,
                node,
                axis_len,
                format!("an index out of range for an axis of length {axis_len}"),
            )?;
            let read = bounds::read_index(
                index_dtype,
                &format!("in1[{}]", sum(&index_terms, "0u")),
                axis_len,
                c.code,
                "k",
            );
            check = Some(c);
            format!(
                "{}{read}        out[i] = in0[{}];\n",
                coords(&out),
                sum(&data_terms, "0u")
            )
        }
        Movement::Concat { axis, parts } => {
            let mut code = coords(&out);
            bindings.clear();
            inputs.clear();
            for (k, (v, end, terms)) in parts.iter().enumerate() {
                bindings.push(format!("var<storage, read> in{k}: array<{t}>;"));
                inputs.push(v.0);
                code += &format!(
                    "        {}if (c{axis} < {end}u) {{ out[i] = in{k}[{}]; }}\n",
                    if k == 0 { "" } else { "else " },
                    sum(terms, "0u")
                );
            }
            code
        }
    };
    bindings.push(format!("var<storage, read_write> out: array<{t}>;"));
    let mut bindings: Vec<String> = bindings
        .iter()
        .enumerate()
        .map(|(k, b)| format!("@group(0) @binding({k}) {b}"))
        .collect();
    if check.is_some() {
        bindings.push(bounds::error_binding(bindings.len()));
    }
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", node.op.name()),
            ("bindings", &bindings.join("\n")),
            ("n", &n.to_string()),
            ("body", &body),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [n.div_ceil(super::WORKGROUP).clamp(1, 65535), 1, 1],
        inputs,
        outputs: vec![out_v.0],
        index_check: check,
    })
}
