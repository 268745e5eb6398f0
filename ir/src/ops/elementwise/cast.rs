//! Casts and the ops that pass data through: Cast and CastLike (value conversion with
//! `Tensor::cast`'s ONNX semantics), BitCast (bit reinterpretation between types of one
//! width) and Dropout (inference form: the identity, with an all-true mask).

use super::kernel::map;
use crate::dtype::DType;
use crate::error::{unsupported, IrError, Result};
use crate::graph::Node;
use crate::ops::util::{input, opt_input};
use crate::tensor::{Elem, Tensor};
use crate::with_tensor;
use half::{bf16, f16};
use ndarray::ArrayD;

/// The required `to` attribute of Cast and BitCast.
pub(crate) fn to_attr(node: &Node) -> Result<DType> {
    node.attrs.dtype("to")?.ok_or_else(|| IrError::Attr {
        name: "to".into(),
        msg: "required but missing".into(),
    })
}

/// An element type's bit pattern, zero-extended to 64 bits.
trait Bits: Elem {
    fn to_bits64(self) -> u64;
    fn from_bits64(b: u64) -> Self;
}

macro_rules! impl_bits {
    ($($t:ty => $u:ty),*) => {$(
        impl Bits for $t {
            fn to_bits64(self) -> u64 { self as $u as u64 }
            fn from_bits64(b: u64) -> Self { b as $u as $t }
        }
    )*};
}
impl_bits!(i8 => u8, i16 => u16, i32 => u32, i64 => u64, u8 => u8, u16 => u16, u32 => u32, u64 => u64);

macro_rules! impl_bits_float {
    ($($t:ty => $u:ty),*) => {$(
        impl Bits for $t {
            fn to_bits64(self) -> u64 { self.to_bits() as u64 }
            fn from_bits64(b: u64) -> Self { <$t>::from_bits(b as $u) }
        }
    )*};
}
impl_bits_float!(f32 => u32, f64 => u64, f16 => u16, bf16 => u16);

impl Bits for bool {
    fn to_bits64(self) -> u64 {
        self as u64
    }
    /// Any non-zero byte reads as true.
    fn from_bits64(b: u64) -> Self {
        b != 0
    }
}

/// Reinterprets the bits of every element as `to`, which must have the same width.
pub(crate) fn bitcast(x: &Tensor, to: DType) -> Result<Tensor> {
    fn from<T: Bits>(bits: &ArrayD<u64>) -> Tensor {
        T::wrap(map(bits, T::from_bits64))
    }
    fn bits<T: Bits>(a: &ArrayD<T>) -> ArrayD<u64> {
        map(a, T::to_bits64)
    }
    if x.dtype().size() != to.size() {
        return unsupported(format!(
            "BitCast from {} ({} bits) to {to} ({} bits): widths must match",
            x.dtype(),
            x.dtype().size() * 8,
            to.size() * 8
        ));
    }
    let b = with_tensor!(x, a => bits(a));
    Ok(match to {
        DType::F32 => from::<f32>(&b),
        DType::F16 => from::<f16>(&b),
        DType::BF16 => from::<bf16>(&b),
        DType::F64 => from::<f64>(&b),
        DType::I8 => from::<i8>(&b),
        DType::I16 => from::<i16>(&b),
        DType::I32 => from::<i32>(&b),
        DType::I64 => from::<i64>(&b),
        DType::U8 => from::<u8>(&b),
        DType::U16 => from::<u16>(&b),
        DType::U32 => from::<u32>(&b),
        DType::U64 => from::<u64>(&b),
        DType::Bool => from::<bool>(&b),
    })
}

/// Dropout in inference mode: the data unchanged and, when a second output is asked
/// for, an all-true mask. Training mode (input 2 true) with a non-zero ratio would
/// drop elements at random; it is rejected.
pub(crate) fn dropout(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let ratio = match opt_input(inputs, 1) {
        Some(r) => *r.to_f64_vec().first().ok_or_else(|| {
            IrError::Shape("Dropout ratio must be a scalar, found an empty tensor".into())
        })?,
        None => 0.5,
    };
    let training = match opt_input(inputs, 2) {
        Some(Tensor::Bool(t)) => t.iter().any(|&b| b),
        Some(t) => {
            return Err(IrError::DType {
                context: "Dropout training_mode".into(),
                expected: "bool".into(),
                found: t.dtype(),
            })
        }
        None => false,
    };
    if training && ratio != 0.0 {
        return unsupported(format!(
            "Dropout in training mode with ratio {ratio} (only inference is supported)"
        ));
    }
    let mut out = vec![x.clone()];
    if node.outputs.len() > 1 {
        out.push(Tensor::Bool(ArrayD::from_elem(x.shape(), true)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    fn t<T: Elem>(v: Vec<T>) -> Tensor {
        T::wrap(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap())
    }

    #[test]
    fn bitcast_reinterprets() {
        let x = t(vec![1.0f32, -2.5]);
        assert_eq!(
            bitcast(&x, DType::I32).unwrap(),
            t(vec![1065353216i32, -1071644672])
        );
        let u = t(vec![65535u16, 32768]);
        assert_eq!(bitcast(&u, DType::I16).unwrap(), t(vec![-1i16, -32768]));
        assert_eq!(
            bitcast(&t(vec![true, false]), DType::U8).unwrap(),
            t(vec![1u8, 0])
        );
        assert_eq!(
            bitcast(&t(vec![-1i16]), DType::BF16).unwrap().dtype(),
            DType::BF16
        );
        assert!(bitcast(&x, DType::I64).is_err());
    }

    #[test]
    fn cast_rounds_and_truncates() {
        // 1 + 2^-8 is halfway between two bf16 values: ties go to even (1.0); one ulp
        // above the tie rounds up.
        let x = t(vec![
            1.0 + 1.0 / 256.0,
            1.0 + 1.0 / 256.0 + 1.0 / 65536.0,
            1.0 + 3.0 / 256.0,
        ]);
        let b = x.cast(DType::F32).cast(DType::BF16).to_f64_vec();
        assert_eq!(b, vec![1.0, 1.0 + 1.0 / 128.0, 1.0 + 2.0 / 128.0]);
        let h = t(vec![65520.0f32, 2049.0]).cast(DType::F16).to_f64_vec();
        assert_eq!(h, vec![f64::INFINITY, 2048.0]);
        let i = t(vec![-2.7f32, 2.7, -0.5, 300.0])
            .cast(DType::I32)
            .to_i64_vec();
        assert_eq!(i, vec![-2, 2, 0, 300]);
        let b = t(vec![0.0f32, -0.0, 0.1, f32::NAN]).cast(DType::Bool);
        assert_eq!(b, t(vec![false, false, true, true]));
        assert_eq!(
            t(vec![true, false]).cast(DType::F16).to_f64_vec(),
            vec![1.0, 0.0]
        );
    }
}
