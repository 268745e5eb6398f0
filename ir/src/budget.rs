//! Limits that keep shape arithmetic honest and compile-time evaluation bounded.
//!
//! Sizes: every type inference produces is checked here, so an element count or byte
//! size that does not fit (a Reshape to 2^64-1 elements, ConvTranspose strides of 2^62,
//! a bound symbol of 2^64-1) is an error naming the node instead of a wrapped number
//! that a planner would turn into a 0-byte arena. `Dim` arithmetic saturates at
//! [`OVERFLOW`], which this check reports as an overflow.
//!
//! Fuel: constant evaluation during folding and inference runs with a deterministic
//! budget (elements read and produced, loop iterations), so a Loop of 2^62 constant
//! iterations stays unevaluated instead of hanging the compiler. Fuel is counted, never
//! timed, so the same model always folds the same way. Outside [`with_fuel`] (the
//! interpreter running a model) evaluation is unlimited.

use crate::dim::Dim;
use crate::error::{IrError, Result};
use crate::graph::TensorType;
use std::cell::Cell;

/// Largest byte size of one tensor any stage accepts (1 TiB): no inference model has a
/// bigger one, and sizes past it are wrapped negatives or overflows.
pub const MAX_TENSOR_BYTES: u64 = 1 << 40;

/// Largest rank inference gives a value whose rank it reads from another value's
/// length (a Reshape to a shape of unknown contents): past it the length is garbage.
pub const MAX_RANK: u64 = 64;

/// Checks a rank read from a value's length against [`MAX_RANK`].
pub fn rank_from(n: u64, what: &str) -> Result<usize> {
    if n <= MAX_RANK {
        Ok(n as usize)
    } else {
        Err(IrError::Shape(format!(
            "{what} has {n} entries, more than the {MAX_RANK} dims a tensor may have"
        )))
    }
}

/// The value `Dim` arithmetic saturates to when a known result overflows `u64`.
pub const OVERFLOW: u64 = u64::MAX;

/// Fuel of one constant evaluation during folding (elements read and produced, plus
/// [`LOOP_ITERATION_FUEL`] per loop iteration).
pub const FOLD_FUEL: u64 = 1 << 24;

/// Fuel one iteration of a Loop or Scan costs on top of what its body evaluates.
pub const LOOP_ITERATION_FUEL: u64 = 4096;

/// The element count of a concrete shape, `None` when it overflows `u64`.
pub fn elements(shape: &[usize]) -> Option<u64> {
    shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
}

/// The byte size of a tensor of `shape` and elements of `elem_bytes` bytes, `None` when
/// it overflows `u64`.
pub fn bytes(shape: &[usize], elem_bytes: usize) -> Option<u64> {
    elements(shape)?.checked_mul(elem_bytes as u64)
}

fn has_overflow(d: &Dim) -> bool {
    match d {
        Dim::Known(n) => *n == OVERFLOW,
        Dim::Sym(_) => false,
        Dim::Add(a, b) | Dim::Mul(a, b) | Dim::Div(a, b) => has_overflow(a) || has_overflow(b),
    }
}

/// Checks that a type's size fits: no overflowed dim, no known dim or product of known
/// dims whose byte size passes [`MAX_TENSOR_BYTES`]. Symbolic dims are checked once
/// bound.
pub fn check_type(ty: &TensorType) -> Result<()> {
    let too_big = |what: String| {
        Err(IrError::Shape(format!(
            "{ty}: {what} exceeds the {MAX_TENSOR_BYTES}-byte limit of one tensor"
        )))
    };
    if ty.shape.iter().any(has_overflow) {
        return Err(IrError::Shape(format!("{ty}: a dim overflows 64 bits")));
    }
    let size = ty.dtype.size() as u64;
    let mut known = 1u64;
    for d in &ty.shape {
        let Dim::Known(n) = d else { continue };
        if n.saturating_mul(size) > MAX_TENSOR_BYTES {
            return too_big(format!("dim {n}"));
        }
        known = known.saturating_mul(*n);
    }
    match known.checked_mul(size) {
        Some(b) if b <= MAX_TENSOR_BYTES => Ok(()),
        Some(b) => too_big(format!("its size of {b} bytes")),
        None => too_big(format!("its size ({known} elements of {size} bytes)")),
    }
}

thread_local! {
    static FUEL: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The message of the error fuel exhaustion raises (callers that fold treat it as "leave
/// the node unevaluated").
pub const EXHAUSTED: &str = "constant-evaluation budget exhausted";

/// Runs `f` with at most `fuel` units of evaluation (nested calls get the smaller of
/// their own and what is left outside; what they spend is spent outside too).
pub fn with_fuel<R>(fuel: u64, f: impl FnOnce() -> R) -> R {
    let outer = FUEL.with(Cell::get);
    let inner = outer.map_or(fuel, |o| o.min(fuel));
    FUEL.with(|c| c.set(Some(inner)));
    let r = f();
    let left = FUEL.with(Cell::get).unwrap_or(0);
    let spent = inner - left.min(inner);
    FUEL.with(|c| c.set(outer.map(|o| o.saturating_sub(spent))));
    r
}

/// True inside [`with_fuel`].
pub fn limited() -> bool {
    FUEL.with(Cell::get).is_some()
}

/// True when `units` more of fuel are left (always outside [`with_fuel`]); spends none.
pub fn fits(units: u64) -> bool {
    FUEL.with(Cell::get).is_none_or(|left| units <= left)
}

/// Spends `units` of fuel; an error when there is not that much left (and then none
/// is left). Free outside [`with_fuel`].
pub fn charge(units: u64) -> Result<()> {
    FUEL.with(|c| match c.get() {
        None => Ok(()),
        Some(left) if units <= left => {
            c.set(Some(left - units));
            Ok(())
        }
        Some(_) => {
            c.set(Some(0));
            Err(exhausted())
        }
    })
}

/// The error fuel exhaustion raises.
pub fn exhausted() -> IrError {
    IrError::Unsupported(EXHAUSTED.to_string())
}

/// True when `e` (or the error it wraps) is fuel exhaustion.
pub fn is_exhausted(e: &IrError) -> bool {
    match e {
        IrError::Unsupported(m) => m == EXHAUSTED,
        IrError::Node { source, .. } => is_exhausted(source),
        IrError::Shape(_)
        | IrError::DType { .. }
        | IrError::Attr { .. }
        | IrError::Invalid(_)
        | IrError::Parse { .. }
        | IrError::Memory(_)
        | IrError::Input { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn fuel_nests_and_is_free_outside() {
        assert!(charge(u64::MAX).is_ok());
        with_fuel(10, || {
            assert!(charge(4).is_ok());
            with_fuel(100, || {
                assert!(charge(5).is_ok());
                assert!(charge(2).is_err());
            });
            assert!(charge(1).is_err());
        });
        assert!(!limited());
    }

    #[test]
    fn sizes_are_checked() {
        let t = |s: Vec<Dim>| TensorType::new(DType::F32, s);
        assert!(check_type(&t(vec![Dim::Known(2), Dim::sym("n")])).is_ok());
        assert!(check_type(&t(vec![Dim::Known(1 << 20), Dim::Known(1 << 20)])).is_err());
        assert!(check_type(&t(vec![Dim::Known(0), Dim::Known(u64::MAX - 4)])).is_err());
        let ovf = Dim::sym("n").mul(&Dim::Known(OVERFLOW));
        assert!(check_type(&t(vec![ovf])).is_err());
        assert_eq!(bytes(&[usize::MAX, 2], 1), None);
    }
}
