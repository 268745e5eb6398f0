//! TopK, read once for every backend: the axis (`axis`, default -1), `largest`, and the
//! input's dims around the axis (`lanes` lanes of `d` elements `inner` apart), with `k`
//! read from the outputs' static shape (the `K` input is a constant once shapes are
//! specialized). The writers rank each element of a lane by counting the elements that
//! come before it in the reference's order — larger first (smaller first with
//! `largest` = 0), NaN above every number, equal values by the lower index (the
//! interpreter's stable sort) — and store the ones ranked below `k` at their rank: the
//! output is always sorted, which `sorted` = 0 allows.

use super::support::{input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// A TopK node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct TopKSpec {
    /// The node.
    pub site: Site,
    /// The data.
    pub x: ValueId,
    /// The values output (the data's dtype).
    pub values: ValueId,
    /// The indices output (i64).
    pub indices: ValueId,
    /// The data's dtype.
    pub dtype: DType,
    /// The axis' length in the data.
    pub d: usize,
    /// The axis' length in the outputs (`k`, at most `d`).
    pub k: usize,
    /// Elements between neighbours along the axis (the dims after it, at least 1).
    pub inner: usize,
    /// Lanes along the axis: the data's elements over `d`.
    pub lanes: usize,
    /// The largest elements are kept (else the smallest).
    pub largest: bool,
}

impl TopKSpec {
    /// Data elements (one thread each).
    pub fn n(&self) -> usize {
        self.lanes * self.d
    }

    /// The reference order's comparison `better(a, b)`, "a comes before b", given
    /// `gt(a, b)` (a > b) and `nan(v)` (whether v is NaN) as expressions.
    pub fn before(
        &self,
        gt: impl Fn(&str, &str) -> String,
        nan: impl Fn(&str) -> String,
    ) -> String {
        let (hi, lo) = if self.largest { ("a", "b") } else { ("b", "a") };
        // NaN is the largest value: before everything when largest, after when not.
        format!(
            "(({nan_hi} && !{nan_lo}) || (!{nan_hi} && !{nan_lo} && {gt}))",
            nan_hi = nan(hi),
            nan_lo = nan(lo),
            gt = gt(hi, lo)
        )
    }
}

/// Reads TopK node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<TopKSpec> {
    let x = input(node, 0)?;
    let values = output(node, 0)?;
    let indices = output(node, 1)?;
    let (dtype, shape) = typed(g, node, x)?;
    let (vdt, vs) = typed(g, node, values)?;
    let (idt, is) = typed(g, node, indices)?;
    if dtype == DType::Bool {
        return Err(unsupported(node, "bool data"));
    }
    if vdt != dtype || idt != DType::I64 || vs != is || vs.len() != shape.len() {
        return Err(plan(format!(
            "{}: TopK outputs do not match its data",
            node.name
        )));
    }
    let axis =
        gopt_ir::ops::util::norm_axis(node.attrs.int_or("axis", -1).map_err(plan)?, shape.len())
            .map_err(plan)?;
    let largest = node.attrs.int_or("largest", 1).map_err(plan)? != 0;
    let (d, k) = (shape[axis], vs[axis]);
    if k > d {
        return Err(plan(format!(
            "{}: TopK's k = {k} exceeds the axis ({d})",
            node.name
        )));
    }
    if d == 0 || k == 0 || vs.contains(&0) {
        return Err(unsupported(node, "an empty output"));
    }
    Ok(TopKSpec {
        site: Site::of(node),
        x,
        values,
        indices,
        dtype,
        d,
        k,
        inner: shape[axis + 1..].iter().product::<usize>().max(1),
        lanes: shape.iter().product::<usize>() / d,
        largest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(largest: bool) -> TopKSpec {
        TopKSpec {
            site: Site {
                node: "t".into(),
                op: "TopK",
                inputs: vec![Some(0)],
                outputs: vec![1, 2],
            },
            x: ValueId(0),
            values: ValueId(1),
            indices: ValueId(2),
            dtype: DType::F32,
            d: 4,
            k: 2,
            inner: 1,
            lanes: 1,
            largest,
        }
    }

    #[test]
    fn order_puts_nan_first_when_largest_and_last_when_smallest() {
        let gt = |a: &str, b: &str| format!("{a}>{b}");
        let nan = |v: &str| format!("N({v})");
        assert_eq!(
            sp(true).before(gt, nan),
            "((N(a) && !N(b)) || (!N(a) && !N(b) && a>b))"
        );
        assert_eq!(
            sp(false).before(gt, nan),
            "((N(b) && !N(a)) || (!N(b) && !N(a) && b>a))"
        );
    }
}
