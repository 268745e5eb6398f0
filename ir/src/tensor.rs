//! Concrete tensors: one `ndarray::ArrayD` per element type. The interpreter, constant
//! folding and the importers all exchange data in this form; `Elem` lets generic code
//! (`fn op<T: Elem>(a: &ArrayD<T>)`) be written once for every dtype.

use crate::dtype::DType;
use crate::error::{IrError, Result};
use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};

/// A dense tensor with a concrete shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Tensor {
    /// f32 data.
    F32(ArrayD<f32>),
    /// f16 data.
    F16(ArrayD<f16>),
    /// bf16 data.
    BF16(ArrayD<bf16>),
    /// f64 data.
    F64(ArrayD<f64>),
    /// i8 data.
    I8(ArrayD<i8>),
    /// i16 data.
    I16(ArrayD<i16>),
    /// i32 data.
    I32(ArrayD<i32>),
    /// i64 data.
    I64(ArrayD<i64>),
    /// u8 data.
    U8(ArrayD<u8>),
    /// u16 data.
    U16(ArrayD<u16>),
    /// u32 data.
    U32(ArrayD<u32>),
    /// u64 data.
    U64(ArrayD<u64>),
    /// bool data.
    Bool(ArrayD<bool>),
}

/// Applies `$body` to the array inside a tensor, whatever its dtype; `$a` names the array.
#[macro_export]
macro_rules! with_tensor {
    ($t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::Tensor::F32($a) => $body,
            $crate::Tensor::F16($a) => $body,
            $crate::Tensor::BF16($a) => $body,
            $crate::Tensor::F64($a) => $body,
            $crate::Tensor::I8($a) => $body,
            $crate::Tensor::I16($a) => $body,
            $crate::Tensor::I32($a) => $body,
            $crate::Tensor::I64($a) => $body,
            $crate::Tensor::U8($a) => $body,
            $crate::Tensor::U16($a) => $body,
            $crate::Tensor::U32($a) => $body,
            $crate::Tensor::U64($a) => $body,
            $crate::Tensor::Bool($a) => $body,
        }
    };
}

/// Like `with_tensor!`, but `$body` yields an array of the same element type, which is
/// wrapped back into a tensor of the same dtype.
#[macro_export]
macro_rules! map_tensor {
    ($t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::Tensor::F32($a) => $crate::Tensor::F32($body),
            $crate::Tensor::F16($a) => $crate::Tensor::F16($body),
            $crate::Tensor::BF16($a) => $crate::Tensor::BF16($body),
            $crate::Tensor::F64($a) => $crate::Tensor::F64($body),
            $crate::Tensor::I8($a) => $crate::Tensor::I8($body),
            $crate::Tensor::I16($a) => $crate::Tensor::I16($body),
            $crate::Tensor::I32($a) => $crate::Tensor::I32($body),
            $crate::Tensor::I64($a) => $crate::Tensor::I64($body),
            $crate::Tensor::U8($a) => $crate::Tensor::U8($body),
            $crate::Tensor::U16($a) => $crate::Tensor::U16($body),
            $crate::Tensor::U32($a) => $crate::Tensor::U32($body),
            $crate::Tensor::U64($a) => $crate::Tensor::U64($body),
            $crate::Tensor::Bool($a) => $crate::Tensor::Bool($body),
        }
    };
}

/// An element type a tensor can hold. Conversions go through f64 (exact for every type
/// but the 64-bit integers beyond 2^53, which have their own i64 path).
pub trait Elem: Copy + Default + PartialOrd + Send + Sync + std::fmt::Debug + 'static {
    /// The dtype tag of this element type.
    const DTYPE: DType;
    /// Converts to f64 (bool: 0 or 1).
    fn to_f64(self) -> f64;
    /// Converts from f64 with ONNX Cast semantics: floats round to nearest, integers
    /// truncate toward zero and wrap, bool is `x != 0`.
    fn from_f64(v: f64) -> Self;
    /// Converts to i64 exactly for integer types (floats truncate).
    fn to_i64(self) -> i64;
    /// Converts from i64 exactly for integer types (wrapping to the width).
    fn from_i64(v: i64) -> Self;
    /// Wraps an array of this type into a tensor.
    fn wrap(a: ArrayD<Self>) -> Tensor;
    /// Borrows the array if the tensor has this element type.
    fn view(t: &Tensor) -> Option<&ArrayD<Self>>;
}

macro_rules! impl_elem_int {
    ($t:ty, $d:ident) => {
        impl Elem for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                if v.is_nan() {
                    0
                } else {
                    // Truncate toward zero, then wrap to the width (what C casts do for
                    // in-range values; out-of-range is implementation-defined in ONNX).
                    (v.trunc() as i128) as $t
                }
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn wrap(a: ArrayD<Self>) -> Tensor {
                Tensor::$d(a)
            }
            fn view(t: &Tensor) -> Option<&ArrayD<Self>> {
                match t {
                    Tensor::$d(a) => Some(a),
                    _ => None,
                }
            }
        }
    };
}
impl_elem_int!(i8, I8);
impl_elem_int!(i16, I16);
impl_elem_int!(i32, I32);
impl_elem_int!(i64, I64);
impl_elem_int!(u8, U8);
impl_elem_int!(u16, U16);
impl_elem_int!(u32, U32);
impl_elem_int!(u64, U64);

macro_rules! impl_elem_float {
    ($t:ty, $d:ident, $from:expr, $to:expr) => {
        impl Elem for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            fn to_i64(self) -> i64 {
                $to(self) as i64
            }
            fn from_i64(v: i64) -> Self {
                $from(v as f64)
            }
            fn wrap(a: ArrayD<Self>) -> Tensor {
                Tensor::$d(a)
            }
            fn view(t: &Tensor) -> Option<&ArrayD<Self>> {
                match t {
                    Tensor::$d(a) => Some(a),
                    _ => None,
                }
            }
        }
    };
}
impl_elem_float!(f32, F32, |v: f64| v as f32, |x: f32| x as f64);
impl_elem_float!(f64, F64, |v: f64| v, |x: f64| x);
impl_elem_float!(f16, F16, f16::from_f64, |x: f16| x.to_f64());
impl_elem_float!(bf16, BF16, bf16::from_f64, |x: bf16| x.to_f64());

impl Elem for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        if self {
            1.0
        } else {
            0.0
        }
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn wrap(a: ArrayD<Self>) -> Tensor {
        Tensor::Bool(a)
    }
    fn view(t: &Tensor) -> Option<&ArrayD<Self>> {
        match t {
            Tensor::Bool(a) => Some(a),
            _ => None,
        }
    }
}

fn cast_array<S: Elem, D: Elem>(a: &ArrayD<S>) -> ArrayD<D> {
    if S::DTYPE.is_int() && D::DTYPE.is_int() {
        a.mapv(|x| D::from_i64(x.to_i64()))
    } else {
        a.mapv(|x| D::from_f64(x.to_f64()))
    }
}

fn cast_to<D: Elem>(t: &Tensor) -> ArrayD<D> {
    with_tensor!(t, a => cast_array::<_, D>(a))
}

impl Tensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::F32,
            Tensor::F16(_) => DType::F16,
            Tensor::BF16(_) => DType::BF16,
            Tensor::F64(_) => DType::F64,
            Tensor::I8(_) => DType::I8,
            Tensor::I16(_) => DType::I16,
            Tensor::I32(_) => DType::I32,
            Tensor::I64(_) => DType::I64,
            Tensor::U8(_) => DType::U8,
            Tensor::U16(_) => DType::U16,
            Tensor::U32(_) => DType::U32,
            Tensor::U64(_) => DType::U64,
            Tensor::Bool(_) => DType::Bool,
        }
    }

    /// The concrete shape.
    pub fn shape(&self) -> &[usize] {
        with_tensor!(self, a => a.shape())
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        with_tensor!(self, a => a.len())
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rank (number of dims).
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// A tensor of zeros (false for bool).
    pub fn zeros(dtype: DType, shape: &[usize]) -> Tensor {
        fn z<T: Elem>(shape: &[usize]) -> Tensor {
            T::wrap(ArrayD::from_elem(IxDyn(shape), T::default()))
        }
        match dtype {
            DType::F32 => z::<f32>(shape),
            DType::F16 => z::<f16>(shape),
            DType::BF16 => z::<bf16>(shape),
            DType::F64 => z::<f64>(shape),
            DType::I8 => z::<i8>(shape),
            DType::I16 => z::<i16>(shape),
            DType::I32 => z::<i32>(shape),
            DType::I64 => z::<i64>(shape),
            DType::U8 => z::<u8>(shape),
            DType::U16 => z::<u16>(shape),
            DType::U32 => z::<u32>(shape),
            DType::U64 => z::<u64>(shape),
            DType::Bool => z::<bool>(shape),
        }
    }

    /// Builds a tensor of `dtype` from f64 values (converted with `Elem::from_f64`).
    pub fn from_f64s(dtype: DType, shape: &[usize], values: &[f64]) -> Result<Tensor> {
        Ok(Tensor::F64(array_from(shape, values.to_vec())?).cast(dtype))
    }

    /// A 1-D i64 tensor.
    pub fn from_i64s(values: &[i64]) -> Tensor {
        Tensor::I64(
            ArrayD::from_shape_vec(IxDyn(&[values.len()]), values.to_vec())
                .expect("1-D shape matches length"),
        )
    }

    /// A scalar (rank 0) tensor of `dtype` holding `v`.
    pub fn scalar_f64(dtype: DType, v: f64) -> Tensor {
        Tensor::F64(ArrayD::from_elem(IxDyn(&[]), v)).cast(dtype)
    }

    /// Converts to another dtype with ONNX Cast semantics.
    pub fn cast(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        // The weight conversions, directly (the same rounding as through f64, which
        // represents every f32 exactly).
        match (self, dtype) {
            (Tensor::F32(a), DType::BF16) => return Tensor::BF16(a.mapv(bf16::from_f32)),
            (Tensor::F32(a), DType::F16) => return Tensor::F16(a.mapv(f16::from_f32)),
            (Tensor::BF16(a), DType::F32) => return Tensor::F32(a.mapv(bf16::to_f32)),
            (Tensor::F16(a), DType::F32) => return Tensor::F32(a.mapv(f16::to_f32)),
            _ => {}
        }
        match dtype {
            DType::F32 => Tensor::F32(cast_to(self)),
            DType::F16 => Tensor::F16(cast_to(self)),
            DType::BF16 => Tensor::BF16(cast_to(self)),
            DType::F64 => Tensor::F64(cast_to(self)),
            DType::I8 => Tensor::I8(cast_to(self)),
            DType::I16 => Tensor::I16(cast_to(self)),
            DType::I32 => Tensor::I32(cast_to(self)),
            DType::I64 => Tensor::I64(cast_to(self)),
            DType::U8 => Tensor::U8(cast_to(self)),
            DType::U16 => Tensor::U16(cast_to(self)),
            DType::U32 => Tensor::U32(cast_to(self)),
            DType::U64 => Tensor::U64(cast_to(self)),
            DType::Bool => Tensor::Bool(cast_to(self)),
        }
    }

    /// All elements as f64, in row-major order.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        with_tensor!(self, a => a.iter().map(|x| x.to_f64()).collect())
    }

    /// All elements as i64 (floats truncated), in row-major order. Used for shape-like
    /// inputs (Reshape shapes, Slice starts, axes).
    pub fn to_i64_vec(&self) -> Vec<i64> {
        with_tensor!(self, a => a.iter().map(|x| x.to_i64()).collect())
    }

    /// Borrows the data as `ArrayD<T>`, or fails naming the expected and found dtypes.
    pub fn as_array<T: Elem>(&self) -> Result<&ArrayD<T>> {
        T::view(self).ok_or_else(|| IrError::DType {
            context: "tensor access".into(),
            expected: T::DTYPE.name().into(),
            found: self.dtype(),
        })
    }

    /// Same data with a new shape of equal element count.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if n != self.len() {
            return Err(IrError::Shape(format!(
                "cannot reshape {:?} ({} elements) to {:?} ({} elements)",
                self.shape(),
                self.len(),
                shape,
                n
            )));
        }
        Ok(map_tensor!(self, a => {
            let v: Vec<_> = a.iter().copied().collect();
            ArrayD::from_shape_vec(IxDyn(shape), v).expect("element count checked")
        }))
    }

    /// Bytes this tensor's data occupies.
    pub fn byte_size(&self) -> usize {
        self.len() * self.dtype().size()
    }
}

/// Builds an `ArrayD` from a shape and row-major data, checking the element count.
pub fn array_from<T>(shape: &[usize], data: Vec<T>) -> Result<ArrayD<T>> {
    let n = data.len();
    ArrayD::from_shape_vec(IxDyn(shape), data)
        .map_err(|_| IrError::Shape(format!("shape {shape:?} does not hold {n} elements")))
}
