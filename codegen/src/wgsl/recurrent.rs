//! RNN, GRU and LSTM in WGSL: one workgroup per (direction, batch row) runs the whole
//! sequence, the hidden state (the cell state, the gates) in workgroup memory, the
//! invocations splitting the gate rows and then the hidden elements of each step with
//! a barrier between (`recurrent.wgsl`, with the cell's step from
//! `recurrent_{rnn,gru,lstm}.wgsl`). Data of f32 or f16 storage, computed in f32;
//! sequence lengths (i32 or i64) are checked on the device, one outside
//! `0..=seq_length` failing the run ([`crate::plan::IndexCheck`]).
//! The node is read once, for both backends, by [`crate::lower::recurrent`]; the
//! template's values are the CUDA writer's ([`crate::twin::recurrent`]).

use super::syntax::Wgsl;
use super::types::helpers_for;
use super::WgslKernel;
use crate::lower::recurrent::{Cell, Lengths, RecurrentSpec};
use crate::plan::IndexCheck;
use crate::template::fill_owned;
use crate::twin::recurrent::{activations, buffers, cell_fills, fills, last};
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("recurrent.wgsl");
const RNN: &str = include_str!("recurrent_rnn.wgsl");
const GRU: &str = include_str!("recurrent_gru.wgsl");
const LSTM: &str = include_str!("recurrent_lstm.wgsl");

/// Emits the shader of RNN, GRU or LSTM spec `sp`.
pub fn emit(sp: &RecurrentSpec, name: &str) -> Result<WgslKernel> {
    let site = &sp.site;
    let (t, _) = super::storage_type(sp.dtype)
        .ok_or_else(|| site.unsupported(&format!("{} data", sp.dtype)))?;
    let groups = u32::try_from(sp.groups())
        .ok()
        .filter(|&n| n <= 65535)
        .ok_or_else(|| site.unsupported("more than 65535 (direction, batch) rows"))?;
    if sp.check.is_some() && i32::try_from(sp.seq).is_err() {
        return Err(site.unsupported("an axis of 2^31 elements or more"));
    }
    let cell = match sp.cell {
        Cell::Rnn => RNN,
        Cell::Gru => GRU,
        Cell::Lstm => LSTM,
    };
    let acts = acts(sp);
    let mut values = fills(sp, &Wgsl::PLAIN);
    values.extend([
        (
            "enable",
            super::enable_f16(sp.dtype == DType::F16).to_string(),
        ),
        ("bindings", bindings(sp, t)),
        ("t", t.to_string()),
        ("acts", format!("{acts}{}", helpers_for(&acts))),
        ("cell", fill_owned(cell, &cell_fills(sp, &Wgsl::PLAIN))?),
        ("len", length(sp, sp.check.as_ref())),
        (
            "last",
            last(sp, "for (var j = tid; j < HID; j = j + THREADS)"),
        ),
    ]);
    let source = fill_owned(TEMPLATE, &values)?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: site.node.clone(),
        source,
        workgroups: [groups, 1, 1],
        inputs: sp.inputs().iter().map(|v| v.0).collect(),
        outputs: sp.outputs().iter().map(|v| v.0).collect(),
        index_check: sp.check.clone(),
        loop_iterations: None,
    })
}

/// The bindings in the spec's order (inputs, outputs, then the error word when the
/// lengths are checked); data of storage type `t`.
fn bindings(sp: &RecurrentSpec, t: &str) -> String {
    let bs = buffers(sp);
    let mut text: String = bs
        .iter()
        .enumerate()
        .map(|(k, b)| {
            let (access, ty) = match (b.written, b.name) {
                (true, _) => ("read_write", t),
                (false, "lens") => ("read", length_type(b.dtype)),
                (false, _) => ("read", t),
            };
            format!(
                "@group(0) @binding({k}) var<storage, {access}> {}: array<{ty}>;\n",
                b.name
            )
        })
        .collect();
    if sp.check.is_some() {
        text += &super::bounds::error_binding(bs.len());
        text.push('\n');
    }
    text
}

/// The storage element of sequence lengths of `dt` (i32, or i64 as two words).
fn length_type(dt: DType) -> &'static str {
    if dt == DType::I64 {
        "vec2<u32>"
    } else {
        "i32"
    }
}

/// Statements (invocation 0's, indented eight spaces) that set `steps` to the row's
/// sequence length: the whole sequence, or `lens[b]` checked against `0..=seq` (one
/// outside raises the check's code and runs no step).
fn length(sp: &RecurrentSpec, check: Option<&IndexCheck>) -> String {
    let (Lengths::Input(_, dt), Some(check)) = (sp.lens, check) else {
        return "        steps = SEQ;\n".into();
    };
    let load = if dt == DType::I64 {
        "        let lw = lens[b];\n        var len = bitcast<i32>(lw.x);\n        \
         if (lw.y != select(0u, 0xffffffffu, len < 0i)) { len = -1i; }\n"
    } else {
        "        var len = lens[b];\n"
    };
    format!(
        "{load}        if (len < 0i || len > {seq}i) {{ atomicMax(&gopt_err, {code}u); len = 0i; }}\n        \
         steps = u32(len);\n",
        seq = sp.seq,
        code = check.code
    )
}

/// `fn actK(v: f32, d: u32) -> f32` for each of the cell's activations: `v` clipped
/// (with `clip`), then direction `d`'s function K.
fn acts(sp: &RecurrentSpec) -> String {
    activations(sp, &Wgsl::PLAIN, "    ")
        .into_iter()
        .enumerate()
        .map(|(k, (clip, body))| {
            format!("fn act{k}(v: f32, d: u32) -> f32 {{\n    let u = {clip};\n{body}}}\n\n")
        })
        .collect()
}
