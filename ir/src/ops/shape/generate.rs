//! Ops that build tensors from a shape or a few scalars (ConstantOfShape, Range,
//! EyeLike, OneHot) and the triangle mask Trilu.

use super::common::{check_size, fresh_dims, ints_of, opt_scalar, scalar_i64, to_sizes};
use super::symbolic::{sym_dims, sym_input};
use crate::attr::Attr;
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::map_tensor;
use crate::ops::util::{in_ty, input, opt_in_ty};
use crate::ops::{InferCx, InferInput, SymInt};
use crate::tensor::{array_from, Elem, Tensor};
use ndarray::{ArrayD, IxDyn};

/// ConstantOfShape's fill value: the `value` attribute (one element), f32 0 by default.
fn fill_value(node: &Node) -> Result<Tensor> {
    match node.attrs.tensor("value")? {
        Some(t) if t.len() == 1 => Ok(t.clone()),
        Some(t) => Err(IrError::Attr {
            name: "value".into(),
            msg: format!("must hold one element, found shape {:?}", t.shape()),
        }),
        None => Ok(Tensor::scalar_f64(DType::F32, 0.0)),
    }
}

/// `ConstantOfShape(input)`.
pub fn constant_of_shape(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let shape = to_sizes(
        &ints_of(input(inputs, 0)?, "ConstantOfShape input")?,
        "ConstantOfShape input",
    )?;
    check_size(&shape, "ConstantOfShape")?;
    let v = fill_value(node)?;
    Ok(map_tensor!(&v, a => ArrayD::from_elem(
        IxDyn(&shape),
        a.iter().next().copied().unwrap_or_default()
    )))
}

/// ConstantOfShape's output type.
pub fn infer_constant_of_shape(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<TensorType> {
    let dtype = fill_value(node)?.dtype();
    let s = in_ty(inputs, 0)?;
    let shape = match sym_input(cx, node, inputs, 0) {
        Some(v) => sym_dims(&v, "ConstantOfShape input")?,
        None => match s.ty.shape.first().and_then(Dim::known) {
            Some(n) => fresh_dims(
                cx,
                crate::budget::rank_from(n, "ConstantOfShape input")?,
                "const",
            ),
            None => {
                return Err(IrError::Unsupported(
                    "ConstantOfShape with a shape of unknown length".into(),
                ))
            }
        },
    };
    Ok(TensorType::new(dtype, shape))
}

/// Range's output type when its inputs are not all constants: `Range(0, n, 1)` has
/// `n` elements, whatever `n` is.
pub fn infer_range(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<TensorType> {
    let dtype = in_ty(inputs, 0)?.ty.dtype;
    let arg = |i| {
        sym_input(cx, node, inputs, i)
            .filter(|v| v.len() == 1)
            .map(|mut v| v.remove(0))
    };
    let len = match (arg(0), arg(1), arg(2)) {
        (Some(SymInt::Int(0)), Some(SymInt::Dim(n)), Some(SymInt::Int(1))) => n,
        _ => cx.fresh_dim("range"),
    };
    Ok(TensorType::new(dtype, vec![len]))
}

/// `Range(start, limit, delta)`: `max(ceil((limit-start)/delta), 0)` elements. Integers
/// are computed exactly; f16/bf16 in f32 (`stash_type` float) or f64; f32/f64 in f64.
pub fn range(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (s, l, d) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
    let dtype = s.dtype();
    if l.dtype() != dtype || d.dtype() != dtype {
        return Err(IrError::DType {
            context: "Range limit/delta".into(),
            expected: dtype.name().into(),
            found: if l.dtype() != dtype {
                l.dtype()
            } else {
                d.dtype()
            },
        });
    }
    if dtype.is_int() {
        let (s, l, d) = (
            scalar_i64(s, "Range start")? as i128,
            scalar_i64(l, "Range limit")? as i128,
            scalar_i64(d, "Range delta")? as i128,
        );
        if d == 0 {
            return Err(IrError::Shape("Range delta 0".into()));
        }
        let (q, r) = ((l - s) / d, (l - s) % d);
        // Ceiling division: truncation rounds a positive quotient down.
        let n = if r != 0 && (r > 0) == (d > 0) {
            q + 1
        } else {
            q
        }
        .max(0);
        let n = usize::try_from(n).map_err(|_| IrError::Shape("Range too long".into()))?;
        check_size(&[n], "Range")?;
        let v: Vec<i64> = (0..n as i128).map(|i| (s + i * d) as i64).collect();
        return Ok(Tensor::I64(array_from(&[n], v)?).cast(dtype));
    }
    if dtype == DType::Bool {
        return Err(IrError::Unsupported("Range of bool".into()));
    }
    let one = |t: &Tensor, what: &str| -> Result<f64> {
        match t.to_f64_vec().as_slice() {
            [v] => Ok(*v),
            _ => Err(IrError::Shape(format!("Range {what} must be a scalar"))),
        }
    };
    let (s, l, d) = (one(s, "start")?, one(l, "limit")?, one(d, "delta")?);
    // `stash_type` is an ONNX type code: 1 (float, the default) or 11 (double).
    let stash_f64 = matches!(
        node.attrs.get("stash_type"),
        Some(Attr::Int(11)) | Some(Attr::DType(DType::F64))
    );
    let stash_f32 = matches!(dtype, DType::F16 | DType::BF16) && !stash_f64;
    let n = ((l - s) / d).ceil();
    if !n.is_finite() {
        return Err(IrError::Shape(format!(
            "Range({s}, {l}, {d}) has no length"
        )));
    }
    let n = n.max(0.0) as usize;
    check_size(&[n], "Range")?;
    let v: Vec<f64> = (0..n)
        .map(|i| {
            if stash_f32 {
                (s as f32 + i as f32 * d as f32) as f64
            } else {
                s + i as f64 * d
            }
        })
        .collect();
    Tensor::from_f64s(dtype, &[n], &v)
}

/// `EyeLike(input)`: ones on the `k`-th diagonal of a 2-D tensor.
pub fn eye_like(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let dtype = node.attrs.dtype("dtype")?.unwrap_or(x.dtype());
    let k = node.attrs.int_or("k", 0)?;
    let [r, c] = *x.shape() else {
        return Err(IrError::Shape(format!(
            "EyeLike needs a 2-D input, found {:?}",
            x.shape()
        )));
    };
    let a = ArrayD::from_shape_fn(IxDyn(&[r, c]), |ix| {
        f64::from(u8::from(ix[1] as i64 - ix[0] as i64 == k))
    });
    Ok(Tensor::F64(a).cast(dtype))
}

/// OneHot's output dims: `indices` with `depth` inserted at `axis`.
fn one_hot_axis(node: &Node, rank: usize) -> Result<usize> {
    let a = node.attrs.int_or("axis", -1)?;
    crate::ops::util::norm_axis(a, rank + 1)
}

fn one_hot_arr<T: Elem>(
    values: &ArrayD<T>,
    idx: &[f64],
    shape: &[usize],
    depth: usize,
    axis: usize,
) -> Result<ArrayD<T>> {
    let (off, on) = match values.iter().copied().collect::<Vec<_>>().as_slice() {
        [off, on] => (*off, *on),
        _ => {
            return Err(IrError::Shape(format!(
                "OneHot values must hold [off, on], found shape {:?}",
                values.shape()
            )))
        }
    };
    let inner: usize = shape[axis..].iter().product();
    let mut out_shape = shape.to_vec();
    out_shape.insert(axis, depth);
    check_size(&out_shape, "OneHot")?;
    let out = ArrayD::from_shape_fn(IxDyn(&out_shape), |ix| {
        let outer: usize = (0..axis).fold(0, |acc, a| acc * shape[a] + ix[a]);
        let inn: usize = (axis..shape.len()).fold(0, |acc, a| acc * shape[a] + ix[a + 1]);
        let v = idx[outer * inner + inn];
        let v = if v < 0.0 { v + depth as f64 } else { v };
        if v == ix[axis] as f64 {
            on
        } else {
            off
        }
    });
    Ok(out)
}

/// `OneHot(indices, depth, values)`; negative indices count from `depth`, indices out
/// of range give an all-`off` row.
pub fn one_hot(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (ind, depth, values) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
    let depth = match depth.to_f64_vec().as_slice() {
        [d] if *d >= 0.0 => *d as usize,
        _ => {
            return Err(IrError::Shape(format!(
                "OneHot depth must be a non-negative scalar, found {depth:?}"
            )))
        }
    };
    let axis = one_hot_axis(node, ind.rank())?;
    let idx = ind.to_f64_vec();
    Ok(map_tensor!(values, v => one_hot_arr(v, &idx, ind.shape(), depth, axis)?))
}

/// OneHot's output type.
pub fn infer_one_hot(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<TensorType> {
    let ind = in_ty(inputs, 0)?.ty;
    let values = in_ty(inputs, 2)?.ty;
    let axis = one_hot_axis(node, ind.shape.len())?;
    let depth = match opt_in_ty(inputs, 1).and_then(|d| d.value) {
        Some(t) => match t.to_f64_vec().as_slice() {
            [d] if *d >= 0.0 => Dim::from(*d as u64),
            _ => return Err(IrError::Shape("OneHot depth must be a scalar".into())),
        },
        None => cx.fresh_dim("depth"),
    };
    let mut shape = ind.shape.clone();
    shape.insert(axis, depth);
    Ok(TensorType::new(values.dtype, shape))
}

fn trilu_arr<T: Elem>(a: &ArrayD<T>, k: i64, upper: bool) -> ArrayD<T> {
    let n = a.ndim();
    let mut out = a.clone();
    out.indexed_iter_mut().for_each(|(ix, v)| {
        let off = ix[n - 1] as i64 - ix[n - 2] as i64;
        let keep = if upper { off >= k } else { off <= k };
        if !keep {
            *v = T::default();
        }
    });
    out
}

/// `Trilu(input, k?)`: keeps the upper (or lower) triangle of the last two dims.
pub fn trilu(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    if x.rank() < 2 {
        return Err(IrError::Shape(format!(
            "Trilu needs rank >= 2, found {:?}",
            x.shape()
        )));
    }
    let k = opt_scalar(inputs, 1, "Trilu k")?.unwrap_or(0);
    let upper = node.attrs.int_or("upper", 1)? != 0;
    Ok(map_tensor!(x, a => trilu_arr(a, k, upper)))
}
