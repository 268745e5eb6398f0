//! Index arithmetic of the data-movement ops, the same for every backend: for each
//! output element, which input element it copies, as sums of `coordinate × stride`
//! terms over the output coordinates `c0..`. The CUDA and WGSL emitters only spell the
//! terms (integer literals `12LL` or `12u`) and the loads around them.

use super::support::{const_input, input, output, plan, typed, unsupported};
use crate::Result;
use gopt_ir::ops::ShapeOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

/// How a backend writes an index literal: the suffix after the digits.
#[derive(Clone, Copy)]
pub struct Lit(pub &'static str);

impl Lit {
    fn n(self, v: impl std::fmt::Display) -> String {
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

/// A data-movement node, ready to be written: one output element `i` per invocation,
/// split into output coordinates `c0..` of `shape`, reads one input element.
pub struct MovementSpec {
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
}

/// What one output element of a data-movement node reads. Indices are sums of
/// `coordinate × stride` terms, literals written with the backend's [`Lit`].
pub enum Read {
    /// `out[i] = in0[i]` (the view ops as copies).
    Copy,
    /// `out[i] = in0[index]` (Transpose, Expand, Slice).
    Strided(String),
    /// `k = in1[index]` (the indices; negative ones plus `axis_len`, checked against
    /// it), then `out[i] = in0[data]`, where `data` uses `k`.
    Gather {
        /// The element of the indices this output element uses.
        index: String,
        /// The data element, in terms of the output coordinates and `k`.
        data: String,
        /// The gathered axis's length.
        axis_len: usize,
    },
    /// The first part whose end (along output axis `axis`) is above `c{axis}` gives
    /// `out[i] = in{part}[index]`.
    Concat {
        /// The concatenated axis.
        axis: usize,
        /// Each input's end along the axis and the element it reads.
        parts: Vec<(usize, String)>,
    },
}

/// The data movement of `node` (Transpose, Slice, Gather, Expand, Concat, or a view op
/// as a copy), its literals written with `lit`.
pub fn movement(g: &Graph, node: &Node, lit: Lit) -> Result<MovementSpec> {
    let out = output(node, 0)?;
    let (dtype, shape) = typed(g, node, out)?;
    let r = shape.len();
    let x = input(node, 0)?;
    let (_, xs) = typed(g, node, x)?;
    let xst = strides(&xs);
    let index = |terms: Vec<String>| sum(&terms, &lit.n(0));
    let mut inputs = vec![(x, dtype)];
    let read = match node.op {
        Op::Shape(
            ShapeOp::Reshape
            | ShapeOp::Flatten
            | ShapeOp::Squeeze
            | ShapeOp::Unsqueeze
            | ShapeOp::Identity,
        ) => Read::Copy,
        Op::Shape(ShapeOp::Transpose) => {
            let perm: Vec<usize> = match node.attrs.ints("perm").map_err(plan)? {
                Some(p) => p.iter().map(|&v| v as usize).collect(),
                None => (0..r).rev().collect(),
            };
            Read::Strided(index(
                (0..r)
                    .map(|a| format!("c{a} * {}", lit.n(xst[perm[a]])))
                    .collect(),
            ))
        }
        Op::Shape(ShapeOp::Expand) => {
            let pad = r - xs.len();
            Read::Strided(index(
                (0..r)
                    .filter(|&a| a >= pad && xs[a - pad] != 1)
                    .map(|a| format!("c{a} * {}", lit.n(xst[a - pad])))
                    .collect(),
            ))
        }
        Op::Shape(ShapeOp::Slice) => Read::Strided(index(slice(g, node, &xs, lit)?)),
        Op::Shape(ShapeOp::Gather) => {
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
            let at = (0..q)
                .map(|j| format!("c{} * {}", axis + j, lit.n(ist[j])))
                .collect();
            let mut data: Vec<String> = (0..axis)
                .map(|a| format!("c{a} * {}", lit.n(xst[a])))
                .collect();
            data.push(format!("k * {}", lit.n(xst[axis])));
            data.extend(
                (axis + 1..xs.len()).map(|a| format!("c{} * {}", a - 1 + q, lit.n(xst[a]))),
            );
            Read::Gather {
                index: index(at),
                data: index(data),
                axis_len: xs[axis],
            }
        }
        Op::Shape(ShapeOp::Concat) => {
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
                        true => format!("(c{a} - {}) * {}", lit.n(end), lit.n(st[a])),
                        false => format!("c{a} * {}", lit.n(st[a])),
                    })
                    .collect();
                end += s[axis];
                inputs.push((v, dtype));
                parts.push((end, index(terms)));
            }
            Read::Concat { axis, parts }
        }
        _ => return Err(unsupported(node, "this op (not data movement)")),
    };
    Ok(MovementSpec {
        out,
        dtype,
        shape,
        inputs,
        read,
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
fn slice(g: &Graph, node: &Node, xs: &[usize], lit: Lit) -> Result<Vec<String>> {
    let r = xs.len();
    let (start, step) = signed_slice_window(g, node, xs)?;
    let st = strides(xs);
    Ok((0..r)
        .map(|a| {
            format!(
                "({} {} c{a} * {}) * {}",
                lit.n(start[a]),
                if step[a] < 0 { "-" } else { "+" },
                // A step at least the axis long takes one element (c = 0): capped,
                // its literal stays small.
                lit.n(step[a].unsigned_abs().min(xs[a].max(1) as u64)),
                lit.n(st[a])
            )
        })
        .collect())
}
