//! The training-domain optimizers of `ai.onnx.preview.training`: `Adagrad`, `Adam` and
//! `Momentum` (standard and Nesterov), each updating any number of tensors in one node
//! (`R, T, X1..Xn, G1..Gn, state1..n`). Mirrors `aionnx_preview_training/op_*.py`.

use super::{from_f64_array, require_float, scalar_f64, scalar_i64, to_f64_array};
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input};
use crate::ops::InferInput;
use crate::tensor::Tensor;
use ndarray::{ArrayD, Zip};

/// Which optimizer.
#[derive(Clone, Copy, Debug)]
pub(super) enum Optimizer {
    Adagrad,
    Adam,
    Momentum,
}

impl Optimizer {
    /// Tensor groups after `R, T` (X, G and the state tensors).
    fn groups(self) -> usize {
        match self {
            Optimizer::Adagrad | Optimizer::Momentum => 3,
            Optimizer::Adam => 4,
        }
    }

    /// Which input groups the outputs mirror, in output order.
    fn output_groups(self) -> &'static [usize] {
        match self {
            Optimizer::Adagrad | Optimizer::Momentum => &[0, 2],
            Optimizer::Adam => &[0, 2, 3],
        }
    }
}

/// The number of optimized tensors, from the input count.
fn count(op: Optimizer, n_inputs: usize) -> Result<usize> {
    let g = op.groups();
    if n_inputs < 2 + g || !(n_inputs - 2).is_multiple_of(g) {
        return Err(IrError::Invalid(format!(
            "{op:?} takes R, T and {g} groups of equally many tensors, found {n_inputs} inputs"
        )));
    }
    Ok((n_inputs - 2) / g)
}

/// The `i`-th tensor of group `g` as f64, checked against the shape of X.
fn group(inputs: &[Option<&Tensor>], n: usize, g: usize, i: usize) -> Result<ArrayD<f64>> {
    let t = input(inputs, 2 + g * n + i)?;
    to_f64_array(t, "optimizer tensor")
}

fn same_shape(a: &ArrayD<f64>, b: &ArrayD<f64>) -> Result<()> {
    if a.shape() == b.shape() {
        Ok(())
    } else {
        Err(IrError::Shape(format!(
            "optimizer tensors of shapes {:?} and {:?} must match",
            a.shape(),
            b.shape()
        )))
    }
}

/// Runs Adagrad.
pub(super) fn adagrad(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let n = count(Optimizer::Adagrad, inputs.len())?;
    let r = scalar_f64(input(inputs, 0)?, "R")?;
    let t = scalar_i64(input(inputs, 1)?, "T")? as f64;
    let decay = node.attrs.float_or("decay_factor", 0.0)? as f64;
    let eps = node.attrs.float_or("epsilon", 1e-6)? as f64;
    let norm = node.attrs.float_or("norm_coefficient", 0.0)? as f64;
    let rate = r / (1.0 + t * decay);
    let mut xs = Vec::with_capacity(n);
    let mut hs = Vec::with_capacity(n);
    for i in 0..n {
        let x = group(inputs, n, 0, i)?;
        let g = group(inputs, n, 1, i)?;
        let mut h = group(inputs, n, 2, i)?;
        same_shape(&x, &g)?;
        same_shape(&x, &h)?;
        let mut x_new = x.clone();
        Zip::from(&mut x_new)
            .and(&g)
            .and(&mut h)
            .for_each(|x, &g, h| {
                let gr = norm * *x + g;
                *h += gr * gr;
                *x -= rate * gr / (h.sqrt() + eps);
            });
        let dtype = input(inputs, 2 + i)?.dtype();
        xs.push(from_f64_array(x_new, dtype)?);
        hs.push(from_f64_array(h, input(inputs, 2 + 2 * n + i)?.dtype())?);
    }
    xs.extend(hs);
    Ok(xs)
}

/// Runs Adam.
pub(super) fn adam(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let n = count(Optimizer::Adam, inputs.len())?;
    let r = scalar_f64(input(inputs, 0)?, "R")?;
    let t = scalar_i64(input(inputs, 1)?, "T")?;
    let a = &node.attrs;
    let alpha = a.float_or("alpha", 0.9)? as f64;
    let beta = a.float_or("beta", 0.999)? as f64;
    let eps = a.float_or("epsilon", 1e-6)? as f64;
    let norm = a.float_or("norm_coefficient", 0.0)? as f64;
    let norm_post = a.float_or("norm_coefficient_post", 0.0)? as f64;
    let rate = if t > 0 {
        let tf = t as f64;
        r * (1.0 - beta.powf(tf)).sqrt() / (1.0 - alpha.powf(tf))
    } else {
        r
    };
    let mut outs: [Vec<Tensor>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for i in 0..n {
        let mut x = group(inputs, n, 0, i)?;
        let g = group(inputs, n, 1, i)?;
        let mut v = group(inputs, n, 2, i)?;
        let mut h = group(inputs, n, 3, i)?;
        for o in [&g, &v, &h] {
            same_shape(&x, o)?;
        }
        Zip::from(&mut x)
            .and(&g)
            .and(&mut v)
            .and(&mut h)
            .for_each(|x, &g, v, h| {
                let gr = norm * *x + g;
                *v = alpha * *v + (1.0 - alpha) * gr;
                *h = beta * *h + (1.0 - beta) * gr * gr;
                let x_new = *x - rate * (*v / (h.sqrt() + eps));
                *x = (1.0 - norm_post) * x_new;
            });
        for (k, arr) in [x, v, h].into_iter().enumerate() {
            let dtype = input(inputs, 2 + [0, 2, 3][k] * n + i)?.dtype();
            outs[k].push(from_f64_array(arr, dtype)?);
        }
    }
    Ok(outs.into_iter().flatten().collect())
}

/// Runs Momentum.
pub(super) fn momentum(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let n = count(Optimizer::Momentum, inputs.len())?;
    let r = scalar_f64(input(inputs, 0)?, "R")?;
    let t = scalar_i64(input(inputs, 1)?, "T")?;
    let a = &node.attrs;
    let alpha = a.float("alpha")?.ok_or_else(|| missing("alpha"))? as f64;
    let beta = a.float("beta")?.ok_or_else(|| missing("beta"))? as f64;
    let norm = a
        .float("norm_coefficient")?
        .ok_or_else(|| missing("norm_coefficient"))? as f64;
    let nesterov = match a.str_or("mode", "standard")? {
        "standard" => false,
        "nesterov" => true,
        m => return unsupported(format!("Momentum mode `{m}`")),
    };
    let beta_t = if t > 0 { beta } else { 1.0 };
    let mut xs = Vec::with_capacity(n);
    let mut vs = Vec::with_capacity(n);
    for i in 0..n {
        let mut x = group(inputs, n, 0, i)?;
        let g = group(inputs, n, 1, i)?;
        let mut v = group(inputs, n, 2, i)?;
        same_shape(&x, &g)?;
        same_shape(&x, &v)?;
        Zip::from(&mut x).and(&g).and(&mut v).for_each(|x, &g, v| {
            let gr = norm * *x + g;
            *v = alpha * *v + beta_t * gr;
            *x -= if nesterov {
                r * (gr + alpha * *v)
            } else {
                r * *v
            };
        });
        xs.push(from_f64_array(x, input(inputs, 2 + i)?.dtype())?);
        vs.push(from_f64_array(v, input(inputs, 2 + 2 * n + i)?.dtype())?);
    }
    xs.extend(vs);
    Ok(xs)
}

fn missing(name: &str) -> IrError {
    IrError::Attr {
        name: name.into(),
        msg: "required but missing".into(),
    }
}

/// Output types: the types of the updated inputs, group by group.
pub(super) fn infer(op: Optimizer, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let n = count(op, inputs.len())?;
    let mut out = Vec::with_capacity(n * op.output_groups().len());
    for &g in op.output_groups() {
        for i in 0..n {
            let ty = in_ty(inputs, 2 + g * n + i)?.ty;
            require_float(ty.dtype, "optimizer tensor")?;
            out.push(ty.clone());
        }
    }
    Ok(out)
}
