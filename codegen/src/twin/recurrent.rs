//! RNN, GRU and LSTM ([`crate::lower::recurrent`]) for both writers: the values their
//! templates (`recurrent.cu` and `recurrent.wgsl`, with the cell's step from
//! `recurrent_{rnn,gru,lstm}`) are filled with, and the activations' expressions, the
//! same algorithm spelled in each backend's [`Syntax`].

use super::{Math, Syntax};
use crate::lower::recurrent::{ActKind, Activation, Cell, Lengths, RecurrentSpec};
use gopt_ir::DType;

/// The template values both backends fill the same way, by name.
pub fn fills(sp: &RecurrentSpec, sx: &dyn Syntax) -> Vec<(&'static str, String)> {
    let (x, y, s) = (sp.x_strides(), sp.y_strides(), sp.state_strides());
    let rows = sp.rows();
    let bias = |off: &str| match sp.b {
        Some(_) => sx.load_f32(&format!("bias[d * {}{off} + j]", sx.count(2 * rows))),
        None => sx.fl("0.0"),
    };
    let state = |v: Option<_>, arr: &str| match v {
        Some(_) => sx.load_f32(&format!("{arr}[so + j]")),
        None => sx.fl("0.0"),
    };
    let c0 = match sp.cell {
        Cell::Lstm => format!("        c[j] = {};\n", state(sp.c0, "c0")),
        Cell::Rnn | Cell::Gru => String::new(),
    };
    let flag = |b: bool| if b { "true" } else { "false" }.to_string();
    vec![
        ("op", sp.cell.name().to_string()),
        ("what", what(sp)),
        ("threads", sp.threads().to_string()),
        ("seq", sp.seq.to_string()),
        ("input", sp.input.to_string()),
        ("hidden", sp.hidden.to_string()),
        ("rows", rows.to_string()),
        ("wb", bias("")),
        ("rb", bias(&format!(" + {}", sx.count(rows)))),
        ("batch", sp.batch.to_string()),
        ("reverse", flag(sp.reverse)),
        ("sd", s.d.to_string()),
        ("sb", s.b.to_string()),
        ("h0", state(sp.h0, "h0")),
        ("c0", c0),
        ("yt", y.t.to_string()),
        ("yd", y.d.to_string()),
        ("yb", y.b.to_string()),
        ("xt", x.t.to_string()),
        ("xb", x.b.to_string()),
    ]
}

/// The values the cell's template is filled with: GRU's `lbr`, LSTM's `input_forget`
/// and `peep` (the peephole weight of hidden element `j`, zero without P).
pub fn cell_fills(sp: &RecurrentSpec, sx: &dyn Syntax) -> Vec<(&'static str, String)> {
    let flag = |b: bool| if b { "true" } else { "false" }.to_string();
    match sp.cell {
        Cell::Rnn => Vec::new(),
        Cell::Gru => vec![("lbr", flag(sp.linear_before_reset))],
        Cell::Lstm => {
            let peep = match sp.p {
                Some(_) => sx.load_f32(&format!("p[d * {} + j]", sx.count(3 * sp.hidden))),
                None => sx.fl("0.0"),
            };
            vec![("input_forget", flag(sp.input_forget)), ("peep", peep)]
        }
    }
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

/// The statements after the last step, inside the loop `head` over the hidden
/// elements `j`: Y_h and Y_c from the state, where present.
pub fn last(sp: &RecurrentSpec, head: &str) -> String {
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
    format!("    {head} {{\n{body}    }}\n")
}

/// What activation `k` of the cell returns for the clipped pre-activation `u`: one
/// expression, or one per direction `d`.
enum Returns {
    /// The same for every direction.
    One(String),
    /// Direction 0's, then direction 1's.
    PerDirection(String, String),
}

/// Each of the cell's activations: `v` clipped (with `clip`) as `u`, and the statements
/// returning its value at indentation `pad` (per direction `d` where they differ).
pub fn activations(sp: &RecurrentSpec, sx: &dyn Syntax, pad: &str) -> Vec<(String, String)> {
    let clip = match sp.clip {
        Some(c) => sx.min_f(&sx.max_f("v", &sx.f32(-c)), &sx.f32(c)),
        None => "v".into(),
    };
    let per_dir = sp.acts.first().map_or(0, Vec::len);
    (0..per_dir)
        .map(|k| {
            let exprs: Vec<String> = sp.acts.iter().map(|a| expr(sx, a[k])).collect();
            let returns = match exprs.as_slice() {
                [one] => Returns::One(one.clone()),
                [fwd, bwd] if fwd == bwd => Returns::One(fwd.clone()),
                [fwd, bwd] => Returns::PerDirection(fwd.clone(), bwd.clone()),
                [] | [_, _, _, ..] => Returns::One("u".into()),
            };
            (clip.clone(), returns.body(sx, pad))
        })
        .collect()
}

impl Returns {
    /// The statements returning it at indentation `pad`.
    fn body(&self, sx: &dyn Syntax, pad: &str) -> String {
        match self {
            Returns::One(e) => format!("{pad}return {e};\n"),
            Returns::PerDirection(fwd, bwd) => format!(
                "{pad}if (d == {}) {{\n{pad}    return {fwd};\n{pad}}}\n{pad}return {bwd};\n",
                sx.count(0)
            ),
        }
    }
}

/// Activation `a` of the f32 `u`, as the interpreter computes it.
fn expr(sx: &dyn Syntax, a: Activation) -> String {
    let (al, be) = (sx.f32(a.alpha), sx.f32(a.beta));
    let (zero, one) = (sx.fl("0.0"), sx.fl("1.0"));
    match a.kind {
        ActKind::Sigmoid => sx.math(Math::Sigmoid, "u"),
        ActKind::Tanh => sx.math(Math::Tanh, "u"),
        ActKind::Relu => sx.max_f("u", &zero),
        ActKind::Affine => format!("{al} * u + {be}"),
        ActKind::LeakyRelu => sx.select(&format!("u >= {zero}"), "u", &format!("{al} * u")),
        ActKind::ThresholdedRelu => sx.select(&format!("u > {al}"), "u", &zero),
        ActKind::ScaledTanh => format!("{al} * {}", sx.math(Math::Tanh, &format!("{be} * u"))),
        ActKind::HardSigmoid => sx.min_f(&sx.max_f(&format!("{al} * u + {be}"), &zero), &one),
        ActKind::Elu => {
            let neg = format!("{al} * ({} - {one})", sx.math(Math::Exp, "u"));
            sx.select(&format!("u >= {zero}"), "u", &neg)
        }
        ActKind::Softsign => format!("u / ({one} + {})", sx.abs("u")),
        ActKind::Softplus => sx.math(Math::Log, &format!("{one} + {}", sx.math(Math::Exp, "u"))),
    }
}

/// A buffer the kernel binds: its name in the kernel, its dtype, whether it is written.
pub struct Buffer {
    /// The parameter's (binding's) name.
    pub name: &'static str,
    /// Its elements' dtype.
    pub dtype: DType,
    /// Written (an output), else read.
    pub written: bool,
}

/// The kernel's buffers in the spec's order ([`RecurrentSpec::inputs`], then
/// [`RecurrentSpec::outputs`]); the error word follows them when the lengths are
/// checked.
pub fn buffers(sp: &RecurrentSpec) -> Vec<Buffer> {
    let t = sp.dtype;
    let buf = |name, dtype, written| Buffer {
        name,
        dtype,
        written,
    };
    let mut bs = vec![buf("x", t, false), buf("w", t, false), buf("r", t, false)];
    if sp.b.is_some() {
        bs.push(buf("bias", t, false));
    }
    if let Lengths::Input(_, dt) = sp.lens {
        bs.push(buf("lens", dt, false));
    }
    for (v, name) in [(sp.h0, "h0"), (sp.c0, "c0"), (sp.p, "p")] {
        if v.is_some() {
            bs.push(buf(name, t, false));
        }
    }
    bs.push(buf("y", t, true));
    for (v, name) in [(sp.y_h, "y_h"), (sp.y_c, "y_c")] {
        if v.is_some() {
            bs.push(buf(name, t, true));
        }
    }
    bs
}
