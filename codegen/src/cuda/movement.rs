//! Data-movement kernels: Transpose, Slice (constant bounds, positive steps), Gather,
//! Expand, Concat, and the view ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) as
//! copies when a plan needs one. One thread per output element; the output coordinates
//! are unrolled with constant divisors (shapes are static per bucket) and mapped to the
//! input's offset.

use super::elementwise::storage;
use super::Kernel;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::ShapeOp;
use gopt_ir::{Graph, Node, Op, ValueId};

const TEMPLATE: &str = include_str!("movement.cu");

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

fn unsupported(node: &Node, what: &str) -> CodegenError {
    CodegenError::Unsupported {
        node: node.name.clone(),
        op: node.op.name().into(),
        backend: "CUDA",
        what: what.into(),
    }
}

fn shape_of(g: &Graph, node: &Node, v: ValueId) -> Result<Vec<usize>> {
    let t = g.ty(v).map_err(|e| CodegenError::Plan(e.to_string()))?;
    gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))
}

fn strides(s: &[usize]) -> Vec<usize> {
    let mut st = vec![1; s.len()];
    for a in (0..s.len().saturating_sub(1)).rev() {
        st[a] = st[a + 1] * s[a + 1];
    }
    st
}

/// Code that splits the output index `i` into coordinates `c0..c{r-1}`.
fn coords(out: &[usize]) -> String {
    let mut code = String::from("        long long r = i;\n");
    for a in (0..out.len()).rev() {
        code += &format!(
            "        const long long c{a} = r % {}LL; r /= {}LL;\n",
            out[a], out[a]
        );
    }
    code += "        (void)r;\n";
    code
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

/// Emits the kernel for `node`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let out_v = *node
        .outputs
        .first()
        .ok_or_else(|| unsupported(node, "no output"))?;
    let out = shape_of(g, node, out_v)?;
    let dt = g
        .ty(out_v)
        .map_err(|e| CodegenError::Plan(e.to_string()))?
        .dtype;
    let t = storage(dt);
    let n: usize = out.iter().product();
    let r = out.len();
    let x = input(node, 0)?;
    let xs = shape_of(g, node, x)?;
    let xst = strides(&xs);
    let mut params = vec![format!("const {t}* __restrict__ in0")];
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
                .map(|a| format!("c{a} * {}LL", xst[perm[a]]))
                .collect();
            format!(
                "{}        out[i] = in0[{}];\n",
                coords(&out),
                join_or_zero(&off)
            )
        }
        Op::Shape(ShapeOp::Expand) => {
            let pad = r - xs.len();
            let off: Vec<String> = (0..r)
                .filter(|&a| a >= pad && xs[a - pad] != 1)
                .map(|a| format!("c{a} * {}LL", xst[a - pad]))
                .collect();
            format!(
                "{}        out[i] = in0[{}];\n",
                coords(&out),
                join_or_zero(&off)
            )
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
                .map(|a| format!("({}LL + c{a} * {}LL) * {}LL", start[a], step[a], xst[a]))
                .collect();
            format!(
                "{}        out[i] = in0[{}];\n",
                coords(&out),
                join_or_zero(&off)
            )
        }
        Op::Shape(ShapeOp::Gather) => {
            let idx = input(node, 1)?;
            let is = shape_of(g, node, idx)?;
            let it = g
                .ty(idx)
                .map_err(|e| CodegenError::Plan(e.to_string()))?
                .dtype;
            params.push(format!("const {}* __restrict__ in1", storage(it)));
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
            // Output coordinates: data's axes before `axis`, the indices' axes, then
            // data's axes after `axis`.
            let idx_off: Vec<String> = (0..q)
                .map(|j| format!("c{} * {}LL", axis + j, ist[j]))
                .collect();
            let mut off: Vec<String> = (0..axis).map(|a| format!("c{a} * {}LL", xst[a])).collect();
            off.push(format!("k * {}LL", xst[axis]));
            off.extend((axis + 1..xs.len()).map(|a| format!("c{} * {}LL", a - 1 + q, xst[a])));
            format!(
                "{}        long long k = (long long)in1[{}];\n        if (k < 0) k += {}LL;\n        out[i] = in0[{}];\n",
                coords(&out),
                join_or_zero(&idx_off),
                xs[axis],
                join_or_zero(&off)
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
            params.clear();
            inputs.clear();
            for (k, v) in node.inputs.iter().enumerate() {
                let v = v.ok_or_else(|| unsupported(node, "a missing input"))?;
                let s = shape_of(g, node, v)?;
                let st = strides(&s);
                params.push(format!("const {t}* __restrict__ in{k}"));
                inputs.push(v.0);
                let off: Vec<String> = (0..r)
                    .map(|a| {
                        if a == axis {
                            format!("(c{a} - {begin}LL) * {}LL", st[a])
                        } else {
                            format!("c{a} * {}LL", st[a])
                        }
                    })
                    .collect();
                let end = begin + s[axis];
                code += &format!(
                    "        {}if (c{axis} < {end}LL) out[i] = in{k}[{}];\n",
                    if k == 0 { "" } else { "else " },
                    join_or_zero(&off)
                );
                begin = end;
            }
            code
        }
        _ => return Err(unsupported(node, "this op (not data movement)")),
    };
    params.push(format!("{t}* __restrict__ out"));
    let source = fill(
        TEMPLATE,
        &[
            ("what", node.op.name()),
            ("name", name),
            ("params", &params.join(", ")),
            ("n", &n.to_string()),
            ("body", &body),
        ],
    )?;
    Ok(Kernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        threads: n,
        vectorized: false,
        inputs,
        grid: u32::try_from(n.div_ceil(256).clamp(1, 65_535 * 32)).unwrap_or(u32::MAX),
        block: 256,
        outputs: vec![node.outputs[0].0],
        shared_mem: 0,
    })
}

fn join_or_zero(terms: &[String]) -> String {
    if terms.is_empty() {
        "0".into()
    } else {
        terms.join(" + ")
    }
}
