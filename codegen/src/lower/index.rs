//! Index arithmetic of the data-movement ops, the same for every backend: for each
//! output element, which input element it copies, as sums of `coordinate × stride`
//! terms over the output coordinates `c0..`. The CUDA and WGSL emitters only spell the
//! terms (integer literals `12LL` or `12u`, [`Index::write`]) and the loads around them.

pub use super::row_crop::RowCrop;
use super::support::{const_input, input, output, plan, typed, unsupported, Site};
use crate::plan::index_code;
use crate::Result;
use gopt_ir::ops::ShapeOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

/// How a backend writes an index literal: the suffix after the digits.
#[derive(Clone, Copy)]
pub struct Lit(pub &'static str);

impl Lit {
    /// `v` as a literal.
    pub fn n(self, v: impl std::fmt::Display) -> String {
        format!("{v}{}", self.0)
    }
}

/// Row-major strides of `s`.
pub fn strides(s: &[usize]) -> Vec<usize> {
    let mut st = vec![1; s.len()];
    for a in (0..s.len().saturating_sub(1)).rev() {
        st[a] = st[a + 1] * s[a + 1];
    }
    st
}

/// The terms joined by `+`, or `zero`.
pub fn sum(terms: &[String], zero: &str) -> String {
    if terms.is_empty() {
        zero.into()
    } else {
        terms.join(" + ")
    }
}

/// One `coordinate × stride` term of an index into an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Term {
    /// `c{axis} * stride`.
    Coord {
        /// The output coordinate.
        axis: usize,
        /// The input's stride it moves by.
        stride: usize,
    },
    /// `k * stride`: the index a Gather read.
    Gathered {
        /// The data's stride along the gathered axis.
        stride: usize,
    },
    /// `(c{axis} - from) * stride`: a Concat part's coordinate along its axis.
    From {
        /// The concatenated axis.
        axis: usize,
        /// Where the part starts along it.
        from: usize,
        /// The part's stride along it.
        stride: usize,
    },
    /// `(start ± c{axis} * step) * stride`: a Slice's axis (a negative step walks down).
    Stepped {
        /// The output coordinate.
        axis: usize,
        /// The first element read along the axis.
        start: i64,
        /// The step is negative.
        down: bool,
        /// The step's size.
        step: u64,
        /// The input's stride along the axis.
        stride: usize,
    },
}

/// An element index: the sum of its terms (0 without any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index(pub Vec<Term>);

impl Index {
    /// The index as an expression, literals written with `lit`.
    pub fn write(&self, lit: Lit) -> String {
        let terms: Vec<String> = self
            .0
            .iter()
            .map(|t| match *t {
                Term::Coord { axis, stride } => format!("c{axis} * {}", lit.n(stride)),
                Term::Gathered { stride } => format!("k * {}", lit.n(stride)),
                Term::From { axis, from, stride } => {
                    format!("(c{axis} - {}) * {}", lit.n(from), lit.n(stride))
                }
                Term::Stepped {
                    axis,
                    start,
                    down,
                    step,
                    stride,
                } => format!(
                    "({} {} c{axis} * {}) * {}",
                    lit.n(start),
                    if down { "-" } else { "+" },
                    lit.n(step),
                    lit.n(stride)
                ),
            })
            .collect();
        sum(&terms, &lit.n(0))
    }
}

/// A data-movement node, ready to be written: one output element `i` per invocation,
/// split into output coordinates `c0..` of `shape`, reads one input element.
#[derive(Clone, Debug, PartialEq)]
pub struct MovementSpec {
    /// The node.
    pub site: Site,
    /// The output.
    pub out: ValueId,
    /// Its dtype (elements are copied as stored).
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<usize>,
    /// What the kernel binds before the output, as `in0, in1, ..`, with their dtypes.
    pub inputs: Vec<(ValueId, DType)>,
    /// What element `i` reads.
    pub read: Read,
    /// The Slice as rows of contiguous input runs, when it is one ([`RowCrop`]).
    pub crop: Option<RowCrop>,
}

/// What one output element of a data-movement node reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Read {
    /// `out[i] = in0[i]` (the view ops as copies).
    Copy,
    /// `out[i] = in0[index]` (Transpose, Expand, Slice).
    Strided(Index),
    /// `k = in1[index]` (the indices; negative ones plus `axis_len`, checked against
    /// it), then `out[i] = in0[data]`, where `data` uses `k`.
    Gather {
        /// The element of the indices this output element uses.
        index: Index,
        /// The data element, in terms of the output coordinates and `k`.
        data: Index,
        /// The gathered axis's length.
        axis_len: usize,
        /// The code an index out of range raises ([`crate::plan::index_code`]).
        code: u32,
    },
    /// The first part whose end (along output axis `axis`) is above `c{axis}` gives
    /// `out[i] = in{part}[index]`.
    Concat {
        /// The concatenated axis.
        axis: usize,
        /// Each input's end along the axis and the element it reads.
        parts: Vec<(usize, Index)>,
    },
}

impl MovementSpec {
    /// What an index out of range is, for the run's error.
    pub fn out_of_range(axis_len: usize) -> String {
        format!("an index out of range for an axis of length {axis_len}")
    }
}

/// The data-movement ops, as [`super::lower`] maps them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// A view op (Reshape, Flatten, Squeeze, Unsqueeze, Identity) as a copy.
    Copy,
    /// Transpose.
    Transpose,
    /// Expand.
    Expand,
    /// Slice.
    Slice,
    /// Gather.
    Gather,
    /// Concat.
    Concat,
}

/// The kernel that copies view node `n` of `g` (a view op, or a Transpose that keeps
/// its input's order, [`super::is_view`]) where it runs as a copy instead of aliasing.
pub fn view_copy(g: &Graph, n: &Node) -> Result<super::Lowered> {
    let mv = if super::is_view_op(n.op) {
        Move::Copy
    } else if n.op == Op::Shape(ShapeOp::Transpose) {
        Move::Transpose
    } else {
        return Err(unsupported(n, "a copy of a node that is not a view"));
    };
    super::typed(spec(g, n, mv), |s| super::Spec::Movement(Box::new(s)))
}

/// The data movement `mv` of `node`.
pub fn spec(g: &Graph, node: &Node, mv: Move) -> Result<MovementSpec> {
    let out = output(node, 0)?;
    let (dtype, shape) = typed(g, node, out)?;
    let r = shape.len();
    let x = input(node, 0)?;
    let (_, xs) = typed(g, node, x)?;
    let xst = strides(&xs);
    let coord = |axis: usize, stride: usize| Term::Coord { axis, stride };
    let mut inputs = vec![(x, dtype)];
    let read = match mv {
        Move::Copy => Read::Copy,
        Move::Transpose => {
            let perm: Vec<usize> = match node.attrs.ints("perm").map_err(plan)? {
                Some(p) => p.iter().map(|&v| v as usize).collect(),
                None => (0..r).rev().collect(),
            };
            Read::Strided(Index((0..r).map(|a| coord(a, xst[perm[a]])).collect()))
        }
        Move::Expand => {
            let pad = r - xs.len();
            Read::Strided(Index(
                (0..r)
                    .filter(|&a| a >= pad && xs[a - pad] != 1)
                    .map(|a| coord(a, xst[a - pad]))
                    .collect(),
            ))
        }
        Move::Slice => Read::Strided(slice(g, node, &xs)?),
        Move::Gather => {
            let indices = input(node, 1)?;
            let (index_dtype, is) = typed(g, node, indices)?;
            inputs.push((indices, index_dtype));
            let axis = node.attrs.int_or("axis", 0).map_err(plan)?;
            let axis = if axis < 0 {
                axis + xs.len() as i64
            } else {
                axis
            } as usize;
            let ist = strides(&is);
            let q = is.len();
            // Output coordinates: data's axes before `axis`, the indices' axes, then
            // data's axes after `axis`.
            let at = (0..q).map(|j| coord(axis + j, ist[j])).collect();
            let mut data: Vec<Term> = (0..axis).map(|a| coord(a, xst[a])).collect();
            data.push(Term::Gathered { stride: xst[axis] });
            data.extend((axis + 1..xs.len()).map(|a| coord(a - 1 + q, xst[a])));
            Read::Gather {
                index: Index(at),
                data: Index(data),
                axis_len: xs[axis],
                code: index_code(g, node)?,
            }
        }
        Move::Concat => {
            let axis = node.attrs.int_or("axis", 0).map_err(plan)?;
            let axis = if axis < 0 { axis + r as i64 } else { axis } as usize;
            let mut end = 0usize;
            let mut parts = Vec::new();
            inputs.clear();
            for k in 0..node.inputs.len() {
                let v = input(node, k)?;
                let (_, s) = typed(g, node, v)?;
                let st = strides(&s);
                let terms = (0..r)
                    .map(|a| match a == axis {
                        true => Term::From {
                            axis: a,
                            from: end,
                            stride: st[a],
                        },
                        false => coord(a, st[a]),
                    })
                    .collect();
                end += s[axis];
                inputs.push((v, dtype));
                parts.push((end, Index(terms)));
            }
            Read::Concat { axis, parts }
        }
    };
    Ok(MovementSpec {
        site: Site::of(node),
        out,
        dtype,
        shape,
        inputs,
        read,
        crop: (mv == Move::Slice).then(|| RowCrop::of(g, node)).flatten(),
    })
}

/// A Slice's window per axis of an input of shape `xs`: the first element read (negative
/// starts counted from the end, clamped) and the step (1 on axes it does not name).
/// Constant bounds and positive steps only: callers that walk rows forward (the CUDA
/// row crop) rely on both.
pub fn slice_window(g: &Graph, node: &Node, xs: &[usize]) -> Result<(Vec<i64>, Vec<i64>)> {
    let (start, step) = signed_slice_window(g, node, xs)?;
    if step.iter().any(|&s| s <= 0) {
        return Err(unsupported(node, "negative steps"));
    }
    Ok((start, step))
}

/// A Slice's window per axis, negative steps included: the first element read and the
/// step, the start clamped as the spec does (to `[0, len]` for a positive step, to
/// `[0, len - 1]` for a negative one, which walks down from it). Constant bounds only;
/// a zero step is refused.
fn signed_slice_window(g: &Graph, node: &Node, xs: &[usize]) -> Result<(Vec<i64>, Vec<i64>)> {
    let ints = |k: usize, what: &str| {
        const_input(g, node, k, what).map(|t| t.map(gopt_ir::Tensor::to_i64_vec))
    };
    let r = xs.len();
    let starts = ints(1, "starts")?.ok_or_else(|| unsupported(node, "no starts"))?;
    let axes = ints(3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = ints(4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    let mut start = vec![0i64; r];
    let mut step = vec![1i64; r];
    for ((&a, &s), &st) in axes.iter().zip(&starts).zip(&steps) {
        let a = if a < 0 { a + r as i64 } else { a } as usize;
        if a >= r || st == 0 {
            return Err(unsupported(node, "an axis out of range or a zero step"));
        }
        let d = xs[a] as i64;
        let s = if s < 0 { s.saturating_add(d) } else { s };
        // An empty axis (d = 0) starts at 0: nothing is read from it.
        start[a] = if st > 0 { s.min(d) } else { s.min(d - 1) }.max(0);
        step[a] = st;
    }
    Ok((start, step))
}

/// A Slice's terms: `(start ± c × |step|) × stride` per axis (constant bounds; a
/// negative step walks down from its start, which keeps every term non-negative for
/// the unsigned coordinates of WGSL).
fn slice(g: &Graph, node: &Node, xs: &[usize]) -> Result<Index> {
    let r = xs.len();
    let (start, step) = signed_slice_window(g, node, xs)?;
    let st = strides(xs);
    Ok(Index(
        (0..r)
            .map(|a| Term::Stepped {
                axis: a,
                start: start[a],
                down: step[a] < 0,
                // A step at least the axis long takes one element (c = 0): capped,
                // its literal stays small.
                step: step[a].unsigned_abs().min(xs[a].max(1) as u64),
                stride: st[a],
            })
            .collect(),
    ))
}
