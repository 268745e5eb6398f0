//! Specialisation and constant folding. Binding symbolic dims (batch=1, seq=128) makes
//! `Shape` and `Size` results known; every deterministic node whose inputs are then all
//! constants is evaluated by the interpreter and replaced by its result, which collapses
//! the shape sub-graphs exporters emit (Shape→Gather→Concat→Reshape...).

use crate::budget::{elements, with_fuel, FOLD_FUEL};
use crate::dim::{concrete, Bindings};
use crate::error::{IrError, Result};
use crate::graph::Graph;
use crate::graph::{Node, TensorType};
use crate::infer::infer_types;
use crate::konst::Const;
use crate::ops::{ElementwiseOp, EvalCx, Op, ShapeOp};
use crate::tensor::Tensor;

/// Largest result (in elements) folding materialises; bigger ones stay computed at run
/// time so folding never inflates the weights.
pub const FOLD_MAX_ELEMENTS: usize = 1 << 22;

/// What folding did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FoldStats {
    /// Nodes replaced by constants.
    pub folded: usize,
}

/// Replaces bound symbols in every value type of the graph. A binding that makes a
/// value's size overflow or pass the one-tensor limit is an error naming the symbols
/// and the value.
pub fn bind_dims(graph: &mut Graph, b: &Bindings) -> Result<()> {
    for v in &mut graph.values {
        let Some(ty) = &mut v.ty else { continue };
        let mut syms = Vec::new();
        for d in &mut ty.shape {
            d.symbols(&mut syms);
            *d = d.bind(b);
        }
        if let Err(e) = crate::budget::check_type(ty) {
            let bound: Vec<String> = syms
                .iter()
                .filter_map(|s| b.get(&**s).map(|n| format!("{s}={n}")))
                .collect();
            let msg = match e {
                IrError::Shape(m) => m,
                e => e.to_string(),
            };
            return Err(IrError::Shape(format!(
                "binding {} makes value `{}` {msg}",
                bound.join(", "),
                v.name
            )));
        }
    }
    Ok(())
}

/// Infers types, then folds every foldable node to a constant, to a fixpoint, and prunes
/// what became dead.
pub fn fold_constants(graph: &mut Graph) -> Result<FoldStats> {
    let mut stats = FoldStats::default();
    loop {
        let pass = fold_pass(graph)?;
        stats.folded += pass.folded;
        if pass.folded == 0 {
            return Ok(stats);
        }
    }
}

fn fold_pass(graph: &mut Graph) -> Result<FoldStats> {
    let mut stats = FoldStats::default();
    infer_types(graph)?;
    let order = graph.topo_order()?;
    let mut remove = vec![false; graph.nodes.len()];
    let no_scope = |_: &str| None;
    let cx = EvalCx { lookup: &no_scope };
    for nid in order {
        let node = &graph.nodes[nid.index()];
        if !node.op.is_deterministic()
            || node.attrs.graphs().next().is_some()
            || keeps_quantized(graph, node)
        {
            continue;
        }
        if let Some(k) = fold_large(graph, node) {
            let v = node.outputs[0];
            graph.values[v.index()].ty =
                Some(TensorType::new(k.dtype(), crate::dim::shape_of(k.shape())));
            graph.constants.insert(v, k);
            remove[nid.index()] = true;
            stats.folded += 1;
            continue;
        }
        let outs: Option<Vec<Tensor>> = match node.op {
            Op::Shape(ShapeOp::Shape) | Op::Shape(ShapeOp::Size) => {
                let Some(x) = node.inputs.first().copied().flatten() else {
                    continue;
                };
                let Some(dims) = graph.value(x).ty.as_ref().and_then(|t| concrete(&t.shape)) else {
                    continue;
                };
                Some(vec![crate::ops::shape::shape_of_dims(node, &dims)?])
            }
            _ => {
                let ins: Option<Vec<Option<&Tensor>>> = node
                    .inputs
                    .iter()
                    .map(|i| match i {
                        None => Some(None),
                        Some(v) => graph.small_constant(*v).map(Some),
                    })
                    .collect();
                // Constants too large to decode freely are only folded as views
                // (`fold_large`): a weight is never decoded here.
                let Some(ins) = ins else { continue };
                // Re-infer with the inputs folded so far: the types inferred up front
                // predate them (Range over a folded Shape had a fresh length).
                let infer_ins: Option<Vec<Option<crate::ops::InferInput>>> = node
                    .inputs
                    .iter()
                    .map(|i| match i {
                        None => Some(None),
                        Some(v) => Some(Some(crate::ops::InferInput {
                            ty: graph.value(*v).ty.as_ref()?,
                            value: graph.small_constant(*v),
                        })),
                    })
                    .collect();
                let tys = infer_ins.and_then(|ins| {
                    node.op
                        .infer(&mut crate::ops::InferCx::default(), node, &ins)
                        .ok()
                });
                let too_big = tys.is_none_or(|tys| {
                    tys.iter().any(|t| {
                        concrete(&t.shape)
                            .and_then(|s| elements(&s))
                            .is_none_or(|n| n > FOLD_MAX_ELEMENTS as u64)
                    })
                });
                if too_big {
                    continue;
                }
                // A node that fails on constants fails at run time too, and one past the
                // budget runs at run time: either way it stays, so the error is
                // reported with run-time context.
                // The budget covers reading the inputs (they exist already) plus a fixed
                // allowance for what the evaluation produces and loops over.
                let read: u64 = ins.iter().flatten().map(|t| t.len() as u64).sum();
                let fuel = FOLD_FUEL.saturating_add(read);
                with_fuel(fuel, || node.op.eval(&cx, node, &ins)).ok()
            }
        };
        let Some(outs) = outs else { continue };
        let node_outs = graph.nodes[nid.index()].outputs.clone();
        for (v, t) in node_outs.into_iter().zip(outs) {
            graph.values[v.index()].ty = Some(crate::graph::TensorType::new(
                t.dtype(),
                crate::dim::shape_of(t.shape()),
            ));
            graph.constants.insert(v, t.into());
        }
        remove[nid.index()] = true;
        stats.folded += 1;
    }
    let nodes = std::mem::take(&mut graph.nodes);
    graph.nodes = nodes
        .into_iter()
        .zip(remove)
        .filter_map(|(n, r)| (!r).then_some(n))
        .collect();
    graph.prune();
    infer_types(graph)?;
    Ok(stats)
}

/// A DequantizeLinear of a constant of rank 2 or more (a quantized weight) is never
/// folded: its product reads the integers (the optimizer's MatMulNBits), which would
/// be lost to a float copy four times their size.
pub fn keeps_quantized(graph: &Graph, node: &Node) -> bool {
    node.op == Op::Nn(crate::ops::NnOp::DequantizeLinear)
        && node
            .inputs
            .first()
            .copied()
            .flatten()
            .and_then(|x| graph.konst(x))
            .is_some_and(|k| k.rank() >= 2)
}

/// Folds a node over constants, one of them large, when it only converts or moves
/// elements (Cast, Identity, Reshape and its kin, Transpose, Concat): the result is a
/// lazy view of the inputs ([`Const::cast`] and friends), so no weight is decoded.
fn fold_large(graph: &Graph, node: &Node) -> Option<Const> {
    let ins: Option<Vec<Option<&Const>>> = node
        .inputs
        .iter()
        .map(|i| match i {
            None => Some(None),
            Some(v) => graph.konst(*v).map(Some),
        })
        .collect();
    let ins = ins?;
    if ins.iter().flatten().all(|k| k.is_small()) || node.outputs.len() != 1 {
        return None;
    }
    let out = graph.value(node.outputs[0]).ty.as_ref()?;
    fold_view(node, &ins, out)
}

/// The lazy view a data-movement or cast node over constants computes: `Some` for
/// Cast, Identity, Reshape, Flatten, Squeeze, Unsqueeze, Transpose and Concat whose
/// output type `out` is concrete and agrees with the inputs; `None` for anything else
/// (the caller evaluates it or leaves it to run time). The optimizer's analysis folds
/// weight casts and merged weights through this too.
pub fn fold_view(node: &Node, inputs: &[Option<&Const>], out: &TensorType) -> Option<Const> {
    let shape = concrete(&out.shape)?;
    let x = *inputs.first()?;
    let x = x?;
    let k = match node.op {
        Op::Elementwise(ElementwiseOp::Cast) => x.cast(out.dtype),
        Op::Shape(ShapeOp::Identity) => x.clone(),
        Op::Shape(ShapeOp::Reshape | ShapeOp::Flatten | ShapeOp::Squeeze | ShapeOp::Unsqueeze) => {
            x.reshape(&shape).ok()?
        }
        Op::Shape(ShapeOp::Transpose) => {
            let perm = crate::ops::shape::layout::perm_of(node, x.shape().len()).ok()?;
            x.transpose(&perm).ok()?
        }
        Op::Shape(ShapeOp::Concat) => {
            let parts: Option<Vec<Const>> = inputs.iter().map(|i| i.cloned()).collect();
            let parts = parts?;
            let axis = node.attrs.req_int("axis").ok()?;
            let axis = crate::ops::util::norm_axis(axis, x.shape().len()).ok()?;
            Const::concat(&parts, axis).ok()?
        }
        _ => return None,
    };
    (k.dtype() == out.dtype && k.shape() == shape.as_slice()).then_some(k)
}
