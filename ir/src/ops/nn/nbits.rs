//! MatMulNBits: a matrix product with a weight stored as 4- or 8-bit integers in blocks
//! along K, each block with its own scale and zero point (ONNX Runtime's
//! `com.microsoft.MatMulNBits`, the layout int4 LLM exports use: AWQ, GPTQ, RTN). The
//! weight stays packed from the file to the kernel, so a decode step reads `bits / 16`
//! of a bf16 weight's bytes.
//!
//! `Y[.., n] = Σ_k A[.., k] · W[n, k] + bias[n]` with
//! `W[n, k] = (q[n, k] − zp[n, k / block]) · scale[n, k / block]`:
//!
//! - `B`: u8 `[N, blocks, blob]`, `blocks = ⌈K / block⌉`, `blob = block · bits / 8`;
//!   4-bit values two to a byte, element `2j` in the low nibble (ONNX's int4 packing);
//!   K past the last whole block is padding, never read.
//! - `scales`: A's float type, `[N · blocks]` or `[N, blocks]`.
//! - `zero_points` (optional): u8 packed like B along the blocks, each row of N
//!   `⌈blocks · bits / 8⌉` bytes; or A's float type, the shape of `scales`. Absent:
//!   `2^(bits − 1)` (8 for 4 bits, 128 for 8), which makes the weights symmetric.
//! - `g_idx` (input 4, act-order GPTQ) is refused; `bias` (input 5) is `[N]`.
//! - Attributes `K`, `N`, `bits` (4 or 8), `block_size` (a power of two ≥ 16);
//!   `accuracy_level` is ORT's CPU compute-type hint and does not change the result
//!   beyond rounding: gopt always accumulates in fp32.
//!
//! [`NBits`] is the checked layout every backend reads; [`dequantize`] and [`pack`]
//! are the two directions of the storage, shared by the quantize pass and the tests.

use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{shape_err, unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_in_ty, opt_input};
use crate::ops::InferInput;
use crate::tensor::Tensor;

/// The input slots of MatMulNBits.
pub mod slot {
    /// The activations `[.., K]`.
    pub const A: usize = 0;
    /// The packed weight `[N, blocks, blob]`.
    pub const B: usize = 1;
    /// One scale per (column, block).
    pub const SCALES: usize = 2;
    /// Zero points (optional).
    pub const ZERO_POINTS: usize = 3;
    /// GPTQ's act-order group index (refused).
    pub const G_IDX: usize = 4;
    /// The bias over N (optional).
    pub const BIAS: usize = 5;
}

/// How a block's zero point is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZeroPoints {
    /// None given: `2^(bits − 1)`.
    Default,
    /// u8, packed `bits` to the value like B, `⌈blocks · bits / 8⌉` bytes per column.
    Packed,
    /// One float per block, the scales' type and shape.
    Float,
}

/// The checked layout of one MatMulNBits node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NBits {
    /// The reduction length.
    pub k: usize,
    /// Output columns.
    pub n: usize,
    /// Bits per weight: 4 or 8.
    pub bits: usize,
    /// Weights per block along K.
    pub block: usize,
    /// Blocks per column: `⌈k / block⌉`.
    pub blocks: usize,
    /// Bytes per block: `block · bits / 8`.
    pub blob: usize,
    /// The zero points' form.
    pub zero: ZeroPoints,
    /// Whether a bias is added.
    pub bias: bool,
}

impl NBits {
    /// The layout from the node's attributes alone (the forms of its optional inputs
    /// given by the caller): every attribute checked.
    pub fn from_attrs(node: &Node, zero: ZeroPoints, bias: bool) -> Result<NBits> {
        let req = |name: &str| -> Result<usize> {
            match node.attrs.int(name)? {
                Some(v) if v > 0 => Ok(v as usize),
                Some(v) => Err(IrError::Invalid(format!(
                    "MatMulNBits: attribute {name} must be positive, found {v}"
                ))),
                None => Err(IrError::Invalid(format!(
                    "MatMulNBits: attribute {name} is required"
                ))),
            }
        };
        let (k, n, block) = (req("K")?, req("N")?, req("block_size")?);
        let bits = node.attrs.int_or("bits", 4)?;
        if bits != 4 && bits != 8 {
            return unsupported(format!(
                "MatMulNBits with bits={bits} (gopt reads 4- and 8-bit weights)"
            ));
        }
        if block < 16 || !block.is_power_of_two() {
            return Err(IrError::Invalid(format!(
                "MatMulNBits: block_size must be a power of two ≥ 16, found {block}"
            )));
        }
        let bits = bits as usize;
        Ok(NBits {
            k,
            n,
            bits,
            block,
            blocks: k.div_ceil(block),
            blob: block * bits / 8,
            zero,
            bias,
        })
    }

    /// The layout of `node` given its inputs' types, each checked against it.
    pub fn of(node: &Node, tys: &[Option<&TensorType>]) -> Result<NBits> {
        let ty = |i: usize| tys.get(i).copied().flatten();
        if ty(slot::G_IDX).is_some() {
            return unsupported("MatMulNBits with g_idx (act-order GPTQ weights)");
        }
        let a = ty(slot::A).ok_or_else(|| missing("A"))?;
        let b = ty(slot::B).ok_or_else(|| missing("B"))?;
        let s = ty(slot::SCALES).ok_or_else(|| missing("scales"))?;
        let zero = match ty(slot::ZERO_POINTS) {
            None => ZeroPoints::Default,
            Some(z) if z.dtype == DType::U8 => ZeroPoints::Packed,
            Some(z) if z.dtype == a.dtype => ZeroPoints::Float,
            Some(z) => {
                return Err(IrError::DType {
                    context: "MatMulNBits zero_points (u8 or A's type)".into(),
                    expected: format!("u8 or {}", a.dtype),
                    found: z.dtype,
                })
            }
        };
        let nb = NBits::from_attrs(node, zero, ty(slot::BIAS).is_some())?;
        if !matches!(a.dtype, DType::F32 | DType::F16 | DType::BF16) {
            return unsupported(format!("MatMulNBits on {} activations", a.dtype));
        }
        match a.shape.last() {
            None => return shape_err("MatMulNBits: A must have rank ≥ 1"),
            Some(Dim::Known(k)) if *k as usize != nb.k => {
                return shape_err(format!(
                    "MatMulNBits: A's last dim is {k}, attribute K is {}",
                    nb.k
                ))
            }
            Some(_) => {}
        }
        let want_dtype = |what: &str, t: &TensorType, d: DType| -> Result<()> {
            if t.dtype != d {
                return Err(IrError::DType {
                    context: format!("MatMulNBits {what}"),
                    expected: d.name().into(),
                    found: t.dtype,
                });
            }
            Ok(())
        };
        want_dtype("B", b, DType::U8)?;
        want_dtype("scales", s, a.dtype)?;
        fits("B", b, &[&[nb.n, nb.blocks, nb.blob]])?;
        let per_block: &[&[usize]] = &[&[nb.n * nb.blocks], &[nb.n, nb.blocks]];
        fits("scales", s, per_block)?;
        if let Some(z) = ty(slot::ZERO_POINTS) {
            match zero {
                ZeroPoints::Packed => {
                    let row = nb.zero_row_bytes();
                    fits("zero_points", z, &[&[nb.n * row], &[nb.n, row]])?;
                }
                ZeroPoints::Float | ZeroPoints::Default => fits("zero_points", z, per_block)?,
            }
        }
        if let Some(bias) = ty(slot::BIAS) {
            want_dtype("bias", bias, a.dtype)?;
            fits("bias", bias, &[&[nb.n]])?;
        }
        Ok(nb)
    }

    /// Bytes of packed zero points per column.
    pub fn zero_row_bytes(&self) -> usize {
        (self.blocks * self.bits).div_ceil(8)
    }

    /// The zero point every block has when none is given.
    pub fn default_zero(&self) -> u32 {
        1 << (self.bits - 1)
    }

    /// Largest stored value: `2^bits − 1`.
    pub fn max_q(&self) -> u32 {
        (1 << self.bits) - 1
    }

    /// Bytes of the packed weight.
    pub fn weight_bytes(&self) -> usize {
        self.n * self.blocks * self.blob
    }

    /// The quantized value of `W[n, k]` in a packed `B`.
    pub fn q(&self, b: &[u8], n: usize, k: usize) -> u32 {
        let (blk, j) = (k / self.block, k % self.block);
        let row = &b[(n * self.blocks + blk) * self.blob..];
        unpack(row, j, self.bits)
    }
}

/// Element `j` of a run of `bits`-bit values packed little end first.
fn unpack(bytes: &[u8], j: usize, bits: usize) -> u32 {
    match bits {
        8 => bytes[j] as u32,
        _ => ((bytes[j / 2] >> ((j % 2) * 4)) & 0xf) as u32,
    }
}

fn missing(what: &str) -> IrError {
    IrError::Invalid(format!("MatMulNBits: input {what} is required but missing"))
}

/// Fails unless `t`'s shape is one of `shapes` (symbolic dims are refused: every
/// operand but A is a weight of known size).
fn fits(what: &str, t: &TensorType, shapes: &[&[usize]]) -> Result<()> {
    let known: Option<Vec<usize>> = t
        .shape
        .iter()
        .map(|d| d.known().map(|v| v as usize))
        .collect();
    match known {
        Some(s) if shapes.contains(&s.as_slice()) => Ok(()),
        _ => shape_err(format!(
            "MatMulNBits: {what} has shape {}, expected {}",
            crate::dim::fmt_shape(&t.shape),
            shapes
                .iter()
                .map(|s| crate::dim::fmt_shape(&crate::dim::shape_of(s)))
                .collect::<Vec<_>>()
                .join(" or ")
        )),
    }
}

/// The zero point of every (column, block), as f64.
pub fn zero_points(nb: &NBits, zp: Option<&Tensor>) -> Vec<f64> {
    let count = nb.n * nb.blocks;
    match (nb.zero, zp) {
        (ZeroPoints::Packed, Some(Tensor::U8(z))) => {
            let bytes: Vec<u8> = z.iter().copied().collect();
            let row = nb.zero_row_bytes();
            (0..count)
                .map(|i| unpack(&bytes[(i / nb.blocks) * row..], i % nb.blocks, nb.bits) as f64)
                .collect()
        }
        (ZeroPoints::Float, Some(z)) => z.to_f64_vec(),
        _ => vec![nb.default_zero() as f64; count],
    }
}

/// The dequantized weight `W`, `[N, K]` row-major, as f64.
pub fn dequantize(nb: &NBits, b: &[u8], scales: &[f64], zp: &[f64]) -> Vec<f64> {
    let mut w = Vec::with_capacity(nb.n * nb.k);
    for n in 0..nb.n {
        for k in 0..nb.k {
            let p = n * nb.blocks + k / nb.block;
            w.push((nb.q(b, n, k) as f64 - zp[p]) * scales[p]);
        }
    }
    w
}

/// Packs `q` (`[N, K]` row-major, each below `2^bits`) into B's layout
/// `[N, blocks, blob]`, the padding past K zero.
pub fn pack(nb: &NBits, q: &[u32]) -> Vec<u8> {
    let mut b = vec![0u8; nb.weight_bytes()];
    for n in 0..nb.n {
        for k in 0..nb.k {
            let v = q[n * nb.k + k] as u8;
            let (blk, j) = (k / nb.block, k % nb.block);
            let at = (n * nb.blocks + blk) * nb.blob;
            match nb.bits {
                8 => b[at + j] = v,
                _ => b[at + j / 2] |= (v & 0xf) << ((j % 2) * 4),
            }
        }
    }
    b
}

/// Packs one zero point per (column, block) into the u8 form (`[N · row bytes]`).
pub fn pack_zero_points(nb: &NBits, zp: &[u32]) -> Vec<u8> {
    let row = nb.zero_row_bytes();
    let mut out = vec![0u8; nb.n * row];
    for n in 0..nb.n {
        for blk in 0..nb.blocks {
            let v = zp[n * nb.blocks + blk] as u8;
            match nb.bits {
                8 => out[n * row + blk] = v,
                _ => out[n * row + blk / 2] |= (v & 0xf) << ((blk % 2) * 4),
            }
        }
    }
    out
}

/// Evaluates MatMulNBits: the weight dequantized in f64, the product accumulated in
/// f64 and rounded once to A's type.
pub(crate) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let tys: Vec<Option<TensorType>> = inputs
        .iter()
        .map(|t| {
            t.map(|t| {
                let shape = t.shape().iter().map(|&d| Dim::Known(d as u64)).collect();
                TensorType::new(t.dtype(), shape)
            })
        })
        .collect();
    let refs: Vec<Option<&TensorType>> = tys.iter().map(Option::as_ref).collect();
    let nb = NBits::of(node, &refs)?;
    let a = input(inputs, slot::A)?;
    let Tensor::U8(b) = input(inputs, slot::B)? else {
        return unsupported("MatMulNBits B must be u8");
    };
    let b: Vec<u8> = b.iter().copied().collect();
    let scales = input(inputs, slot::SCALES)?.to_f64_vec();
    let zp = zero_points(&nb, opt_input(inputs, slot::ZERO_POINTS));
    let w = dequantize(&nb, &b, &scales, &zp);
    let bias = opt_input(inputs, slot::BIAS).map(Tensor::to_f64_vec);
    let av = a.to_f64_vec();
    let rows = av.len() / nb.k.max(1);
    let mut y = Vec::with_capacity(rows * nb.n);
    for r in 0..rows {
        let x = &av[r * nb.k..(r + 1) * nb.k];
        for n in 0..nb.n {
            let wr = &w[n * nb.k..(n + 1) * nb.k];
            let dot: f64 = x.iter().zip(wr).map(|(p, q)| p * q).sum();
            y.push(dot + bias.as_ref().map_or(0.0, |b| b[n]));
        }
    }
    let mut shape = a.shape().to_vec();
    if let Some(last) = shape.last_mut() {
        *last = nb.n;
    }
    Tensor::from_f64s(a.dtype(), &shape, &y)
}

/// Output type: A's shape with its last dim N, A's dtype.
pub(crate) fn infer(node: &Node, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let tys: Vec<Option<&TensorType>> = (0..inputs.len().max(slot::BIAS + 1))
        .map(|i| opt_in_ty(inputs, i).map(|t| t.ty))
        .collect();
    let a = in_ty(inputs, slot::A)?.ty;
    let nb = NBits::of(node, &tys)?;
    let mut shape = a.shape.clone();
    if let Some(last) = shape.last_mut() {
        *last = Dim::Known(nb.n as u64);
    }
    Ok(vec![TensorType::new(a.dtype, shape)])
}
