//! Row kernels in WGSL: Softmax, LogSoftmax and LpNormalization along one axis (rows
//! strided when it is not the last), LayerNorm and RMSNorm over the
//! trailing axes from `axis` (scale and bias broadcast within them; LayerNorm's
//! optional Mean and InvStdDev outputs too), one workgroup of 256 invocations
//! (`super::WORKGROUP`) per row, fp32 statistics reduced through workgroup memory,
//! one rounding at the store (the CUDA row kernels' algorithm, without their register
//! caching).

use super::unsupported;
use super::WgslKernel;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::ReduceOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

const TEMPLATE: &str = include_str!("rows.wgsl");

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(
        op,
        Op::Reduce(
            ReduceOp::LayerNormalization
                | ReduceOp::RMSNormalization
                | ReduceOp::Softmax
                | ReduceOp::LogSoftmax
                | ReduceOp::LpNormalization
        )
    )
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
    let norm = matches!(
        node.op,
        Op::Reduce(ReduceOp::LayerNormalization | ReduceOp::RMSNormalization)
    );
    let (x, dt, shape, d, axis) = norm_row(g, node)?;
    // Softmax's rows run along its one axis: `inner` elements apart.
    let (d, inner) = if norm {
        (d, 1)
    } else {
        (shape[axis], shape[axis + 1..].iter().product::<usize>())
    };
    if node.outputs.len() > 1 && !matches!(node.op, Op::Reduce(ReduceOp::LayerNormalization)) {
        return Err(unsupported(node, "more than one output"));
    }
    let out = node.outputs[0];
    let (odt, _) = shape_of(out)?;
    let (xs, os) = (storage(node, dt)?, storage(node, odt)?);
    let rows = shape.iter().product::<usize>() / d.max(1);
    let rows32 = u32::try_from(rows).map_err(|_| unsupported(node, "more than 2^32 rows"))?;
    let mut f16 = dt == DType::F16 || odt == DType::F16;
    let mut bindings = format!("@group(0) @binding(0) var<storage, read> x: array<{xs}>;\n");
    let mut inputs = vec![x.0];
    let mut outputs = vec![out.0];
    let mut extra_out: Vec<String> = Vec::new();
    let mut per_row = |k: usize, var: &str| -> Result<Option<String>> {
        let Some(v) = node.inputs.get(k).copied().flatten() else {
            return Ok(None);
        };
        let (pdt, ps) = shape_of(v)?;
        let at = column_index(&shape[axis..], &ps)
            .ok_or_else(|| unsupported(node, "a scale or bias that varies across rows"))?;
        f16 |= pdt == DType::F16;
        bindings += &format!(
            "@group(0) @binding({}) var<storage, read> {var}: array<{}>;\n",
            inputs.len(),
            storage(node, pdt)?
        );
        inputs.push(v.0);
        Ok(Some(format!("f32({var}[{at}])")))
    };
    let lp = |body: &str| {
        format!("        for (var c: u32 = lid; c < {d}u; c = c + 256u) {{\n            {body}\n        }}\n")
    };
    let at = if inner == 1 {
        "base + c".to_string()
    } else {
        format!("base + c * {inner}u")
    };
    let xv = &format!("f32(x[{at}])");
    let body = match node.op {
        Op::Reduce(ReduceOp::Softmax) => format!(
            "        var m: f32 = -3.4028235e38;\n{}        m = reduce_max(m, lid);\n        var s: f32 = 0.0;\n{}        let inv = 1.0 / reduce_sum(s, lid);\n{}",
            lp(&format!("m = max(m, {xv});")),
            lp(&format!("s = s + exp({xv} - m);")),
            lp(&format!("y[{at}] = {os}(exp({xv} - m) * inv);"))
        ),
        Op::Reduce(ReduceOp::LpNormalization) => {
            let (map, root) = match node.attrs.int_or("p", 2).map_err(|e| CodegenError::Plan(e.to_string()))? {
                1 => ("abs(v)", "s"),
                2 => ("v * v", "sqrt(s)"),
                p => return Err(unsupported(node, format!("p = {p}"))),
            };
            format!(
                "        var q: f32 = 0.0;\n{}        let s = reduce_sum(q, lid);\n        let norm = {root};\n{}",
                lp(&format!("let v = {xv}; q = q + {map};")),
                lp(&format!("y[{at}] = {os}(select({xv} / norm, 0.0, norm == 0.0));"))
            )
        }
        Op::Reduce(ReduceOp::LogSoftmax) => format!(
            "        var m: f32 = -3.4028235e38;\n{}        m = reduce_max(m, lid);\n        var s: f32 = 0.0;\n{}        let shift = m + gopt_log(reduce_sum(s, lid));\n{}",
            lp(&format!("m = max(m, {xv});")),
            lp(&format!("s = s + exp({xv} - m);")),
            lp(&format!("y[{at}] = {os}({xv} - shift);"))
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
            let mut stats = String::new();
            for (&v, (var, e)) in node.outputs[1..]
                .iter()
                .zip([("mean_out", "mean"), ("rstd_out", "rstd")])
            {
                let (sdt, _) = shape_of(v)?;
                let st = storage(node, sdt)?;
                f16 |= sdt == DType::F16;
                extra_out.push(format!(
                    "var<storage, read_write> {var}: array<{st}>;"
                ));
                outputs.push(v.0);
                stats += &format!("            {var}[row] = {st}({e});\n");
            }
            if !stats.is_empty() {
                stats = format!("        if (lid == 0u) {{\n{stats}        }}\n");
            }
            format!(
                "{mean}        var q: f32 = 0.0;\n{}        let rstd = 1.0 / sqrt(reduce_sum(q, lid) / {d}.0 + {eps:e});\n{}{stats}",
                lp(&format!("let v = {xv} - mean; q = q + v * v;")),
                lp(&format!("y[{at}] = {os}(({xv} - mean) * rstd * {scale}{bias});"))
            )
        }
        _ => return Err(unsupported(node, "this op (not a row kernel)")),
    };
    bindings += &format!(
        "@group(0) @binding({}) var<storage, read_write> y: array<{os}>;\n",
        inputs.len()
    );
    for (k, b) in extra_out.iter().enumerate() {
        bindings += &format!("@group(0) @binding({}) {b}\n", inputs.len() + 1 + k);
    }
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(f16)),
            ("what", node.op.name()),
            ("d", &d.to_string()),
            ("rows", &rows32.to_string()),
            ("bindings", &bindings),
            ("helpers", &super::types::helpers_for(&body)),
            (
                "base",
                &if inner == 1 {
                    format!("row * {d}u")
                } else {
                    format!("(row / {inner}u) * {}u + row % {inner}u", d * inner)
                },
            ),
            ("body", &body),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [rows32.clamp(1, 65535), 1, 1],
        inputs,
        outputs,
        index_check: None,
    })
}

/// A row node's input, its dtype and shape, the size of a normalization's row (the
/// trailing axes from `axis`) and `axis`.
fn norm_row(g: &Graph, node: &Node) -> Result<(ValueId, DType, Vec<usize>, usize, usize)> {
    let x = node
        .inputs
        .first()
        .copied()
        .flatten()
        .ok_or_else(|| unsupported(node, "a missing input"))?;
    let t = g.ty(x).map_err(|e| CodegenError::Plan(e.to_string()))?;
    let shape =
        gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
    let a = node
        .attrs
        .int_or("axis", -1)
        .map_err(|e| CodegenError::Plan(e.to_string()))?;
    let axis = gopt_ir::ops::util::norm_axis(a, shape.len())
        .map_err(|e| CodegenError::Plan(e.to_string()))?;
    let d = shape[axis..].iter().product();
    Ok((x, t.dtype, shape, d, axis))
}

/// The element of a parameter of shape `p` for column `c` of a row of shape `row`
/// (numpy broadcasting against the whole input: `None` where the parameter varies
/// along an axis before the row's).
fn column_index(row: &[usize], p: &[usize]) -> Option<String> {
    if p.iter().product::<usize>() == 1 {
        return Some("0u".into());
    }
    let r = row.len();
    // Leading axes of the parameter beyond the row's must be ones.
    if p.len() > r && p[..p.len() - r].iter().any(|&e| e != 1) {
        return None;
    }
    let p = &p[p.len().saturating_sub(r)..];
    let pad = r - p.len();
    if p == &row[pad..] && p.iter().product::<usize>() == row.iter().product::<usize>() {
        return Some("c".into());
    }
    let (mut terms, mut inner, mut stride) = (Vec::new(), 1usize, 1usize);
    for a in (0..r).rev() {
        let pd = if a >= pad { p[a - pad] } else { 1 };
        if pd != 1 && pd != row[a] {
            return None;
        }
        if pd != 1 {
            terms.push(format!("((c / {inner}u) % {}u) * {stride}u", row[a]));
            stride *= pd;
        }
        inner *= row[a].max(1);
    }
    Some(format!("({})", terms.join(" + ")))
}
