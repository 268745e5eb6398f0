//! Index arithmetic of the data-movement ops, the same for every backend: for each
//! output element, which input element it copies, as sums of `coordinate × stride`
//! terms over the output coordinates `c0..`. The CUDA and WGSL emitters only spell the
//! terms (integer literals `12LL` or `12u`) and the loads around them.

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

/// What one output element of a data-movement node reads.
pub enum Movement {
    /// `out[i] = in0[i]` (the view ops as copies).
    Copy,
    /// `out[i] = in0[terms]` (Transpose, Expand, Slice).
    Strided(Vec<String>),
    /// `k = indices[index_terms]` (negative: plus `axis_len`), then
    /// `out[i] = in0[data_terms]`, where the data terms use `k`.
    Gather {
        /// The indices' value.
        indices: ValueId,
        /// Their dtype.
        index_dtype: DType,
        /// The element of the indices this output element uses.
        index_terms: Vec<String>,
        /// The data element, in terms of the output coordinates and `k`.
        data_terms: Vec<String>,
        /// The gathered axis's length.
        axis_len: usize,
    },
    /// Output coordinate `c{axis}` below each part's end reads that input.
    Concat {
        /// The concatenated axis.
        axis: usize,
        /// Each input, its end along the axis, and the element it reads.
        parts: Vec<(ValueId, usize, Vec<String>)>,
    },
}

type Shape<'a> = &'a dyn Fn(ValueId) -> Result<Vec<usize>, String>;

fn input(node: &Node, k: usize) -> Result<ValueId, String> {
    node.inputs
        .get(k)
        .copied()
        .flatten()
        .ok_or_else(|| "a missing input".to_string())
}

fn const_ints(g: &Graph, node: &Node, k: usize) -> Result<Option<Vec<i64>>, String> {
    match node.inputs.get(k).copied().flatten() {
        None => Ok(None),
        Some(v) => g
            .constant(v)
            .map(|t| Some(t.to_i64_vec()))
            .ok_or_else(|| "bounds that are not constants".to_string()),
    }
}

fn int_attr(node: &Node, name: &str, d: i64) -> Result<i64, String> {
    node.attrs.int_or(name, d).map_err(|e| e.to_string())
}

/// The movement of `node` (output of rank `r`, first input of shape `xs`); an `Err`
/// is what the backend has no kernel for.
pub fn movement(g: &Graph, node: &Node, shape: Shape<'_>, lit: Lit) -> Result<Movement, String> {
    let out = shape(*node.outputs.first().ok_or("no output")?)?;
    let r = out.len();
    let xs = shape(input(node, 0)?)?;
    let xst = strides(&xs);
    Ok(match node.op {
        Op::Shape(
            ShapeOp::Reshape
            | ShapeOp::Flatten
            | ShapeOp::Squeeze
            | ShapeOp::Unsqueeze
            | ShapeOp::Identity,
        ) => Movement::Copy,
        Op::Shape(ShapeOp::Transpose) => {
            let perm: Vec<usize> = match node.attrs.ints("perm").map_err(|e| e.to_string())? {
                Some(p) => p.iter().map(|&v| v as usize).collect(),
                None => (0..r).rev().collect(),
            };
            Movement::Strided(
                (0..r)
                    .map(|a| format!("c{a} * {}", lit.n(xst[perm[a]])))
                    .collect(),
            )
        }
        Op::Shape(ShapeOp::Expand) => {
            let pad = r - xs.len();
            Movement::Strided(
                (0..r)
                    .filter(|&a| a >= pad && xs[a - pad] != 1)
                    .map(|a| format!("c{a} * {}", lit.n(xst[a - pad])))
                    .collect(),
            )
        }
        Op::Shape(ShapeOp::Slice) => {
            let starts = const_ints(g, node, 1)?.ok_or("no starts")?;
            let axes =
                const_ints(g, node, 3)?.unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = const_ints(g, node, 4)?.unwrap_or_else(|| vec![1; starts.len()]);
            let mut start = vec![0i64; r];
            let mut step = vec![1i64; r];
            for ((&a, &s), &st) in axes.iter().zip(&starts).zip(&steps) {
                let a = if a < 0 { a + r as i64 } else { a } as usize;
                if a >= r || st <= 0 {
                    return Err("negative or zero steps".into());
                }
                let d = xs[a] as i64;
                start[a] = (if s < 0 { s + d } else { s }).clamp(0, d);
                step[a] = st;
            }
            Movement::Strided(
                (0..r)
                    .map(|a| {
                        format!(
                            "({} + c{a} * {}) * {}",
                            lit.n(start[a]),
                            lit.n(step[a]),
                            lit.n(xst[a])
                        )
                    })
                    .collect(),
            )
        }
        Op::Shape(ShapeOp::Gather) => {
            let indices = input(node, 1)?;
            let is = shape(indices)?;
            let index_dtype = g.ty(indices).map_err(|e| e.to_string())?.dtype;
            let axis = int_attr(node, "axis", 0)?;
            let axis = if axis < 0 {
                axis + xs.len() as i64
            } else {
                axis
            } as usize;
            let ist = strides(&is);
            let q = is.len();
            // Output coordinates: data's axes before `axis`, the indices' axes, then
            // data's axes after `axis`.
            let index_terms = (0..q)
                .map(|j| format!("c{} * {}", axis + j, lit.n(ist[j])))
                .collect();
            let mut data_terms: Vec<String> = (0..axis)
                .map(|a| format!("c{a} * {}", lit.n(xst[a])))
                .collect();
            data_terms.push(format!("k * {}", lit.n(xst[axis])));
            data_terms.extend(
                (axis + 1..xs.len()).map(|a| format!("c{} * {}", a - 1 + q, lit.n(xst[a]))),
            );
            Movement::Gather {
                indices,
                index_dtype,
                index_terms,
                data_terms,
                axis_len: xs[axis],
            }
        }
        Op::Shape(ShapeOp::Concat) => {
            let axis = int_attr(node, "axis", 0)?;
            let axis = if axis < 0 { axis + r as i64 } else { axis } as usize;
            let mut begin = 0usize;
            let mut parts = Vec::new();
            for v in &node.inputs {
                let v = v.ok_or("a missing input")?;
                let s = shape(v)?;
                let st = strides(&s);
                let terms = (0..r)
                    .map(|a| {
                        if a == axis {
                            format!("(c{a} - {}) * {}", lit.n(begin), lit.n(st[a]))
                        } else {
                            format!("c{a} * {}", lit.n(st[a]))
                        }
                    })
                    .collect();
                begin += s[axis];
                parts.push((v, begin, terms));
            }
            Movement::Concat { axis, parts }
        }
        _ => return Err("this op (not data movement)".into()),
    })
}

/// A row node (LayerNorm, RMSNorm, softmax) over the last axis: its data, with its
/// dtype and shape, and the row length. An `Err` is what the backends have no kernel
/// for (another axis, the optional statistics outputs, symbolic shapes).
pub fn row(g: &Graph, node: &Node) -> Result<(ValueId, DType, Vec<usize>, usize), String> {
    let x = input(node, 0)?;
    let ty = g.ty(x).map_err(|e| e.to_string())?;
    let shape = gopt_ir::dim::concrete(&ty.shape).ok_or("symbolic shapes")?;
    let d = *shape.last().ok_or("a scalar input")?;
    let axis = int_attr(node, "axis", -1)?;
    if axis != -1 && axis != shape.len() as i64 - 1 {
        return Err("a normalization over an axis other than the last".into());
    }
    if node.outputs.len() != 1 {
        return Err("the optional mean/inv-std-dev outputs".into());
    }
    Ok((x, ty.dtype, shape, d))
}

/// Input `k` of a row node, when present: one value per column (`d` of them along the
/// last axis), with its dtype.
pub fn per_column(
    g: &Graph,
    node: &Node,
    k: usize,
    d: usize,
) -> Result<Option<(ValueId, DType)>, String> {
    let Some(v) = node.inputs.get(k).copied().flatten() else {
        return Ok(None);
    };
    let t = g.ty(v).map_err(|e| e.to_string())?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or("symbolic shapes")?;
    if s.iter().product::<usize>() != d || s.last() != Some(&d) {
        return Err("a scale or bias that is not one value per column".into());
    }
    Ok(Some((v, t.dtype)))
}
