//! Control flow made straight-line for the GPU plans, which lay out every step and every
//! byte before a run: an `If` whose condition is a constant (after specialization and
//! folding) becomes its branch; an `If` on a computed condition whose branches agree on
//! their output types runs both branches and selects with `Where` (ONNX ops have no side
//! effects, so only time is spent, and branches that read indices on the device, which
//! could raise an error for the branch not taken, are refused); a `Loop` whose trip count
//! (and condition) are constants, and a `Scan` over a static sequence, are unrolled: one
//! copy of the body per iteration, carried values threaded through, per-iteration
//! outputs stacked with `Unsqueeze` + `Concat`. The result runs as one device plan (one
//! CUDA graph) and the optimizer fuses across iterations.
//!
//! What stays is refused by the GPU planners with its reason: a loop whose condition is
//! computed on the device, a trip count above [`MAX_UNROLLED_NODES`] body nodes in all,
//! nested control flow inside a body. Graph inputs that decide a condition or a trip
//! count are specialized on their values (`value_inputs`), as shape inputs are, so a
//! loop over an input count unrolls once per count seen.

use crate::attr::{Attr, Attrs};
use crate::error::{IrError, Result};
use crate::fold::fold_constants;
use crate::graph::{Graph, Node, TensorType, ValueId};
use crate::ops::{ControlOp, ElementwiseOp, Op, ShapeOp};
use crate::tensor::Tensor;
use std::collections::HashMap;

/// The most body nodes unrolling may add to a graph, in all.
pub const MAX_UNROLLED_NODES: usize = 50_000;

/// The attribute a control node left as it is carries, saying why (GPU planners put it
/// in their refusal).
pub const LEFT_ATTR: &str = "gopt_left_because";

/// The most iterations one loop or scan is unrolled to.
pub const MAX_ITERATIONS: usize = 4096;

/// What [`unroll_control`] did and left, one line per control node, for reports.
#[derive(Clone, Debug, Default)]
pub struct Unrolled {
    /// Control nodes made straight-line, and how.
    pub done: Vec<String>,
    /// Control nodes left as they were, and why.
    pub left: Vec<String>,
}

/// Makes every control node of `g` it can straight-line (see the module header),
/// folding constants between steps so that a condition or trip count computed from
/// constants is known. Nodes it cannot expand stay, with the reason in
/// [`Unrolled::left`].
pub fn unroll_control(g: &mut Graph) -> Result<Unrolled> {
    let mut report = Unrolled::default();
    if !g.nodes.iter().any(|n| is_control(&n.op)) {
        return Ok(report);
    }
    let mut budget = MAX_UNROLLED_NODES;
    let mut refused: Vec<String> = Vec::new();
    loop {
        fold_constants(g)?;
        let next = g
            .nodes
            .iter()
            .position(|n| is_control(&n.op) && !refused.contains(&n.name));
        let Some(i) = next else { break };
        let node = g.nodes[i].clone();
        let mut trial = g.clone();
        trial.nodes.remove(i);
        match expand(&mut trial, &node, &mut budget) {
            Ok(how) => {
                *g = trial;
                report
                    .done
                    .push(format!("{} `{}`: {how}", node.op.name(), node.name));
            }
            Err(IrError::Unsupported(why)) => {
                report
                    .left
                    .push(format!("{} `{}`: {why}", node.op.name(), node.name));
                g.nodes[i].attrs.set(LEFT_ATTR, Attr::Str(why));
                refused.push(node.name);
            }
            Err(e) => return Err(e),
        }
    }
    if !report.done.is_empty() {
        // Types inferred before (fresh symbols where an If's branches or a Loop's trip
        // count were unknown) are inferred again from the straight-line graph.
        for n in &g.nodes {
            for &o in &n.outputs {
                if !g.outputs.contains(&o) {
                    g.values[o.index()].ty = None;
                }
            }
        }
        fold_constants(g)?;
    }
    g.sort_nodes()?;
    Ok(report)
}

/// Whether `op` is one this pass makes straight-line (If, Loop, Scan).
pub fn is_control(op: &Op) -> bool {
    matches!(
        op,
        Op::Control(ControlOp::If | ControlOp::Loop | ControlOp::Scan)
    )
}

fn unsupported(msg: impl Into<String>) -> IrError {
    IrError::Unsupported(msg.into())
}

/// Replaces control node `node` (already removed from `g`) by straight-line nodes.
fn expand(g: &mut Graph, node: &Node, budget: &mut usize) -> Result<String> {
    match node.op {
        Op::Control(ControlOp::If) => expand_if(g, node, budget),
        Op::Control(ControlOp::Loop) => expand_loop(g, node, budget),
        Op::Control(ControlOp::Scan) => expand_scan(g, node, budget),
        _ => Err(IrError::Invalid(format!(
            "{} is not control flow",
            node.name
        ))),
    }
}

/// A scalar constant's value as i64 (ints and bools), if `v` is a constant.
fn const_scalar(g: &Graph, v: ValueId) -> Option<i64> {
    let t = g.small_constant(v)?;
    let v = t.to_i64_vec();
    (v.len() == 1).then(|| v[0])
}

fn expand_if(g: &mut Graph, node: &Node, budget: &mut usize) -> Result<String> {
    let cond = input(node, 0)?;
    let then_b = node.attrs.graph("then_branch")?;
    let else_b = node.attrs.graph("else_branch")?;
    if let Some(c) = const_scalar(g, cond) {
        let (b, which) = if c != 0 {
            (then_b, "then")
        } else {
            (else_b, "else")
        };
        let outs = inline(g, b, &[], &format!("{}/{which}/", node.name), budget)?;
        bind_outputs(g, node, &outs)?;
        return Ok(format!("constant condition: the {which} branch inlined"));
    }
    // Both branches, then a select: only where the output types agree exactly (the If's
    // own inferred types are concrete only when they do) and neither branch can raise a
    // device error for the side not taken.
    for &o in &node.outputs {
        let concrete = g
            .value(o)
            .ty
            .as_ref()
            .is_some_and(|t| crate::dim::concrete(&t.shape).is_some());
        if !concrete {
            return Err(unsupported(
                "the condition is computed on the device and the branches' outputs differ \
                 in shape (a GPU plan cannot choose its layout after the run started)",
            ));
        }
    }
    for b in [then_b, else_b] {
        if let Some(n) = b.nodes.iter().find(|n| reads_device_indices(&n.op)) {
            return Err(unsupported(format!(
                "the condition is computed on the device and branch `{}` has a {} that \
                 checks indices, which running both branches could trip for the branch \
                 not taken",
                b.name,
                n.op.name()
            )));
        }
    }
    // ONNX allows a one-element condition of any rank; Where would broadcast its shape.
    let cond = match g.ty(cond)?.shape.len() {
        0 => cond,
        _ => {
            let shape = g.add_const(
                &format!("{}/cond_shape", node.name),
                Tensor::I64(ndarray::Array1::<i64>::zeros(0).into_dyn()),
            );
            let scalar = g.add_value(&format!("{}/cond_scalar", node.name), None);
            g.nodes.push(Node {
                name: format!("{}/cond_scalar", node.name),
                op: Op::Shape(ShapeOp::Reshape),
                attrs: Attrs::default(),
                inputs: vec![Some(cond), Some(shape)],
                outputs: vec![scalar],
            });
            scalar
        }
    };
    let a = inline(g, then_b, &[], &format!("{}/then/", node.name), budget)?;
    let b = inline(g, else_b, &[], &format!("{}/else/", node.name), budget)?;
    if a.len() != node.outputs.len() || b.len() != node.outputs.len() {
        return Err(IrError::Invalid(format!(
            "If `{}`: its branches' outputs do not match its {} outputs",
            node.name,
            node.outputs.len()
        )));
    }
    for (k, &o) in node.outputs.iter().enumerate() {
        g.nodes.push(Node {
            name: format!("{}/select{k}", node.name),
            op: Op::Elementwise(ElementwiseOp::Where),
            attrs: Attrs::default(),
            inputs: vec![Some(cond), Some(a[k]), Some(b[k])],
            outputs: vec![o],
        });
    }
    Ok("condition computed on the device: both branches run, outputs selected by Where".into())
}

/// Ops whose GPU kernels check indices read from device memory.
fn reads_device_indices(op: &Op) -> bool {
    matches!(
        op,
        Op::Shape(
            ShapeOp::Gather
                | ShapeOp::GatherElements
                | ShapeOp::GatherND
                | ShapeOp::ScatterElements
                | ShapeOp::ScatterND
                | ShapeOp::Scatter
                | ShapeOp::Compress
        )
    ) || is_control(op)
}

fn expand_loop(g: &mut Graph, node: &Node, budget: &mut usize) -> Result<String> {
    let body = node.attrs.graph("body")?;
    let m = opt(node, 0);
    let cond_in = opt(node, 1);
    let trips = match m {
        Some(v) if g.inputs.contains(&v) && const_scalar(g, v).is_none() => {
            return Err(unsupported(format!(
                "its trip count is the graph input `{}`, whose value a compile without \
                 inputs does not have (`gopt run` and `gopt test` compile once per value)",
                g.value(v).name
            )))
        }
        Some(v) => const_scalar(g, v).ok_or_else(|| {
            unsupported(
                "its trip count is computed on the device (a GPU plan unrolls loops whose \
                 count is known when it is built)",
            )
        })?,
        None => {
            return Err(unsupported(
                "it has no trip count (it ends on a condition computed in the body)",
            ))
        }
    };
    if usize::try_from(trips).is_ok_and(|t| t > MAX_ITERATIONS) {
        return Err(unsupported(format!(
            "its {trips} iterations are more than the {MAX_ITERATIONS} a GPU plan unrolls"
        )));
    }
    let use_cond = cond_in.is_some();
    let mut cond = match cond_in {
        Some(c) => {
            const_scalar(g, c).ok_or_else(|| {
                unsupported("its condition is computed on the device before the loop")
            })? != 0
        }
        None => true,
    };
    let carried0: Vec<ValueId> = node
        .inputs
        .iter()
        .skip(2)
        .map(|v| {
            v.ok_or_else(|| {
                IrError::Invalid(format!("Loop `{}`: a carried value is missing", node.name))
            })
        })
        .collect::<Result<_>>()?;
    let n = carried0.len();
    let k = body.outputs.len().checked_sub(1 + n).ok_or_else(|| {
        IrError::Invalid(format!(
            "Loop `{}`: its body has fewer outputs than 1 + {n} carried values",
            node.name
        ))
    })?;
    let mut carried = carried0;
    let mut scans: Vec<Vec<ValueId>> = vec![Vec::new(); k];
    let mut i: i64 = 0;
    while cond && i < trips {
        let iv = g.add_const(
            &format!("{}/iter{i}/i", node.name),
            Tensor::I64(ndarray::arr0(i).into_dyn()),
        );
        let cv = g.add_const(
            &format!("{}/iter{i}/cond", node.name),
            Tensor::Bool(ndarray::arr0(cond).into_dyn()),
        );
        let mut args = vec![iv, cv];
        args.extend(&carried);
        let outs = inline(g, body, &args, &format!("{}/iter{i}/", node.name), budget)?;
        if use_cond {
            cond = body_condition(body, i, cond)?;
        }
        carried = outs[1..1 + n].to_vec();
        for (list, &v) in scans.iter_mut().zip(&outs[1 + n..]) {
            list.push(v);
        }
        i += 1;
    }
    if k > 0 && i == 0 {
        return Err(unsupported("it runs no iteration and has scan outputs"));
    }
    let mut outs = carried;
    for (j, list) in scans.iter().enumerate() {
        outs.push(stack(g, list, 0, &format!("{}/scan{j}", node.name))?);
    }
    bind_outputs(g, node, &outs)?;
    Ok(format!("unrolled {i} iterations"))
}

/// The condition a Loop body computes in iteration `i` entered with `cond`, when it
/// follows from those two alone (constants folded in a copy of the body; folding the
/// outer graph here would renumber the values being threaded through).
fn body_condition(body: &Graph, i: i64, cond: bool) -> Result<bool> {
    let computed =
        || unsupported("its body computes the loop condition from tensors on the device");
    let mut b = body.clone();
    if b.inputs.len() < 2 || b.outputs.is_empty() {
        return Err(IrError::Invalid(format!(
            "Loop body `{}` lacks its condition",
            b.name
        )));
    }
    for (v, t) in [
        (b.inputs[0], Tensor::I64(ndarray::arr0(i).into_dyn())),
        (b.inputs[1], Tensor::Bool(ndarray::arr0(cond).into_dyn())),
    ] {
        b.values[v.index()].ty = Some(TensorType::new(t.dtype(), crate::dim::shape_of(t.shape())));
        b.constants.insert(v, t.into());
    }
    // Only the condition's cone: a carried value it reads has no producer left, so
    // folding fails and the condition counts as computed on the device.
    b.inputs.clear();
    b.outputs.truncate(1);
    b.prune();
    fold_constants(&mut b).map_err(|_| computed())?;
    let out = b.outputs[0];
    b.small_constant(out)
        .and_then(|t| t.to_i64_vec().first().map(|&c| c != 0))
        .ok_or_else(computed)
}

fn expand_scan(g: &mut Graph, node: &Node, budget: &mut usize) -> Result<String> {
    let body = node.attrs.graph("body")?;
    let all: Vec<ValueId> = node
        .inputs
        .iter()
        .map(|v| {
            v.ok_or_else(|| IrError::Invalid(format!("Scan `{}`: a missing input", node.name)))
        })
        .collect::<Result<_>>()?;
    let shapes: Vec<Vec<usize>> = all
        .iter()
        .map(|&v| {
            let t = g.ty(v)?;
            crate::dim::concrete(&t.shape).ok_or_else(|| {
                unsupported("its inputs' shapes are not known when the plan is built")
            })
        })
        .collect::<Result<_>>()?;
    let a = &node.attrs;
    let m = usize::try_from(a.req_int("num_scan_inputs")?)
        .ok()
        .filter(|&m| m >= 1 && m <= all.len())
        .ok_or_else(|| IrError::Invalid(format!("Scan `{}`: bad num_scan_inputs", node.name)))?;
    let n_state = all.len() - m;
    let k = body.outputs.len().checked_sub(n_state).ok_or_else(|| {
        IrError::Invalid(format!(
            "Scan `{}`: fewer body outputs than states",
            node.name
        ))
    })?;
    let list = |name: &str, len: usize| -> Result<Vec<i64>> {
        Ok(a.ints(name)?.map_or_else(|| vec![0; len], |v| v.to_vec()))
    };
    let (in_axes, in_dirs) = (
        list("scan_input_axes", m)?,
        list("scan_input_directions", m)?,
    );
    let (out_axes, out_dirs) = (
        list("scan_output_axes", k)?,
        list("scan_output_directions", k)?,
    );
    if in_axes.len() != m || in_dirs.len() != m || out_axes.len() != k || out_dirs.len() != k {
        return Err(IrError::Invalid(format!(
            "Scan `{}`: axis or direction lists of the wrong length",
            node.name
        )));
    }
    let mut axes = Vec::with_capacity(m);
    for (j, &ax) in in_axes.iter().enumerate() {
        axes.push(crate::ops::util::norm_axis(ax, shapes[n_state + j].len())?);
    }
    let seq = shapes[n_state][axes[0]];
    if (0..m).any(|j| shapes[n_state + j][axes[j]] != seq) {
        return Err(IrError::Shape(format!(
            "Scan `{}`: scan inputs disagree on the sequence length",
            node.name
        )));
    }
    if seq > MAX_ITERATIONS {
        return Err(unsupported(format!(
            "its {seq} iterations are more than the {MAX_ITERATIONS} a GPU plan unrolls"
        )));
    }
    if seq == 0 && k > 0 {
        return Err(unsupported(
            "it scans an empty sequence and has scan outputs",
        ));
    }
    let mut states: Vec<ValueId> = all[..n_state].to_vec();
    let mut scans: Vec<Vec<ValueId>> = vec![Vec::new(); k];
    for it in 0..seq {
        let prefix = format!("{}/iter{it}/", node.name);
        let mut args = states.clone();
        for j in 0..m {
            let at = if in_dirs[j] != 0 { seq - 1 - it } else { it };
            let idx = g.add_const(
                &format!("{prefix}at{j}"),
                Tensor::I64(ndarray::arr0(at as i64).into_dyn()),
            );
            let slice = g.add_value(&format!("{prefix}slice{j}"), None);
            let mut attrs = Attrs::default();
            attrs.set("axis", Attr::Int(axes[j] as i64));
            g.nodes.push(Node {
                name: format!("{prefix}slice{j}"),
                op: Op::Shape(ShapeOp::Gather),
                attrs,
                inputs: vec![Some(all[n_state + j]), Some(idx)],
                outputs: vec![slice],
            });
            args.push(slice);
        }
        let outs = inline(g, body, &args, &prefix, budget)?;
        states = outs[..n_state].to_vec();
        for (l, &v) in scans.iter_mut().zip(&outs[n_state..]) {
            l.push(v);
        }
    }
    let mut outs = states;
    for (j, mut l) in scans.into_iter().enumerate() {
        if out_dirs[j] != 0 {
            l.reverse();
        }
        let rank = body
            .outputs
            .get(n_state + j)
            .and_then(|&o| body.value(o).ty.as_ref())
            .map(|t| t.shape.len());
        let axis = match (out_axes[j] < 0, rank) {
            (false, _) => out_axes[j] as usize,
            (true, Some(r)) => crate::ops::util::norm_axis(out_axes[j], r + 1)?,
            (true, None) => {
                return Err(unsupported(
                    "a negative scan output axis on a body output with no declared rank",
                ))
            }
        };
        outs.push(stack(g, &l, axis, &format!("{}/scan{j}", node.name))?);
    }
    bind_outputs(g, node, &outs)?;
    Ok(format!("unrolled {seq} iterations"))
}

/// Stacks `vs` along a new axis `axis`: `Unsqueeze` each, then `Concat`.
fn stack(g: &mut Graph, vs: &[ValueId], axis: usize, name: &str) -> Result<ValueId> {
    let axes = g.add_const(
        &format!("{name}/axes"),
        Tensor::I64(ndarray::arr1(&[axis as i64]).into_dyn()),
    );
    let mut parts = Vec::with_capacity(vs.len());
    for (t, &v) in vs.iter().enumerate() {
        let u = g.add_value(&format!("{name}/{t}"), None);
        g.nodes.push(Node {
            name: format!("{name}/unsqueeze{t}"),
            op: Op::Shape(ShapeOp::Unsqueeze),
            attrs: Attrs::default(),
            inputs: vec![Some(v), Some(axes)],
            outputs: vec![u],
        });
        parts.push(Some(u));
    }
    let out = g.add_value(name, None);
    let mut attrs = Attrs::default();
    attrs.set("axis", Attr::Int(axis as i64));
    g.nodes.push(Node {
        name: format!("{name}/concat"),
        op: Op::Shape(ShapeOp::Concat),
        attrs,
        inputs: parts,
        outputs: vec![out],
    });
    Ok(out)
}

/// Makes each output of control node `node` the value in `outs` (through `Identity`,
/// so the outputs keep their names and handles).
fn bind_outputs(g: &mut Graph, node: &Node, outs: &[ValueId]) -> Result<()> {
    if outs.len() != node.outputs.len() {
        return Err(IrError::Invalid(format!(
            "{} `{}`: {} outputs computed for its {}",
            node.op.name(),
            node.name,
            outs.len(),
            node.outputs.len()
        )));
    }
    for (k, (&o, &v)) in node.outputs.iter().zip(outs).enumerate() {
        g.values[o.index()].ty = None;
        g.nodes.push(Node {
            name: format!("{}/out{k}", node.name),
            op: Op::Shape(ShapeOp::Identity),
            attrs: Attrs::default(),
            inputs: vec![Some(v)],
            outputs: vec![o],
        });
    }
    Ok(())
}

/// Copies `body`'s nodes into `g` with names prefixed by `prefix`: its inputs bound to
/// `args`, its captures to the values of `g` of the same name, its constants shared.
/// Returns the values of `g` that hold its outputs.
fn inline(
    g: &mut Graph,
    body: &Graph,
    args: &[ValueId],
    prefix: &str,
    budget: &mut usize,
) -> Result<Vec<ValueId>> {
    if body.inputs.len() != args.len() {
        return Err(IrError::Invalid(format!(
            "sub-graph `{}` takes {} inputs, {} given",
            body.name,
            body.inputs.len(),
            args.len()
        )));
    }
    *budget = budget.checked_sub(body.nodes.len().max(1)).ok_or_else(|| {
        unsupported(format!(
            "unrolling it would add more than {MAX_UNROLLED_NODES} nodes"
        ))
    })?;
    let by_name: HashMap<&str, ValueId> = g
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.as_str(), ValueId(i as u32)))
        .collect();
    let mut map: Vec<Option<ValueId>> = vec![None; body.values.len()];
    for (&b, &a) in body.inputs.iter().zip(args) {
        map[b.index()] = Some(a);
    }
    let mut captured = Vec::new();
    for &c in &body.captures {
        let name = body.value(c).name.as_str();
        let outer = by_name.get(name).copied().ok_or_else(|| {
            IrError::Invalid(format!(
                "sub-graph `{}` reads `{name}`, which the outer graph does not have",
                body.name
            ))
        })?;
        captured.push((c, outer));
    }
    drop(by_name);
    for (c, outer) in captured {
        map[c.index()] = Some(outer);
    }
    for (&v, k) in &body.constants {
        let ty = body
            .value(v)
            .ty
            .clone()
            .or_else(|| Some(TensorType::new(k.dtype(), crate::dim::shape_of(k.shape()))));
        let nv = g.add_value(&format!("{prefix}{}", body.value(v).name), ty);
        g.constants.insert(nv, k.clone());
        map[v.index()] = Some(nv);
    }
    for nid in body.topo_order()? {
        let n = &body.nodes[nid.index()];
        if n.attrs.graphs().next().is_some() {
            return Err(unsupported(format!(
                "its body has nested control flow (node `{}`, {})",
                n.name,
                n.op.name()
            )));
        }
        let inputs = n
            .inputs
            .iter()
            .map(|i| match i {
                None => Ok(None),
                Some(v) => map[v.index()].map(Some).ok_or_else(|| {
                    IrError::Invalid(format!(
                        "sub-graph `{}`: node `{}` reads `{}`, which nothing defines",
                        body.name,
                        n.name,
                        body.value(*v).name
                    ))
                }),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut outputs = Vec::with_capacity(n.outputs.len());
        for &o in &n.outputs {
            let nv = g.add_value(&format!("{prefix}{}", body.value(o).name), None);
            map[o.index()] = Some(nv);
            outputs.push(nv);
        }
        g.nodes.push(Node {
            name: format!("{prefix}{}", n.name),
            op: n.op,
            attrs: n.attrs.clone(),
            inputs,
            outputs,
        });
    }
    body.outputs
        .iter()
        .map(|&o| {
            map[o.index()].ok_or_else(|| {
                IrError::Invalid(format!(
                    "sub-graph `{}`: output `{}` is not defined",
                    body.name,
                    body.value(o).name
                ))
            })
        })
        .collect()
}

fn input(node: &Node, k: usize) -> Result<ValueId> {
    opt(node, k).ok_or_else(|| IrError::Invalid(format!("{}: input {k} is missing", node.name)))
}

fn opt(node: &Node, k: usize) -> Option<ValueId> {
    node.inputs.get(k).copied().flatten()
}
