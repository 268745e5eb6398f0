//! Gemm in WGSL, for the forms the optimizer leaves as Gemm (transposes, alpha, beta, a
//! bias C broadcast to the output): `alpha * op(A) op(B) + beta * C` over f32/f16, one
//! invocation per output element (a plain loop: these are the small Gemms that did not
//! become MatMuls).

use super::unsupported;
use super::WgslKernel;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::NnOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

const TEMPLATE: &str = include_str!("gemm.wgsl");

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(op, Op::Nn(NnOp::Gemm))
}

/// Emits the shader for Gemm node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let plan = |e: gopt_ir::IrError| CodegenError::Plan(e.to_string());
    let input = |k: usize| node.inputs.get(k).copied().flatten();
    let typed = |v: ValueId| -> Result<(DType, Vec<usize>, &'static str)> {
        let t = g.ty(v).map_err(plan)?;
        let s =
            gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
        let st = match t.dtype {
            DType::F32 => "f32",
            DType::F16 => "f16",
            other => return Err(unsupported(node, format!("{other} data"))),
        };
        Ok((t.dtype, s, st))
    };
    let a = input(0).ok_or_else(|| unsupported(node, "a missing input"))?;
    let b = input(1).ok_or_else(|| unsupported(node, "a missing input"))?;
    let out = *node
        .outputs
        .first()
        .ok_or_else(|| unsupported(node, "no output"))?;
    let (_, as_, at) = typed(a)?;
    let (_, bs, bt) = typed(b)?;
    let (_, _, yt) = typed(out)?;
    let ta = node.attrs.int_or("transA", 0).map_err(plan)? != 0;
    let tb = node.attrs.int_or("transB", 0).map_err(plan)? != 0;
    let alpha = node.attrs.float_or("alpha", 1.0).map_err(plan)?;
    let beta = node.attrs.float_or("beta", 1.0).map_err(plan)?;
    if !alpha.is_finite() || !beta.is_finite() {
        return Err(unsupported(node, "a non-finite alpha or beta"));
    }
    let ([a0, a1], [b0, b1]) = (
        <[usize; 2]>::try_from(as_.as_slice())
            .map_err(|_| unsupported(node, "an A that is not a matrix"))?,
        <[usize; 2]>::try_from(bs.as_slice())
            .map_err(|_| unsupported(node, "a B that is not a matrix"))?,
    );
    let (m, k) = if ta { (a1, a0) } else { (a0, a1) };
    let (kb, n) = if tb { (b1, b0) } else { (b0, b1) };
    if k != kb {
        return Err(unsupported(node, "A and B of different inner sizes"));
    }
    let mn = u32::try_from(m * n).map_err(|_| unsupported(node, "more than 2^32 outputs"))?;
    if mn == 0 {
        return Err(unsupported(node, "an empty output"));
    }
    let mut bindings = vec![
        format!("var<storage, read> a: array<{at}>;"),
        format!("var<storage, read> b: array<{bt}>;"),
    ];
    let mut inputs = vec![a.0, b.0];
    let mut result = format!("{} * acc", super::types::f32_literal(alpha));
    let mut how = String::new();
    if let Some(cv) = input(2).filter(|_| beta != 0.0) {
        let (_, cs, ct) = typed(cv)?;
        let (cm, cn) = match cs[..] {
            [] => (1, 1),
            [x] => (1, x),
            [x, y] => (x, y),
            _ => return Err(unsupported(node, "a C of rank above 2")),
        };
        if (cm != 1 && cm != m) || (cn != 1 && cn != n) {
            return Err(unsupported(
                node,
                "a C that does not broadcast to the output",
            ));
        }
        let row = if cm == 1 {
            "0u".into()
        } else {
            format!("r * {cn}u")
        };
        let col = if cn == 1 { "0u" } else { "c" };
        bindings.push(format!("var<storage, read> cin: array<{ct}>;"));
        inputs.push(cv.0);
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
        node: node.name.clone(),
        source,
        workgroups: [mn.div_ceil(super::WORKGROUP).clamp(1, 65535), 1, 1],
        inputs,
        outputs: vec![out.0],
        index_check: None,
    })
}
