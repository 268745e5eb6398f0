//! Unary math without attributes: Neg, Abs, Sign (every numeric type), and the float
//! functions (roots, exponentials, rounding, trigonometry, Sigmoid, Erf and the
//! attribute-free activations Softplus, Softsign, Mish, HardSwish).

use super::kernel::{fmap, map, Num};
use crate::error::{unsupported, Result};
use crate::tensor::Tensor;
use ndarray::ArrayD;

/// A unary op of this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unary {
    Neg,
    Abs,
    Sign,
    Reciprocal,
    Sqrt,
    Exp,
    Log,
    Ceil,
    Floor,
    Round,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Tanh,
    Sigmoid,
    Erf,
    Softplus,
    Softsign,
    Mish,
    HardSwish,
}

/// Applies `op` to every element of `x`.
pub(crate) fn unary(op: Unary, x: &Tensor) -> Result<Tensor> {
    match op {
        Unary::Neg => neg(x),
        Unary::Abs => num_match!(x, a => Ok(num_map(a, Num::abs)), o => not_num("Abs", o)),
        Unary::Sign => num_match!(x, a => Ok(num_map(a, Num::sign)), o => not_num("Sign", o)),
        Unary::Reciprocal => float(x, op, |v| 1.0 / v),
        Unary::Sqrt => float(x, op, f64::sqrt),
        Unary::Exp => float(x, op, f64::exp),
        Unary::Log => float(x, op, f64::ln),
        Unary::Ceil => float(x, op, f64::ceil),
        Unary::Floor => float(x, op, f64::floor),
        Unary::Round => float(x, op, f64::round_ties_even),
        Unary::Sin => float(x, op, f64::sin),
        Unary::Cos => float(x, op, f64::cos),
        Unary::Tan => float(x, op, f64::tan),
        Unary::Asin => float(x, op, f64::asin),
        Unary::Acos => float(x, op, f64::acos),
        Unary::Atan => float(x, op, f64::atan),
        Unary::Sinh => float(x, op, f64::sinh),
        Unary::Cosh => float(x, op, f64::cosh),
        Unary::Asinh => float(x, op, f64::asinh),
        Unary::Acosh => float(x, op, f64::acosh),
        Unary::Atanh => float(x, op, f64::atanh),
        Unary::Tanh => float(x, op, f64::tanh),
        Unary::Sigmoid => float(x, op, sigmoid),
        Unary::Erf => float(x, op, libm::erf),
        Unary::Softplus => float(x, op, softplus),
        Unary::Softsign => float(x, op, |v| v / (1.0 + v.abs())),
        Unary::Mish => float(x, op, |v| v * softplus(v).tanh()),
        Unary::HardSwish => float(x, op, |v| v * (v / 6.0 + 0.5).clamp(0.0, 1.0)),
    }
}

/// `1 / (1 + e^-x)`, evaluated so that neither branch overflows.
pub(crate) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `ln(1 + e^x)`, evaluated without overflow for large `x`.
pub(crate) fn softplus(x: f64) -> f64 {
    if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}

fn num_map<T: Num>(a: &ArrayD<T>, f: fn(T) -> T) -> Tensor {
    T::wrap(map(a, f))
}

fn neg(x: &Tensor) -> Result<Tensor> {
    Ok(match x {
        Tensor::I8(a) => Tensor::I8(map(a, i8::wrapping_neg)),
        Tensor::I16(a) => Tensor::I16(map(a, i16::wrapping_neg)),
        Tensor::I32(a) => Tensor::I32(map(a, i32::wrapping_neg)),
        Tensor::I64(a) => Tensor::I64(map(a, i64::wrapping_neg)),
        other => return float_named(other, "Neg", |v| -v),
    })
}

fn float(x: &Tensor, op: Unary, f: impl Fn(f64) -> f64 + Sync + Send) -> Result<Tensor> {
    float_named(x, op_name(op), f)
}

fn float_named(x: &Tensor, name: &str, f: impl Fn(f64) -> f64 + Sync + Send) -> Result<Tensor> {
    float_match!(x, a => Ok(fmap(a, f)), o => unsupported(format!("{name} on {} (takes a float type)", o.dtype())))
}

fn not_num(name: &str, t: &Tensor) -> Result<Tensor> {
    unsupported(format!("{name} on {} (takes a numeric type)", t.dtype()))
}

fn op_name(op: Unary) -> &'static str {
    match op {
        Unary::Neg => "Neg",
        Unary::Abs => "Abs",
        Unary::Sign => "Sign",
        Unary::Reciprocal => "Reciprocal",
        Unary::Sqrt => "Sqrt",
        Unary::Exp => "Exp",
        Unary::Log => "Log",
        Unary::Ceil => "Ceil",
        Unary::Floor => "Floor",
        Unary::Round => "Round",
        Unary::Sin => "Sin",
        Unary::Cos => "Cos",
        Unary::Tan => "Tan",
        Unary::Asin => "Asin",
        Unary::Acos => "Acos",
        Unary::Atan => "Atan",
        Unary::Sinh => "Sinh",
        Unary::Cosh => "Cosh",
        Unary::Asinh => "Asinh",
        Unary::Acosh => "Acosh",
        Unary::Atanh => "Atanh",
        Unary::Tanh => "Tanh",
        Unary::Sigmoid => "Sigmoid",
        Unary::Erf => "Erf",
        Unary::Softplus => "Softplus",
        Unary::Softsign => "Softsign",
        Unary::Mish => "Mish",
        Unary::HardSwish => "HardSwish",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    fn f32s(v: &[f32]) -> Tensor {
        Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).unwrap())
    }

    #[test]
    fn round_is_half_to_even() {
        let x = f32s(&[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -2.6]);
        let y = unary(Unary::Round, &x).unwrap().to_f64_vec();
        assert_eq!(y, vec![0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, 3.0, -3.0]);
    }

    #[test]
    fn sign_and_abs_of_integers() {
        let x = Tensor::I8(ArrayD::from_shape_vec(IxDyn(&[4]), vec![-128, -3, 0, 5]).unwrap());
        assert_eq!(
            unary(Unary::Sign, &x).unwrap().to_i64_vec(),
            vec![-1, -1, 0, 1]
        );
        assert_eq!(
            unary(Unary::Abs, &x).unwrap().to_i64_vec(),
            vec![-128, 3, 0, 5]
        );
        assert_eq!(
            unary(Unary::Neg, &x).unwrap().to_i64_vec(),
            vec![-128, 3, 0, -5]
        );
    }

    #[test]
    fn float_ops_reject_integers() {
        let x = Tensor::I32(ArrayD::from_shape_vec(IxDyn(&[1]), vec![4]).unwrap());
        assert!(matches!(
            unary(Unary::Sqrt, &x),
            Err(crate::IrError::Unsupported(_))
        ));
        let u = Tensor::U8(ArrayD::from_shape_vec(IxDyn(&[1]), vec![4]).unwrap());
        assert!(unary(Unary::Neg, &u).is_err());
    }

    #[test]
    fn sigmoid_and_softplus_are_stable() {
        let x = f32s(&[-1000.0, 0.0, 1000.0]);
        assert_eq!(
            unary(Unary::Sigmoid, &x).unwrap().to_f64_vec(),
            vec![0.0, 0.5, 1.0]
        );
        let s = unary(Unary::Softplus, &x).unwrap().to_f64_vec();
        assert_eq!(s[0], 0.0);
        assert!((s[1] - std::f64::consts::LN_2).abs() < 1e-7);
        assert_eq!(s[2], 1000.0);
    }

    #[test]
    fn erf_matches_known_values() {
        let y = unary(Unary::Erf, &f32s(&[0.0, 0.5, -1.0]))
            .unwrap()
            .to_f64_vec();
        assert_eq!(y[0], 0.0);
        assert!((y[1] - 0.520_499_9).abs() < 1e-6);
        assert!((y[2] + 0.842_700_8).abs() < 1e-6);
    }
}
