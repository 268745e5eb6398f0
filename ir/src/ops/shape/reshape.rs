//! Ops that change a tensor's shape without reordering its elements (Reshape, Flatten,
//! Squeeze, Unsqueeze) and those that repeat them (Expand, Tile). Their inference is
//! where the symbolic arithmetic of exporters' shape sub-graphs lands, so the target
//! shape is computed on `Dim`s and the concrete path reuses it.

use super::common::{check_size, const_ints, div_dims, fresh_dims, ints_of, norm_axes, to_sizes};
use super::symbolic::{sym_dims, sym_input};
use crate::budget::{elements, rank_from};
use crate::dim::{concrete, shape_of, Dim};
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::map_tensor;
use crate::ops::util::{broadcast_dims, broadcast_shape, in_ty, input, opt_in_ty, opt_input};
use crate::ops::{InferCx, InferInput, SymInt};
use crate::tensor::{Elem, Tensor};
use ndarray::{ArrayD, Axis, IxDyn};

/// Reshape's target shape from its `shape` input: 0 copies the input dim (unless
/// `allowzero`), one -1 takes what is left.
pub fn reshape_dims(input: &[Dim], spec: &[SymInt], allowzero: bool) -> Result<Vec<Dim>> {
    let mut out = Vec::with_capacity(spec.len());
    let mut infer_at = None;
    for (i, s) in spec.iter().enumerate() {
        let v = match s {
            SymInt::Int(v) => *v,
            SymInt::Dim(d) => {
                out.push(d.clone());
                continue;
            }
        };
        out.push(match v {
            -1 if infer_at.is_some() => {
                return Err(IrError::Shape(format!(
                    "Reshape target {spec:?} has more than one -1"
                )))
            }
            -1 => {
                infer_at = Some(i);
                Dim::Known(1)
            }
            0 if !allowzero => input.get(i).cloned().ok_or_else(|| {
                IrError::Shape(format!(
                    "Reshape target {spec:?} copies dim {i} of a rank-{} input",
                    input.len()
                ))
            })?,
            v if v < 0 => {
                return Err(IrError::Shape(format!(
                    "Reshape target {spec:?} has invalid dim {v}"
                )))
            }
            v => Dim::Known(v as u64),
        });
    }
    if let Some(at) = infer_at {
        let others: Vec<Dim> = (0..out.len())
            .filter(|&j| j != at)
            .map(|j| out[j].clone())
            .collect();
        if others.contains(&Dim::Known(0)) {
            return Err(IrError::Shape(format!(
                "Reshape target {spec:?} has a -1 next to a 0 dim (allowzero)"
            )));
        }
        let (num, den) = (concrete(input), concrete(&others));
        if let (Some(num), Some(den)) = (num, den) {
            let n = elements(&num).ok_or_else(|| too_many(&num))?;
            let d = elements(&den).ok_or_else(|| too_many(&den))?;
            if n % d != 0 {
                return Err(IrError::Shape(format!(
                    "cannot reshape {num:?} ({n} elements) to {spec:?}"
                )));
            }
        }
        out[at] = div_dims(input, &others);
    } else if let (Some(num), Some(to)) = (concrete(input), concrete(&out)) {
        // Without a -1 the element counts must agree exactly.
        let n = elements(&num).ok_or_else(|| too_many(&num))?;
        let m = elements(&to).ok_or_else(|| too_many(&to))?;
        if n != m {
            return Err(IrError::Shape(format!(
                "cannot reshape {num:?} ({n} elements) to {to:?} ({m} elements)"
            )));
        }
    }
    Ok(out)
}

fn too_many(shape: &[usize]) -> IrError {
    IrError::Shape(format!(
        "shape {shape:?} has more elements than fit 64 bits"
    ))
}

/// `Reshape(data, shape)`.
pub fn reshape(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let spec: Vec<SymInt> = ints_of(input(inputs, 1)?, "Reshape shape")?
        .into_iter()
        .map(SymInt::Int)
        .collect();
    let allowzero = node.attrs.int_or("allowzero", 0)? != 0;
    let dims = reshape_dims(&shape_of(x.shape()), &spec, allowzero)?;
    let shape = concrete(&dims).expect("dims of a concrete input are known");
    x.reshape(&shape)
}

/// Reshape's output type.
pub fn infer_reshape(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let s = in_ty(inputs, 1)?;
    let allowzero = node.attrs.int_or("allowzero", 0)? != 0;
    let shape = match sym_input(cx, node, inputs, 1) {
        Some(spec) => reshape_dims(&x.shape, &spec, allowzero)?,
        None => match s.ty.shape.as_slice() {
            [Dim::Known(n)] => fresh_dims(cx, rank_from(*n, "Reshape shape")?, "reshape"),
            _ => {
                return Err(IrError::Unsupported(format!(
                    "Reshape to a shape of unknown length ({})",
                    s.ty
                )))
            }
        },
    };
    Ok(TensorType::new(x.dtype, shape))
}

fn flatten_axis(node: &Node, rank: usize) -> Result<usize> {
    let a = node.attrs.int_or("axis", 1)?;
    let r = rank as i64;
    if a < -r || a > r {
        return Err(IrError::Shape(format!(
            "Flatten axis {a} out of range for rank {rank}"
        )));
    }
    Ok(if a < 0 { a + r } else { a } as usize)
}

/// `Flatten(input)`: a 2-D view `[prod(dims[..axis]), prod(dims[axis..])]`.
pub fn flatten(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let a = flatten_axis(node, x.rank())?;
    let s = x.shape();
    x.reshape(&[s[..a].iter().product(), s[a..].iter().product()])
}

/// Flatten's output type.
pub fn infer_flatten(node: &Node, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let a = flatten_axis(node, x.shape.len())?;
    let shape = vec![Dim::product(&x.shape[..a]), Dim::product(&x.shape[a..])];
    Ok(TensorType::new(x.dtype, shape))
}

/// Squeeze's output dims; without axes every dim known to be 1 goes.
fn squeeze_dims(shape: &[Dim], axes: Option<&[i64]>) -> Result<Vec<Dim>> {
    let Some(axes) = axes else {
        return Ok(shape
            .iter()
            .filter(|d| **d != Dim::Known(1))
            .cloned()
            .collect());
    };
    let axes = norm_axes(axes, shape.len())?;
    for &a in &axes {
        if let Dim::Known(n) = shape[a] {
            if n != 1 {
                return Err(IrError::Shape(format!(
                    "Squeeze of axis {a}, which has size {n}"
                )));
            }
        }
    }
    Ok(shape
        .iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(i))
        .map(|(_, d)| d.clone())
        .collect())
}

/// `Squeeze(data, axes?)`.
pub fn squeeze(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let axes = opt_input(inputs, 1)
        .map(|t| ints_of(t, "Squeeze axes"))
        .transpose()?;
    let dims = squeeze_dims(&shape_of(x.shape()), axes.as_deref())?;
    x.reshape(&concrete(&dims).expect("known dims"))
}

/// Squeeze's output type.
pub fn infer_squeeze(cx: &mut InferCx, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let shape = match opt_in_ty(inputs, 1) {
        None => squeeze_dims(&x.shape, None)?,
        Some(a) => match const_ints(Some(a)) {
            Some(axes) => squeeze_dims(&x.shape, Some(&axes))?,
            None => {
                let Some(k) = a.ty.shape.first().and_then(Dim::known) else {
                    return Err(IrError::Unsupported(
                        "Squeeze with axes of unknown length".into(),
                    ));
                };
                let keep = x.shape.len().saturating_sub(k as usize);
                // Dims other than 1 cannot be squeezed, so when exactly `keep` of them
                // remain they are the output.
                let not_one: Vec<Dim> = x
                    .shape
                    .iter()
                    .filter(|d| matches!(d, Dim::Known(n) if *n != 1))
                    .cloned()
                    .collect();
                if not_one.len() == keep {
                    not_one
                } else {
                    fresh_dims(cx, keep, "squeeze")
                }
            }
        },
    };
    Ok(TensorType::new(x.dtype, shape))
}

fn unsqueeze_dims(shape: &[Dim], axes: &[i64]) -> Result<Vec<Dim>> {
    let rank = shape.len() + axes.len();
    let axes = norm_axes(axes, rank)?;
    let mut rest = shape.iter();
    Ok((0..rank)
        .map(|i| {
            if axes.contains(&i) {
                Dim::Known(1)
            } else {
                rest.next().cloned().expect("rank counts every input dim")
            }
        })
        .collect())
}

/// `Unsqueeze(data, axes)`.
pub fn unsqueeze(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let axes = ints_of(input(inputs, 1)?, "Unsqueeze axes")?;
    let dims = unsqueeze_dims(&shape_of(x.shape()), &axes)?;
    x.reshape(&concrete(&dims).expect("known dims"))
}

/// Unsqueeze's output type.
pub fn infer_unsqueeze(cx: &mut InferCx, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let a = in_ty(inputs, 1)?;
    let shape = match const_ints(Some(a)) {
        Some(axes) => unsqueeze_dims(&x.shape, &axes)?,
        None => match a.ty.shape.as_slice() {
            [Dim::Known(k)] => {
                let k = rank_from(*k, "Unsqueeze axes")?;
                fresh_dims(cx, x.shape.len() + k, "unsqueeze")
            }
            [] => fresh_dims(cx, x.shape.len() + 1, "unsqueeze"),
            _ => {
                return Err(IrError::Unsupported(
                    "Unsqueeze with axes of unknown length".into(),
                ))
            }
        },
    };
    Ok(TensorType::new(x.dtype, shape))
}

/// `Expand(input, shape)`: bidirectional (numpy) broadcast.
pub fn expand(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let target = to_sizes(&ints_of(input(inputs, 1)?, "Expand shape")?, "Expand shape")?;
    let out = broadcast_shape(x.shape(), &target)?;
    check_size(&out, "Expand")?;
    Ok(map_tensor!(x, a => a
        .broadcast(IxDyn(&out))
        .expect("broadcast shape computed")
        .to_owned()))
}

/// Expand's output type.
pub fn infer_expand(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let s = in_ty(inputs, 1)?;
    let shape = match sym_input(cx, node, inputs, 1) {
        Some(t) => broadcast_dims(&x.shape, &sym_dims(&t, "Expand shape")?)?,
        None => {
            let Some(n) = s.ty.shape.first().and_then(Dim::known) else {
                return Err(IrError::Unsupported(
                    "Expand to a shape of unknown length".into(),
                ));
            };
            let n = rank_from(n, "Expand shape")?.max(x.shape.len());
            let pad = n - x.shape.len();
            // A dim other than 1 survives broadcasting; the others take the target's.
            (0..n)
                .map(|i| match i.checked_sub(pad).map(|j| &x.shape[j]) {
                    Some(Dim::Known(1)) | None => cx.fresh_dim("expand"),
                    Some(d) => d.clone(),
                })
                .collect()
        }
    };
    Ok(TensorType::new(x.dtype, shape))
}

fn tile_arr<T: Elem>(a: &ArrayD<T>, reps: &[usize]) -> ArrayD<T> {
    let mut out = a.clone();
    for (ax, &r) in reps.iter().enumerate() {
        if r != 1 {
            let d = out.shape()[ax];
            let idx: Vec<usize> = (0..d * r).map(|i| i % d).collect();
            out = out.select(Axis(ax), &idx);
        }
    }
    out
}

/// `Tile(input, repeats)`.
pub fn tile(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let reps = to_sizes(&ints_of(input(inputs, 1)?, "Tile repeats")?, "Tile repeats")?;
    if reps.len() != x.rank() {
        return Err(IrError::Shape(format!(
            "Tile repeats {reps:?} for a rank-{} input",
            x.rank()
        )));
    }
    let out: Vec<usize> = x
        .shape()
        .iter()
        .zip(&reps)
        .map(|(d, r)| d.saturating_mul(*r))
        .collect();
    check_size(&out, "Tile")?;
    Ok(map_tensor!(x, a => tile_arr(a, &reps)))
}

/// Tile's output type.
pub fn infer_tile(cx: &mut InferCx, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?.ty;
    let shape = match const_ints(opt_in_ty(inputs, 1)) {
        Some(r) if r.len() == x.shape.len() => x
            .shape
            .iter()
            .zip(to_sizes(&r, "Tile repeats")?)
            .map(|(d, r)| d.mul(&Dim::from(r)))
            .collect(),
        Some(r) => {
            return Err(IrError::Shape(format!(
                "Tile repeats {r:?} for a rank-{} input",
                x.shape.len()
            )))
        }
        None => fresh_dims(cx, x.shape.len(), "tile"),
    };
    Ok(TensorType::new(x.dtype, shape))
}
