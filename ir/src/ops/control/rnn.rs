//! ONNX `RNN`, `GRU` and `LSTM`: one driver (layouts, directions, per-batch sequence
//! lengths, initial states, the input projection as one matrix product per direction)
//! and one step function per cell. Computes in f32 (f64 for f64 inputs), as ONNX
//! Runtime's CPU kernels do.

use super::activation::{parse_activations, Act};
use crate::dim::Dim;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::attention::real::{from_real, real, to_real, wide, Real};
use crate::ops::util::{in_ty, input, opt_input};
use crate::ops::InferInput;
use crate::tensor::Tensor;
use ndarray::{s, Array1, Array2, Array3, Array4, ArrayView1, ArrayView2, Axis, Ix3};

/// The recurrent cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cell {
    /// Elman RNN: one gate.
    Rnn,
    /// Gated recurrent unit: update, reset and hidden gates.
    Gru,
    /// Long short-term memory: input, output, forget and cell gates.
    Lstm,
}

impl Cell {
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Cell::Rnn => "RNN",
            Cell::Gru => "GRU",
            Cell::Lstm => "LSTM",
        }
    }
}

/// Attributes shared by the three ops.
struct Config {
    dirs: usize,
    reverse_only: bool,
    layout: i64,
    clip: Option<f64>,
    linear_before_reset: bool,
    input_forget: bool,
    acts: Vec<Act>,
}

fn config(cell: Cell, node: &Node) -> Result<Config> {
    let a = &node.attrs;
    let (dirs, reverse_only) = match a.str_or("direction", "forward")? {
        "forward" => (1, false),
        "reverse" => (1, true),
        "bidirectional" => (2, false),
        d => {
            return Err(IrError::Attr {
                name: "direction".into(),
                msg: format!("expected forward, reverse or bidirectional, got {d:?}"),
            })
        }
    };
    let layout = a.int_or("layout", 0)?;
    if layout != 0 && layout != 1 {
        return Err(IrError::Attr {
            name: "layout".into(),
            msg: format!("must be 0 or 1, got {layout}"),
        });
    }
    Ok(Config {
        dirs,
        reverse_only,
        layout,
        clip: a.float("clip")?.map(f64::from),
        linear_before_reset: a.int_or("linear_before_reset", 0)? != 0,
        input_forget: a.int_or("input_forget", 0)? != 0,
        acts: parse_activations(cell, a, dirs)?,
    })
}

/// One direction's parameters, transposed for row-vector products.
struct Weights<F> {
    /// `Wᵀ`: `[input, gates*hidden]`.
    w_t: Array2<F>,
    /// `Rᵀ`: `[hidden, gates*hidden]`.
    r_t: Array2<F>,
    /// Input bias `Wb`.
    wb: Array1<F>,
    /// Recurrence bias `Rb`.
    rb: Array1<F>,
    /// LSTM peepholes `[Pi, Po, Pf]`.
    p: Array1<F>,
    /// This direction's activations (f, g, h).
    acts: Vec<Act>,
}

/// Reads a 3-D input, checking its shape.
fn three<F: Real>(t: &Tensor, what: &str, want: [usize; 3]) -> Result<Array3<F>> {
    let a = to_real::<F>(t, what)?;
    if a.shape() != want {
        return Err(IrError::Shape(format!(
            "{what} has shape {:?}, expected {want:?}",
            a.shape()
        )));
    }
    Ok(a.into_dimensionality::<Ix3>().expect("shape checked"))
}

/// Runs the op.
pub(super) fn eval(cell: Cell, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let dtype = input(inputs, 0)?.dtype();
    if wide(dtype, cell.name())? {
        run::<f64>(cell, node, inputs)
    } else {
        run::<f32>(cell, node, inputs)
    }
}

fn run<F: Real>(cell: Cell, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let cfg = config(cell, node)?;
    let x_t = input(inputs, 0)?;
    let dtype = x_t.dtype();
    let x = to_real::<F>(x_t, "X")?
        .into_dimensionality::<Ix3>()
        .map_err(|_| IrError::Shape(format!("X must be 3-D, got {:?}", x_t.shape())))?;
    // Work in [seq, batch, input].
    let x = if cfg.layout == 1 {
        x.permuted_axes([1, 0, 2]).as_standard_layout().into_owned()
    } else {
        x
    };
    let (seq, batch, in_size) = x.dim();
    let r_in = input(inputs, 2)?;
    let hidden = *r_in.shape().last().unwrap_or(&0);
    if let Some(h) = node.attrs.int("hidden_size")? {
        if h != hidden as i64 {
            return Err(IrError::Attr {
                name: "hidden_size".into(),
                msg: format!("{h} disagrees with R's hidden size {hidden}"),
            });
        }
    }
    let (dirs, g) = (cfg.dirs, cell.gates());
    let w = three::<F>(input(inputs, 1)?, "W", [dirs, g * hidden, in_size])?;
    let r = three::<F>(r_in, "R", [dirs, g * hidden, hidden])?;
    let b = match opt_input(inputs, 3) {
        Some(t) => to_real::<F>(t, "B")?
            .into_dimensionality::<ndarray::Ix2>()
            .ok()
            .filter(|b| b.dim() == (dirs, 2 * g * hidden))
            .ok_or_else(|| {
                IrError::Shape(format!(
                    "B has shape {:?}, expected [{dirs}, {}]",
                    t.shape(),
                    2 * g * hidden
                ))
            })?,
        None => Array2::zeros((dirs, 2 * g * hidden)),
    };
    let lens = seq_lens(opt_input(inputs, 4), batch, seq)?;
    let state = |i: usize, what: &str| -> Result<Array3<F>> {
        match opt_input(inputs, i) {
            None => Ok(Array3::zeros((dirs, batch, hidden))),
            Some(t) if cfg.layout == 1 => Ok(three::<F>(t, what, [batch, dirs, hidden])?
                .permuted_axes([1, 0, 2])
                .as_standard_layout()
                .into_owned()),
            Some(t) => three::<F>(t, what, [dirs, batch, hidden]),
        }
    };
    let h0 = state(5, "initial_h")?;
    let c0 = if cell == Cell::Lstm {
        state(6, "initial_c")?
    } else {
        Array3::zeros((dirs, batch, hidden))
    };
    let p = match (cell, opt_input(inputs, 7)) {
        (Cell::Lstm, Some(t)) => to_real::<F>(t, "P")?
            .into_dimensionality::<ndarray::Ix2>()
            .ok()
            .filter(|p| p.dim() == (dirs, 3 * hidden))
            .ok_or_else(|| {
                IrError::Shape(format!(
                    "P has shape {:?}, expected [{dirs}, {}]",
                    t.shape(),
                    3 * hidden
                ))
            })?,
        _ => Array2::zeros((dirs, 3 * hidden)),
    };
    let n_acts = cfg.acts.len() / dirs;
    let flat_x = x
        .view()
        .into_shape_with_order((seq * batch, in_size))
        .expect("standard layout");
    let mut y = Array4::<F>::zeros((seq, dirs, batch, hidden));
    let mut y_h = Array3::<F>::zeros((dirs, batch, hidden));
    let mut y_c = Array3::<F>::zeros((dirs, batch, hidden));
    for d in 0..dirs {
        let wts = Weights {
            w_t: w.index_axis(Axis(0), d).t().to_owned(),
            r_t: r.index_axis(Axis(0), d).t().to_owned(),
            wb: b.slice(s![d, ..g * hidden]).to_owned(),
            rb: b.slice(s![d, g * hidden..]).to_owned(),
            p: p.row(d).to_owned(),
            acts: cfg.acts[d * n_acts..(d + 1) * n_acts].to_vec(),
        };
        let reverse = cfg.reverse_only || d == 1;
        let xw = flat_x.dot(&wts.w_t) + &wts.wb;
        let mut h = h0.index_axis(Axis(0), d).to_owned();
        let mut c = c0.index_axis(Axis(0), d).to_owned();
        for i in 0..seq {
            let active: Vec<(usize, usize)> = (0..batch)
                .filter(|&bi| i < lens[bi])
                .map(|bi| (bi, if reverse { lens[bi] - 1 - i } else { i }))
                .collect();
            if active.is_empty() {
                break;
            }
            let hr = h.dot(&wts.r_t);
            for (bi, t) in active {
                let rows = (xw.row(t * batch + bi), hr.row(bi));
                let (nh, nc) = step(cell, &cfg, &wts, rows, h.row(bi), c.row(bi));
                y.slice_mut(s![t, d, bi, ..]).assign(&nh);
                h.row_mut(bi).assign(&nh);
                c.row_mut(bi).assign(&nc);
            }
        }
        y_h.index_axis_mut(Axis(0), d).assign(&h);
        y_c.index_axis_mut(Axis(0), d).assign(&c);
    }
    let (y, y_h, y_c) = if cfg.layout == 1 {
        (
            y.permuted_axes([2, 0, 1, 3])
                .as_standard_layout()
                .into_owned()
                .into_dyn(),
            y_h.permuted_axes([1, 0, 2])
                .as_standard_layout()
                .into_owned()
                .into_dyn(),
            y_c.permuted_axes([1, 0, 2])
                .as_standard_layout()
                .into_owned()
                .into_dyn(),
        )
    } else {
        (y.into_dyn(), y_h.into_dyn(), y_c.into_dyn())
    };
    let mut outs = vec![from_real(y, dtype), from_real(y_h, dtype)];
    if cell == Cell::Lstm {
        outs.push(from_real(y_c, dtype));
    }
    Ok(outs)
}

/// Per-batch sequence lengths (all `seq` when absent).
fn seq_lens(t: Option<&Tensor>, batch: usize, seq: usize) -> Result<Vec<usize>> {
    let Some(t) = t else {
        return Ok(vec![seq; batch]);
    };
    let v = t.to_i64_vec();
    if v.len() != batch {
        return Err(IrError::Shape(format!(
            "sequence_lens has {} entries for batch {batch}",
            v.len()
        )));
    }
    v.iter()
        .map(|&l| {
            usize::try_from(l)
                .ok()
                .filter(|&l| l <= seq)
                .ok_or_else(|| IrError::Shape(format!("sequence length {l} outside 0..={seq}")))
        })
        .collect()
}

/// One time step for one batch row: the new hidden (and, for LSTM, cell) state from
/// `xw = x·Wᵀ + Wb` and `hr = h·Rᵀ`.
fn step<F: Real>(
    cell: Cell,
    cfg: &Config,
    wts: &Weights<F>,
    (xw, hr): (ArrayView1<F>, ArrayView1<F>),
    h: ArrayView1<F>,
    c: ArrayView1<F>,
) -> (Array1<F>, Array1<F>) {
    let n = h.len();
    let clip = |v: F| match cfg.clip {
        Some(cl) => v.max(real(-cl)).min(real(cl)),
        None => v,
    };
    let act = |k: usize, v: F| wts.acts[k].apply(clip(v));
    // Gate pre-activations x·Wᵀ + h·Rᵀ + Wb + Rb.
    let pre = &xw + &hr + &wts.rb;
    match cell {
        Cell::Rnn => (pre.mapv(|v| act(0, v)), c.to_owned()),
        Cell::Gru => {
            let z = pre.slice(s![..n]).mapv(|v| act(0, v));
            let r = pre.slice(s![n..2 * n]).mapv(|v| act(0, v));
            let rb_h = wts.rb.slice(s![2 * n..]);
            let x_part = xw.slice(s![2 * n..]);
            let hidden = if cfg.linear_before_reset {
                &x_part + &(&r * &(&hr.slice(s![2 * n..]) + &rb_h))
            } else {
                let rh_t: ArrayView2<F> = wts.r_t.slice(s![.., 2 * n..]);
                &x_part + &(&r * &h).dot(&rh_t) + rb_h
            };
            let cand = hidden.mapv(|v| act(1, v));
            let one = F::one();
            let new_h = ndarray::Zip::from(&z)
                .and(&cand)
                .and(h)
                .map_collect(|&z, &hc, &hp| (one - z) * hc + z * hp);
            (new_h, c.to_owned())
        }
        Cell::Lstm => {
            let p = &wts.p;
            let mut new_h = Array1::zeros(n);
            let mut new_c = Array1::zeros(n);
            for j in 0..n {
                let i_g = act(0, pre[j] + p[j] * c[j]);
                let f_g = if cfg.input_forget {
                    F::one() - i_g
                } else {
                    act(0, pre[2 * n + j] + p[2 * n + j] * c[j])
                };
                let cand = act(1, pre[3 * n + j]);
                let cj = f_g * c[j] + i_g * cand;
                let o_g = act(0, pre[n + j] + p[n + j] * cj);
                new_c[j] = cj;
                new_h[j] = o_g * act(2, cj);
            }
            (new_h, new_c)
        }
    }
}

/// Output types.
pub(super) fn infer(
    cell: Cell,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let cfg = config(cell, node)?;
    let x = in_ty(inputs, 0)?.ty;
    if x.shape.len() != 3 {
        return Err(IrError::Shape(format!("X must be 3-D, got {x}")));
    }
    let (seq, batch) = if cfg.layout == 1 {
        (x.shape[1].clone(), x.shape[0].clone())
    } else {
        (x.shape[0].clone(), x.shape[1].clone())
    };
    let hidden = match node.attrs.int("hidden_size")? {
        Some(h) if h > 0 => Dim::Known(h as u64),
        _ => {
            let r = in_ty(inputs, 2)?.ty;
            r.shape
                .last()
                .cloned()
                .ok_or_else(|| IrError::Shape(format!("R must be 3-D, got {r}")))?
        }
    };
    let dirs = Dim::from(cfg.dirs);
    let (y, state) = if cfg.layout == 1 {
        (
            vec![batch.clone(), seq, dirs.clone(), hidden.clone()],
            vec![batch, dirs, hidden],
        )
    } else {
        (
            vec![seq, dirs.clone(), batch.clone(), hidden.clone()],
            vec![dirs, batch, hidden],
        )
    };
    let mut tys = vec![
        TensorType::new(x.dtype, y),
        TensorType::new(x.dtype, state.clone()),
    ];
    if cell == Cell::Lstm {
        tys.push(TensorType::new(x.dtype, state));
    }
    Ok(tys)
}
