//! Quantized products: MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv.
//! Zero points are subtracted exactly in f64, the product runs on the float kernels
//! (exact for 8-bit data), and the QLinear ops requantize with the spec's
//! `scale_a * scale_b / scale_y` multiplier computed in the scales' precision.

use super::conv::{add_bias, check_bias, conv_core, ConvShape};
use super::matmul::matmul;
use super::quant::{round_half_even, round_to, saturate_i64, scale_mul};
use crate::dtype::DType;
use crate::error::{shape_err, unsupported, IrError, Result};
use crate::graph::Node;
use crate::ops::util::{input, opt_input};
use crate::tensor::{array_from, Elem, Tensor};
use ndarray::ArrayD;

/// The data of an 8/16-bit integer tensor minus its zero point, as exact f64 values.
/// `zp` is a scalar, or a 1-D tensor of `dims[axis]` values (per-row or per-column).
pub(crate) fn centered(
    x: &Tensor,
    zp: Option<&Tensor>,
    axis: usize,
    op: &str,
) -> Result<ArrayD<f64>> {
    if !matches!(x.dtype(), DType::U8 | DType::I8 | DType::U16 | DType::I16) {
        return unsupported(format!("{op} on {} (u8/i8 quantized data only)", x.dtype()));
    }
    let mut a: ArrayD<f64> = crate::with_tensor!(x, v => v.mapv(|e| e.to_f64()));
    if let Some(zp) = zp {
        if zp.dtype() != x.dtype() {
            return Err(IrError::DType {
                context: format!("{op} zero point"),
                expected: x.dtype().name().into(),
                found: zp.dtype(),
            });
        }
        let z = zp.to_f64_vec();
        if z.len() == 1 {
            a.mapv_inplace(|v| v - z[0]);
        } else if zp.rank() == 1 && axis < a.ndim() && z.len() == a.shape()[axis] {
            for (i, mut lane) in a.axis_iter_mut(ndarray::Axis(axis)).enumerate() {
                lane.mapv_inplace(|v| v - z[i]);
            }
        } else {
            return shape_err(format!(
                "{op} zero point of shape {:?} fits neither a scalar nor dim {axis} of {:?}",
                zp.shape(),
                x.shape()
            ));
        }
    }
    Ok(a)
}

/// Evaluates MatMulInteger: `(A - a_zero_point) @ (B - b_zero_point)` in i32.
pub(crate) fn eval_matmul_integer(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
    let ra = a.rank().max(2);
    let a = centered(a, opt_input(inputs, 2), ra - 2, "MatMulInteger")?;
    let b = centered(
        b,
        opt_input(inputs, 3),
        b.rank().saturating_sub(1),
        "MatMulInteger",
    )?;
    let p = matmul(a.view(), b.view())?;
    Ok(Tensor::I32(p.mapv(|v| v as i64 as i32)))
}

/// Evaluates QLinearMatMul: the integer product requantized with
/// `a_scale * b_scale / y_scale` and `y_zero_point`.
pub(crate) fn eval_qlinear_matmul(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let a = input(inputs, 0)?;
    let b = input(inputs, 3)?;
    let (sa, sb, sy) = (input(inputs, 1)?, input(inputs, 4)?, input(inputs, 6)?);
    let yzp = opt_input(inputs, 7);
    let ra = a.rank().max(2);
    let ac = centered(a, opt_input(inputs, 2), ra - 2, "QLinearMatMul")?;
    let bc = centered(
        b,
        opt_input(inputs, 5),
        b.rank().saturating_sub(1),
        "QLinearMatMul",
    )?;
    let p = matmul(ac.view(), bc.view())?;
    let out_dt = yzp.map_or(a.dtype(), Tensor::dtype);
    let (sav, sbv, syv) = (sa.to_f64_vec(), sb.to_f64_vec(), sy.to_f64_vec());
    let zy = yzp.map_or(0.0, |z| z.to_f64_vec().first().copied().unwrap_or(0.0));
    if syv.len() != 1 {
        return unsupported("QLinearMatMul with a per-axis y_scale");
    }
    let (m, n) = (
        if a.rank() > 1 {
            a.shape()[a.rank() - 2]
        } else {
            1
        },
        if b.rank() > 1 {
            b.shape()[b.rank() - 1]
        } else {
            1
        },
    );
    let pick = |v: &[f64], i: usize, len: usize, what: &str| -> Result<f64> {
        match v.len() {
            1 => Ok(v[0]),
            l if l == len => Ok(v[i]),
            l => shape_err(format!(
                "QLinearMatMul {what} has {l} values, expected 1 or {len}"
            )),
        }
    };
    // Multipliers per (row, column), computed in the scales' precision like the spec's
    // reference does.
    let sdt = sa.dtype();
    let mut mult = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let ab = scale_mul(
                pick(&sav, i, m, "a_scale")?,
                pick(&sbv, j, n, "b_scale")?,
                sdt,
            );
            mult.push(super::quant::round_to(ab / syv[0], sdt));
        }
    }
    let out_shape = p.shape().to_vec();
    let vals: Vec<i64> = p
        .iter()
        .enumerate()
        .map(|(idx, &c)| {
            let (i, j) = ((idx / n) % m, idx % n);
            let q = round_half_even(c * mult[i * n + j] + zy);
            saturate_i64(q, out_dt)
        })
        .collect();
    let t = Tensor::I64(array_from(&out_shape, vals)?);
    Ok(t.cast(out_dt))
}

/// The integer convolution shared by ConvInteger and QLinearConv: `(x - x_zp) * (w -
/// w_zp)` (w_zp scalar or per output channel), exact in f64, as `[N, M, *out]`.
fn int_conv(
    node: &Node,
    x: &Tensor,
    xzp: Option<&Tensor>,
    w: &Tensor,
    wzp: Option<&Tensor>,
    op: &str,
) -> Result<(ConvShape, Vec<f64>)> {
    let cs = ConvShape::new(node, x.shape(), w.shape())?;
    if xzp.is_some_and(|z| z.len() != 1) {
        return unsupported(format!("{op} with a per-channel x zero point"));
    }
    let xc = centered(x, xzp, 1, op)?;
    let wc = centered(w, wzp, 0, op)?;
    let out = conv_core(
        xc.as_slice().expect("fresh array"),
        wc.as_slice().expect("fresh array"),
        None,
        &cs,
    );
    Ok((cs, out))
}

/// Evaluates ConvInteger: the integer convolution as i32.
pub(crate) fn eval_conv_integer(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (x, w) = (input(inputs, 0)?, input(inputs, 1)?);
    let (cs, out) = int_conv(
        node,
        x,
        opt_input(inputs, 2),
        w,
        opt_input(inputs, 3),
        "ConvInteger",
    )?;
    let out: Vec<i32> = out.into_iter().map(|v| v as i64 as i32).collect();
    Ok(Tensor::I32(array_from(&cs.out_shape(), out)?))
}

/// Evaluates QLinearConv: the integer convolution plus the i32 bias, requantized with
/// `x_scale * w_scale / y_scale` (w_scale per output channel or scalar) and `y_zp`.
pub(crate) fn eval_qlinear_conv(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let w = input(inputs, 3)?;
    let (sx, sw, sy) = (input(inputs, 1)?, input(inputs, 4)?, input(inputs, 6)?);
    let yzp = opt_input(inputs, 7);
    let (cs, mut out) = int_conv(
        node,
        x,
        opt_input(inputs, 2),
        w,
        opt_input(inputs, 5),
        "QLinearConv",
    )?;
    if let Some(b) = opt_input(inputs, 8) {
        check_bias(b, cs.m, "QLinearConv")?;
        let bv = b.to_f64_vec();
        add_bias(&mut out, &bv, cs.geo.out_size());
    }
    let (sxv, swv, syv) = (sx.to_f64_vec(), sw.to_f64_vec(), sy.to_f64_vec());
    if sxv.len() != 1 || syv.len() != 1 || (swv.len() != 1 && swv.len() != cs.m) {
        return shape_err(format!(
            "QLinearConv scales: x {:?}, w {:?}, y {:?} (w may hold one per output channel)",
            sx.shape(),
            sw.shape(),
            sy.shape()
        ));
    }
    let sdt = sx.dtype();
    let mult: Vec<f64> = (0..cs.m)
        .map(|oc| {
            let s = swv[if swv.len() == 1 { 0 } else { oc }];
            round_to(round_to(sxv[0] * s, sdt) / syv[0], sdt)
        })
        .collect();
    let out_dt = yzp.map_or(x.dtype(), Tensor::dtype);
    let zy = yzp.map_or(0.0, |z| z.to_f64_vec().first().copied().unwrap_or(0.0));
    let plane = cs.geo.out_size().max(1);
    let q: Vec<i64> = out
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let oc = (i / plane) % cs.m;
            saturate_i64(round_half_even(v * mult[oc] + zy), out_dt)
        })
        .collect();
    Ok(Tensor::I64(array_from(&cs.out_shape(), q)?).cast(out_dt))
}
