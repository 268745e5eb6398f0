//! Shape buckets. Each symbolic dim gets a set of sizes (by default the powers of two up
//! to a cap); the model is specialized and optimized once per combination, and a run
//! pads its inputs up to the smallest bucket that holds them and slices the outputs back.
//! Padding is only allowed where it cannot change the real elements' results:
//!
//! - the batch dim (named `batch`, `N` or `batch_size`, or the leading dim of every
//!   input) is always paddable: rows of a batch never mix in inference graphs;
//! - any other dim (a sequence) is paddable only when the model takes an attention mask
//!   over it (an input whose name contains `mask` with that dim), which the run fills with
//!   zeros over the padding so attention ignores it. Otherwise its buckets must match the
//!   run's size exactly, and a run with another size is refused with this reason.
//!
//! Default sizes respect the limits a model states: a symbol that slices a constant
//! (a position-id table sliced to the sequence length) or ranges over a constant's
//! rows cannot exceed that constant's extent, so its defaults stop there ([`bounds`]).

use crate::{PassError, Result};
use gopt_ir::ops::ShapeOp;
use gopt_ir::{Dim, Graph, Op};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Default largest bucket for a batch dim.
pub const BATCH_CAP: u64 = 32;
/// Default largest bucket for any other dim.
pub const SEQ_CAP: u64 = 512;
/// Default smallest bucket for a non-batch dim.
pub const SEQ_MIN: u64 = 32;

/// The bucket plan of a model.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Plan {
    /// Sizes per symbol, ascending.
    pub sizes: BTreeMap<String, Vec<u64>>,
    /// Per symbol: `None` when padding is exact, or why it is not.
    pub padding: BTreeMap<String, Option<String>>,
    /// Symbols whose sizes were asked for (`--buckets`); the others have defaults.
    pub given: BTreeSet<String>,
    /// Per defaulted symbol: the limit the model states, and where, when it cut the
    /// defaults short.
    pub bounds: BTreeMap<String, (u64, String)>,
}

/// Symbols of the graph inputs' dims, in first-seen order.
pub fn symbols(g: &Graph) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for &v in &g.inputs {
        if let Some(t) = &g.value(v).ty {
            for d in t.shape.iter() {
                let mut s = Vec::new();
                d.symbols(&mut s);
                for s in s {
                    if !out.iter().any(|o| o.as_str() == &*s) {
                        out.push(s.to_string());
                    }
                }
            }
        }
    }
    out
}

fn is_batch(g: &Graph, sym: &str) -> bool {
    if matches!(sym, "batch" | "batch_size" | "N" | "n" | "B") {
        return true;
    }
    !g.inputs.is_empty()
        && g.inputs.iter().all(|&v| {
            g.value(v)
                .ty
                .as_ref()
                .and_then(|t| t.shape.first())
                .is_some_and(|d| *d == Dim::sym(sym))
        })
}

fn has_mask_over(g: &Graph, sym: &str) -> bool {
    g.inputs.iter().any(|&v| {
        let val = g.value(v);
        val.name.to_lowercase().contains("mask")
            && val
                .ty
                .as_ref()
                .is_some_and(|t| t.shape.iter().any(|d| *d == Dim::sym(sym)))
    })
}

/// Powers of two from `lo` to `cap`.
pub fn powers(lo: u64, cap: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut x = lo.max(1);
    while x <= cap {
        v.push(x);
        x *= 2;
    }
    v
}

/// Parses `name=1,2,4` overrides.
pub fn parse_override(s: &str) -> Result<(String, Vec<u64>)> {
    let (name, list) = s
        .split_once('=')
        .ok_or_else(|| PassError::Option(format!("--buckets {s}: expected NAME=SIZE,SIZE,...")))?;
    let mut sizes = list
        .split(',')
        .map(|x| x.trim().parse::<u64>().ok().filter(|&v| v > 0))
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| {
            PassError::Option(format!("--buckets {s}: sizes must be positive integers"))
        })?;
    sizes.sort_unstable();
    sizes.dedup();
    Ok((name.to_string(), sizes))
}

/// The bucket plan: overrides where given, defaults otherwise.
pub fn plan(g: &Graph, overrides: &[(String, Vec<u64>)]) -> Result<Plan> {
    let syms = symbols(g);
    for (name, _) in overrides {
        if !syms.contains(name) {
            return Err(PassError::Option(format!(
                "--buckets {name}: the model has no symbolic dim `{name}` (its symbols: {})",
                if syms.is_empty() {
                    "none".into()
                } else {
                    syms.join(", ")
                }
            )));
        }
    }
    let mut sizes = BTreeMap::new();
    let mut padding = BTreeMap::new();
    let mut given_syms = BTreeSet::new();
    let mut cut = BTreeMap::new();
    let limits = bounds(g);
    for s in syms {
        let batch = is_batch(g, &s);
        let given = overrides
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, v)| v.clone());
        let list = match given {
            Some(v) => {
                given_syms.insert(s.clone());
                v
            }
            None => {
                let (lo, cap) = if batch {
                    (1, BATCH_CAP)
                } else {
                    (SEQ_MIN, SEQ_CAP)
                };
                match limits.get(&s) {
                    Some((limit, why)) if *limit < cap => {
                        cut.insert(s.clone(), (*limit, why.clone()));
                        let mut v = powers(lo.min(*limit), *limit);
                        // The limit itself is a bucket: runs at the model's longest
                        // size need one.
                        if v.last() != Some(limit) {
                            v.push(*limit);
                        }
                        v
                    }
                    _ => powers(lo, cap),
                }
            }
        };
        sizes.insert(s.clone(), list);
        let why = if batch || has_mask_over(g, &s) {
            None
        } else {
            Some(format!(
                "padding `{s}` could change results: no attention-mask input covers it, so a run must match a bucket size exactly"
            ))
        };
        padding.insert(s, why);
    }
    Ok(Plan {
        sizes,
        padding,
        given: given_syms,
        bounds: cut,
    })
}

/// The largest size each symbol can take that the model states, with where it states
/// it: a `Slice` of a constant that ends at the symbol (exporters slice a position-id
/// table to the sequence length) cannot reach past the constant's extent on that axis,
/// and a `Range` up to the symbol that indexes the rows of a constant (`Gather`) cannot
/// have more than its rows. The smallest limit of a symbol wins.
pub fn bounds(g: &Graph) -> BTreeMap<String, (u64, String)> {
    let mut out: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let producers = g.producers();
    let ints =
        |v: Option<gopt_ir::ValueId>| v.and_then(|v| g.small_constant(v)).map(|t| t.to_i64_vec());
    for n in &g.nodes {
        let Op::Shape(op) = n.op else { continue };
        let input = |i: usize| n.inputs.get(i).copied().flatten();
        let Some(table) = input(0).and_then(|v| g.konst(v)) else {
            continue;
        };
        let table_name = input(0)
            .map(|v| g.value(v).name.clone())
            .unwrap_or_default();
        // (symbol, axis of the constant, first index taken)
        let mut found: Vec<(String, usize, i64)> = Vec::new();
        match op {
            ShapeOp::Slice => {
                let (Some(starts), Some(ends)) = (ints(input(1)), input(2)) else {
                    continue;
                };
                let axes = match input(3) {
                    None => Some((0..starts.len() as i64).collect::<Vec<_>>()),
                    Some(v) => ints(Some(v)),
                };
                let steps_ok = input(4)
                    .is_none_or(|v| ints(Some(v)).is_some_and(|s| s.iter().all(|&k| k == 1)));
                let Some(axes) = axes.filter(|a| a.len() == starts.len() && steps_ok) else {
                    continue;
                };
                let ends = symbols_of(g, &producers, ends);
                for (k, (&axis, &start)) in axes.iter().zip(&starts).enumerate() {
                    let rank = table.shape().len() as i64;
                    let axis = if axis < 0 { axis + rank } else { axis };
                    if let (Some(Some(sym)), Ok(axis)) = (ends.get(k), usize::try_from(axis)) {
                        found.push((sym.clone(), axis, start));
                    }
                }
            }
            ShapeOp::Gather => {
                let axis = n.attrs.int_or("axis", 0).unwrap_or(0);
                let rank = table.shape().len() as i64;
                let axis = if axis < 0 { axis + rank } else { axis };
                let Some(idx) = input(1) else { continue };
                let Some(&(p, _)) = producers.get(&idx) else {
                    continue;
                };
                let range = g.node(p);
                if range.op != Op::Shape(ShapeOp::Range) {
                    continue;
                }
                let at = |i: usize| range.inputs.get(i).copied().flatten();
                let (Some(start), Some(step)) = (ints(at(0)), ints(at(2))) else {
                    continue;
                };
                let (Some(&start), Some(1)) = (start.first(), step.first().copied()) else {
                    continue;
                };
                let limit = at(1).map(|v| symbols_of(g, &producers, v));
                if let (Some([Some(sym)]), Ok(axis)) = (limit.as_deref(), usize::try_from(axis)) {
                    found.push((sym.clone(), axis, start));
                }
            }
            _ => continue,
        }
        for (sym, axis, start) in found {
            let Some(&len) = table.shape().get(axis) else {
                continue;
            };
            let Some(limit) = u64::try_from(len as i64 - start.max(0))
                .ok()
                .filter(|&l| l > 0)
            else {
                continue;
            };
            if out.get(&sym).is_some_and(|(l, _)| *l <= limit) {
                continue;
            }
            let why = format!(
                "`{table_name}` has {len} entries on axis {axis} and node `{}` ({}) takes `{sym}` of them",
                n.name,
                n.op.name()
            );
            out.insert(sym, (limit, why));
        }
    }
    out
}

/// The symbol each element of a small integer value is, when it is read straight off
/// an input's shape (`Shape -> Gather -> Unsqueeze/Concat/Cast`), the way exporters
/// compute sequence lengths.
fn symbols_of(
    g: &Graph,
    producers: &std::collections::HashMap<gopt_ir::ValueId, (gopt_ir::NodeId, usize)>,
    v: gopt_ir::ValueId,
) -> Vec<Option<String>> {
    let mut v = v;
    for _ in 0..16 {
        let Some(&(p, _)) = producers.get(&v) else {
            return Vec::new();
        };
        let n = g.node(p);
        let first = n.inputs.first().copied().flatten();
        match n.op {
            Op::Shape(
                ShapeOp::Unsqueeze | ShapeOp::Squeeze | ShapeOp::Reshape | ShapeOp::Identity,
            )
            | Op::Elementwise(gopt_ir::ops::ElementwiseOp::Cast) => match first {
                Some(f) => v = f,
                None => return Vec::new(),
            },
            Op::Shape(ShapeOp::Concat) => {
                return n
                    .inputs
                    .iter()
                    .flat_map(|i| match i {
                        Some(i) if g.konst(*i).is_some() => {
                            vec![None; g.constant(*i).map_or(0, |t| t.to_i64_vec().len())]
                        }
                        Some(i) => {
                            let s = symbols_of(g, producers, *i);
                            if s.len() == 1 {
                                s
                            } else {
                                vec![None]
                            }
                        }
                        None => vec![None],
                    })
                    .collect()
            }
            Op::Shape(ShapeOp::Gather) => {
                let (Some(shape_v), Some(idx)) = (first, n.inputs.get(1).copied().flatten()) else {
                    return Vec::new();
                };
                let Some(&(sp, _)) = producers.get(&shape_v) else {
                    return Vec::new();
                };
                let shape_node = g.node(sp);
                if shape_node.op != Op::Shape(ShapeOp::Shape) {
                    return Vec::new();
                }
                let Some(x) = shape_node.inputs.first().copied().flatten() else {
                    return Vec::new();
                };
                let Some(dims) = g.value(x).ty.as_ref().map(|t| t.shape.to_vec()) else {
                    return Vec::new();
                };
                let offset = shape_node.attrs.int_or("start", 0).unwrap_or(0);
                let rank = dims.len() as i64;
                let offset = if offset < 0 { offset + rank } else { offset };
                let Some(idx) = g.constant(idx).map(|t| t.to_i64_vec()) else {
                    return Vec::new();
                };
                return idx
                    .iter()
                    .map(|&i| {
                        let i = if i < 0 { i + rank - offset } else { i } + offset;
                        usize::try_from(i)
                            .ok()
                            .and_then(|i| dims.get(i))
                            .and_then(|d| match d {
                                Dim::Sym(s) => Some(s.to_string()),
                                Dim::Known(_) | Dim::Add(..) | Dim::Mul(..) | Dim::Div(..) => None,
                            })
                    })
                    .collect();
            }
            _ => return Vec::new(),
        }
    }
    Vec::new()
}

impl Plan {
    /// The bucket for actual sizes: per symbol the smallest size that holds it (or the
    /// exact size where padding is not allowed). Errors say which symbol and why.
    pub fn choose(&self, actual: &BTreeMap<String, u64>) -> Result<BTreeMap<String, u64>> {
        let mut out = BTreeMap::new();
        for (s, sizes) in &self.sizes {
            let a = *actual
                .get(s)
                .ok_or_else(|| PassError::Option(format!("no size given for `{s}`")))?;
            let pick = match &self.padding[s] {
                None => sizes.iter().copied().find(|&b| b >= a),
                Some(_) => sizes.iter().copied().find(|&b| b == a),
            };
            let b = pick.ok_or_else(|| {
                let reason = self.padding[s].clone().unwrap_or_else(|| {
                    format!(
                        "the largest bucket is {}",
                        sizes.last().copied().unwrap_or(0)
                    )
                });
                PassError::Option(format!(
                    "`{s}` = {a} fits no bucket of {:?}: {reason}",
                    sizes
                ))
            })?;
            out.insert(s.clone(), b);
        }
        Ok(out)
    }

    /// Every combination of sizes, in lexicographic order of the symbols.
    pub fn combinations(&self) -> Vec<BTreeMap<String, u64>> {
        let mut out = vec![BTreeMap::new()];
        for (s, sizes) in &self.sizes {
            let mut next = Vec::new();
            for c in &out {
                for &v in sizes {
                    let mut c2 = c.clone();
                    c2.insert(s.clone(), v);
                    next.push(c2);
                }
            }
            out = next;
        }
        out
    }
}
