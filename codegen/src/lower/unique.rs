//! Unique, read once for every backend ([`unique`]), and its kernel described once
//! ([`Text`]): one block (workgroup) flags the first occurrence of every slice (no
//! earlier slice equal) in a bitmask, then ranks each slice's group by counting flagged
//! slices (sorted: the ones that compare below it; unsorted: the ones before its first
//! occurrence) and stores Y, `indices`, `inverse_indices` and `counts` at those ranks.
//! The statements are written here once; each writer supplies its syntax ([`Syntax`])
//! and the element comparison of its types, and fills its template.

use super::support::{input, output, plan, typed, unsupported, Site};
use crate::twin::Syntax;
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// Slices at most: the first-occurrence bitmask (`d` bits) must fit in shared
/// (workgroup) memory.
pub const MAX_SLICES: usize = 65536;

/// A Unique node, resolved: `x` viewed as `outer` × `d` × `inner` around the axis (or
/// flattened: `d` elements), so the unique things are the `d` slices along the axis,
/// compared lexicographically (element by element, `outer` then `inner` order).
#[derive(Clone, Debug, PartialEq)]
pub struct UniqueSpec {
    /// The node.
    pub site: Site,
    /// The data.
    pub x: ValueId,
    /// Y: the unique slices (counted along the axis, or 0).
    pub y: ValueId,
    /// `indices` (i64, counted), when the node has it.
    pub indices: Option<ValueId>,
    /// `inverse_indices` (i64, `d` of them), when the node has it.
    pub inverse: Option<ValueId>,
    /// `counts` (i64, counted), when the node has it.
    pub counts: Option<ValueId>,
    /// The data's dtype.
    pub dtype: DType,
    /// The axis, when the node has one.
    pub axis: Option<usize>,
    /// Elements before the axis.
    pub outer: usize,
    /// Slices along the axis (elements when flattened).
    pub d: usize,
    /// Elements after the axis.
    pub inner: usize,
    /// Unique slices in ascending order (else in order of first occurrence).
    pub sorted: bool,
}

impl UniqueSpec {
    /// The order of Y, for the kernels' headers.
    pub fn order(&self) -> &'static str {
        if self.sorted {
            "in ascending order"
        } else {
            "in order of first occurrence"
        }
    }

    /// How a group's rank is counted, for the kernels' headers.
    pub fn rank_what(&self) -> &'static str {
        if self.sorted {
            "the first occurrences that compare below it"
        } else {
            "the first occurrences before its own"
        }
    }
}

/// Reads Unique node `n` of `g`.
pub fn unique(g: &Graph, n: &Node) -> Result<UniqueSpec> {
    let x = input(n, 0)?;
    let (dtype, s) = typed(g, n, x)?;
    let (axis, outer, d, inner) = match n.attrs.int("axis").map_err(plan)? {
        Some(a) => {
            let a = gopt_ir::ops::util::norm_axis(a, s.len()).map_err(plan)?;
            (
                Some(a),
                s[..a].iter().product(),
                s[a],
                s[a + 1..].iter().product(),
            )
        }
        None => (None, 1, s.iter().product(), 1),
    };
    let out = |k: usize| n.outputs.get(k).copied();
    Ok(UniqueSpec {
        site: Site::of(n),
        x,
        y: output(n, 0)?,
        indices: out(1),
        inverse: out(2),
        counts: out(3),
        dtype,
        axis,
        outer,
        d,
        inner,
        sorted: n.attrs.int_or("sorted", 1).map_err(plan)? != 0,
    })
}

/// Refuses empty data, more elements than a u32 indexes, and more slices than the
/// bitmask holds.
pub fn check_size(node: &Node, sp: &UniqueSpec) -> Result<()> {
    let n = sp.outer * sp.d * sp.inner;
    if n == 0 {
        return Err(unsupported(node, "empty data"));
    }
    if u32::try_from(n).is_err() {
        return Err(unsupported(node, "more than 2^32 elements"));
    }
    if sp.d > MAX_SLICES {
        return Err(unsupported(
            node,
            &format!("more than {MAX_SLICES} slices to compare"),
        ));
    }
    Ok(())
}

/// What an element step of a loop over two slices does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Compares the elements of `a` and `b`, returning the first difference.
    Compare,
    /// Copies the element of slice `b` of X to slice `a` of Y.
    Copy,
}

/// The statements of the Unique kernel of `sp` in syntax `S`.
pub struct Text<'a, S: Syntax> {
    /// The spec.
    pub sp: &'a UniqueSpec,
    /// The syntax.
    pub syntax: S,
}

impl<S: Syntax> Text<'_, S> {
    /// The optional outputs the node has, after Y in node order, by their names in the
    /// kernel.
    pub fn optional(&self) -> Vec<(&'static str, ValueId)> {
        [
            ("indices", self.sp.indices),
            ("inverse", self.sp.inverse),
            ("counts", self.sp.counts),
        ]
        .into_iter()
        .filter_map(|(f, v)| v.map(|v| (f, v)))
        .collect()
    }

    /// Loops over the elements of two slices `a` and `b` (only over the dims longer
    /// than 1, so a slice of one element is no loop: lavapipe ends a shader's loops
    /// after 65535 iterations in all), indented `indent`, with `step` at the offsets
    /// of the element in each.
    pub fn over_slice(&self, indent: usize, a: &str, b: &str, step: Step) -> String {
        let (sp, syn) = (self.sp, &self.syntax);
        let (d, inner, lit) = (sp.d, sp.inner, syn.lit());
        let (mut ea, mut eb) = (a.to_string(), b.to_string());
        let mut pads = vec![" ".repeat(indent)];
        let mut head = String::new();
        if sp.outer > 1 {
            let cond = format!("o < {}u", sp.outer);
            head += &format!(
                "{}{}\n",
                pads[pads.len() - 1],
                syn.count_from("o", "0u", &cond)
            );
            pads.push(" ".repeat(indent + 4 * pads.len()));
            ea = format!("({} * {} + {ea})", syn.wide("o"), lit.n(d));
            eb = format!("({} * {} + {eb})", syn.wide("o"), lit.n(d));
        }
        if inner > 1 {
            let cond = format!("k < {inner}u");
            head += &format!(
                "{}{}\n",
                pads[pads.len() - 1],
                syn.count_from("k", "0u", &cond)
            );
            pads.push(" ".repeat(indent + 4 * pads.len()));
            ea = format!("{} * {} + k", syn.wide(&ea), lit.n(inner));
            eb = format!("{} * {} + k", syn.wide(&eb), lit.n(inner));
        }
        let pad = &pads[pads.len() - 1];
        let step = match step {
            Step::Compare => format!(
                "{pad}{} = cmp_elem(x[{ea}], x[{eb}]);\n{pad}if (c != 0) {{\n{pad}    return c;\n{pad}}}\n",
                syn.let_int("c")
            ),
            Step::Copy => format!("{pad}y[{ea}] = x[{eb}];\n"),
        };
        let mut text = head + &step;
        for pad in pads.iter().rev().skip(1) {
            text += &format!("{pad}}}\n");
        }
        text
    }

    /// The body of `rank_of(i)`, indented `indent`: counts flagged slices into `rank`.
    pub fn rank(&self, indent: usize) -> String {
        let syn = &self.syntax;
        let p = |k: usize| " ".repeat(indent + 4 * k);
        let rank = syn.add_one("rank");
        if self.sp.sorted {
            let cond = format!("j < {}u", self.sp.d);
            format!(
                "{}{}\n{}if (is_first(j) && cmp_slices(j, i) < 0) {{\n{}{rank};\n{}}}\n{}}}",
                p(0),
                syn.count_from("j", "0u", &cond),
                p(1),
                p(2),
                p(1),
                p(0)
            )
        } else {
            format!(
                "{}{}\n{}if (is_first(j)) {{\n{}if (cmp_slices(j, i) == 0) {{\n{}break;\n{}}}\n{}{rank};\n{}}}\n{}}}",
                p(0),
                syn.count_from("j", "0u", "j <= i"),
                p(1),
                p(2),
                p(3),
                p(2),
                p(2),
                p(1),
                p(0)
            )
        }
    }

    /// What a first occurrence stores at its rank besides its slice: its index and its
    /// count, where the node has those outputs.
    pub fn store_first(&self) -> String {
        let (sp, syn) = (self.sp, &self.syntax);
        let mut text = String::new();
        if sp.indices.is_some() {
            text += &format!("            indices[rank] = {};\n", syn.i64_of("i"));
        }
        if sp.counts.is_some() {
            let cond = format!("j < {}u", sp.d);
            text += &format!(
                "            {};\n            {}\n                if (cmp_slices(j, i) == 0) {{\n                    {};\n                }}\n            }}\n            counts[rank] = {};\n",
                syn.var_u32("c", "1u"),
                syn.count_from("j", "i + 1u", &cond),
                syn.add_one("c"),
                syn.i64_of("c")
            );
        }
        text
    }

    /// What every slice stores: its group's rank, where the node has
    /// `inverse_indices`.
    pub fn store_inverse(&self) -> String {
        match self.sp.inverse {
            Some(_) => format!("        inverse[i] = {};\n", self.syntax.i64_of("rank")),
            None => String::new(),
        }
    }

    /// The stores of the count to each status word in `slots`.
    pub fn store_counts(slots: &[u32]) -> String {
        slots
            .iter()
            .map(|slot| format!("        status[{slot}] = total;\n"))
            .collect()
    }
}
