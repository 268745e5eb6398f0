//! Trilu, read once for every backend: which triangle (`upper`), the matrices' size
//! (the last two dims) and the diagonal `k`, a constant or an i64 scalar read on the
//! device. The element at row `r`, column `c` of each matrix is kept when `c - r >= k`
//! (upper) or `c - r <= k` (lower), and is zero otherwise.

use super::support::{input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// The diagonal `k` of a Trilu node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagonal {
    /// Known when compiling (0 when the input is absent).
    Const(i64),
    /// A one-element i64 tensor computed on the device.
    Input(ValueId),
}

/// A Trilu node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The node.
    pub site: Site,
    /// The data.
    pub x: ValueId,
    /// The output (the data's dtype and shape).
    pub out: ValueId,
    /// The data's dtype (copied as stored).
    pub dtype: DType,
    /// Rows of each matrix.
    pub h: usize,
    /// Columns of each matrix.
    pub w: usize,
    /// Elements in all.
    pub n: usize,
    /// The upper triangle is kept (else the lower).
    pub upper: bool,
    /// The diagonal.
    pub k: Diagonal,
}

/// Reads Trilu node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<Spec> {
    let x = input(node, 0)?;
    let out = output(node, 0)?;
    let (dtype, shape) = typed(g, node, x)?;
    let [.., h, w] = shape[..] else {
        return Err(unsupported(node, "an input of rank below 2"));
    };
    let upper = node.attrs.int_or("upper", 1).map_err(plan)? != 0;
    let k = match opt_input(node, 1) {
        None => Diagonal::Const(0),
        Some(kv) => {
            let (kdt, ks) = typed(g, node, kv)?;
            if kdt != DType::I64 {
                return Err(unsupported(node, &format!("a {kdt} k")));
            }
            if ks.iter().product::<usize>() != 1 {
                return Err(unsupported(node, "a k that is not one element"));
            }
            match g.constant(kv) {
                Some(c) => Diagonal::Const(
                    *c.to_i64_vec()
                        .first()
                        .ok_or_else(|| unsupported(node, "an empty k"))?,
                ),
                None => Diagonal::Input(kv),
            }
        }
    };
    Ok(Spec {
        site: Site::of(node),
        x,
        out,
        dtype,
        h,
        w,
        n: shape.iter().product(),
        upper,
        k,
    })
}
