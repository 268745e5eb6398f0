//! ScatterElements, Scatter and ScatterND ([`crate::lower::scatter`]) for both
//! writers: one invocation per output element copies its data element (`v`, which the
//! template declares and stores) and applies, in order, the updates that land on it.
//! The statements are spelled in each backend's [`Syntax`]; the index read (wrapped
//! and checked, raising the node's code) and the combination of `v` with the update
//! `u` are the writer's.

use super::{Syntax, Ty};
use crate::lower::scatter::{ElementsSpec, NdSpec};

/// How a writer reads index `elem` into the index `k`, checked against `len`.
pub type ReadIndex<'a> = &'a dyn Fn(&str, usize, &str) -> String;

/// A body ([`elements`] or [`nd`]) of a spec, given the syntax, the index read, the
/// updates' storage type and the combination.
pub type Body<'a> = &'a dyn Fn(&dyn Syntax, ReadIndex, &'static str, &str) -> String;

/// ScatterElements: the element's coordinates, the indices' row off the axis (when the
/// element lies inside the indices there), then each position along the axis in order;
/// updates of storage type `t` combined into `v` by `combine` (an expression of `v`
/// and `u`).
pub fn elements(
    sx: &dyn Syntax,
    s: &ElementsSpec,
    read: ReadIndex,
    t: &'static str,
    combine: &str,
) -> String {
    const IN: &str = "        ";
    let mut body = format!(
        "{IN}{}\n{IN}{}\n{IN}{}\n",
        sx.var(Ty::Index, "r", "i"),
        sx.var(Ty::Index, "base", &sx.index(0)),
        sx.var(Ty::Bool, "inside", "true"),
    );
    for (a, &(d, id, ist)) in s.dims.iter().enumerate().rev() {
        let c = sx.let_(Ty::Index, &format!("c{a}"), &format!("r % {}", sx.index(d)));
        body += &format!("{IN}{c} r = r / {};\n", sx.index(d));
        if a != s.axis {
            if id < d {
                body += &format!("{IN}if (c{a} >= {}) {{ inside = false; }}\n", sx.index(id));
            }
            body += &format!("{IN}base = base + c{a} * {};\n", sx.index(ist));
        }
    }
    let unused = sx.unused("r");
    if !unused.is_empty() {
        body += &format!("{IN}{unused}\n");
    }
    let p = sx.let_(
        Ty::Index,
        "p",
        &format!("base + t * {}", sx.index(s.axis_stride())),
    );
    body + &format!(
        "{IN}if (inside) {{\n{IN}{} {{\n{IN}    {p}\n{}{IN}    if (k == c{axis}) {{ {} v = {combine}; }}\n{IN}}}\n{IN}}}\n",
        sx.for_index("t", s.count()),
        read("idx[p]", s.axis_len(), "k"),
        sx.let_(Ty::Named(t), "u", "upd[p]"),
        axis = s.axis,
    )
}

/// ScatterND: every index row in order, its coordinates checked and summed to a slice
/// offset; the rows addressing the element's slice apply their update (of storage type
/// `t`, combined into `v` by `combine`).
pub fn nd(sx: &dyn Syntax, s: &NdSpec, read: ReadIndex, t: &'static str, combine: &str) -> String {
    const IN: &str = "        ";
    let chunk = sx.index(s.chunk);
    let mut body = format!(
        "{IN}{}\n{IN}{}\n{IN}{} {{\n{IN}    {}\n",
        sx.let_(Ty::Index, "j", &format!("i % {chunk}")),
        sx.let_(Ty::Index, "slice", "i - j"),
        sx.for_index("r", s.rows),
        sx.var(Ty::Index, "at", &sx.index(0)),
    );
    for (c, &(len, stride)) in s.coords.iter().enumerate() {
        let elem = format!("idx[r * {} + {}]", sx.index(s.depth), sx.index(c));
        body += &read(&elem, len, &format!("k{c}"));
        body += &format!("{IN}    at = at + k{c} * {};\n", sx.index(stride));
    }
    let u = sx.let_(Ty::Named(t), "u", &format!("upd[r * {chunk} + j]"));
    body + &format!("{IN}    if (at == slice) {{ {u} v = {combine}; }}\n{IN}}}\n")
}
