//! Linear quantization: QuantizeLinear, DequantizeLinear (per-tensor, per-axis and
//! blocked scales and zero points) and DynamicQuantizeLinear, plus the rounding and
//! saturation helpers the quantized products (QLinearMatMul, QLinearConv) share.
//! Quantized types are the 8- and 16-bit integers; float8 and int4 never reach the IR.

use crate::dtype::DType;
use crate::error::{shape_err, unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, norm_axis, opt_in_ty, opt_input};
use crate::ops::InferInput;
use crate::tensor::{array_from, Tensor};
use half::{bf16, f16};

/// Rounds half to even (numpy's `rint`).
pub(crate) fn round_half_even(v: f64) -> f64 {
    v.round_ties_even()
}

/// The value range of an integer dtype, as f64.
fn int_range(dt: DType) -> Option<(f64, f64)> {
    match dt {
        DType::U8 => Some((0.0, 255.0)),
        DType::I8 => Some((-128.0, 127.0)),
        DType::U16 => Some((0.0, 65535.0)),
        DType::I16 => Some((-32768.0, 32767.0)),
        DType::I32 => Some((i32::MIN as f64, i32::MAX as f64)),
        _ => None,
    }
}

/// Clamps an integral f64 into `dt`'s range (NaN becomes 0).
pub(crate) fn saturate_i64(v: f64, dt: DType) -> i64 {
    let (lo, hi) = int_range(dt).unwrap_or((i64::MIN as f64, i64::MAX as f64));
    if v.is_nan() {
        0
    } else {
        v.clamp(lo, hi) as i64
    }
}

/// Rounds `v` to the precision of float dtype `dt` (no-op for f64 and non-floats).
pub(crate) fn round_to(v: f64, dt: DType) -> f64 {
    match dt {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        _ => v,
    }
}

/// `a * b` rounded to the precision of `dt`.
pub(crate) fn scale_mul(a: f64, b: f64, dt: DType) -> f64 {
    round_to(a * b, dt)
}

/// The dtype numpy computes `a op b` in for two float (or i32) dtypes.
fn promote(a: DType, b: DType) -> DType {
    match (a, b) {
        _ if a == b && a.is_float() => a,
        (DType::F64, _) | (_, DType::F64) => DType::F64,
        (DType::I32, _) | (_, DType::I32) => DType::F64,
        _ => DType::F32,
    }
}

/// Where each element of `x` finds its scale and zero point: `flat` splits into
/// `(outer, a, inner)` around the quantization axis; the parameter index is
/// `outer * os + (a / block) * is + inner * ins`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ParamMap {
    inner: usize,
    dim: usize,
    block: usize,
    os: usize,
    is: usize,
    ins: usize,
}

impl ParamMap {
    /// The map for a parameter of shape `p` against data of shape `x`.
    pub fn new(x: &[usize], p: &[usize], axis: i64, block: i64, op: &str) -> Result<ParamMap> {
        let plen: usize = p.iter().product();
        let mut map = ParamMap {
            inner: 1,
            dim: 1,
            block: 1,
            os: 0,
            is: 0,
            ins: 0,
        };
        if block <= 0 && plen == 1 && p.len() <= 1 {
            return Ok(map);
        }
        let ax = norm_axis(axis, x.len())?;
        map.inner = x[ax + 1..].iter().product();
        map.dim = x[ax];
        if block <= 0 {
            if p.len() != 1 || p[0] != x[ax] {
                return shape_err(format!(
                    "{op}: per-axis parameter of shape {p:?} must hold dim {ax} of {x:?}"
                ));
            }
            map.is = 1;
            return Ok(map);
        }
        let b = block as usize;
        let ok = p.len() == x.len()
            && p.iter().zip(x).enumerate().all(|(i, (&pd, &xd))| {
                if i == ax {
                    pd * b >= xd && (pd == 0 || (pd - 1) * b < xd)
                } else {
                    pd == xd
                }
            });
        if !ok {
            return shape_err(format!(
                "{op}: blocked parameter of shape {p:?} does not fit {x:?} (axis {ax}, block {b})"
            ));
        }
        map.block = b;
        map.ins = 1;
        map.is = map.inner;
        map.os = p[ax] * map.inner;
        Ok(map)
    }

    /// Parameter index of element `flat`.
    pub fn index(&self, flat: usize) -> usize {
        let inner = flat % self.inner;
        let a = (flat / self.inner) % self.dim;
        let outer = flat / (self.inner * self.dim);
        outer * self.os + (a / self.block) * self.is + inner * self.ins
    }
}

/// The zero point's map and values (a lone 0 when absent); values are exact in f64.
fn zero_point(
    x: &[usize],
    zp: Option<&Tensor>,
    axis: i64,
    block: i64,
    op: &str,
) -> Result<(ParamMap, Vec<f64>)> {
    match zp {
        Some(z) => Ok((
            ParamMap::new(x, z.shape(), axis, block, &format!("{op} zero point"))?,
            z.to_f64_vec(),
        )),
        None => Ok((ParamMap::new(x, &[], axis, 0, op)?, vec![0.0])),
    }
}

/// Reads `axis` and `block_size`.
fn axis_block(node: &Node) -> Result<(i64, i64)> {
    Ok((
        node.attrs.int_or("axis", 1)?,
        node.attrs.int_or("block_size", 0)?,
    ))
}

/// Output dtype of QuantizeLinear: the zero point's, else `output_dtype`, else u8.
fn quantized_dtype(node: &Node, zp: Option<DType>) -> Result<DType> {
    let attr = node.attrs.dtype("output_dtype")?;
    let dt = match (zp, attr) {
        (Some(z), Some(a)) if z != a => {
            return Err(IrError::DType {
                context: "QuantizeLinear output_dtype vs zero point".into(),
                expected: a.name().into(),
                found: z,
            })
        }
        (Some(z), _) => z,
        (None, Some(a)) => a,
        (None, None) => DType::U8,
    };
    if int_range(dt).is_none() || dt == DType::I32 {
        return unsupported(format!("QuantizeLinear to {dt} (u8, i8, u16, i16 only)"));
    }
    Ok(dt)
}

/// Evaluates QuantizeLinear: `saturate(rint(x / scale) + zero_point)`.
pub(crate) fn eval_quantize(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (x, s) = (input(inputs, 0)?, input(inputs, 1)?);
    let zp = opt_input(inputs, 2);
    let out_dt = quantized_dtype(node, zp.map(Tensor::dtype))?;
    if !(x.dtype().is_float() || x.dtype() == DType::I32) || !s.dtype().is_float() {
        return unsupported(format!(
            "QuantizeLinear of {} by {} scales",
            x.dtype(),
            s.dtype()
        ));
    }
    let (axis, block) = axis_block(node)?;
    let map = ParamMap::new(x.shape(), s.shape(), axis, block, "QuantizeLinear")?;
    let (zmap, zv) = zero_point(x.shape(), zp, axis, block, "QuantizeLinear")?;
    let prec = match node.attrs.dtype("precision")? {
        Some(p) => p,
        None => promote(x.dtype(), s.dtype()),
    };
    let sv = s.to_f64_vec();
    let xs = x.to_f64_vec();
    let q: Vec<i64> = xs
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let sc = round_to(sv[map.index(i)], prec);
            let z = zv[zmap.index(i)];
            saturate_i64(
                round_half_even(round_to(round_to(v, prec) / sc, prec)) + z,
                out_dt,
            )
        })
        .collect();
    Ok(Tensor::I64(array_from(x.shape(), q)?).cast(out_dt))
}

/// Evaluates DequantizeLinear: `(x - zero_point) * scale`.
pub(crate) fn eval_dequantize(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (x, s) = (input(inputs, 0)?, input(inputs, 1)?);
    let zp = opt_input(inputs, 2);
    if int_range(x.dtype()).is_none() || !s.dtype().is_float() {
        return unsupported(format!(
            "DequantizeLinear of {} by {} scales",
            x.dtype(),
            s.dtype()
        ));
    }
    if let Some(z) = zp {
        if z.dtype() != x.dtype() {
            return Err(IrError::DType {
                context: "DequantizeLinear zero point".into(),
                expected: x.dtype().name().into(),
                found: z.dtype(),
            });
        }
    }
    let out_dt = node.attrs.dtype("output_dtype")?.unwrap_or(s.dtype());
    let (axis, block) = axis_block(node)?;
    let map = ParamMap::new(x.shape(), s.shape(), axis, block, "DequantizeLinear")?;
    let (zmap, zv) = zero_point(x.shape(), zp, axis, block, "DequantizeLinear")?;
    // numpy computes in f32 unless the scale (or the i32 data) asks for f64.
    let prec = if s.dtype() == DType::F64 || x.dtype() == DType::I32 {
        DType::F64
    } else {
        DType::F32
    };
    let sv = s.to_f64_vec();
    let y: Vec<f64> = x
        .to_i64_vec()
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let z = zv[zmap.index(i)];
            round_to((v as f64 - z) * sv[map.index(i)], prec)
        })
        .collect();
    Ok(Tensor::F64(array_from(x.shape(), y)?).cast(out_dt))
}

/// Evaluates DynamicQuantizeLinear: u8 data, scale and zero point from the data's range.
pub(crate) fn eval_dynamic_quantize(inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    if !x.dtype().is_float() || x.dtype() == DType::F64 {
        return unsupported(format!("DynamicQuantizeLinear of {}", x.dtype()));
    }
    let xs: Vec<f32> = x.to_f64_vec().into_iter().map(|v| v as f32).collect();
    let maxx = xs.iter().copied().fold(0.0f32, f32::max);
    let minx = xs.iter().copied().fold(0.0f32, f32::min);
    let scale = (if maxx == minx { 1.0 } else { maxx - minx }) / 255.0f32;
    let zp = (0.0f32 - minx / scale).clamp(0.0, 255.0).round_ties_even();
    let y: Vec<u8> = xs
        .iter()
        .map(|&v| ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0) as u8)
        .collect();
    Ok(vec![
        Tensor::U8(array_from(x.shape(), y)?),
        Tensor::scalar_f64(x.dtype(), scale as f64),
        Tensor::scalar_f64(DType::U8, zp as f64),
    ])
}

/// Output types of the quantization ops.
pub(crate) fn infer_quantize(
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let dt = quantized_dtype(node, opt_in_ty(inputs, 2).map(|z| z.ty.dtype))?;
    Ok(vec![TensorType::new(dt, x.shape.clone())])
}

/// Output types of DequantizeLinear.
pub(crate) fn infer_dequantize(
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let s = in_ty(inputs, 1)?.ty;
    let dt = node.attrs.dtype("output_dtype")?.unwrap_or(s.dtype);
    Ok(vec![TensorType::new(dt, x.shape.clone())])
}

/// Output types of DynamicQuantizeLinear.
pub(crate) fn infer_dynamic_quantize(inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    Ok(vec![
        TensorType::new(DType::U8, x.shape.clone()),
        TensorType::new(x.dtype, vec![]),
        TensorType::new(DType::U8, vec![]),
    ])
}
