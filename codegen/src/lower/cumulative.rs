//! CumSum and CumProd, read once for every backend: sum or product, `exclusive` and
//! `reverse`, and the axis (input 1): resolved to the axis' length and the elements
//! between its neighbours when it is a constant, or left to the device (an i32 or i64
//! scalar counted from the end when negative; a kernel must not let one outside the
//! rank read outside the dims). Each lane along the axis is
//! scanned in the reference's order: from its first element, or from its last when
//! reversed, an exclusive scan writing the running value before each element.

use super::support::{input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::ops::ReduceOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

/// The scanned axis of a cumulative node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanAxis {
    /// Known when compiling.
    Const {
        /// The axis' length.
        d: usize,
        /// Elements between neighbours along it (the dims after it).
        inner: usize,
    },
    /// A one-element tensor computed on the device.
    Input {
        /// The axis value.
        value: ValueId,
        /// Its dtype (i32 or i64).
        dtype: DType,
    },
}

/// A CumSum or CumProd node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The node.
    pub site: Site,
    /// The code the kernel raises for an index out of range (`plan::index_code`).
    pub code: u32,
    /// The data.
    pub x: ValueId,
    /// The output (the data's dtype and shape).
    pub out: ValueId,
    /// The data's dtype (a float or an integer).
    pub dtype: DType,
    /// The data's dims (none of them zero, at least one).
    pub shape: Vec<usize>,
    /// Elements in all.
    pub n: usize,
    /// CumProd (else CumSum).
    pub prod: bool,
    /// Each element gets the scan of the elements before it, not including itself.
    pub exclusive: bool,
    /// The scan runs from the end of the axis.
    pub reverse: bool,
    /// The axis.
    pub axis: ScanAxis,
}

impl Spec {
    /// The scan's mode in words, for the kernels' comments.
    pub fn mode(&self) -> &'static str {
        match (self.exclusive, self.reverse) {
            (false, false) => "inclusive",
            (true, false) => "exclusive",
            (false, true) => "inclusive, reversed",
            (true, true) => "exclusive, reversed",
        }
    }
}

/// Reads CumSum/CumProd node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<Spec> {
    let (x, av) = (input(node, 0)?, input(node, 1)?);
    let out = output(node, 0)?;
    let (dtype, shape) = typed(g, node, x)?;
    if !(dtype.is_float() || dtype.is_int()) {
        return Err(unsupported(node, &format!("{dtype} data")));
    }
    let n: usize = shape.iter().product();
    if n == 0 || shape.is_empty() {
        return Err(unsupported(node, "an empty or scalar input"));
    }
    let axis = match g.constant(av) {
        Some(c) => {
            let a = *c
                .to_i64_vec()
                .first()
                .ok_or_else(|| unsupported(node, "an empty axis"))?;
            let a = gopt_ir::ops::util::norm_axis(a, shape.len()).map_err(plan)?;
            ScanAxis::Const {
                d: shape[a],
                inner: shape[a + 1..].iter().product(),
            }
        }
        None => {
            let (adt, ashape) = typed(g, node, av)?;
            if !matches!(adt, DType::I32 | DType::I64) {
                return Err(unsupported(node, &format!("a {adt} axis")));
            }
            if ashape.iter().product::<usize>() != 1 {
                return Err(unsupported(node, "an axis that is not one element"));
            }
            ScanAxis::Input {
                value: av,
                dtype: adt,
            }
        }
    };
    let attr = |name: &str| -> Result<bool> { Ok(node.attrs.int_or(name, 0).map_err(plan)? != 0) };
    Ok(Spec {
        site: Site::of(node),
        code: crate::plan::index_code(g, node)?,
        x,
        out,
        dtype,
        n,
        shape,
        prod: node.op == Op::Reduce(ReduceOp::CumProd),
        exclusive: attr("exclusive")?,
        reverse: attr("reverse")?,
        axis,
    })
}
