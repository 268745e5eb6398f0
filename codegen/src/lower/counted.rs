//! Ops whose output size depends on the data (NonZero, Compress, Unique,
//! NonMaxSuppression), read once for every backend. GPU plans lay memory out before the
//! run, so each such output is laid out at its bound (the most elements it can have:
//! every element of NonZero's input, every row of a Compress condition, every box of
//! every class for NonMaxSuppression) and the kernel writes how many it produced into a
//! word of the run's status buffer, beside the index checks' error word
//! ([`crate::plan::Count`]). The runtime reads that word back with the outputs, one
//! device-to-host read the run makes anyway, and keeps that many.
//!
//! That works where nothing on the device reads the output after the kernel: each
//! counted output must be a graph output that no other node reads. [`bound`] rewrites
//! the types of those outputs to their bounds before the plan is laid out; an op whose
//! counted output feeds another node stays symbolic and is refused with the node it
//! feeds ([`refusal`]).

use super::nms::{nms, nms_size, NmsSpec};
use super::support::{input, output, plan, typed, unsupported, Site};
use super::unique::{unique, UniqueSpec};
use crate::plan::{index_code, Count};
use crate::Result;
use gopt_ir::ops::{ImageOp, ShapeOp};
use gopt_ir::{DType, Dim, Graph, Node, Op, TensorType, ValueId};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The ops whose output size the device counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountedOp {
    /// NonZero.
    NonZero,
    /// Compress.
    Compress,
    /// Unique.
    Unique,
    /// NonMaxSuppression.
    Nms,
}

/// The counted op `op` is, if it is one.
pub fn counted_op(op: Op) -> Option<CountedOp> {
    [
        (Op::Shape(ShapeOp::NonZero), CountedOp::NonZero),
        (Op::Shape(ShapeOp::Compress), CountedOp::Compress),
        (Op::Shape(ShapeOp::Unique), CountedOp::Unique),
        (Op::Image(ImageOp::NonMaxSuppression), CountedOp::Nms),
    ]
    .into_iter()
    .find_map(|(o, c)| (o == op).then_some(c))
}

/// Whether `op` is one whose output size the device counts.
pub fn is_counted(op: &Op) -> bool {
    counted_op(*op).is_some()
}

/// A counted node, read: what its kernel needs, with the status words it writes its
/// counts to.
#[derive(Clone, Debug, PartialEq)]
pub enum CountedSpec {
    /// NonZero.
    NonZero(NonZeroSpec),
    /// Compress.
    Compress {
        /// The node's shapes.
        spec: CompressSpec,
        /// The output's status word.
        slot: u32,
        /// The code a true condition entry past the axis raises, when the condition
        /// is longer than the axis ([`crate::plan::index_code`]).
        code: Option<u32>,
    },
    /// Unique ([`super::unique`]).
    Unique {
        /// The node's shapes.
        spec: UniqueSpec,
        /// The status words of Y, `indices` and `counts`, those that are graph outputs.
        slots: Vec<u32>,
    },
    /// NonMaxSuppression.
    Nms {
        /// The node's shapes.
        spec: NmsSpec,
        /// The output's status word.
        slot: u32,
    },
}

/// The kernel of counted node `n` of `g` (an `op`), or why its outputs cannot be
/// counted.
pub fn lower(g: &Graph, n: &Node, op: CountedOp) -> Result<super::Lowered> {
    if let Some(why) = refusal(g, n) {
        return Ok(super::Lowered::Unsupported(why));
    }
    super::typed(spec(g, n, op), |s| super::Spec::Counted(Box::new(s)))
}

/// The kernel spec of counted node `n` of `g`, an `op` whose counted outputs
/// [`refusal`] accepts.
fn spec(g: &Graph, n: &Node, op: CountedOp) -> Result<CountedSpec> {
    Ok(match op {
        CountedOp::NonZero => CountedSpec::NonZero(nonzero(g, n)?),
        CountedOp::Compress => {
            let spec = compress(g, n)?;
            // Only a condition longer than the axis can select past it.
            let code = (spec.len > spec.d).then(|| index_code(g, n)).transpose()?;
            CountedSpec::Compress {
                slot: slot(g, n, spec.y)?,
                spec,
                code,
            }
        }
        CountedOp::Unique => {
            let spec = unique(g, n)?;
            super::unique::check_size(n, &spec)?;
            // An omitted output (no graph output) is laid out but not counted.
            let slots = std::iter::once(spec.y)
                .chain(spec.indices)
                .chain(spec.counts)
                .filter_map(|v| count_slot(g, v))
                .collect();
            CountedSpec::Unique { spec, slots }
        }
        CountedOp::Nms => {
            let spec = nms(g, n)?;
            nms_size(n, &spec)?;
            CountedSpec::Nms {
                slot: slot(g, n, spec.y)?,
                spec,
            }
        }
    })
}

/// The status word of counted output `v` of `node`, which must be a graph output.
pub fn slot(g: &Graph, node: &Node, v: ValueId) -> Result<u32> {
    count_slot(g, v).ok_or_else(|| unsupported(node, "a counted output that is not a graph output"))
}

/// A NonZero node, resolved: the coordinates of the nonzero elements of `x`, one row
/// per dim of `y` (laid out at `bound` columns).
#[derive(Clone, Debug, PartialEq)]
pub struct NonZeroSpec {
    /// The node.
    pub site: Site,
    /// The data.
    pub x: ValueId,
    /// The output `[rank, bound]` (i64).
    pub y: ValueId,
    /// The data's dtype.
    pub dtype: DType,
    /// The data's shape.
    pub dims: Vec<usize>,
    /// The output's columns (the count's bound).
    pub bound: usize,
    /// The output's status word.
    pub slot: u32,
}

impl NonZeroSpec {
    /// Data elements.
    pub fn n(&self) -> usize {
        self.dims.iter().product()
    }
}

/// Reads NonZero node `n` of `g`.
pub fn nonzero(g: &Graph, n: &Node) -> Result<NonZeroSpec> {
    let x = input(n, 0)?;
    let y = output(n, 0)?;
    let (dtype, dims) = typed(g, n, x)?;
    let (_, ys) = typed(g, n, y)?;
    if u32::try_from(dims.iter().product::<usize>()).is_err() {
        return Err(unsupported(n, "more than 2^32 elements"));
    }
    Ok(NonZeroSpec {
        site: Site::of(n),
        x,
        y,
        dtype,
        dims,
        bound: ys.get(1).copied().unwrap_or(0),
        slot: slot(g, n, y)?,
    })
}

/// The status word of graph output `v` (word 0 is the index checks' error word), or
/// `None` when `v` is not a graph output.
pub fn count_slot(g: &Graph, v: ValueId) -> Option<u32> {
    let i = g.outputs.iter().position(|&o| o == v)?;
    u32::try_from(i + 1).ok()
}

/// The outputs of counted node `n` whose size depends on the data, each with the axis
/// the count sizes and that axis' bound, read from the node's static inputs.
pub fn counted_outputs(g: &Graph, n: &Node) -> Result<Vec<(ValueId, usize, usize)>> {
    let out = |k: usize| output(n, k);
    let Some(op) = counted_op(n.op) else {
        return Ok(Vec::new());
    };
    Ok(match op {
        CountedOp::NonZero => {
            let (_, s) = typed(g, n, input(n, 0)?)?;
            vec![(out(0)?, 1, s.iter().product())]
        }
        CountedOp::Compress => {
            let sp = compress(g, n)?;
            vec![(out(0)?, sp.axis, sp.bound)]
        }
        CountedOp::Unique => {
            let sp = unique(g, n)?;
            // Y along the axis, indices and counts: one entry per unique element.
            let mut v = vec![(sp.y, sp.axis.unwrap_or(0), sp.d)];
            v.extend(sp.indices.map(|i| (i, 0, sp.d)));
            v.extend(sp.counts.map(|c| (c, 0, sp.d)));
            v
        }
        CountedOp::Nms => {
            let sp = nms(g, n)?;
            vec![(out(0)?, 0, sp.bound)]
        }
    })
}

/// Why counted node `n` cannot run on a GPU, or `None` when every counted output is a
/// graph output no other node reads.
pub fn refusal(g: &Graph, n: &Node) -> Option<String> {
    let outs = match counted_outputs(g, n) {
        Ok(o) => o,
        Err(e) => return Some(e.to_string()),
    };
    for &(v, _, _) in &outs {
        if !g.outputs.contains(&v) && unread(g, v) {
            // An omitted output (an empty name in the model): laid out, never read.
            continue;
        }
        if let Some(user) = g
            .nodes
            .iter()
            .find(|m| m.inputs.iter().flatten().any(|&i| i == v))
        {
            return Some(format!(
                "output `{}`, whose size depends on the data, feeding node `{}` ({}): a GPU \
                 plan reads such a size back only for a graph output, at the end of the run",
                g.value(v).name,
                user.name,
                user.op.name()
            ));
        }
        if count_slot(g, v).is_none() {
            return Some(format!(
                "output `{}`, whose size depends on the data, which is not a graph output",
                g.value(v).name
            ));
        }
    }
    if !outs.iter().any(|(v, _, _)| g.outputs.contains(v)) {
        return Some(
            "outputs whose size depends on the data, none of them a graph output (a GPU \
             plan reads such a size back only for a graph output, at the end of the run)"
                .into(),
        );
    }
    None
}

fn unread(g: &Graph, v: ValueId) -> bool {
    !g.nodes
        .iter()
        .any(|m| m.inputs.iter().flatten().any(|&i| i == v))
}

/// `g` with each counted output a GPU plan can run laid out at its bound, and the count
/// of each such graph output (an output no one reads is laid out but not counted). `g`
/// itself when it has none.
pub fn bound(
    g: &gopt_ir::Verified,
) -> Result<(Cow<'_, gopt_ir::Verified>, BTreeMap<ValueId, Count>)> {
    let mut counts = BTreeMap::new();
    let mut bounded = Cow::Borrowed(g);
    for n in g.nodes.iter().filter(|n| is_counted(&n.op)) {
        if refusal(g, n).is_some() {
            continue;
        }
        for (v, axis, bound) in counted_outputs(g, n)? {
            // Laid out at the bound and counted even when inference knew the size, so
            // every counted kernel writes its counts.
            let ty = g.ty(v).map_err(plan)?;
            let mut shape = ty.shape.clone();
            let at = shape
                .get_mut(axis)
                .ok_or_else(|| plan(format!("{}: output rank below its axis {axis}", n.name)))?;
            *at = Dim::Known(bound as u64);
            if gopt_ir::dim::concrete(&shape).is_none() {
                return Err(unsupported(n, "symbolic dims besides the counted one"));
            }
            if let Some(slot) = count_slot(g, v) {
                counts.insert(v, Count { axis, slot });
            }
            bounded
                .to_mut()
                .refine_type(v, TensorType::new(ty.dtype, shape))
                .map_err(plan)?;
        }
    }
    Ok((bounded, counts))
}

/// A Compress node, resolved: `x` viewed as `outer` × `d` × `inner` around the axis (or
/// flattened, `outer` = `inner` = 1, without one), the condition's length `len`, and
/// the output's bound along the axis (`min(len, d)`).
#[derive(Clone, Debug, PartialEq)]
pub struct CompressSpec {
    /// The node.
    pub site: Site,
    /// The data.
    pub x: ValueId,
    /// The condition (bool, 1-D).
    pub cond: ValueId,
    /// The output.
    pub y: ValueId,
    /// The data's dtype.
    pub dtype: DType,
    /// The axis in the output (0 when the data is flattened).
    pub axis: usize,
    /// Elements before the axis.
    pub outer: usize,
    /// The axis' length in the data.
    pub d: usize,
    /// Elements after the axis.
    pub inner: usize,
    /// The condition's length.
    pub len: usize,
    /// The output's length along the axis at most.
    pub bound: usize,
}

impl CompressSpec {
    /// The holes both backends' templates fill alike: the sizes, the status word
    /// `slot`, and `raise`, the statement that raises an index past the axis.
    pub fn holes(&self, slot: u32, raise: String) -> [(&'static str, String); 8] {
        [
            ("outer", self.outer.to_string()),
            ("d", self.d.to_string()),
            ("inner", self.inner.max(1).to_string()),
            ("len", self.len.to_string()),
            ("bound", self.bound.to_string()),
            ("slice", (self.outer * self.inner).to_string()),
            ("slot", slot.to_string()),
            ("raise", raise),
        ]
    }

    /// What a true condition entry past the axis is, for the run's error.
    pub fn out_of_range(&self) -> String {
        format!(
            "a condition that selects an index past the end of the axis (length {})",
            self.d
        )
    }
}

/// Reads Compress node `n` of `g`.
pub fn compress(g: &Graph, n: &Node) -> Result<CompressSpec> {
    let x = input(n, 0)?;
    let cond = input(n, 1)?;
    let (dtype, s) = typed(g, n, x)?;
    let (cdt, cs) = typed(g, n, cond)?;
    if cdt != DType::Bool || cs.len() != 1 {
        return Err(unsupported(n, "a condition that is not a 1-D bool tensor"));
    }
    let (axis, outer, d, inner) = match n.attrs.int("axis").map_err(plan)? {
        Some(a) => {
            let a = gopt_ir::ops::util::norm_axis(a, s.len()).map_err(plan)?;
            (
                a,
                s[..a].iter().product(),
                s[a],
                s[a + 1..].iter().product(),
            )
        }
        None => (0, 1, s.iter().product(), 1),
    };
    Ok(CompressSpec {
        site: Site::of(n),
        x,
        cond,
        y: output(n, 0)?,
        dtype,
        axis,
        outer,
        d,
        inner,
        len: cs[0],
        bound: cs[0].min(d),
    })
}
