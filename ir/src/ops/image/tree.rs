//! `TreeEnsemble` (ai.onnx.ml opset 5): decision trees given as parallel `nodes_*` and
//! `leaf_*` attribute arrays; each row walks every tree to a leaf and the leaf weights
//! are aggregated per target. Mirrors `aionnxml/op_tree_ensemble.py`; the post
//! transform follows the spec (the Python reference skips it).

use super::{from_f64_array, require_float, to_f64_array};
use crate::dim::Dim;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::Tensor;
use ndarray::{ArrayD, IxDyn};

/// A branch comparison.
#[derive(Clone, Copy, PartialEq)]
enum Cmp {
    Leq,
    Lt,
    Gte,
    Gt,
    Eq,
    Neq,
    Member,
}

/// Where a branch leads.
#[derive(Clone, Copy)]
enum Next {
    Node(usize),
    Leaf(usize),
}

struct Branch {
    cmp: Cmp,
    feature: usize,
    split: f64,
    members: Vec<f64>,
    nan_true: bool,
    on_true: Next,
    on_false: Next,
}

/// The parsed ensemble.
struct Ensemble {
    nodes: Vec<Branch>,
    roots: Vec<Next>,
    leaf_target: Vec<usize>,
    leaf_weight: Vec<f64>,
    n_targets: usize,
    aggregate: i64,
    post: i64,
}

fn attr_err(name: &str, msg: String) -> IrError {
    IrError::Attr {
        name: name.into(),
        msg,
    }
}

fn ints<'a>(node: &'a Node, name: &str) -> Result<&'a [i64]> {
    node.attrs
        .ints(name)?
        .ok_or_else(|| attr_err(name, "required but missing".into()))
}

fn tensor_vals(node: &Node, name: &str) -> Result<Vec<f64>> {
    match node.attrs.tensor(name)? {
        Some(t) => Ok(t.to_f64_vec()),
        None => Err(attr_err(name, "required but missing".into())),
    }
}

fn index(v: i64, len: usize, what: &str) -> Result<usize> {
    usize::try_from(v)
        .ok()
        .filter(|&i| i < len)
        .ok_or_else(|| attr_err(what, format!("index {v} out of range for {len} entries")))
}

impl Ensemble {
    fn new(node: &Node) -> Result<Ensemble> {
        let features = ints(node, "nodes_featureids")?;
        let n = features.len();
        let modes = tensor_vals(node, "nodes_modes")?;
        let splits = tensor_vals(node, "nodes_splits")?;
        let (t_ids, t_leaf) = (
            ints(node, "nodes_truenodeids")?,
            ints(node, "nodes_trueleafs")?,
        );
        let (f_ids, f_leaf) = (
            ints(node, "nodes_falsenodeids")?,
            ints(node, "nodes_falseleafs")?,
        );
        let missing = node
            .attrs
            .ints("nodes_missing_value_tracks_true")?
            .unwrap_or(&[]);
        let leaf_target = ints(node, "leaf_targetids")?;
        let leaf_weight = tensor_vals(node, "leaf_weights")?;
        let n_targets = node.attrs.req_int("n_targets")?.max(0) as usize;
        if [
            modes.len(),
            splits.len(),
            t_ids.len(),
            t_leaf.len(),
            f_ids.len(),
            f_leaf.len(),
        ]
        .iter()
        .any(|&l| l != n)
            || leaf_target.len() != leaf_weight.len()
        {
            return Err(attr_err("nodes_*", "arrays of different lengths".into()));
        }
        let n_leaves = leaf_weight.len();
        let next = |id: i64, leaf: i64, what: &str| -> Result<Next> {
            Ok(if leaf != 0 {
                Next::Leaf(index(id, n_leaves, what)?)
            } else {
                Next::Node(index(id, n, what)?)
            })
        };
        let mut members = node
            .attrs
            .tensor("membership_values")?
            .map(|t| t.to_f64_vec())
            .unwrap_or_default()
            .into_iter();
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            let cmp = match modes[i] as i64 {
                0 => Cmp::Leq,
                1 => Cmp::Lt,
                2 => Cmp::Gte,
                3 => Cmp::Gt,
                4 => Cmp::Eq,
                5 => Cmp::Neq,
                6 => Cmp::Member,
                m => return unsupported(format!("TreeEnsemble node mode {m}")),
            };
            let set: Vec<f64> = if cmp == Cmp::Member {
                members.by_ref().take_while(|v| !v.is_nan()).collect()
            } else {
                Vec::new()
            };
            nodes.push(Branch {
                cmp,
                feature: features[i].max(0) as usize,
                split: splits[i],
                members: set,
                nan_true: missing.get(i).is_some_and(|&m| m != 0),
                on_true: next(t_ids[i], t_leaf[i], "nodes_truenodeids")?,
                on_false: next(f_ids[i], f_leaf[i], "nodes_falsenodeids")?,
            });
        }
        let roots = ints(node, "tree_roots")?
            .iter()
            .map(|&r| {
                let i = index(r, n, "tree_roots")?;
                // A one-leaf tree: both branches lead to the same leaf.
                Ok(
                    if t_leaf[i] != 0 && f_leaf[i] != 0 && t_ids[i] == f_ids[i] {
                        Next::Leaf(index(t_ids[i], n_leaves, "tree_roots")?)
                    } else {
                        Next::Node(i)
                    },
                )
            })
            .collect::<Result<_>>()?;
        Ok(Ensemble {
            nodes,
            roots,
            leaf_target: leaf_target
                .iter()
                .map(|&t| index(t, n_targets, "leaf_targetids"))
                .collect::<Result<_>>()?,
            leaf_weight,
            n_targets,
            aggregate: node.attrs.int_or("aggregate_function", 1)?,
            post: node.attrs.int_or("post_transform", 0)?,
        })
    }

    /// The leaf a row reaches from `start`.
    fn walk(&self, row: &[f64], start: Next) -> Result<usize> {
        let mut at = start;
        // Each step visits a node; more steps than nodes means a cycle.
        for _ in 0..=self.nodes.len() {
            let b = match at {
                Next::Leaf(l) => return Ok(l),
                Next::Node(i) => &self.nodes[i],
            };
            let x = *row.get(b.feature).ok_or_else(|| {
                IrError::Shape(format!("TreeEnsemble feature {} out of range", b.feature))
            })?;
            let t = match b.cmp {
                Cmp::Leq => x <= b.split,
                Cmp::Lt => x < b.split,
                Cmp::Gte => x >= b.split,
                Cmp::Gt => x > b.split,
                Cmp::Eq => x == b.split,
                Cmp::Neq => x != b.split,
                Cmp::Member => b.members.contains(&x),
            } || (b.nan_true && x.is_nan());
            at = if t { b.on_true } else { b.on_false };
        }
        Err(IrError::Invalid(
            "TreeEnsemble trees contain a cycle".into(),
        ))
    }
}

/// Runs TreeEnsemble.
pub(super) fn tree_ensemble(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let xd = to_f64_array(x, "TreeEnsemble X")?;
    let e = Ensemble::new(node)?;
    let (rows, cols) = match xd.shape() {
        [r, c] => (*r, *c),
        [c] => (1, *c),
        s => {
            return Err(IrError::Shape(format!(
                "TreeEnsemble X {s:?} must be [N, F]"
            )))
        }
    };
    let xv: Vec<f64> = xd.iter().copied().collect();
    let nt = e.n_targets;
    let init = match e.aggregate {
        0 | 1 => 0.0,
        2 => f64::INFINITY,
        3 => f64::NEG_INFINITY,
        a => return unsupported(format!("TreeEnsemble aggregate_function {a}")),
    };
    let mut out = vec![init; rows * nt];
    let trees = e.roots.len() as f64;
    for r in 0..rows {
        let row = &xv[r * cols..(r + 1) * cols];
        let acc = &mut out[r * nt..(r + 1) * nt];
        for &root in &e.roots {
            let leaf = e.walk(row, root)?;
            let (t, w) = (e.leaf_target[leaf], e.leaf_weight[leaf]);
            match e.aggregate {
                0 => acc[t] += w / trees,
                2 => acc[t] = acc[t].min(w),
                3 => acc[t] = acc[t].max(w),
                _ => acc[t] += w,
            }
        }
        post_transform(e.post, acc)?;
    }
    // MIN/MAX targets no leaf reached keep the dtype's extreme value.
    let (lo, hi) = match x.dtype() {
        crate::dtype::DType::F64 => (f64::MIN, f64::MAX),
        crate::dtype::DType::F16 => (-65504.0, 65504.0),
        _ => (f32::MIN as f64, f32::MAX as f64),
    };
    out.iter_mut().for_each(|v| {
        if v.is_infinite() {
            *v = v.clamp(lo, hi)
        }
    });
    let shape = [rows, nt];
    let out = ArrayD::from_shape_vec(IxDyn(&shape), out).expect("output size");
    Ok(vec![from_f64_array(out, x.dtype())?])
}

fn post_transform(post: i64, v: &mut [f64]) -> Result<()> {
    match post {
        0 => {}
        1 | 3 => {
            let zero_aware = post == 3;
            let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut sum = 0.0;
            for x in v.iter_mut() {
                *x = if zero_aware && *x == 0.0 {
                    0.0
                } else {
                    (*x - m).exp()
                };
                sum += *x;
            }
            if sum > 0.0 {
                v.iter_mut().for_each(|x| *x /= sum);
            }
        }
        2 => v.iter_mut().for_each(|x| *x = 1.0 / (1.0 + (-*x).exp())),
        p => return unsupported(format!("TreeEnsemble post_transform {p}")),
    }
    Ok(())
}

/// TreeEnsemble's output type: `[N, n_targets]` in X's dtype.
pub(super) fn infer_tree_ensemble(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    require_float(x.dtype, "TreeEnsemble X")?;
    let n = match x.shape.len() {
        2 => x.shape[0].clone(),
        1 => Dim::Known(1),
        _ => cx.fresh_dim("rows"),
    };
    let t = node.attrs.req_int("n_targets")?.max(0) as u64;
    Ok(vec![TensorType::new(x.dtype, vec![n, Dim::Known(t)])])
}
