//! Data movement in WGSL: Transpose, Slice (constant bounds, positive steps), Expand,
//! Concat, Gather (i64 or i32 indices; i64 read as two 32-bit words, since WGSL has no
//! 64-bit integers) and the view ops as copies. Data in f32 or f16.

use super::WgslKernel;
use crate::template::fill;
use crate::{CodegenError, Result};
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

fn unsupported(node: &Node, what: impl Into<String>) -> CodegenError {
    CodegenError::Unsupported {
        node: node.name.clone(),
        op: node.op.name().into(),
        backend: "WGSL",
        what: what.into(),
    }
}

fn typed(g: &Graph, node: &Node, v: ValueId) -> Result<(DType, Vec<usize>)> {
    let t = g.ty(v).map_err(|e| CodegenError::Plan(e.to_string()))?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
    Ok((t.dtype, s))
}

fn input(node: &Node, k: usize) -> Result<ValueId> {
    node.inputs
        .get(k)
        .copied()
        .flatten()
        .ok_or_else(|| unsupported(node, "a missing input"))
}

fn const_ints(g: &Graph, node: &Node, k: usize) -> Result<Option<Vec<i64>>> {
    match node.inputs.get(k).copied().flatten() {
        None => Ok(None),
        Some(v) => g
            .constant(v)
            .map(|t| Some(t.to_i64_vec()))
            .ok_or_else(|| unsupported(node, "bounds that are not constants")),
    }
}

fn strides(s: &[usize]) -> Vec<usize> {
    let mut st = vec![1; s.len()];
    for a in (0..s.len().saturating_sub(1)).rev() {
        st[a] = st[a + 1] * s[a + 1];
    }
    st
}

/// Code splitting `i` into output coordinates `c0..`.
fn coords(out: &[usize]) -> String {
    let mut code = String::from("        var r: u32 = i;\n");
    for a in (0..out.len()).rev() {
        code += &format!("        let c{a} = r % {d}u; r = r / {d}u;\n", d = out[a]);
    }
    code
}

fn sum(terms: &[String]) -> String {
    if terms.is_empty() {
        "0u".into()
    } else {
        terms.join(" + ")
    }
}

fn data_type(node: &Node, dt: DType) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(unsupported(node, format!("{other} data"))),
    }
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
    let r = out.len();
    let x = input(node, 0)?;
    let (_, xs) = typed(g, node, x)?;
    let xst = strides(&xs);
    let mut bindings = vec![format!("var<storage, read> in0: array<{t}>;")];
    let mut inputs = vec![x.0];
    let body = match node.op {
        Op::Shape(
            ShapeOp::Reshape
            | ShapeOp::Flatten
            | ShapeOp::Squeeze
            | ShapeOp::Unsqueeze
            | ShapeOp::Identity,
        ) => "        out[i] = in0[i];\n".to_string(),
        Op::Shape(ShapeOp::Transpose) => {
            let perm: Vec<usize> = match node
                .attrs
                .ints("perm")
                .map_err(|e| CodegenError::Plan(e.to_string()))?
            {
                Some(p) => p.iter().map(|&v| v as usize).collect(),
                None => (0..r).rev().collect(),
            };
            let off: Vec<String> = (0..r)
                .map(|a| format!("c{a} * {}u", xst[perm[a]]))
                .collect();
            format!("{}        out[i] = in0[{}];\n", coords(&out), sum(&off))
        }
        Op::Shape(ShapeOp::Expand) => {
            let pad = r - xs.len();
            let off: Vec<String> = (0..r)
                .filter(|&a| a >= pad && xs[a - pad] != 1)
                .map(|a| format!("c{a} * {}u", xst[a - pad]))
                .collect();
            format!("{}        out[i] = in0[{}];\n", coords(&out), sum(&off))
        }
        Op::Shape(ShapeOp::Slice) => {
            let starts = const_ints(g, node, 1)?.ok_or_else(|| unsupported(node, "no starts"))?;
            let axes =
                const_ints(g, node, 3)?.unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = const_ints(g, node, 4)?.unwrap_or_else(|| vec![1; starts.len()]);
            let mut start = vec![0i64; r];
            let mut step = vec![1i64; r];
            for ((&a, &s), &st) in axes.iter().zip(&starts).zip(&steps) {
                let a = if a < 0 { a + r as i64 } else { a } as usize;
                if a >= r || st <= 0 {
                    return Err(unsupported(node, "negative or zero steps"));
                }
                let d = xs[a] as i64;
                start[a] = (if s < 0 { s + d } else { s }).clamp(0, d);
                step[a] = st;
            }
            let off: Vec<String> = (0..r)
                .map(|a| format!("({}u + c{a} * {}u) * {}u", start[a], step[a], xst[a]))
                .collect();
            format!("{}        out[i] = in0[{}];\n", coords(&out), sum(&off))
        }
        Op::Shape(ShapeOp::Gather) => {
            let idx = input(node, 1)?;
            let (it, is) = typed(g, node, idx)?;
            let read = match it {
                DType::I64 => {
                    bindings.push("var<storage, read> in1: array<vec2<u32>>;".into());
                    // Little-endian words: the low one is the value for |k| < 2^31.
                    "bitcast<i32>(in1[{j}].x)"
                }
                DType::I32 => {
                    bindings.push("var<storage, read> in1: array<i32>;".into());
                    "in1[{j}]"
                }
                other => return Err(unsupported(node, format!("{other} indices"))),
            };
            inputs.push(idx.0);
            let axis = node
                .attrs
                .int_or("axis", 0)
                .map_err(|e| CodegenError::Plan(e.to_string()))?;
            let axis = if axis < 0 {
                axis + xs.len() as i64
            } else {
                axis
            } as usize;
            let ist = strides(&is);
            let q = is.len();
            let idx_off: Vec<String> = (0..q)
                .map(|j| format!("c{} * {}u", axis + j, ist[j]))
                .collect();
            let mut off: Vec<String> = (0..axis).map(|a| format!("c{a} * {}u", xst[a])).collect();
            off.push(format!("k * {}u", xst[axis]));
            off.extend((axis + 1..xs.len()).map(|a| format!("c{} * {}u", a - 1 + q, xst[a])));
            format!(
                "{}        var ks: i32 = {};\n        if (ks < 0) {{ ks = ks + {}; }}\n        let k = u32(ks);\n        out[i] = in0[{}];\n",
                coords(&out),
                read.replace("{j}", &sum(&idx_off)),
                xs[axis],
                sum(&off)
            )
        }
        Op::Shape(ShapeOp::Concat) => {
            let axis = node
                .attrs
                .int_or("axis", 0)
                .map_err(|e| CodegenError::Plan(e.to_string()))?;
            let axis = if axis < 0 { axis + r as i64 } else { axis } as usize;
            let mut code = coords(&out);
            let mut begin = 0usize;
            bindings.clear();
            inputs.clear();
            for (k, v) in node.inputs.iter().enumerate() {
                let v = v.ok_or_else(|| unsupported(node, "a missing input"))?;
                let (_, s) = typed(g, node, v)?;
                let st = strides(&s);
                bindings.push(format!("var<storage, read> in{k}: array<{t}>;"));
                inputs.push(v.0);
                let off: Vec<String> = (0..r)
                    .map(|a| {
                        if a == axis {
                            format!("(c{a} - {begin}u) * {}u", st[a])
                        } else {
                            format!("c{a} * {}u", st[a])
                        }
                    })
                    .collect();
                let end = begin + s[axis];
                code += &format!(
                    "        {}if (c{axis} < {end}u) {{ out[i] = in{k}[{}]; }}\n",
                    if k == 0 { "" } else { "else " },
                    sum(&off)
                );
                begin = end;
            }
            code
        }
        _ => return Err(unsupported(node, "this op (not data movement)")),
    };
    bindings.push(format!("var<storage, read_write> out: array<{t}>;"));
    let bindings: Vec<String> = bindings
        .iter()
        .enumerate()
        .map(|(k, b)| format!("@group(0) @binding({k}) {b}"))
        .collect();
    let source = fill(
        TEMPLATE,
        &[
            (
                "enable",
                if dt == DType::F16 {
                    "enable f16;\n"
                } else {
                    ""
                },
            ),
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
    })
}
