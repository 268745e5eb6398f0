//! Linear algebra, convolution, pooling and quantization: the ops that carry a model's
//! arithmetic. Each submodule owns one group (products, convolutions, pools,
//! quantization, packed low-bit weights ([`nbits`]), Einsum, Det); this module only
//! dispatches. Heavy products all run on
//! [`gemm`]'s kernel (matrixmultiply's sgemm/dgemm, split across rayon threads).

pub(crate) mod conv;
mod conv_transpose;
mod deform;
mod det;
mod einsum;
pub mod nbits;
pub use einsum::{parse_equation as einsum_equation, Label as EinsumLabel, ELL as EINSUM_ELL};
pub(crate) mod gemm;
pub(crate) mod matmul;
mod pool;
mod qlinear;
mod quant;
mod spatial;

use crate::dtype::DType;
use crate::error::Result;
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;
use pool::Kind;

op_family! {
    /// Linear algebra, convolution, pooling and quantization.
    NnOp {
        MatMul, Gemm, MatMulInteger, QLinearMatMul, MatMulNBits,
        Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv,
        QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
        AveragePool, MaxPool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool,
        MaxUnpool, Einsum, Det,
    }
}

/// LpPool's `p` (default 2).
fn lp_p(node: &Node) -> Result<Kind> {
    Ok(Kind::Lp(node.attrs.int_or("p", 2)? as f64))
}

impl NnOp {
    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        node: &Node,
        inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        let one = |t: Result<Tensor>| t.map(|t| vec![t]);
        match self {
            NnOp::MatMul => one(matmul::eval_matmul(inputs)),
            NnOp::Gemm => one(matmul::eval_gemm(node, inputs)),
            NnOp::MatMulInteger => one(qlinear::eval_matmul_integer(inputs)),
            NnOp::QLinearMatMul => one(qlinear::eval_qlinear_matmul(inputs)),
            NnOp::MatMulNBits => one(nbits::eval(node, inputs)),
            NnOp::Conv => one(conv::eval_conv(node, inputs)),
            NnOp::ConvTranspose => one(conv_transpose::eval_conv_transpose(node, inputs)),
            NnOp::ConvInteger => one(qlinear::eval_conv_integer(node, inputs)),
            NnOp::QLinearConv => one(qlinear::eval_qlinear_conv(node, inputs)),
            NnOp::DeformConv => one(deform::eval_deform_conv(node, inputs)),
            NnOp::QuantizeLinear => one(quant::eval_quantize(node, inputs)),
            NnOp::DequantizeLinear => one(quant::eval_dequantize(node, inputs)),
            NnOp::DynamicQuantizeLinear => quant::eval_dynamic_quantize(inputs),
            NnOp::AveragePool => {
                let count_pad = node.attrs.int_or("count_include_pad", 0)? != 0;
                one(pool::eval_avg_lp(node, inputs, Kind::Avg { count_pad }))
            }
            NnOp::MaxPool => pool::eval_max_pool(node, inputs),
            NnOp::LpPool => one(pool::eval_avg_lp(node, inputs, lp_p(node)?)),
            NnOp::GlobalAveragePool => one(pool::eval_global(
                node,
                inputs,
                Some(Kind::Avg { count_pad: false }),
            )),
            NnOp::GlobalMaxPool => one(pool::eval_global(node, inputs, None)),
            NnOp::GlobalLpPool => one(pool::eval_global(node, inputs, Some(lp_p(node)?))),
            NnOp::MaxUnpool => one(pool::eval_max_unpool(node, inputs)),
            NnOp::Einsum => one(einsum::eval_einsum(node, inputs)),
            NnOp::Det => one(det::eval_det(inputs)),
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
            NnOp::MatMul => matmul::infer_matmul(inputs, 0, 1, |d| d),
            NnOp::Gemm => matmul::infer_gemm(node, inputs),
            NnOp::MatMulInteger => matmul::infer_matmul(inputs, 0, 1, |_| DType::I32),
            NnOp::QLinearMatMul => {
                let zp = inputs.get(7).copied().flatten().map(|z| z.ty.dtype);
                matmul::infer_matmul(inputs, 0, 3, |d| zp.unwrap_or(d))
            }
            NnOp::MatMulNBits => nbits::infer(node, inputs),
            NnOp::Conv | NnOp::ConvInteger => {
                let int = self == NnOp::ConvInteger;
                conv::infer_conv(cx, node, inputs, 1, |d| if int { DType::I32 } else { d })
            }
            NnOp::QLinearConv => {
                let zp = inputs.get(7).copied().flatten().map(|z| z.ty.dtype);
                conv::infer_conv(cx, node, inputs, 3, |d| zp.unwrap_or(d))
            }
            NnOp::ConvTranspose => conv_transpose::infer_conv_transpose(cx, node, inputs),
            NnOp::DeformConv => deform::infer_deform_conv(inputs),
            NnOp::QuantizeLinear => quant::infer_quantize(node, inputs),
            NnOp::DequantizeLinear => quant::infer_dequantize(node, inputs),
            NnOp::DynamicQuantizeLinear => quant::infer_dynamic_quantize(inputs),
            NnOp::AveragePool | NnOp::MaxPool | NnOp::LpPool => pool::infer_pool(cx, node, inputs),
            NnOp::GlobalAveragePool | NnOp::GlobalMaxPool | NnOp::GlobalLpPool => {
                pool::infer_global(inputs)
            }
            NnOp::MaxUnpool => pool::infer_max_unpool(cx, node, inputs),
            NnOp::Einsum => einsum::infer_einsum(node, inputs),
            NnOp::Det => det::infer_det(inputs),
        }
    }
}
