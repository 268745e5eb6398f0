//! Comparisons (Equal, Less, ... on every dtype, giving bool), boolean logic (Not,
//! And, Or, Xor), bitwise ops and BitShift on integers, IsNaN/IsInf, and Where.

use super::kernel::{broadcast_zip, broadcast_zip3, map, same_as, Int};
use crate::error::{unsupported, Result};
use crate::graph::Node;
use crate::tensor::{Elem, Tensor};
use crate::with_tensor;
use ndarray::ArrayD;

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

/// `a op b` element by element (IEEE semantics for floats: NaN compares false).
pub(crate) fn compare(op: Cmp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    fn go<T: Elem>(op: Cmp, a: &ArrayD<T>, b: &Tensor) -> Result<Tensor> {
        let b = same_as(a, b)?;
        Ok(Tensor::Bool(match op {
            Cmp::Eq => broadcast_zip(a, b, |x, y| x == y)?,
            Cmp::Lt => broadcast_zip(a, b, |x, y| x < y)?,
            Cmp::Le => broadcast_zip(a, b, |x, y| x <= y)?,
            Cmp::Gt => broadcast_zip(a, b, |x, y| x > y)?,
            Cmp::Ge => broadcast_zip(a, b, |x, y| x >= y)?,
        }))
    }
    with_tensor!(a, x => go(op, x, b))
}

/// A binary boolean op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Logic {
    And,
    Or,
    Xor,
}

/// `a op b` on bool tensors.
pub(crate) fn logic(op: Logic, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (Tensor::Bool(x), Tensor::Bool(y)) = (a, b) else {
        return unsupported(format!(
            "{op:?} on {} and {} (takes bool)",
            a.dtype(),
            b.dtype()
        ));
    };
    Ok(Tensor::Bool(match op {
        Logic::And => broadcast_zip(x, y, |p, q| p & q)?,
        Logic::Or => broadcast_zip(x, y, |p, q| p | q)?,
        Logic::Xor => broadcast_zip(x, y, |p, q| p ^ q)?,
    }))
}

/// Boolean negation.
pub(crate) fn not(a: &Tensor) -> Result<Tensor> {
    match a {
        Tensor::Bool(x) => Ok(Tensor::Bool(map(x, |p| !p))),
        t => unsupported(format!("Not on {} (takes bool)", t.dtype())),
    }
}

/// A binary bitwise op on integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bitwise {
    And,
    Or,
    Xor,
    /// BitShift LEFT.
    Shl,
    /// BitShift RIGHT.
    Shr,
}

/// `a op b` on integer tensors of one dtype. Shifts by a negative amount or by at
/// least the width give 0 (or -1 for a right shift of a negative value), as numpy.
pub(crate) fn bitwise(op: Bitwise, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    fn go<T: Int>(op: Bitwise, a: &ArrayD<T>, b: &Tensor) -> Result<Tensor> {
        let b = same_as(a, b)?;
        Ok(T::wrap(match op {
            Bitwise::And => broadcast_zip(a, b, |x, y| x & y)?,
            Bitwise::Or => broadcast_zip(a, b, |x, y| x | y)?,
            Bitwise::Xor => broadcast_zip(a, b, |x, y| x ^ y)?,
            Bitwise::Shl => broadcast_zip(a, b, |x, y| x.shl_sat(y.to_i64()))?,
            Bitwise::Shr => broadcast_zip(a, b, |x, y| x.shr_sat(y.to_i64()))?,
        }))
    }
    int_match!(a, x => go(op, x, b), o => unsupported(format!("{op:?} on {} (takes an integer type)", o.dtype())))
}

/// Bitwise complement of an integer tensor.
pub(crate) fn bitwise_not(a: &Tensor) -> Result<Tensor> {
    fn go<T: Int>(a: &ArrayD<T>) -> Tensor {
        T::wrap(map(a, |x| !x))
    }
    int_match!(a, x => Ok(go(x)), o => unsupported(format!("BitwiseNot on {} (takes an integer type)", o.dtype())))
}

/// True where the element is NaN.
pub(crate) fn is_nan(a: &Tensor) -> Result<Tensor> {
    fn go<T: Elem>(a: &ArrayD<T>) -> Tensor {
        Tensor::Bool(map(a, |x| x.to_f64().is_nan()))
    }
    float_match!(a, x => Ok(go(x)), o => unsupported(format!("IsNaN on {} (takes a float type)", o.dtype())))
}

/// True where the element is an infinity of a sign the attributes `detect_positive`
/// and `detect_negative` (both default 1) ask for.
pub(crate) fn is_inf(node: &Node, a: &Tensor) -> Result<Tensor> {
    fn go<T: Elem>(a: &ArrayD<T>, pos: bool, neg: bool) -> Tensor {
        Tensor::Bool(map(a, |x| {
            let v = x.to_f64();
            (pos && v == f64::INFINITY) || (neg && v == f64::NEG_INFINITY)
        }))
    }
    let pos = node.attrs.int_or("detect_positive", 1)? != 0;
    let neg = node.attrs.int_or("detect_negative", 1)? != 0;
    float_match!(a, x => Ok(go(x, pos, neg)), o => unsupported(format!("IsInf on {} (takes a float type)", o.dtype())))
}

/// `cond ? x : y`, broadcasting all three.
pub(crate) fn where_(cond: &Tensor, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    fn go<T: Elem>(c: &ArrayD<bool>, x: &ArrayD<T>, y: &Tensor) -> Result<Tensor> {
        let y = same_as(x, y)?;
        Ok(T::wrap(broadcast_zip3(
            c,
            x,
            y,
            |c, a, b| if c { a } else { b },
        )?))
    }
    let Tensor::Bool(c) = cond else {
        return unsupported(format!(
            "Where condition of type {} (takes bool)",
            cond.dtype()
        ));
    };
    with_tensor!(x, a => go(c, a, y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    fn t<T: Elem>(v: Vec<T>) -> Tensor {
        T::wrap(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap())
    }

    #[test]
    fn shifts_saturate_like_numpy() {
        let x = t(vec![-8i8, 4, -1, 64, 1]);
        let y = t(vec![8i8, 9, 127, 1, 7]);
        assert_eq!(
            bitwise(Bitwise::Shr, &x, &y).unwrap().to_i64_vec(),
            vec![-1, 0, -1, 32, 0]
        );
        assert_eq!(
            bitwise(Bitwise::Shl, &x, &y).unwrap().to_i64_vec(),
            vec![0, 0, 0, -128, -128]
        );
        let neg = t(vec![-1i32, -32, -64]);
        let z = t(vec![-8i32, 4, -1]);
        assert_eq!(
            bitwise(Bitwise::Shr, &z, &neg).unwrap().to_i64_vec(),
            vec![-1, 0, -1]
        );
        let u = t(vec![16u64, 4, 1]);
        assert_eq!(
            bitwise(Bitwise::Shr, &u, &t(vec![1u64, 2, 64]))
                .unwrap()
                .to_i64_vec(),
            vec![8, 1, 0]
        );
    }

    #[test]
    fn comparisons_give_bool() {
        let nan = f32::NAN;
        let a = t(vec![1.0f32, nan, 3.0]);
        let b = t(vec![1.0f32, nan, 2.0]);
        assert_eq!(
            compare(Cmp::Eq, &a, &b).unwrap(),
            t(vec![true, false, false])
        );
        assert_eq!(
            compare(Cmp::Ge, &a, &b).unwrap(),
            t(vec![true, false, true])
        );
        let big = t(vec![u64::MAX]);
        assert_eq!(
            compare(Cmp::Gt, &big, &t(vec![u64::MAX - 1])).unwrap(),
            t(vec![true])
        );
        assert!(compare(Cmp::Lt, &a, &t(vec![1i32])).is_err());
    }

    #[test]
    fn where_broadcasts_three_ways() {
        let c = Tensor::Bool(ArrayD::from_shape_vec(IxDyn(&[2, 1]), vec![true, false]).unwrap());
        let x = t(vec![1i64, 2, 3]);
        let y = t(vec![9i64]);
        let w = where_(&c, &x, &y).unwrap();
        assert_eq!(w.shape(), &[2, 3]);
        assert_eq!(w.to_i64_vec(), vec![1, 2, 3, 9, 9, 9]);
    }
}
