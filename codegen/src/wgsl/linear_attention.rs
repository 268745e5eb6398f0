//! LinearAttention in WGSL ([`crate::lower::linear_attention`]): one invocation per
//! (batch, kv head, value column) runs the recurrence over every time step on its column
//! of the state (`dk` f32 in a private array): decay the rows, the delta rule's
//! correction, the rank-one update, then the outputs of the group's query heads.
//! Operands of f32 or f16 (WGSL has no bf16), each in its own dtype, computed in f32 and
//! rounded once when stored, as the interpreter does. The same algorithm and index
//! arithmetic as the CUDA kernel (`cuda/linear_attention.rs`), line for line.

use super::syntax::Wgsl;
use super::types::{load, store};
use super::WgslKernel;
use crate::lower::linear_attention::{LinearAttentionSpec, Operand};
use crate::lower::support::Site;
use crate::template::fill_owned;
use crate::twin::linear_attention::fills;
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
    if let Some(x) = sp.past {
        b.bind(site, "past", x, false)?;
    }
    if let Some(d) = sp.decay {
        b.bind(site, "decay", d.x, false)?;
    }
    if let Some(be) = sp.beta {
        b.bind(site, "beta", be.x, false)?;
    }
    b.bind(site, "out", sp.out, true)?;
    if let Some(x) = sp.state {
        b.bind(site, "state", x, true)?;
    }
    let columns =
        u32::try_from(sp.columns()).map_err(|_| site.unsupported("2^32 state columns or more"))?;
    let mut values = fills(sp, &Wgsl::PLAIN, &store);
    values.extend([
        ("enable", super::enable_f16(b.f16).to_string()),
        ("bindings", b.decls.join("\n")),
        ("columns", columns.to_string()),
        (
            "load_v",
            load(
                sp.v.dtype,
                &format!("v[row * {}u + g * {}u + j]", sp.kv_heads * sp.dv, sp.dv),
            ),
        ),
        ("load_k", load(sp.k.dtype, "k[kb + d]")),
        ("load_q", load(sp.q.dtype, "q[qb + d]")),
    ]);
    let source = fill_owned(TEMPLATE, &values)?;
    Ok(WgslKernel::flat(
        name, &site.node, source, columns, b.inputs, b.outputs,
    ))
}
