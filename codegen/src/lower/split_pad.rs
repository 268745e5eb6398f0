//! Split and Pad, read once for every backend. Split: the input seen as
//! `[outer, len, inner]` around its axis, and each output's chunk of the axis (from the
//! outputs' static shapes, which inference derived from the `split` input or
//! `num_outputs`). Pad: per axis, the output coordinate minus the leading pad (`q`)
//! folded back into the input by the mode (constant, reflect, edge, wrap; negative
//! pads crop), as expressions over `q` and literals both backends' integer arithmetic
//! reads alike (`%`, `min`, `max`, `&&`), and the constant value.

use super::index::{strides, Lit};
use super::support::{const_input, input, opt_input, output, plan, typed, unsupported};
use crate::Result;
use gopt_ir::ops::ShapeOp;
use gopt_ir::{DType, Graph, Node, Op, Tensor, ValueId};

/// A Split or Pad node, read.
pub enum SplitPad {
    /// Split.
    Split(SplitSpec),
    /// Pad.
    Pad(PadSpec),
}

/// Reads Split or Pad node `node` of `g` (a Pad's fold expressions with `lit`, the
/// backend's signed literal).
pub fn lower(g: &Graph, node: &Node, lit: Lit) -> Result<SplitPad> {
    match node.op {
        Op::Shape(ShapeOp::Split) => split(g, node).map(SplitPad::Split),
        Op::Shape(ShapeOp::Pad) => pad(g, node, lit).map(SplitPad::Pad),
        _ => Err(unsupported(node, "this op (not Split or Pad)")),
    }
}

/// A Split node: input element `i` sits at `in_ = i % inner`, `a_ = (i / inner) % len`,
/// `out_ = i / (inner · len)`, and goes to the first chunk whose end is above `a_`.
pub struct SplitSpec {
    /// The input.
    pub x: ValueId,
    /// Its dtype (elements are copied as stored).
    pub dtype: DType,
    /// Its elements.
    pub total: usize,
    /// Elements after the axis.
    pub inner: usize,
    /// The axis's length.
    pub len: usize,
    /// One chunk per output, in order.
    pub chunks: Vec<Chunk>,
}

/// One output of a Split: the rows `begin .. begin + size` of the axis.
pub struct Chunk {
    /// The output.
    pub out: ValueId,
    /// Its first row along the axis.
    pub begin: usize,
    /// Its rows along the axis.
    pub size: usize,
    /// It has no elements.
    pub empty: bool,
}

impl SplitSpec {
    /// The end of `c` along the axis and where input element (`out_`, `a_`, `in_`)
    /// lands in it, literals written with `lit`.
    pub fn dest(&self, c: &Chunk, lit: Lit) -> (String, String) {
        let n = |v: usize| format!("{v}{}", lit.0);
        let index = format!(
            "(out_ * {} + a_ - {}) * {} + in_",
            n(c.size),
            n(c.begin),
            n(self.inner)
        );
        (n(c.begin + c.size), index)
    }
}

/// Reads Split node `node` of `g`.
pub fn split(g: &Graph, node: &Node) -> Result<SplitSpec> {
    for k in node.attrs.0.keys() {
        if !["axis", "num_outputs"].contains(&k.as_str()) {
            return Err(unsupported(node, &format!("attribute `{k}`")));
        }
    }
    let x = input(node, 0)?;
    let (dtype, xs) = typed(g, node, x)?;
    let rank = xs.len() as i64;
    let axis = node.attrs.int_or("axis", 0).map_err(plan)?;
    if axis < -rank || axis >= rank {
        return Err(unsupported(
            node,
            &format!("axis {axis} of a rank-{rank} input"),
        ));
    }
    let axis = if axis < 0 { axis + rank } else { axis } as usize;
    let mut begin = 0usize;
    let mut chunks = Vec::new();
    for (k, &out) in node.outputs.iter().enumerate() {
        let (odt, os) = typed(g, node, out)?;
        let size = os.get(axis).copied().unwrap_or(0);
        let mut want = xs.clone();
        want[axis] = size;
        if odt != dtype || os != want {
            return Err(plan(format!(
                "{}: Split output {k} is {odt} {os:?}",
                node.name
            )));
        }
        chunks.push(Chunk {
            out,
            begin,
            size,
            empty: os.iter().product::<usize>() == 0,
        });
        begin += size;
    }
    if begin != xs[axis] {
        return Err(unsupported(
            node,
            "split sizes that do not add up to the axis",
        ));
    }
    Ok(SplitSpec {
        x,
        dtype,
        total: xs.iter().product(),
        inner: xs[axis + 1..].iter().product(),
        len: xs[axis],
        chunks,
    })
}

/// A Pad node: output element `i` splits into coordinates, innermost first; each gives
/// `q`, the input coordinate it reads, and the element is the constant when any axis
/// says `q` is outside.
pub struct PadSpec {
    /// The input.
    pub x: ValueId,
    /// The output.
    pub out: ValueId,
    /// Their dtype (elements are copied as stored).
    pub dtype: DType,
    /// The mode's name, for the kernel's comment.
    pub mode: &'static str,
    /// Output elements.
    pub total: usize,
    /// Every axis, outermost first.
    pub axes: Vec<PadAxis>,
    /// What the elements outside the input hold (constant mode).
    pub value: PadValue,
}

/// One axis of a Pad: `q = c - begin` for output coordinate `c` (of `0..out_len`),
/// then `q = fold` when the axis folds, and the input element advances `q · stride`.
pub struct PadAxis {
    /// The output's length along the axis.
    pub out_len: usize,
    /// The leading pad (negative: cropped).
    pub begin: i64,
    /// The input's stride along the axis.
    pub stride: usize,
    /// The expression (of `q`) that brings `q` back into the input (edge, wrap,
    /// reflect), when the axis is padded.
    pub fold: Option<String>,
    /// The condition (over `q`) that `q` is inside the input (constant mode), when the
    /// axis is padded.
    pub inside: Option<String>,
}

/// The constant a Pad writes outside its input.
pub enum PadValue {
    /// Zero (no `constant_value` input).
    Zero,
    /// A graph constant of one element, already cast to the data's dtype.
    Const(Tensor),
    /// A one-element input of the data's dtype, read on the device.
    Input(ValueId),
}

/// Reads Pad node `node` of `g`; the fold expressions' signed literals are written
/// with `lit`.
pub fn pad(g: &Graph, node: &Node, lit: Lit) -> Result<PadSpec> {
    for k in node.attrs.0.keys() {
        if k != "mode" {
            return Err(unsupported(node, &format!("attribute `{k}`")));
        }
    }
    let mode = match node.attrs.str_or("mode", "constant").map_err(plan)? {
        "constant" => "constant",
        "reflect" => "reflect",
        "edge" => "edge",
        "wrap" => "wrap",
        other => return Err(unsupported(node, &format!("pad mode `{other}`"))),
    };
    let (x, out) = (input(node, 0)?, output(node, 0)?);
    let (dtype, xs) = typed(g, node, x)?;
    let (odt, ys) = typed(g, node, out)?;
    let r = xs.len();
    let pads = const_input(g, node, 1, "pads")?
        .ok_or_else(|| unsupported(node, "a missing pads input"))?
        .to_i64_vec();
    let axes: Vec<usize> = match const_input(g, node, 3, "axes")? {
        None => (0..r).collect(),
        Some(a) => a
            .to_i64_vec()
            .iter()
            .map(|&a| if a < 0 { a + r as i64 } else { a })
            .map(|a| usize::try_from(a).ok().filter(|&a| a < r))
            .collect::<Option<_>>()
            .ok_or_else(|| unsupported(node, "axes outside the input"))?,
    };
    if pads.len() != 2 * axes.len() || odt != dtype || ys.len() != r {
        return Err(plan(format!(
            "{}: Pad pads {pads:?} for axes {axes:?}",
            node.name
        )));
    }
    if mode != "constant" && xs.iter().zip(&ys).any(|(&d, &o)| d == 0 && o > 0) {
        return Err(unsupported(
            node,
            "padding an empty axis outside constant mode",
        ));
    }
    let mut begin = vec![0i64; r];
    for (i, &a) in axes.iter().enumerate() {
        begin[a] = pads[i];
    }
    let value = match opt_input(node, 2) {
        None => PadValue::Zero,
        Some(v) => match g.constant(v) {
            Some(c) if c.len() == 1 => PadValue::Const(c.cast(dtype)),
            Some(_) => return Err(unsupported(node, "a constant_value of several elements")),
            None if typed(g, node, v)?.0 != dtype => {
                return Err(unsupported(
                    node,
                    "a run-time constant_value of another dtype",
                ))
            }
            None => PadValue::Input(v),
        },
    };
    let n = |v: i64| format!("{v}{}", lit.0);
    let xst = strides(&xs);
    let axes = (0..r)
        .map(|a| {
            let d = xs[a] as i64;
            let padded = begin[a] != 0 || ys[a] != xs[a];
            let wrap = |p: i64| format!("((q % {0}) + {0}) % {0}", n(p));
            let fold = match mode {
                "edge" => Some(format!("max(min(q, {}), {})", n(d - 1), n(0))),
                "wrap" => Some(wrap(d)),
                "reflect" if d == 1 => Some(n(0)),
                // Period 2(d - 1): 0, 1, .., d - 1, d - 2, .., 1.
                "reflect" => Some(format!(
                    "min({0}, {1} - {0})",
                    wrap(2 * (d - 1)),
                    n(2 * (d - 1))
                )),
                _ => None,
            };
            let inside = (mode == "constant").then(|| format!("q >= {} && q < {}", n(0), n(d)));
            PadAxis {
                out_len: ys[a],
                begin: begin[a],
                stride: xst[a],
                fold: fold.filter(|_| padded),
                inside: inside.filter(|_| padded),
            }
        })
        .collect();
    Ok(PadSpec {
        x,
        out,
        dtype,
        mode,
        total: ys.iter().product(),
        axes,
        value,
    })
}
