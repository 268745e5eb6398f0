//! SwiGLU in WGSL: one invocation per element computes `a * sigmoid(alpha * a) * b`
//! in f32, rounding the sigmoid and `a * sigmoid` to f16 first for f16 data (as the
//! interpreter does); f32 and f16 storage (bf16 has no WGSL form).
//! The node is read once, for both backends, by [`crate::lower::glu`].

use super::types::f32_literal;
use super::WgslKernel;
use crate::lower::glu::GluSpec;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("glu.wgsl");

/// `v` (an f32 expression) rounded to f16 and back, or `v` as it is.
fn rounded(dt: Option<DType>, v: &str) -> String {
    if dt == Some(DType::F16) {
        format!("f32(f16({v}))")
    } else {
        v.to_string()
    }
}

/// Emits the shader of SwiGLU spec `sp`.
pub fn emit(sp: &GluSpec, name: &str) -> Result<WgslKernel> {
    let site = &sp.site;
    let (t, _) = matches!(sp.dtype, DType::F32 | DType::F16)
        .then(|| super::storage_type(sp.dtype))
        .flatten()
        .ok_or_else(|| site.unsupported(&format!("{} data", sp.dtype)))?;
    let n = u32::try_from(sp.n).map_err(|_| site.unsupported("more than 2^32 elements"))?;
    // An empty tensor's buffer is one word: bound as u32 (nothing is read or written).
    let t = if n == 0 { "u32" } else { t };
    let round = sp.round();
    let alpha = f32_literal(sp.alpha);
    let note = match round {
        Some(dt) => format!(", the sigmoid and a * sigmoid rounded to {dt}"),
        None => String::new(),
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(t == "f16")),
            ("what", &sp.dtype.to_string()),
            ("alpha", &alpha),
            ("note", &note),
            ("t", t),
            ("n", &n.to_string()),
            (
                "sig",
                &rounded(round, &format!("1.0 / (1.0 + exp(-({alpha} * x)))")),
            ),
            ("xs", &rounded(round, "x * s")),
        ],
    )?;
    let (inputs, outputs) = (vec![sp.a.0, sp.b.0], vec![sp.out.0]);
    Ok(WgslKernel::flat(
        name, &site.node, source, n, inputs, outputs,
    ))
}
