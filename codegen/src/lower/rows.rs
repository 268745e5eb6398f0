//! The geometry of a row node, read once for both writers: what it computes per row
//! ([`RowOp`]), how its input splits into rows (`outer × d × inner`: a row is `d`
//! elements `inner` apart, so rows along the last axis, or a normalization's trailing
//! axes, are contiguous), its epsilon, where each column finds its scale and bias
//! ([`Column`]), and its outputs (LayerNorm's optional Mean and InvStdDev included).

use super::support::{check_float, input, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// What a row kernel computes along each row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowOp {
    /// LayerNormalization: `(x - mean) * inv_std_dev * scale + bias`.
    LayerNorm,
    /// RMSNormalization: `x * inv_rms * scale`.
    RmsNorm,
    /// Softmax: `exp(x - max) / sum(exp(x - max))`.
    Softmax,
    /// LogSoftmax: `x - max - log(sum(exp(x - max)))`.
    LogSoftmax,
    /// LpNormalization: `x / norm`, 0 where the norm is 0.
    LpNorm(Lp),
}

/// LpNormalization's norm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lp {
    /// The sum of absolute values.
    L1,
    /// The square root of the sum of squares.
    L2,
}

/// Where column `c` of a row (`0..d`) finds its element of a per-column parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    /// One value for every column.
    One,
    /// Element `c`: the parameter has the row's elements.
    Each,
    /// The sum of `((c / div) % len) * stride` over the terms: a parameter broadcast
    /// along some of the row's axes.
    Terms(Vec<Term>),
}

/// One axis of a [`Column::Terms`] index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    /// Columns per step along this axis.
    pub div: usize,
    /// The axis's length.
    pub len: usize,
    /// The parameter's stride along it.
    pub stride: usize,
}

/// A per-column input (scale, bias).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its value.
    pub value: ValueId,
    /// Its element type.
    pub dtype: DType,
    /// Where each column finds its element.
    pub column: Column,
}

/// An output of a row node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    /// Its value.
    pub value: ValueId,
    /// Its element type.
    pub dtype: DType,
}

/// A row node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The node.
    pub site: Site,
    /// What each row computes.
    pub op: RowOp,
    /// The input.
    pub x: ValueId,
    /// Its element type.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<usize>,
    /// The (normalized) `axis` attribute.
    pub axis: usize,
    /// Blocks of rows before the axis.
    pub outer: usize,
    /// Elements per row.
    pub d: usize,
    /// Distance between a row's consecutive elements (and rows per outer block); 1:
    /// rows are contiguous.
    pub inner: usize,
    /// The normalizations' epsilon.
    pub epsilon: f32,
    /// The normalizations' scale.
    pub scale: Option<Param>,
    /// LayerNorm's bias.
    pub bias: Option<Param>,
    /// The result.
    pub y: Output,
    /// The result again in another float type, for a Cast among y's readers (stored
    /// by the same kernel: [`super::absorb`]).
    pub also: Option<Output>,
    /// LayerNorm's optional per-row mean.
    pub mean: Option<Output>,
    /// LayerNorm's optional per-row inverse standard deviation.
    pub inv_std_dev: Option<Output>,
}

impl Spec {
    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.outer * self.inner
    }

    /// Whether each row's elements are adjacent.
    pub fn contiguous(&self) -> bool {
        self.inner == 1
    }
}

/// LpNormalization node `node`'s row op: its norm (`p`, 1 or 2).
pub fn lp_norm(node: &Node) -> Result<RowOp> {
    match node.attrs.int_or("p", 2).map_err(plan)? {
        1 => Ok(RowOp::LpNorm(Lp::L1)),
        2 => Ok(RowOp::LpNorm(Lp::L2)),
        p => Err(unsupported(node, &format!("p = {p}"))),
    }
}

/// Row node `node` of `g`, resolved; an `Err` is what no row kernel computes
/// (symbolic shapes, non-float data, a scale that varies across rows).
pub fn spec(g: &Graph, node: &Node, op: RowOp, stores_casts: bool) -> Result<Spec> {
    let x = input(node, 0)?;
    let (dtype, shape) = typed(g, node, x)?;
    check_float(node, dtype, "data")?;
    if shape.is_empty() {
        return Err(unsupported(node, "a scalar input"));
    }
    let a = node.attrs.int_or("axis", -1).map_err(plan)?;
    let axis = gopt_ir::ops::util::norm_axis(a, shape.len()).map_err(plan)?;
    let norm = matches!(op, RowOp::LayerNorm | RowOp::RmsNorm);
    // Normalizations take the trailing axes from `axis` as one row; the others run
    // along `axis` alone.
    let (d, inner) = if norm {
        (shape[axis..].iter().product(), 1)
    } else {
        (shape[axis], shape[axis + 1..].iter().product())
    };
    let outer = shape[..axis].iter().product();
    let output = |k: usize| -> Result<Option<Output>> {
        let Some(&value) = node.outputs.get(k) else {
            return Ok(None);
        };
        let (dtype, _) = typed(g, node, value)?;
        check_float(node, dtype, "outputs")?;
        Ok(Some(Output { value, dtype }))
    };
    let mut y = output(0)?.ok_or_else(|| unsupported(node, "a missing output 0"))?;
    let mut also = None;
    // A Cast after the row op is stored here, in its type (super::absorb).
    if let Some((cast, only)) = stores_casts
        .then(|| super::absorb::stored_cast(g, node))
        .flatten()
    {
        let value = super::support::output(cast, 0)?;
        let (dtype, _) = typed(g, cast, value)?;
        if only {
            y = Output { value, dtype };
        } else {
            also = Some(Output { value, dtype });
        }
    }
    let max_outputs = if op == RowOp::LayerNorm { 3 } else { 1 };
    if node.outputs.len() > max_outputs {
        return Err(unsupported(node, "more than one output"));
    }
    let param = |k: usize| -> Result<Option<Param>> {
        let Some(value) = node.inputs.get(k).copied().flatten() else {
            return Ok(None);
        };
        let (dtype, ps) = typed(g, node, value)?;
        check_float(node, dtype, "scales and biases")?;
        let column = column(&shape[axis..], &ps)
            .ok_or_else(|| unsupported(node, "a scale or bias that varies across rows"))?;
        Ok(Some(Param {
            value,
            dtype,
            column,
        }))
    };
    let (scale, bias) = match op {
        RowOp::LayerNorm => (param(1)?, param(2)?),
        RowOp::RmsNorm => (param(1)?, None),
        RowOp::Softmax | RowOp::LogSoftmax | RowOp::LpNorm(_) => (None, None),
    };
    Ok(Spec {
        site: Site::of(node),
        op,
        x,
        dtype,
        axis,
        outer,
        d,
        inner,
        epsilon: node.attrs.float_or("epsilon", 1e-5).map_err(plan)?,
        scale,
        bias,
        y,
        also,
        mean: output(1)?,
        inv_std_dev: output(2)?,
        shape,
    })
}

/// Where each column of a row of shape `row` finds its element of a parameter of
/// shape `p` (numpy broadcasting against the whole input): `None` where the
/// parameter varies along an axis before the row's.
pub fn column(row: &[usize], p: &[usize]) -> Option<Column> {
    if p.iter().product::<usize>() == 1 {
        return Some(Column::One);
    }
    let r = row.len();
    // Leading axes of the parameter beyond the row's must be ones.
    if p.len() > r && p[..p.len() - r].iter().any(|&e| e != 1) {
        return None;
    }
    let p = &p[p.len().saturating_sub(r)..];
    let pad = r - p.len();
    if p == &row[pad..] && p.iter().product::<usize>() == row.iter().product::<usize>() {
        return Some(Column::Each);
    }
    let (mut terms, mut div, mut stride) = (Vec::new(), 1usize, 1usize);
    for a in (0..r).rev() {
        let pd = if a >= pad { p[a - pad] } else { 1 };
        if pd != 1 && pd != row[a] {
            return None;
        }
        if pd != 1 {
            terms.push(Term {
                div,
                len: row[a],
                stride,
            });
            stride *= pd;
        }
        div *= row[a].max(1);
    }
    Some(Column::Terms(terms))
}

/// The index of column `c` (a variable of the writer's) in a parameter, spelled with
/// the writer's integer literal suffix `lit` (`"u"`, `"LL"`, or none).
pub fn column_index(col: &Column, c: &str, lit: &str) -> String {
    match col {
        Column::One => format!("0{lit}"),
        Column::Each => c.to_string(),
        Column::Terms(terms) => {
            let t: Vec<String> = terms
                .iter()
                .map(|t| {
                    format!(
                        "(({c} / {}{lit}) % {}{lit}) * {}{lit}",
                        t.div, t.len, t.stride
                    )
                })
                .collect();
            format!("({})", t.join(" + "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_broadcast_within_the_row() {
        assert_eq!(column(&[4, 5], &[1]), Some(Column::One));
        assert_eq!(column(&[4, 5], &[4, 5]), Some(Column::Each));
        assert_eq!(column(&[4, 5], &[1, 4, 5]), Some(Column::Each));
        assert_eq!(
            column(&[4, 5], &[5]),
            Some(Column::Terms(vec![Term {
                div: 1,
                len: 5,
                stride: 1
            }]))
        );
        assert_eq!(
            column(&[4, 5], &[4, 1]),
            Some(Column::Terms(vec![Term {
                div: 5,
                len: 4,
                stride: 1
            }]))
        );
        assert_eq!(column(&[4, 5], &[2, 4, 5]), None);
        assert_eq!(column(&[4, 5], &[3]), None);
        let idx = column_index(&column(&[4, 5], &[4, 1]).unwrap(), "c", "u");
        assert_eq!(idx, "(((c / 5u) % 4u) * 1u)");
    }
}
