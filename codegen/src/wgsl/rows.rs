//! Row kernels in WGSL: LayerNorm, RMSNorm and Softmax over the last axis, one
//! workgroup of 256 invocations (`super::WORKGROUP`) per row, fp32 statistics reduced through workgroup
//! memory, one rounding at the store (the CUDA row kernels' algorithm, without their
//! register caching).

use super::WgslKernel;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::ReduceOp;
use gopt_ir::{DType, Graph, Node, Op};

const TEMPLATE: &str = include_str!("rows.wgsl");

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(
        op,
        Op::Reduce(ReduceOp::LayerNormalization | ReduceOp::RMSNormalization | ReduceOp::Softmax)
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

fn storage(node: &Node, dt: DType) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(unsupported(node, format!("{other} data"))),
    }
}

/// Emits the row kernel for `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let shape_of = |v| -> Result<(DType, Vec<usize>)> {
        let t = g.ty(v).map_err(|e| CodegenError::Plan(e.to_string()))?;
        let s =
            gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
        Ok((t.dtype, s))
    };
    let (x, dt, shape, d) = crate::index::row(g, node).map_err(|w| unsupported(node, w))?;
    let out = node.outputs[0];
    let (odt, _) = shape_of(out)?;
    let (xs, os) = (storage(node, dt)?, storage(node, odt)?);
    let rows = shape.iter().product::<usize>() / d.max(1);
    let rows32 = u32::try_from(rows).map_err(|_| unsupported(node, "more than 2^32 rows"))?;
    let mut f16 = dt == DType::F16 || odt == DType::F16;
    let mut bindings = format!("@group(0) @binding(0) var<storage, read> x: array<{xs}>;\n");
    let mut inputs = vec![x.0];
    let mut per_row = |k: usize, var: &str| -> Result<Option<String>> {
        let Some((v, pdt)) =
            crate::index::per_column(g, node, k, d).map_err(|w| unsupported(node, w))?
        else {
            return Ok(None);
        };
        f16 |= pdt == DType::F16;
        bindings += &format!(
            "@group(0) @binding({}) var<storage, read> {var}: array<{}>;\n",
            inputs.len(),
            storage(node, pdt)?
        );
        inputs.push(v.0);
        Ok(Some(format!("f32({var}[c])")))
    };
    let lp = |body: &str| {
        format!("        for (var c: u32 = lid; c < {d}u; c = c + 256u) {{\n            {body}\n        }}\n")
    };
    let xv = "f32(x[base + c])";
    let body = match node.op {
        Op::Reduce(ReduceOp::Softmax) => format!(
            "        var m: f32 = -3.4028235e38;\n{}        m = reduce_max(m, lid);\n        var s: f32 = 0.0;\n{}        let inv = 1.0 / reduce_sum(s, lid);\n{}",
            lp(&format!("m = max(m, {xv});")),
            lp(&format!("s = s + exp({xv} - m);")),
            lp(&format!("y[base + c] = {os}(exp({xv} - m) * inv);"))
        ),
        Op::Reduce(op @ (ReduceOp::LayerNormalization | ReduceOp::RMSNormalization)) => {
            let eps = node
                .attrs
                .float_or("epsilon", 1e-5)
                .map_err(|e| CodegenError::Plan(e.to_string()))?;
            let rms = op == ReduceOp::RMSNormalization;
            let scale = per_row(1, "scale")?.unwrap_or_else(|| "1.0".into());
            let bias = if rms { None } else { per_row(2, "bias")? };
            let bias = bias.map(|b| format!(" + {b}")).unwrap_or_default();
            let mean = if rms {
                "        let mean: f32 = 0.0;\n".to_string()
            } else {
                format!(
                    "        var s: f32 = 0.0;\n{}        let mean = reduce_sum(s, lid) / {d}.0;\n",
                    lp(&format!("s = s + {xv};"))
                )
            };
            format!(
                "{mean}        var q: f32 = 0.0;\n{}        let rstd = inverseSqrt(reduce_sum(q, lid) / {d}.0 + {eps:e});\n{}",
                lp(&format!("let v = {xv} - mean; q = q + v * v;")),
                lp(&format!("y[base + c] = {os}(({xv} - mean) * rstd * {scale}{bias});"))
            )
        }
        _ => return Err(unsupported(node, "this op (not a row kernel)")),
    };
    bindings += &format!(
        "@group(0) @binding({}) var<storage, read_write> y: array<{os}>;\n",
        inputs.len()
    );
    let source = fill(
        TEMPLATE,
        &[
            ("enable", if f16 { "enable f16;\n" } else { "" }),
            ("what", node.op.name()),
            ("d", &d.to_string()),
            ("rows", &rows32.to_string()),
            ("bindings", &bindings),
            ("body", &body),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [rows32.clamp(1, 65535), 1, 1],
        inputs,
        outputs: vec![out.0],
    })
}
