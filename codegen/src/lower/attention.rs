//! Scaled dot-product attention (ONNX `Attention`) as every GPU backend reads it: the
//! operands, sizes and element strides of 4-D `[batch, heads, seq, head]` and 3-D
//! `[batch, seq, heads · head]` inputs (heads packed in the hidden dim, counted by
//! `q_num_heads` / `kv_num_heads`), the softmax scale, causality, grouped-query heads
//! (each KV head serves [`Dims::group`] query heads) and how the mask broadcasts.
//! Whatever changes the result in a way no GPU kernel implements is refused here, by
//! name: a KV cache, the present/qk outputs, softcap, sliding windows, a value head size
//! other than the key's, a softmax precision above fp32.

use super::support::{input, opt_input, output, typed, unsupported};
use crate::Result;
use gopt_ir::{Attr, DType, Graph, Node, ValueId};

/// One attention node, ready to be written.
pub struct Attention {
    /// Queries.
    pub q: ValueId,
    /// Keys.
    pub k: ValueId,
    /// Values (K's shape).
    pub v: ValueId,
    /// The output (Q's shape).
    pub out: ValueId,
    /// The dtype of Q, K, V and the output (f32, f16 or bf16).
    pub dtype: DType,
    /// Sizes and strides.
    pub dims: Dims,
    /// The factor on `Q·Kᵀ`.
    pub scale: f32,
    /// Key `j` is seen by query `i` only when `j <= i`.
    pub causal: bool,
    /// The additive or boolean mask, if any.
    pub mask: Option<Mask>,
}

/// Sizes and element strides of one attention node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// Batch.
    pub batch: usize,
    /// Query (and output) heads.
    pub q_heads: usize,
    /// Key and value heads (dividing `q_heads`).
    pub kv_heads: usize,
    /// Query rows.
    pub sq: usize,
    /// Keys.
    pub skv: usize,
    /// Head size of Q, K and V.
    pub head: usize,
    /// 3-D inputs: the heads packed in the hidden dim.
    pub packed: bool,
    /// Element strides of Q and the output: between batches, heads and rows.
    pub q_strides: [usize; 3],
    /// Element strides of K and V: between batches, heads and rows.
    pub kv_strides: [usize; 3],
    /// Element strides of the output (Q's, unless Q is read in place from a wider
    /// tensor).
    pub out_strides: [usize; 3],
    /// The first element of Q, K and V (columns of one wider tensor read in place).
    pub offsets: [usize; 3],
}

impl Dims {
    /// 4-D (`packed` false) or 3-D layouts of these sizes.
    pub fn new(
        batch: usize,
        (q_heads, kv_heads): (usize, usize),
        (sq, skv): (usize, usize),
        head: usize,
        packed: bool,
    ) -> Dims {
        let strides = |h: usize, s: usize| {
            if packed {
                [s * h * head, head, h * head]
            } else {
                [h * s * head, s * head, head]
            }
        };
        Dims {
            batch,
            q_heads,
            kv_heads,
            sq,
            skv,
            head,
            packed,
            q_strides: strides(q_heads, sq),
            kv_strides: strides(kv_heads, skv),
            out_strides: strides(q_heads, sq),
            offsets: [0; 3],
        }
    }

    /// Query heads per KV head.
    pub fn group(&self) -> usize {
        self.q_heads / self.kv_heads
    }

    /// The shape of Q (`kv` false) or of K and V in this layout.
    pub fn shape(&self, kv: bool) -> Vec<usize> {
        let (h, s) = if kv {
            (self.kv_heads, self.skv)
        } else {
            (self.q_heads, self.sq)
        };
        if self.packed {
            vec![self.batch, s, h * self.head]
        } else {
            vec![self.batch, h, s, self.head]
        }
    }
}

/// The mask, broadcast like the reference to `[batch, q_heads, sq, skv]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mask {
    /// Its value.
    pub value: ValueId,
    /// f32, f16 or bf16 (added to the scores) or bool (`false` masks).
    pub dtype: DType,
    /// Its last dim: keys at or past it are masked (a short mask, as the reference pads
    /// it with `-inf`).
    pub cols: usize,
    /// Element strides per batch, query head and query row; 0 where it broadcasts.
    pub strides: [usize; 3],
}

/// Reads attention node `node` of `g`; with `strided_reads`, Q, K and V cut from one
/// tensor are read from it in place ([`super::absorb`]).
pub fn lower(g: &Graph, node: &Node, strided_reads: bool) -> Result<Attention> {
    if node.outputs.len() != 1 {
        return Err(unsupported(
            node,
            "the present_key/present_value/qk_matmul outputs",
        ));
    }
    if node.inputs.iter().skip(4).any(Option::is_some) {
        return Err(unsupported(
            node,
            "a KV cache (past_key/past_value/nonpad_kv_seqlen)",
        ));
    }
    let (q, k, v, out) = (
        input(node, 0)?,
        input(node, 1)?,
        input(node, 2)?,
        output(node, 0)?,
    );
    let (dtype, qs) = typed(g, node, q)?;
    let (kdt, ks) = typed(g, node, k)?;
    let (vdt, vs) = typed(g, node, v)?;
    let (odt, os) = typed(g, node, out)?;
    if kdt != dtype || vdt != dtype || odt != dtype {
        return Err(unsupported(
            node,
            "Q, K, V and the output in different types",
        ));
    }
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
        return Err(unsupported(node, &format!("{dtype} data")));
    }
    let attrs = attributes(node)?;
    let mut dims = dims(node, &attrs, [&qs, &ks, &vs, &os])?;
    let (mut q, mut k, mut v) = (q, k, v);
    if let Some(p) = strided_reads
        .then(|| super::absorb::attention_in_place(g, node))
        .flatten()
    {
        (q, k, v) = (p.source, p.source, p.source);
        let row = |s: usize| [s * p.width, dims.head, p.width];
        dims.q_strides = row(dims.sq);
        dims.kv_strides = row(dims.skv);
        dims.offsets = p.offsets;
    }
    let scale = attrs
        .scale
        .unwrap_or_else(|| (1.0 / (dims.head as f64).sqrt()) as f32);
    if !scale.is_finite() {
        return Err(unsupported(node, &format!("a scale of {scale}")));
    }
    Ok(Attention {
        q,
        k,
        v,
        out,
        dtype,
        dims,
        scale,
        causal: attrs.causal,
        mask: mask(g, node, &dims)?,
    })
}

/// The attributes the kernels follow.
struct Attrs {
    scale: Option<f32>,
    causal: bool,
    q_heads: Option<usize>,
    kv_heads: Option<usize>,
}

/// Reads the attributes, refusing every one that changes the result in a way the
/// kernels do not implement.
fn attributes(node: &Node) -> Result<Attrs> {
    let mut a = Attrs {
        scale: None,
        causal: false,
        q_heads: None,
        kv_heads: None,
    };
    for (key, value) in &node.attrs.0 {
        let bad = |what: &str| Err(unsupported(node, what));
        match (key.as_str(), value) {
            ("scale", Attr::Float(s)) => a.scale = Some(*s),
            ("is_causal", Attr::Int(c)) => a.causal = *c != 0,
            ("softcap", Attr::Float(c)) if *c == 0.0 => {}
            ("softcap", _) => return bad("softcap"),
            ("left_window_size" | "right_window_size", Attr::Int(-1)) => {}
            ("left_window_size" | "right_window_size", _) => return bad("sliding windows"),
            ("q_num_heads", Attr::Int(h)) if *h > 0 => a.q_heads = Some(*h as usize),
            ("kv_num_heads", Attr::Int(h)) if *h > 0 => a.kv_heads = Some(*h as usize),
            // Only selects what the fourth output holds; the kernels write the first only.
            ("qk_matmul_output_mode", Attr::Int(_)) => {}
            // The kernels' softmax is fp32, at least as precise as any of these.
            (
                "softmax_precision",
                Attr::DType(DType::F32 | DType::F16 | DType::BF16) | Attr::Int(1 | 10 | 16),
            ) => {}
            ("softmax_precision", _) => return bad("a softmax precision above fp32"),
            (other, _) => return bad(&format!("the attribute `{other}` = {value:?}")),
        }
    }
    Ok(a)
}

/// Sizes from the shapes of Q, K, V and the output, all 4-D or all 3-D.
fn dims(node: &Node, attrs: &Attrs, [qs, ks, vs, os]: [&[usize]; 4]) -> Result<Dims> {
    let packed = match (qs.len(), ks.len(), vs.len()) {
        (4, 4, 4) => false,
        (3, 3, 3) => true,
        _ => return Err(unsupported(node, "Q, K and V not all 4-D or all 3-D")),
    };
    let r = qs.len();
    if vs[r - 1] != ks[r - 1] && vs[..r - 1] == ks[..r - 1] {
        return Err(unsupported(
            node,
            "a value head size other than the key head size",
        ));
    }
    let (hq, hk) = match (packed, attrs.q_heads, attrs.kv_heads) {
        (false, a, b) if a.is_some_and(|h| h != qs[1]) || b.is_some_and(|h| h != ks[1]) => {
            return Err(unsupported(
                node,
                "head counts that differ from the inputs' shapes",
            ))
        }
        (false, _, _) => (qs[1], ks[1]),
        (true, Some(hq), Some(hk)) => (hq, hk),
        (true, _, _) => {
            return Err(unsupported(
                node,
                "3-D inputs without q_num_heads/kv_num_heads",
            ))
        }
    };
    let bad = || {
        unsupported(
            node,
            &format!("Q {qs:?}, K {ks:?}, V {vs:?}, output {os:?}"),
        )
    };
    if hq == 0 || hk == 0 || !hq.is_multiple_of(hk) {
        return Err(bad());
    }
    let head = if packed { qs[2] / hq } else { qs[3] };
    let d = Dims::new(qs[0], (hq, hk), (qs[r - 2], ks[r - 2]), head, packed);
    if qs != d.shape(false) || ks != d.shape(true) || vs != ks || os != qs {
        return Err(bad());
    }
    if qs.contains(&0) || d.skv == 0 {
        return Err(unsupported(node, "empty tensors"));
    }
    Ok(d)
}

/// The mask (input 3), when the node has one.
fn mask(g: &Graph, node: &Node, d: &Dims) -> Result<Option<Mask>> {
    let Some(value) = opt_input(node, 3) else {
        return Ok(None);
    };
    let (dtype, ms) = typed(g, node, value)?;
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::Bool) {
        return Err(unsupported(node, &format!("a {dtype} mask")));
    }
    if ms.is_empty() || ms.len() > 4 {
        return Err(unsupported(node, "a mask that is not 1-D to 4-D"));
    }
    let mut m4 = vec![1usize; 4 - ms.len()];
    m4.extend_from_slice(&ms);
    let full = [d.batch, d.q_heads, d.sq, d.skv];
    // As the reference: a last dim shorter than the keys is padded with -inf (so a last
    // dim of 1 masks every key but the first); other dims broadcast from 1.
    let cols = m4[3];
    if cols == 0 || cols > d.skv || (0..3).any(|a| m4[a] != 1 && m4[a] != full[a]) {
        return Err(unsupported(
            node,
            &format!("a mask of shape {ms:?} that does not broadcast to {full:?}"),
        ));
    }
    let dense = [cols * m4[2] * m4[1], cols * m4[2], cols];
    let strides = std::array::from_fn(|a| if m4[a] == 1 { 0 } else { dense[a] });
    Ok(Some(Mask {
        value,
        dtype,
        cols,
        strides,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_strides_step_over_the_other_heads() {
        let d = Dims::new(2, (6, 2), (5, 7), 8, true);
        assert_eq!(d.q_strides, [5 * 48, 8, 48]);
        assert_eq!(d.kv_strides, [7 * 16, 8, 16]);
        assert_eq!(d.shape(true), [2, 7, 16]);
        assert_eq!(d.group(), 3);
        let d = Dims::new(2, (6, 2), (5, 7), 8, false);
        assert_eq!(d.q_strides, [6 * 40, 40, 8]);
        assert_eq!(d.shape(false), [2, 6, 5, 8]);
    }
}
