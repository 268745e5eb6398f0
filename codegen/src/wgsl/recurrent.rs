//! RNN, GRU and LSTM in WGSL: one workgroup per (direction, batch row) runs the whole
//! sequence, the hidden state (the cell state, the gates) in workgroup memory, the
//! invocations splitting the gate rows and then the hidden elements of each step with
//! a barrier between (`recurrent.wgsl`, with the cell's step from
//! `recurrent_{rnn,gru,lstm}.wgsl`). Data of f32 or f16 storage, computed in f32;
//! sequence lengths (i32 or i64) are checked on the device, one outside
//! `0..=seq_length` failing the run ([`crate::plan::IndexCheck`]).
//! The node is read once, for both backends, by [`crate::lower::recurrent`].

use super::types::{f32_literal, helpers_for};
use super::unsupported;
use super::WgslKernel;
use crate::lower::recurrent::{spec, ActKind, Activation, Cell, Lengths, RecurrentSpec};
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, Graph, Node};

const TEMPLATE: &str = include_str!("recurrent.wgsl");
const RNN: &str = include_str!("recurrent_rnn.wgsl");
const GRU: &str = include_str!("recurrent_gru.wgsl");
const LSTM: &str = include_str!("recurrent_lstm.wgsl");

/// Emits the shader for RNN, GRU or LSTM node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let sp = spec(g, node)?;
    let (t, _) = super::storage_type(sp.dtype)
        .ok_or_else(|| unsupported(node, format!("{} data", sp.dtype)))?;
    let groups = u32::try_from(sp.groups())
        .ok()
        .filter(|&n| n <= 65535)
        .ok_or_else(|| unsupported(node, "more than 65535 (direction, batch) rows"))?;
    let check = match sp.lens {
        Lengths::Full => None,
        Lengths::Input(..) => Some(super::bounds::check(g, node, sp.seq, sp.bad_length())?),
    };
    let bindings = bindings(&sp, t, check.is_some());
    let acts = activations(&sp);
    let (x, y, s) = (sp.x_strides(), sp.y_strides(), sp.state_strides());
    let rows = sp.rows();
    let bias = |off: &str| match sp.b {
        Some(_) => format!("f32(bias[d * {}u{off} + j])", 2 * rows),
        None => "0.0".into(),
    };
    let state = |v: Option<_>, arr: &str| match v {
        Some(_) => format!("f32({arr}[so + j])"),
        None => "0.0".into(),
    };
    let c0 = match sp.cell {
        Cell::Lstm => format!("        c[j] = {};\n", state(sp.c0, "c0")),
        Cell::Rnn | Cell::Gru => String::new(),
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(sp.dtype == DType::F16)),
            ("op", sp.cell.name()),
            ("what", &what(&sp)),
            ("threads", &sp.threads().to_string()),
            ("bindings", &bindings),
            ("seq", &sp.seq.to_string()),
            ("input", &sp.input.to_string()),
            ("hidden", &sp.hidden.to_string()),
            ("rows", &rows.to_string()),
            ("t", t),
            ("wb", &bias("")),
            ("rb", &bias(&format!(" + {rows}u"))),
            ("acts", &format!("{acts}{}", helpers_for(&acts))),
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
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [groups, 1, 1],
        inputs: sp.inputs().iter().map(|v| v.0).collect(),
        outputs: sp.outputs().iter().map(|v| v.0).collect(),
        index_check: check,
        loop_iterations: None,
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

/// The bindings in the spec's order (inputs, outputs, then the error word when the
/// lengths are checked).
fn bindings(sp: &RecurrentSpec, t: &str, checked: bool) -> String {
    let read = |name: &str, ty: &str| format!("var<storage, read> {name}: array<{ty}>;");
    let write = |name: &str| format!("var<storage, read_write> {name}: array<{t}>;");
    let mut decls = vec![read("x", t), read("w", t), read("r", t)];
    if sp.b.is_some() {
        decls.push(read("bias", t));
    }
    match sp.lens {
        Lengths::Full => {}
        Lengths::Input(_, dt) => decls.push(read("lens", length_type(dt))),
    }
    for (v, name) in [(sp.h0, "h0"), (sp.c0, "c0"), (sp.p, "p")] {
        if v.is_some() {
            decls.push(read(name, t));
        }
    }
    decls.push(write("y"));
    for (v, name) in [(sp.y_h, "y_h"), (sp.y_c, "y_c")] {
        if v.is_some() {
            decls.push(write(name));
        }
    }
    let n = decls.len();
    let mut text: String = decls
        .iter()
        .enumerate()
        .map(|(k, d)| format!("@group(0) @binding({k}) {d}\n"))
        .collect();
    if checked {
        text += &super::bounds::error_binding(n);
        text.push('\n');
    }
    text
}

/// The storage element of sequence lengths of `dt` (i32, or i64 as two words).
fn length_type(dt: DType) -> &'static str {
    match dt {
        DType::I64 => "vec2<u32>",
        _ => "i32",
    }
}

/// Statements (invocation 0's, indented eight spaces) that set `steps` to the row's
/// sequence length: the whole sequence, or `lens[b]` checked against `0..=seq` (one
/// outside raises the check's code and runs no step).
fn length(sp: &RecurrentSpec, check: Option<&IndexCheck>) -> String {
    let (Lengths::Input(_, dt), Some(check)) = (sp.lens, check) else {
        return "        steps = SEQ;\n".into();
    };
    let load = match dt {
        DType::I64 => "        let lw = lens[b];\n        var len = bitcast<i32>(lw.x);\n        \
             if (lw.y != select(0u, 0xffffffffu, len < 0i)) { len = -1i; }\n"
            .to_string(),
        _ => "        var len = lens[b];\n".to_string(),
    };
    format!(
        "{load}        if (len < 0i || len > {seq}i) {{ atomicMax(&gopt_err, {code}u); len = 0i; }}\n        \
         steps = u32(len);\n",
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
    format!("    for (var j = tid; j < HID; j = j + THREADS) {{\n{body}    }}\n")
}

/// The cell's declarations and `step` function.
fn cell(sp: &RecurrentSpec) -> Result<String> {
    let flag = |b: bool| if b { "true" } else { "false" };
    match sp.cell {
        Cell::Rnn => Ok(RNN.to_string()),
        Cell::Gru => fill(GRU, &[("lbr", flag(sp.linear_before_reset))]),
        Cell::Lstm => {
            let peep = match sp.p {
                Some(_) => format!("f32(p[d * {}u + j])", 3 * sp.hidden),
                None => "0.0".into(),
            };
            fill(
                LSTM,
                &[("input_forget", flag(sp.input_forget)), ("peep", &peep)],
            )
        }
    }
}

/// `fn actK(v: f32, d: u32) -> f32` for each of the cell's activations: `v` clipped
/// (with `clip`), then direction `d`'s function K.
fn activations(sp: &RecurrentSpec) -> String {
    let clip = match sp.clip {
        Some(c) => format!("min(max(v, {}), {})", f32_literal(-c), f32_literal(c)),
        None => "v".into(),
    };
    let per_dir = sp.acts.first().map_or(0, Vec::len);
    (0..per_dir)
        .map(|k| {
            let exprs: Vec<String> = sp.acts.iter().map(|a| expr(a[k])).collect();
            let body = match exprs.as_slice() {
                [one] => format!("    return {one};\n"),
                [fwd, bwd] if fwd == bwd => format!("    return {fwd};\n"),
                [fwd, bwd] => {
                    format!(
                        "    if (d == 0u) {{\n        return {fwd};\n    }}\n    return {bwd};\n"
                    )
                }
                _ => "    return u;\n".into(),
            };
            format!("fn act{k}(v: f32, d: u32) -> f32 {{\n    let u = {clip};\n{body}}}\n\n")
        })
        .collect()
}

/// Activation `a` of the f32 `u`, as the interpreter computes it.
fn expr(a: Activation) -> String {
    let (al, be) = (f32_literal(a.alpha), f32_literal(a.beta));
    match a.kind {
        ActKind::Sigmoid => "gopt_sigmoid(u)".into(),
        ActKind::Tanh => "gopt_tanh(u)".into(),
        ActKind::Relu => "max(u, 0.0)".into(),
        ActKind::Affine => format!("{al} * u + {be}"),
        ActKind::LeakyRelu => format!("select({al} * u, u, u >= 0.0)"),
        ActKind::ThresholdedRelu => format!("select(0.0, u, u > {al})"),
        ActKind::ScaledTanh => format!("{al} * gopt_tanh({be} * u)"),
        ActKind::HardSigmoid => format!("min(max({al} * u + {be}, 0.0), 1.0)"),
        ActKind::Elu => format!("select({al} * (exp(u) - 1.0), u, u >= 0.0)"),
        ActKind::Softsign => "u / (1.0 + abs(u))".into(),
        ActKind::Softplus => "gopt_log(1.0 + exp(u))".into(),
    }
}
