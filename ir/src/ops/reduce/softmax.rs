//! Softmax and LogSoftmax along one axis (opset 13: the axis alone, not the flattened
//! trailing block), and the cumulative ops CumSum and CumProd. Each works lane by lane
//! on a copy of the input, in place.

use super::common::{scalar_int, to_dtype, with_float, Real};
use crate::error::{unsupported, Result};
use crate::graph::Node;
use crate::map_tensor;
use crate::ops::util::{input, norm_axis};
use crate::tensor::{Elem, Tensor};
use ndarray::{ArrayD, ArrayViewMut1, Axis};

/// Softmax (or LogSoftmax when `log`) of `x` along its `axis` attribute (default -1).
pub fn eval_softmax(node: &Node, inputs: &[Option<&Tensor>], log: bool) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let axis = norm_axis(node.attrs.int_or("axis", -1)?, x.rank())?;
    with_float!(x, node.op.name(), a => {
        let mut y = a.into_owned();
        softmax_along(&mut y, axis, log);
        Ok(to_dtype(y, x.dtype()))
    })
}

/// Softmax (or LogSoftmax) in place along `axis`, shifted by each lane's maximum so
/// `exp` cannot overflow.
pub fn softmax_along<F: Real>(y: &mut ArrayD<F>, axis: usize, log: bool) {
    for mut lane in y.lanes_mut(Axis(axis)) {
        softmax_lane(&mut lane, log);
    }
}

fn softmax_lane<F: Real>(lane: &mut ArrayViewMut1<F>, log: bool) {
    let m = lane.iter().fold(F::neg_infinity(), |m, &x| m.max(x));
    if log {
        let s: F = lane.iter().map(|&x| (x - m).exp()).sum();
        let shift = m + s.ln();
        lane.mapv_inplace(|x| x - shift);
    } else {
        lane.mapv_inplace(|x| (x - m).exp());
        let s: F = lane.iter().copied().sum();
        lane.mapv_inplace(|x| x / s);
    }
}

/// CumSum (`prod` false) or CumProd along the axis given as input 1, with the
/// `exclusive` and `reverse` attributes.
pub fn eval_cumulative(node: &Node, inputs: &[Option<&Tensor>], prod: bool) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let axis = norm_axis(scalar_int(input(inputs, 1)?, "the axis input")?, x.rank())?;
    let exclusive = node.attrs.int_or("exclusive", 0)? != 0;
    let reverse = node.attrs.int_or("reverse", 0)? != 0;
    let scan = Scan {
        axis,
        exclusive,
        reverse,
    };
    let dt = x.dtype();
    if dt.is_float() {
        return with_float!(x, node.op.name(), a => {
            let mut y = a.into_owned();
            if prod {
                scan.run(&mut y, Real::lit(1.0), |p, v| p * v);
            } else {
                scan.run(&mut y, Real::lit(0.0), |s, v| s + v);
            }
            Ok(to_dtype(y, dt))
        });
    }
    if !dt.is_int() {
        return unsupported(format!("{} does not take {dt} data", node.op.name()));
    }
    // Integers: exact 64-bit wrapping arithmetic, truncated back to the width.
    Ok(map_tensor!(x, a => {
        let mut y = a.clone();
        let f = |u: i64, v: i64| if prod { u.wrapping_mul(v) } else { u.wrapping_add(v) };
        let init = Elem::from_i64(if prod { 1 } else { 0 });
        scan.run(&mut y, init, |u, v| Elem::from_i64(f(Elem::to_i64(u), Elem::to_i64(v))));
        y
    }))
}

/// Where and how a cumulative op runs.
struct Scan {
    axis: usize,
    exclusive: bool,
    reverse: bool,
}

impl Scan {
    /// Scans each lane of `y` in place, starting from `init` and combining with `f`.
    fn run<T: Copy>(&self, y: &mut ArrayD<T>, init: T, f: impl Fn(T, T) -> T) {
        for mut lane in y.lanes_mut(Axis(self.axis)) {
            let n = lane.len();
            let mut acc = init;
            for step in 0..n {
                let i = if self.reverse { n - 1 - step } else { step };
                let next = f(acc, lane[i]);
                lane[i] = if self.exclusive { acc } else { next };
                acc = next;
            }
        }
    }
}
