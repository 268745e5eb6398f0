//! Element-wise grouping, after extraction: a chain or tree of element-wise ops whose
//! intermediate values each have exactly one consumer becomes one `FusedElementwise`
//! node whose body is the sub-graph (one kernel, one pass over memory). This is a
//! deterministic pass rather than rewrite rules, as Inductor's scheduler does it:
//! enumerating every sub-chain in the e-graph would only grow it, and which neighbours
//! share a kernel needs no cost trade-off once each op's form is chosen. Scalar
//! constants move into the body; other constants stay inputs.

use crate::{PassError, Result};
use gopt_ir::ops::{ElementwiseOp, FusedOp, ShapeOp};
use gopt_ir::{Attr, Attrs, Graph, Node, Op, ValueId};
use std::collections::{HashMap, HashSet};

fn groupable(n: &Node) -> bool {
    matches!(n.op, Op::Elementwise(_)) && n.op.is_deterministic() && n.outputs.len() == 1
}

/// Whether `op` keeps its input's elements in order under another shape.
fn is_view_op(op: Op) -> bool {
    matches!(
        op,
        Op::Shape(
            ShapeOp::Reshape
                | ShapeOp::Squeeze
                | ShapeOp::Unsqueeze
                | ShapeOp::Flatten
                | ShapeOp::Identity
        )
    )
}

/// Moves each Cast that reads a view (a reshape) of an element-wise result above the
/// view, so that it joins the element-wise group: `Cast(Reshape(e))` becomes
/// `Reshape(Cast(e))`, exact since a cast rounds each element alone and a view keeps
/// them in order. Only where the element-wise result and the view are each read once
/// (by the view and the Cast) and neither is a graph output. Extraction cannot choose
/// the side on its own: a Cast costs its write on either side of a free view.
fn casts_before_views(g: &mut Graph) -> Result<usize> {
    let producers = g.producers();
    let consumers = g.consumers();
    let single = |v: ValueId| consumers.get(&v).is_some_and(|c| c.len() == 1);
    let mut moves = Vec::new();
    for (ci, c) in g.nodes.iter().enumerate() {
        if c.op != Op::Elementwise(ElementwiseOp::Cast) {
            continue;
        }
        let Some(Some(v)) = c.inputs.first().copied() else {
            continue;
        };
        let Some(&(r, _)) = producers.get(&v) else {
            continue;
        };
        let view = &g.nodes[r.index()];
        let Some(Some(u)) = view.inputs.first().copied() else {
            continue;
        };
        let elementwise = producers
            .get(&u)
            .is_some_and(|&(p, _)| groupable(&g.nodes[p.index()]));
        let hidden = !g.outputs.contains(&u) && !g.outputs.contains(&v);
        let once = single(u) && single(v);
        if is_view_op(view.op) && view.outputs.len() == 1 && elementwise && hidden && once {
            moves.push((ci, r.index(), u));
        }
    }
    for &(ci, ri, u) in &moves {
        let to = g.ty(g.nodes[ci].outputs[0])?.dtype;
        let ty = gopt_ir::TensorType::new(to, g.ty(u)?.shape.clone());
        let name = format!("{}/before_view", g.value(g.nodes[ci].outputs[0]).name);
        let cast_out = g.add_value(&name, Some(ty));
        let y = g.nodes[ci].outputs[0];
        g.nodes[ci].inputs[0] = Some(u);
        g.nodes[ci].outputs[0] = cast_out;
        g.nodes[ri].inputs[0] = Some(cast_out);
        g.nodes[ri].outputs[0] = y;
    }
    if !moves.is_empty() {
        g.sort_nodes()?;
        g.prune();
    }
    Ok(moves.len())
}

/// Groups element-wise neighbours; returns how many fused nodes were made.
pub fn fuse_elementwise(g: &mut Graph) -> Result<usize> {
    g.sort_nodes()?;
    casts_before_views(g)?;
    let producers = g.producers();
    let consumers = g.consumers();
    let outputs: HashSet<ValueId> = g.outputs.iter().copied().collect();
    let mut group: Vec<Option<usize>> = vec![None; g.nodes.len()];
    let mut next = 0usize;
    for i in 0..g.nodes.len() {
        if !groupable(&g.nodes[i]) {
            continue;
        }
        let mut gid: Option<usize> = None;
        let ins: Vec<ValueId> = g.nodes[i].inputs.iter().flatten().copied().collect();
        for v in ins {
            let Some(&(p, _)) = producers.get(&v) else {
                continue;
            };
            let Some(pg) = group[p.index()] else { continue };
            let cons: HashSet<usize> = consumers
                .get(&v)
                .map(|c| c.iter().map(|n| n.index()).collect())
                .unwrap_or_default();
            if cons.len() != 1 || outputs.contains(&v) {
                continue;
            }
            match gid {
                None => gid = Some(pg),
                Some(k) if k != pg => {
                    for x in group.iter_mut() {
                        if *x == Some(pg) {
                            *x = Some(k);
                        }
                    }
                }
                Some(_) => {}
            }
        }
        group[i] = Some(gid.unwrap_or_else(|| {
            next += 1;
            next - 1
        }));
    }
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, gi) in group.iter().enumerate() {
        if let Some(k) = gi {
            members.entry(*k).or_default().push(i);
        }
    }
    let mut keys: Vec<usize> = members
        .iter()
        .filter(|(_, m)| m.len() >= 2)
        .map(|(k, _)| *k)
        .collect();
    keys.sort_by_key(|k| members[k][0]);
    let mut remove: HashSet<usize> = HashSet::new();
    let mut made = Vec::new();
    for k in keys {
        let m = &members[&k];
        if let Some(node) = build(g, m, made.len())? {
            remove.extend(m.iter().copied());
            made.push(node);
        }
    }
    let count = made.len();
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes
        .into_iter()
        .enumerate()
        .filter_map(|(i, n)| (!remove.contains(&i)).then_some(n))
        .chain(made)
        .collect();
    g.sort_nodes()?;
    Ok(count)
}

/// The fused node for one group (members in topological order; the last is the root).
fn build(g: &Graph, m: &[usize], k: usize) -> Result<Option<Node>> {
    let root = &g.nodes[*m
        .last()
        .ok_or_else(|| PassError::Internal("empty group".into()))?];
    let root_out = root.outputs[0];
    let produced: HashSet<ValueId> = m.iter().map(|&i| g.nodes[i].outputs[0]).collect();
    let mut externals: Vec<ValueId> = Vec::new();
    for &i in m {
        for v in g.nodes[i].inputs.iter().flatten() {
            if !produced.contains(v) && !externals.contains(v) {
                externals.push(*v);
            }
        }
    }
    let out_ty = g.ty(root_out)?.clone();
    for inline_scalars in [true, false] {
        let is_inline = |v: &ValueId| inline_scalars && g.konst(*v).is_some_and(|t| t.len() == 1);
        let inputs: Vec<ValueId> = externals
            .iter()
            .copied()
            .filter(|v| !is_inline(v))
            .collect();
        if inputs.is_empty() || !broadcasts_to(g, &inputs, &out_ty.shape)? {
            continue;
        }
        let mut body = Graph::new(&format!("{}/body", root.name));
        let mut map: HashMap<ValueId, ValueId> = HashMap::new();
        for v in &externals {
            let val = g.value(*v);
            let nv = if is_inline(v) {
                let t = g
                    .konst(*v)
                    .cloned()
                    .ok_or_else(|| PassError::Internal("lost constant".into()))?;
                body.add_const(&val.name, t)
            } else {
                body.add_input(&val.name, g.ty(*v)?.clone())
            };
            map.insert(*v, nv);
        }
        for &i in m {
            let n = &g.nodes[i];
            let ins = n.inputs.iter().map(|x| x.map(|v| map[&v])).collect();
            let name = &g.value(n.outputs[0]).name;
            let id = body.add_node(&n.name, n.op, n.attrs.clone(), ins, &[name]);
            let out = body.nodes[id.index()].outputs[0];
            body.values[out.index()].ty = g.value(n.outputs[0]).ty.clone();
            map.insert(n.outputs[0], out);
        }
        body.outputs = vec![map[&root_out]];
        let mut attrs = Attrs::default();
        attrs.set("body", Attr::Graph(Box::new(body)));
        return Ok(Some(Node {
            name: format!("{}/fused{k}", root.name),
            op: Op::Fused(FusedOp::FusedElementwise),
            attrs,
            inputs: inputs.into_iter().map(Some).collect(),
            outputs: vec![root_out],
        }));
    }
    Ok(None)
}

/// True when the inputs' shapes broadcast to exactly `out` (so the fused node's
/// inferred shape is the root's).
fn broadcasts_to(g: &Graph, inputs: &[ValueId], out: &[gopt_ir::Dim]) -> Result<bool> {
    let mut acc: Vec<gopt_ir::Dim> = Vec::new();
    for v in inputs {
        let s = &g.ty(*v)?.shape;
        let n = acc.len().max(s.len());
        let mut next = Vec::with_capacity(n);
        for i in 0..n {
            let a = (i + acc.len() >= n).then(|| acc[i + acc.len() - n].clone());
            let b = (i + s.len() >= n).then(|| s[i + s.len() - n].clone());
            let d = match (a, b) {
                (Some(a), Some(b)) if a == b => a,
                (Some(a), Some(b)) if a.known() == Some(1) => b,
                (Some(a), Some(b)) if b.known() == Some(1) => a,
                (Some(_), Some(_)) => return Ok(false),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => return Ok(false),
            };
            next.push(d);
        }
        acc = next;
    }
    Ok(acc.as_slice() == out)
}

#[cfg(test)]
mod tests {
    use super::fuse_elementwise;
    use gopt_ir::{interp, text, verify, Op, Tensor};

    /// Rotary math written per head, then its heads merged back and cast: the Cast moves
    /// above the reshape and joins the element-wise kernel; the numbers do not change.
    #[test]
    fn a_cast_after_a_reshape_joins_the_group() {
        let src = r#"graph "g"(%0 "q": f32[2,4,8], %1 "c": f32[1,4,8]) -> (%5) {
  %2 "m": f32[2,4,8] = Mul "m"(%0, %1)
  %3 "s": i64[2] = const [2, 32]
  %4 "r": f32[2,32] = Reshape "r"(%2, %3)
  %5 "y": bf16[2,32] = Cast "y"(%4) {to=dtype bf16}
}"#;
        let g = verify(text::parse(src).expect("parses")).expect("verifies");
        let mut out = g.clone().into_inner();
        assert_eq!(fuse_elementwise(&mut out).expect("groups"), 1);
        let out = verify(out).expect("verifies");
        let ops: Vec<&str> = out.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(
            ops,
            ["FusedElementwise", "Reshape"],
            "{}",
            text::print(&out)
        );
        let fused = &out.nodes[0];
        let body = fused.attrs.graph("body").expect("a body");
        let cast = Op::Elementwise(gopt_ir::ops::ElementwiseOp::Cast);
        assert!(body.nodes.iter().any(|n| n.op == cast));
        let x: Vec<f64> = (0..64).map(|i| (i as f64 - 30.0) * 0.37).collect();
        let c: Vec<f64> = (0..32).map(|i| 1.0 + i as f64 / 7.0).collect();
        let ins = [
            Tensor::from_f64s(gopt_ir::DType::F32, &[2, 4, 8], &x).expect("q"),
            Tensor::from_f64s(gopt_ir::DType::F32, &[1, 4, 8], &c).expect("c"),
        ];
        let want = interp::run(&g, &ins).expect("runs");
        let got = interp::run(&out, &ins).expect("runs");
        assert_eq!(want[0].to_f64_vec(), got[0].to_f64_vec());
        // A reshape that is also a graph output keeps its Cast after it.
        let twice = src.replace("-> (%5)", "-> (%5, %4)");
        let mut out = verify(text::parse(&twice).expect("parses"))
            .expect("verifies")
            .into_inner();
        fuse_elementwise(&mut out).expect("groups");
        assert!(
            out.nodes.iter().any(|n| n.op.name() == "Cast"),
            "{}",
            text::print(&out)
        );
    }
}
