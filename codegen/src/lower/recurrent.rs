//! RNN, GRU and LSTM, read once for every backend: the cell, the sizes (sequence,
//! batch, input, hidden, directions), the layout as strides into X, Y and the states,
//! the direction of each pass, `clip`, GRU's `linear_before_reset`, LSTM's
//! `input_forget`, every direction's activations (with `activation_alpha`/`_beta`
//! consumed in order, as the interpreter reads them), and which of the optional inputs
//! (B, sequence_lens, initial_h, initial_c, P) and outputs (Y, Y_h, Y_c) are there.
//!
//! The writers run one workgroup (block) per (direction, batch row) over the whole
//! sequence, the hidden state (and the cell state, and the gates of one step) kept in
//! workgroup memory: so the hidden size is bounded ([`MAX_HIDDEN`]). The sequence
//! lengths are read on the device: one outside `0..=seq_length` is an error the
//! kernel raises ([`RecurrentSpec::check`]), as the interpreter refuses it. A row
//! runs its first `len` time steps (the last `len`, backwards, when reversed); Y stays
//! zero past them and Y_h (Y_c) is the state after them, as in the interpreter.

use super::support::{check_float, input, opt_input, plan, typed, unsupported, Site};
use crate::plan::{index_code, IndexCheck};
use crate::Result;
use gopt_ir::ops::ControlOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

/// The largest hidden size the kernels take: six vectors of it (the state, the gates,
/// and the cell state or GRU's two scratch vectors) live in workgroup memory, 12 KiB at
/// 512 in f32, within WebGPU's guaranteed 16 KiB and CUDA's 48 KiB of static shared
/// memory.
pub const MAX_HIDDEN: usize = 512;

/// The recurrent cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    /// Elman RNN: one gate, `H = f(x·Wᵀ + Wb + h·Rᵀ + Rb)`.
    Rnn,
    /// GRU: update (z), reset (r) and hidden gates, in that order in W, R and B.
    Gru,
    /// LSTM: input (i), output (o), forget (f) and cell (c) gates, in that order.
    Lstm,
}

impl Cell {
    /// Gates per hidden element (the rows of W and R are `gates * hidden`).
    pub fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    /// The ONNX op's name.
    pub fn name(self) -> &'static str {
        match self {
            Cell::Rnn => "RNN",
            Cell::Gru => "GRU",
            Cell::Lstm => "LSTM",
        }
    }

    /// The default activations of one direction (f, g, h as the cell has them).
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

/// An activation function of the `activations` attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActKind {
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
    /// `max(x, 0)`.
    Relu,
    /// `alpha x + beta`.
    Affine,
    /// `x` from 0 up, `alpha x` below.
    LeakyRelu,
    /// `x` above `alpha`, 0 elsewhere.
    ThresholdedRelu,
    /// `alpha tanh(beta x)`.
    ScaledTanh,
    /// `clamp(alpha x + beta, 0, 1)`.
    HardSigmoid,
    /// `x` from 0 up, `alpha (e^x - 1)` below.
    Elu,
    /// `x / (1 + |x|)`.
    Softsign,
    /// `ln(1 + e^x)`.
    Softplus,
}

impl ActKind {
    fn parse(name: &str) -> Option<ActKind> {
        const NAMES: [(&str, ActKind); 11] = [
            ("sigmoid", ActKind::Sigmoid),
            ("tanh", ActKind::Tanh),
            ("relu", ActKind::Relu),
            ("affine", ActKind::Affine),
            ("leakyrelu", ActKind::LeakyRelu),
            ("thresholdedrelu", ActKind::ThresholdedRelu),
            ("scaledtanh", ActKind::ScaledTanh),
            ("hardsigmoid", ActKind::HardSigmoid),
            ("elu", ActKind::Elu),
            ("softsign", ActKind::Softsign),
            ("softplus", ActKind::Softplus),
        ];
        let name = name.to_ascii_lowercase();
        NAMES.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
    }

    /// Default alpha and beta, `None` where the function takes no such parameter (as
    /// the ONNX ops of the same name default them).
    fn defaults(self) -> (Option<f32>, Option<f32>) {
        match self {
            ActKind::Affine => (Some(1.0), Some(0.0)),
            ActKind::LeakyRelu => (Some(0.01), None),
            ActKind::ThresholdedRelu | ActKind::Elu => (Some(1.0), None),
            ActKind::ScaledTanh => (Some(1.0), Some(1.0)),
            ActKind::HardSigmoid => (Some(0.2), Some(0.5)),
            ActKind::Sigmoid
            | ActKind::Tanh
            | ActKind::Relu
            | ActKind::Softsign
            | ActKind::Softplus => (None, None),
        }
    }
}

/// An activation function with its parameters (0 where it takes none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Activation {
    /// The function.
    pub kind: ActKind,
    /// Its alpha.
    pub alpha: f32,
    /// Its beta.
    pub beta: f32,
}

/// Strides (in elements) of a tensor's time, direction and batch axes; an axis the
/// tensor lacks has stride 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strides {
    /// Per time step.
    pub t: usize,
    /// Per direction.
    pub d: usize,
    /// Per batch row.
    pub b: usize,
}

/// The sequence lengths: all `seq` (the input is absent), or read on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lengths {
    /// Every row runs the whole sequence.
    Full,
    /// A `[batch]` tensor of i32 or i64, each checked to be in `0..=seq`.
    Input(ValueId, DType),
}

/// An RNN, GRU or LSTM node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct RecurrentSpec {
    /// The node.
    pub site: Site,
    /// The check of the sequence lengths, when they are read on the device.
    pub check: Option<IndexCheck>,
    /// The cell.
    pub cell: Cell,
    /// The dtype of X, the weights, the states and the outputs (computed in f32).
    pub dtype: DType,
    /// Time steps.
    pub seq: usize,
    /// Batch rows.
    pub batch: usize,
    /// Input features.
    pub input: usize,
    /// Hidden size (at most [`MAX_HIDDEN`]).
    pub hidden: usize,
    /// Directions (1, or 2 when bidirectional).
    pub dirs: usize,
    /// Whether direction 0 runs backwards (`direction` = reverse); direction 1 always
    /// does.
    pub reverse: bool,
    /// Batch-major tensors (`layout` = 1).
    pub batchwise: bool,
    /// Gate pre-activations are clipped to `[-clip, clip]` before each activation.
    pub clip: Option<f32>,
    /// GRU: the reset gate multiplies `h·Rhᵀ + Rbh` (else it multiplies h first).
    pub linear_before_reset: bool,
    /// LSTM: the forget gate is `1 - i` (the input and forget gates are coupled).
    pub input_forget: bool,
    /// Per direction, the cell's activations (f; f, g; or f, g, h).
    pub acts: Vec<Vec<Activation>>,
    /// X.
    pub x: ValueId,
    /// W: `[dirs, gates * hidden, input]`.
    pub w: ValueId,
    /// R: `[dirs, gates * hidden, hidden]`.
    pub r: ValueId,
    /// B: `[dirs, 2 * gates * hidden]` (Wb then Rb), absent for zeros.
    pub b: Option<ValueId>,
    /// The sequence lengths.
    pub lens: Lengths,
    /// initial_h (the states' layout), absent for zeros.
    pub h0: Option<ValueId>,
    /// initial_c (LSTM), absent for zeros.
    pub c0: Option<ValueId>,
    /// P: `[dirs, 3 * hidden]` peepholes (Pi, Po, Pf) (LSTM), absent for zeros.
    pub p: Option<ValueId>,
    /// Y: every step's hidden state.
    pub y: ValueId,
    /// Y_h: the last hidden state, when the node has it.
    pub y_h: Option<ValueId>,
    /// Y_c: the last cell state (LSTM), when the node has it.
    pub y_c: Option<ValueId>,
}

impl RecurrentSpec {
    /// Gate rows per direction (`gates * hidden`).
    pub fn rows(&self) -> usize {
        self.cell.gates() * self.hidden
    }

    /// Workgroups (blocks): one per (direction, batch row), direction-major.
    pub fn groups(&self) -> usize {
        self.dirs * self.batch
    }

    /// Threads per workgroup: enough for the gate rows, 32 to 256.
    pub fn threads(&self) -> usize {
        self.rows().next_power_of_two().clamp(32, 256)
    }

    /// Strides of X (no direction axis).
    pub fn x_strides(&self) -> Strides {
        let (i, b, s) = (self.input, self.batch, self.seq);
        if self.batchwise {
            Strides {
                t: i,
                d: 0,
                b: s * i,
            }
        } else {
            Strides {
                t: b * i,
                d: 0,
                b: i,
            }
        }
    }

    /// Strides of Y.
    pub fn y_strides(&self) -> Strides {
        let (h, b, s, n) = (self.hidden, self.batch, self.seq, self.dirs);
        if self.batchwise {
            Strides {
                t: n * h,
                d: h,
                b: s * n * h,
            }
        } else {
            Strides {
                t: n * b * h,
                d: b * h,
                b: h,
            }
        }
    }

    /// Strides of the states (initial_h, initial_c, Y_h, Y_c; no time axis).
    pub fn state_strides(&self) -> Strides {
        let (h, b, n) = (self.hidden, self.batch, self.dirs);
        if self.batchwise {
            Strides {
                t: 0,
                d: h,
                b: n * h,
            }
        } else {
            Strides {
                t: 0,
                d: b * h,
                b: h,
            }
        }
    }

    /// The graph values the kernel reads, in binding order: X, W, R, then those of B,
    /// sequence_lens, initial_h, initial_c and P that are present.
    pub fn inputs(&self) -> Vec<ValueId> {
        let lens = match self.lens {
            Lengths::Full => None,
            Lengths::Input(v, _) => Some(v),
        };
        [self.x, self.w, self.r]
            .into_iter()
            .chain(self.b)
            .chain(lens)
            .chain(self.h0)
            .chain(self.c0)
            .chain(self.p)
            .collect()
    }

    /// The graph values the kernel writes, in binding order: Y, then Y_h and Y_c when
    /// present.
    pub fn outputs(&self) -> Vec<ValueId> {
        std::iter::once(self.y)
            .chain(self.y_h)
            .chain(self.y_c)
            .collect()
    }
}

/// Reads RNN, GRU or LSTM node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<RecurrentSpec> {
    let Op::Control(op) = node.op else {
        return Err(unsupported(node, "an op outside the recurrent family"));
    };
    let cell = match op {
        ControlOp::RNN => Cell::Rnn,
        ControlOp::GRU => Cell::Gru,
        ControlOp::LSTM => Cell::Lstm,
        ControlOp::If | ControlOp::Loop | ControlOp::Scan => {
            return Err(unsupported(node, "an op outside the recurrent family"))
        }
    };
    let a = &node.attrs;
    let (dirs, reverse) = match a.str_or("direction", "forward").map_err(plan)? {
        "forward" => (1, false),
        "reverse" => (1, true),
        "bidirectional" => (2, false),
        d => return Err(plan(format!("{}: direction {d:?}", node.name))),
    };
    let batchwise = match a.int_or("layout", 0).map_err(plan)? {
        0 => false,
        1 => true,
        l => return Err(plan(format!("{}: layout {l}", node.name))),
    };
    let x = input(node, 0)?;
    let (dtype, xs) = typed(g, node, x)?;
    check_float(node, dtype, "data")?;
    let [d0, d1, input_size] = xs[..] else {
        return Err(plan(format!("{}: X of rank {}", node.name, xs.len())));
    };
    let (seq, batch) = if batchwise { (d1, d0) } else { (d0, d1) };
    let (w, r) = (input(node, 1)?, input(node, 2)?);
    let (_, rs) = typed(g, node, r)?;
    let hidden = rs.last().copied().unwrap_or(0);
    if let Some(hs) = a.int("hidden_size").map_err(plan)? {
        if hs != hidden as i64 {
            return Err(plan(format!(
                "{}: hidden_size {hs} disagrees with R's {hidden}",
                node.name
            )));
        }
    }
    if seq == 0 || batch == 0 || hidden == 0 {
        return Err(unsupported(node, "an empty sequence, batch or hidden size"));
    }
    if hidden > MAX_HIDDEN {
        return Err(unsupported(
            node,
            &format!(
                "a hidden size of {hidden}, above {MAX_HIDDEN} (the state and the gates \
                 live in workgroup memory)"
            ),
        ));
    }
    let rows = cell.gates() * hidden;
    let largest = [
        seq * batch * input_size,
        dirs * rows * input_size.max(hidden),
        seq * dirs * batch * hidden,
    ];
    if largest.iter().any(|&n| n >= 1 << 31) {
        return Err(unsupported(node, "a tensor of 2^31 elements or more"));
    }
    let (y_shape, state) = if batchwise {
        (vec![batch, seq, dirs, hidden], vec![batch, dirs, hidden])
    } else {
        (vec![seq, dirs, batch, hidden], vec![dirs, batch, hidden])
    };
    let operand = |k: usize, what: &str, want: &[usize]| -> Result<Option<ValueId>> {
        let Some(v) = opt_input(node, k) else {
            return Ok(None);
        };
        let (dt, s) = typed(g, node, v)?;
        if dt != dtype {
            return Err(unsupported(node, &format!("a {dt} {what} with {dtype} X")));
        }
        if s != want {
            return Err(plan(format!(
                "{}: {what} has shape {s:?}, expected {want:?}",
                node.name
            )));
        }
        Ok(Some(v))
    };
    operand(1, "W", &[dirs, rows, input_size])?;
    operand(2, "R", &[dirs, rows, hidden])?;
    let b = operand(3, "B", &[dirs, 2 * rows])?;
    let h0 = operand(5, "initial_h", &state)?;
    let (c0, p) = match cell {
        Cell::Lstm => (
            operand(6, "initial_c", &state)?,
            operand(7, "P", &[dirs, 3 * hidden])?,
        ),
        Cell::Rnn | Cell::Gru => (None, None),
    };
    let lens = lengths(g, node, batch)?;
    let (y, y_h, y_c) = outputs(g, node, cell, dtype, (y_shape, state))?;
    let check = match lens {
        Lengths::Full => None,
        Lengths::Input(..) => Some(IndexCheck {
            code: index_code(g, node)?,
            op: node.op.name().into(),
            what: format!("a sequence length outside 0..={seq}"),
        }),
    };
    let spec = RecurrentSpec {
        site: Site::of(node),
        check,
        cell,
        dtype,
        seq,
        batch,
        input: input_size,
        hidden,
        dirs,
        reverse,
        batchwise,
        clip: a.float("clip").map_err(plan)?,
        linear_before_reset: a.int_or("linear_before_reset", 0).map_err(plan)? != 0,
        input_forget: a.int_or("input_forget", 0).map_err(plan)? != 0,
        acts: activations(node, cell, dirs)?,
        x,
        w,
        r,
        b,
        lens,
        h0,
        c0,
        p,
        y,
        y_h,
        y_c,
    };
    Ok(spec)
}

/// The sequence_lens input (input 4): `[batch]` integers, i32 or i64.
fn lengths(g: &Graph, node: &Node, batch: usize) -> Result<Lengths> {
    let Some(v) = opt_input(node, 4) else {
        return Ok(Lengths::Full);
    };
    let (dt, s) = typed(g, node, v)?;
    if !matches!(dt, DType::I32 | DType::I64) {
        return Err(unsupported(node, &format!("{dt} sequence lengths")));
    }
    if s != [batch] {
        return Err(plan(format!(
            "{}: sequence_lens has shape {s:?}, expected [{batch}]",
            node.name
        )));
    }
    Ok(Lengths::Input(v, dt))
}

/// Y, and Y_h and Y_c where the node has them (an output the model leaves out is a
/// value nothing reads, or not there when it was the last), checked against X's dtype
/// and the layout's shapes of Y and of the states.
fn outputs(
    g: &Graph,
    node: &Node,
    cell: Cell,
    dtype: DType,
    (y_shape, state): (Vec<usize>, Vec<usize>),
) -> Result<(ValueId, Option<ValueId>, Option<ValueId>)> {
    let check = |k: usize, want: &[usize]| -> Result<Option<ValueId>> {
        let Some(&v) = node.outputs.get(k) else {
            return Ok(None);
        };
        let (dt, s) = typed(g, node, v)?;
        if dt != dtype || s != want {
            return Err(plan(format!(
                "{}: output {k} is {dt} {s:?}, expected {dtype} {want:?}",
                node.name
            )));
        }
        Ok(Some(v))
    };
    let y = check(0, &y_shape)?.ok_or_else(|| unsupported(node, "no outputs"))?;
    let y_h = check(1, &state)?;
    let y_c = match cell {
        Cell::Lstm => check(2, &state)?,
        Cell::Rnn | Cell::Gru => None,
    };
    Ok((y, y_h, y_c))
}

/// Every direction's activations: the `activations` attribute (one direction's list
/// serves both when bidirectional), or the cell's defaults, with `activation_alpha` and
/// `activation_beta` consumed in order by the functions that take them.
fn activations(node: &Node, cell: Cell, dirs: usize) -> Result<Vec<Vec<Activation>>> {
    let a = &node.attrs;
    let per_dir = cell.default_activations();
    let mut names: Vec<String> = match a.strs("activations").map_err(plan)? {
        Some(v) => v.to_vec(),
        None => per_dir.iter().map(|s| s.to_string()).collect(),
    };
    if names.len() == per_dir.len() && dirs == 2 {
        names = [names.clone(), names].concat();
    }
    if names.len() != per_dir.len() * dirs {
        return Err(plan(format!(
            "{}: {} activations given, {} expected",
            node.name,
            names.len(),
            per_dir.len() * dirs
        )));
    }
    let mut alphas = a
        .floats("activation_alpha")
        .map_err(plan)?
        .unwrap_or(&[])
        .iter();
    let mut betas = a
        .floats("activation_beta")
        .map_err(plan)?
        .unwrap_or(&[])
        .iter();
    let acts = names
        .iter()
        .map(|n| {
            let kind = ActKind::parse(n)
                .ok_or_else(|| unsupported(node, &format!("the activation function {n:?}")))?;
            let (da, db) = kind.defaults();
            let alpha = da.map_or(0.0, |d| alphas.next().copied().unwrap_or(d));
            let beta = db.map_or(0.0, |d| betas.next().copied().unwrap_or(d));
            Ok(Activation { kind, alpha, beta })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(acts.chunks(per_dir.len()).map(<[_]>::to_vec).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gopt_ir::attr::{Attr, Attrs};

    fn node(op: ControlOp, attrs: &[(&str, Attr)]) -> Node {
        let mut a = Attrs::default();
        for (k, v) in attrs {
            a.set(k, v.clone());
        }
        Node {
            name: "n".into(),
            op: Op::Control(op),
            attrs: a,
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }

    #[test]
    fn activations_default_repeat_and_consume_parameters() {
        let n = node(ControlOp::LSTM, &[]);
        let acts = activations(&n, Cell::Lstm, 2).unwrap();
        assert_eq!(acts.len(), 2);
        assert_eq!(acts[1][0].kind, ActKind::Sigmoid);
        assert_eq!(acts[1][2].kind, ActKind::Tanh);

        let n = node(
            ControlOp::GRU,
            &[
                (
                    "activations",
                    Attr::Strs(vec!["LeakyRelu".into(), "HardSigmoid".into()]),
                ),
                ("activation_alpha", Attr::Floats(vec![0.5])),
            ],
        );
        let acts = activations(&n, Cell::Gru, 2).unwrap();
        // One direction's list serves both; alpha 0.5 goes to the first LeakyRelu only.
        assert_eq!(acts[0][0].alpha, 0.5);
        assert_eq!(acts[0][1].kind, ActKind::HardSigmoid);
        assert_eq!((acts[0][1].alpha, acts[0][1].beta), (0.2, 0.5));
        assert_eq!(acts[1][0].alpha, 0.01);

        let n = node(
            ControlOp::RNN,
            &[("activations", Attr::Strs(vec!["Foo".into()]))],
        );
        assert!(activations(&n, Cell::Rnn, 1).is_err());
    }
}
