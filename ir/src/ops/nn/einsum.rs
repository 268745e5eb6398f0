//! Einsum: general Einstein summation with implicit or explicit output, repeated
//! labels (diagonals), broadcast ellipsis dims and any number of operands. Each operand
//! first loses its repeated labels (diagonal) and the labels nobody else needs (sum);
//! operands are then folded left to right, each pair contracted as one batched matmul.

use super::gemm::{by_precision, MatElem, Real};
use super::matmul::matmul;
use crate::dim::Dim;
use crate::error::{shape_err, unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::in_ty;
use crate::ops::InferInput;
use crate::tensor::Tensor;
use ndarray::{ArrayD, Axis, IxDyn};

/// A label: a letter's code, or `ELL + k` for the k-th broadcast (ellipsis) dim.
pub type Label = u32;
/// The first ellipsis label.
pub const ELL: Label = 256;

/// The operands' labels and the output's for operands of `ranks`: ellipses expanded
/// (right-aligned), the implicit output made. GPU lowerings read Einsum with it, so
/// every backend parses an equation as the interpreter does.
pub fn parse_equation(eq: &str, ranks: &[usize]) -> Result<(Vec<Vec<Label>>, Vec<Label>)> {
    let e = Equation::parse(eq, ranks)?;
    Ok((e.inputs, e.output))
}

/// A parsed equation with ellipses expanded for given operand ranks.
#[derive(Debug)]
struct Equation {
    inputs: Vec<Vec<Label>>,
    output: Vec<Label>,
}

/// Parses one term: its letters and whether (and where) it holds `...`.
fn parse_term(t: &str) -> Result<(Vec<Label>, Option<usize>)> {
    let mut labels = Vec::new();
    let mut ell = None;
    let mut rest = t.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            if ell.is_some() {
                return shape_err(format!("Einsum term `{t}` has two ellipses"));
            }
            ell = Some(labels.len());
            rest = r;
            continue;
        }
        let c = rest.as_bytes()[0];
        if !c.is_ascii_alphabetic() {
            return shape_err(format!("Einsum term `{t}`: unexpected `{}`", c as char));
        }
        labels.push(c as Label);
        rest = &rest[1..];
    }
    Ok((labels, ell))
}

/// Expands a term's ellipsis into `e` broadcast labels right-aligned among `max_e`.
fn expand(labels: &[Label], ell: Option<usize>, e: usize, max_e: usize) -> Vec<Label> {
    match ell {
        None => labels.to_vec(),
        Some(p) => {
            let mut v = labels[..p].to_vec();
            v.extend((max_e - e..max_e).map(|k| ELL + k as Label));
            v.extend(&labels[p..]);
            v
        }
    }
}

impl Equation {
    fn parse(eq: &str, ranks: &[usize]) -> Result<Equation> {
        let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (eq.as_str(), None),
        };
        let terms: Vec<_> = lhs.split(',').map(parse_term).collect::<Result<_>>()?;
        if terms.len() != ranks.len() {
            return shape_err(format!(
                "Einsum `{eq}` has {} operands, given {}",
                terms.len(),
                ranks.len()
            ));
        }
        let mut ells = Vec::new();
        for ((labels, ell), &r) in terms.iter().zip(ranks) {
            let e = match ell {
                Some(_) if r >= labels.len() => r - labels.len(),
                None if r == labels.len() => 0,
                _ => return shape_err(format!("Einsum `{eq}`: a term does not fit rank {r}")),
            };
            ells.push(e);
        }
        let max_e = ells.iter().copied().max().unwrap_or(0);
        let inputs: Vec<Vec<Label>> = terms
            .iter()
            .zip(&ells)
            .map(|((l, ell), &e)| expand(l, *ell, e, max_e))
            .collect();
        let output = match rhs {
            Some(r) => {
                let (l, ell) = parse_term(r)?;
                expand(&l, ell, max_e, max_e)
            }
            None => {
                let mut out: Vec<Label> = (0..max_e).map(|k| ELL + k as Label).collect();
                let mut letters: Vec<Label> = inputs
                    .iter()
                    .flatten()
                    .copied()
                    .filter(|&l| l < ELL)
                    .collect();
                letters.sort_unstable();
                let once: Vec<Label> = letters
                    .iter()
                    .copied()
                    .filter(|l| letters.iter().filter(|x| *x == l).count() == 1)
                    .collect();
                out.extend(once);
                out
            }
        };
        for (i, l) in output.iter().enumerate() {
            if output[..i].contains(l) {
                return shape_err(format!("Einsum `{eq}`: output repeats a label"));
            }
            if !inputs.iter().flatten().any(|x| x == l) {
                return shape_err(format!("Einsum `{eq}`: output label not in any input"));
            }
        }
        Ok(Equation { inputs, output })
    }

    /// The size of every label, broadcasting 1s.
    fn sizes(&self, shapes: &[&[usize]]) -> Result<Vec<(Label, usize)>> {
        let mut sizes: Vec<(Label, usize)> = Vec::new();
        for (labels, shape) in self.inputs.iter().zip(shapes) {
            for (&l, &n) in labels.iter().zip(shape.iter()) {
                match sizes.iter_mut().find(|(x, _)| *x == l) {
                    None => sizes.push((l, n)),
                    Some((_, m)) if *m == n || n == 1 => {}
                    Some((_, m)) if *m == 1 => *m = n,
                    Some((_, m)) => {
                        return shape_err(format!("Einsum label size mismatch: {m} vs {n}"));
                    }
                }
            }
        }
        Ok(sizes)
    }
}

fn size_of(sizes: &[(Label, usize)], l: Label) -> usize {
    sizes.iter().find(|(x, _)| *x == l).map_or(1, |(_, n)| *n)
}

/// Takes diagonals of repeated labels, sums labels no one else needs, and broadcasts
/// size-1 dims to the label sizes.
fn prepare<T: MatElem>(
    a: ArrayD<T>,
    labels: &[Label],
    needed: &dyn Fn(Label) -> bool,
    sizes: &[(Label, usize)],
) -> Result<(ArrayD<T>, Vec<Label>)> {
    let mut uniq: Vec<Label> = Vec::new();
    for &l in labels {
        if !uniq.contains(&l) {
            uniq.push(l);
        }
    }
    let mut a = if uniq.len() == labels.len() {
        a
    } else {
        let pos: Vec<usize> = labels
            .iter()
            .map(|l| uniq.iter().position(|u| u == l).unwrap_or(0))
            .collect();
        let mut dims: Vec<Option<usize>> = vec![None; uniq.len()];
        for (i, &p) in pos.iter().enumerate() {
            if dims[p].is_some_and(|d| d != a.shape()[i]) {
                return shape_err("Einsum diagonal over dims of different sizes");
            }
            dims[p] = Some(a.shape()[i]);
        }
        let dims: Vec<usize> = dims.into_iter().map(|d| d.unwrap_or(1)).collect();
        ArrayD::from_shape_fn(IxDyn(&dims), |ix| {
            let full: Vec<usize> = pos.iter().map(|&p| ix[p]).collect();
            a[IxDyn(&full)]
        })
    };
    let mut cur = uniq;
    let mut ax = cur.len();
    while ax > 0 {
        ax -= 1;
        if !needed(cur[ax]) {
            a = a.fold_axis(Axis(ax), T::ZERO, |&acc, &v| T::wadd(acc, v));
            cur.remove(ax);
        }
    }
    let target: Vec<usize> = cur.iter().map(|&l| size_of(sizes, l)).collect();
    if a.shape() != target.as_slice() {
        a = a
            .broadcast(IxDyn(&target))
            .ok_or_else(|| IrError::Shape("Einsum operand does not broadcast".into()))?
            .to_owned();
    }
    Ok((a, cur))
}

/// Contracts two prepared operands, keeping the labels `keep` says are still needed.
fn contract<T: MatElem>(
    (a, la): (ArrayD<T>, Vec<Label>),
    (b, lb): (ArrayD<T>, Vec<Label>),
    keep: &dyn Fn(Label) -> bool,
    sizes: &[(Label, usize)],
) -> Result<(ArrayD<T>, Vec<Label>)> {
    let batch: Vec<Label> = la
        .iter()
        .copied()
        .filter(|l| lb.contains(l) && keep(*l))
        .collect();
    let inner: Vec<Label> = la
        .iter()
        .copied()
        .filter(|l| lb.contains(l) && !keep(*l))
        .collect();
    let a_only: Vec<Label> = la.iter().copied().filter(|l| !lb.contains(l)).collect();
    let b_only: Vec<Label> = lb.iter().copied().filter(|l| !la.contains(l)).collect();
    let perm = |labels: &[Label], order: &[&[Label]]| -> Vec<usize> {
        order
            .iter()
            .flat_map(|g| g.iter())
            .map(|l| labels.iter().position(|x| x == l).unwrap_or(0))
            .collect()
    };
    let prod = |ls: &[Label]| -> usize { ls.iter().map(|&l| size_of(sizes, l)).product() };
    let (nb, m, k, n) = (prod(&batch), prod(&a_only), prod(&inner), prod(&b_only));
    let ap = a.permuted_axes(IxDyn(&perm(&la, &[&batch, &a_only, &inner])));
    let bp = b.permuted_axes(IxDyn(&perm(&lb, &[&batch, &inner, &b_only])));
    let a3 = ap
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order(IxDyn(&[nb, m, k]));
    let b3 = bp
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order(IxDyn(&[nb, k, n]));
    let (a3, b3) = match (a3, b3) {
        (Ok(x), Ok(y)) => (x, y),
        _ => return shape_err("Einsum operand reshape failed"),
    };
    let r = matmul(a3.view(), b3.view())?;
    let labels: Vec<Label> = batch
        .iter()
        .chain(&a_only)
        .chain(&b_only)
        .copied()
        .collect();
    let dims: Vec<usize> = labels.iter().map(|&l| size_of(sizes, l)).collect();
    let r = r
        .into_shape_with_order(IxDyn(&dims))
        .map_err(|e| IrError::Shape(e.to_string()))?;
    Ok((r, labels))
}

/// Einsum over arrays of one element type.
fn einsum<T: MatElem>(eq: &str, ops: Vec<ArrayD<T>>) -> Result<ArrayD<T>> {
    let shapes: Vec<&[usize]> = ops.iter().map(|a| a.shape()).collect();
    let ranks: Vec<usize> = shapes.iter().map(|s| s.len()).collect();
    let e = Equation::parse(eq, &ranks)?;
    let sizes = e.sizes(&shapes)?;
    let mut acc: Option<(ArrayD<T>, Vec<Label>)> = None;
    for (i, a) in ops.into_iter().enumerate() {
        let later =
            |l: Label| e.output.contains(&l) || e.inputs[i + 1..].iter().any(|t| t.contains(&l));
        let needed = |l: Label| later(l) || acc.as_ref().is_some_and(|(_, la)| la.contains(&l));
        let cur = prepare(a, &e.inputs[i], &needed, &sizes)?;
        acc = Some(match acc.take() {
            None => cur,
            Some(prev) => contract(prev, cur, &later, &sizes)?,
        });
    }
    let (mut r, mut labels) =
        acc.ok_or_else(|| IrError::Invalid("Einsum without operands".into()))?;
    let mut ax = labels.len();
    while ax > 0 {
        ax -= 1;
        if !e.output.contains(&labels[ax]) {
            r = r.fold_axis(Axis(ax), T::ZERO, |&acc, &v| T::wadd(acc, v));
            labels.remove(ax);
        }
    }
    let perm: Vec<usize> = e
        .output
        .iter()
        .map(|l| labels.iter().position(|x| x == l).unwrap_or(0))
        .collect();
    Ok(r.permuted_axes(IxDyn(&perm))
        .as_standard_layout()
        .into_owned())
}

/// Evaluates Einsum.
pub(crate) fn eval_einsum(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Tensor> {
    let eq = node.attrs.str("equation")?.ok_or_else(|| IrError::Attr {
        name: "equation".into(),
        msg: "required but missing".into(),
    })?;
    let ts: Vec<&Tensor> = inputs
        .iter()
        .map(|t| t.ok_or_else(|| IrError::Invalid("Einsum input missing".into())))
        .collect::<Result<_>>()?;
    let first = ts
        .first()
        .ok_or_else(|| IrError::Invalid("Einsum needs an input".into()))?;
    fn ints<T: MatElem>(eq: &str, ts: &[&Tensor]) -> Result<Tensor> {
        let arrs = ts
            .iter()
            .map(|t| t.as_array::<T>().cloned())
            .collect::<Result<_>>()?;
        Ok(T::wrap(einsum(eq, arrs)?))
    }
    fn real<R: Real>(eq: &str, ts: &[&Tensor]) -> Result<Tensor> {
        let arrs = ts
            .iter()
            .map(|t| R::widen(t).map(|a| a.into_owned()))
            .collect::<Result<_>>()?;
        Ok(R::narrow(einsum(eq, arrs)?, ts[0].dtype()))
    }
    match first.dtype() {
        crate::DType::I32 => ints::<i32>(eq, &ts),
        crate::DType::I64 => ints::<i64>(eq, &ts),
        crate::DType::U32 => ints::<u32>(eq, &ts),
        crate::DType::U64 => ints::<u64>(eq, &ts),
        d if d.is_float() => by_precision(
            d,
            "Einsum",
            || real::<f32>(eq, &ts),
            || real::<f64>(eq, &ts),
        ),
        d => unsupported(format!("Einsum on {d}")),
    }
}

/// Output type of Einsum: each output label's dim from the first input holding it
/// with a size other than 1.
pub(crate) fn infer_einsum(node: &Node, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let eq = node.attrs.str("equation")?.unwrap_or("");
    let tys: Vec<_> = (0..inputs.len())
        .map(|i| in_ty(inputs, i).map(|t| t.ty))
        .collect::<Result<_>>()?;
    let first = tys
        .first()
        .ok_or_else(|| IrError::Invalid("Einsum needs an input".into()))?;
    let ranks: Vec<usize> = tys.iter().map(|t| t.shape.len()).collect();
    let e = Equation::parse(eq, &ranks)?;
    let shape = e
        .output
        .iter()
        .map(|l| {
            let mut dim = Dim::Known(1);
            for (labels, t) in e.inputs.iter().zip(&tys) {
                for (x, d) in labels.iter().zip(&t.shape) {
                    if x == l && dim == Dim::Known(1) {
                        dim = d.clone();
                    }
                }
            }
            dim
        })
        .collect();
    Ok(vec![TensorType::new(first.dtype, shape)])
}
