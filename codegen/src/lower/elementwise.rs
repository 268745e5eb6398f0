//! The element-wise family's spec ([`Spec`], parsed once by [`spec`]): the kernel's
//! parameters with their types and shapes (and, where the backend reads inputs in
//! place, the wider tensor an input's columns are cut from), the body as steps in
//! order (a `FusedElementwise` node's body, or a single op as a one-step body;
//! single-element constants move into the body as literals), each step's computation
//! described once ([`body::describe`]) after the types it takes are checked
//! ([`body::check`]), a single Dropout's mask, and whether a Dropout checks its
//! training mode on the device ([`dropout`]). The writers print each step's
//! description in their own language.

use super::absorb::{self, Columns};
use super::body::{self, Expr};
use super::support::{self, Site};
use super::Views;
use crate::plan::{index_code, IndexCheck};
use crate::{CodegenError, Result};
use gopt_ir::ops::{ElementwiseOp as E, FusedOp};
use gopt_ir::{DType, Graph, Node, Op, Tensor, ValueId};
use std::collections::HashMap;

pub use body::{check, params, takes, Takes, SELU_ALPHA, SELU_GAMMA};

type R<T> = std::result::Result<T, String>;

/// An element-wise node as its writers take it.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The node.
    pub site: Site,
    /// The output's element type.
    pub dtype: DType,
    /// The output's shape.
    pub shape: Vec<usize>,
    /// The kernel's tensor parameters, in order (`a{k}` in the body).
    pub inputs: Vec<Input>,
    /// The body's ops in order (step `i` is `t{i}`).
    pub steps: Vec<Step>,
    /// The body's output.
    pub result: Operand,
    /// A single Dropout's mask output (bool, the output's shape): all true.
    pub mask: Option<u32>,
    /// The check a Dropout whose training mode or ratio is known only at run time
    /// makes (the first element's thread raises it where the node would train).
    pub check: Option<IndexCheck>,
}

/// One tensor parameter of the kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// The graph value.
    pub value: u32,
    /// Its element type.
    pub dtype: DType,
    /// Its shape (broadcast to the output's).
    pub shape: Vec<usize>,
    /// The wider tensor it is columns of, read in place ([`absorb::column_reads`]).
    pub columns: Option<Columns>,
}

/// A value a step reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// Kernel parameter `k`.
    Input(usize),
    /// A constant moved into the body, written as a literal.
    Const(Tensor),
    /// The result of an earlier step.
    Step(usize),
}

/// An operand with its element type.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    /// The value.
    pub at: Operand,
    /// Its element type.
    pub dtype: DType,
}

/// One op of the body.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The op.
    pub op: E,
    /// What it computes over `args` ([`body::describe`]).
    pub expr: Expr,
    /// Its inputs (`None`: an absent optional input).
    pub args: Vec<Option<Arg>>,
    /// Its result's element type.
    pub dtype: DType,
    /// For a checked Dropout, the values that must all hold for it to train (the
    /// kernel then raises the spec's check); empty otherwise.
    pub trains_if: Vec<(Operand, Test)>,
}

impl Spec {
    /// The element type of `o`.
    pub fn dtype_of(&self, o: &Operand) -> DType {
        match o {
            Operand::Input(k) => self.inputs.get(*k).map_or(self.dtype, |i| i.dtype),
            Operand::Const(t) => t.dtype(),
            Operand::Step(i) => self.steps.get(*i).map_or(self.dtype, |s| s.dtype),
        }
    }
}

/// The spec of element-wise node `n` of `g` (an element-wise op or
/// `FusedElementwise`), with inputs read in place as `views` allows.
pub fn spec(g: &Graph, n: &Node, views: Views) -> Result<Spec> {
    let out = support::output(n, 0)?;
    let (dtype, shape) = support::typed(g, n, out)?;
    let (body, params) = body_of(g, n)?;
    let inputs = params
        .iter()
        .map(|&v| {
            let (dt, s) = support::typed(g, n, v)?;
            Ok(Input {
                value: v.0,
                dtype: dt,
                shape: s,
                columns: absorb::column_reads(g, v, views),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut names: HashMap<ValueId, Operand> = HashMap::new();
    for (k, &bv) in body.inputs.iter().enumerate() {
        names.insert(bv, Operand::Input(k));
    }
    for (&v, t) in &body.constants {
        names.insert(v, Operand::Const(t.tensor().clone()));
    }
    let unbound = || support::plan(format!("node `{}`: an unbound body value", n.name));
    let mut steps = Vec::new();
    let mut check = None;
    for bn in &body.nodes {
        let Op::Elementwise(op) = bn.op else {
            let what = format!("{} in an element-wise body", bn.op);
            return Err(support::unsupported(n, &what));
        };
        let mut trains_if = Vec::new();
        if op == E::Dropout {
            let mode = dropout(g, &body, &params, bn).map_err(|w| support::unsupported(n, &w))?;
            for (v, test) in mode.conditions() {
                trains_if.push((names.get(&v).cloned().ok_or_else(unbound)?, test));
            }
            if mode != Dropout::Inference {
                check = Some(IndexCheck {
                    code: index_code(g, n)?,
                    op: bn.op.name().into(),
                    what: DROPOUT_TRAINING.into(),
                });
            }
        }
        let args = bn
            .inputs
            .iter()
            .enumerate()
            .map(|(k, i)| {
                let Some(v) = *i else { return Ok(None) };
                if !reads_operand(op, k) {
                    return Ok(None);
                }
                Ok(Some(Arg {
                    at: names.get(&v).cloned().ok_or_else(unbound)?,
                    dtype: body.ty(v).map_err(support::plan)?.dtype,
                }))
            })
            .collect::<Result<Vec<_>>>()?;
        let dt = body.ty(bn.outputs[0]).map_err(support::plan)?.dtype;
        let dt0 = args.iter().flatten().next().map_or(dt, |a| a.dtype);
        body::check(op, dt0).map_err(|w| support::unsupported(n, &w))?;
        let params = body::params(op, &bn.attrs).map_err(|w| support::unsupported(n, &w))?;
        let types: Vec<Option<DType>> = args.iter().map(|a| a.as_ref().map(|a| a.dtype)).collect();
        let expr = body::describe(op, &params, &types).map_err(|w| support::unsupported(n, &w))?;
        names.insert(bn.outputs[0], Operand::Step(steps.len()));
        steps.push(Step {
            op,
            expr,
            args,
            dtype: dt,
            trains_if,
        });
    }
    let mut result = body
        .outputs
        .first()
        .and_then(|o| names.get(o))
        .cloned()
        .ok_or_else(|| support::unsupported(n, "a body without output"))?;
    let inputs = bound_inputs(n, inputs, &shape, &mut steps, &mut result)?;
    let mask = dropout_mask(n);
    if let Some(m) = mask {
        let (mdt, ms) = support::typed(g, n, m)?;
        if mdt != DType::Bool || ms != shape {
            return Err(support::unsupported(n, &format!("a {mdt} mask")));
        }
    }
    if n.outputs.len() > 1 + usize::from(mask.is_some()) {
        return Err(support::unsupported(n, "more than one output"));
    }
    Ok(Spec {
        site: Site::of(n),
        dtype,
        shape,
        inputs,
        steps,
        result,
        mask: mask.map(|m| m.0),
        check,
    })
}

/// Whether `op` reads operand `k`'s elements: CastLike takes only its second operand's
/// type (already its result's), so a kernel never binds nor indexes that tensor, whose
/// shape need not broadcast to the output's.
fn reads_operand(op: E, k: usize) -> bool {
    !(op == E::CastLike && k == 1)
}

/// The parameters some step or the result reads, renumbered in order (a parameter only
/// a CastLike's type came from is not bound); each must broadcast to the output's
/// `shape`, which is refused otherwise rather than indexed out of its bounds.
fn bound_inputs(
    n: &Node,
    inputs: Vec<Input>,
    shape: &[usize],
    steps: &mut [Step],
    result: &mut Operand,
) -> Result<Vec<Input>> {
    let mut read = vec![false; inputs.len()];
    let mut mark = |o: &Operand| {
        if let Operand::Input(k) = o {
            if let Some(r) = read.get_mut(*k) {
                *r = true;
            }
        }
    };
    mark(result);
    for st in steps.iter() {
        st.args.iter().flatten().for_each(|a| mark(&a.at));
        st.trains_if.iter().for_each(|(o, _)| mark(o));
    }
    let mut renumber = vec![None; inputs.len()];
    let mut kept = Vec::new();
    for (k, i) in inputs.into_iter().enumerate() {
        if !read[k] {
            continue;
        }
        let pad = shape.len().checked_sub(i.shape.len());
        let broadcasts = pad.is_some_and(|pad| {
            i.shape
                .iter()
                .enumerate()
                .all(|(a, &d)| d == 1 || d == shape[a + pad])
        });
        if !broadcasts {
            return Err(support::unsupported(
                n,
                &format!(
                    "an input of shape {:?} that does not broadcast to the output's {shape:?}",
                    i.shape
                ),
            ));
        }
        renumber[k] = Some(kept.len());
        kept.push(i);
    }
    let to_kept = |o: &mut Operand| {
        if let Operand::Input(k) = o {
            if let Some(Some(j)) = renumber.get(*k) {
                *k = *j;
            }
        }
    };
    to_kept(result);
    for st in steps.iter_mut() {
        st.args
            .iter_mut()
            .flatten()
            .for_each(|a| to_kept(&mut a.at));
        st.trains_if.iter_mut().for_each(|(o, _)| to_kept(o));
    }
    Ok(kept)
}

fn plan_err(node: &Node, what: &str) -> CodegenError {
    CodegenError::Plan(format!("node `{}` ({}): {what}", node.name, node.op))
}

/// The body of element-wise node `node` of `g`, and the graph values its inputs come
/// from (the kernel's parameters, in order).
fn body_of(g: &Graph, node: &Node) -> Result<(Graph, Vec<ValueId>)> {
    if node.op == Op::Fused(FusedOp::FusedElementwise) {
        let b = node
            .attrs
            .graph("body")
            .map_err(|e| plan_err(node, &e.to_string()))?
            .clone();
        let params = node
            .inputs
            .iter()
            .map(|i| i.ok_or_else(|| plan_err(node, "absent input")))
            .collect::<Result<_>>()?;
        return Ok((b, params));
    }
    if !matches!(node.op, Op::Elementwise(_)) {
        return Err(plan_err(node, "not an element-wise node"));
    }
    single(g, node)
}

/// A single element-wise node as a one-op body over its own inputs.
fn single(g: &Graph, node: &Node) -> Result<(Graph, Vec<ValueId>)> {
    let mut body = Graph::new(&node.name);
    let mut ins = Vec::new();
    let mut params = Vec::new();
    for (k, i) in node.inputs.iter().enumerate() {
        match i {
            None => ins.push(None),
            Some(v) => {
                let ty = g
                    .ty(*v)
                    .map_err(|e| plan_err(node, &e.to_string()))?
                    .clone();
                match g.constant(*v).filter(|t| t.len() == 1) {
                    Some(t) => ins.push(Some(body.add_const(&format!("c{k}"), t.clone()))),
                    None => {
                        ins.push(Some(body.add_input(&format!("x{k}"), ty)));
                        params.push(*v);
                    }
                }
            }
        }
    }
    let id = body.add_node(&node.name, node.op, node.attrs.clone(), ins, &["y"]);
    let o = body.nodes[id.index()].outputs[0];
    body.values[o.index()].ty = g.value(node.outputs[0]).ty.clone();
    body.outputs = vec![o];
    Ok((body, params))
}

/// How a Dropout body node runs: always as the identity (the interpreter refuses
/// training with a non-zero ratio), proven so at compile time or checked on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropout {
    /// Inference: `training_mode` absent or a constant false, or the ratio a constant 0.
    Inference,
    /// Training mode or the ratio known only at run time: the kernel raises the node's
    /// error code where `training` is true and `ratio` is not 0. `None` is a side known
    /// to hold (a constant true `training_mode`; a constant non-zero or absent ratio,
    /// whose default is 0.5); the two are never both `None`.
    Checked {
        /// The body value of `training_mode`, when it is not a constant.
        training: Option<ValueId>,
        /// The body value of the ratio, when it is not a constant.
        ratio: Option<ValueId>,
    },
}

/// What the run's error says when a checked Dropout meets training with a non-zero
/// ratio.
pub const DROPOUT_TRAINING: &str =
    "Dropout in training mode with a non-zero ratio (only inference is implemented)";

/// What a checked Dropout tests of a body value: `training_mode` as it is, the ratio
/// against 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// The value is true (`training_mode`).
    True,
    /// The value is not 0 (the ratio).
    NonZero,
}

impl Dropout {
    /// The body values a checked Dropout tests, all of which must hold for it to train
    /// (the kernel then raises the node's code): none for inference.
    pub fn conditions(&self) -> Vec<(ValueId, Test)> {
        match *self {
            Dropout::Inference => Vec::new(),
            Dropout::Checked { training, ratio } => training
                .map(|t| (t, Test::True))
                .into_iter()
                .chain(ratio.map(|r| (r, Test::NonZero)))
                .collect(),
        }
    }
}

/// How Dropout body node `bn` runs; an `Err` is a Dropout that always trains with a
/// non-zero ratio. `body`'s inputs are `params`, values of `g`.
pub fn dropout(g: &Graph, body: &Graph, params: &[ValueId], bn: &Node) -> R<Dropout> {
    // A body value's constant: moved into the body, or a parameter that is one.
    let constant = |v: ValueId| {
        body.constant(v).or_else(|| {
            let k = body.inputs.iter().position(|&b| b == v)?;
            g.constant(*params.get(k)?)
        })
    };
    let input = |k: usize| bn.inputs.get(k).copied().flatten();
    let training = match input(2) {
        None => return Ok(Dropout::Inference),
        Some(v) => match constant(v) {
            Some(t) if t.to_i64_vec().iter().all(|&b| b == 0) => return Ok(Dropout::Inference),
            Some(_) => None,
            None => Some(v),
        },
    };
    let ratio = match input(1) {
        None => None,
        Some(v) => match constant(v) {
            Some(t) if t.to_f64_vec().iter().all(|&r| r == 0.0) => return Ok(Dropout::Inference),
            Some(_) => None,
            None => Some(v),
        },
    };
    if training.is_none() && ratio.is_none() {
        return Err("Dropout in training mode (training_mode a constant true, ratio not 0)".into());
    }
    Ok(Dropout::Checked { training, ratio })
}

/// The mask output of a single Dropout node `node` (all true in inference mode), when
/// it has one.
pub fn dropout_mask(node: &Node) -> Option<ValueId> {
    if node.op == Op::Elementwise(E::Dropout) {
        node.outputs.get(1).copied()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIEWS: Views = Views {
        alias_outputs: false,
        strided_reads: false,
        stores_casts: false,
        offset_views: false,
    };

    fn parsed(src: &str) -> Graph {
        gopt_ir::text::parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"))
    }

    #[test]
    fn cast_like_binds_only_the_tensor_it_reads() {
        // The expanded Celu/Selu/Elu functions cast a scalar like the input tensor.
        let g = gopt_ir::verify(parsed(
            r#"graph "g"(%0 "x": f16[], %1 "like": f32[3,4]) -> (%2) {
  %2 "y": f32[] = CastLike "c"(%0, %1)
}
"#,
        ))
        .expect("verifies")
        .into_inner();
        let s = spec(&g, &g.nodes[0], VIEWS).expect("a kernel");
        assert_eq!(s.inputs.len(), 1, "{:?}", s.inputs);
        assert_eq!((s.inputs[0].value, s.inputs[0].shape.len()), (0, 0));
        assert_eq!(
            s.steps[0].args[0].as_ref().map(|a| &a.at),
            Some(&Operand::Input(0))
        );
    }

    #[test]
    fn an_input_that_does_not_broadcast_is_refused() {
        // Declared types that do not broadcast (never from inference): a refusal naming
        // the shapes, not an index out of the input's bounds.
        let g = parsed(
            r#"graph "g"(%0 "a": f32[4], %1 "b": f32[2,3]) -> (%2) {
  %2 "y": f32[3] = Add "add"(%0, %1)
}
"#,
        );
        let e = spec(&g, &g.nodes[0], VIEWS)
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("does not broadcast") && e.contains("`add`"),
            "{e}"
        );
    }
}
