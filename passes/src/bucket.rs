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

use crate::{PassError, Result};
use gopt_ir::{Dim, Graph};
use serde::Serialize;
use std::collections::BTreeMap;

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
    for s in syms {
        let batch = is_batch(g, &s);
        let given = overrides
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, v)| v.clone());
        sizes.insert(
            s.clone(),
            given.unwrap_or_else(|| {
                if batch {
                    powers(1, BATCH_CAP)
                } else {
                    powers(SEQ_MIN, SEQ_CAP)
                }
            }),
        );
        let why = if batch || has_mask_over(g, &s) {
            None
        } else {
            Some(format!(
                "padding `{s}` could change results: no attention-mask input covers it, so a run must match a bucket size exactly"
            ))
        };
        padding.insert(s, why);
    }
    Ok(Plan { sizes, padding })
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
