//! Matrix products: MatMul (numpy `matmul`: 1-D promotion, broadcast batch dims) and
//! Gemm (transposes, alpha/beta, bias broadcast), on the [`gemm`](super::gemm) kernel.
//! The quantized products in `qlinear` and Einsum reuse [`matmul`].

use super::gemm::{by_precision, gemm, Mat, MatElem, Real};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{shape_err, unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{broadcast_dims, broadcast_shape, in_ty, input, opt_input};
use crate::ops::InferInput;
use crate::tensor::{array_from, Tensor};
use ndarray::{ArrayD, ArrayViewD, IxDyn};
use rayon::prelude::*;

/// Operand shapes of one (batched) matrix product, after numpy's 1-D promotion.
#[derive(Debug)]
pub(crate) struct MatMulDims {
    /// Rows of each product.
    pub m: usize,
    /// Inner dim.
    pub k: usize,
    /// Columns of each product.
    pub n: usize,
    /// Element offset of each batch's `a` and `b` matrices in their contiguous data.
    offsets: Vec<(usize, usize)>,
    /// The output shape (promoted dims removed again).
    pub out_shape: Vec<usize>,
}

impl MatMulDims {
    /// Checks and plans `a @ b` for concrete shapes.
    pub fn new(a: &[usize], b: &[usize]) -> Result<MatMulDims> {
        if a.is_empty() || b.is_empty() {
            return shape_err(format!(
                "MatMul needs inputs of rank >= 1, got {a:?} and {b:?}"
            ));
        }
        let a2: Vec<usize> = if a.len() == 1 {
            vec![1, a[0]]
        } else {
            a.to_vec()
        };
        let b2: Vec<usize> = if b.len() == 1 {
            vec![b[0], 1]
        } else {
            b.to_vec()
        };
        let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
        let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
        if k != kb {
            return shape_err(format!(
                "MatMul inner dims differ: {a:?} x {b:?} ({k} vs {kb})"
            ));
        }
        let (ba, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
        let batch = broadcast_shape(ba, bb)?;
        let oa = broadcast_offsets(&batch, ba, m * k);
        let ob = broadcast_offsets(&batch, bb, k * n);
        let mut out_shape = batch.clone();
        if a.len() > 1 {
            out_shape.push(m);
        }
        if b.len() > 1 {
            out_shape.push(n);
        }
        Ok(MatMulDims {
            m,
            k,
            n,
            offsets: oa.into_iter().zip(ob).collect(),
            out_shape,
        })
    }
}

/// For each multi-index of `batch` (row-major), the offset of the matching block in a
/// contiguous array whose leading dims `sub` broadcast to `batch` (right-aligned), each
/// block holding `block` elements.
pub(crate) fn broadcast_offsets(batch: &[usize], sub: &[usize], block: usize) -> Vec<usize> {
    let lead = batch.len() - sub.len();
    let mut strides = vec![0usize; batch.len()];
    let mut s = block;
    for i in (0..sub.len()).rev() {
        strides[lead + i] = if sub[i] == 1 { 0 } else { s };
        s *= sub[i];
    }
    let total: usize = batch.iter().product();
    let mut out = Vec::with_capacity(total);
    let mut idx = vec![0usize; batch.len()];
    for _ in 0..total {
        out.push(idx.iter().zip(&strides).map(|(i, s)| i * s).sum());
        for d in (0..batch.len()).rev() {
            idx[d] += 1;
            if idx[d] < batch[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// numpy `matmul` of two arrays of one element type.
pub(crate) fn matmul<T: MatElem>(a: ArrayViewD<T>, b: ArrayViewD<T>) -> Result<ArrayD<T>> {
    let d = MatMulDims::new(a.shape(), b.shape())?;
    let (a, b) = (a.as_standard_layout(), b.as_standard_layout());
    let (ad, bd) = (
        a.as_slice().expect("standard layout"),
        b.as_slice().expect("standard layout"),
    );
    let (m, k, n) = (d.m, d.k, d.n);
    let mut out = vec![T::ZERO; d.out_shape.iter().product()];
    if out.is_empty() {
        return array_from(&d.out_shape, out);
    }
    let nb = d.offsets.len();
    let b_shared = d.offsets.iter().all(|&(_, ob)| ob == 0);
    let a_packed = d
        .offsets
        .iter()
        .enumerate()
        .all(|(i, &(oa, _))| oa == i * m * k);
    if b_shared && a_packed {
        // One tall product: the batches of `a` are consecutive rows.
        gemm(
            nb * m,
            k,
            n,
            T::ONE,
            Mat::rows(ad, k),
            Mat::rows(bd, n),
            T::ZERO,
            &mut out,
        );
    } else if m * n > 0 {
        out.par_chunks_mut(m * n)
            .zip(d.offsets.par_iter())
            .for_each(|(o, &(oa, ob))| {
                let am = Mat::rows(&ad[oa..], k);
                let bm = Mat::rows(&bd[ob..], n);
                gemm(m, k, n, T::ONE, am, bm, T::ZERO, o);
            });
    }
    array_from(&d.out_shape, out)
}

/// Evaluates MatMul.
pub(crate) fn eval_matmul(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
    same_dtype("MatMul", a, b)?;
    match (a, b) {
        (Tensor::F32(x), Tensor::F32(y)) => Ok(Tensor::F32(matmul(x.view(), y.view())?)),
        (Tensor::F64(x), Tensor::F64(y)) => Ok(Tensor::F64(matmul(x.view(), y.view())?)),
        (Tensor::I32(x), Tensor::I32(y)) => Ok(Tensor::I32(matmul(x.view(), y.view())?)),
        (Tensor::I64(x), Tensor::I64(y)) => Ok(Tensor::I64(matmul(x.view(), y.view())?)),
        (Tensor::U32(x), Tensor::U32(y)) => Ok(Tensor::U32(matmul(x.view(), y.view())?)),
        (Tensor::U64(x), Tensor::U64(y)) => Ok(Tensor::U64(matmul(x.view(), y.view())?)),
        (Tensor::F16(_), _) | (Tensor::BF16(_), _) => {
            let (x, y) = (f32::widen(a)?, f32::widen(b)?);
            Ok(f32::narrow(matmul(x.view(), y.view())?, a.dtype()))
        }
        _ => unsupported(format!("MatMul on {}", a.dtype())),
    }
}

/// Fails unless both tensors have the same dtype.
pub(crate) fn same_dtype(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(IrError::DType {
            context: format!("{op} second operand"),
            expected: a.dtype().name().into(),
            found: b.dtype(),
        });
    }
    Ok(())
}

/// Evaluates Gemm: `alpha * A' * B' + beta * C`.
pub(crate) fn eval_gemm(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let (a, b) = (input(inputs, 0)?, input(inputs, 1)?);
    let c = opt_input(inputs, 2);
    same_dtype("Gemm", a, b)?;
    let alpha = node.attrs.float_or("alpha", 1.0)? as f64;
    let beta = node.attrs.float_or("beta", 1.0)? as f64;
    let ta = node.attrs.int_or("transA", 0)? != 0;
    let tb = node.attrs.int_or("transB", 0)? != 0;
    let dims = gemm_dims(a.shape(), b.shape(), ta, tb)?;
    fn real<R: Real>(
        a: &Tensor,
        b: &Tensor,
        c: Option<&Tensor>,
        (m, k, n): (usize, usize, usize),
        (ta, tb): (bool, bool),
        (alpha, beta): (f64, f64),
    ) -> Result<Tensor> {
        let (x, y) = (R::widen(a)?, R::widen(b)?);
        let (x, y) = (x.as_standard_layout(), y.as_standard_layout());
        let am = gemm_operand(x.as_slice().expect("standard layout"), ta, m, k);
        let bm = gemm_operand(y.as_slice().expect("standard layout"), tb, k, n);
        let mut out = ArrayD::from_elem(IxDyn(&[m, n]), R::ZERO);
        let mut acc = R::ZERO;
        if let (Some(c), true) = (c, beta != 0.0) {
            let cw = R::widen(c)?;
            let cb = broadcast_bias(&cw.view(), m, n)?;
            let bt = R::of(beta);
            out.zip_mut_with(&cb, |o, &v| *o = v * bt);
            acc = R::ONE;
        }
        let o = out.as_slice_mut().expect("fresh array");
        gemm(m, k, n, R::of(alpha), am, bm, acc, o);
        Ok(R::narrow(out, a.dtype()))
    }
    fn int<T: MatElem>(
        a: &ArrayD<T>,
        b: &Tensor,
        c: Option<&Tensor>,
        (m, k, n): (usize, usize, usize),
        (ta, tb): (bool, bool),
        (alpha, beta): (f64, f64),
    ) -> Result<Tensor> {
        let (x, y) = (
            a.as_standard_layout(),
            b.as_array::<T>()?.as_standard_layout(),
        );
        let am = gemm_operand(x.as_slice().expect("standard layout"), ta, m, k);
        let bm = gemm_operand(y.as_slice().expect("standard layout"), tb, k, n);
        let mut out = ArrayD::from_elem(IxDyn(&[m, n]), T::ZERO);
        gemm(
            m,
            k,
            n,
            T::ONE,
            am,
            bm,
            T::ZERO,
            out.as_slice_mut().expect("fresh array"),
        );
        let cb = match c {
            Some(c) if beta != 0.0 => Some(broadcast_bias(&c.as_array::<T>()?.view(), m, n)?),
            _ => None,
        };
        if alpha == 1.0 && beta == 1.0 {
            if let Some(cb) = cb {
                out.zip_mut_with(&cb, |o, &v| *o = T::wadd(*o, v));
            }
        } else {
            let cb = cb.unwrap_or_else(|| ArrayD::from_elem(IxDyn(&[m, n]), T::ZERO));
            out.zip_mut_with(&cb, |o, &v| {
                *o = T::from_f64(o.to_f64() * alpha + v.to_f64() * beta)
            });
        }
        Ok(T::wrap(out))
    }
    let (shape, tr, ab) = (dims, (ta, tb), (alpha, beta));
    match a {
        Tensor::I32(x) => int(x, b, c, shape, tr, ab),
        Tensor::I64(x) => int(x, b, c, shape, tr, ab),
        Tensor::U32(x) => int(x, b, c, shape, tr, ab),
        Tensor::U64(x) => int(x, b, c, shape, tr, ab),
        _ => by_precision(
            a.dtype(),
            "Gemm",
            || real::<f32>(a, b, c, shape, tr, ab),
            || real::<f64>(a, b, c, shape, tr, ab),
        ),
    }
}

/// `(M, K, N)` of a Gemm, checking that A and B are matrices with matching inner dims.
fn gemm_dims(a: &[usize], b: &[usize], ta: bool, tb: bool) -> Result<(usize, usize, usize)> {
    if a.len() != 2 || b.len() != 2 {
        return shape_err(format!("Gemm needs 2-D A and B, got {a:?} and {b:?}"));
    }
    let (m, k) = if ta { (a[1], a[0]) } else { (a[0], a[1]) };
    let (kb, n) = if tb { (b[1], b[0]) } else { (b[0], b[1]) };
    if k != kb {
        return shape_err(format!(
            "Gemm inner dims differ: A {a:?} (transA={ta}), B {b:?} (transB={tb})"
        ));
    }
    Ok((m, k, n))
}

/// A row-major `rows x cols` matrix, or the transpose of the stored `cols x rows` one.
fn gemm_operand<T>(data: &[T], trans: bool, rows: usize, cols: usize) -> Mat<'_, T> {
    if trans {
        Mat::rows(data, rows).t()
    } else {
        Mat::rows(data, cols)
    }
}

/// Gemm's C broadcast (unidirectionally) to `[m, n]`.
fn broadcast_bias<T: Clone>(c: &ArrayViewD<T>, m: usize, n: usize) -> Result<ArrayD<T>> {
    c.broadcast(IxDyn(&[m, n]))
        .map(|v| v.to_owned())
        .ok_or_else(|| {
            IrError::Shape(format!(
                "Gemm C {:?} does not broadcast to [{m}, {n}]",
                c.shape()
            ))
        })
}

/// Output shape of `a @ b` for symbolic shapes.
pub(crate) fn matmul_dims(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>> {
    if a.is_empty() || b.is_empty() {
        return shape_err("MatMul needs inputs of rank >= 1");
    }
    let one = Dim::Known(1);
    let a2: Vec<Dim> = if a.len() == 1 {
        vec![one.clone(), a[0].clone()]
    } else {
        a.to_vec()
    };
    let b2: Vec<Dim> = if b.len() == 1 {
        vec![b[0].clone(), one]
    } else {
        b.to_vec()
    };
    let (k, kb) = (&a2[a2.len() - 1], &b2[b2.len() - 2]);
    if let (Dim::Known(x), Dim::Known(y)) = (k, kb) {
        if x != y {
            return shape_err(format!(
                "MatMul inner dims differ: {} x {}",
                crate::dim::fmt_shape(a),
                crate::dim::fmt_shape(b)
            ));
        }
    }
    let mut out = broadcast_dims(&a2[..a2.len() - 2], &b2[..b2.len() - 2])?;
    if a.len() > 1 {
        out.push(a2[a2.len() - 2].clone());
    }
    if b.len() > 1 {
        out.push(b2[b2.len() - 1].clone());
    }
    Ok(out)
}

/// Output type of a matrix product of inputs `a` and `b`, its dtype from `dtype`.
pub(crate) fn infer_matmul(
    inputs: &[Option<InferInput>],
    a: usize,
    b: usize,
    dtype: impl FnOnce(DType) -> DType,
) -> Result<Vec<TensorType>> {
    let (a, b) = (in_ty(inputs, a)?.ty, in_ty(inputs, b)?.ty);
    Ok(vec![TensorType::new(
        dtype(a.dtype),
        matmul_dims(&a.shape, &b.shape)?,
    )])
}

/// Output type of Gemm: `[M, N]`.
pub(crate) fn infer_gemm(node: &Node, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let (a, b) = (in_ty(inputs, 0)?.ty, in_ty(inputs, 1)?.ty);
    if a.shape.len() != 2 || b.shape.len() != 2 {
        return shape_err("Gemm needs 2-D A and B");
    }
    let ta = node.attrs.int_or("transA", 0)? != 0;
    let tb = node.attrs.int_or("transB", 0)? != 0;
    let m = a.shape[usize::from(ta)].clone();
    let n = b.shape[usize::from(!tb)].clone();
    Ok(vec![TensorType::new(a.dtype, vec![m, n])])
}
