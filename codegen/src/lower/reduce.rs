//! The shape of a reduction, read once for every backend: which axes it reduces
//! (`axes` as an attribute or a constant input, `noop_with_empty_axes`, the global
//! pools' spatial axes) and the input's dims merged into runs of kept and reduced dims.

use super::support::{const_input, plan, unsupported};
use crate::Result;
use gopt_ir::{Graph, Node, Op};

/// The reduced axes (sorted, unique) of `node` for an input of rank `rank`.
pub fn axes(g: &Graph, node: &Node, rank: usize) -> Result<Vec<usize>> {
    if matches!(node.op, Op::Nn(_)) {
        if rank < 2 {
            return Err(unsupported(node, "inputs of rank below 2"));
        }
        return Ok((2..rank).collect());
    }
    for k in node.attrs.0.keys() {
        if !["axes", "keepdims", "noop_with_empty_axes"].contains(&k.as_str()) {
            return Err(unsupported(node, &format!("attribute `{k}`")));
        }
    }
    let listed: Vec<i64> = match const_input(g, node, 1, "axes")? {
        Some(t) => t.to_i64_vec(),
        None => node
            .attrs
            .ints("axes")
            .map_err(plan)?
            .map(<[i64]>::to_vec)
            .unwrap_or_default(),
    };
    if listed.is_empty() {
        let noop = node.attrs.int_or("noop_with_empty_axes", 0).map_err(plan)? != 0;
        return Ok(if noop { vec![] } else { (0..rank).collect() });
    }
    let mut out = Vec::new();
    for a in listed {
        let r = rank as i64;
        if a < -r || a >= r {
            return Err(unsupported(
                node,
                &format!("axis {a} of a rank-{rank} input"),
            ));
        }
        out.push(if a < 0 { a + r } else { a } as usize);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The input's dims merged into runs of kept or reduced dims (size, reduced), size-1
/// dims dropped.
pub fn runs(xs: &[usize], axes: &[usize]) -> Vec<(usize, bool)> {
    let mut runs: Vec<(usize, bool)> = Vec::new();
    for (a, &d) in xs.iter().enumerate() {
        let red = axes.contains(&a);
        match runs.last_mut() {
            _ if d == 1 => {}
            Some((s, r)) if *r == red => *s *= d,
            _ => runs.push((d, red)),
        }
    }
    runs
}

