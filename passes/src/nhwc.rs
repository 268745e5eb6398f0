//! Channels-last layout, after extraction: every 2-D `FusedConv` of a convolutional
//! graph switches to `layout="NHWC"` and the transposes this needs are cancelled,
//! merged and sunk through element-wise ops and windowed pools until only those at real
//! layout boundaries remain (the graph input, the classifier head).
//!
//! A channels-last pool needs no op of its own: MaxPool or AveragePool with window
//! `[kh, kw]` over NHWC `[N, H, W, C]` is the same pool with window `[kh, kw, 1]` over
//! the view `[N, 1, H, W, C]` (one "channel", C a third spatial dim the window does not
//! span), so the pass writes `Reshape → pool → Reshape` (the reshapes are views, free
//! on the GPU) and every backend's pool kernel runs it as it is, reading along C.
//!
//! Why channels-last: a group=1 convolution over `[N, H, W, C]` activations is a GEMM
//! over `[N*H*W, C]` rows (exactly one for 1x1 kernels, an implicit GEMM otherwise),
//! which is what cuBLASLt, cuDNN's fastest tensor-core kernels and TensorRT want; NCHW
//! forces a transpose or a strided gather per convolution.
//!
//! Why a deterministic pass rather than e-graph rules: the layout only pays off when a
//! whole chain of convolutions and the element-wise ops between them flips at once. A
//! single flipped conv costs two transposes and gains little, so under a per-node cost
//! model greedy extraction never picks the first flip and so never reaches the chain;
//! and the rules that move transposes around would grow the e-graph for every
//! element-wise op of the model. Here the decision is made once for the whole graph and
//! the cleanup is local and terminating.
//!
//! The pass never changes results: the convolutions compute the same sums, transposes
//! only move data, and element-wise ops commute with any permutation of their (equally
//! shaped) operands. Graph inputs and outputs keep their values and names.

use crate::{PassError, Result};
use gopt_ir::dim::Dim;
use gopt_ir::ops::{FusedOp, NnOp, ShapeOp};
use gopt_ir::{Attr, Attrs, Graph, Node, NodeId, Op, Tensor, TensorType, ValueId};
use std::collections::{HashMap, HashSet};

/// `[N, C, H, W]` to `[N, H, W, C]`.
const TO_NHWC: [usize; 4] = [0, 2, 3, 1];
/// `[N, H, W, C]` to `[N, C, H, W]`.
const TO_NCHW: [usize; 4] = [0, 3, 1, 2];

/// Converts the graph's 2-D `FusedConv`s to channels-last and cleans up the transposes;
/// returns how many convolutions were converted (0 when the graph has fewer than two
/// candidates: one conv alone gains nothing from the transposes around it).
pub fn to_channels_last(g: &mut Graph) -> Result<usize> {
    g.sort_nodes()?;
    let convs: Vec<usize> = (0..g.nodes.len())
        .filter(|&i| convertible(g, &g.nodes[i]))
        .collect();
    if convs.len() < 2 {
        return Ok(0);
    }
    let mut names = Names::of(g);
    for &i in &convs {
        convert(g, i, &mut names)?;
    }
    cleanup(g, &mut names)?;
    g.sort_nodes()?;
    Ok(convs.len())
}

/// A static 4-D NCHW `FusedConv` with 2-D weights and, if any, a static 4-D residual.
fn convertible(g: &Graph, n: &Node) -> bool {
    if n.op != Op::Fused(FusedOp::FusedConv) || n.outputs.len() != 1 {
        return false;
    }
    if n.attrs.str_or("layout", "NCHW").ok() != Some("NCHW") {
        return false;
    }
    let rank4 = |v: Option<ValueId>| {
        v.and_then(|v| g.value(v).ty.as_ref())
            .and_then(|t| gopt_ir::dim::concrete(&t.shape))
            .is_some_and(|s| s.len() == 4)
    };
    let slot = |i: usize| n.inputs.get(i).copied().flatten();
    let residual_ok = slot(3).is_none() || rank4(slot(3));
    rank4(slot(0)) && rank4(slot(1)) && rank4(Some(n.outputs[0])) && residual_ok
}

/// Flips conv `i`: X (and the residual) get a transpose to NHWC in front, the conv
/// writes a new NHWC value and a transpose back produces the old (NCHW) output value,
/// so every existing consumer is untouched.
fn convert(g: &mut Graph, i: usize, names: &mut Names) -> Result<()> {
    let conv = g.nodes[i].name.clone();
    let x = input(&g.nodes[i], 0)?;
    let xt = transpose_into(g, x, &TO_NHWC, &format!("{conv}/nhwc_in"), names)?;
    g.nodes[i].inputs[0] = Some(xt);
    if let Some(r) = g.nodes[i].inputs.get(3).copied().flatten() {
        let rt = transpose_into(g, r, &TO_NHWC, &format!("{conv}/nhwc_res"), names)?;
        g.nodes[i].inputs[3] = Some(rt);
    }
    let y = g.nodes[i].outputs[0];
    let yt = permuted(g.ty(y)?, &TO_NHWC);
    let yn = g.add_value(&names.value(&format!("{conv}/nhwc")), Some(yt));
    g.nodes[i].outputs[0] = yn;
    g.nodes[i]
        .attrs
        .set("layout", Attr::Str("NHWC".to_string()));
    let node = transpose_node(names.node(&format!("{conv}/nhwc_out")), yn, y, &TO_NCHW);
    g.nodes.push(node);
    Ok(())
}

/// Adds `Transpose(perm)(x)` as a new value named `name`; returns it.
fn transpose_into(
    g: &mut Graph,
    x: ValueId,
    perm: &[usize],
    name: &str,
    names: &mut Names,
) -> Result<ValueId> {
    let ty = permuted(g.ty(x)?, perm);
    let out = g.add_value(&names.value(name), Some(ty));
    let node = transpose_node(names.node(name), x, out, perm);
    g.nodes.push(node);
    Ok(out)
}

fn transpose_node(name: String, x: ValueId, out: ValueId, perm: &[usize]) -> Node {
    let mut attrs = Attrs::default();
    attrs.set("perm", Attr::Ints(perm.iter().map(|&p| p as i64).collect()));
    Node {
        name,
        op: Op::Shape(ShapeOp::Transpose),
        attrs,
        inputs: vec![Some(x)],
        outputs: vec![out],
    }
}

/// `ty` with its dims taken in `perm` order (Transpose's output type).
fn permuted(ty: &TensorType, perm: &[usize]) -> TensorType {
    let shape = perm.iter().map(|&p| ty.shape[p].clone()).collect();
    TensorType::new(ty.dtype, shape)
}

fn input(n: &Node, i: usize) -> Result<ValueId> {
    n.inputs
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| PassError::Internal(format!("node `{}` lacks input {i}", n.name)))
}

// ---- cleanup ----------------------------------------------------------------------------

/// Rewrites one step at a time to a fixpoint: merge duplicate transposes, cancel or
/// compose transpose pairs, sink transposes through element-wise ops and pools, prune.
/// Every step
/// preserves the graph's meaning, so the step cap (never reached in practice: transposes
/// only merge, vanish or move towards the outputs) just ends the pass early.
fn cleanup(g: &mut Graph, names: &mut Names) -> Result<()> {
    g.prune();
    let cap = 8 * g.nodes.len() + 64;
    for _ in 0..cap {
        let changed =
            merge_duplicate(g) || cancel_pair(g)? || sink_one(g, names)? || sink_pool(g, names)?;
        if !changed {
            return Ok(());
        }
        g.prune();
    }
    Ok(())
}

/// Transpose's permutation (reversed dims when `perm` is absent), or None for other
/// nodes and malformed ones.
fn perm_of(g: &Graph, n: &Node) -> Option<Vec<usize>> {
    if n.op != Op::Shape(ShapeOp::Transpose) || n.inputs.len() != 1 || n.outputs.len() != 1 {
        return None;
    }
    let rank = g.value(n.inputs[0]?).ty.as_ref()?.shape.len();
    let p: Vec<usize> = match n.attrs.ints("perm").ok()? {
        Some(p) => p
            .iter()
            .map(|&a| usize::try_from(a).ok())
            .collect::<Option<_>>()?,
        None => (0..rank).rev().collect(),
    };
    let mut seen = vec![false; rank];
    for &a in &p {
        if a >= rank || std::mem::replace(&mut seen[a], true) {
            return None;
        }
    }
    (p.len() == rank).then_some(p)
}

/// The value a transpose reads and its permutation, if `v` is a transpose's output.
fn transposed(
    g: &Graph,
    prod: &HashMap<ValueId, (NodeId, usize)>,
    v: ValueId,
) -> Option<(ValueId, Vec<usize>)> {
    let &(p, _) = prod.get(&v)?;
    let n = g.node(p);
    Some((n.inputs[0]?, perm_of(g, n)?))
}

/// Points every node input reading `from` at `to` (graph outputs are left alone);
/// false when no node read `from`.
fn replace_uses(g: &mut Graph, from: ValueId, to: ValueId) -> bool {
    let mut any = false;
    for n in &mut g.nodes {
        for v in n.inputs.iter_mut().flatten() {
            if *v == from {
                *v = to;
                any = true;
            }
        }
    }
    any
}

/// Two transposes of one value with one permutation: the later one's readers read the
/// earlier one.
fn merge_duplicate(g: &mut Graph) -> bool {
    let outputs: HashSet<ValueId> = g.outputs.iter().copied().collect();
    let mut seen: HashMap<(ValueId, Vec<usize>), ValueId> = HashMap::new();
    let mut dups = Vec::new();
    for n in &g.nodes {
        let (Some(p), Some(Some(x))) = (perm_of(g, n), n.inputs.first().copied()) else {
            continue;
        };
        let out = n.outputs[0];
        match seen.get(&(x, p.clone())) {
            Some(&first) if !outputs.contains(&out) => dups.push((out, first)),
            Some(_) => {}
            None => {
                seen.insert((x, p), out);
            }
        }
    }
    dups.into_iter()
        .any(|(out, first)| replace_uses(g, out, first))
}

/// `Transpose(p2)(Transpose(p1)(x))`: readers of an identity pair read `x`; any other
/// pair becomes one transpose of `x`.
fn cancel_pair(g: &mut Graph) -> Result<bool> {
    let prod = g.producers();
    let outputs: HashSet<ValueId> = g.outputs.iter().copied().collect();
    for i in 0..g.nodes.len() {
        let Some(p2) = perm_of(g, &g.nodes[i]) else {
            continue;
        };
        let v = input(&g.nodes[i], 0)?;
        let Some((x, p1)) = transposed(g, &prod, v) else {
            continue;
        };
        // out[i] = v[p2[i]] = x[p1[p2[i]]].
        let q: Vec<usize> = p2.iter().map(|&a| p1[a]).collect();
        let out = g.nodes[i].outputs[0];
        if q.iter().enumerate().all(|(k, &a)| k == a) {
            if outputs.contains(&out) || !replace_uses(g, out, x) {
                continue;
            }
        } else {
            let n = &mut g.nodes[i];
            n.inputs[0] = Some(x);
            n.attrs
                .set("perm", Attr::Ints(q.iter().map(|&a| a as i64).collect()));
        }
        return Ok(true);
    }
    Ok(false)
}

/// What sinking a transpose below element-wise node `node` takes.
struct Sink {
    node: usize,
    perm: Vec<usize>,
    /// Input slots that read a transpose, and the value that transpose reads.
    reads: Vec<(usize, ValueId)>,
}

/// Sinks the first transpose that can move below an element-wise op without adding a
/// transpose to the graph: `op(Transpose(p)(a), Transpose(p)(b), scalars)` becomes
/// `Transpose(p)(op(a, b, scalars))`.
fn sink_one(g: &mut Graph, names: &mut Names) -> Result<bool> {
    let prod = g.producers();
    let cons = g.consumers();
    let outputs: HashSet<ValueId> = g.outputs.iter().copied().collect();
    for i in 0..g.nodes.len() {
        if let Some(s) = sink_plan(g, i, &prod)? {
            if sink_gain(g, &s, &cons, &outputs) >= 0 {
                apply_sink(g, s, names)?;
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// A deterministic one-output element-wise op whose non-scalar inputs all read
/// transposes with one permutation of equally shaped values.
fn sink_plan(
    g: &Graph,
    i: usize,
    prod: &HashMap<ValueId, (NodeId, usize)>,
) -> Result<Option<Sink>> {
    let n = &g.nodes[i];
    if !matches!(n.op, Op::Elementwise(_)) || !n.op.is_deterministic() || n.outputs.len() != 1 {
        return Ok(None);
    }
    let out_rank = g.ty(n.outputs[0])?.shape.len();
    let mut reads: Vec<(usize, ValueId)> = Vec::new();
    let mut perm: Option<Vec<usize>> = None;
    for (slot, v) in n.inputs.iter().enumerate() {
        let Some(v) = *v else { continue };
        if g.konst(v)
            .is_some_and(|t| t.len() == 1 && t.rank() <= out_rank)
        {
            continue;
        }
        let Some((x, p)) = transposed(g, prod, v) else {
            return Ok(None);
        };
        if let Some(&(_, x0)) = reads.first() {
            if perm.as_ref() != Some(&p) || g.ty(x0)?.shape != g.ty(x)?.shape {
                return Ok(None);
            }
        }
        perm = Some(p);
        reads.push((slot, x));
    }
    let (Some(perm), Some(&(_, x0))) = (perm, reads.first()) else {
        return Ok(None);
    };
    let xs = &g.ty(x0)?.shape;
    // Equal shapes and scalars: the op's output is the transposed operand's shape.
    let out = &g.ty(n.outputs[0])?.shape;
    let same = out.len() == perm.len() && perm.iter().zip(out).all(|(&p, d)| xs[p] == *d);
    Ok(same.then_some(Sink {
        node: i,
        perm,
        reads,
    }))
}

/// Transposes removed minus transposes added by a sink: the input transposes only this
/// node reads die, the new one below it is added, the inverse transposes reading its
/// output cancel against it, and when they are its only readers it dies too.
fn sink_gain(
    g: &Graph,
    s: &Sink,
    cons: &HashMap<ValueId, Vec<NodeId>>,
    outputs: &HashSet<ValueId>,
) -> i64 {
    let node = &g.nodes[s.node];
    let only_here = |v: ValueId| {
        !outputs.contains(&v)
            && cons
                .get(&v)
                .is_some_and(|c| c.iter().all(|n| n.index() == s.node))
    };
    let mut dying: Vec<ValueId> = s
        .reads
        .iter()
        .filter_map(|&(slot, _)| node.inputs[slot])
        .filter(|&v| only_here(v))
        .collect();
    dying.sort();
    dying.dedup();
    let out = node.outputs[0];
    let readers = cons.get(&out).map(Vec::as_slice).unwrap_or(&[]);
    let inverse = readers
        .iter()
        .filter(|r| {
            let r = g.node(**r);
            !outputs.contains(&r.outputs[0])
                && perm_of(g, r).is_some_and(|p| p.iter().enumerate().all(|(k, &a)| s.perm[a] == k))
        })
        .count();
    let new_dies = !outputs.contains(&out) && !readers.is_empty() && inverse == readers.len();
    dying.len() as i64 + inverse as i64 + i64::from(new_dies) - 1
}

/// Applies a sink: the op reads the untransposed values and writes a new value; a new
/// transpose turns that into the op's old output value.
fn apply_sink(g: &mut Graph, s: Sink, names: &mut Names) -> Result<()> {
    let name = g.nodes[s.node].name.clone();
    let out = g.nodes[s.node].outputs[0];
    let (_, x0) = *s
        .reads
        .first()
        .ok_or_else(|| PassError::Internal(format!("sinking through `{name}` reads nothing")))?;
    let ty = TensorType::new(g.ty(out)?.dtype, g.ty(x0)?.shape.clone());
    let inner = g.add_value(&names.value(&format!("{name}/nhwc")), Some(ty));
    let n = &mut g.nodes[s.node];
    for &(slot, x) in &s.reads {
        n.inputs[slot] = Some(x);
    }
    n.outputs[0] = inner;
    let node = transpose_node(names.node(&format!("{name}/nhwc_out")), inner, out, &s.perm);
    g.nodes.push(node);
    Ok(())
}

// ---- pools ------------------------------------------------------------------------------

/// The attributes a windowed pool may carry to run channels-last (the ones whose
/// meaning per spatial dim [`pool_attrs_5d`] extends with the unit window over C).
const POOL_ATTRS: &[&str] = &[
    "auto_pad",
    "ceil_mode",
    "count_include_pad",
    "dilations",
    "kernel_shape",
    "pads",
    "storage_order",
    "strides",
];

/// Sinks the first `Transpose(to NCHW)` that a MaxPool or AveragePool reads below the
/// pool, which then runs channels-last, when that adds no transpose to the graph.
fn sink_pool(g: &mut Graph, names: &mut Names) -> Result<bool> {
    let prod = g.producers();
    let cons = g.consumers();
    let outputs: HashSet<ValueId> = g.outputs.iter().copied().collect();
    for i in 0..g.nodes.len() {
        let Some((x, attrs)) = pool_plan(g, i, &prod) else {
            continue;
        };
        let s = Sink {
            node: i,
            perm: TO_NCHW.to_vec(),
            reads: vec![(0, x)],
        };
        if sink_gain(g, &s, &cons, &outputs) >= 0 {
            apply_pool(g, i, x, attrs, names)?;
            return Ok(true);
        }
    }
    Ok(false)
}

/// For a one-output 2-D MaxPool or AveragePool reading `Transpose(to NCHW)(x)` of a
/// static NHWC `x`: `x` and the pool's attributes for the `[N, 1, H, W, C]` view.
fn pool_plan(
    g: &Graph,
    i: usize,
    prod: &HashMap<ValueId, (NodeId, usize)>,
) -> Option<(ValueId, Attrs)> {
    let n = &g.nodes[i];
    if !matches!(n.op, Op::Nn(NnOp::MaxPool | NnOp::AveragePool)) || n.outputs.len() != 1 {
        return None;
    }
    if n.attrs.0.keys().any(|k| !POOL_ATTRS.contains(&k.as_str())) {
        return None;
    }
    let (x, p) = transposed(g, prod, n.inputs.first().copied().flatten()?)?;
    let static4 = |v: ValueId| {
        g.value(v)
            .ty
            .as_ref()
            .and_then(|t| gopt_ir::dim::concrete(&t.shape))
            .is_some_and(|s| s.len() == 4)
    };
    if p != TO_NCHW || !static4(x) || !static4(n.outputs[0]) {
        return None;
    }
    Some((x, pool_attrs_5d(&n.attrs)?))
}

/// A 2-D pool's attributes extended with a third spatial dim of window 1, stride 1,
/// dilation 1 and no padding (kernel_shape must be there, with two entries, as must
/// every other list present).
fn pool_attrs_5d(a: &Attrs) -> Option<Attrs> {
    let mut out = a.clone();
    let kernel = a.ints("kernel_shape").ok()??;
    if kernel.len() != 2 {
        return None;
    }
    out.set("kernel_shape", Attr::Ints(vec![kernel[0], kernel[1], 1]));
    for name in ["strides", "dilations"] {
        match a.ints(name).ok()? {
            None => {}
            Some(v) if v.len() == 2 => out.set(name, Attr::Ints(vec![v[0], v[1], 1])),
            Some(_) => return None,
        }
    }
    match a.ints("pads").ok()? {
        None => {}
        Some(p) if p.len() == 4 => out.set("pads", Attr::Ints(vec![p[0], p[1], 0, p[2], p[3], 0])),
        Some(_) => return None,
    }
    Some(out)
}

/// Makes pool `i` read NHWC `x`: `Reshape(x, [N, 1, H, W, C])`, the pool with `attrs`,
/// `Reshape(.., [N, OH, OW, C])`, and a transpose back to the old (NCHW) output value.
fn apply_pool(g: &mut Graph, i: usize, x: ValueId, attrs: Attrs, names: &mut Names) -> Result<()> {
    let name = g.nodes[i].name.clone();
    let y = g.nodes[i].outputs[0];
    let xt = g.ty(x)?.clone();
    let yt = permuted(g.ty(y)?, &TO_NHWC);
    let five = |t: &TensorType| {
        let mut s = t.shape.clone();
        s.insert(1, Dim::Known(1));
        TensorType::new(t.dtype, s)
    };
    let x5 = reshape_into(g, x, &five(&xt), &format!("{name}/nhwc_in"), names)?;
    let y5 = g.add_value(&names.value(&format!("{name}/nhwc5")), Some(five(&yt)));
    let n = &mut g.nodes[i];
    n.inputs[0] = Some(x5);
    n.outputs[0] = y5;
    n.attrs = attrs;
    let y4 = reshape_into(g, y5, &yt, &format!("{name}/nhwc"), names)?;
    let node = transpose_node(names.node(&format!("{name}/nhwc_out")), y4, y, &TO_NCHW);
    g.nodes.push(node);
    Ok(())
}

/// Adds `Reshape(x, shape of ty)` as a new value named `name` of type `ty`; returns it.
fn reshape_into(
    g: &mut Graph,
    x: ValueId,
    ty: &TensorType,
    name: &str,
    names: &mut Names,
) -> Result<ValueId> {
    let dims = gopt_ir::dim::concrete(&ty.shape)
        .ok_or_else(|| PassError::Internal(format!("`{name}`: a symbolic shape")))?;
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let shape = g.add_const(
        &names.value(&format!("{name}/shape")),
        Tensor::from_i64s(&dims),
    );
    let out = g.add_value(&names.value(name), Some(ty.clone()));
    g.nodes.push(Node {
        name: names.node(name),
        op: Op::Shape(ShapeOp::Reshape),
        attrs: Attrs::default(),
        inputs: vec![Some(x), Some(shape)],
        outputs: vec![out],
    });
    Ok(out)
}

/// Fresh, deterministic value and node names: `base`, else `base.1`, `base.2`, ...
struct Names {
    values: HashSet<String>,
    nodes: HashSet<String>,
}

impl Names {
    fn of(g: &Graph) -> Names {
        Names {
            values: g.values.iter().map(|v| v.name.clone()).collect(),
            nodes: g.nodes.iter().map(|n| n.name.clone()).collect(),
        }
    }

    fn value(&mut self, base: &str) -> String {
        Names::fresh(&mut self.values, base)
    }

    fn node(&mut self, base: &str) -> String {
        Names::fresh(&mut self.nodes, base)
    }

    fn fresh(taken: &mut HashSet<String>, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 0;
        while taken.contains(&name) {
            k += 1;
            name = format!("{base}.{k}");
        }
        taken.insert(name.clone());
        name
    }
}
