//! Gemm in WGSL, for the forms the optimizer leaves as Gemm (transposes, alpha, beta, a
//! bias C broadcast to the output; read by [`crate::lower::gemm`]):
//! `alpha * op(A) op(B) + beta * C` over f32/f16, one invocation per output element (a
//! plain loop: these are the small Gemms that did not become MatMuls).

use super::{refuse, WgslKernel};
use crate::lower::gemm::GemmSpec;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("gemm.wgsl");

/// Emits the shader for Gemm `sp`.
pub fn emit(sp: &GemmSpec, name: &str) -> Result<WgslKernel> {
    let (p, pr) = (&sp.parts, &sp.problem);
    let unsupported = |what: &str| refuse(&sp.site, what);
    let elem = |dt: DType| match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(unsupported(&format!("{other} data"))),
    };
    let (at, yt) = (elem(pr.dtype)?, elem(pr.out_dtype)?);
    let (alpha, beta) = (p.alpha, p.beta);
    if !alpha.is_finite() || !beta.is_finite() {
        return Err(unsupported("a non-finite alpha or beta"));
    }
    let (m, k, n, ta, tb) = (pr.m, pr.k, pr.n, pr.trans_a, pr.trans_b);
    let mn = u32::try_from(m * n).map_err(|_| unsupported("more than 2^32 outputs"))?;
    if mn == 0 {
        return Err(unsupported("an empty output"));
    }
    let mut bindings = vec![
        format!("var<storage, read> a: array<{at}>;"),
        format!("var<storage, read> b: array<{at}>;"),
    ];
    let mut inputs = vec![pr.a.0, pr.b.0];
    let mut result = format!("{} * acc", super::types::f32_literal(alpha));
    let mut how = String::new();
    if let (Some(cv), Some([cm, cn])) = (&sp.tail.bias, sp.c) {
        let ct = elem(cv.dtype)?;
        let row = if cm == 1 {
            "0u".into()
        } else {
            format!("r * {cn}u")
        };
        let col = if cn == 1 { "0u" } else { "c" };
        bindings.push(format!("var<storage, read> cin: array<{ct}>;"));
        inputs.push(cv.id.0);
        result += &format!(
            " + {} * f32(cin[{row} + {col}])",
            super::types::f32_literal(beta)
        );
        how = format!(", C {cm} x {cn}");
    }
    bindings.push(format!("var<storage, read_write> y: array<{yt}>;"));
    let bindings: Vec<String> = bindings
        .iter()
        .enumerate()
        .map(|(i, b)| format!("@group(0) @binding({i}) {b}"))
        .collect();
    let bindings = bindings.join("\n");
    let aat = if ta {
        format!("j * {m}u + r")
    } else {
        format!("r * {k}u + j")
    };
    let bat = if tb {
        format!("c * {k}u + j")
    } else {
        format!("j * {n}u + c")
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(bindings.contains("f16"))),
            ("m", &m.to_string()),
            ("k", &k.to_string()),
            ("n", &n.to_string()),
            ("how", &how),
            ("bindings", &bindings),
            ("mn", &mn.to_string()),
            ("aat", &aat),
            ("bat", &bat),
            ("t", yt),
            ("result", &result),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: sp.site.node.clone(),
        source,
        workgroups: [mn.div_ceil(super::WORKGROUP).clamp(1, 65535), 1, 1],
        inputs,
        outputs: vec![pr.out.0],
        index_check: None,
        loop_iterations: None,
    })
}
