//! Scaled dot-product attention (ONNX `Attention`) as every GPU backend reads it: the
//! operands, sizes and element strides of 4-D `[batch, heads, seq, head]` and 3-D
//! `[batch, seq, heads · head]` inputs (heads packed in the hidden dim, counted by
//! `q_num_heads` / `kv_num_heads`), the softmax scale, causality, grouped-query heads
//! (each KV head serves [`Dims::group`] query heads) and how the mask broadcasts.
//! What the tuned flash kernels do not cover is read into [`Extras`] (a KV cache with its
//! present outputs, `nonpad_kv_seqlen`, `qk_matmul_output` in any mode, softcap, sliding
//! windows, a value head size other than the key's); [`Attention::general`] then sends
//! the node to the backends' general kernel, which follows the interpreter step by step
//! (its roundings to the data's and the softmax precision's type included). The flash
//! kernels compute in f32 with one rounding at the store, whatever softmax precision
//! is asked.

use super::support::{input, opt_input, output, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{Attr, DType, Graph, Node, ValueId};

/// One attention node, ready to be written.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    /// The node.
    pub site: Site,
    /// Queries.
    pub q: ValueId,
    /// Keys.
    pub k: ValueId,
    /// Values (K's shape, but for the head size [`Dims::head_v`]).
    pub v: ValueId,
    /// The output (Q's shape, but for the head size [`Dims::head_v`]).
    pub out: ValueId,
    /// The dtype of Q, K, V and the output (f32, f16 or bf16).
    pub dtype: DType,
    /// Sizes and strides.
    pub dims: Dims,
    /// The factor on `Q·Kᵀ`.
    pub scale: f32,
    /// Its square root, as the interpreter computes it (in f64 from the attribute or
    /// `1/√head`): the general kernel scales Q and K by it each, as the interpreter does.
    pub sqrt_scale: f32,
    /// The type the interpreter rounds the softmax's steps to: `softmax_precision`, else
    /// the data's (f64 is f32 here: f32/f16/bf16 data is computed in f32). The general
    /// kernel follows it; the flash kernels compute the softmax in f32 whatever it is.
    pub softmax: DType,
    /// Key `j` is seen by query `i` only when `j <= i` (plus the offset, see [`Extras`]).
    pub causal: bool,
    /// The additive or boolean mask, if any.
    pub mask: Option<Mask>,
    /// What only the general kernel implements.
    pub extras: Extras,
}

impl Attention {
    /// Whether the node needs the general kernel: anything in [`Extras`] beyond the
    /// defaults, or a value head size other than the key's.
    pub fn general(&self) -> bool {
        let e = &self.extras;
        e.past.is_some()
            || e.present.iter().any(Option::is_some)
            || e.qk.is_some()
            || e.softcap != 0.0
            || e.window != [-1, -1]
            || e.nonpad.is_some()
            || self.dims.head_v != self.dims.head
    }
}

/// The attention features only the general kernel has (all off for the flash kernels).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Extras {
    /// The KV cache: `past_key` and `past_value`, `[batch, kv_heads, past, head]` each
    /// (contiguous), read before the new keys; its length is [`Dims::past`].
    pub past: Option<[ValueId; 2]>,
    /// `present_key` and `present_value` (`[batch, kv_heads, past + skv, head]`, the
    /// past and new keys and values concatenated), when the node has those outputs.
    pub present: [Option<ValueId>; 2],
    /// `qk_matmul_output` (`[batch, q_heads, sq, past + skv]`) and what it holds.
    pub qk: Option<(ValueId, QkMode)>,
    /// `softcap`: scores become `cap · tanh(score / cap)` when positive.
    pub softcap: f32,
    /// `left_window_size`, `right_window_size` (-1: unbounded): key `j` is masked when
    /// `pos - j > left` or `j - pos > right`, `pos` the query's position.
    pub window: [i64; 2],
    /// `nonpad_kv_seqlen` (i64 `[batch]`): keys at or past it are masked, and the query
    /// block starts at position `nonpad[b] - sq` (for causality and windows).
    pub nonpad: Option<ValueId>,
}

/// What `qk_matmul_output` holds (`qk_matmul_output_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QkMode {
    /// 0: the scaled `Q·Kᵀ`.
    Raw,
    /// 1: after softcap.
    Capped,
    /// 2: after softcap, plus the mask and the causal/window/padding masks (`-inf`).
    Biased,
    /// 3: the softmax.
    Probs,
}

impl QkMode {
    /// The mode's number in the attribute (and in the kernels).
    pub fn code(self) -> u32 {
        match self {
            QkMode::Raw => 0,
            QkMode::Capped => 1,
            QkMode::Biased => 2,
            QkMode::Probs => 3,
        }
    }
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
    /// New keys (K's and V's rows).
    pub skv: usize,
    /// Keys of the KV cache, before the new ones (0 without one).
    pub past: usize,
    /// Head size of Q and K.
    pub head: usize,
    /// Head size of V and the output.
    pub head_v: usize,
    /// 3-D inputs: the heads packed in the hidden dim.
    pub packed: bool,
    /// Element strides of Q: between batches, heads and rows.
    pub q_strides: [usize; 3],
    /// Element strides of K (and of V while its head size is K's): between batches,
    /// heads and rows.
    pub kv_strides: [usize; 3],
    /// Element strides of V: between batches, heads and rows.
    pub v_strides: [usize; 3],
    /// Element strides of the output (Q's while the head sizes agree, unless Q is read
    /// in place from a wider tensor).
    pub out_strides: [usize; 3],
    /// The first element of Q, K and V (columns of one wider tensor read in place).
    pub offsets: [usize; 3],
}

/// Element strides between batches, heads and rows of `h` heads of size `d` over `s`
/// rows, packed (3-D) or not.
fn layout_strides(packed: bool, h: usize, s: usize, d: usize) -> [usize; 3] {
    if packed {
        [s * h * d, d, h * d]
    } else {
        [h * s * d, s * d, d]
    }
}

impl Dims {
    /// 4-D (`packed` false) or 3-D layouts of these sizes (no KV cache, V's head size
    /// K's: see [`Dims::with_head_v`]).
    pub fn new(
        batch: usize,
        (q_heads, kv_heads): (usize, usize),
        (sq, skv): (usize, usize),
        head: usize,
        packed: bool,
    ) -> Dims {
        let kv_strides = layout_strides(packed, kv_heads, skv, head);
        Dims {
            batch,
            q_heads,
            kv_heads,
            sq,
            skv,
            past: 0,
            head,
            head_v: head,
            packed,
            q_strides: layout_strides(packed, q_heads, sq, head),
            kv_strides,
            v_strides: kv_strides,
            out_strides: layout_strides(packed, q_heads, sq, head),
            offsets: [0; 3],
        }
    }

    /// The same layout with V's (and the output's) head size `head_v`.
    pub fn with_head_v(self, head_v: usize) -> Dims {
        Dims {
            head_v,
            v_strides: layout_strides(self.packed, self.kv_heads, self.skv, head_v),
            out_strides: layout_strides(self.packed, self.q_heads, self.sq, head_v),
            ..self
        }
    }

    /// Query heads per KV head.
    pub fn group(&self) -> usize {
        self.q_heads / self.kv_heads
    }

    /// Keys each query row scores: the cache's and the new ones.
    pub fn total(&self) -> usize {
        self.past + self.skv
    }

    /// The shape of Q (`kv` false) or of K in this layout.
    pub fn shape(&self, kv: bool) -> Vec<usize> {
        self.shape_with(kv, self.head)
    }

    /// The shape of Q (`kv` false) or K, with head size `d`.
    fn shape_with(&self, kv: bool, d: usize) -> Vec<usize> {
        let (h, s) = if kv {
            (self.kv_heads, self.skv)
        } else {
            (self.q_heads, self.sq)
        };
        if self.packed {
            vec![self.batch, s, h * d]
        } else {
            vec![self.batch, h, s, d]
        }
    }
}

/// The mask, broadcast like the reference to `[batch, q_heads, sq, total keys]`.
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
    let past = past(g, node, &mut dims, dtype)?;
    let extras = extras(g, node, &attrs, &dims, past, dtype)?;
    let (mut q, mut k, mut v) = (q, k, v);
    if let Some(p) = strided_reads
        .then(|| super::absorb::attention_in_place(g, node))
        .flatten()
    {
        (q, k, v) = (p.source, p.source, p.source);
        let row = |s: usize, d: usize| [s * p.width, d, p.width];
        dims.q_strides = row(dims.sq, dims.head);
        dims.kv_strides = row(dims.skv, dims.head);
        dims.v_strides = row(dims.skv, dims.head_v);
        dims.offsets = p.offsets;
    }
    let scale = attrs
        .scale
        .unwrap_or_else(|| (1.0 / (dims.head as f64).sqrt()) as f32);
    if !scale.is_finite() || scale < 0.0 {
        return Err(unsupported(node, &format!("a scale of {scale}")));
    }
    let sqrt_scale = attrs
        .scale
        .map_or(1.0 / (dims.head as f64).sqrt(), f64::from)
        .sqrt() as f32;
    let softmax = match attrs.softmax.unwrap_or(dtype) {
        DType::F64 => DType::F32,
        d => d,
    };
    Ok(Attention {
        site: Site::of(node),
        q,
        k,
        v,
        out,
        dtype,
        dims,
        scale,
        sqrt_scale,
        softmax,
        causal: attrs.causal,
        mask: mask(g, node, &dims)?,
        extras,
    })
}

/// The attributes the kernels follow.
struct Attrs {
    scale: Option<f32>,
    causal: bool,
    q_heads: Option<usize>,
    kv_heads: Option<usize>,
    softcap: f32,
    window: [i64; 2],
    qk_mode: QkMode,
    softmax: Option<DType>,
}

/// Reads the attributes, refusing every one that changes the result in a way the
/// kernels do not implement.
fn attributes(node: &Node) -> Result<Attrs> {
    let mut a = Attrs {
        scale: None,
        causal: false,
        q_heads: None,
        kv_heads: None,
        softcap: 0.0,
        window: [-1, -1],
        qk_mode: QkMode::Raw,
        softmax: None,
    };
    for (key, value) in &node.attrs.0 {
        let bad = |what: &str| Err(unsupported(node, what));
        match (key.as_str(), value) {
            ("scale", Attr::Float(s)) => a.scale = Some(*s),
            ("is_causal", Attr::Int(c)) => a.causal = *c != 0,
            ("softcap", Attr::Float(c)) if c.is_finite() && *c >= 0.0 => a.softcap = *c,
            ("left_window_size", Attr::Int(w)) if *w >= -1 => a.window[0] = *w,
            ("right_window_size", Attr::Int(w)) if *w >= -1 => a.window[1] = *w,
            ("q_num_heads", Attr::Int(h)) if *h > 0 => a.q_heads = Some(*h as usize),
            ("kv_num_heads", Attr::Int(h)) if *h > 0 => a.kv_heads = Some(*h as usize),
            ("qk_matmul_output_mode", Attr::Int(m)) => {
                a.qk_mode = match m {
                    0 => QkMode::Raw,
                    1 => QkMode::Capped,
                    2 => QkMode::Biased,
                    3 => QkMode::Probs,
                    other => return bad(&format!("qk_matmul_output_mode {other}")),
                }
            }
            // The interpreter computes f32/f16/bf16 data in f32, rounding the softmax's
            // steps to this type (f64 rounds nothing there).
            ("softmax_precision", Attr::DType(d)) if d.is_float() => a.softmax = Some(*d),
            ("softmax_precision", Attr::Int(code)) => {
                a.softmax = Some(match code {
                    1 => DType::F32,
                    10 => DType::F16,
                    11 => DType::F64,
                    16 => DType::BF16,
                    other => return bad(&format!("softmax_precision {other}")),
                })
            }
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
        (q, k, v) => {
            return Err(unsupported(
                node,
                &format!("Q, K and V of ranks {q}, {k}, {v}, not all 4-D or all 3-D"),
            ))
        }
    };
    let r = qs.len();
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
    let (head, head_v) = if packed {
        (qs[2] / hq, vs[2] / hk)
    } else {
        (qs[3], vs[3])
    };
    let d = Dims::new(qs[0], (hq, hk), (qs[r - 2], ks[r - 2]), head, packed).with_head_v(head_v);
    if qs != d.shape(false)
        || ks != d.shape(true)
        || vs != d.shape_with(true, head_v)
        || os != d.shape_with(false, head_v)
    {
        return Err(bad());
    }
    if qs.contains(&0) || d.skv == 0 || head_v == 0 {
        return Err(unsupported(node, "empty tensors"));
    }
    Ok(d)
}

/// The KV cache (inputs 4 and 5), when the node has one: its length goes to `d.past`.
fn past(g: &Graph, node: &Node, d: &mut Dims, dtype: DType) -> Result<Option<[ValueId; 2]>> {
    let (pk, pv) = match (opt_input(node, 4), opt_input(node, 5)) {
        (Some(pk), Some(pv)) => (pk, pv),
        (None, None) => return Ok(None),
        (Some(_), None) | (None, Some(_)) => {
            return Err(unsupported(
                node,
                "past_key without past_value or the reverse",
            ))
        }
    };
    let (kdt, ks) = typed(g, node, pk)?;
    let (vdt, vs) = typed(g, node, pv)?;
    let len = ks.get(2).copied().unwrap_or(0);
    let want = |hd: usize| vec![d.batch, d.kv_heads, len, hd];
    if kdt != dtype || vdt != dtype || ks != want(d.head) || vs != want(d.head_v) {
        return Err(unsupported(
            node,
            &format!("past_key {kdt}{ks:?} and past_value {vdt}{vs:?} for these Q, K, V"),
        ));
    }
    d.past = len;
    Ok(Some([pk, pv]))
}

/// The KV cache, present and qk outputs, `nonpad_kv_seqlen`, softcap and windows.
fn extras(
    g: &Graph,
    node: &Node,
    attrs: &Attrs,
    d: &Dims,
    past: Option<[ValueId; 2]>,
    dtype: DType,
) -> Result<Extras> {
    let out = |k: usize, shape: Vec<usize>| -> Result<Option<ValueId>> {
        let Some(&v) = node.outputs.get(k) else {
            return Ok(None);
        };
        let (dt, s) = typed(g, node, v)?;
        if dt != dtype || s != shape {
            return Err(unsupported(
                node,
                &format!("output {k} of {dt}{s:?} (expected {dtype}{shape:?})"),
            ));
        }
        Ok(Some(v))
    };
    let cache = |hd: usize| vec![d.batch, d.kv_heads, d.total(), hd];
    let present = [out(1, cache(d.head))?, out(2, cache(d.head_v))?];
    let qk = out(3, vec![d.batch, d.q_heads, d.sq, d.total()])?.map(|v| (v, attrs.qk_mode));
    if node.outputs.len() > 4 {
        return Err(unsupported(node, "more than four outputs"));
    }
    let nonpad = opt_input(node, 6);
    if let Some(n) = nonpad {
        let (dt, s) = typed(g, node, n)?;
        if past.is_some() || dt != DType::I64 || s != [d.batch] {
            return Err(unsupported(
                node,
                &format!("nonpad_kv_seqlen {dt}{s:?} (i64 [batch], without past_key)"),
            ));
        }
    }
    if node.inputs.len() > 7 {
        return Err(unsupported(node, "more than seven inputs"));
    }
    Ok(Extras {
        past,
        present,
        qk,
        softcap: attrs.softcap,
        window: attrs.window,
        nonpad,
    })
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
    let full = [d.batch, d.q_heads, d.sq, d.total()];
    // As the reference: a last dim shorter than the keys is padded with -inf (so a last
    // dim of 1 masks every key but the first); other dims broadcast from 1.
    let cols = m4[3];
    if cols == 0 || cols > d.total() || (0..3).any(|a| m4[a] != 1 && m4[a] != full[a]) {
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
    use crate::lower::support::test_graph as graph;

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

    #[test]
    fn a_value_head_size_of_its_own_moves_v_and_the_output() {
        let d = Dims::new(2, (6, 2), (5, 7), 8, true).with_head_v(10);
        assert_eq!(d.kv_strides, [7 * 16, 8, 16]);
        assert_eq!(d.v_strides, [7 * 20, 10, 20]);
        assert_eq!(d.out_strides, [5 * 60, 10, 60]);
        assert_eq!(d.shape_with(true, 10), [2, 7, 20]);
        let d = Dims::new(2, (6, 2), (5, 7), 8, false).with_head_v(10);
        assert_eq!(d.v_strides, [2 * 70, 70, 10]);
        assert_eq!(d.out_strides, [6 * 50, 50, 10]);
    }

    #[test]
    fn a_kv_cache_with_its_outputs_needs_the_general_kernel() {
        let g = graph(
            r#"graph "g"(%0 "q": f32[2,3,4,8], %1 "k": f32[2,3,6,8], %2 "v": f32[2,3,6,10], %3 "pk": f32[2,3,12,8], %4 "pv": f32[2,3,12,10]) -> (%5, %6, %7, %8) {
  %5 "y": f32[2,3,4,10], %6 "ck": f32[2,3,18,8], %7 "cv": f32[2,3,18,10], %8 "qk": f32[2,3,4,18] = Attention "a"(%0, %1, %2, _, %3, %4) {softcap = 2.0, qk_matmul_output_mode = 3, softmax_precision = 1}
}"#,
        );
        let a = lower(&g, &g.nodes[0], false).unwrap_or_else(|e| panic!("{e}"));
        assert!(a.general());
        assert_eq!((a.dims.past, a.dims.total(), a.dims.head_v), (12, 18, 10));
        assert_eq!(a.extras.softcap, 2.0);
        assert!(a.extras.present.iter().all(Option::is_some));
        assert_eq!(a.extras.qk.map(|(_, m)| m), Some(QkMode::Probs));
        assert_eq!(a.softmax, DType::F32);
    }
}
