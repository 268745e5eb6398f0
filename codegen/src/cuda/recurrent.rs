//! RNN, GRU and LSTM in CUDA ([`crate::lower::recurrent`]): one block per (direction,
//! batch row) runs the whole sequence, the hidden state (the cell state, the gates) in
//! shared memory, the threads splitting the gate rows and then the hidden elements of
//! each step with a barrier between (`recurrent.cu`, with the cell's step from
//! `recurrent_{rnn,gru,lstm}.cu`). Data of f32, f16 or bf16 storage, computed in f32;
//! sequence lengths (i32 or i64) are checked on the device, one outside
//! `0..=seq_length` failing the run ([`crate::plan::IndexCheck`]). The WGSL kernel is
//! the same algorithm line by line, filled from the same values
//! ([`crate::twin::recurrent`]).

use super::elementwise::storage;
use super::support::store;
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::recurrent::{Cell, Lengths, RecurrentSpec};
use crate::plan::IndexCheck;
use crate::template::fill_owned;
use crate::twin::recurrent::{activations, buffers, cell_fills, fills, last};
use crate::Result;

const TEMPLATE: &str = include_str!("recurrent.cu");
const RNN: &str = include_str!("recurrent_rnn.cu");
const GRU: &str = include_str!("recurrent_gru.cu");
const LSTM: &str = include_str!("recurrent_lstm.cu");

/// Emits the kernel of RNN, GRU or LSTM spec `sp`.
pub fn emit(sp: &RecurrentSpec, name: &str) -> Result<Kernel> {
    let sx = Cuda { name };
    let threads = sp.threads();
    let cell = match sp.cell {
        Cell::Rnn => RNN,
        Cell::Gru => GRU,
        Cell::Lstm => LSTM,
    };
    let mut values = fills(sp, &sx);
    values.extend([
        ("name", name.to_string()),
        ("params", params(sp)),
        ("store", store(sp.dtype, "v")),
        ("acts", acts(sp, &sx)),
        ("cell", fill_owned(cell, &cell_fills(sp, &sx))?),
        ("len", length(sp, sp.check.as_ref())),
        ("last", last(sp, "for (int j = tid; j < HID; j += THREADS)")),
    ]);
    let source = fill_owned(TEMPLATE, &values)?;
    let grid = u32::try_from(sp.groups()).map_err(|_| {
        sp.site
            .unsupported("more than 2^32 (direction, batch) rows")
    })?;
    Ok(Kernel {
        name: name.to_string(),
        node: sp.site.node.clone(),
        source,
        threads: sp.groups() * threads,
        vectorized: false,
        inputs: sp.inputs().iter().map(|v| v.0).collect(),
        outputs: sp.outputs().iter().map(|v| v.0).collect(),
        shared_mem: 0,
        grid,
        block: threads as u32,
        index_check: sp.check.clone(),
    })
}

/// The kernel's parameters in the spec's order (inputs, outputs, then the error word
/// when the lengths are checked).
fn params(sp: &RecurrentSpec) -> String {
    let mut ps: Vec<String> = buffers(sp)
        .iter()
        .map(|b| {
            let c = if b.written { "" } else { "const " };
            format!("{c}{}* __restrict__ {}", storage(b.dtype), b.name)
        })
        .collect();
    if sp.check.is_some() {
        ps.push("unsigned int* __restrict__ gopt_err".into());
    }
    ps.join(", ")
}

/// Statements (thread 0's, indented eight spaces) that set `steps` to the row's
/// sequence length: the whole sequence, or `lens[b]` checked against `0..=seq` (one
/// outside raises the check's code and runs no step).
fn length(sp: &RecurrentSpec, check: Option<&IndexCheck>) -> String {
    let (Lengths::Input(..), Some(check)) = (sp.lens, check) else {
        return "        steps = SEQ;\n".into();
    };
    format!(
        "        long long len = (long long)lens[b];\n        \
         if (len < 0 || len > {seq}) {{ atomicMax(gopt_err, {code}u); len = 0; }}\n        \
         steps = (int)len;\n",
        seq = sp.seq,
        code = check.code
    )
}

/// `auto actK = [](float v, int d) -> float` for each of the cell's activations: `v`
/// clipped (with `clip`), then direction `d`'s function K.
fn acts(sp: &RecurrentSpec, sx: &Cuda) -> String {
    activations(sp, sx, "        ")
        .into_iter()
        .enumerate()
        .map(|(k, (clip, body))| {
            format!(
                "    auto act{k} = [](float v, int d) -> float {{\n        const float u = {clip};\n{body}    }};\n\n"
            )
        })
        .collect()
}
