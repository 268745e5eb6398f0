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
use super::{refuse, WgslKernel, WORKGROUP};
use crate::lower::elementwise::{Operand, Spec, Test};
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("elementwise.wgsl");

/// Emits the shader of element-wise spec `spec`.
pub fn emit(spec: &Spec, name: &str) -> Result<WgslKernel> {
    let site = &spec.site;
    let (odt, shape) = (spec.dtype, &spec.shape);
    let (ost, _) =
        super::storage_type(odt).ok_or_else(|| refuse(site, &format!("{odt} outputs")))?;
    let n: usize = shape.iter().product();
    let n32 = u32::try_from(n).map_err(|_| refuse(site, "more than 2^32 elements"))?;
    let mut bindings = String::new();
    let mut index = String::new();
    let mut loads = String::new();
    for (k, input) in spec.inputs.iter().enumerate() {
        let (dt, s) = (input.dtype, &input.shape);
        let (st, _) =
            super::storage_type(dt).ok_or_else(|| refuse(site, &format!("{dt} inputs")))?;
        bindings += &format!("@group(0) @binding({k}) var<storage, read> in{k}: array<{st}>;\n");
        let numel: usize = s.iter().product();
        let at = if numel == 1 || n == 0 {
            "0u".to_string()
        } else if s == shape {
            "i".to_string()
        } else {
            index += &offset_code(k, s, shape);
            format!("o{k}")
        };
        loads += &format!(
            "        let a{k} = {};\n",
            types::load(dt, &format!("in{k}[{at}]"))
        );
    }
    bindings += &format!(
        "@group(0) @binding({}) var<storage, read_write> out: array<{ost}>;\n",
        spec.inputs.len()
    );
    let name_of = |o: &Operand| -> Result<String> {
        Ok(match o {
            Operand::Input(k) => format!("a{k}"),
            Operand::Step(i) => format!("t{i}"),
            Operand::Const(t) => types::literal(t).ok_or_else(|| {
                refuse(
                    site,
                    &format!("a constant that is not one {} value", t.dtype()),
                )
            })?,
        })
    };
    let mut code = String::new();
    for (i, step) in spec.steps.iter().enumerate() {
        if let (false, Some(c)) = (step.trains_if.is_empty(), &spec.check) {
            // Training mode or the ratio known only at run time: the first
            // invocation raises the node's code where it would train.
            let mut cond = Vec::new();
            for (v, test) in &step.trains_if {
                let n = name_of(v)?;
                cond.push(match test {
                    Test::True => n,
                    Test::NonZero => format!("{n} != 0.0"),
                });
            }
            code += &format!(
                "        if (i == 0u && {}) {{ atomicMax(&gopt_err, {}u); }}\n",
                cond.join(" && "),
                c.code
            );
        }
        let args: Vec<Option<(String, DType)>> = step
            .args
            .iter()
            .map(|a| match a {
                None => Ok(None),
                Some(a) => Ok(Some((name_of(&a.at)?, a.dtype))),
            })
            .collect::<Result<_>>()?;
        let odt_b = step.dtype;
        if kind(odt_b).is_none() {
            return Err(refuse(
                site,
                &format!("{} producing {odt_b}", step.op.name()),
            ));
        }
        let e = expr(step.op, &step.expr, &args, odt_b).map_err(|what| refuse(site, &what))?;
        code += &format!("        let t{i} = {};\n", types::wrap(odt_b, &e));
    }
    let result = name_of(&spec.result)?;
    let rdt = spec.dtype_of(&spec.result);
    if rdt != odt {
        return Err(CodegenError::Plan(format!(
            "node `{}`: body output is {rdt}, the node's {odt}",
            site.node
        )));
    }
    // A single Dropout's mask: all true (the data passes unchanged).
    let mut outputs = vec![site.output(0)?];
    if let Some(mask) = spec.mask {
        let (mst, _) =
            super::storage_type(DType::Bool).ok_or_else(|| refuse(site, "a bool mask"))?;
        bindings += &format!(
            "@group(0) @binding({}) var<storage, read_write> out1: array<{mst}>;\n",
            spec.inputs.len() + 1
        );
        code += &format!("        out1[i] = {};\n", types::store(DType::Bool, "true"));
        outputs.push(mask);
    }
    if spec.check.is_some() {
        bindings += &super::bounds::error_binding(spec.inputs.len() + outputs.len());
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
                &format!("{} `{}`", site.op, site.node.replace(['\n', '`'], " ")),
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
        node: site.node.clone(),
        source,
        workgroups: [n32.div_ceil(WORKGROUP).clamp(1, 65535), 1, 1],
        inputs: spec.inputs.iter().map(|i| i.value).collect(),
        outputs,
        index_check: spec.check.clone(),
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
