//! What the reduction family shares: the float compute types (f16/bf16 are widened to
//! f32, f64 stays f64), the engine that folds a tensor over a set of axes row by row,
//! axis and attribute parsing, and small inference helpers.

use crate::attr::Attr;
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{unsupported, IrError, Result};
use crate::graph::Node;
use crate::ops::util::norm_axis;
use crate::tensor::{Elem, Tensor};
use crate::with_tensor;
use half::{bf16, f16};
use ndarray::{ArrayD, ArrayView1, ArrayViewD, Axis, CowArray, IxDyn};

/// A float type arithmetic runs in: f32 (also for f16 and bf16 data) or f64.
pub trait Real: num_traits::Float + Elem + std::iter::Sum {
    /// Converts an f64 constant (epsilon, momentum) to this type.
    fn lit(v: f64) -> Self {
        Self::from_f64(v)
    }
}
impl Real for f32 {}
impl Real for f64 {}

/// A float tensor's data in its compute type, borrowed when no widening is needed.
pub enum FloatIn<'a> {
    /// f32 data, or f16/bf16 data widened to f32.
    F32(CowArray<'a, f32, IxDyn>),
    /// f64 data.
    F64(CowArray<'a, f64, IxDyn>),
}

/// The data of a float tensor in its compute type; other dtypes are unsupported by `op`.
pub fn float_in<'a>(t: &'a Tensor, op: &str) -> Result<FloatIn<'a>> {
    match t {
        Tensor::F32(a) => Ok(FloatIn::F32(a.view().into())),
        Tensor::F64(a) => Ok(FloatIn::F64(a.view().into())),
        Tensor::F16(a) => Ok(FloatIn::F32(a.mapv(f16::to_f32).into())),
        Tensor::BF16(a) => Ok(FloatIn::F32(a.mapv(bf16::to_f32).into())),
        other => unsupported(format!(
            "{op} takes f32, f16, bf16 or f64 data, found {}",
            other.dtype()
        )),
    }
}

/// Runs `$body` with `$a` bound to the compute-type data of float tensor `$t`
/// (a `CowArray<F, IxDyn>` with `F` f32 or f64); fails for other dtypes.
macro_rules! with_float {
    ($t:expr, $op:expr, $a:ident => $body:expr) => {
        match $crate::ops::reduce::common::float_in($t, $op)? {
            $crate::ops::reduce::common::FloatIn::F32($a) => $body,
            $crate::ops::reduce::common::FloatIn::F64($a) => $body,
        }
    };
}
pub(crate) use with_float;

/// Another float input (scale, bias, statistics) converted to the compute type `F`.
pub fn float_as<'a, F: Real>(t: &'a Tensor, what: &str) -> Result<CowArray<'a, F, IxDyn>> {
    if let Some(a) = F::view(t) {
        return Ok(a.view().into());
    }
    if !t.dtype().is_float() {
        return unsupported(format!(
            "{what} must be a float tensor, found {}",
            t.dtype()
        ));
    }
    Ok(with_tensor!(t, a => a.mapv(|v| F::from_f64(v.to_f64()))).into())
}

/// Wraps a compute-type result as a tensor of `dtype` (rounding f32 to f16/bf16).
pub fn to_dtype<F: Real>(a: ArrayD<F>, dtype: DType) -> Tensor {
    let t = F::wrap(a);
    if dtype == F::DTYPE {
        t
    } else {
        t.cast(dtype)
    }
}

/// The smallest value of `T` (-inf for floats, false for bool): ReduceMax's identity.
pub fn lowest<T: Elem>() -> T {
    match T::DTYPE {
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 => T::from_f64(f64::NEG_INFINITY),
        DType::I8 => T::from_i64(i8::MIN as i64),
        DType::I16 => T::from_i64(i16::MIN as i64),
        DType::I32 => T::from_i64(i32::MIN as i64),
        DType::I64 => T::from_i64(i64::MIN),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool => T::from_i64(0),
    }
}

/// The largest value of `T` (+inf for floats, true for bool): ReduceMin's identity.
pub fn highest<T: Elem>() -> T {
    match T::DTYPE {
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 => T::from_f64(f64::INFINITY),
        DType::I8 => T::from_i64(i8::MAX as i64),
        DType::I16 => T::from_i64(i16::MAX as i64),
        DType::I32 => T::from_i64(i32::MAX as i64),
        DType::I64 => T::from_i64(i64::MAX),
        // Wrapping -1 gives the all-ones pattern, the maximum of each unsigned width.
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => T::from_i64(-1),
        DType::Bool => T::from_i64(1),
    }
}

/// True for NaN (the only value not equal to itself).
#[allow(clippy::eq_op)]
pub fn is_nan<T: PartialEq>(x: T) -> bool {
    x != x
}

/// Normalises a list of axes against `rank`, sorted and without repeats.
pub fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = axes
        .iter()
        .map(|&a| norm_axis(a, rank))
        .collect::<Result<Vec<_>>>()?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `shape` with the dims in `axes` set to 1 (the keepdims shape of a reduction).
pub fn keep_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect()
}

/// Folds `x` over `axes`: `f` sees each group of elements that reduce to one output (in
/// row-major order over the reduced axes) as a 1-D view. The result has the keepdims
/// shape. The data is copied once only when the reduced axes are not already innermost.
pub fn reduce_rows<T: Copy, R>(
    x: ArrayViewD<T>,
    axes: &[usize],
    mut f: impl FnMut(ArrayView1<T>) -> R,
) -> Result<ArrayD<R>> {
    let shape = x.shape().to_vec();
    let mut perm: Vec<usize> = (0..shape.len()).filter(|a| !axes.contains(a)).collect();
    let outer: usize = perm.iter().map(|&a| shape[a]).product();
    perm.extend_from_slice(axes);
    let inner: usize = axes.iter().map(|&a| shape[a]).product();
    let permuted = x.permuted_axes(IxDyn(&perm));
    let std = permuted.as_standard_layout();
    let rows = std
        .view()
        .into_shape_with_order((outer, inner))
        .map_err(|e| IrError::Shape(format!("cannot view {shape:?} as rows: {e}")))?;
    let vals: Vec<R> = rows.outer_iter().map(&mut f).collect();
    crate::tensor::array_from(&keep_shape(&shape, axes), vals)
}

/// Drops the reduced axes of a keepdims result (keepdims = 0).
pub fn squeeze_axes<T>(a: ArrayD<T>, axes: &[usize]) -> ArrayD<T> {
    let mut a = a;
    for &ax in axes.iter().rev() {
        a = a.index_axis_move(Axis(ax), 0);
    }
    a
}

/// The dtype a `stash_type` attribute names (ONNX type code or dtype), f32 by default.
pub fn stash_dtype(node: &Node) -> Result<DType> {
    let bad = |msg: String| IrError::Attr {
        name: "stash_type".into(),
        msg,
    };
    match node.attrs.get("stash_type") {
        None => Ok(DType::F32),
        Some(Attr::DType(d)) if d.is_float() => Ok(*d),
        Some(Attr::Int(1)) => Ok(DType::F32),
        Some(Attr::Int(10)) => Ok(DType::F16),
        Some(Attr::Int(11)) => Ok(DType::F64),
        Some(Attr::Int(16)) => Ok(DType::BF16),
        Some(other) => Err(bad(format!("expected a float type, found {other:?}"))),
    }
}

/// A required attribute-free scalar input read as one integer (TopK's `k`, CumSum's
/// `axis`).
pub fn scalar_int(t: &Tensor, what: &str) -> Result<i64> {
    if !t.dtype().is_int() {
        return unsupported(format!(
            "{what} must be an integer tensor, found {}",
            t.dtype()
        ));
    }
    match t.to_i64_vec().as_slice() {
        [v] => Ok(*v),
        other => Err(IrError::Shape(format!(
            "{what} must hold one value, found {} (shape {:?})",
            other.len(),
            t.shape()
        ))),
    }
}

/// Symbolic keepdims/squeezed shape of a reduction over known axes.
pub fn reduced_dims(shape: &[Dim], axes: &[usize], keepdims: bool) -> Vec<Dim> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match (axes.contains(&i), keepdims) {
            (false, _) => Some(d.clone()),
            (true, true) => Some(Dim::Known(1)),
            (true, false) => None,
        })
        .collect()
}
