//! Float plumbing shared by the attention and recurrent families: these ops compute in
//! f32 (f64 for f64 inputs) and round intermediate results to the input's precision
//! where the ONNX reference computes in that precision, so f16/bf16 results track it.

use crate::dtype::DType;
use crate::error::{unsupported, IrError, Result};
use crate::tensor::{Elem, Tensor};
use half::{bf16, f16};
use ndarray::ArrayD;

/// A compute type: f32 or f64.
pub(crate) trait Real:
    Elem + num_traits::Float + ndarray::LinalgScalar + std::iter::Sum + Send + Sync
{
}
impl Real for f32 {}
impl Real for f64 {}

/// `v` in the compute type.
pub(crate) fn real<F: Real>(v: f64) -> F {
    <F as Elem>::from_f64(v)
}

/// `x` as f64.
pub(crate) fn f64_of<F: Real>(x: F) -> f64 {
    <F as Elem>::to_f64(x)
}

/// Converts a float tensor to the compute type `F`; other dtypes are rejected with
/// `what` naming the input.
pub(crate) fn to_real<F: Real>(t: &Tensor, what: &str) -> Result<ArrayD<F>> {
    if !t.dtype().is_float() {
        return Err(IrError::DType {
            context: what.into(),
            expected: "a float type".into(),
            found: t.dtype(),
        });
    }
    Ok(crate::with_tensor!(t, a => a.mapv(|x| real::<F>(x.to_f64()))))
}

/// Converts a compute-type array back to a tensor of `dtype`.
pub(crate) fn from_real<F: Real>(a: ArrayD<F>, dtype: DType) -> Tensor {
    F::wrap(a).cast(dtype)
}

/// The function rounding a compute-type value to the precision of `dtype` (the
/// identity when `dtype` is at least as wide as the compute type).
pub(crate) fn rounder<F: Real>(dtype: DType) -> fn(F) -> F {
    fn to_f16<F: Real>(x: F) -> F {
        real(f16::from_f64(f64_of(x)).to_f64())
    }
    fn to_bf16<F: Real>(x: F) -> F {
        real(bf16::from_f64(f64_of(x)).to_f64())
    }
    fn to_f32<F: Real>(x: F) -> F {
        real(f64_of(x) as f32 as f64)
    }
    fn same<F: Real>(x: F) -> F {
        x
    }
    match dtype {
        DType::F16 => to_f16::<F>,
        DType::BF16 => to_bf16::<F>,
        DType::F32 if std::mem::size_of::<F>() > 4 => to_f32::<F>,
        _ => same::<F>,
    }
}

/// Checks that `dtype` is a float type the family computes in and says whether it
/// needs the f64 path.
pub(crate) fn wide(dtype: DType, op: &str) -> Result<bool> {
    match dtype {
        DType::F64 => Ok(true),
        DType::F32 | DType::F16 | DType::BF16 => Ok(false),
        d => unsupported(format!("{op} on {d} inputs (float types only)")),
    }
}

/// A dtype attribute given either as `Attr::DType` or as a raw ONNX type code.
pub(crate) fn dtype_attr(attrs: &crate::attr::Attrs, name: &str) -> Result<Option<DType>> {
    match attrs.get(name) {
        None => Ok(None),
        Some(crate::attr::Attr::DType(d)) => Ok(Some(*d)),
        Some(crate::attr::Attr::Int(code)) => match code {
            1 => Ok(Some(DType::F32)),
            10 => Ok(Some(DType::F16)),
            11 => Ok(Some(DType::F64)),
            16 => Ok(Some(DType::BF16)),
            c => Err(IrError::Attr {
                name: name.into(),
                msg: format!("type code {c} is not a float type gopt supports"),
            }),
        },
        Some(_) => Err(IrError::Attr {
            name: name.into(),
            msg: "expected a dtype".into(),
        }),
    }
}

/// Sums `xs` as numpy does in precision `dtype`: bf16 (ml_dtypes) adds one element at a
/// time, rounding each partial sum; other types accumulate in at least f32 and round once.
pub(crate) fn sum_as<F: Real>(xs: impl Iterator<Item = F>, dtype: DType) -> F {
    let round = rounder::<F>(dtype);
    if dtype == DType::BF16 {
        xs.fold(F::zero(), |acc, x| round(acc + x))
    } else {
        round(xs.sum())
    }
}
