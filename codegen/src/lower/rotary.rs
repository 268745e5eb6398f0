//! RotaryEmbedding (ONNX opset 23), read once for every backend: the layout of X (4-D
//! `[batch, heads, seq, head]` or 3-D `[batch, seq, heads · head]` with `num_heads`),
//! the rotated channels (`rotary_embedding_dim`, all by default), the pairing (channel
//! `c` with `c + rd/2`, or `2c` with `2c + 1` when `interleaved`) and where the cos and
//! sin of each (batch, position) are: a row of the 2-D caches picked by `position_ids`
//! (i64 read on the device, so each is checked: [`RotarySpec::out_of_range`]), or the
//! caches broadcast to `[batch, seq, rd/2]` without them. Output channel `c` of a pair
//! `(x1, x2)` is `cos·x1 - sin·x2` (first) or `sin·x1 + cos·x2` (second); channels past
//! `rd` are copied. Mirrors the interpreter's `ops/attention/rotary.rs`. Where the
//! backend allows, X is read in place as columns of a wider tensor and a Cast that is
//! the output's only reader is stored instead ([`super::absorb`]).

use super::absorb::{column_reads, stored_cast, Columns};
use super::support::{input, opt_input, output, typed, unsupported, Site};
use super::Views;
use crate::plan::index_code;
use crate::twin::Syntax;
use crate::Result;
use gopt_ir::{Attr, DType, Graph, Node, ValueId};

/// A RotaryEmbedding node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct RotarySpec {
    /// The node.
    pub site: Site,
    /// The input X (or the tensor X is columns of, [`RotarySpec::x_cols`]).
    pub x: ValueId,
    /// Where X is read when it is columns of a wider tensor (a merged GEMM's piece).
    pub x_cols: Option<Columns>,
    /// The cos cache.
    pub cos: ValueId,
    /// The sin cache.
    pub sin: ValueId,
    /// The value the kernel writes: the output (X's dtype and shape), or the Cast of
    /// it it stores.
    pub out: ValueId,
    /// The dtype of X (f32, f16 or bf16).
    pub dtype: DType,
    /// The dtype written (`dtype`, or the stored Cast's).
    pub out_dtype: DType,
    /// The dtypes of the cos and sin caches (f32, f16 or bf16).
    pub cache_dtypes: [DType; 2],
    /// Batch, sequence, heads and head size.
    pub dims: [usize; 4],
    /// Element strides of X (and the output) per batch, position and head; channels
    /// are contiguous.
    pub x_strides: [usize; 3],
    /// Rotated channels (even, at most the head size).
    pub rd: usize,
    /// Pairs `(2c, 2c + 1)` instead of `(c, c + rd/2)`.
    pub interleaved: bool,
    /// Where the caches' rows come from.
    pub rows: CacheRows,
}

/// How the cos/sin row of batch `b`, position `s` is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheRows {
    /// Row `position_ids[b, s]` (an i64 `[batch, seq]` tensor, negative counted from
    /// the end) of `[rows, rd/2]` caches.
    Positions {
        /// The position ids.
        ids: ValueId,
        /// The caches' rows.
        rows: usize,
        /// The code a position out of range raises ([`crate::plan::index_code`]).
        code: u32,
    },
    /// The caches broadcast to `[batch, seq, rd/2]`: element strides per batch and
    /// position (0 where they broadcast).
    Broadcast([usize; 2]),
}

impl RotarySpec {
    /// Output elements.
    pub fn n(&self) -> usize {
        self.dims.iter().product()
    }

    /// The holes both kernels (`rotary.cu`, `rotary.wgsl`) fill the same way: the sizes,
    /// the layout, and the statements finding an element's batch and position.
    pub fn holes(&self, syn: &impl Syntax) -> Vec<(&'static str, String)> {
        vec![
            ("dtype", self.dtype.to_string()),
            ("n", self.n().to_string()),
            ("d", self.dims[3].to_string()),
            ("rd", self.rd.to_string()),
            ("half", (self.rd / 2).to_string()),
            ("interleaved", self.interleaved.to_string()),
            ("coords", self.coords(syn)),
        ]
    }

    /// The statements that find the batch `b` and position `s` of element row `r`
    /// (`e / D`), X's layout unrolled: heads inside positions (3-D) or positions inside
    /// heads (4-D; the same when there is one head).
    pub fn coords(&self, syn: &impl Syntax) -> String {
        let [_, s, h, _] = self.dims;
        let n = |v: usize| syn.lit().n(v);
        let (ls, lb) = (syn.let_index("s"), syn.let_index("b"));
        if self.x_strides[1] > self.x_strides[2] {
            format!(
                "        r = r / {};\n        {ls} = r % {};\n        {lb} = r / {};\n",
                n(h),
                n(s),
                n(s)
            )
        } else {
            format!(
                "        {ls} = r % {};\n        r = r / {};\n        {lb} = r / {};\n",
                n(s),
                n(s),
                n(h)
            )
        }
    }

    /// What an out-of-range position id is, for the run's error.
    pub fn out_of_range(&self) -> String {
        match self.rows {
            CacheRows::Positions { rows, .. } => {
                format!("a position id out of range for caches of {rows} rows")
            }
            CacheRows::Broadcast(_) => String::new(),
        }
    }
}

/// Reads RotaryEmbedding node `node` of `g` as a backend with `views` runs it: X read
/// in place where it is columns of a wider tensor, a Cast that is the output's only
/// reader stored instead of the output ([`super::absorb`]).
pub fn spec(g: &Graph, node: &Node, views: Views) -> Result<RotarySpec> {
    let (x, cos, sin, out) = (
        input(node, 0)?,
        input(node, 1)?,
        input(node, 2)?,
        output(node, 0)?,
    );
    let (dtype, xs) = typed(g, node, x)?;
    let (cdt, cs) = typed(g, node, cos)?;
    let (sdt, ss) = typed(g, node, sin)?;
    for dt in [dtype, cdt, sdt] {
        if !matches!(dt, DType::F32 | DType::F16 | DType::BF16) {
            return Err(unsupported(node, &format!("{dt} data")));
        }
    }
    let (mut heads, mut rd, mut interleaved) = (None, 0usize, false);
    for (key, value) in &node.attrs.0 {
        match (key.as_str(), value) {
            ("num_heads", Attr::Int(h)) if *h > 0 => heads = Some(*h as usize),
            ("num_heads", Attr::Int(_)) => {}
            ("rotary_embedding_dim", Attr::Int(r)) if *r >= 0 => rd = *r as usize,
            ("interleaved", Attr::Int(i)) => interleaved = *i != 0,
            (other, _) => {
                return Err(unsupported(
                    node,
                    &format!("the attribute `{other}` = {value:?}"),
                ))
            }
        }
    }
    let (dims, x_strides) = if let [b, h, s, d] = *xs.as_slice() {
        ([b, s, h, d], [h * s * d, d, s * d])
    } else if let [b, s, hidden] = *xs.as_slice() {
        let Some(h) = heads.filter(|&h| hidden.is_multiple_of(h)) else {
            return Err(unsupported(node, "3-D input without num_heads dividing it"));
        };
        let d = hidden / h;
        ([b, s, h, d], [s * hidden, hidden, d])
    } else {
        return Err(unsupported(node, &format!("an input of shape {xs:?}")));
    };
    let d = dims[3];
    let rd = if rd == 0 { d } else { rd };
    if rd > d || !rd.is_multiple_of(2) {
        return Err(unsupported(
            node,
            &format!("rotary_embedding_dim {rd} for a head of {d}"),
        ));
    }
    let half = rd / 2;
    let (od, os) = typed(g, node, out)?;
    if od != dtype || os != xs {
        return Err(unsupported(node, "an output other than X's type and shape"));
    }
    if cs != ss {
        return Err(unsupported(node, "cos and sin caches of different shapes"));
    }
    let rows = match opt_input(node, 3) {
        Some(ids) => {
            let (idt, is) = typed(g, node, ids)?;
            if idt != DType::I64 || is != [dims[0], dims[1]] || cs.len() != 2 || cs[1] != half {
                return Err(unsupported(
                    node,
                    &format!("position_ids {idt}{is:?} with caches {cs:?}"),
                ));
            }
            CacheRows::Positions {
                ids,
                rows: cs[0],
                code: index_code(g, node)?,
            }
        }
        None => broadcast(node, &cs, [dims[0], dims[1], half])?,
    };
    let (mut out, mut out_dtype) = (out, dtype);
    if let Some((cast, true)) = views.stores_casts.then(|| stored_cast(g, node)).flatten() {
        out = output(cast, 0)?;
        out_dtype = typed(g, cast, out)?.0;
    }
    let x_cols = column_reads(g, x, views);
    Ok(RotarySpec {
        site: Site::of(node),
        x: x_cols.map_or(x, |c| c.source),
        x_cols,
        cos,
        sin,
        out,
        dtype,
        out_dtype,
        cache_dtypes: [cdt, sdt],
        dims,
        x_strides,
        rd,
        interleaved,
        rows,
    })
}

/// The strides of caches of shape `cs` broadcast to `full` (`[batch, seq, rd/2]`).
fn broadcast(node: &Node, cs: &[usize], full: [usize; 3]) -> Result<CacheRows> {
    if cs.is_empty() || cs.len() > 3 {
        return Err(unsupported(node, &format!("caches of shape {cs:?}")));
    }
    let mut c3 = vec![1usize; 3 - cs.len()];
    c3.extend_from_slice(cs);
    if c3[2] != full[2] || (0..2).any(|a| c3[a] != 1 && c3[a] != full[a]) {
        return Err(unsupported(
            node,
            &format!("caches of shape {cs:?} for {full:?}"),
        ));
    }
    let sb = if c3[0] == 1 { 0 } else { c3[1] * c3[2] };
    let ss = if c3[1] == 1 { 0 } else { c3[2] };
    Ok(CacheRows::Broadcast([sb, ss]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caches_broadcast_over_batch_and_positions() {
        let n = Node {
            name: "r".into(),
            op: gopt_ir::Op::Attention(gopt_ir::ops::AttentionOp::RotaryEmbedding),
            inputs: vec![],
            outputs: vec![],
            attrs: Default::default(),
        };
        assert_eq!(
            broadcast(&n, &[2, 3, 4], [2, 3, 4]).ok(),
            Some(CacheRows::Broadcast([12, 4]))
        );
        assert_eq!(
            broadcast(&n, &[3, 4], [2, 3, 4]).ok(),
            Some(CacheRows::Broadcast([0, 4]))
        );
        assert!(broadcast(&n, &[3, 2], [2, 3, 4]).is_err());
    }
}
