//! LinearAttention in CUDA ([`crate::lower::linear_attention`]): one thread per (batch,
//! kv head, value column) runs the recurrence over every time step on its column of the
//! state (`dk` floats in registers): decay the rows, the delta rule's correction, the
//! rank-one update, then the outputs of the group's query heads. Operands of f32, f16
//! or bf16, each in its own dtype, computed in f32 and rounded once when stored, as the
//! interpreter does. The same algorithm and index arithmetic as the WGSL shader
//! (`wgsl/linear_attention.rs`), line for line.

use super::elementwise::storage;
use super::support::store;
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::linear_attention::{LinearAttentionSpec, Operand};
use crate::template::fill_owned;
use crate::twin::linear_attention::fills;
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
    if let Some(x) = sp.past {
        p.input("past", x);
    }
    if let Some(d) = sp.decay {
        p.input("decay", d.x);
    }
    if let Some(be) = sp.beta {
        p.input("beta", be.x);
    }
    p.output("out", sp.out);
    if let Some(x) = sp.state {
        p.output("state", x);
    }
    let mut values = fills(sp, &Cuda { name }, &store);
    values.extend([
        ("name", name.to_string()),
        ("params", p.decls.join(", ")),
        ("columns", sp.columns().to_string()),
        ("vw", (sp.kv_heads * sp.dv).to_string()),
    ]);
    let source = fill_owned(TEMPLATE, &values)?;
    Ok(Kernel::flat(
        name,
        &sp.site.node,
        source,
        sp.columns(),
        p.inputs,
        p.outputs,
    ))
}
