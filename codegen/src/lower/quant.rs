//! The quantization ops, read once for every backend as the interpreter reads them
//! (`ir/src/ops/nn/quant.rs`, `qlinear.rs`): every size, dtype, parameter layout and
//! mode a kernel needs, so the CUDA and WGSL writers only spell the arithmetic.
//!
//! - QuantizeLinear: `saturate(rint(x / scale) + zero_point)` with per-tensor, per-axis
//!   or blocked parameters ([`ParamMap`]), the division in the `precision` type, to
//!   u8, i8, u16 or i16 ([`QuantizeSpec`]).
//! - DequantizeLinear: `(x - zero_point) * scale` in f32 ([`DequantizeSpec`]).
//! - DynamicQuantizeLinear: u8 data with a scale and zero point from the data's range,
//!   which a single block reduces first ([`DynamicSpec`], at most [`DYNAMIC_MAX`]
//!   elements).
//! - MatMulInteger and QLinearMatMul: batched integer products with zero points per
//!   tensor, per row of A or per column of B ([`IntMatMulSpec`]).
//! - ConvInteger and QLinearConv: direct integer convolutions ([`IntConvSpec`]).
//!
//! Integer products accumulate exactly in 32 bits (wrapping as the interpreter's
//! `as i32`). The QLinear ops requantize with `mult = scale_a * scale_b / scale_y`, each
//! step rounded to the first scale's dtype ([`Requant`]), and round `acc * mult +
//! zero_point` to nearest, ties to even, then saturate. Every operand (scales and zero
//! points included) is a tensor the kernel reads, constant or computed.

use super::index::{strides, sum, Lit};
use super::pool::{resolve, Dim};
use super::support::{input, opt_input, output, plan, typed, unsupported, Sited};
use crate::Result;
use gopt_ir::ops::NnOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

/// The most elements DynamicQuantizeLinear takes: one block reduces the whole tensor
/// to its minimum and maximum, then quantizes it, so larger tensors would leave the
/// device idle (a multi-block form is not written).
pub const DYNAMIC_MAX: usize = 1 << 22;

/// The value range of a quantized integer dtype (8/16-bit integers only).
pub fn range(dt: DType) -> Option<(i32, i32)> {
    match dt {
        DType::U8 => Some((0, 255)),
        DType::I8 => Some((-128, 127)),
        DType::U16 => Some((0, 65535)),
        DType::I16 => Some((-32768, 32767)),
        DType::Bool
        | DType::I32
        | DType::I64
        | DType::U32
        | DType::U64
        | DType::F16
        | DType::BF16
        | DType::F32
        | DType::F64 => None,
    }
}

/// Whether `dt` is a float type the kernels compute in f32.
fn is_f32ish(dt: DType) -> bool {
    matches!(dt, DType::F32 | DType::F16 | DType::BF16)
}

/// Where element `i` (row-major) of the data finds its scale or zero point, as the
/// interpreter's map: `i` splits into `(outer, a, inner)` around the quantization axis
/// and the parameter index is `outer * os + (a / block) * is + inner * ins`. All strides
/// 0 is one value for the whole tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamMap {
    /// Elements after the axis.
    pub inner: usize,
    /// The axis' length.
    pub dim: usize,
    /// Elements of the axis per parameter (1 per-axis).
    pub block: usize,
    /// The parameter's stride per outer index.
    pub os: usize,
    /// Its stride per block along the axis.
    pub is: usize,
    /// Its stride per inner index.
    pub ins: usize,
}

impl ParamMap {
    /// One parameter for every element.
    pub const SCALAR: ParamMap = ParamMap {
        inner: 1,
        dim: 1,
        block: 1,
        os: 0,
        is: 0,
        ins: 0,
    };

    /// The map of a parameter of shape `p` against data of shape `x` (`axis`, and
    /// `block` when positive), or why it does not fit.
    fn new(x: &[usize], p: &[usize], axis: i64, block: i64) -> std::result::Result<Self, String> {
        let plen: usize = p.iter().product();
        if block <= 0 && plen == 1 && p.len() <= 1 {
            return Ok(ParamMap::SCALAR);
        }
        let ax = gopt_ir::ops::util::norm_axis(axis, x.len()).map_err(|e| e.to_string())?;
        let inner: usize = x[ax + 1..].iter().product();
        let dim = x[ax];
        if block <= 0 {
            if p != [dim] {
                return Err(format!("a parameter of shape {p:?} for axis {ax} of {x:?}"));
            }
            return Ok(ParamMap {
                inner,
                dim,
                block: 1,
                os: 0,
                is: 1,
                ins: 0,
            });
        }
        let b = usize::try_from(block).map_err(|e| e.to_string())?;
        let fits = p.len() == x.len()
            && p.iter().zip(x).enumerate().all(|(i, (&pd, &xd))| {
                if i == ax {
                    pd * b >= xd && (pd == 0 || (pd - 1) * b < xd)
                } else {
                    pd == xd
                }
            });
        if !fits {
            return Err(format!(
                "a blocked parameter of shape {p:?} for {x:?} (axis {ax}, block {b})"
            ));
        }
        Ok(ParamMap {
            inner,
            dim,
            block: b,
            os: p[ax] * inner,
            is: inner,
            ins: 1,
        })
    }

    /// Whether every element reads parameter 0.
    pub fn is_scalar(&self) -> bool {
        self.os == 0 && self.is == 0 && self.ins == 0
    }

    /// The parameter index of data element `i` (an integer expression), integer
    /// literals written with `lit`'s suffix (divisors at least 1, so that the map of an
    /// empty tensor is still valid code).
    pub fn index(&self, i: &str, lit: Lit) -> String {
        let l = |v: usize| format!("{}{}", v.max(1), lit.0);
        let mut terms = Vec::new();
        if self.os != 0 {
            terms.push(format!(
                "({i} / {}) * {}",
                l(self.inner * self.dim),
                l(self.os)
            ));
        }
        if self.is != 0 {
            terms.push(format!(
                "((({i} / {}) % {}) / {}) * {}",
                l(self.inner),
                l(self.dim),
                l(self.block),
                l(self.is)
            ));
        }
        if self.ins != 0 {
            terms.push(format!("({i} % {}) * {}", l(self.inner), l(self.ins)));
        }
        sum(&terms, &format!("0{}", lit.0))
    }
}

/// A float tensor of scales (or a zero point read as one value per element).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// The tensor.
    pub v: ValueId,
    /// Its dtype.
    pub dt: DType,
    /// Where each data element finds its value.
    pub map: ParamMap,
}

/// The operands QuantizeLinear and DequantizeLinear share.
#[derive(Clone, Debug, PartialEq)]
pub struct Affine {
    /// The data.
    pub x: ValueId,
    /// Its dtype.
    pub x_dt: DType,
    /// The scales (f32, f16 or bf16).
    pub scale: Param,
    /// The zero points (the quantized dtype), absent for 0.
    pub zero: Option<Param>,
    /// The output.
    pub out: ValueId,
    /// Its dtype.
    pub out_dt: DType,
    /// Elements.
    pub n: usize,
}

impl Affine {
    /// How the scales and zero points map to the data, for the kernel's header.
    pub fn params_note(&self) -> &'static str {
        if self.zero.is_some_and(|z| !z.map.is_scalar()) || !self.scale.map.is_scalar() {
            "per axis or block"
        } else {
            "one for the tensor"
        }
    }
}

/// QuantizeLinear, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizeSpec {
    /// Data (f32, f16, bf16), scales, zero points and the quantized output.
    pub affine: Affine,
    /// The type the data, the scale and their quotient are rounded to (`precision`,
    /// else numpy's promotion of the two: f32, f16 or bf16).
    pub prec: DType,
    /// The output's range (saturation; NaN becomes 0).
    pub lo: i32,
    /// See `lo`.
    pub hi: i32,
}

/// DequantizeLinear, resolved: computed in f32 (8/16-bit data, f32/f16/bf16 scales),
/// stored as the output's float dtype.
#[derive(Clone, Debug, PartialEq)]
pub struct DequantizeSpec {
    /// Data (u8, i8, u16, i16), scales, zero points (the data's dtype) and output.
    pub affine: Affine,
}

/// DynamicQuantizeLinear, resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DynamicSpec {
    /// The data (f32, f16 or bf16; at most [`DYNAMIC_MAX`] elements).
    pub x: ValueId,
    /// Its dtype (also the scale's).
    pub x_dt: DType,
    /// The u8 output.
    pub y: ValueId,
    /// The scale, a scalar of the data's dtype.
    pub scale: ValueId,
    /// The u8 zero point, a scalar.
    pub zero: ValueId,
    /// Elements.
    pub n: usize,
}

/// An 8/16-bit integer operand of a product and its zero point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntOperand {
    /// The tensor.
    pub v: ValueId,
    /// Its dtype (u8, i8, u16 or i16).
    pub dt: DType,
    /// The zero point (the operand's dtype) and whether it holds one value per row of
    /// A, per column of B or per output channel of W (else one value).
    pub zero: Option<(ValueId, bool)>,
}

/// One scale of a requantization: its tensor and dtype, and whether it holds one value
/// per row of A, per column of B or per output channel of W (else one value).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    /// The tensor.
    pub v: ValueId,
    /// Its dtype (f32, f16 or bf16).
    pub dt: DType,
    /// One value per row, column or channel.
    pub per_axis: bool,
}

/// The requantization of a QLinear op: `mult = round(round(s1 * s2) / sy)` (rounded to
/// `round`, the first scale's dtype) and `saturate(rint(acc * mult + zy))`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Requant {
    /// A's or X's scale.
    pub s1: Scale,
    /// B's or W's scale.
    pub s2: Scale,
    /// Y's scale (one value).
    pub sy: Scale,
    /// Y's zero point (its first value; the output's dtype), absent for 0.
    pub y_zero: Option<ValueId>,
    /// The output's dtype (u8, i8, u16 or i16).
    pub out_dt: DType,
    /// The dtype every step of the multiplier is rounded to.
    pub round: DType,
    /// The output's range.
    pub lo: i32,
    /// See `lo`.
    pub hi: i32,
}

/// MatMulInteger or QLinearMatMul, resolved: numpy's batched product of A (`[..., M,
/// K]`, or `[K]` as one row) and B (`[..., K, N]`, or `[K]` as one column).
#[derive(Clone, Debug, PartialEq)]
pub struct IntMatMulSpec {
    /// A and its zero point (per tensor or per row).
    pub a: IntOperand,
    /// B and its zero point (per tensor or per column).
    pub b: IntOperand,
    /// Rows of each product.
    pub m: usize,
    /// Columns of each product.
    pub n: usize,
    /// The shared dim.
    pub k: usize,
    /// The output's batch dims from the last to the first, each with A's and B's
    /// element stride (0 where the operand is broadcast).
    pub batch: Vec<(usize, usize, usize)>,
    /// Output elements.
    pub count: usize,
    /// The output.
    pub out: ValueId,
    /// Its dtype (i32 for MatMulInteger, the quantized type for QLinearMatMul).
    pub out_dt: DType,
    /// QLinearMatMul's requantization (A's scale per tensor or per row, B's per tensor
    /// or per column).
    pub requant: Option<Requant>,
}

/// ConvInteger or QLinearConv, resolved: a direct convolution of X (`[N, C, *S]`) by
/// W (`[M, C / group, *K]`), accumulated in i32.
#[derive(Clone, Debug, PartialEq)]
pub struct IntConvSpec {
    /// X and its zero point (one value).
    pub x: IntOperand,
    /// W and its zero point (one value or one per output channel).
    pub w: IntOperand,
    /// QLinearConv's i32 bias, one per output channel.
    pub bias: Option<ValueId>,
    /// Batch.
    pub batch: usize,
    /// Input channels.
    pub c: usize,
    /// Output channels.
    pub m: usize,
    /// Groups.
    pub group: usize,
    /// The window per spatial dim.
    pub dims: Vec<Dim>,
    /// Output elements.
    pub count: usize,
    /// The output.
    pub out: ValueId,
    /// Its dtype.
    pub out_dt: DType,
    /// QLinearConv's requantization (X's scale per tensor, W's per tensor or per
    /// output channel).
    pub requant: Option<Requant>,
}

impl IntConvSpec {
    /// Input channels per group.
    pub fn cg(&self) -> usize {
        self.c / self.group
    }
    /// Output channels per group.
    pub fn mg(&self) -> usize {
        self.m / self.group
    }
    /// Kernel taps.
    pub fn taps(&self) -> usize {
        self.dims.iter().map(|d| d.kernel).product()
    }
    /// Input elements per channel.
    pub fn in_size(&self) -> usize {
        self.dims.iter().map(|d| d.input).product()
    }
    /// Output elements per channel.
    pub fn out_size(&self) -> usize {
        self.dims.iter().map(|d| d.out).product()
    }
}

/// A quantization node, resolved: where it is, and which op with what.
pub type QuantSpec = Sited<Form>;

/// The op of a quantization node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Form {
    /// QuantizeLinear.
    Quantize(QuantizeSpec),
    /// DequantizeLinear.
    Dequantize(DequantizeSpec),
    /// DynamicQuantizeLinear.
    Dynamic(DynamicSpec),
    /// MatMulInteger, QLinearMatMul.
    MatMul(IntMatMulSpec),
    /// ConvInteger, QLinearConv.
    Conv(IntConvSpec),
}

/// Reads quantization node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<QuantSpec> {
    Sited::read(g, node, form)
}

/// Reads the op of quantization node `node` of `g`.
fn form(g: &Graph, node: &Node) -> Result<Form> {
    let other = || {
        Err(plan(format!(
            "node `{}` ({}) is not a quantization op",
            node.name, node.op
        )))
    };
    match node.op {
        Op::Nn(o) => match o {
            NnOp::QuantizeLinear => quantize(g, node).map(Form::Quantize),
            NnOp::DequantizeLinear => dequantize(g, node).map(Form::Dequantize),
            NnOp::DynamicQuantizeLinear => dynamic(g, node).map(Form::Dynamic),
            NnOp::MatMulInteger | NnOp::QLinearMatMul => matmul(g, node).map(Form::MatMul),
            NnOp::ConvInteger | NnOp::QLinearConv => conv(g, node).map(Form::Conv),
            NnOp::MatMul
            | NnOp::Gemm
            | NnOp::MatMulNBits
            | NnOp::Conv
            | NnOp::ConvTranspose
            | NnOp::DeformConv
            | NnOp::AveragePool
            | NnOp::MaxPool
            | NnOp::LpPool
            | NnOp::GlobalAveragePool
            | NnOp::GlobalMaxPool
            | NnOp::GlobalLpPool
            | NnOp::MaxUnpool
            | NnOp::Einsum
            | NnOp::Det => other(),
        },
        Op::Elementwise(_)
        | Op::Fused(_)
        | Op::Reduce(_)
        | Op::Shape(_)
        | Op::Attention(_)
        | Op::Image(_)
        | Op::Control(_)
        | Op::Collective(_) => other(),
    }
}

/// `axis` (default 1) and `block_size` (default 0) of a (de)quantization node.
fn axis_block(node: &Node) -> Result<(i64, i64)> {
    Ok((
        node.attrs.int_or("axis", 1).map_err(plan)?,
        node.attrs.int_or("block_size", 0).map_err(plan)?,
    ))
}

/// The scale (input 1) and zero point (input 2) of a (de)quantization node over data
/// of shape `xs`.
fn params(g: &Graph, node: &Node, xs: &[usize]) -> Result<(Param, Option<Param>)> {
    let (axis, block) = axis_block(node)?;
    let param = |k: usize| -> Result<Option<Param>> {
        let Some(v) = opt_input(node, k) else {
            return Ok(None);
        };
        let (dt, ps) = typed(g, node, v)?;
        let map = ParamMap::new(xs, &ps, axis, block).map_err(|w| unsupported(node, &w))?;
        Ok(Some(Param { v, dt, map }))
    };
    let scale = param(1)?.ok_or_else(|| unsupported(node, "a missing scale"))?;
    if !is_f32ish(scale.dt) {
        return Err(unsupported(node, &format!("{} scales", scale.dt)));
    }
    Ok((scale, param(2)?))
}

/// The type numpy computes `x / scale` in, for float dtypes `a` and `b` (as the
/// interpreter's promotion; f64 and i32 promote to f64).
fn promote(a: DType, b: DType) -> DType {
    if a == b && a.is_float() {
        a
    } else if a == DType::F64 || b == DType::F64 || a == DType::I32 || b == DType::I32 {
        DType::F64
    } else {
        DType::F32
    }
}

/// The affine map of (de)quantization node `node`: data, scales, zero points, output.
/// `sides` checks the data's and output's dtypes and returns the quantized side's (the
/// zero points') dtype with what else its op reads from them.
fn affine<T>(
    g: &Graph,
    node: &Node,
    sides: impl FnOnce(DType, DType) -> Result<(DType, T)>,
) -> Result<(Affine, T)> {
    let (x, out) = (input(node, 0)?, output(node, 0)?);
    let (x_dt, xs) = typed(g, node, x)?;
    let (out_dt, _) = typed(g, node, out)?;
    let (quantized, more) = sides(x_dt, out_dt)?;
    let (scale, zero) = params(g, node, &xs)?;
    if zero.is_some_and(|z| z.dt != quantized) {
        return Err(plan(format!(
            "{}: a zero point of another dtype",
            node.name
        )));
    }
    let affine = Affine {
        x,
        x_dt,
        scale,
        zero,
        out,
        out_dt,
        n: xs.iter().product(),
    };
    Ok((affine, more))
}

/// Reads QuantizeLinear.
fn quantize(g: &Graph, node: &Node) -> Result<QuantizeSpec> {
    let (affine, (lo, hi)) = affine(g, node, |x_dt, out_dt| {
        if !is_f32ish(x_dt) {
            return Err(unsupported(node, &format!("{x_dt} data")));
        }
        let bounds =
            range(out_dt).ok_or_else(|| unsupported(node, &format!("a {out_dt} output")))?;
        Ok((out_dt, bounds))
    })?;
    let prec = match node.attrs.dtype("precision").map_err(plan)? {
        Some(p) => p,
        None => promote(affine.x_dt, affine.scale.dt),
    };
    if !is_f32ish(prec) {
        return Err(unsupported(node, &format!("{prec} precision")));
    }
    Ok(QuantizeSpec {
        affine,
        prec,
        lo,
        hi,
    })
}

/// Reads DequantizeLinear.
fn dequantize(g: &Graph, node: &Node) -> Result<DequantizeSpec> {
    let (affine, ()) = affine(g, node, |x_dt, out_dt| {
        if range(x_dt).is_none() {
            return Err(unsupported(node, &format!("{x_dt} data")));
        }
        if !is_f32ish(out_dt) {
            return Err(unsupported(node, &format!("a {out_dt} output")));
        }
        Ok((x_dt, ()))
    })?;
    Ok(DequantizeSpec { affine })
}

/// Reads DynamicQuantizeLinear.
fn dynamic(g: &Graph, node: &Node) -> Result<DynamicSpec> {
    let x = input(node, 0)?;
    let (x_dt, xs) = typed(g, node, x)?;
    if !is_f32ish(x_dt) {
        return Err(unsupported(node, &format!("{x_dt} data")));
    }
    let n: usize = xs.iter().product();
    if n > DYNAMIC_MAX {
        return Err(unsupported(
            node,
            &format!("more than {DYNAMIC_MAX} elements (one block reduces them)"),
        ));
    }
    Ok(DynamicSpec {
        x,
        x_dt,
        y: output(node, 0)?,
        scale: output(node, 1)?,
        zero: output(node, 2)?,
        n,
    })
}

/// Integer operand `k` of `node` with its zero point (input `zk`), which may hold one
/// value per index of dim `axis` (of `len` values) when `axis` is given.
fn int_operand(
    g: &Graph,
    node: &Node,
    k: usize,
    zk: usize,
    axis: Option<usize>,
) -> Result<(IntOperand, Vec<usize>)> {
    let v = input(node, k)?;
    let (dt, s) = typed(g, node, v)?;
    if range(dt).is_none() {
        return Err(unsupported(node, &format!("{dt} data")));
    }
    let zero = match opt_input(node, zk) {
        None => None,
        Some(z) => {
            let (zdt, zs) = typed(g, node, z)?;
            if zdt != dt {
                return Err(plan(format!(
                    "{}: a zero point of another dtype",
                    node.name
                )));
            }
            let len: usize = zs.iter().product();
            let per_axis = len != 1;
            if per_axis && !axis.is_some_and(|a| zs.len() == 1 && s.get(a) == Some(&len)) {
                return Err(unsupported(
                    node,
                    &format!("a zero point of shape {zs:?} for data of shape {s:?}"),
                ));
            }
            Some((z, per_axis))
        }
    };
    Ok((IntOperand { v, dt, zero }, s))
}

/// Scale input `k` of `node`: one value, or `len` values when `per_axis_len` is given.
fn scale(g: &Graph, node: &Node, k: usize, per_axis_len: Option<usize>) -> Result<Scale> {
    let v = input(node, k)?;
    let (dt, s) = typed(g, node, v)?;
    if !is_f32ish(dt) {
        return Err(unsupported(node, &format!("{dt} scales")));
    }
    let len: usize = s.iter().product();
    let per_axis = len != 1;
    if per_axis && per_axis_len != Some(len) {
        return Err(unsupported(
            node,
            &format!("a scale of shape {s:?} (input {k})"),
        ));
    }
    Ok(Scale { v, dt, per_axis })
}

/// The requantization of a QLinear node: scales at inputs 1 (`len1` values allowed),
/// `k2` (`len2` values allowed) and 6, Y's zero point at 7, output dtype `out_dt`.
fn requant(
    g: &Graph,
    node: &Node,
    (len1, k2, len2): (Option<usize>, usize, Option<usize>),
    out_dt: DType,
) -> Result<Requant> {
    let (lo, hi) = range(out_dt).ok_or_else(|| unsupported(node, &format!("a {out_dt} output")))?;
    let s1 = scale(g, node, 1, len1)?;
    let y_zero = opt_input(node, 7);
    if let Some(z) = y_zero {
        if typed(g, node, z)?.0 != out_dt {
            return Err(plan(format!(
                "{}: a Y zero point of another dtype",
                node.name
            )));
        }
    }
    Ok(Requant {
        s1,
        s2: scale(g, node, k2, len2)?,
        sy: scale(g, node, 6, None)?,
        y_zero,
        out_dt,
        round: s1.dt,
        lo,
        hi,
    })
}

/// Reads MatMulInteger or QLinearMatMul.
fn matmul(g: &Graph, node: &Node) -> Result<IntMatMulSpec> {
    let qlinear = node.op == Op::Nn(NnOp::QLinearMatMul);
    let (bk, azk, bzk) = if qlinear { (3, 2, 5) } else { (1, 2, 3) };
    let a_rank = typed(g, node, input(node, 0)?)?.1.len();
    let b_rank = typed(g, node, input(node, bk)?)?.1.len();
    // Zero points per row of A / per column of B (a 1-D operand has neither).
    let (a, as_) = int_operand(g, node, 0, azk, (a_rank >= 2).then(|| a_rank - 2))?;
    let (b, bs) = int_operand(g, node, bk, bzk, (b_rank >= 2).then(|| b_rank - 1))?;
    let out = output(node, 0)?;
    let (out_dt, ys) = typed(g, node, out)?;
    let (m, ka, abatch) = match as_.as_slice() {
        [] => return Err(unsupported(node, "a scalar A")),
        [k] => (1, *k, &[][..]),
        [lead @ .., m, k] => (*m, *k, lead),
    };
    let (kb, n, bbatch) = match bs.as_slice() {
        [] => return Err(unsupported(node, "a scalar B")),
        [k] => (*k, 1, &[][..]),
        [lead @ .., k, n] => (*k, *n, lead),
    };
    if ka != kb {
        return Err(plan(format!("{}: A's K {ka} is not B's {kb}", node.name)));
    }
    // Broadcast batch dims, right-aligned.
    let r = abatch.len().max(bbatch.len());
    let dim_of = |s: &[usize], i: usize| {
        let pad = r - s.len();
        if i < pad {
            1
        } else {
            s[i - pad]
        }
    };
    let (ast, bst) = (strides(abatch), strides(bbatch));
    let stride_of = |s: &[usize], st: &[usize], i: usize, per: usize| {
        let pad = r - s.len();
        if i < pad || s[i - pad] == 1 {
            0
        } else {
            st[i - pad] * per
        }
    };
    let mut batch = Vec::new();
    let mut dims = Vec::new();
    for i in 0..r {
        let (da, db) = (dim_of(abatch, i), dim_of(bbatch, i));
        if da != db && da != 1 && db != 1 {
            return Err(plan(format!(
                "{}: batch dims that do not broadcast",
                node.name
            )));
        }
        dims.push(da.max(db));
        batch.push((
            da.max(db),
            stride_of(abatch, &ast, i, m * ka),
            stride_of(bbatch, &bst, i, ka * n),
        ));
    }
    batch.reverse();
    let count: usize = dims.iter().product::<usize>() * m * n;
    if ys.iter().product::<usize>() != count {
        return Err(plan(format!(
            "{}: output shape {ys:?} for A {as_:?} and B {bs:?}",
            node.name
        )));
    }
    let requant = if qlinear {
        Some(requant(g, node, (Some(m), 4, Some(n)), out_dt)?)
    } else if out_dt != DType::I32 {
        return Err(plan(format!("{}: a {out_dt} output", node.name)));
    } else {
        None
    };
    Ok(IntMatMulSpec {
        a,
        b,
        m,
        n,
        k: ka,
        batch,
        count,
        out,
        out_dt,
        requant,
    })
}

/// Reads ConvInteger or QLinearConv.
fn conv(g: &Graph, node: &Node) -> Result<IntConvSpec> {
    if let Some(k) = node
        .attrs
        .0
        .keys()
        .find(|k| !super::conv::PLAIN_ATTRS.contains(&k.as_str()))
    {
        return Err(unsupported(node, &format!("attribute `{k}`")));
    }
    let qlinear = node.op == Op::Nn(NnOp::QLinearConv);
    let (wk, xzk, wzk) = if qlinear { (3, 2, 5) } else { (1, 2, 3) };
    let (x, xs) = int_operand(g, node, 0, xzk, None)?;
    let (w, ws) = int_operand(g, node, wk, wzk, Some(0))?;
    let out = output(node, 0)?;
    let (out_dt, ys) = typed(g, node, out)?;
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(unsupported(node, "X and W of these ranks"));
    }
    let group = usize::try_from(node.attrs.int_or("group", 1).map_err(plan)?)
        .map_err(|_| unsupported(node, "a negative group"))?;
    let (batch, c, m) = (xs[0], xs[1], ws[0]);
    if group == 0 || m % group != 0 || ws[1] * group != c {
        return Err(unsupported(node, "channels that do not match the group"));
    }
    let kernel = &ws[2..];
    if let Some(k) = node.attrs.ints("kernel_shape").map_err(plan)? {
        if k.len() != kernel.len() || k.iter().zip(kernel).any(|(&a, &b)| a != b as i64) {
            return Err(unsupported(node, "a kernel_shape that differs from W's"));
        }
    }
    if ys.len() != xs.len() || ys[0] != batch || ys[1] != m {
        return Err(plan(format!("{}: output shape {ys:?}", node.name)));
    }
    let dims = resolve(node, kernel, &xs[2..], &ys[2..])?;
    let bias = if qlinear { opt_input(node, 8) } else { None };
    if let Some(b) = bias {
        let (bdt, bs) = typed(g, node, b)?;
        if bdt != DType::I32 || bs != [m] {
            return Err(unsupported(
                node,
                &format!("a {bdt} bias of shape {bs:?} (i32, one per output channel)"),
            ));
        }
    }
    let requant = if qlinear {
        Some(requant(g, node, (None, 4, Some(m)), out_dt)?)
    } else if out_dt != DType::I32 {
        return Err(plan(format!("{}: a {out_dt} output", node.name)));
    } else {
        None
    };
    Ok(IntConvSpec {
        x,
        w,
        bias,
        batch,
        c,
        m,
        group,
        dims,
        count: ys.iter().product(),
        out,
        out_dt,
        requant,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_maps_follow_the_interpreter() {
        let l = Lit("u");
        assert!(ParamMap::new(&[2, 3], &[], 1, 0).unwrap().is_scalar());
        assert_eq!(ParamMap::SCALAR.index("i", l), "0u");
        assert!(ParamMap::new(&[2, 3], &[1], 1, 0).unwrap().is_scalar());
        let per = ParamMap::new(&[1, 3, 3, 2], &[3], 1, 0).unwrap();
        assert_eq!(per.index("i", l), "(((i / 6u) % 3u) / 1u) * 1u");
        // Blocked: x [3, 4], scales [3, 2], axis 1, block 2: element (r, c) reads
        // parameter r * 2 + c / 2.
        let b = ParamMap::new(&[3, 4], &[3, 2], 1, 2).unwrap();
        let at = |i: usize| {
            let (inner, a, outer) = (i % b.inner, (i / b.inner) % b.dim, i / (b.inner * b.dim));
            outer * b.os + (a / b.block) * b.is + inner * b.ins
        };
        assert_eq!(
            (0..12).map(at).collect::<Vec<_>>(),
            [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
        );
        assert!(ParamMap::new(&[3, 4], &[3, 3], 1, 2).is_err());
        assert!(ParamMap::new(&[3, 4], &[4], 1, 0).unwrap().is == 1);
        assert!(ParamMap::new(&[3, 4], &[3], 1, 0).is_err());
    }

    #[test]
    fn ranges_are_the_quantized_types() {
        assert_eq!(range(DType::U8), Some((0, 255)));
        assert_eq!(range(DType::I16), Some((-32768, 32767)));
        assert_eq!(range(DType::I32), None);
        assert_eq!(promote(DType::F32, DType::F16), DType::F32);
        assert_eq!(promote(DType::F16, DType::F16), DType::F16);
    }
}
