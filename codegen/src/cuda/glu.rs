//! SwiGLU in CUDA ([`crate::lower::glu`]): one thread per element computes
//! `a * sigmoid(alpha * a) * b` in float, rounding the sigmoid and `a * sigmoid` to
//! f16 or bf16 first where the data is stored so (as the interpreter does).

use super::elementwise::storage;
use super::support::{flit, store};
use super::Kernel;
use crate::lower::glu::spec;
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, Graph, Node};

const TEMPLATE: &str = include_str!("glu.cu");

/// `v` (a float expression) rounded to `dt` and back to float, or `v` as it is.
fn rounded(dt: Option<DType>, v: &str) -> String {
    match dt {
        Some(DType::F16) => format!("__half2float(__float2half_rn({v}))"),
        Some(DType::BF16) => format!("__bfloat162float(__float2bfloat16_rn({v}))"),
        _ => v.to_string(),
    }
}

/// Emits the kernel for SwiGLU node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let sp = spec(g, node)?;
    let round = sp.round();
    let alpha = flit(sp.alpha);
    let sig = rounded(round, &format!("1.0f / (1.0f + expf(-({alpha} * x)))"));
    let note = match round {
        Some(dt) => format!(", the sigmoid and a * sigmoid rounded to {dt}"),
        None => String::new(),
    };
    let source = fill(
        TEMPLATE,
        &[
            ("what", &sp.dtype.to_string()),
            ("alpha", &alpha),
            ("note", &note),
            ("name", name),
            ("t", storage(sp.dtype)),
            ("n", &sp.n.to_string()),
            ("sig", &sig),
            ("xs", &rounded(round, "x * s")),
            ("store", &store(sp.dtype, "xs * gopt_ld(b[i])")),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        node,
        source,
        sp.n,
        vec![sp.a.0, sp.b.0],
        vec![sp.out.0],
    ))
}
