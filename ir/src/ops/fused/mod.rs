//! Fused ops: the forms the optimizer rewrites chains of ONNX ops into, so that a
//! backend can run each as one kernel. They are gopt-internal (no ONNX model may name
//! them; the importer refuses them) and each one's reference semantics is, by
//! definition, the composition of the primitive ops it replaces:
//!
//! - `FusedMatMul(A, B, bias?, residual?)`: `act(alpha * matmul(A, B') + bias) + residual`,
//!   B' being B or (`trans_b`) B transposed over its last two axes ([`matmul`]);
//! - `FusedConv(X, W, B?, residual?)`: `act(conv(X, W) + B) + residual`, or with
//!   `epilogue="bias_residual_act"` `act(conv(X, W) + B + residual)`, with the Conv
//!   attributes, in NCHW or channels-last layout ([`conv`]);
//! - `FusedElementwise(x...)`: a sub-graph (`body`) of element-wise ops run as one
//!   ([`elementwise`]).
//!
//! Products run on the nn family's kernels (f16/bf16 widened to f32, as tensor cores
//! accumulate); the epilogue (bias, activation, residual) runs in f64 on that
//! accumulator and rounds once to the output dtype, modelling a fused epilogue that
//! keeps the accumulator's precision until the single store.

use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::util::broadcast_shape;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::{array_from, Tensor};
use ndarray::{ArrayD, IxDyn};

mod conv;
/// The activations `FusedConv` accepts.
pub use conv::ACTIVATIONS as CONV_ACTIVATIONS;
/// The activations `FusedMatMul` accepts.
pub use matmul::ACTIVATIONS as MATMUL_ACTIVATIONS;
mod elementwise;
mod matmul;

op_family! {
    /// Fused forms the optimizer produces (gopt-internal, not ONNX).
    internal FusedOp {
        FusedMatMul,
        FusedConv,
        FusedElementwise,
    }
}

impl FusedOp {
    /// Reference semantics.
    pub fn eval(self, cx: &EvalCx, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        match self {
            FusedOp::FusedMatMul => matmul::eval(node, inputs),
            FusedOp::FusedConv => conv::eval(node, inputs),
            FusedOp::FusedElementwise => elementwise::eval(cx, node, inputs),
        }
    }

    /// Output types.
    pub fn infer(
        self,
        cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        match self {
            FusedOp::FusedMatMul => matmul::infer(node, inputs),
            FusedOp::FusedConv => conv::infer(cx, node, inputs),
            FusedOp::FusedElementwise => elementwise::infer(node, inputs),
        }
    }

    /// Every fused op is a function of its inputs (a `FusedElementwise` body may not
    /// hold random ops).
    pub fn is_deterministic(self) -> bool {
        match self {
            FusedOp::FusedMatMul | FusedOp::FusedConv | FusedOp::FusedElementwise => true,
        }
    }
}

/// The activation of a fused epilogue (attribute `activation`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// Identity (`"none"`).
    None,
    /// `max(x, 0)` (`"relu"`); NaN stays NaN.
    Relu,
    /// Exact Gelu, `0.5 x (1 + erf(x / sqrt 2))` (`"gelu"`).
    Gelu,
    /// Gelu's tanh approximation (`"gelu_tanh"`).
    GeluTanh,
    /// `x * sigmoid(x)` (`"silu"`, ONNX Swish with alpha 1).
    Silu,
    /// `tanh(x)` (`"tanh"`).
    Tanh,
    /// `1 / (1 + exp(-x))` (`"sigmoid"`).
    Sigmoid,
    /// `min(max(x, lo), hi)` (`"clip"`, bounds from `clip_min`/`clip_max`); NaN stays NaN.
    Clip {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
    },
}

impl Activation {
    /// The attribute's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Activation::None => "none",
            Activation::Relu => "relu",
            Activation::Gelu => "gelu",
            Activation::GeluTanh => "gelu_tanh",
            Activation::Silu => "silu",
            Activation::Tanh => "tanh",
            Activation::Sigmoid => "sigmoid",
            Activation::Clip { .. } => "clip",
        }
    }

    /// Reads `node`'s `activation` attribute (default `"none"`), which must be one of
    /// `allowed`; `clip` reads `clip_min` and `clip_max` (defaults -inf and +inf).
    pub fn from_node(node: &Node, allowed: &[&str]) -> Result<Activation> {
        let name = node.attrs.str_or("activation", "none")?;
        if !allowed.contains(&name) {
            return Err(IrError::Attr {
                name: "activation".into(),
                msg: format!(
                    "unknown activation \"{name}\" for {} (expected one of {})",
                    node.op,
                    allowed.join(", ")
                ),
            });
        }
        Ok(match name {
            "none" => Activation::None,
            "relu" => Activation::Relu,
            "gelu" => Activation::Gelu,
            "gelu_tanh" => Activation::GeluTanh,
            "silu" => Activation::Silu,
            "tanh" => Activation::Tanh,
            "sigmoid" => Activation::Sigmoid,
            "clip" => {
                let lo = f64::from(node.attrs.float_or("clip_min", f32::NEG_INFINITY)?);
                let hi = f64::from(node.attrs.float_or("clip_max", f32::INFINITY)?);
                if lo > hi {
                    return Err(IrError::Attr {
                        name: "clip_min".into(),
                        msg: format!("clip_min {lo} is above clip_max {hi}"),
                    });
                }
                Activation::Clip { lo, hi }
            }
            other => {
                return Err(IrError::Attr {
                    name: "activation".into(),
                    msg: format!("unknown activation \"{other}\""),
                })
            }
        })
    }

    /// Applies the activation to one value (in f64, like the element-wise family).
    pub fn apply(self, v: f64) -> f64 {
        use crate::ops::elementwise::{gelu_erf, gelu_tanh, sigmoid};
        match self {
            Activation::None => v,
            Activation::Relu => {
                if v <= 0.0 {
                    0.0
                } else {
                    v
                }
            }
            Activation::Gelu => gelu_erf(v),
            Activation::GeluTanh => gelu_tanh(v),
            Activation::Silu => v * sigmoid(v),
            Activation::Tanh => v.tanh(),
            Activation::Sigmoid => sigmoid(v),
            Activation::Clip { lo, hi } => {
                if v < lo {
                    lo
                } else if v > hi {
                    hi
                } else {
                    v
                }
            }
        }
    }
}

/// Where a fused epilogue adds the residual: before or after the activation
/// (attribute `epilogue`, FusedConv only). The two differ only when there is both an
/// activation and a residual.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpilogueOrder {
    /// `act(acc + bias) + residual` (`"bias_act_residual"`, the default).
    ActThenResidual,
    /// `act(acc + bias + residual)` (`"bias_residual_act"`): ResNet's
    /// `relu(conv(x) + b + identity)`, and a GEMM library's order (cuBLASLt applies its
    /// activation to `alpha·A·B + beta·C + bias`).
    ResidualThenAct,
}

impl EpilogueOrder {
    /// The attribute's spelling.
    pub fn name(self) -> &'static str {
        match self {
            EpilogueOrder::ActThenResidual => "bias_act_residual",
            EpilogueOrder::ResidualThenAct => "bias_residual_act",
        }
    }

    /// Reads `node`'s `epilogue` attribute (default `"bias_act_residual"`).
    pub fn from_node(node: &Node) -> Result<EpilogueOrder> {
        match node.attrs.str_or("epilogue", "bias_act_residual")? {
            "bias_act_residual" => Ok(EpilogueOrder::ActThenResidual),
            "bias_residual_act" => Ok(EpilogueOrder::ResidualThenAct),
            other => Err(IrError::Attr {
                name: "epilogue".into(),
                msg: format!(
                    "unknown epilogue order \"{other}\" for {} (expected \"bias_act_residual\" or \"bias_residual_act\")",
                    node.op
                ),
            }),
        }
    }
}

/// Fails unless the node has between `min` and `max` inputs.
pub(crate) fn check_arity(node: &Node, n: usize, min: usize, max: usize) -> Result<()> {
    if n < min || n > max {
        let want = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(IrError::Invalid(format!(
            "{} takes {want} inputs, got {n}",
            node.op
        )));
    }
    Ok(())
}

/// Fails unless `d` is a float dtype.
pub(crate) fn check_float(op: &str, what: &str, d: DType) -> Result<()> {
    if d.is_float() {
        Ok(())
    } else {
        Err(IrError::DType {
            context: format!("{op} {what}"),
            expected: "a float type (f32, f64, f16, bf16)".into(),
            found: d,
        })
    }
}

/// Fails unless the two main operands have the same float dtype.
pub(crate) fn check_operands(op: &str, names: (&str, &str), a: DType, b: DType) -> Result<()> {
    check_float(op, names.0, a)?;
    if a != b {
        return Err(IrError::DType {
            context: format!("{op} {} (must match {})", names.1, names.0),
            expected: a.name().into(),
            found: b,
        });
    }
    Ok(())
}

/// The output dtype: attribute `output_dtype` (a float dtype) when given, else `input`.
pub(crate) fn output_dtype(node: &Node, input: DType) -> Result<DType> {
    match node.attrs.dtype("output_dtype")? {
        None => Ok(input),
        Some(d) if d.is_float() => Ok(d),
        Some(d) => Err(IrError::Attr {
            name: "output_dtype".into(),
            msg: format!("must be a float type, got {d}"),
        }),
    }
}

/// A float tensor's values in f64 (exact: every float dtype widens exactly).
pub(crate) fn to_f64_array(op: &str, what: &str, t: &Tensor) -> Result<ArrayD<f64>> {
    check_float(op, what, t.dtype())?;
    array_from(t.shape(), t.to_f64_vec())
}

/// The fused epilogue on accumulator `acc`: `act(alpha * acc + bias) + residual`, or
/// `act(alpha * acc + bias + residual)` in [`EpilogueOrder::ResidualThenAct`] order,
/// computed in f64 with numpy broadcasting of all three (the result may be larger than
/// `acc`), rounded once to `dtype`.
pub(crate) fn epilogue(
    acc: ArrayD<f64>,
    alpha: f64,
    bias: Option<&ArrayD<f64>>,
    act: Activation,
    residual: Option<&ArrayD<f64>>,
    order: EpilogueOrder,
    dtype: DType,
) -> Result<Tensor> {
    let mut shape = acc.shape().to_vec();
    for t in [bias, residual].into_iter().flatten() {
        shape = broadcast_shape(&shape, t.shape())?;
    }
    let mut out = if shape == acc.shape() {
        acc
    } else {
        let mut o = ArrayD::zeros(IxDyn(&shape));
        o.assign(&acc);
        o
    };
    // Every operand broadcasts to `shape` (it is their broadcast), so the zips below
    // cannot fail.
    if let (Some(r), EpilogueOrder::ResidualThenAct) = (residual, order) {
        match bias {
            Some(b) => out.zip_mut_with(b, |o, &b| *o = alpha * *o + b),
            None => out.mapv_inplace(|o| alpha * o),
        }
        out.zip_mut_with(r, |o, &r| *o = act.apply(*o + r));
        return Ok(Tensor::F64(out).cast(dtype));
    }
    match (bias, alpha == 1.0) {
        (Some(b), _) => out.zip_mut_with(b, |o, &b| *o = act.apply(alpha * *o + b)),
        (None, true) if act == Activation::None => {}
        (None, _) => out.mapv_inplace(|o| act.apply(alpha * o)),
    }
    if let Some(r) = residual {
        out.zip_mut_with(r, |o, &r| *o += r);
    }
    Ok(Tensor::F64(out).cast(dtype))
}

/// Symbolic output shape of the epilogue: `base` broadcast with each optional operand.
pub(crate) fn epilogue_dims(base: Vec<Dim>, extra: &[Option<&TensorType>]) -> Result<Vec<Dim>> {
    let mut shape = base;
    for t in extra.iter().flatten() {
        shape = crate::ops::util::broadcast_dims(&shape, &t.shape)?;
    }
    Ok(shape)
}
