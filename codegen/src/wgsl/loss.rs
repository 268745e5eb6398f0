//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss in WGSL (`reduction` none, sum
//! or mean, `ignore_index`, optional per-class weights; SoftmaxCrossEntropyLoss's
//! log-softmax over the class axis computed per target, its optional log-probability
//! output written alongside), f32/f16 scores, i64 or i32 targets (one that is neither
//! `ignore_index` nor a class fails the run: [`super::bounds`]). `none` runs one
//! invocation per target; `sum` and `mean` run one workgroup that sums the losses (and
//! the weights, for `mean`) through workgroup memory.
//! The node is read once, for both backends, by [`crate::lower::loss`].

use super::types;
use super::WgslKernel;
use crate::lower::loss::{Reduction, Spec};
use crate::lower::support::Site;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("loss.wgsl");

fn float(site: &Site, dt: DType) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(super::refuse(site, &format!("{other} data"))),
    }
}

/// Emits the shader of spec `sp`.
pub fn emit(sp: &Spec, name: &str) -> Result<WgslKernel> {
    let unsupported = |what: &str| super::refuse(&sp.site, what);
    let (c, d, m) = (sp.c, sp.d, sp.m);
    let (x, dt) = sp.scores;
    let (tv, tdt) = sp.targets;
    let xt = float(&sp.site, dt)?;
    if sp.scores_len >= 1 << 31 {
        return Err(unsupported("scores of 2^31 elements or more"));
    }
    let reduction = sp.reduction.name();
    let none = sp.reduction == Reduction::None;
    let ignore = sp.ignore_index;
    let mut bindings = vec![format!("var<storage, read> x: array<{xt}>;")];
    let mut inputs = vec![x.0];
    let read = if tdt == DType::I64 {
        {
            bindings.push("var<storage, read> tgt: array<vec2<u32>>;".into());
            let ign = match ignore {
                Some(v) => format!(
                    "all(tw == vec2<u32>({}u, {}u))",
                    v as u64 & 0xffff_ffff,
                    (v as u64) >> 32
                ),
                None => "false".into(),
            };
            format!(
                "        let ignored = {ign};\n        let hi = bitcast<i32>(tw.y);\n        let t = bitcast<i32>(tw.x);\n        let valid = ((hi == 0i && t >= 0i) || (hi == -1i && t < 0i)) && t >= 0i && t < {c}i;\n"
            )
        }
    } else {
        {
            bindings.push("var<storage, read> tgt: array<i32>;".into());
            let ign = match ignore.filter(|v| i32::try_from(*v).is_ok()) {
                Some(v) => format!("(tw == {v}i)"),
                None => "false".into(),
            };
            format!(
                "        let ignored = {ign};\n        let t = tw;\n        let valid = t >= 0i && t < {c}i;\n"
            )
        }
    };
    // A target that is neither ignored nor a class is an error (as on the CPU), not a
    // zero weight.
    if i32::try_from(c).is_err() {
        return Err(unsupported("an axis of 2^31 elements or more"));
    }
    let check = IndexCheck {
        code: sp.code,
        op: sp.site.op.into(),
        what: sp.out_of_range(),
    };
    let read = format!(
        "{read}        if (!ignored && !valid) {{ atomicMax(&gopt_err, {}u); }}\n",
        check.code
    );
    inputs.push(tv.0);
    let weight = match sp.weight {
        Some((wv, wdt)) => {
            bindings.push(format!(
                "var<storage, read> weight: array<{}>;",
                float(&sp.site, wdt)?
            ));
            inputs.push(wv.0);
            "f32(weight[k])".to_string()
        }
        None => "1.0".to_string(),
    };
    let ot = float(&sp.site, sp.loss.1)?;
    bindings.push(format!("var<storage, read_write> y: array<{ot}>;"));
    let mut outputs = vec![sp.loss.0 .0];
    let mut prep = String::new();
    let xk = if sp.softmax {
        let write = match sp.log_prob {
            Some((lv, ldt)) => {
                let lt = float(&sp.site, ldt)?;
                bindings.push(format!("var<storage, read_write> logp: array<{lt}>;"));
                outputs.push(lv.0);
                format!(
                    "        for (var j: u32 = 0u; j < {c}u; j = j + 1u) {{\n            logp[base + j * {d}u] = {lt}(f32(x[base + j * {d}u]) - shift);\n        }}\n"
                )
            }
            None => String::new(),
        };
        prep = format!(
            "        var mx: f32 = -3.4028235e38;\n        for (var j: u32 = 0u; j < {c}u; j = j + 1u) {{\n            mx = max(mx, f32(x[base + j * {d}u]));\n        }}\n        var se: f32 = 0.0;\n        for (var j: u32 = 0u; j < {c}u; j = j + 1u) {{\n            se = se + exp(f32(x[base + j * {d}u]) - mx);\n        }}\n        let shift = mx + gopt_log(se);\n{write}"
        );
        format!("f32(x[base + k * {d}u]) - shift")
    } else {
        format!("f32(x[base + k * {d}u])")
    };
    let (start, step, each, finish, groups) = if none {
        (
            "gid.x",
            "nwg.x * 256u",
            format!("        y[i] = {ot}(loss);\n"),
            String::new(),
            u32::try_from(m.div_ceil(256))
                .unwrap_or(65535)
                .clamp(1, 65535),
        )
    } else {
        let result = if sp.reduction == Reduction::Mean {
            "red[0] / redw[0]"
        } else {
            "red[0]"
        };
        (
            "lid",
            "256u",
            String::new(),
            format!(
                "    red[lid] = ls;\n    redw[lid] = ws;\n    workgroupBarrier();\n    for (var s: u32 = 128u; s > 0u; s = s >> 1u) {{\n        if (lid < s) {{\n            red[lid] = red[lid] + red[lid + s];\n            redw[lid] = redw[lid] + redw[lid + s];\n        }}\n        workgroupBarrier();\n    }}\n    if (lid == 0u) {{\n        y[0] = {ot}({result});\n    }}\n"
            ),
            1,
        )
    };
    let mut bindings: Vec<String> = bindings
        .iter()
        .enumerate()
        .map(|(k, b)| format!("@group(0) @binding({k}) {b}"))
        .collect();
    bindings.push(super::bounds::error_binding(bindings.len()));
    let bindings = bindings.join("\n");
    let helpers = types::helpers_for(&prep);
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(bindings.contains("f16"))),
            ("what", sp.site.op),
            ("reduction", reduction),
            ("m", &m.to_string()),
            ("c", &c.to_string()),
            ("d", &d.to_string()),
            (
                "how",
                if none {
                    "one invocation per target"
                } else {
                    "one workgroup, summed through workgroup memory"
                },
            ),
            ("bindings", &bindings),
            ("helpers", &helpers),
            ("start", start),
            ("step", step),
            ("cd", &(c * d).to_string()),
            ("prep", &prep),
            ("read", &read),
            ("weight", &weight),
            ("xk", &xk),
            ("each", &each),
            ("finish", &finish),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: sp.site.node.clone(),
        source,
        workgroups: [groups, 1, 1],
        inputs,
        outputs,
        index_check: Some(check),
        loop_iterations: None,
    })
}
