//! LinearAttention in WGSL ([`crate::lower::linear_attention`]): one invocation per
//! (batch, kv head, value column) runs the recurrence over every time step on its column
//! of the state (`dk` f32 in a private array): decay the rows, the delta rule's
//! correction, the rank-one update, then the outputs of the group's query heads.
//! Operands of f32 or f16 (WGSL has no bf16), each in its own dtype, computed in f32 and
//! rounded once when stored, as the interpreter does. The same algorithm and index
//! arithmetic as the CUDA kernel (`cuda/linear_attention.rs`), line for line.

use super::types::{f32_literal, load, store};
use super::WgslKernel;
use crate::lower::linear_attention::{LinearAttentionSpec, Operand};
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("linear_attention.wgsl");

/// The shader's bindings (read-only inputs, then the outputs) and the graph values bound
/// to them, in order; whether any of them is f16.
struct Bindings {
    decls: Vec<String>,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    f16: bool,
}

impl Bindings {
    /// Binds `x` as `name`, read-only (`write` false) or read-write.
    fn bind(&mut self, site: &Site, name: &str, x: Operand, write: bool) -> Result<()> {
        let t = match x.dtype {
            DType::F32 => "f32",
            DType::F16 => "f16",
            other => return Err(site.unsupported(&format!("a {other} {name}"))),
        };
        self.f16 |= x.dtype == DType::F16;
        let access = if write { "read_write" } else { "read" };
        self.decls.push(format!(
            "@group(0) @binding({}) var<storage, {access}> {name}: array<{t}>;",
            self.decls.len()
        ));
        if write {
            self.outputs.push(x.v.0);
        } else {
            self.inputs.push(x.v.0);
        }
        Ok(())
    }
}

/// The step that scales the state's rows by `exp(decay)` (nothing without a gate).
fn decay_step(sp: &LinearAttentionSpec) -> String {
    let dk = sp.dk;
    match sp.decay {
        None => String::new(),
        Some(d) if d.per_key => format!(
            "            for (var d: u32 = 0u; d < {dk}u; d = d + 1u) {{\n                s[d] = s[d] * exp({});\n            }}\n",
            load(d.x.dtype, "decay[kb + d]")
        ),
        Some(d) => format!(
            "            let e = exp({});\n            for (var d: u32 = 0u; d < {dk}u; d = d + 1u) {{\n                s[d] = s[d] * e;\n            }}\n",
            load(d.x.dtype, &format!("decay[row * {}u + g]", sp.kv_heads))
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
                format!("row * {}u + g", sp.kv_heads)
            };
            format!(
                "            var rt = 0.0;\n            for (var d: u32 = 0u; d < {dk}u; d = d + 1u) {{\n                rt = rt + s[d] * {};\n            }}\n            u = {} * (u - rt);\n",
                load(sp.k.dtype, "k[kb + d]"),
                load(be.x.dtype, &format!("beta[{at}]")),
                dk = sp.dk
            )
        }
    }
}

/// Refuses a node whose tensors have 2^32 elements or more (the shader indexes in u32).
fn check_size(sp: &LinearAttentionSpec) -> Result<()> {
    let rows = sp.batch * sp.steps;
    let widest = (sp.q_heads * sp.dk.max(sp.dv)).max(sp.kv_heads * sp.dk.max(sp.dv));
    let largest = (rows * widest).max(sp.state_elems());
    if u32::try_from(largest).is_err() {
        return Err(sp.site.unsupported("tensors of 2^32 elements or more"));
    }
    Ok(())
}

/// Emits the shader of LinearAttention spec `sp`.
pub fn emit(sp: &LinearAttentionSpec, name: &str) -> Result<WgslKernel> {
    let site = &sp.site;
    check_size(sp)?;
    let mut b = Bindings {
        decls: Vec::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        f16: false,
    };
    b.bind(site, "q", sp.q, false)?;
    b.bind(site, "k", sp.k, false)?;
    b.bind(site, "v", sp.v, false)?;
    let past = match sp.past {
        Some(x) => {
            b.bind(site, "past", x, false)?;
            load(
                x.dtype,
                &format!("past[(bg * {}u + d) * {}u + j]", sp.dk, sp.dv),
            )
        }
        None => "0.0".into(),
    };
    if let Some(d) = sp.decay {
        b.bind(site, "decay", d.x, false)?;
    }
    if let Some(be) = sp.beta {
        b.bind(site, "beta", be.x, false)?;
    }
    b.bind(site, "out", sp.out, true)?;
    let state = match sp.state {
        Some(x) => {
            b.bind(site, "state", x, true)?;
            format!(
                "        for (var d: u32 = 0u; d < {dk}u; d = d + 1u) {{\n            state[(bg * {dk}u + d) * {dv}u + j] = {};\n        }}\n",
                store(x.dtype, "s[d]"),
                dk = sp.dk,
                dv = sp.dv
            )
        }
        None => String::new(),
    };
    let columns =
        u32::try_from(sp.columns()).map_err(|_| site.unsupported("2^32 state columns or more"))?;
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(b.f16)),
            ("rule", sp.rule_name()),
            ("kv_heads", &sp.kv_heads.to_string()),
            ("dk", &sp.dk.to_string()),
            ("dv", &sp.dv.max(1).to_string()),
            ("group", &sp.group().to_string()),
            ("steps", &sp.steps.to_string()),
            ("bindings", &b.decls.join("\n")),
            ("columns", &columns.to_string()),
            ("past", &past),
            ("kw", &(sp.kv_heads * sp.dk).to_string()),
            ("decay", &decay_step(sp)),
            (
                "load_v",
                &load(
                    sp.v.dtype,
                    &format!("v[row * {}u + g * {}u + j]", sp.kv_heads * sp.dv, sp.dv),
                ),
            ),
            ("delta", &delta_step(sp)),
            ("load_k", &load(sp.k.dtype, "k[kb + d]")),
            ("qw", &(sp.q_heads * sp.dk).to_string()),
            ("load_q", &load(sp.q.dtype, "q[qb + d]")),
            ("ow", &(sp.q_heads * sp.dv).to_string()),
            (
                "store_out",
                &store(sp.out.dtype, &format!("{} * o", f32_literal(sp.scale))),
            ),
            ("state", &state),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: site.node.clone(),
        source,
        workgroups: [columns.div_ceil(super::WORKGROUP).clamp(1, 65535), 1, 1],
        inputs: b.inputs,
        outputs: b.outputs,
        index_check: None,
        loop_iterations: None,
    })
}
