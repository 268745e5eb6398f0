//! Comparing a result with a reference tensor, with NumPy's `allclose` rule for floats
//! (`|got - want| <= atol + rtol * |want|`, NaN equal to NaN, infinities equal when they
//! have the same sign) and exact equality for integers and booleans. Dtypes and shapes
//! must match exactly. A mismatch is described by its worst element, so a failure line
//! says where to look.

use gopt_ir::Tensor;
use serde::{Deserialize, Serialize};

/// Comparison tolerance for floating-point outputs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// Relative tolerance (scaled by the reference value's magnitude).
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl Tolerance {
    /// The default of the ONNX backend tests: rtol 1e-3, atol 1e-7.
    pub const DEFAULT: Tolerance = Tolerance {
        rtol: 1e-3,
        atol: 1e-7,
    };
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance::DEFAULT
    }
}

/// Checks `got` against `want`; the error says what differs (dtype, shape, or how many
/// values and which one is worst, with its multi-index and both values).
pub fn compare(got: &Tensor, want: &Tensor, tol: Tolerance) -> Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!(
            "dtype {} but expected {}",
            got.dtype(),
            want.dtype()
        ));
    }
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?} but expected {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let total = want.len();
    if got.dtype().is_float() {
        let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
        let mut bad = 0usize;
        // (index, excess ratio) of the worst mismatch; NaN-vs-number counts as infinite.
        let mut worst: Option<(usize, f64)> = None;
        for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
            if let Some(ratio) = float_mismatch(a, b, tol) {
                bad += 1;
                if worst.is_none_or(|(_, r)| ratio > r) {
                    worst = Some((i, ratio));
                }
            }
        }
        match worst {
            None => Ok(()),
            Some((i, _)) => {
                let (a, b) = (g[i], w[i]);
                Err(format!(
                    "{bad} of {total} values differ; worst at {:?}: got {a:e}, expected {b:e} \
                     (|diff| {:.3e} > tol {:.3e})",
                    multi_index(i, want.shape()),
                    (a - b).abs(),
                    tol.atol + tol.rtol * b.abs()
                ))
            }
        }
    } else {
        // Integers and booleans compare exactly; i64 holds every value of every integer
        // dtype but u64 (which maps one-to-one, so equality is preserved).
        let (g, w) = (got.to_i64_vec(), want.to_i64_vec());
        let mut bad = 0usize;
        let mut first = None;
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            if a != b {
                bad += 1;
                first.get_or_insert(i);
            }
        }
        match first {
            None => Ok(()),
            Some(i) => {
                let (a, b) = (value_str(got, i), value_str(want, i));
                Err(format!(
                    "{bad} of {total} values differ; first at {:?}: got {a}, expected {b}",
                    multi_index(i, want.shape())
                ))
            }
        }
    }
}

/// `None` when `a` is close enough to the reference `b`, else how far out it is, as the
/// ratio of the difference to the tolerance (infinite for NaN or infinity mismatches).
/// Relative L2 error `‖got - want‖ / ‖want‖ <= max` (shapes must match; the dtypes may
/// differ): the check for low-precision pipelines, whose elementwise errors are large
/// relative to tiny values but small over a whole tensor.
pub fn compare_rel_l2(got: &Tensor, want: &Tensor, max: f64) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?}, expected {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let mut num = 0.0;
    let mut den = 0.0;
    for (a, b) in g.iter().zip(&w) {
        if a.is_nan() != b.is_nan() {
            return Err("NaN where the reference has a number, or the reverse".into());
        }
        if a.is_nan() {
            continue;
        }
        num += (a - b) * (a - b);
        den += b * b;
    }
    let rel = if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    };
    if rel <= max {
        Ok(())
    } else {
        Err(format!("relative L2 error {rel:.3e} > {max:.1e}"))
    }
}

fn float_mismatch(a: f64, b: f64, tol: Tolerance) -> Option<f64> {
    if a == b || (a.is_nan() && b.is_nan()) {
        return None;
    }
    if a.is_nan() || b.is_nan() || a.is_infinite() || b.is_infinite() {
        return Some(f64::INFINITY);
    }
    let diff = (a - b).abs();
    let bound = tol.atol + tol.rtol * b.abs();
    if diff <= bound {
        None
    } else if bound > 0.0 {
        Some(diff / bound)
    } else {
        Some(f64::INFINITY)
    }
}

/// The row-major multi-index of flat index `i` in `shape`.
pub fn multi_index(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (k, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[k] = i % d;
            i /= d;
        }
    }
    idx
}

/// Element `i` printed in its own type (u64 values above i64::MAX print correctly).
fn value_str(t: &Tensor, i: usize) -> String {
    gopt_ir::with_tensor!(t, a => a.iter().nth(i).map(|x| format!("{x:?}")).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(shape: &[usize], v: &[f64]) -> Tensor {
        Tensor::from_f64s(gopt_ir::DType::F32, shape, v).expect("shape fits")
    }

    #[test]
    fn allclose_rule() {
        let tol = Tolerance {
            rtol: 1e-3,
            atol: 1e-5,
        };
        let want = f32s(&[3], &[1.0, f64::NAN, f64::INFINITY]);
        assert!(compare(&f32s(&[3], &[1.0009, f64::NAN, f64::INFINITY]), &want, tol).is_ok());
        let e = compare(&f32s(&[3], &[1.1, f64::NAN, f64::INFINITY]), &want, tol).unwrap_err();
        assert!(e.contains("1 of 3 values differ; worst at [0]"), "{e}");
        let e = compare(&f32s(&[3], &[1.0, 0.0, f64::INFINITY]), &want, tol).unwrap_err();
        assert!(e.contains("worst at [1]"), "{e}");
        let e = compare(&f32s(&[3], &[1.0, f64::NAN, f64::NEG_INFINITY]), &want, tol).unwrap_err();
        assert!(e.contains("worst at [2]"), "{e}");
    }

    #[test]
    fn shapes_and_dtypes_must_match() {
        let tol = Tolerance::DEFAULT;
        let a = f32s(&[2, 2], &[1.0; 4]);
        assert!(compare(&a, &f32s(&[4], &[1.0; 4]), tol)
            .unwrap_err()
            .contains("shape [2, 2] but expected [4]"));
        assert!(compare(&a, &a.cast(gopt_ir::DType::F64), tol)
            .unwrap_err()
            .contains("dtype f32 but expected f64"));
    }

    #[test]
    fn integers_are_exact() {
        let a = Tensor::from_i64s(&[1, 2, 3]);
        let b = Tensor::from_i64s(&[1, 2, 4]);
        let e = compare(&a, &b, Tolerance::DEFAULT).unwrap_err();
        assert!(e.contains("first at [2]: got 3, expected 4"), "{e}");
        assert_eq!(multi_index(5, &[2, 3]), vec![1, 2]);
    }
}
