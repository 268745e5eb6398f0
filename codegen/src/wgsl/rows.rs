//! Row kernels in WGSL: Softmax, LogSoftmax and LpNormalization along one axis (rows
//! strided when it is not the last), LayerNorm and RMSNorm over the trailing axes from
//! `axis` (scale and bias broadcast within them; LayerNorm's optional Mean and
//! InvStdDev outputs too), from the geometry [`crate::lower::rows`] resolves. One
//! workgroup of 256 invocations (`super::WORKGROUP`) per row, fp32 statistics reduced
//! through workgroup memory, one rounding at the store (the CUDA row kernels'
//! algorithm, without their register caching).

use super::WgslKernel;
use crate::lower::rows::{column_index, Lp, Param, RowOp, Spec};
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("rows.wgsl");

/// `reduce_sum(v, lid)`: the f32 sum of one value per invocation of a 256-wide
/// workgroup, through the workgroup array `red`, that the row kernels and the
/// normalizations' statistics shader both use (`{{reduce_sum}}` in their templates).
pub const REDUCE_SUM: &str = include_str!("reduce_sum.wgsl");

fn storage(site: &Site, dt: DType) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(super::refuse(site, &format!("{other} data"))),
    }
}

/// Emits the row kernel of spec `r`.
pub fn emit(r: &Spec, name: &str) -> Result<WgslKernel> {
    let (d, inner) = (r.d, r.inner);
    let (dt, odt) = (r.dtype, r.y.dtype);
    let (xs, os) = (storage(&r.site, dt)?, storage(&r.site, odt)?);
    let rows32 =
        u32::try_from(r.rows()).map_err(|_| super::refuse(&r.site, "more than 2^32 rows"))?;
    let mut f16 = dt == DType::F16 || odt == DType::F16;
    let mut bindings = format!("@group(0) @binding(0) var<storage, read> x: array<{xs}>;\n");
    let mut inputs = vec![r.x.0];
    let mut outputs = vec![r.y.value.0];
    let mut extra_out: Vec<String> = Vec::new();
    let mut per_row = |p: &Option<Param>, var: &str| -> Result<Option<String>> {
        let Some(p) = p else {
            return Ok(None);
        };
        f16 |= p.dtype == DType::F16;
        bindings += &format!(
            "@group(0) @binding({}) var<storage, read> {var}: array<{}>;\n",
            inputs.len(),
            storage(&r.site, p.dtype)?
        );
        inputs.push(p.value.0);
        let at = column_index(&p.column, "c", "u");
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
    let body = match r.op {
        RowOp::Softmax => format!(
            "        var m: f32 = -3.4028235e38;\n{}        m = reduce_max(m, lid);\n        var s: f32 = 0.0;\n{}        let inv = 1.0 / reduce_sum(s, lid);\n{}",
            lp(&format!("m = max(m, {xv});")),
            lp(&format!("s = s + exp({xv} - m);")),
            lp(&format!("y[{at}] = {os}(exp({xv} - m) * inv);"))
        ),
        RowOp::LpNorm(p) => {
            let (map, root) = match p {
                Lp::L1 => ("abs(v)", "s"),
                Lp::L2 => ("v * v", "sqrt(s)"),
            };
            format!(
                "        var q: f32 = 0.0;\n{}        let s = reduce_sum(q, lid);\n        let norm = {root};\n{}",
                lp(&format!("let v = {xv}; q = q + {map};")),
                lp(&format!("y[{at}] = {os}(select({xv} / norm, 0.0, norm == 0.0));"))
            )
        }
        RowOp::LogSoftmax => format!(
            "        var m: f32 = -3.4028235e38;\n{}        m = reduce_max(m, lid);\n        var s: f32 = 0.0;\n{}        let shift = m + gopt_log(reduce_sum(s, lid));\n{}",
            lp(&format!("m = max(m, {xv});")),
            lp(&format!("s = s + exp({xv} - m);")),
            lp(&format!("y[{at}] = {os}({xv} - shift);"))
        ),
        RowOp::LayerNorm | RowOp::RmsNorm => {
            let scale = per_row(&r.scale, "scale")?.unwrap_or_else(|| "1.0".into());
            let bias = per_row(&r.bias, "bias")?;
            let bias = bias.map(|b| format!(" + {b}")).unwrap_or_default();
            let mean = if r.op == RowOp::RmsNorm {
                "        let mean: f32 = 0.0;\n".to_string()
            } else {
                format!(
                    "        var s: f32 = 0.0;\n{}        let mean = reduce_sum(s, lid) / {d}.0;\n",
                    lp(&format!("s = s + {xv};"))
                )
            };
            let mut stats = String::new();
            for (o, (var, e)) in [r.mean, r.inv_std_dev]
                .iter()
                .zip([("mean_out", "mean"), ("rstd_out", "rstd")])
            {
                let Some(o) = o else { continue };
                let st = storage(&r.site, o.dtype)?;
                f16 |= o.dtype == DType::F16;
                extra_out.push(format!(
                    "var<storage, read_write> {var}: array<{st}>;"
                ));
                outputs.push(o.value.0);
                stats += &format!("            {var}[row] = {st}({e});\n");
            }
            if !stats.is_empty() {
                stats = format!("        if (lid == 0u) {{\n{stats}        }}\n");
            }
            format!(
                "{mean}        var q: f32 = 0.0;\n{}        let rstd = 1.0 / sqrt(reduce_sum(q, lid) / {d}.0 + {:e});\n{}{stats}",
                lp(&format!("let v = {xv} - mean; q = q + v * v;")),
                r.epsilon,
                lp(&format!("y[{at}] = {os}(({xv} - mean) * rstd * {scale}{bias});"))
            )
        }
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
            ("what", r.site.op),
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
            ("reduce_sum", REDUCE_SUM),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: r.site.node.clone(),
        source,
        workgroups: [rows32.clamp(1, 65535), 1, 1],
        inputs,
        outputs,
        index_check: None,
        loop_iterations: None,
    })
}
