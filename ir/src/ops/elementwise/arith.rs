//! Numeric binary and variadic ops: Add, Sub, Mul, Div, Mod, Pow, Max, Min, Sum, Mean
//! and Clip. Integers wrap and divide truncating toward zero (C's and ONNX Runtime's
//! semantics); Mod follows numpy (`fmod=0`: sign of the divisor; `fmod=1`: sign of the
//! dividend); Max/Min propagate NaN like numpy's `maximum`/`minimum`.

use super::kernel::{broadcast_zip, fmap, same_as, Num};
use crate::error::{unsupported, IrError, Result};
use crate::ops::util::opt_input;
use crate::tensor::{Elem, Tensor};
use ndarray::ArrayD;

/// A same-dtype binary arithmetic op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    /// Remainder with the divisor's sign (`fmod=0`).
    Mod,
    /// Remainder with the dividend's sign (`fmod=1`).
    Fmod,
}

/// `a op b`, broadcasting.
pub(crate) fn binary(op: Arith, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    fn go<T: Num>(op: Arith, a: &ArrayD<T>, b: &Tensor) -> Result<Tensor> {
        let b = same_as(a, b)?;
        let divides = matches!(op, Arith::Div | Arith::Mod | Arith::Fmod);
        if !T::FLOAT && divides && b.iter().any(|v| v.is_zero()) {
            return Err(IrError::Invalid(format!(
                "integer {op:?} by zero ({} divisor)",
                T::DTYPE
            )));
        }
        let r = match op {
            Arith::Add => broadcast_zip(a, b, T::add),
            Arith::Sub => broadcast_zip(a, b, T::sub),
            Arith::Mul => broadcast_zip(a, b, T::mul),
            Arith::Div => broadcast_zip(a, b, T::div),
            Arith::Mod => broadcast_zip(a, b, T::rem_floor),
            Arith::Fmod => broadcast_zip(a, b, T::rem_trunc),
        }?;
        Ok(T::wrap(r))
    }
    num_match!(a, x => go(op, x, b), o => unsupported(format!("{op:?} on {}", o.dtype())))
}

/// `base ** exponent`; the exponent may have another numeric dtype than the base, and
/// the result has the base's dtype (an integer base truncates a fractional result).
pub(crate) fn pow(base: &Tensor, exponent: &Tensor) -> Result<Tensor> {
    enum Exp {
        Int(ArrayD<i64>),
        Float(ArrayD<f64>),
    }
    fn go<T: Num>(x: &ArrayD<T>, e: &Exp) -> Result<Tensor> {
        Ok(T::wrap(match e {
            Exp::Int(e) => broadcast_zip(x, e, T::pow_int)?,
            Exp::Float(e) => broadcast_zip(x, e, T::pow_float)?,
        }))
    }
    let e = match exponent {
        // u64 exponents past i64::MAX saturate: any base but 0, 1, -1 overflows anyway.
        Tensor::U64(a) => Exp::Int(a.mapv(|v| i64::try_from(v).unwrap_or(i64::MAX))),
        t if t.dtype().is_int() => Exp::Int(int_match!(t, a => a.mapv(|v| v.to_i64()), o => {
            return unsupported(format!("Pow exponent of type {}", o.dtype()))
        })),
        t if t.dtype().is_float() => {
            Exp::Float(float_match!(t, a => a.mapv(|v| v.to_f64()), o => {
                return unsupported(format!("Pow exponent of type {}", o.dtype()))
            }))
        }
        t => return unsupported(format!("Pow exponent of type {}", t.dtype())),
    };
    num_match!(base, x => go(x, &e), o => unsupported(format!("Pow on {}", o.dtype())))
}

/// A variadic op over inputs of one dtype, broadcasting them all together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variadic {
    Max,
    Min,
    Sum,
    Mean,
}

/// Folds `op` over every present input, left to right.
pub(crate) fn variadic(op: Variadic, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    fn go<T: Num>(op: Variadic, first: &ArrayD<T>, rest: &[&Tensor]) -> Result<Tensor> {
        let f: fn(T, T) -> T = match op {
            Variadic::Max => T::max_nan,
            Variadic::Min => T::min_nan,
            Variadic::Sum | Variadic::Mean => T::add,
        };
        let mut acc = first.clone();
        for t in rest {
            acc = broadcast_zip(&acc, same_as(first, t)?, f)?;
        }
        if op == Variadic::Mean {
            let n = (rest.len() + 1) as f64;
            return Ok(fmap(&acc, |v| v / n));
        }
        Ok(T::wrap(acc))
    }
    let present: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
    let (first, rest) = present
        .split_first()
        .ok_or_else(|| IrError::Invalid(format!("{op:?} needs at least one input")))?;
    num_match!(first, x => go(op, x, rest), o => unsupported(format!("{op:?} on {}", o.dtype())))
}

/// Clip: `min(max(x, lo), hi)` with `lo`/`hi` the optional inputs 1 and 2 (absent
/// bounds do not clip). NaN in `x` stays NaN; `lo > hi` gives `hi`, as numpy's `clip`.
pub(crate) fn clip(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    fn go<T: Num>(x: &ArrayD<T>, lo: Option<&Tensor>, hi: Option<&Tensor>) -> Result<Tensor> {
        let mut y = x.clone();
        if let Some(lo) = lo {
            y = broadcast_zip(&y, same_as(x, lo)?, T::max_nan)?;
        }
        if let Some(hi) = hi {
            y = broadcast_zip(&y, same_as(x, hi)?, T::min_nan)?;
        }
        Ok(T::wrap(y))
    }
    let x = crate::ops::util::input(inputs, 0)?;
    let (lo, hi) = (opt_input(inputs, 1), opt_input(inputs, 2));
    num_match!(x, a => go(a, lo, hi), o => unsupported(format!("Clip on {}", o.dtype())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    fn t<T: Elem>(shape: &[usize], v: Vec<T>) -> Tensor {
        T::wrap(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
    }

    #[test]
    fn integer_mod_signs() {
        let x = t(&[6], vec![-4i32, 7, 5, 4, -7, 8]);
        let y = t(&[6], vec![2i32, -3, 8, -2, 3, 5]);
        let m = binary(Arith::Mod, &x, &y).unwrap().to_i64_vec();
        assert_eq!(m, vec![0, -2, 5, 0, 2, 3]);
        let f = binary(Arith::Fmod, &x, &y).unwrap().to_i64_vec();
        assert_eq!(f, vec![0, 1, 5, 0, -1, 3]);
        let zero = t(&[1], vec![0i32]);
        assert!(binary(Arith::Mod, &x, &zero).is_err());
    }

    #[test]
    fn float_mod_edge_cases() {
        let inf = f64::INFINITY;
        let x = t(&[6], vec![-0.0f32, 0.0, -3.0, 3.0, -4.3, 1.0]);
        let y = t(&[6], vec![2.0f32, -2.0, inf as f32, -inf as f32, 2.1, 0.0]);
        let m = binary(Arith::Mod, &x, &y).unwrap().to_f64_vec();
        assert!(m[0] == 0.0 && m[0].is_sign_positive());
        assert!(m[1] == 0.0 && m[1].is_sign_negative());
        assert_eq!(&m[2..4], &[inf, -inf]);
        assert!((m[4] - 2.0).abs() < 1e-5, "{m:?}");
        assert!(m[5].is_nan());
    }

    #[test]
    fn integer_division_truncates() {
        let x = t(&[4], vec![-3i32, 3, -3, 3]);
        let y = t(&[4], vec![2i32, 2, -2, -2]);
        let d = binary(Arith::Div, &x, &y).unwrap().to_i64_vec();
        assert_eq!(d, vec![-1, 1, 1, -1]);
        let w = binary(Arith::Add, &t(&[1], vec![i64::MAX]), &t(&[1], vec![1i64])).unwrap();
        assert_eq!(w.to_i64_vec(), vec![i64::MIN]);
    }

    #[test]
    fn pow_mixes_dtypes() {
        let fi = pow(&t(&[3], vec![1.0f32, 2.0, 3.0]), &t(&[3], vec![4i64, 5, 6])).unwrap();
        assert_eq!(fi, t(&[3], vec![1.0f32, 32.0, 729.0]));
        let i_f = pow(&t(&[3], vec![1i32, 2, 3]), &t(&[3], vec![4.0f32, 5.0, 0.5])).unwrap();
        assert_eq!(i_f, t(&[3], vec![1i32, 32, 1]));
        let ii = pow(
            &t(&[4], vec![3i64, 2, -1, 2]),
            &t(&[4], vec![39i64, -1, -3, 62]),
        )
        .unwrap();
        assert_eq!(ii, t(&[4], vec![3i64.pow(39), 0, -1, 1 << 62]));
        let fu = pow(&t(&[1], vec![2.0f64]), &t(&[1], vec![u64::MAX])).unwrap();
        assert_eq!(fu.to_f64_vec(), vec![f64::INFINITY]);
    }

    #[test]
    fn max_min_propagate_nan() {
        let nan = f32::NAN;
        let a = t(&[3], vec![1.0f32, nan, 3.0]);
        let b = t(&[3], vec![nan, 2.0, 1.0]);
        let c = t(&[1], vec![2.0f32]);
        let mx = variadic(Variadic::Max, &[Some(&a), Some(&b), Some(&c)]).unwrap();
        let v = mx.to_f64_vec();
        assert!(v[0].is_nan() && v[1].is_nan() && v[2] == 3.0);
        let mn = variadic(Variadic::Min, &[Some(&a), Some(&c)])
            .unwrap()
            .to_f64_vec();
        assert!(mn[0] == 1.0 && mn[1].is_nan() && mn[2] == 2.0);
        let mean = variadic(Variadic::Mean, &[Some(&c), Some(&t(&[1], vec![3.0f32]))]);
        assert_eq!(mean.unwrap().to_f64_vec(), vec![2.5]);
    }

    #[test]
    fn broadcasting_awkward_sizes() {
        let (p, q, r) = (3, 50, 783);
        let a: Vec<f32> = (0..p * q).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..r).map(|i| (i as f32) * 0.5).collect();
        let s = binary(Arith::Sub, &t(&[p, q, 1], a), &t(&[r], b)).unwrap();
        assert_eq!(s.shape(), &[p, q, r]);
        let v = s.to_f64_vec();
        for (i, j, k) in [(0, 0, 0), (2, 49, 782), (1, 17, 400)] {
            let want = (i * q + j) as f64 - k as f64 * 0.5;
            assert_eq!(v[(i * q + j) * r + k], want);
        }
        let big = t(&[p, q, r], vec![1u8; p * q * r]);
        let sum = binary(Arith::Add, &big, &t(&[q, 1], (0..q as u8).collect())).unwrap();
        assert_eq!(sum.to_i64_vec()[(2 * q + 49) * r + 782], 50);
        assert!(binary(
            Arith::Add,
            &t(&[3], vec![1.0f32; 3]),
            &t(&[50], vec![1.0f32; 50])
        )
        .is_err());
    }

    #[test]
    fn clip_with_optional_bounds() {
        let x = t(&[4], vec![-2i8, 0, 2, 100]);
        let lo = t(&[], vec![0i8]);
        let hi = t(&[], vec![1i8]);
        assert_eq!(
            clip(&[Some(&x), Some(&lo)]).unwrap().to_i64_vec(),
            vec![0, 0, 2, 100]
        );
        assert_eq!(
            clip(&[Some(&x), None, Some(&hi)]).unwrap().to_i64_vec(),
            vec![-2, 0, 1, 1]
        );
        let (lo2, hi2) = (t(&[], vec![2i8]), t(&[], vec![1i8]));
        assert_eq!(
            clip(&[Some(&x), Some(&lo2), Some(&hi2)])
                .unwrap()
                .to_i64_vec(),
            vec![1; 4]
        );
    }
}
