//! Element-wise WGSL: a single op or a `FusedElementwise` body (the same bodies the
//! CUDA emitter gets, from [`crate::lower::body`]) with static broadcast index math, over every
//! dtype WGSL storage holds ([`super::types`]): floats (f32 and f16, math in f32, each
//! value rounding once at the store), bool, 8/16/32-bit integers (in i32/u32, wrapped
//! to their width after each op) and i64/u64 (as `vec2<u32>`, with exact 64-bit
//! add/sub/mul, comparisons and casts; 64-bit division, remainder and powers are
//! `Unsupported`). Ops without a WGSL form are `Unsupported`, by name. A single Dropout
//! writes its all-true mask; one whose training mode or ratio is known only at run time
//! fails the run where it would train ([`crate::lower::elementwise::dropout`]).

use super::elementwise_expr::expr;
use super::types::{self, kind};
use super::unsupported;
use super::{WgslKernel, WORKGROUP};
use crate::lower::elementwise::{dropout, dropout_mask, Dropout, Test, DROPOUT_TRAINING};
use crate::plan::{index_code, IndexCheck};
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::{DType, Graph, Node, Op, ValueId};
use std::collections::HashMap;

const TEMPLATE: &str = include_str!("elementwise.wgsl");

fn static_shape(g: &Graph, node: &Node, v: ValueId) -> Result<(DType, Vec<usize>)> {
    let t = g.ty(v).map_err(|e| CodegenError::Plan(e.to_string()))?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
    Ok((t.dtype, s))
}

/// Emits the shader for element-wise node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let out = *node
        .outputs
        .first()
        .ok_or_else(|| unsupported(node, "no output"))?;
    let (odt, shape) = static_shape(g, node, out)?;
    let (ost, _) =
        super::storage_type(odt).ok_or_else(|| unsupported(node, format!("{odt} outputs")))?;
    let n: usize = shape.iter().product();
    let n32 = u32::try_from(n).map_err(|_| unsupported(node, "more than 2^32 elements"))?;
    let (body, params) = crate::lower::body::of(g, node)?;
    let mut names: HashMap<ValueId, (String, DType)> = HashMap::new();
    let mut bindings = String::new();
    let mut index = String::new();
    let mut loads = String::new();
    for (k, (&bv, &pv)) in body.inputs.iter().zip(&params).enumerate() {
        let (dt, s) = static_shape(g, node, pv)?;
        let (st, _) =
            super::storage_type(dt).ok_or_else(|| unsupported(node, format!("{dt} inputs")))?;
        bindings += &format!("@group(0) @binding({k}) var<storage, read> in{k}: array<{st}>;\n");
        let numel: usize = s.iter().product();
        let at = if numel == 1 || n == 0 {
            "0u".to_string()
        } else if s == shape {
            "i".to_string()
        } else {
            index += &offset_code(k, &s, &shape);
            format!("o{k}")
        };
        loads += &format!(
            "        let a{k} = {};\n",
            types::load(dt, &format!("in{k}[{at}]"))
        );
        names.insert(bv, (format!("a{k}"), dt));
    }
    bindings += &format!(
        "@group(0) @binding({}) var<storage, read_write> out: array<{ost}>;\n",
        params.len()
    );
    for (&v, t) in &body.constants {
        let lit = types::literal(t.tensor()).ok_or_else(|| {
            unsupported(
                node,
                format!("a constant that is not one {} value", t.dtype()),
            )
        })?;
        names.insert(v, (lit, t.dtype()));
    }
    let mut code = String::new();
    let mut check = None;
    for (i, bn) in body.nodes.iter().enumerate() {
        let Op::Elementwise(op) = bn.op else {
            return Err(unsupported(
                node,
                format!("{} in an element-wise body", bn.op),
            ));
        };
        if op == gopt_ir::ops::ElementwiseOp::Dropout {
            let mode = dropout(g, &body, &params, bn).map_err(|what| unsupported(node, what))?;
            if mode != Dropout::Inference {
                // Training mode or the ratio known only at run time: the first
                // invocation raises the node's code where it would train.
                let c = IndexCheck {
                    code: index_code(g, node)?,
                    op: bn.op.name().into(),
                    what: DROPOUT_TRAINING.into(),
                };
                let mut cond = Vec::new();
                for (v, test) in mode.conditions() {
                    let Some((n, _)) = names.get(&v) else {
                        return Err(unsupported(node, "an unbound body value"));
                    };
                    cond.push(match test {
                        Test::True => n.clone(),
                        Test::NonZero => format!("{n} != 0.0"),
                    });
                }
                code += &format!(
                    "        if (i == 0u && {}) {{ atomicMax(&gopt_err, {}u); }}\n",
                    cond.join(" && "),
                    c.code
                );
                check = Some(c);
            }
        }
        let args: Vec<Option<(String, DType)>> = bn
            .inputs
            .iter()
            .map(|i| i.and_then(|v| names.get(&v).cloned()))
            .collect();
        let odt_b = body
            .ty(bn.outputs[0])
            .map_err(|e| CodegenError::Plan(e.to_string()))?
            .dtype;
        if kind(odt_b).is_none() {
            return Err(unsupported(node, format!("{} producing {odt_b}", bn.op)));
        }
        let e = expr(op, &bn.attrs, &args, odt_b).map_err(|what| unsupported(node, what))?;
        code += &format!("        let t{i} = {};\n", types::wrap(odt_b, &e));
        names.insert(bn.outputs[0], (format!("t{i}"), odt_b));
    }
    let (result, rdt) = body
        .outputs
        .first()
        .and_then(|o| names.get(o))
        .cloned()
        .ok_or_else(|| unsupported(node, "a body without output"))?;
    if rdt != odt {
        return Err(CodegenError::Plan(format!(
            "node `{}`: body output is {rdt}, the node's {odt}",
            node.name
        )));
    }
    // A single Dropout's mask: all true (the data passes unchanged).
    let mut outputs = vec![out.0];
    if let Some(mask) = dropout_mask(node) {
        let (mdt, ms) = static_shape(g, node, mask)?;
        let (mst, _) = super::storage_type(mdt)
            .filter(|_| mdt == DType::Bool && ms == shape)
            .ok_or_else(|| unsupported(node, format!("a {mdt} mask")))?;
        bindings += &format!(
            "@group(0) @binding({}) var<storage, read_write> out1: array<{mst}>;\n",
            params.len() + 1
        );
        code += &format!("        out1[i] = {};\n", types::store(mdt, "true"));
        outputs.push(mask.0);
    }
    if node.outputs.len() > outputs.len() {
        return Err(unsupported(node, "more than one output"));
    }
    if check.is_some() {
        bindings += &super::bounds::error_binding(params.len() + outputs.len());
        bindings.push('\n');
    }
    let store = types::store(odt, &result);
    let text = format!("{bindings}{index}{loads}{code}{store}");
    let helpers = types::helpers_for(&text);
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(text.contains("f16"))),
            (
                "what",
                &format!(
                    "{} `{}`",
                    node.op.name(),
                    node.name.replace(['\n', '`'], " ")
                ),
            ),
            ("bindings", &bindings),
            ("helpers", &helpers),
            ("n", &n32.to_string()),
            ("index", &index),
            ("loads", &loads),
            ("body", &code),
            ("store", &store),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [n32.div_ceil(WORKGROUP).clamp(1, 65535), 1, 1],
        inputs: params.iter().map(|v| v.0).collect(),
        outputs,
        index_check: check,
        loop_iterations: None,
    })
}

/// `o{k}`: the element of broadcast input `k` (shape `s`) for output index `i`.
fn offset_code(k: usize, s: &[usize], out: &[usize]) -> String {
    let pad = out.len() - s.len();
    let mut code =
        format!("        var o{k}: u32 = 0u;\n        {{\n            var r: u32 = i;\n");
    let mut stride = 1usize;
    let mut strides = vec![0usize; out.len()];
    for a in (0..out.len()).rev() {
        let d = if a >= pad { s[a - pad] } else { 1 };
        strides[a] = if d == 1 { 0 } else { stride };
        stride *= d;
    }
    for a in (0..out.len()).rev() {
        if strides[a] != 0 {
            code += &format!(
                "            o{k} = o{k} + (r % {}u) * {}u;\n",
                out[a], strides[a]
            );
        }
        code += &format!("            r = r / {}u;\n", out[a]);
    }
    code + "        }\n"
}
