//! Data-movement kernels: Transpose, Slice (constant bounds, positive steps), Gather,
//! Expand, Concat, and the view ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) as
//! copies when a plan needs one. One thread per output element; the output coordinates
//! are unrolled with constant divisors (shapes are static per bucket) and mapped to the
//! input's offset. Gather checks every index (the indices may be computed on the
//! device): one out of range raises the node's code in the run's error word and reads
//! row 0, never outside the data ([`crate::plan::IndexCheck`]).

use super::elementwise::storage;
use super::Kernel;
use crate::lower::index::{movement, sum, Lit, Movement};
use crate::plan::{index_code, IndexCheck};
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
    let x = input(node, 0)?;
    let mut params = vec![format!("const {t}* __restrict__ in0")];
    let mut inputs = vec![x.0];
    let shape = |v: ValueId| shape_of(g, node, v).map_err(|e| e.to_string());
    let mv = movement(g, node, &shape, Lit("LL")).map_err(|what| unsupported(node, &what))?;
    let mut check = None;
    let body = match mv {
        Movement::Copy => "        out[i] = in0[i];\n".to_string(),
        Movement::Strided(terms) => format!(
            "{}        out[i] = in0[{}];\n",
            coords(&out),
            sum(&terms, "0")
        ),
        Movement::Gather {
            indices,
            index_dtype,
            index_terms,
            data_terms,
            axis_len,
        } => {
            params.push(format!("const {}* __restrict__ in1", storage(index_dtype)));
            inputs.push(indices.0);
            let code = index_code(g, node)?;
            check = Some(IndexCheck {
                code,
                op: node.op.name().into(),
                what: format!("an index out of range for an axis of length {axis_len}"),
            });
            // Out of range (after the negative wrap): raise the node's code, read row 0.
            format!(
                "{}        long long k = (long long)in1[{}];\n        if (k < 0) k += {axis_len}LL;\n        if (k < 0 || k >= {axis_len}LL) {{ atomicMax(gopt_err, {code}u); k = 0; }}\n        out[i] = in0[{}];\n",
                coords(&out),
                sum(&index_terms, "0"),
                sum(&data_terms, "0")
            )
        }
        Movement::Concat { axis, parts } => {
            let mut code = coords(&out);
            params.clear();
            inputs.clear();
            for (k, (v, end, terms)) in parts.iter().enumerate() {
                params.push(format!("const {t}* __restrict__ in{k}"));
                inputs.push(v.0);
                code += &format!(
                    "        {}if (c{axis} < {end}LL) out[i] = in{k}[{}];\n",
                    if k == 0 { "" } else { "else " },
                    sum(terms, "0")
                );
            }
            code
        }
    };
    params.push(format!("{t}* __restrict__ out"));
    if check.is_some() {
        params.push("unsigned int* __restrict__ gopt_err".into());
    }
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
        index_check: check,
    })
}
