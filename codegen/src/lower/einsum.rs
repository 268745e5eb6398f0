//! Einsum and Det, read once for every backend.
//!
//! Einsum: the equation is parsed as the interpreter parses it (explicit `->` output or
//! the implicit one: the ellipsis dims, then the letters used once, in code order;
//! `...` broadcast dims right-aligned across operands; repeated letters in one term
//! take a diagonal; size-1 dims broadcast). Every label then has a size, and each
//! operand a stride per label (the sum of the strides of its dims with that label, 0
//! where the dim is 1 and broadcast): an output element decodes the output labels, and
//! loops over every combination of the other labels (the contracted ones), summing the
//! product of the operands' elements at the offsets those give. The writers spell this
//! as one thread per output element.
//!
//! Det: the determinant of each `M x M` matrix over the last two dims, one thread per
//! matrix, by LU decomposition with partial pivoting (the interpreter's algorithm:
//! the last of equally large pivots, a zero pivot gives 0).

use super::index::strides;
use super::support::{input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::ops::NnOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

use gopt_ir::ops::nn::EinsumLabel as Label;

/// The largest matrix Det takes (each thread holds one matrix in registers or local
/// memory).
pub const DET_MAX: usize = 32;

/// An Einsum or Det node, resolved: where it is, and which op with what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EinsumSpec {
    /// The node: its name, op and operands.
    pub site: Site,
    /// The op and its parameters.
    pub form: Form,
}

/// The op of an Einsum or Det node, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Form {
    /// Einsum.
    Einsum(Contraction),
    /// Det.
    Det(DetSpec),
}

/// One label of an Einsum: its size and each operand's stride along it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    /// The label's size.
    pub size: usize,
    /// Per operand, the offset one step along the label moves (0 if the operand does
    /// not hold it, or holds it as a broadcast dim of 1).
    pub strides: Vec<usize>,
}

/// An Einsum as a sum of products.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contraction {
    /// The operands, in input order.
    pub inputs: Vec<ValueId>,
    /// Their element counts.
    pub lens: Vec<usize>,
    /// The output.
    pub out: ValueId,
    /// The dtype of every operand and of the output.
    pub dtype: DType,
    /// The output's labels, outermost first.
    pub outer: Vec<Axis>,
    /// The contracted labels (in no output), outermost first.
    pub contracted: Vec<Axis>,
}

impl Contraction {
    /// Output elements.
    pub fn n(&self) -> usize {
        self.outer.iter().map(|a| a.size).product()
    }

    /// Terms of each output's sum.
    pub fn terms(&self) -> usize {
        self.contracted.iter().map(|a| a.size).product()
    }
}

/// A Det node, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetSpec {
    /// The matrices.
    pub x: ValueId,
    /// The determinants (the batch dims, the data's dtype).
    pub out: ValueId,
    /// The data's dtype.
    pub dtype: DType,
    /// The matrices' size `M` (at most [`DET_MAX`]).
    pub m: usize,
    /// Matrices.
    pub batch: usize,
}

/// Reads Einsum or Det node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<EinsumSpec> {
    let form = if node.op == Op::Nn(NnOp::Einsum) {
        Form::Einsum(einsum(g, node)?)
    } else if node.op == Op::Nn(NnOp::Det) {
        Form::Det(det(g, node)?)
    } else {
        return Err(unsupported(node, "an op other than Einsum and Det"));
    };
    Ok(EinsumSpec {
        site: Site::of(node),
        form,
    })
}

fn det(g: &Graph, node: &Node) -> Result<DetSpec> {
    let x = input(node, 0)?;
    let out = output(node, 0)?;
    let (dtype, shape) = typed(g, node, x)?;
    if !dtype.is_float() {
        return Err(unsupported(node, &format!("{dtype} data")));
    }
    let [batch @ .., r, c] = &shape[..] else {
        return Err(plan(format!("{}: Det of rank below 2", node.name)));
    };
    if r != c {
        return Err(plan(format!("{}: Det of non-square matrices", node.name)));
    }
    if *r > DET_MAX {
        return Err(unsupported(
            node,
            &format!("matrices larger than {DET_MAX} x {DET_MAX}"),
        ));
    }
    let batch: usize = batch.iter().product();
    if batch == 0 {
        return Err(unsupported(node, "an empty output"));
    }
    Ok(DetSpec {
        x,
        out,
        dtype,
        m: *r,
        batch,
    })
}

/// The operands' labels and the output's, ellipses expanded for operands of `ranks`.
fn parse(node: &Node, eq: &str, ranks: &[usize]) -> Result<(Vec<Vec<Label>>, Vec<Label>)> {
    gopt_ir::ops::nn::einsum_equation(eq, ranks).map_err(|e| plan(format!("{}: {e}", node.name)))
}

fn einsum(g: &Graph, node: &Node) -> Result<Contraction> {
    let eq = node
        .attrs
        .str("equation")
        .map_err(plan)?
        .ok_or_else(|| plan(format!("{}: Einsum without an equation", node.name)))?;
    let out = output(node, 0)?;
    let mut inputs = Vec::new();
    let mut shapes = Vec::new();
    let (dtype, os) = typed(g, node, out)?;
    for k in 0..node.inputs.len() {
        let v = input(node, k)?;
        let (dt, s) = typed(g, node, v)?;
        if dt != dtype {
            return Err(unsupported(node, "operands of different dtypes"));
        }
        inputs.push(v);
        shapes.push(s);
    }
    if !(dtype.is_float() || matches!(dtype, DType::I32 | DType::I64 | DType::U32 | DType::U64)) {
        return Err(unsupported(node, &format!("{dtype} operands")));
    }
    let ranks: Vec<usize> = shapes.iter().map(Vec::len).collect();
    let (labels, output_labels) = parse(node, eq, &ranks)?;
    // Every label's size (size-1 dims broadcast), in order of first use.
    let mut sizes: Vec<(Label, usize)> = Vec::new();
    for (ls, shape) in labels.iter().zip(&shapes) {
        for (&l, &d) in ls.iter().zip(shape) {
            match sizes.iter_mut().find(|(x, _)| *x == l) {
                None => sizes.push((l, d)),
                Some((_, m)) if *m == d || d == 1 => {}
                Some((_, m)) if *m == 1 => *m = d,
                Some(_) => return Err(plan(format!("{}: Einsum label sizes", node.name))),
            }
        }
    }
    let axis = |l: Label, size: usize| -> Result<Axis> {
        let mut per = Vec::new();
        for (ls, shape) in labels.iter().zip(&shapes) {
            let st = strides(shape);
            let dims = ls.iter().zip(shape).zip(&st).filter(|((x, _), _)| **x == l);
            let first = dims.clone().next().map(|((_, &d), _)| d);
            if dims.clone().any(|((_, &d), _)| Some(d) != first) {
                return Err(unsupported(node, "a diagonal over dims of different sizes"));
            }
            per.push(if first == Some(size) {
                dims.map(|(_, &s)| s).sum()
            } else {
                0
            });
            if first.is_some_and(|d| d != size && d != 1) {
                return Err(plan(format!("{}: Einsum label sizes", node.name)));
            }
        }
        Ok(Axis { size, strides: per })
    };
    let outer = output_labels
        .iter()
        .map(|&l| axis(l, sizes.iter().find(|(x, _)| *x == l).map_or(1, |s| s.1)))
        .collect::<Result<Vec<_>>>()?;
    let contracted = sizes
        .iter()
        .filter(|(l, _)| !output_labels.contains(l))
        .map(|&(l, s)| axis(l, s))
        .collect::<Result<Vec<_>>>()?;
    if outer.iter().map(|a| a.size).collect::<Vec<_>>() != os {
        return Err(plan(format!(
            "{}: Einsum output shape {os:?} does not match its equation",
            node.name
        )));
    }
    let c = Contraction {
        lens: shapes.iter().map(|s| s.iter().product()).collect(),
        inputs,
        out,
        dtype,
        outer,
        contracted,
    };
    if c.n() == 0 {
        return Err(unsupported(node, "an empty output"));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gopt_ir::ops::nn::EINSUM_ELL as ELL;

    fn node() -> Node {
        Node {
            name: "e".into(),
            op: Op::Nn(NnOp::Einsum),
            attrs: Default::default(),
            inputs: vec![],
            outputs: vec![],
        }
    }

    #[test]
    fn parses_implicit_outputs_and_ellipses() {
        let n = node();
        let (ins, out) = parse(&n, "i,i", &[1, 1]).unwrap();
        assert_eq!(ins, vec![vec![105], vec![105]]);
        assert!(out.is_empty());
        let (ins, out) = parse(&n, "...ii ->...i", &[3]).unwrap();
        assert_eq!(ins, vec![vec![ELL, 105, 105]]);
        assert_eq!(out, vec![ELL, 105]);
        let (_, out) = parse(&n, "ba", &[2]).unwrap();
        assert_eq!(out, vec![97, 98]);
    }
}
