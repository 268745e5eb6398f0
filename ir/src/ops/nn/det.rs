//! Det: determinants of square matrices over the last two dims, batched over the
//! leading ones, by LU decomposition with partial pivoting in f64.

use super::gemm::by_precision;
use crate::dim::Dim;
use crate::error::{shape_err, Result};
use crate::graph::TensorType;
use crate::ops::util::{in_ty, input};
use crate::ops::InferInput;
use crate::tensor::{array_from, Tensor};

/// The determinant of the row-major `n x n` matrix in `a` (destroyed).
fn det(a: &mut [f64], n: usize) -> f64 {
    let mut d = 1.0;
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))
            .unwrap_or(col);
        if a[pivot * n + col] == 0.0 {
            return 0.0;
        }
        if pivot != col {
            for k in 0..n {
                a.swap(pivot * n + k, col * n + k);
            }
            d = -d;
        }
        let p = a[col * n + col];
        d *= p;
        for r in col + 1..n {
            let f = a[r * n + col] / p;
            if f != 0.0 {
                for k in col..n {
                    a[r * n + k] -= f * a[col * n + k];
                }
            }
        }
    }
    d
}

/// Evaluates Det.
pub(crate) fn eval_det(inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let s = x.shape();
    if s.len() < 2 || s[s.len() - 1] != s[s.len() - 2] {
        return shape_err(format!("Det needs [..., M, M], got {s:?}"));
    }
    let n = s[s.len() - 1];
    let run = || -> Result<Tensor> {
        let vals = x.to_f64_vec();
        let out: Vec<f64> = if n == 0 {
            vec![1.0; s[..s.len() - 2].iter().product()]
        } else {
            vals.chunks(n * n)
                .map(|m| det(&mut m.to_vec(), n))
                .collect()
        };
        Ok(Tensor::F64(array_from(&s[..s.len() - 2], out)?).cast(x.dtype()))
    };
    by_precision(x.dtype(), "Det", run, run)
}

/// Output type of Det: the batch dims.
pub(crate) fn infer_det(inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    if x.shape.len() < 2 {
        return shape_err("Det needs [..., M, M]");
    }
    let shape: Vec<Dim> = x.shape[..x.shape.len() - 2].to_vec();
    Ok(vec![TensorType::new(x.dtype, shape)])
}
