//! Activations with attributes (Relu, LeakyRelu, Elu, Selu, Celu, HardSigmoid,
//! ThresholdedRelu, Shrink, Gelu, Swish) and PRelu, whose slope is a second input that
//! broadcasts to X's shape. Attribute defaults are ONNX's.

use super::kernel::{broadcast_zip, fmap, map, same_as, Num};
use super::math::sigmoid;
use crate::error::{shape_err, unsupported, IrError, Result};
use crate::graph::Node;
use crate::tensor::Tensor;
use ndarray::ArrayD;

/// An activation of this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Act {
    Relu,
    LeakyRelu,
    Elu,
    Selu,
    Celu,
    HardSigmoid,
    ThresholdedRelu,
    Shrink,
    Gelu,
    Swish,
}

/// Applies the activation `act`, configured by `node`'s attributes, to `x`.
pub(crate) fn eval(act: Act, node: &Node, x: &Tensor) -> Result<Tensor> {
    let a = &node.attrs;
    let attr = |name: &str, default: f32| -> Result<f64> { Ok(a.float_or(name, default)? as f64) };
    match act {
        Act::Relu => num_match!(x, v => Ok(relu(v)), o => not_numeric("Relu", o)),
        Act::Shrink => {
            let (bias, lambd) = (attr("bias", 0.0)?, attr("lambd", 0.5)?);
            let f = move |v: f64| {
                if v < -lambd {
                    v + bias
                } else if v > lambd {
                    v - bias
                } else {
                    0.0
                }
            };
            // Integers go through f64 too: Shrink's bias and lambd are floats.
            num_match!(x, v => Ok(fmap(v, f)), o => not_numeric("Shrink", o))
        }
        Act::LeakyRelu => {
            let alpha = attr("alpha", 0.01)?;
            float(x, "LeakyRelu", move |v| if v < 0.0 { alpha * v } else { v })
        }
        Act::Elu => {
            let alpha = attr("alpha", 1.0)?;
            float(
                x,
                "Elu",
                move |v| if v < 0.0 { alpha * v.exp_m1() } else { v },
            )
        }
        Act::Selu => {
            let alpha = attr("alpha", 1.673_263_2)?;
            let gamma = attr("gamma", 1.050_701)?;
            float(x, "Selu", move |v| {
                if v <= 0.0 {
                    gamma * alpha * v.exp_m1()
                } else {
                    gamma * v
                }
            })
        }
        Act::Celu => {
            let alpha = attr("alpha", 1.0)?;
            float(x, "Celu", move |v| {
                v.max(0.0) + (alpha * (v / alpha).exp_m1()).min(0.0)
            })
        }
        Act::HardSigmoid => {
            let (alpha, beta) = (attr("alpha", 0.2)?, attr("beta", 0.5)?);
            float(x, "HardSigmoid", move |v| {
                (alpha * v + beta).clamp(0.0, 1.0)
            })
        }
        Act::ThresholdedRelu => {
            let alpha = attr("alpha", 1.0)?;
            float(
                x,
                "ThresholdedRelu",
                move |v| if v > alpha { v } else { 0.0 },
            )
        }
        Act::Gelu => match a.str_or("approximate", "none")? {
            "none" => float(x, "Gelu", gelu_erf),
            "tanh" => float(x, "Gelu", gelu_tanh),
            other => Err(IrError::Attr {
                name: "approximate".into(),
                msg: format!("expected \"none\" or \"tanh\", found \"{other}\""),
            }),
        },
        Act::Swish => {
            let alpha = attr("alpha", 1.0)?;
            float(x, "Swish", move |v| v * sigmoid(alpha * v))
        }
    }
}

/// Gelu, exact (erf) form: `0.5 * v * (1 + erf(v / sqrt(2)))`. Shared with the fused
/// ops' epilogues.
pub(crate) fn gelu_erf(v: f64) -> f64 {
    0.5 * v * (1.0 + libm::erf(v * std::f64::consts::FRAC_1_SQRT_2))
}

/// Gelu, tanh approximation: `0.5 * v * (1 + tanh(sqrt(2/pi) * (v + 0.044715 v^3)))`.
pub(crate) fn gelu_tanh(v: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * v * (1.0 + (k * (v + 0.044715 * v * v * v)).tanh())
}

/// `x` where positive, `slope * x` elsewhere; `slope` broadcasts to `x`'s shape.
pub(crate) fn prelu(x: &Tensor, slope: &Tensor) -> Result<Tensor> {
    fn go<T: Num>(x: &ArrayD<T>, slope: &Tensor) -> Result<Tensor> {
        let s = same_as(x, slope)?;
        let zero = T::default();
        let y = broadcast_zip(x, s, |v, k| if v < zero { v.mul(k) } else { v })?;
        if y.shape() != x.shape() {
            return shape_err(format!(
                "PRelu slope of shape {:?} must broadcast to X's shape {:?}",
                s.shape(),
                x.shape()
            ));
        }
        Ok(T::wrap(y))
    }
    num_match!(x, v => go(v, slope), o => not_numeric("PRelu", o))
}

fn relu<T: Num>(a: &ArrayD<T>) -> Tensor {
    let zero = T::default();
    // Written so that NaN stays NaN, as with numpy's `maximum(x, 0)`.
    T::wrap(map(a, move |v| if v <= zero { zero } else { v }))
}

fn float(x: &Tensor, name: &str, f: impl Fn(f64) -> f64 + Sync + Send) -> Result<Tensor> {
    float_match!(x, a => Ok(fmap(a, f)), o => unsupported(format!("{name} on {} (takes a float type)", o.dtype())))
}

fn not_numeric(name: &str, t: &Tensor) -> Result<Tensor> {
    unsupported(format!("{name} on {} (takes a numeric type)", t.dtype()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::{Attr, Attrs};
    use ndarray::IxDyn;

    fn node(attrs: &[(&str, Attr)]) -> Node {
        let mut a = Attrs::default();
        for (k, v) in attrs {
            a.set(k, v.clone());
        }
        Node {
            name: "n".into(),
            op: Op::from_name("Relu").expect("Relu exists"),
            attrs: a,
            inputs: vec![],
            outputs: vec![],
        }
    }

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::F32(ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap())
    }

    #[test]
    fn gelu_both_forms() {
        let x = f32s(&[3], &[-1.0, 0.0, 1.0]);
        let exact = eval(Act::Gelu, &node(&[]), &x).unwrap().to_f64_vec();
        assert!((exact[0] + 0.158_655_25).abs() < 1e-6, "{exact:?}");
        assert!((exact[2] - 0.841_344_7).abs() < 1e-6, "{exact:?}");
        let n = node(&[("approximate", Attr::Str("tanh".into()))]);
        let tanh = eval(Act::Gelu, &n, &x).unwrap().to_f64_vec();
        assert!((tanh[2] - 0.841_192).abs() < 1e-5, "{tanh:?}");
    }

    #[test]
    fn prelu_slope_broadcasts_one_way() {
        let x = f32s(&[2, 3], &[-1.0, 2.0, -3.0, 4.0, -5.0, 6.0]);
        let s = f32s(&[3], &[0.5, 0.5, 2.0]);
        let y = prelu(&x, &s).unwrap().to_f64_vec();
        assert_eq!(y, vec![-0.5, 2.0, -6.0, 4.0, -2.5, 6.0]);
        // A slope with more elements than X would grow the output: rejected.
        assert!(prelu(&f32s(&[3], &[1.0, 2.0, 3.0]), &f32s(&[2, 3], &[0.0; 6])).is_err());
    }

    #[test]
    fn relu_on_integers_and_nan() {
        let x = Tensor::I32(ArrayD::from_shape_vec(IxDyn(&[3]), vec![-5, 0, 7]).unwrap());
        assert_eq!(
            eval(Act::Relu, &node(&[]), &x).unwrap().to_i64_vec(),
            vec![0, 0, 7]
        );
        let y = eval(Act::Relu, &node(&[]), &f32s(&[2], &[f32::NAN, -1.0])).unwrap();
        assert!(y.to_f64_vec()[0].is_nan());
    }
}
