//! LinearAttention in CUDA ([`crate::lower::linear_attention`]): one thread per (batch,
//! kv head, value column) runs the recurrence over every time step on its column of the
//! state (`dk` floats in registers): decay the rows, the delta rule's correction, the
//! rank-one update, then the outputs of the group's query heads. Operands of f32, f16
//! or bf16, each in its own dtype, computed in f32 and rounded once when stored, as the
//! interpreter does. The same algorithm and index arithmetic as the WGSL shader
//! (`wgsl/linear_attention.rs`), line for line.

use super::elementwise::storage;
use super::support::{flit, store};
use super::Kernel;
use crate::lower::linear_attention::{LinearAttentionSpec, Operand};
use crate::template::fill;
use crate::Result;

const TEMPLATE: &str = include_str!("linear_attention.cu");

/// The kernel's parameters (read-only inputs, then the outputs) and the graph values
/// bound to them, in order.
struct Params {
    decls: Vec<String>,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
}

impl Params {
    fn input(&mut self, name: &str, x: Operand) {
        self.decls
            .push(format!("const {}* __restrict__ {name}", storage(x.dtype)));
        self.inputs.push(x.v.0);
    }

    fn output(&mut self, name: &str, x: Operand) {
        self.decls
            .push(format!("{}* __restrict__ {name}", storage(x.dtype)));
        self.outputs.push(x.v.0);
    }
}

/// The step that scales the state's rows by `exp(decay)` (nothing without a gate).
fn decay_step(sp: &LinearAttentionSpec) -> String {
    let dk = sp.dk;
    match sp.decay {
        None => String::new(),
        Some(d) if d.per_key => format!(
            "#pragma unroll\n            for (int d = 0; d < {dk}; ++d) {{\n                s[d] *= expf(gopt_ld(decay[kb + d]));\n            }}\n"
        ),
        Some(_) => format!(
            "            const float e = expf(gopt_ld(decay[row * {}LL + g]));\n#pragma unroll\n            for (int d = 0; d < {dk}; ++d) {{\n                s[d] *= e;\n            }}\n",
            sp.kv_heads
        ),
    }
}

/// The delta rule's correction `u = beta * (u - Sᵀk)` (nothing without it).
fn delta_step(sp: &LinearAttentionSpec) -> String {
    match sp.beta {
        None => String::new(),
        Some(be) => {
            let at = if be.shared {
                "row".to_string()
            } else {
                format!("row * {}LL + g", sp.kv_heads)
            };
            format!(
                "            float rt = 0.0f;\n#pragma unroll\n            for (int d = 0; d < {dk}; ++d) {{\n                rt += s[d] * gopt_ld(k[kb + d]);\n            }}\n            u = gopt_ld(beta[{at}]) * (u - rt);\n",
                dk = sp.dk
            )
        }
    }
}

/// Emits the kernel of LinearAttention spec `sp`.
pub fn emit(sp: &LinearAttentionSpec, name: &str) -> Result<Kernel> {
    let mut p = Params {
        decls: Vec::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
    };
    p.input("q", sp.q);
    p.input("k", sp.k);
    p.input("v", sp.v);
    let past = match sp.past {
        Some(x) => {
            p.input("past", x);
            format!("gopt_ld(past[(bg * {}LL + d) * {}LL + j])", sp.dk, sp.dv)
        }
        None => "0.0f".into(),
    };
    if let Some(d) = sp.decay {
        p.input("decay", d.x);
    }
    if let Some(be) = sp.beta {
        p.input("beta", be.x);
    }
    p.output("out", sp.out);
    let state = match sp.state {
        Some(x) => {
            p.output("state", x);
            format!(
                "#pragma unroll\n        for (int d = 0; d < {dk}; ++d) {{\n            state[(bg * {dk}LL + d) * {dv}LL + j] = {};\n        }}\n",
                store(x.dtype, "s[d]"),
                dk = sp.dk,
                dv = sp.dv
            )
        }
        None => String::new(),
    };
    let source = fill(
        TEMPLATE,
        &[
            ("rule", sp.rule_name()),
            ("kv_heads", &sp.kv_heads.to_string()),
            ("dk", &sp.dk.to_string()),
            ("dv", &sp.dv.max(1).to_string()),
            ("group", &sp.group().to_string()),
            ("steps", &sp.steps.to_string()),
            ("name", name),
            ("params", &p.decls.join(", ")),
            ("columns", &sp.columns().to_string()),
            ("past", &past),
            ("kw", &(sp.kv_heads * sp.dk).to_string()),
            ("decay", &decay_step(sp)),
            ("vw", &(sp.kv_heads * sp.dv).to_string()),
            ("delta", &delta_step(sp)),
            ("qw", &(sp.q_heads * sp.dk).to_string()),
            ("ow", &(sp.q_heads * sp.dv).to_string()),
            (
                "store_out",
                &store(sp.out.dtype, &format!("{} * o", flit(sp.scale))),
            ),
            ("state", &state),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &sp.site.node,
        source,
        sp.columns(),
        p.inputs,
        p.outputs,
    ))
}
