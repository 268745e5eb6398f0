//! Split and Pad, read once for every backend. Split: the input seen as
//! `[outer, len, inner]` around its axis, and each output's chunk of the axis (from the
//! outputs' static shapes, which inference derived from the `split` input or
//! `num_outputs`). Pad: per axis, the output coordinate minus the leading pad (`q`)
//! folded back into the input by the mode (constant, reflect, edge, wrap; negative
//! pads crop), as expressions over `q` and literals both backends' integer arithmetic
//! reads alike (`%`, `min`, `max`, `&&`), and the constant value.

use super::index::{strides, Lit};
use super::support::{const_input, input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, Tensor, ValueId};

/// A Split or Pad node, read.
#[derive(Clone, Debug, PartialEq)]
pub enum SplitPad {
    /// Split.
    Split(SplitSpec),
    /// Pad.
    Pad(PadSpec),
}

/// A Split node: input element `i` sits at `in_ = i % inner`, `a_ = (i / inner) % len`,
/// `out_ = i / (inner · len)`, and goes to the first chunk whose end is above `a_`.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitSpec {
    /// The node.
    pub site: Site,
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
#[derive(Clone, Debug, PartialEq, Eq)]
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
        site: Site::of(node),
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
#[derive(Clone, Debug, PartialEq)]
pub struct PadSpec {
    /// The node.
    pub site: Site,
    /// The input.
    pub x: ValueId,
    /// The output.
    pub out: ValueId,
    /// Their dtype (elements are copied as stored).
    pub dtype: DType,
    /// The mode.
    pub mode: PadMode,
    /// Output elements.
    pub total: usize,
    /// Every axis, outermost first.
    pub axes: Vec<PadAxis>,
    /// What the elements outside the input hold (constant mode).
    pub value: PadValue,
}

/// One axis of a Pad: `q = c - begin` for output coordinate `c` (of `0..out_len`),
/// then `q = fold` when the axis folds, and the input element advances `q · stride`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PadAxis {
    /// The output's length along the axis.
    pub out_len: usize,
    /// The leading pad (negative: cropped).
    pub begin: i64,
    /// The input's stride along the axis.
    pub stride: usize,
    /// What brings `q` back into the input (edge, wrap, reflect), when the axis is
    /// padded.
    pub fold: Option<Fold>,
    /// The input's length along the axis, when the axis is padded in constant mode:
    /// `q` must be inside `0..len`.
    pub inside: Option<i64>,
}

/// A Pad's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    /// The constant outside the input.
    Constant,
    /// The input mirrored at its ends (the end not repeated).
    Reflect,
    /// The input's end repeated.
    Edge,
    /// The input repeated.
    Wrap,
}

impl PadMode {
    /// The mode's ONNX name.
    pub fn name(self) -> &'static str {
        match self {
            PadMode::Constant => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Edge => "edge",
            PadMode::Wrap => "wrap",
        }
    }
}

/// How a padded axis's `q` is brought back into an input of `len` elements along it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// Clamped to `0..=last`.
    Edge {
        /// The last element.
        last: i64,
    },
    /// Modulo `period` (the input's length).
    Wrap {
        /// The period.
        period: i64,
    },
    /// `0, 1, .., len - 1, len - 2, .., 1` repeated: period `2(len - 1)`.
    Reflect {
        /// The period.
        period: i64,
    },
    /// Element 0 (reflecting an axis of one element).
    Zero,
}

impl Fold {
    /// The expression (of `q`) that folds it, signed literals written with `lit`.
    pub fn write(self, lit: Lit) -> String {
        let wrap = |p: i64| format!("((q % {0}) + {0}) % {0}", lit.n(p));
        match self {
            Fold::Edge { last } => format!("max(min(q, {}), {})", lit.n(last), lit.n(0)),
            Fold::Wrap { period } => wrap(period),
            Fold::Reflect { period } => {
                format!("min({0}, {1} - {0})", wrap(period), lit.n(period))
            }
            Fold::Zero => lit.n(0),
        }
    }
}

impl PadAxis {
    /// The condition (over `q`) that `q` is inside the input, when the axis is padded
    /// in constant mode, signed literals written with `lit`.
    pub fn inside(&self, lit: Lit) -> Option<String> {
        self.inside
            .map(|d| format!("q >= {} && q < {}", lit.n(0), lit.n(d)))
    }
}

/// The constant a Pad writes outside its input.
#[derive(Clone, Debug, PartialEq)]
pub enum PadValue {
    /// Zero (no `constant_value` input).
    Zero,
    /// A graph constant of one element, already cast to the data's dtype.
    Const(Tensor),
    /// A one-element input of the data's dtype, read on the device.
    Input(ValueId),
}

/// Reads Pad node `node` of `g`.
pub fn pad(g: &Graph, node: &Node) -> Result<PadSpec> {
    for k in node.attrs.0.keys() {
        if k != "mode" {
            return Err(unsupported(node, &format!("attribute `{k}`")));
        }
    }
    let mode = match node.attrs.str_or("mode", "constant").map_err(plan)? {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
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
    if mode != PadMode::Constant && xs.iter().zip(&ys).any(|(&d, &o)| d == 0 && o > 0) {
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
    let xst = strides(&xs);
    let axes = (0..r)
        .map(|a| {
            let d = xs[a] as i64;
            let padded = begin[a] != 0 || ys[a] != xs[a];
            let fold = match mode {
                PadMode::Edge => Some(Fold::Edge { last: d - 1 }),
                PadMode::Wrap => Some(Fold::Wrap { period: d }),
                PadMode::Reflect if d == 1 => Some(Fold::Zero),
                PadMode::Reflect => Some(Fold::Reflect {
                    period: 2 * (d - 1),
                }),
                PadMode::Constant => None,
            };
            let inside = (mode == PadMode::Constant).then_some(d);
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
        site: Site::of(node),
        x,
        out,
        dtype,
        mode,
        total: ys.iter().product(),
        axes,
        value,
    })
}
