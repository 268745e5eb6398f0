//! Ops that reorder or regroup elements: Transpose, Concat, Split and the block
//! rearrangements DepthToSpace / SpaceToDepth (a reshape, a transpose, a reshape).

use super::common::{const_ints, dtype_mismatch, fresh_dims, reshape_arr, to_sizes};
use super::ShapeOp;
use crate::dim::Dim;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::map_tensor;
use crate::ops::util::{in_ty, input, norm_axis, opt_in_ty, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::{Elem, Tensor};
use ndarray::{ArrayD, Axis, Slice};

/// Transpose's permutation: the `perm` attribute, reversed dims by default.
pub(crate) fn perm_of(node: &Node, rank: usize) -> Result<Vec<usize>> {
    let Some(p) = node.attrs.ints("perm")? else {
        return Ok((0..rank).rev().collect());
    };
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(rank);
    for &a in p {
        let i = usize::try_from(a).ok().filter(|&i| i < rank && !seen[i]);
        let Some(i) = i else {
            return Err(IrError::Shape(format!(
                "Transpose perm {p:?} is not a permutation of 0..{rank}"
            )));
        };
        seen[i] = true;
        out.push(i);
    }
    if out.len() != rank {
        return Err(IrError::Shape(format!(
            "Transpose perm {p:?} for a rank-{rank} input"
        )));
    }
    Ok(out)
}

fn permute<T: Elem>(a: &ArrayD<T>, perm: &[usize]) -> ArrayD<T> {
    a.view()
        .permuted_axes(perm)
        .as_standard_layout()
        .into_owned()
}

/// `Transpose(data)`.
pub fn transpose(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let perm = perm_of(node, x.rank())?;
    Ok(map_tensor!(x, a => permute(a, &perm)))
}

/// Transpose's output type.
pub fn infer_transpose(node: &Node, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let perm = perm_of(node, x.shape.len())?;
    let shape = perm.iter().map(|&p| x.shape[p].clone()).collect();
    Ok(TensorType::new(x.dtype, shape))
}

/// Concatenates `all`, whose dtype must be that of `_first` (the first input).
fn concat_arr<T: Elem>(_first: &ArrayD<T>, all: &[&Tensor], axis: usize) -> Result<ArrayD<T>> {
    let views = all
        .iter()
        .map(|t| {
            t.as_array::<T>()
                .map(|a| a.view())
                .map_err(|_| dtype_mismatch("Concat input", T::DTYPE, t))
        })
        .collect::<Result<Vec<_>>>()?;
    ndarray::concatenate(Axis(axis), &views).map_err(|e| {
        let shapes: Vec<_> = all.iter().map(|t| t.shape().to_vec()).collect();
        IrError::Shape(format!("Concat on axis {axis} of shapes {shapes:?}: {e}"))
    })
}

/// `Concat(inputs...)`.
pub fn concat(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let all: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
    let first = *all
        .first()
        .ok_or_else(|| IrError::Invalid("Concat needs at least one input".into()))?;
    let axis = norm_axis(node.attrs.req_int("axis")?, first.rank())?;
    Ok(map_tensor!(first, a => concat_arr(a, &all, axis)?))
}

/// Concat's output type: the concatenated dim is the sum of the inputs' dims.
pub fn infer_concat(node: &Node, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let tys: Vec<&TensorType> = inputs.iter().flatten().map(|i| i.ty).collect();
    let first = *tys
        .first()
        .ok_or_else(|| IrError::Invalid("Concat needs at least one input".into()))?;
    let rank = first.shape.len();
    let axis = norm_axis(node.attrs.req_int("axis")?, rank)?;
    let mut shape = first.shape.clone();
    for t in &tys[1..] {
        if t.dtype != first.dtype || t.shape.len() != rank {
            return Err(IrError::Shape(format!(
                "Concat of {first} and {t} (dtypes and ranks must agree)"
            )));
        }
        for (i, d) in t.shape.iter().enumerate() {
            if i == axis {
                shape[i] = shape[i].add(d);
            } else if shape[i].known().is_none() && d.known().is_some() {
                shape[i] = d.clone();
            }
        }
    }
    Ok(TensorType::new(first.dtype, shape))
}

/// Split sizes when no `split` input is given: `n` chunks of `ceil(dim/n)`, the last
/// smaller.
fn equal_split(dim: usize, n: usize) -> Result<Vec<usize>> {
    if n == 0 {
        return Err(IrError::Shape("Split into 0 outputs".into()));
    }
    let chunk = dim.div_ceil(n);
    let last = dim as i64 - (chunk * (n - 1)) as i64;
    if last < 0 {
        return Err(IrError::Shape(format!(
            "cannot split a dim of {dim} into {n} chunks of {chunk}"
        )));
    }
    let mut v = vec![chunk; n];
    v[n - 1] = last as usize;
    Ok(v)
}

fn split_count(node: &Node) -> Result<usize> {
    Ok(match node.attrs.int("num_outputs")? {
        Some(n) => usize::try_from(n).map_err(|_| IrError::Attr {
            name: "num_outputs".into(),
            msg: format!("must be positive, found {n}"),
        })?,
        None => node.outputs.len(),
    })
}

/// `Split(input, split?)`: one output per chunk.
pub fn split(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let axis = norm_axis(node.attrs.int_or("axis", 0)?, x.rank())?;
    let dim = x.shape()[axis];
    let sizes = match opt_input(inputs, 1) {
        Some(s) => to_sizes(&s.to_i64_vec(), "Split split")?,
        None => equal_split(dim, split_count(node)?)?,
    };
    if sizes.iter().sum::<usize>() != dim {
        return Err(IrError::Shape(format!(
            "Split sizes {sizes:?} do not add up to dim {dim} of {:?}",
            x.shape()
        )));
    }
    let mut start = 0;
    Ok(sizes
        .iter()
        .map(|&n| {
            let s = Slice::from(start..start + n);
            start += n;
            map_tensor!(x, a => a.slice_axis(Axis(axis), s).to_owned())
        })
        .collect())
}

/// Split's output types.
pub fn infer_split(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let axis = norm_axis(node.attrs.int_or("axis", 0)?, x.shape.len())?;
    let n = node.outputs.len();
    let dims: Vec<Dim> = match opt_in_ty(inputs, 1) {
        Some(s) => match const_ints(Some(s)) {
            Some(v) => to_sizes(&v, "Split split")?
                .into_iter()
                .map(Dim::from)
                .collect(),
            None => fresh_dims(cx, n, "split"),
        },
        None => {
            let k = split_count(node)?;
            match x.shape[axis].known() {
                Some(d) => equal_split(d as usize, k)?
                    .into_iter()
                    .map(Dim::from)
                    .collect(),
                // An evenly split symbolic dim.
                None => vec![x.shape[axis].div(&Dim::from(k)); k],
            }
        }
    };
    Ok(dims
        .into_iter()
        .map(|d| {
            let mut s = x.shape.clone();
            s[axis] = d;
            TensorType::new(x.dtype, s)
        })
        .collect())
}

/// Blocksize and mode (`true` for DCR) of DepthToSpace / SpaceToDepth.
fn block_attrs(node: &Node) -> Result<(usize, bool)> {
    let bs = node.attrs.req_int("blocksize")?;
    let bs = usize::try_from(bs)
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| IrError::Attr {
            name: "blocksize".into(),
            msg: format!("must be positive, found {bs}"),
        })?;
    let dcr = match node.attrs.str_or("mode", "DCR")? {
        "DCR" => true,
        "CRD" => false,
        m => return Err(IrError::Unsupported(format!("block mode `{m}`"))),
    };
    Ok((bs, dcr))
}

fn nchw(x: &Tensor, op: &str) -> Result<[usize; 4]> {
    match *x.shape() {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(IrError::Shape(format!(
            "{op} needs a 4-D input, found {:?}",
            x.shape()
        ))),
    }
}

fn regroup<T: Elem>(
    a: &ArrayD<T>,
    tmp: &[usize],
    perm: &[usize],
    out: &[usize],
) -> Result<ArrayD<T>> {
    let t = reshape_arr(a.as_standard_layout().into_owned(), tmp)?;
    reshape_arr(permute(&t, perm), out)
}

/// `DepthToSpace(input)` in DCR or CRD order.
pub fn depth_to_space(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let (bs, dcr) = block_attrs(node)?;
    let [n, c, h, w] = nchw(x, "DepthToSpace")?;
    if c % (bs * bs) != 0 {
        return Err(IrError::Shape(format!(
            "DepthToSpace: {c} channels not divisible by blocksize² = {}",
            bs * bs
        )));
    }
    let c2 = c / (bs * bs);
    let (tmp, perm) = if dcr {
        ([n, bs, bs, c2, h, w], [0, 3, 4, 1, 5, 2])
    } else {
        ([n, c2, bs, bs, h, w], [0, 1, 4, 2, 5, 3])
    };
    let out = [n, c2, h * bs, w * bs];
    Ok(map_tensor!(x, a => regroup(a, &tmp, &perm, &out)?))
}

/// `SpaceToDepth(input)` in DCR or CRD order.
pub fn space_to_depth(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let (bs, dcr) = block_attrs(node)?;
    let [n, c, h, w] = nchw(x, "SpaceToDepth")?;
    if h % bs != 0 || w % bs != 0 {
        return Err(IrError::Shape(format!(
            "SpaceToDepth: spatial dims {h}x{w} not divisible by blocksize {bs}"
        )));
    }
    let tmp = [n, c, h / bs, bs, w / bs, bs];
    let perm = if dcr {
        [0, 3, 5, 1, 2, 4]
    } else {
        [0, 1, 3, 5, 2, 4]
    };
    let out = [n, c * bs * bs, h / bs, w / bs];
    Ok(map_tensor!(x, a => regroup(a, &tmp, &perm, &out)?))
}

/// DepthToSpace / SpaceToDepth output type.
pub fn infer_depth_space(
    op: ShapeOp,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let (bs, _) = block_attrs(node)?;
    let [n, c, h, w] = x.shape.as_slice() else {
        return Err(IrError::Shape(format!(
            "{} needs a 4-D input, found {x}",
            op.name()
        )));
    };
    let (b, b2) = (Dim::from(bs), Dim::from(bs).mul(&Dim::from(bs)));
    let shape = if op == ShapeOp::DepthToSpace {
        vec![n.clone(), c.div(&b2), h.mul(&b), w.mul(&b)]
    } else {
        vec![n.clone(), c.mul(&b2), h.div(&b), w.div(&b)]
    };
    Ok(TensorType::new(x.dtype, shape))
}
