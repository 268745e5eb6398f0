//! ONNX `Loop` and `Scan`: run a body sub-graph repeatedly, threading loop-carried
//! values through it and stacking its per-iteration scan outputs along a new axis.
//! Only tensor-carried loops exist in gopt (sequence and optional values are rejected
//! at import).

use super::subgraph::{
    body_types, empty_stack, index_axis, join, scalar_bool, scalar_i64, scalar_ty, stack,
};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Graph, Node, TensorType};
use crate::ops::util::{in_ty, input, norm_axis, opt_in_ty, opt_input};
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;

/// The declared type of body output `i`, if any.
fn declared(body: &Graph, i: usize) -> Option<&TensorType> {
    body.outputs.get(i).and_then(|&o| body.value(o).ty.as_ref())
}

/// Runs `Loop`.
pub(super) fn eval_loop(
    cx: &EvalCx,
    node: &Node,
    inputs: &[Option<&Tensor>],
) -> Result<Vec<Tensor>> {
    let body = node.attrs.graph("body")?;
    let max_trips = opt_input(inputs, 0)
        .map(|t| scalar_i64(t, "Loop trip count M"))
        .transpose()?;
    let cond_in = opt_input(inputs, 1)
        .map(|t| scalar_bool(t, "Loop condition"))
        .transpose()?;
    let mut carried: Vec<Tensor> = (2..inputs.len().max(2))
        .map(|i| input(inputs, i).cloned())
        .collect::<Result<_>>()?;
    let n = carried.len();
    let k = body.outputs.len().checked_sub(1 + n).ok_or_else(|| {
        IrError::Invalid(format!(
            "Loop body has {} outputs, fewer than 1 + {n} carried values",
            body.outputs.len()
        ))
    })?;
    // Without M the body's condition always counts (else the loop could not end);
    // with M and no initial condition it is ignored, as the ONNX spec says.
    let use_cond = cond_in.is_some() || max_trips.is_none();
    let mut cond = cond_in.unwrap_or(true);
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); k];
    let mut i: i64 = 0;
    while cond && max_trips.is_none_or(|m| i < m) {
        crate::budget::charge(crate::budget::LOOP_ITERATION_FUEL)?;
        let mut ins = vec![
            Tensor::I64(ndarray::arr0(i).into_dyn()),
            Tensor::Bool(ndarray::arr0(cond).into_dyn()),
        ];
        ins.extend(carried);
        let mut outs = cx.run_subgraph(body, &ins)?;
        if outs.len() != 1 + n + k {
            return Err(IrError::Invalid(format!(
                "Loop body produced {} outputs, expected {}",
                outs.len(),
                1 + n + k
            )));
        }
        if use_cond {
            cond = scalar_bool(&outs[0], "Loop body condition")?;
        }
        for (list, t) in scans.iter_mut().zip(outs.drain(1 + n..)) {
            list.push(t);
        }
        carried = outs.drain(1..).collect();
        i += 1;
    }
    for (j, list) in scans.into_iter().enumerate() {
        carried.push(if list.is_empty() {
            empty_stack(declared(body, 1 + n + j), 0, "Loop scan output")?
        } else {
            stack(&list, 0)?
        });
    }
    Ok(carried)
}

/// Output types of `Loop`.
pub(super) fn infer_loop(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let body = node.attrs.graph("body")?;
    let carried: Vec<TensorType> = (2..inputs.len().max(2))
        .map(|i| in_ty(inputs, i).map(|t| t.ty.clone()))
        .collect::<Result<_>>()?;
    let n = carried.len();
    let mut body_in = vec![scalar_ty(DType::I64), scalar_ty(DType::Bool)];
    body_in.extend(carried.iter().cloned());
    let outs = body_types(body, &body_in)?;
    if outs.len() < 1 + n {
        return Err(IrError::Invalid(format!(
            "Loop body has {} outputs, fewer than 1 + {n} carried values",
            outs.len()
        )));
    }
    let known_trips = match (
        opt_in_ty(inputs, 0).and_then(|m| m.value),
        opt_input_ty(inputs, 1),
    ) {
        (Some(m), false) => scalar_i64(m, "Loop trip count M")
            .ok()
            .map(|m| m.max(0) as u64),
        _ => None,
    };
    let trips = known_trips.map_or_else(|| cx.fresh_dim("loop_trips"), Dim::Known);
    let mut tys = Vec::with_capacity(outs.len() - 1);
    for (init, out) in carried.iter().zip(&outs[1..]) {
        tys.push(join(cx, init, out, "loop_carried")?);
    }
    for out in &outs[1 + n..] {
        let mut shape = vec![trips.clone()];
        shape.extend(out.shape.iter().cloned());
        tys.push(TensorType::new(out.dtype, shape));
    }
    Ok(tys)
}

fn opt_input_ty(inputs: &[Option<InferInput>], i: usize) -> bool {
    opt_in_ty(inputs, i).is_some()
}

/// `Scan`'s attributes, normalised: per scan input its axis and direction, per scan
/// output its axis (in the stacked output) and direction.
struct ScanPlan<'a> {
    body: &'a Graph,
    n_state: usize,
    in_axes: Vec<usize>,
    in_rev: Vec<bool>,
    out_axes: Vec<i64>,
    out_rev: Vec<bool>,
}

fn scan_plan<'a>(node: &'a Node, in_ranks: &[usize]) -> Result<ScanPlan<'a>> {
    let a = &node.attrs;
    let body = a.graph("body")?;
    let m = a.req_int("num_scan_inputs")?;
    if m <= 0 || m as usize > in_ranks.len() {
        return Err(IrError::Attr {
            name: "num_scan_inputs".into(),
            msg: format!("{m} for {} inputs", in_ranks.len()),
        });
    }
    let m = m as usize;
    let n_state = in_ranks.len() - m;
    let k = body.outputs.len().checked_sub(n_state).ok_or_else(|| {
        IrError::Invalid(format!(
            "Scan body has {} outputs, fewer than its {n_state} states",
            body.outputs.len()
        ))
    })?;
    let list = |name: &str, len: usize| -> Result<Vec<i64>> {
        match a.ints(name)? {
            None => Ok(vec![0; len]),
            Some(v) if v.len() == len => Ok(v.to_vec()),
            Some(v) => Err(IrError::Attr {
                name: name.into(),
                msg: format!("has {} entries, expected {len}", v.len()),
            }),
        }
    };
    let in_axes = list("scan_input_axes", m)?
        .iter()
        .zip(&in_ranks[n_state..])
        .map(|(&ax, &r)| norm_axis(ax, r))
        .collect::<Result<_>>()?;
    Ok(ScanPlan {
        body,
        n_state,
        in_axes,
        in_rev: list("scan_input_directions", m)?
            .iter()
            .map(|&d| d != 0)
            .collect(),
        out_axes: list("scan_output_axes", k)?,
        out_rev: list("scan_output_directions", k)?
            .iter()
            .map(|&d| d != 0)
            .collect(),
    })
}

/// Runs `Scan`.
pub(super) fn eval_scan(
    cx: &EvalCx,
    node: &Node,
    inputs: &[Option<&Tensor>],
) -> Result<Vec<Tensor>> {
    let all: Vec<&Tensor> = (0..inputs.len())
        .map(|i| input(inputs, i))
        .collect::<Result<_>>()?;
    let ranks: Vec<usize> = all.iter().map(|t| t.rank()).collect();
    let plan = scan_plan(node, &ranks)?;
    let (states_in, scan_in) = all.split_at(plan.n_state);
    let seq = scan_in[0].shape()[plan.in_axes[0]];
    for (t, &ax) in scan_in.iter().zip(&plan.in_axes) {
        if t.shape()[ax] != seq {
            return Err(IrError::Shape(format!(
                "scan inputs disagree on the sequence length: {seq} vs {:?} along axis {ax}",
                t.shape()
            )));
        }
    }
    let mut states: Vec<Tensor> = states_in.iter().map(|&t| t.clone()).collect();
    let k = plan.out_axes.len();
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::with_capacity(seq); k];
    for it in 0..seq {
        crate::budget::charge(crate::budget::LOOP_ITERATION_FUEL)?;
        let mut ins = states;
        for ((t, &ax), &rev) in scan_in.iter().zip(&plan.in_axes).zip(&plan.in_rev) {
            ins.push(index_axis(t, ax, if rev { seq - 1 - it } else { it }));
        }
        let mut outs = cx.run_subgraph(plan.body, &ins)?;
        if outs.len() != plan.n_state + k {
            return Err(IrError::Invalid(format!(
                "Scan body produced {} outputs, expected {}",
                outs.len(),
                plan.n_state + k
            )));
        }
        for (list, t) in scans.iter_mut().zip(outs.drain(plan.n_state..)) {
            list.push(t);
        }
        states = outs;
    }
    for (j, mut list) in scans.into_iter().enumerate() {
        let decl = declared(plan.body, plan.n_state + j);
        let rank = list
            .first()
            .map(|t| t.rank())
            .or(decl.map(|t| t.shape.len()));
        let axis = norm_axis(plan.out_axes[j], rank.unwrap_or(0) + 1)?;
        if plan.out_rev[j] {
            list.reverse();
        }
        states.push(if list.is_empty() {
            empty_stack(decl, axis, "Scan output")?
        } else {
            stack(&list, axis)?
        });
    }
    Ok(states)
}

/// Output types of `Scan`.
pub(super) fn infer_scan(
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let all: Vec<&TensorType> = (0..inputs.len())
        .map(|i| in_ty(inputs, i).map(|t| t.ty))
        .collect::<Result<_>>()?;
    let ranks: Vec<usize> = all.iter().map(|t| t.shape.len()).collect();
    let plan = scan_plan(node, &ranks)?;
    let (states_in, scan_in) = all.split_at(plan.n_state);
    let seq = scan_in[0].shape[plan.in_axes[0]].clone();
    let mut body_in: Vec<TensorType> = states_in.iter().map(|&t| t.clone()).collect();
    for (t, &ax) in scan_in.iter().zip(&plan.in_axes) {
        let mut shape = t.shape.clone();
        shape.remove(ax);
        body_in.push(TensorType::new(t.dtype, shape));
    }
    let outs = body_types(plan.body, &body_in)?;
    let mut tys = Vec::with_capacity(outs.len());
    for (init, out) in states_in.iter().zip(&outs) {
        tys.push(join(cx, init, out, "scan_state")?);
    }
    for (out, &ax) in outs[plan.n_state..].iter().zip(&plan.out_axes) {
        let axis = norm_axis(ax, out.shape.len() + 1)?;
        let mut shape = out.shape.clone();
        shape.insert(axis, seq.clone());
        tys.push(TensorType::new(out.dtype, shape));
    }
    Ok(tys)
}
