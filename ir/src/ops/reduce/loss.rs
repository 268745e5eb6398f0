//! Loss functions: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (which is the
//! former applied to a LogSoftmax over the class axis). Inputs are `[N, C, d1, ...]`
//! with targets `[N, d1, ...]`; the `mean` reduction divides by the total weight of the
//! targets that are not `ignore_index`.

use super::common::{float_as, to_dtype, with_float, Real};
use super::softmax::softmax_along;
use crate::dim::Dim;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, opt_input};
use crate::ops::InferInput;
use crate::tensor::{array_from, Tensor};
use ndarray::{ArrayD, ArrayViewD};

/// How per-element losses are combined.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reduction {
    None,
    Sum,
    Mean,
}

fn reduction(node: &Node) -> Result<Reduction> {
    match node.attrs.str_or("reduction", "mean")? {
        "none" => Ok(Reduction::None),
        "sum" => Ok(Reduction::Sum),
        "mean" => Ok(Reduction::Mean),
        other => Err(IrError::Attr {
            name: "reduction".into(),
            msg: format!("must be none, sum or mean, found `{other}`"),
        }),
    }
}

/// The NLL loss of log-probabilities `x` (`[N, C, ...]`) against class indices.
fn nll<F: Real>(
    x: ArrayViewD<F>,
    target: &Tensor,
    weight: Option<&Tensor>,
    node: &Node,
) -> Result<ArrayD<F>> {
    let shape = x.shape().to_vec();
    let (n, c) = match shape.as_slice() {
        [n, c, ..] => (*n, *c),
        _ => {
            return Err(IrError::Shape(format!(
                "{} needs input of rank at least 2 ([N, C, ...]), found {shape:?}",
                node.op.name()
            )))
        }
    };
    let mut want = vec![n];
    want.extend_from_slice(&shape[2..]);
    if target.shape() != want.as_slice() {
        return Err(IrError::Shape(format!(
            "target shape {:?} does not match input shape {shape:?} (expected {want:?})",
            target.shape()
        )));
    }
    if !target.dtype().is_int() {
        return unsupported(format!(
            "targets must be integers, found {}",
            target.dtype()
        ));
    }
    let weight = weight.map(|w| float_as::<F>(w, "weight")).transpose()?;
    if let Some(w) = &weight {
        if w.len() != c {
            return Err(IrError::Shape(format!(
                "weight must hold one value per class ({c}), found shape {:?}",
                w.shape()
            )));
        }
    }
    let weight: Option<Vec<F>> = weight.map(|w| w.iter().copied().collect());
    let ignore = node.attrs.int("ignore_index")?;
    let d: usize = shape[2..].iter().product();
    let std = x.as_standard_layout();
    let data = std.as_slice().expect("standard layout is contiguous");
    let targets = target.to_i64_vec();
    let mut losses = Vec::with_capacity(targets.len());
    let mut total_weight = F::zero();
    for (i, &t) in targets.iter().enumerate() {
        if Some(t) == ignore {
            losses.push(F::zero());
            continue;
        }
        let class = usize::try_from(t)
            .ok()
            .filter(|&k| k < c)
            .ok_or_else(|| IrError::Shape(format!("target {t} is outside the {c} classes")))?;
        let w = weight.as_ref().map_or(F::one(), |w| w[class]);
        let (sample, pos) = (i / d.max(1), i % d.max(1));
        losses.push(-data[(sample * c + class) * d + pos] * w);
        total_weight = total_weight + w;
    }
    let sum = || losses.iter().copied().sum::<F>();
    match reduction(node)? {
        Reduction::None => array_from(target.shape(), losses),
        Reduction::Sum => Ok(ndarray::arr0(sum()).into_dyn()),
        Reduction::Mean => Ok(ndarray::arr0(sum() / total_weight).into_dyn()),
    }
}

/// NegativeLogLikelihoodLoss.
pub fn eval_nll(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let x = input(inputs, 0)?;
    let target = input(inputs, 1)?;
    let weight = opt_input(inputs, 2);
    with_float!(x, "NegativeLogLikelihoodLoss", a => {
        Ok(to_dtype(nll(a.view(), target, weight, node)?, x.dtype()))
    })
}

/// SoftmaxCrossEntropyLoss: the loss and the log-probabilities.
pub fn eval_sce(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let target = input(inputs, 1)?;
    let weight = opt_input(inputs, 2);
    if x.rank() < 2 {
        return Err(IrError::Shape(format!(
            "SoftmaxCrossEntropyLoss needs scores of rank at least 2, found {:?}",
            x.shape()
        )));
    }
    with_float!(x, "SoftmaxCrossEntropyLoss", a => {
        let mut logp = a.into_owned();
        softmax_along(&mut logp, 1, true);
        let loss = nll(logp.view(), target, weight, node)?;
        Ok(vec![to_dtype(loss, x.dtype()), to_dtype(logp, x.dtype())])
    })
}

/// Output types of both losses: the loss has the target's shape for `none`, else it is
/// a scalar; SoftmaxCrossEntropyLoss's log-probabilities have the scores' type.
pub fn infer_loss(node: &Node, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?;
    let target = in_ty(inputs, 1)?;
    let shape: Vec<Dim> = match reduction(node)? {
        Reduction::None => target.ty.shape.clone(),
        Reduction::Sum | Reduction::Mean => Vec::new(),
    };
    Ok(vec![TensorType::new(x.ty.dtype, shape), x.ty.clone()])
}
