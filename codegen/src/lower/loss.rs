//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, read once for every backend:
//! scores `[N, C, d1, ...]` and targets `[N, d1, ...]` as `m = N * d` targets of `c`
//! classes (`d` positions per sample, so class `k` of target `i` is at
//! `(i / d) * c * d + k * d + i % d`), the `reduction` (none, sum, mean), `ignore_index`,
//! the optional per-class weights and SoftmaxCrossEntropyLoss's optional log-probability
//! output. A target is the log-probability of its class times minus its weight; one
//! equal to `ignore_index` weighs 0, and one that is neither that nor a class is an
//! error the kernel raises ([`Spec::out_of_range`]), as on the CPU. `mean` divides
//! the sum by the total weight of the targets not ignored.

use super::support::{input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::ops::ReduceOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

/// How the targets' losses are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// One loss per target (the targets' shape).
    None,
    /// Their sum (a scalar).
    Sum,
    /// Their sum over the total weight (a scalar).
    Mean,
}

impl Reduction {
    /// The attribute's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Reduction::None => "none",
            Reduction::Sum => "sum",
            Reduction::Mean => "mean",
        }
    }
}

/// A loss node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The node.
    pub site: Site,
    /// The code the kernel raises for an index out of range (`plan::index_code`).
    pub code: u32,
    /// SoftmaxCrossEntropyLoss: the scores go through a log-softmax over the classes
    /// first (else they are log-probabilities already).
    pub softmax: bool,
    /// The scores and their dtype (a float).
    pub scores: (ValueId, DType),
    /// The targets and their dtype (i32 or i64).
    pub targets: (ValueId, DType),
    /// The per-class weights and their dtype (a float), when given.
    pub weight: Option<(ValueId, DType)>,
    /// The loss and its dtype.
    pub loss: (ValueId, DType),
    /// SoftmaxCrossEntropyLoss's log-probabilities (the scores' shape) and dtype, when
    /// asked for.
    pub log_prob: Option<(ValueId, DType)>,
    /// Targets (at least 1).
    pub m: usize,
    /// Classes (at least 1).
    pub c: usize,
    /// Positions per sample (the product of `d1, ...`).
    pub d: usize,
    /// The scores' elements.
    pub scores_len: usize,
    /// How the losses are combined.
    pub reduction: Reduction,
    /// The target value that weighs 0.
    pub ignore_index: Option<i64>,
}

impl Spec {
    /// What a target out of range is, for the run's error message.
    pub fn out_of_range(&self) -> String {
        format!("a target outside the {} classes", self.c)
    }
}

/// Reads loss node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<Spec> {
    let softmax = node.op == Op::Reduce(ReduceOp::SoftmaxCrossEntropyLoss);
    let (x, tv) = (input(node, 0)?, input(node, 1)?);
    let (dt, xs) = typed(g, node, x)?;
    let (tdt, ts) = typed(g, node, tv)?;
    let float = |dt: DType| -> Result<DType> {
        if dt.is_float() {
            Ok(dt)
        } else {
            Err(unsupported(node, &format!("{dt} data")))
        }
    };
    float(dt)?;
    let [n, c, ref rest @ ..] = xs[..] else {
        return Err(unsupported(node, "scores of rank below 2"));
    };
    let d: usize = rest.iter().product();
    let m = n * d;
    if ts.iter().product::<usize>() != m {
        return Err(unsupported(node, "targets that do not match the scores"));
    }
    if m == 0 || c == 0 {
        return Err(unsupported(node, "empty inputs"));
    }
    if !matches!(tdt, DType::I32 | DType::I64) {
        return Err(unsupported(node, &format!("{tdt} targets")));
    }
    let reduction = match node.attrs.str_or("reduction", "mean").map_err(plan)? {
        "none" => Reduction::None,
        "sum" => Reduction::Sum,
        "mean" => Reduction::Mean,
        other => return Err(unsupported(node, &format!("reduction `{other}`"))),
    };
    let weight = match opt_input(node, 2) {
        Some(wv) => {
            let (wdt, ws) = typed(g, node, wv)?;
            if ws.iter().product::<usize>() != c {
                return Err(unsupported(node, "weights that are not one per class"));
            }
            Some((wv, float(wdt)?))
        }
        None => None,
    };
    let out = |k: usize| -> Result<(ValueId, DType)> {
        let v = output(node, k)?;
        Ok((v, float(typed(g, node, v)?.0)?))
    };
    let outputs = node.outputs.len();
    let log_prob = if outputs == 2 && softmax {
        Some(out(1)?)
    } else if outputs == 1 {
        None
    } else {
        return Err(unsupported(node, "more outputs than the op has"));
    };
    Ok(Spec {
        site: Site::of(node),
        code: crate::plan::index_code(g, node)?,
        softmax,
        scores: (x, dt),
        targets: (tv, tdt),
        weight,
        loss: out(0)?,
        log_prob,
        m,
        c,
        d,
        scores_len: xs.iter().product(),
        reduction,
        ignore_index: node.attrs.int("ignore_index").map_err(plan)?,
    })
}
