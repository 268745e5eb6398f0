//! The ten `Reduce*` ops. Axes come from the optional second input; absent or empty
//! axes reduce everything unless `noop_with_empty_axes` is set, in which case each
//! element is its own (one-element) group. An empty group gives the op's identity
//! (0 for sums, 1 for products, -inf/+inf for max/min, log 0 = -inf for the log sums).
//! Floats compute in f32 (f64 for f64); integers keep exact, wrapping integer math.

use super::common::{
    highest, is_nan, lowest, norm_axes, reduce_rows, reduced_dims, squeeze_axes, to_dtype,
    with_float, Real,
};
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::map_tensor;
use crate::ops::util::{in_ty, input, opt_in_ty, opt_input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::{Elem, Tensor};
use ndarray::ArrayView1;

/// Which `Reduce*` op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// ReduceSum.
    Sum,
    /// ReduceMean.
    Mean,
    /// ReduceMax.
    Max,
    /// ReduceMin.
    Min,
    /// ReduceProd.
    Prod,
    /// ReduceL1.
    L1,
    /// ReduceL2.
    L2,
    /// ReduceLogSum.
    LogSum,
    /// ReduceLogSumExp.
    LogSumExp,
    /// ReduceSumSquare.
    SumSquare,
}

/// What is known of the axes input.
enum AxesInput {
    /// Not given (the pre-opset-18 `axes` attribute is read instead, if present).
    Absent,
    /// Given, with a value known only at run time.
    Unknown,
    /// Given, with this value.
    Known(Vec<i64>),
}

/// The axes a reduction folds, or `None` when the axes input is present but unknown.
fn axes_of(node: &Node, given: AxesInput, rank: usize) -> Result<Option<Vec<usize>>> {
    let listed = match given {
        AxesInput::Known(v) => v,
        AxesInput::Unknown => return Ok(None),
        AxesInput::Absent => node
            .attrs
            .ints("axes")?
            .map(<[i64]>::to_vec)
            .unwrap_or_default(),
    };
    if listed.is_empty() {
        if node.attrs.int_or("noop_with_empty_axes", 0)? != 0 {
            return Ok(Some(Vec::new()));
        }
        return Ok(Some((0..rank).collect()));
    }
    norm_axes(&listed, rank).map(Some)
}

fn keepdims(node: &Node) -> Result<bool> {
    Ok(node.attrs.int_or("keepdims", 1)? != 0)
}

/// Runs a reduction.
pub fn eval(kind: Kind, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let given =
        opt_input(inputs, 1).map_or(AxesInput::Absent, |a| AxesInput::Known(a.to_i64_vec()));
    let axes = axes_of(node, given, x.rank())?
        .ok_or_else(|| IrError::Invalid("reduction axes unknown at run time".into()))?;
    let out = reduce_tensor(kind, x, &axes)?;
    Ok(if keepdims(node)? {
        out
    } else {
        map_tensor!(out, a => squeeze_axes(a, &axes))
    })
}

/// Output type of a reduction.
pub fn infer(cx: &mut InferCx, node: &Node, inputs: &[Option<InferInput>]) -> Result<TensorType> {
    let x = in_ty(inputs, 0)?;
    let rank = x.ty.shape.len();
    let axes_in = opt_in_ty(inputs, 1);
    let given = match axes_in {
        None => AxesInput::Absent,
        Some(InferInput { value: None, .. }) => AxesInput::Unknown,
        Some(InferInput { value: Some(v), .. }) => AxesInput::Known(v.to_i64_vec()),
    };
    let keep = keepdims(node)?;
    let dtype = x.ty.dtype;
    match axes_of(node, given, rank)? {
        Some(axes) => Ok(TensorType::new(
            dtype,
            reduced_dims(&x.ty.shape, &axes, keep),
        )),
        None => {
            // Axes known only at run time: the rank is known when dims are kept, or when
            // the number of axes is (assuming no repeats).
            let out_rank = if keep {
                rank
            } else {
                let n = axes_in
                    .and_then(|a| a.ty.shape.first().and_then(|d| d.known()))
                    .ok_or_else(|| IrError::Unsupported("data-dependent axes".into()))?;
                match n {
                    0 if node.attrs.int_or("noop_with_empty_axes", 0)? != 0 => rank,
                    0 => 0,
                    n => rank.saturating_sub(n as usize),
                }
            };
            let shape = (0..out_rank).map(|_| cx.fresh_dim("reduced")).collect();
            Ok(TensorType::new(dtype, shape))
        }
    }
}

/// Reduces `x` over `axes`, keeping the reduced dims as 1.
fn reduce_tensor(kind: Kind, x: &Tensor, axes: &[usize]) -> Result<Tensor> {
    let name = op_name(kind);
    match kind {
        Kind::Max => Ok(map_tensor!(x, a => reduce_rows(a.view(), axes, max_of)?)),
        Kind::Min => Ok(map_tensor!(x, a => reduce_rows(a.view(), axes, min_of)?)),
        _ if x.dtype().is_float() => with_float!(x, name, a => {
            let r = reduce_rows(a.view(), axes, |r| float_fold(kind, r))?;
            Ok(to_dtype(r, x.dtype()))
        }),
        _ if x.dtype().is_int() => {
            Ok(map_tensor!(x, a => reduce_rows(a.view(), axes, |r| int_fold(kind, r))?))
        }
        _ => unsupported(format!("{name} does not take {} data", x.dtype())),
    }
}

fn op_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Sum => "ReduceSum",
        Kind::Mean => "ReduceMean",
        Kind::Max => "ReduceMax",
        Kind::Min => "ReduceMin",
        Kind::Prod => "ReduceProd",
        Kind::L1 => "ReduceL1",
        Kind::L2 => "ReduceL2",
        Kind::LogSum => "ReduceLogSum",
        Kind::LogSumExp => "ReduceLogSumExp",
        Kind::SumSquare => "ReduceSumSquare",
    }
}

/// Maximum with NaN propagation (numpy's `maximum.reduce`).
fn max_of<T: Elem>(r: ArrayView1<T>) -> T {
    let mut m = lowest();
    for &x in r {
        if is_nan(x) {
            return x;
        }
        if x > m {
            m = x;
        }
    }
    m
}

/// Minimum with NaN propagation.
fn min_of<T: Elem>(r: ArrayView1<T>) -> T {
    let mut m = highest();
    for &x in r {
        if is_nan(x) {
            return x;
        }
        if x < m {
            m = x;
        }
    }
    m
}

/// One group of a float reduction other than max/min.
fn float_fold<F: Real>(kind: Kind, r: ArrayView1<F>) -> F {
    let sum = |f: &dyn Fn(F) -> F| r.iter().fold(F::zero(), |s, &x| s + f(x));
    match kind {
        Kind::Sum => sum(&|x| x),
        Kind::Mean => sum(&|x| x) / F::lit(r.len() as f64),
        Kind::Prod => r.iter().fold(F::one(), |p, &x| p * x),
        Kind::L1 => sum(&|x| x.abs()),
        Kind::L2 => sum(&|x| x * x).sqrt(),
        Kind::SumSquare => sum(&|x| x * x),
        Kind::LogSum => sum(&|x| x).ln(),
        Kind::LogSumExp => {
            // Shift by the largest finite element so exp cannot overflow.
            let m = r
                .iter()
                .filter(|x| x.is_finite())
                .fold(F::neg_infinity(), |m, &x| m.max(x));
            let m = if m.is_finite() { m } else { F::zero() };
            sum(&|x| (x - m).exp()).ln() + m
        }
        Kind::Max => max_of(r),
        Kind::Min => min_of(r),
    }
}

/// One group of an integer reduction: exact wrapping arithmetic in 64 bits (which wraps
/// like the narrower widths once truncated back); roots and logs go through f64 and
/// truncate, as numpy's `astype` does.
fn int_fold<T: Elem>(kind: Kind, r: ArrayView1<T>) -> T {
    let signed = T::DTYPE.is_signed_int();
    let sum = |f: &dyn Fn(i64) -> i64| r.iter().fold(0i64, |s, &x| s.wrapping_add(f(x.to_i64())));
    match kind {
        Kind::Sum => T::from_i64(sum(&|x| x)),
        Kind::Mean => {
            let s = sum(&|x| x);
            let n = r.len() as i64;
            if n == 0 {
                T::from_i64(0)
            } else if signed {
                T::from_i64(s.wrapping_div(n))
            } else {
                T::from_i64(((s as u64) / (n as u64)) as i64)
            }
        }
        Kind::Prod => T::from_i64(r.iter().fold(1i64, |p, &x| p.wrapping_mul(x.to_i64()))),
        Kind::L1 => T::from_i64(sum(&|x| if signed { x.wrapping_abs() } else { x })),
        Kind::SumSquare => T::from_i64(sum(&|x| x.wrapping_mul(x))),
        Kind::L2 => T::from_f64(float_fold(Kind::L2, r.mapv(|x| x.to_f64()).view())),
        Kind::LogSum => T::from_f64(float_fold(Kind::LogSum, r.mapv(|x| x.to_f64()).view())),
        Kind::LogSumExp => T::from_f64(float_fold(Kind::LogSumExp, r.mapv(|x| x.to_f64()).view())),
        Kind::Max => max_of(r),
        Kind::Min => min_of(r),
    }
}
