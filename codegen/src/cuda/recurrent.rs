//! RNN, GRU and LSTM in CUDA ([`crate::lower::recurrent`]): one block per (direction,
//! batch row) runs the whole sequence, the hidden state (the cell state, the gates) in
//! shared memory, the threads splitting the gate rows and then the hidden elements of
//! each step with a barrier between (`recurrent.cu`, with the cell's step from
//! `recurrent_{rnn,gru,lstm}.cu`). Data of f32, f16 or bf16 storage, computed in f32;
//! sequence lengths (i32 or i64) are checked on the device, one outside
//! `0..=seq_length` failing the run ([`crate::plan::IndexCheck`]). The WGSL kernel is
//! the same algorithm line by line.

use super::elementwise::storage;
use super::support::{flit, store};
use super::Kernel;
use crate::lower::recurrent::{spec, ActKind, Activation, Cell, Lengths, RecurrentSpec};
use crate::plan::{index_code, IndexCheck};
use crate::template::fill;
use crate::Result;
use gopt_ir::{Graph, Node};

const TEMPLATE: &str = include_str!("recurrent.cu");
const RNN: &str = include_str!("recurrent_rnn.cu");
const GRU: &str = include_str!("recurrent_gru.cu");
const LSTM: &str = include_str!("recurrent_lstm.cu");

/// Emits the kernel for RNN, GRU or LSTM node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let sp = spec(g, node)?;
    let check = match sp.lens {
        Lengths::Full => None,
        Lengths::Input(..) => Some(IndexCheck {
            code: index_code(g, node)?,
            op: node.op.name().into(),
            what: sp.bad_length(),
        }),
    };
    let acts = activations(&sp);
    let (x, y, s) = (sp.x_strides(), sp.y_strides(), sp.state_strides());
    let rows = sp.rows();
    let bias = |off: &str| match sp.b {
        Some(_) => format!("gopt_ld(bias[d * {}{off} + j])", 2 * rows),
        None => "0.0f".into(),
    };
    let state = |v: Option<_>, arr: &str| match v {
        Some(_) => format!("gopt_ld({arr}[so + j])"),
        None => "0.0f".into(),
    };
    let c0 = match sp.cell {
        Cell::Lstm => format!("        c[j] = {};\n", state(sp.c0, "c0")),
        Cell::Rnn | Cell::Gru => String::new(),
    };
    let threads = sp.threads();
    let source = fill(
        TEMPLATE,
        &[
            ("op", sp.cell.name()),
            ("what", &what(&sp)),
            ("threads", &threads.to_string()),
            ("name", name),
            ("params", &params(&sp, check.is_some())),
            ("seq", &sp.seq.to_string()),
            ("input", &sp.input.to_string()),
            ("hidden", &sp.hidden.to_string()),
            ("rows", &rows.to_string()),
            ("store", &store(sp.dtype, "v")),
            ("wb", &bias("")),
            ("rb", &bias(&format!(" + {rows}"))),
            ("acts", &acts),
            ("cell", &cell(&sp)?),
            ("batch", &sp.batch.to_string()),
            ("reverse", if sp.reverse { "true" } else { "false" }),
            ("len", &length(&sp, check.as_ref())),
            ("sd", &s.d.to_string()),
            ("sb", &s.b.to_string()),
            ("h0", &state(sp.h0, "h0")),
            ("c0", &c0),
            ("yt", &y.t.to_string()),
            ("yd", &y.d.to_string()),
            ("yb", &y.b.to_string()),
            ("xt", &x.t.to_string()),
            ("xb", &x.b.to_string()),
            ("last", &last(&sp)),
        ],
    )?;
    let grid = u32::try_from(sp.groups())
        .map_err(|_| super::support::unsupported(node, "more than 2^32 (direction, batch) rows"))?;
    Ok(Kernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        threads: sp.groups() * threads,
        vectorized: false,
        inputs: sp.inputs().iter().map(|v| v.0).collect(),
        outputs: sp.outputs().iter().map(|v| v.0).collect(),
        shared_mem: 0,
        grid,
        block: threads as u32,
        index_check: check,
    })
}

/// The header's summary of the node's attributes.
fn what(sp: &RecurrentSpec) -> String {
    let dir = match (sp.dirs, sp.reverse) {
        (2, _) => "bidirectional",
        (_, true) => "reverse",
        (_, false) => "forward",
    };
    let layout = if sp.batchwise { ", batch-major" } else { "" };
    format!(
        "{dir}{layout}, sequence {}, batch {}, input {}, hidden {}",
        sp.seq, sp.batch, sp.input, sp.hidden
    )
}

/// The kernel's parameters in the spec's order (inputs, outputs, then the error word
/// when the lengths are checked).
fn params(sp: &RecurrentSpec, checked: bool) -> String {
    let t = storage(sp.dtype);
    let read = |name: &str, ty: &str| format!("const {ty}* __restrict__ {name}");
    let write = |name: &str| format!("{t}* __restrict__ {name}");
    let mut ps = vec![read("x", t), read("w", t), read("r", t)];
    if sp.b.is_some() {
        ps.push(read("bias", t));
    }
    match sp.lens {
        Lengths::Full => {}
        Lengths::Input(_, dt) => ps.push(read("lens", storage(dt))),
    }
    for (v, name) in [(sp.h0, "h0"), (sp.c0, "c0"), (sp.p, "p")] {
        if v.is_some() {
            ps.push(read(name, t));
        }
    }
    ps.push(write("y"));
    for (v, name) in [(sp.y_h, "y_h"), (sp.y_c, "y_c")] {
        if v.is_some() {
            ps.push(write(name));
        }
    }
    if checked {
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

/// The statements after the last step: Y_h and Y_c from the state, where present.
fn last(sp: &RecurrentSpec) -> String {
    let mut body = String::new();
    if sp.y_h.is_some() {
        body += "        y_h[so + j] = st(h[j]);\n";
    }
    if sp.y_c.is_some() {
        body += "        y_c[so + j] = st(c[j]);\n";
    }
    if body.is_empty() {
        return body;
    }
    format!("    for (int j = tid; j < HID; j += THREADS) {{\n{body}    }}\n")
}

/// The cell's shared arrays and `step` lambda.
fn cell(sp: &RecurrentSpec) -> Result<String> {
    let flag = |b: bool| if b { "true" } else { "false" };
    match sp.cell {
        Cell::Rnn => Ok(RNN.to_string()),
        Cell::Gru => fill(GRU, &[("lbr", flag(sp.linear_before_reset))]),
        Cell::Lstm => {
            let peep = match sp.p {
                Some(_) => format!("gopt_ld(p[d * {} + j])", 3 * sp.hidden),
                None => "0.0f".into(),
            };
            fill(
                LSTM,
                &[("input_forget", flag(sp.input_forget)), ("peep", &peep)],
            )
        }
    }
}

/// `auto actK = [](float v, int d) -> float` for each of the cell's activations: `v`
/// clipped (with `clip`), then direction `d`'s function K.
fn activations(sp: &RecurrentSpec) -> String {
    let clip = match sp.clip {
        Some(c) => format!("fminf(fmaxf(v, {}), {})", flit(-c), flit(c)),
        None => "v".into(),
    };
    let per_dir = sp.acts.first().map_or(0, Vec::len);
    (0..per_dir)
        .map(|k| {
            let exprs: Vec<String> = sp.acts.iter().map(|a| expr(a[k])).collect();
            let body = match exprs.as_slice() {
                [one] => format!("        return {one};\n"),
                [fwd, bwd] if fwd == bwd => format!("        return {fwd};\n"),
                [fwd, bwd] => format!(
                    "        if (d == 0) {{\n            return {fwd};\n        }}\n        return {bwd};\n"
                ),
                _ => "        return u;\n".into(),
            };
            format!(
                "    auto act{k} = [](float v, int d) -> float {{\n        const float u = {clip};\n{body}    }};\n\n"
            )
        })
        .collect()
}

/// Activation `a` of the float `u`, as the interpreter computes it.
fn expr(a: Activation) -> String {
    let (al, be) = (flit(a.alpha), flit(a.beta));
    match a.kind {
        ActKind::Sigmoid => "gopt_sigmoid(u)".into(),
        ActKind::Tanh => "tanhf(u)".into(),
        ActKind::Relu => "fmaxf(u, 0.0f)".into(),
        ActKind::Affine => format!("{al} * u + {be}"),
        ActKind::LeakyRelu => format!("(u >= 0.0f ? u : {al} * u)"),
        ActKind::ThresholdedRelu => format!("(u > {al} ? u : 0.0f)"),
        ActKind::ScaledTanh => format!("{al} * tanhf({be} * u)"),
        ActKind::HardSigmoid => format!("fminf(fmaxf({al} * u + {be}, 0.0f), 1.0f)"),
        ActKind::Elu => format!("(u >= 0.0f ? u : {al} * (expf(u) - 1.0f))"),
        ActKind::Softsign => "u / (1.0f + fabsf(u))".into(),
        ActKind::Softplus => "logf(1.0f + expf(u))".into(),
    }
}
