//! Products with a packed low-bit weight (MatMulNBits, `gopt_ir::ops::nn::nbits`), read
//! once for every backend: the checked layout ([`NBits`]), the rows of A, the operands'
//! values and types, and the path each backend takes ([`Path`]).
//!
//! Few rows (LLM decode) run as a GEMV that unpacks and dequantizes each weight in
//! registers: the product is bound by reading the weight, which now holds `bits / 16`
//! of a bf16 weight's bytes. Many rows (prefill) are compute-bound: there the weight is
//! dequantized once per run into scratch of A's type and multiplied by the library
//! GEMM on tensor cores, which costs one pass over the weight against a product that
//! reads it `rows / tile` times.

use super::gemm::{tail, Tail};
use super::support::{input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::ops::fused::Activation;
use gopt_ir::ops::nn::nbits::{slot, NBits};
use gopt_ir::{DType, Graph, Node, ValueId};

/// Most rows (M, A's dims but the last multiplied) the fused GEMV takes; above it the
/// weight is dequantized into scratch and the library GEMM runs. At 16 rows a 4-bit
/// GEMV still does 16 fp32 FMAs per weight element read (its 0.5 byte), which an H200's
/// CUDA cores sustain at about the rate the weight arrives.
pub const GEMV_MAX_ROWS: usize = 16;

/// How a backend runs the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// The fused dequantize-in-registers GEMV.
    Gemv,
    /// Dequantize the weight into `[N, K]` scratch of A's type, then a GEMM with a
    /// transposed B.
    DequantizeGemm,
}

/// One MatMulNBits node, lowered.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedSpec {
    /// The node.
    pub site: Site,
    /// The weight's layout.
    pub nb: NBits,
    /// Rows of A (its dims but the last, multiplied).
    pub rows: usize,
    /// A's, the scales', the bias's and the output's dtype (f32, f16 or bf16).
    pub dtype: DType,
    /// The activations `[.., K]`.
    pub a: ValueId,
    /// The packed weight `[N, blocks, blob]` (u8).
    pub b: ValueId,
    /// Scales, one per (column, block).
    pub scales: ValueId,
    /// Zero points (their form is `nb.zero`).
    pub zero_points: Option<ValueId>,
    /// The bias `[N]`.
    pub bias: Option<ValueId>,
    /// The output `[.., N]`.
    pub out: ValueId,
    /// The bias and the output, typed (the library GEMM's epilogue).
    pub tail: Tail,
}

impl PackedSpec {
    /// The path for these rows.
    pub fn path(&self) -> Path {
        if self.rows <= GEMV_MAX_ROWS {
            Path::Gemv
        } else {
            Path::DequantizeGemm
        }
    }

    /// Bytes of the dequantized `[N, K]` scratch the GEMM path needs.
    pub fn scratch_bytes(&self) -> usize {
        self.nb.n * self.nb.k * self.dtype.size()
    }
}

/// The spec of MatMulNBits node `node` (static shapes; every operand checked again).
pub fn spec(g: &Graph, node: &Node) -> Result<PackedSpec> {
    let ty = |k: usize| {
        opt_input(node, k)
            .map(|v| g.ty(v).map_err(plan))
            .transpose()
    };
    let tys = (0..=slot::BIAS).map(ty).collect::<Result<Vec<_>>>()?;
    let nb = NBits::of(node, &tys).map_err(|e| unsupported(node, &e.to_string()))?;
    let a = input(node, slot::A)?;
    let (dtype, shape) = typed(g, node, a)?;
    let rows = shape[..shape.len().saturating_sub(1)].iter().product();
    let bias = opt_input(node, slot::BIAS);
    Ok(PackedSpec {
        site: Site::of(node),
        nb,
        rows,
        dtype,
        a,
        b: input(node, slot::B)?,
        scales: input(node, slot::SCALES)?,
        zero_points: opt_input(node, slot::ZERO_POINTS),
        bias,
        out: output(node, 0)?,
        tail: tail(g, node, Activation::None, bias, 1.0, None)?,
    })
}
