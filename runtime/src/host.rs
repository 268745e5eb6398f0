//! Host tensors as the row-major bytes device buffers hold (bool as one byte per
//! element): what the CUDA executor uploads and reads back, and what the wgpu one uses
//! for every dtype WGSL stores as it is.

use crate::{Result, RuntimeError};
use gopt_ir::{DType, Tensor};

/// A tensor's elements as bytes, row-major.
pub fn to_bytes(t: &Tensor) -> Vec<u8> {
    fn raw<T: Copy>(a: &ndarray::ArrayD<T>) -> Vec<u8> {
        let a = a.as_standard_layout();
        let s = a.as_slice().unwrap_or(&[]);
        // SAFETY: T is a plain numeric type (or bool/half), so its bytes are its value.
        unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
            .to_vec()
    }
    gopt_ir::with_tensor!(t, a => raw(a))
}

/// A tensor from row-major bytes.
pub fn from_bytes(dt: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor> {
    fn fill<T: Copy + Default>(shape: &[usize], bytes: &[u8]) -> Option<ndarray::ArrayD<T>> {
        let n: usize = shape.iter().product();
        if bytes.len() != n * std::mem::size_of::<T>() {
            return None;
        }
        let mut v = vec![T::default(); n];
        // SAFETY: sizes checked; T is plain data.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, bytes.len())
        };
        ndarray::ArrayD::from_shape_vec(shape.to_vec(), v).ok()
    }
    let bad = || {
        RuntimeError::Usage(format!(
            "{} bytes do not make a {dt} tensor of {shape:?}",
            bytes.len()
        ))
    };
    Ok(match dt {
        DType::F32 => Tensor::F32(fill(shape, bytes).ok_or_else(bad)?),
        DType::F16 => Tensor::F16(fill(shape, bytes).ok_or_else(bad)?),
        DType::BF16 => Tensor::BF16(fill(shape, bytes).ok_or_else(bad)?),
        DType::F64 => Tensor::F64(fill(shape, bytes).ok_or_else(bad)?),
        DType::I8 => Tensor::I8(fill(shape, bytes).ok_or_else(bad)?),
        DType::I16 => Tensor::I16(fill(shape, bytes).ok_or_else(bad)?),
        DType::I32 => Tensor::I32(fill(shape, bytes).ok_or_else(bad)?),
        DType::I64 => Tensor::I64(fill(shape, bytes).ok_or_else(bad)?),
        DType::U8 => Tensor::U8(fill(shape, bytes).ok_or_else(bad)?),
        DType::U16 => Tensor::U16(fill(shape, bytes).ok_or_else(bad)?),
        DType::U32 => Tensor::U32(fill(shape, bytes).ok_or_else(bad)?),
        DType::U64 => Tensor::U64(fill(shape, bytes).ok_or_else(bad)?),
        DType::Bool => {
            if bytes.iter().any(|&b| b > 1) {
                return Err(RuntimeError::Usage(
                    "a bool output holds a byte other than 0 or 1".into(),
                ));
            }
            Tensor::Bool(fill(shape, bytes).ok_or_else(bad)?)
        }
    })
}
