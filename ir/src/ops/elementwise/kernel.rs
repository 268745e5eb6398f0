//! The machinery every element-wise op shares: maps and broadcasting zips that go
//! parallel on large tensors, and the `Num`/`Int` element traits that give integer
//! types wrapping arithmetic and float types f64 arithmetic rounded once.

use crate::error::{IrError, Result};
use crate::ops::util::broadcast_shape;
use crate::tensor::{Elem, Tensor};
use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn, Zip};

/// Element count from which maps and zips run on the rayon pool.
const PAR_MIN: usize = 1 << 16;

/// Applies `f` to every element.
pub(crate) fn map<A: Elem, R: Elem>(a: &ArrayD<A>, f: impl Fn(A) -> R + Sync + Send) -> ArrayD<R> {
    if a.len() >= PAR_MIN {
        Zip::from(a).par_map_collect(|&x| f(x))
    } else {
        a.map(|&x| f(x))
    }
}

/// Broadcasts `a` and `b` to a common shape and applies `f` element by element.
pub fn broadcast_zip<A: Elem, B: Elem, R: Elem>(
    a: &ArrayD<A>,
    b: &ArrayD<B>,
    f: impl Fn(A, B) -> R + Sync + Send,
) -> Result<ArrayD<R>> {
    let shape = broadcast_shape(a.shape(), b.shape())?;
    let av = a
        .broadcast(IxDyn(&shape))
        .expect("shape is a broadcast of a's");
    let bv = b
        .broadcast(IxDyn(&shape))
        .expect("shape is a broadcast of b's");
    let z = Zip::from(&av).and(&bv);
    Ok(if av.len() >= PAR_MIN {
        z.par_map_collect(|&x, &y| f(x, y))
    } else {
        z.map_collect(|&x, &y| f(x, y))
    })
}

/// Broadcasts three arrays to a common shape and applies `f` element by element.
pub(crate) fn broadcast_zip3<A: Elem, B: Elem, C: Elem, R: Elem>(
    a: &ArrayD<A>,
    b: &ArrayD<B>,
    c: &ArrayD<C>,
    f: impl Fn(A, B, C) -> R + Sync + Send,
) -> Result<ArrayD<R>> {
    let shape = broadcast_shape(&broadcast_shape(a.shape(), b.shape())?, c.shape())?;
    let av = a
        .broadcast(IxDyn(&shape))
        .expect("shape is a broadcast of a's");
    let bv = b
        .broadcast(IxDyn(&shape))
        .expect("shape is a broadcast of b's");
    let cv = c
        .broadcast(IxDyn(&shape))
        .expect("shape is a broadcast of c's");
    let z = Zip::from(&av).and(&bv).and(&cv);
    Ok(if av.len() >= PAR_MIN {
        z.par_map_collect(|&x, &y, &w| f(x, y, w))
    } else {
        z.map_collect(|&x, &y, &w| f(x, y, w))
    })
}

/// Borrows `t` as an array of the same element type as `like`, or fails naming both
/// dtypes (binary ops take operands of one dtype).
pub(crate) fn same_as<'a, T: Elem>(like: &ArrayD<T>, t: &'a Tensor) -> Result<&'a ArrayD<T>> {
    let _ = like;
    T::view(t).ok_or_else(|| IrError::DType {
        context: "operands of an element-wise op must share a dtype".into(),
        expected: T::DTYPE.name().into(),
        found: t.dtype(),
    })
}

/// Applies a float function computed in f64 to every element of a float array,
/// rounding once to the element type.
pub(crate) fn fmap<T: Elem>(a: &ArrayD<T>, f: impl Fn(f64) -> f64 + Sync + Send) -> Tensor {
    T::wrap(map(a, |v| T::from_f64(f(v.to_f64()))))
}

/// Arithmetic on a numeric element type: wrapping for integers, computed in f64 and
/// rounded once for floats (exact for +, -, *, / since f64 has more than twice the
/// precision of f32).
pub(crate) trait Num: Elem {
    /// True for float types.
    const FLOAT: bool;
    /// `a + b`.
    fn add(self, b: Self) -> Self;
    /// `a - b`.
    fn sub(self, b: Self) -> Self;
    /// `a * b`.
    fn mul(self, b: Self) -> Self;
    /// `a / b`; integers truncate toward zero (callers rule out a zero divisor).
    fn div(self, b: Self) -> Self;
    /// Remainder with the divisor's sign (Python's `%`, numpy's `mod`).
    fn rem_floor(self, b: Self) -> Self;
    /// Remainder with the dividend's sign (C's `fmod`).
    fn rem_trunc(self, b: Self) -> Self;
    /// The larger value; NaN if either is NaN (numpy's `maximum`).
    fn max_nan(self, b: Self) -> Self;
    /// The smaller value; NaN if either is NaN (numpy's `minimum`).
    fn min_nan(self, b: Self) -> Self;
    /// `a ** e` for an integer exponent.
    fn pow_int(self, e: i64) -> Self;
    /// `a ** e` for a float exponent (integers truncate the result toward zero).
    fn pow_float(self, e: f64) -> Self;
    /// `|a|` (wrapping for the most negative integer).
    fn abs(self) -> Self;
    /// -1, 0 or 1 (NaN for NaN).
    fn sign(self) -> Self;
    /// True for a zero value.
    fn is_zero(self) -> bool;
}

macro_rules! impl_num_int {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const FLOAT: bool = false;
            fn add(self, b: Self) -> Self { self.wrapping_add(b) }
            fn sub(self, b: Self) -> Self { self.wrapping_sub(b) }
            fn mul(self, b: Self) -> Self { self.wrapping_mul(b) }
            fn div(self, b: Self) -> Self {
                if b == 0 { 0 } else { self.wrapping_div(b) }
            }
            fn rem_floor(self, b: Self) -> Self {
                let r = self.rem_trunc(b);
                #[allow(unused_comparisons)]
                let differ = (r < 0) != (b < 0);
                if r != 0 && differ { r.wrapping_add(b) } else { r }
            }
            fn rem_trunc(self, b: Self) -> Self {
                if b == 0 { 0 } else { self.wrapping_rem(b) }
            }
            fn max_nan(self, b: Self) -> Self { Ord::max(self, b) }
            fn min_nan(self, b: Self) -> Self { Ord::min(self, b) }
            fn pow_int(self, e: i64) -> Self {
                if e < 0 {
                    // The real result's magnitude is below 1 except for bases 1 and -1.
                    #[allow(unused_comparisons)]
                    let minus_one = self < 0 && self.wrapping_add(1) == 0;
                    return match (self, minus_one) {
                        (1, _) => 1,
                        (_, true) => if e % 2 == 0 { 1 } else { self },
                        _ => 0,
                    };
                }
                let (mut base, mut e, mut acc) = (self, e as u64, 1 as $t);
                while e > 0 {
                    if e & 1 == 1 { acc = acc.wrapping_mul(base); }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                acc
            }
            fn pow_float(self, e: f64) -> Self { Self::from_f64((self as f64).powf(e)) }
            #[allow(unused_comparisons)]
            fn abs(self) -> Self { if self < 0 { (0 as $t).wrapping_sub(self) } else { self } }
            #[allow(unused_comparisons)]
            fn sign(self) -> Self {
                if self < 0 { (0 as $t).wrapping_sub(1) } else if self > 0 { 1 } else { 0 }
            }
            fn is_zero(self) -> bool { self == 0 }
        }
    )*};
}
impl_num_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! impl_num_float {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const FLOAT: bool = true;
            fn add(self, b: Self) -> Self { Self::from_f64(self.to_f64() + b.to_f64()) }
            fn sub(self, b: Self) -> Self { Self::from_f64(self.to_f64() - b.to_f64()) }
            fn mul(self, b: Self) -> Self { Self::from_f64(self.to_f64() * b.to_f64()) }
            fn div(self, b: Self) -> Self { Self::from_f64(self.to_f64() / b.to_f64()) }
            fn rem_floor(self, b: Self) -> Self {
                Self::from_f64(floor_mod(self.to_f64(), b.to_f64()))
            }
            fn rem_trunc(self, b: Self) -> Self { Self::from_f64(self.to_f64() % b.to_f64()) }
            fn max_nan(self, b: Self) -> Self {
                let (x, y) = (self.to_f64(), b.to_f64());
                if x.is_nan() || y.is_nan() { Self::from_f64(f64::NAN) }
                else if x >= y { self } else { b }
            }
            fn min_nan(self, b: Self) -> Self {
                let (x, y) = (self.to_f64(), b.to_f64());
                if x.is_nan() || y.is_nan() { Self::from_f64(f64::NAN) }
                else if x <= y { self } else { b }
            }
            fn pow_int(self, e: i64) -> Self { self.pow_float(e as f64) }
            fn pow_float(self, e: f64) -> Self { Self::from_f64(self.to_f64().powf(e)) }
            fn abs(self) -> Self { Self::from_f64(self.to_f64().abs()) }
            fn sign(self) -> Self {
                let x = self.to_f64();
                Self::from_f64(if x > 0.0 { 1.0 } else if x < 0.0 { -1.0 } else { x * 0.0 })
            }
            fn is_zero(self) -> bool { self.to_f64() == 0.0 }
        }
    )*};
}
impl_num_float!(f32, f64, f16, bf16);

/// numpy's float `mod`: the remainder takes the divisor's sign; a zero remainder is a
/// zero of the divisor's sign; `x mod ±inf` is `x` or `±inf` by the same rule.
pub(crate) fn floor_mod(a: f64, b: f64) -> f64 {
    let m = a % b;
    if b == 0.0 {
        return m;
    }
    if m != 0.0 {
        if (b < 0.0) != (m < 0.0) {
            m + b
        } else {
            m
        }
    } else {
        0.0f64.copysign(b)
    }
}

/// Bit-level operations of integer types.
pub(crate) trait Int:
    Num
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
    + std::ops::Not<Output = Self>
{
    /// Left shift; 0 for a shift outside `0..BITS` (numpy's result).
    fn shl_sat(self, n: i64) -> Self;
    /// Right shift, arithmetic for signed types; for a shift outside `0..BITS`, 0 or
    /// -1 (the sign filling every bit, numpy's result).
    fn shr_sat(self, n: i64) -> Self;
}

macro_rules! impl_int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            fn shl_sat(self, n: i64) -> Self {
                if (0..<$t>::BITS as i64).contains(&n) { self.wrapping_shl(n as u32) } else { 0 }
            }
            #[allow(unused_comparisons)]
            fn shr_sat(self, n: i64) -> Self {
                if (0..<$t>::BITS as i64).contains(&n) {
                    self.wrapping_shr(n as u32)
                } else if self < 0 {
                    !0
                } else {
                    0
                }
            }
        }
    )*};
}
impl_int!(i8, i16, i32, i64, u8, u16, u32, u64);
