//! What an element-wise node computes, the same for every backend: its body as a small
//! graph ([`of`]: a `FusedElementwise` node's body, or a single element-wise op wrapped
//! as a one-node body; single-element constants move into the body and become
//! literals, the other inputs are the kernel's parameters), and each op's facts, one
//! exhaustive match per fact: its attributes with ONNX's defaults ([`params`]) and the
//! element types the GPU kernels take for its main input ([`takes`], [`check`]).

use crate::{CodegenError, Result};
use gopt_ir::ops::ElementwiseOp as E;
use gopt_ir::ops::FusedOp;
use gopt_ir::{Attrs, DType, Graph, Node, Op, ValueId};

fn plan_err(node: &Node, what: &str) -> CodegenError {
    CodegenError::Plan(format!("node `{}` ({}): {what}", node.name, node.op))
}

/// The body of element-wise node `node` of `g`, and the graph values its inputs come
/// from (the kernel's parameters, in order).
pub fn of(g: &Graph, node: &Node) -> Result<(Graph, Vec<ValueId>)> {
    if node.op == Op::Fused(FusedOp::FusedElementwise) {
        let b = node
            .attrs
            .graph("body")
            .map_err(|e| plan_err(node, &e.to_string()))?
            .clone();
        let params = node
            .inputs
            .iter()
            .map(|i| i.ok_or_else(|| plan_err(node, "absent input")))
            .collect::<Result<_>>()?;
        return Ok((b, params));
    }
    if !matches!(node.op, Op::Elementwise(_)) {
        return Err(plan_err(node, "not an element-wise node"));
    }
    single(g, node)
}

/// A single element-wise node as a one-op body over its own inputs.
fn single(g: &Graph, node: &Node) -> Result<(Graph, Vec<ValueId>)> {
    let mut body = Graph::new(&node.name);
    let mut ins = Vec::new();
    let mut params = Vec::new();
    for (k, i) in node.inputs.iter().enumerate() {
        match i {
            None => ins.push(None),
            Some(v) => {
                let ty = g
                    .ty(*v)
                    .map_err(|e| plan_err(node, &e.to_string()))?
                    .clone();
                match g.constant(*v).filter(|t| t.len() == 1) {
                    Some(t) => ins.push(Some(body.add_const(&format!("c{k}"), t.clone()))),
                    None => {
                        ins.push(Some(body.add_input(&format!("x{k}"), ty)));
                        params.push(*v);
                    }
                }
            }
        }
    }
    let id = body.add_node(&node.name, node.op, node.attrs.clone(), ins, &["y"]);
    let o = body.nodes[id.index()].outputs[0];
    body.values[o.index()].ty = g.value(node.outputs[0]).ty.clone();
    body.outputs = vec![o];
    Ok((body, params))
}

type R<T> = std::result::Result<T, String>;

/// The attributes an element-wise op reads, ONNX's defaults filled in. A field an op
/// does not read keeps its neutral value (0, 1 or false).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// LeakyRelu (0.01), Elu, Celu, ThresholdedRelu, Swish (1), HardSigmoid (0.2),
    /// Selu (1.67326...).
    pub alpha: f32,
    /// HardSigmoid's offset (0.5).
    pub beta: f32,
    /// Selu's scale (1.0507...).
    pub gamma: f32,
    /// Shrink's bias (0).
    pub bias: f32,
    /// Shrink's threshold (0.5).
    pub lambd: f32,
    /// Mod: the remainder takes the dividend's sign (C's `fmod`), else the divisor's.
    pub fmod: bool,
    /// BitShift: `direction` is LEFT (else RIGHT).
    pub shift_left: bool,
    /// IsInf: which infinities are true (both by default).
    pub detect_positive: bool,
    /// IsInf: see `detect_positive`.
    pub detect_negative: bool,
    /// Gelu: the tanh approximation (`approximate = "tanh"`), else the erf form.
    pub gelu_tanh: bool,
}

/// Selu's default `alpha`.
pub const SELU_ALPHA: f32 = 1.673_263_2;
/// Selu's default `gamma`.
pub const SELU_GAMMA: f32 = 1.050_701;

impl Default for Params {
    fn default() -> Self {
        Params {
            alpha: 1.0,
            beta: 0.0,
            gamma: 1.0,
            bias: 0.0,
            lambd: 0.0,
            fmod: false,
            shift_left: false,
            detect_positive: true,
            detect_negative: true,
            gelu_tanh: false,
        }
    }
}

/// The attributes `op` reads from `a`, with ONNX's defaults.
pub fn params(op: E, a: &Attrs) -> R<Params> {
    let f = |name: &str, d: f32| a.float_or(name, d).map_err(|e| e.to_string());
    let flag = |name: &str, d: i64| a.int_or(name, d).map(|v| v != 0).map_err(|e| e.to_string());
    let p = Params::default();
    Ok(match op {
        E::LeakyRelu => Params {
            alpha: f("alpha", 0.01)?,
            ..p
        },
        E::Elu | E::Celu | E::ThresholdedRelu | E::Swish => Params {
            alpha: f("alpha", 1.0)?,
            ..p
        },
        E::HardSigmoid => Params {
            alpha: f("alpha", 0.2)?,
            beta: f("beta", 0.5)?,
            ..p
        },
        E::Selu => Params {
            alpha: f("alpha", SELU_ALPHA)?,
            gamma: f("gamma", SELU_GAMMA)?,
            ..p
        },
        E::Shrink => Params {
            bias: f("bias", 0.0)?,
            lambd: f("lambd", 0.5)?,
            ..p
        },
        E::Mod => Params {
            fmod: flag("fmod", 0)?,
            ..p
        },
        E::BitShift => Params {
            shift_left: match a.str_or("direction", "").map_err(|e| e.to_string())? {
                "LEFT" => true,
                "RIGHT" => false,
                d => return Err(format!("BitShift direction {d:?}")),
            },
            ..p
        },
        E::IsInf => Params {
            detect_positive: flag("detect_positive", 1)?,
            detect_negative: flag("detect_negative", 1)?,
            ..p
        },
        E::Gelu => Params {
            gelu_tanh: match a.str_or("approximate", "none").map_err(|e| e.to_string())? {
                "none" => false,
                "tanh" => true,
                other => return Err(format!("Gelu approximate {other:?}")),
            },
            ..p
        },
        E::Add | E::Sub | E::Mul | E::Div | E::Pow => p,
        E::Neg | E::Abs | E::Reciprocal | E::Sqrt | E::Exp | E::Log => p,
        E::Ceil | E::Floor | E::Round | E::Sign => p,
        E::Sin | E::Cos | E::Tan | E::Asin | E::Acos | E::Atan => p,
        E::Sinh | E::Cosh | E::Asinh | E::Acosh | E::Atanh | E::Tanh => p,
        E::Sigmoid | E::Erf | E::Relu | E::HardSwish | E::Softplus | E::Softsign => p,
        E::Mish | E::PRelu => p,
        E::Not | E::And | E::Or | E::Xor => p,
        E::BitwiseNot | E::BitwiseAnd | E::BitwiseOr | E::BitwiseXor => p,
        E::IsNaN | E::Equal | E::Less | E::LessOrEqual | E::Greater | E::GreaterOrEqual => p,
        E::Max | E::Min | E::Sum | E::Mean | E::Where | E::Clip => p,
        E::Cast | E::CastLike | E::BitCast | E::Dropout => p,
        E::Bernoulli | E::RandomUniform | E::RandomNormal => p,
        E::RandomUniformLike | E::RandomNormalLike | E::Multinomial => p,
    })
}

/// The element types a GPU kernel of an op takes for its first input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// Floats (f32, f16, bf16, f64 where the backend stores them).
    Float,
    /// Floats and integers.
    Num,
    /// Floats and signed integers.
    Signed,
    /// Signed and unsigned integers.
    Int,
    /// Bool.
    Bool,
    /// Every type.
    Any,
}

impl Takes {
    /// Whether `dt` is one of these types.
    pub fn allows(self, dt: DType) -> bool {
        match self {
            Takes::Float => dt.is_float(),
            Takes::Num => dt.is_float() || dt.is_int(),
            Takes::Signed => dt.is_float() || dt.is_signed_int(),
            Takes::Int => dt.is_int(),
            Takes::Bool => dt == DType::Bool,
            Takes::Any => true,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Takes::Float => "a float type",
            Takes::Num => "a numeric type",
            Takes::Signed => "a float or signed integer type",
            Takes::Int => "an integer type",
            Takes::Bool => "bool",
            Takes::Any => "any type",
        }
    }
}

/// The types the GPU kernels of `op` take for input 0, or why no GPU kernel computes
/// it. Narrower than the interpreter where a GPU form would be inexact: Shrink takes
/// floats only.
pub fn takes(op: E) -> R<Takes> {
    Ok(match op {
        E::Add | E::Sub | E::Mul | E::Div | E::Pow | E::Mod => Takes::Num,
        E::Abs | E::Sign | E::Relu | E::PRelu => Takes::Num,
        E::Max | E::Min | E::Sum | E::Clip => Takes::Num,
        E::Neg => Takes::Signed,
        E::Reciprocal | E::Sqrt | E::Exp | E::Log | E::Ceil | E::Floor | E::Round => Takes::Float,
        E::Sin | E::Cos | E::Tan | E::Asin | E::Acos | E::Atan => Takes::Float,
        E::Sinh | E::Cosh | E::Asinh | E::Acosh | E::Atanh | E::Tanh => Takes::Float,
        E::Sigmoid | E::Erf | E::LeakyRelu | E::Elu | E::Selu | E::Celu => Takes::Float,
        E::HardSigmoid | E::HardSwish | E::Softplus | E::Softsign | E::Shrink => Takes::Float,
        E::ThresholdedRelu | E::Mish | E::Gelu | E::Swish | E::Mean => Takes::Float,
        E::IsNaN | E::IsInf | E::Dropout => Takes::Float,
        E::Not | E::And | E::Or | E::Xor => Takes::Bool,
        E::BitwiseNot | E::BitwiseAnd | E::BitwiseOr | E::BitwiseXor | E::BitShift => Takes::Int,
        E::Equal | E::Less | E::LessOrEqual | E::Greater | E::GreaterOrEqual => Takes::Any,
        E::Where | E::Cast | E::CastLike | E::BitCast => Takes::Any,
        E::Bernoulli
        | E::RandomUniform
        | E::RandomNormal
        | E::RandomUniformLike
        | E::RandomNormalLike
        | E::Multinomial => return Err(format!("{} (random ops run on the CPU only)", op.name())),
    })
}

/// Refuses `op` on a first input of type `dt` when no GPU kernel computes it.
pub fn check(op: E, dt: DType) -> R<()> {
    let t = takes(op)?;
    if t.allows(dt) {
        Ok(())
    } else {
        Err(format!("{} on {dt} (takes {})", op.name(), t.describe()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gopt_ir::Attr;

    #[test]
    fn defaults_are_onnx_s() {
        let a = Attrs::default();
        assert_eq!(params(E::LeakyRelu, &a).unwrap().alpha, 0.01);
        let s = params(E::Selu, &a).unwrap();
        assert_eq!((s.alpha, s.gamma), (SELU_ALPHA, SELU_GAMMA));
        let h = params(E::HardSigmoid, &a).unwrap();
        assert_eq!((h.alpha, h.beta), (0.2, 0.5));
        let k = params(E::Shrink, &a).unwrap();
        assert_eq!((k.bias, k.lambd), (0.0, 0.5));
        assert!(!params(E::Mod, &a).unwrap().fmod);
        assert!(params(E::BitShift, &a).is_err());
        let mut b = Attrs::default();
        b.set("direction", Attr::Str("LEFT".into()));
        assert!(params(E::BitShift, &b).unwrap().shift_left);
    }

    #[test]
    fn takes_refuses_what_no_kernel_computes() {
        assert!(check(E::Sqrt, DType::I32).is_err());
        assert!(check(E::BitShift, DType::U8).is_ok());
        assert!(check(E::BitwiseAnd, DType::F32).is_err());
        assert!(check(E::RandomNormal, DType::F32).is_err());
        assert!(check(E::Neg, DType::U32).is_err());
    }
}
