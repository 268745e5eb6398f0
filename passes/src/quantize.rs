//! Weight-only quantization at compile time (`--quantize int8|int4`): every matrix
//! product's constant weight becomes integers in groups along K, one scale per group
//! (and a zero point when asymmetric), written as the standard ONNX form an exporter's
//! QDQ model has: `MatMul(A, DequantizeLinear(q, scale, zero_point, axis = 0,
//! block_size = group))`. The optimizer then treats a quantized float model and an
//! imported QDQ or int4 model alike: `fuse-dequantize-matmul` makes each such product
//! one MatMulNBits reading the packed weight ([`crate::rules::quantized`]).
//!
//! Rounding is to nearest, ties to even, per group of `group` consecutive weights of one
//! output column (the last group of a column may be shorter):
//!
//! - symmetric (the default): `scale = max|w| / qmax`, `q = clamp(rint(w / scale),
//!   −qmax − 1, qmax)` in i8, no zero point (`qmax` = 127 or 7);
//! - asymmetric: the group's range widened to hold 0, `scale = (max − min) / (2^bits −
//!   1)`, `zero_point = clamp(rint(−min / scale), 0, 2^bits − 1)`, `q = clamp(rint(w /
//!   scale) + zero_point, 0, 2^bits − 1)` in u8.
//!
//! The product that computes a graph output (an LM head) keeps its float weight, as AWQ
//! and GPTQ keep `lm_head`. A group of zeros gets scale 1. Quantization runs once on the model, before shape
//! buckets are made, so every bucket shares the same quantized weights (the weight
//! store keeps one copy). Each weight's relative L2 error `‖w − ŵ‖ / ‖w‖` is reported.

use gopt_ir::ops::NnOp;
use gopt_ir::{Attr, Attrs, Const, DType, Graph, Op, Tensor, ValueId};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Integer width of the quantized weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scheme {
    /// 8-bit weights: a quarter of fp32's bytes, half of bf16's.
    Int8,
    /// 4-bit weights, two per byte.
    Int4,
}

impl Scheme {
    /// Bits per weight.
    pub fn bits(self) -> u32 {
        match self {
            Scheme::Int8 => 8,
            Scheme::Int4 => 4,
        }
    }

    /// `int8`, `int4`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Int8 => "int8",
            Scheme::Int4 => "int4",
        }
    }
}

/// What `--quantize` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Quantize {
    /// The integer width.
    pub scheme: Scheme,
    /// Weights per group along K (a power of two, at least 16; default 128).
    pub group: usize,
    /// A zero point per group (the range's offset) instead of a range centred on 0.
    pub asymmetric: bool,
}

impl Quantize {
    /// The default group of [`Quantize::new`].
    pub const DEFAULT_GROUP: usize = 128;

    /// `scheme`, symmetric, groups of 128.
    pub fn new(scheme: Scheme) -> Quantize {
        Quantize {
            scheme,
            group: Quantize::DEFAULT_GROUP,
            asymmetric: false,
        }
    }

    /// Checks the group size.
    pub fn check(&self) -> Result<(), String> {
        if self.group < 16 || !self.group.is_power_of_two() {
            return Err(format!(
                "--group-size {}: expected a power of two, at least 16 (the packed kernels \
                 read whole groups)",
                self.group
            ));
        }
        Ok(())
    }
}

/// One quantized weight, for reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WeightReport {
    /// The weight's name in the model.
    pub name: String,
    /// `[K, N]`.
    pub shape: Vec<usize>,
    /// Bytes as stored before (its dtype).
    pub bytes_before: u64,
    /// Packed bytes after (weights, scales and zero points).
    pub bytes_after: u64,
    /// Relative L2 error of the dequantized weight.
    pub rel_error: f64,
}

/// Products whose weight is a constant of rank 2 with K ≥ 16 (`MatMul(A, W[K, N])`)
/// get their weight quantized; the reports say which and how well, in node order.
/// A `Gemm` by a constant weight (alpha and beta 1, no transA) is first written as
/// `MatMul + Add`. Products of other forms (a weight computed at run time, a batched
/// weight) are left as they are, and so is a product that computes a graph output (an
/// LM head: AWQ and GPTQ keep `lm_head` in float too).
pub fn quantize(g: &mut Graph, q: &Quantize) -> Vec<WeightReport> {
    gemms_as_matmuls(g);
    let consumers = g.consumers();
    let mut todo: Vec<(usize, ValueId)> = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let Some(Some(w)) = n.inputs.get(1).copied() else {
            continue;
        };
        let Some(k) = g.konst(w) else { continue };
        // The product computing a graph output (an LM head) keeps its weight, as AWQ
        // and GPTQ keep `lm_head`: its rounding would go straight into the logits, and
        // its fp32 result would need fp32 activations (CUDA cores) in the packed form.
        let output = n.outputs.iter().any(|o| g.outputs.contains(o));
        let eligible = n.op == Op::Nn(NnOp::MatMul)
            && !output
            && matches!(k.dtype(), DType::F32 | DType::F16 | DType::BF16)
            && k.rank() == 2
            && k.shape()[0] >= 16
            && !todo.iter().any(|&(_, v)| v == w);
        if eligible {
            todo.push((i, w));
        }
    }
    let done: Vec<(ValueId, Quantized)> = todo
        .par_iter()
        .map(|&(_, w)| (w, quantize_weight(g.konst(w).expect("checked"), q)))
        .collect();
    let mut reports = Vec::with_capacity(done.len());
    for (w, qw) in done {
        let name = g.value(w).name.clone();
        let (k, n) = (qw.q.shape()[0], qw.q.shape()[1]);
        let before = g.konst(w).map_or(0, |c| c.byte_size() as u64);
        let after = (k * n) as u64 * u64::from(q.scheme.bits()) / 8
            + (qw.scale.len() * qw.scale.dtype().size()) as u64
            + qw.zero.as_ref().map_or(0, |z| z.len() as u64);
        let qv = g.add_const(&format!("{name}__q{}", q.scheme.bits()), qw.q);
        let sv = g.add_const(&format!("{name}__scale"), qw.scale);
        let zv = qw
            .zero
            .map(|z| g.add_const(&format!("{name}__zero_point"), z));
        let mut attrs = Attrs::default();
        attrs.set("axis", Attr::Int(0));
        attrs.set("block_size", Attr::Int(q.group as i64));
        let out = format!("{name}__dequantized");
        let node = g.add_node(
            &out,
            Op::Nn(NnOp::DequantizeLinear),
            attrs,
            vec![Some(qv), Some(sv), zv],
            &[&out],
        );
        let dq = g.nodes[node.index()].outputs[0];
        for c in consumers.get(&w).into_iter().flatten() {
            let node = &mut g.nodes[c.index()];
            if node.op == Op::Nn(NnOp::MatMul) && node.inputs.get(1) == Some(&Some(w)) {
                node.inputs[1] = Some(dq);
            }
        }
        reports.push(WeightReport {
            name,
            shape: vec![k, n],
            bytes_before: before,
            bytes_after: after,
            rel_error: qw.rel_error,
        });
    }
    // The DequantizeLinear nodes were appended: the graph's order is restored.
    let _ = g.sort_nodes();
    reports
}

/// Each `Gemm(A, B, C)` with a constant 2-D float weight, `alpha = beta = 1` and no
/// `transA`, that does not compute a graph output, becomes `MatMul(A, W) + C` with `W =
/// B` or `Bᵀ` (a lazy view) `[K, N]`: the form the pass quantizes (exporters write
/// linear layers as either; GPT-2's are Gemms). The bias comes back into the packed
/// product through `fuse-packed-bias`.
fn gemms_as_matmuls(g: &mut Graph) {
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        if n.op != Op::Nn(NnOp::Gemm) || n.outputs.iter().any(|o| g.outputs.contains(o)) {
            continue;
        }
        let (Some(Some(a)), Some(Some(b))) = (n.inputs.first().copied(), n.inputs.get(1).copied())
        else {
            continue;
        };
        let c = n.inputs.get(2).copied().flatten();
        let one = |k: &str| n.attrs.float_or(k, 1.0).ok() == Some(1.0);
        let flag = |k: &str| n.attrs.int_or(k, 0).ok();
        let Some(w) = g.konst(b) else { continue };
        let ok = one("alpha")
            && (c.is_none() || one("beta"))
            && flag("transA") == Some(0)
            && matches!(flag("transB"), Some(0 | 1))
            && w.rank() == 2
            && matches!(w.dtype(), DType::F32 | DType::F16 | DType::BF16);
        if !ok {
            continue;
        }
        let kn = match flag("transB") {
            Some(1) => match w.transpose(&[1, 0]) {
                Ok(t) => t,
                Err(_) => continue,
            },
            _ => w.clone(),
        };
        let name = n.name.clone();
        let out = n.outputs[0];
        let wv = g.add_const(&format!("{name}__weight_kn"), kn);
        let mm_out = match c {
            Some(_) => g.add_value(&format!("{name}__product"), None),
            None => out,
        };
        let node = &mut g.nodes[i];
        node.op = Op::Nn(NnOp::MatMul);
        node.attrs = Attrs::default();
        node.inputs = vec![Some(a), Some(wv)];
        node.outputs = vec![mm_out];
        if let Some(c) = c {
            let add = Op::from_name("Add").expect("Add is an IR op");
            let id = g.add_node(
                &format!("{name}__bias"),
                add,
                Attrs::default(),
                vec![Some(mm_out), Some(c)],
                &[],
            );
            g.nodes[id.index()].outputs = vec![out];
        }
    }
}

/// A weight's quantized form.
struct Quantized {
    /// `[K, N]`, i8 (symmetric) or u8 (asymmetric).
    q: Tensor,
    /// `[⌈K / group⌉, N]`, the weight's dtype.
    scale: Tensor,
    /// Like `scale`, u8 (asymmetric only).
    zero: Option<Tensor>,
    rel_error: f64,
}

fn quantize_weight(w: &Const, q: &Quantize) -> Quantized {
    let (k, n) = (w.shape()[0], w.shape()[1]);
    let groups = k.div_ceil(q.group);
    let vals: Vec<f32> = w.with_tensor(|t| {
        let wide = t.cast(DType::F32);
        wide.as_array::<f32>()
            .map(|a| a.iter().copied().collect())
            .unwrap_or_default()
    });
    let bits = q.scheme.bits();
    let qmax = ((1u32 << (bits - 1)) - 1) as f32;
    let levels = ((1u32 << bits) - 1) as f32;
    let mut qs = vec![0i32; k * n];
    let mut scales = vec![0f32; groups * n];
    let mut zeros = vec![0u8; groups * n];
    let (mut err, mut norm) = (0f64, 0f64);
    for gi in 0..groups {
        let rows = gi * q.group..((gi + 1) * q.group).min(k);
        for col in 0..n {
            let group = rows.clone().map(|r| vals[r * n + col]);
            let (lo, hi) = group.fold((0f32, 0f32), |(a, b), v| (a.min(v), b.max(v)));
            let (scale, zero) = if q.asymmetric {
                let s = if hi > lo { (hi - lo) / levels } else { 1.0 };
                (s, (-lo / s).round_ties_even().clamp(0.0, levels))
            } else {
                let m = hi.max(-lo);
                (if m > 0.0 { m / qmax } else { 1.0 }, 0.0)
            };
            // The scale as stored (the weight's dtype) is the one rounding uses.
            let scale = stored(scale, w.dtype());
            scales[gi * n + col] = scale;
            zeros[gi * n + col] = zero as u8;
            for r in rows.clone() {
                let v = vals[r * n + col];
                let x = if q.asymmetric {
                    ((v / scale).round_ties_even() + zero).clamp(0.0, levels)
                } else {
                    (v / scale).round_ties_even().clamp(-qmax - 1.0, qmax)
                };
                qs[r * n + col] = x as i32;
                let back = (x - zero) * scale;
                err += f64::from(v - back).powi(2);
                norm += f64::from(v).powi(2);
            }
        }
    }
    let dt = w.dtype();
    let q_t = if q.asymmetric {
        Tensor::U8(to_array(&[k, n], qs.iter().map(|&v| v as u8).collect()))
    } else {
        Tensor::I8(to_array(&[k, n], qs.iter().map(|&v| v as i8).collect()))
    };
    let scale = Tensor::F32(to_array(&[groups, n], scales)).cast(dt);
    Quantized {
        q: q_t,
        scale,
        zero: q
            .asymmetric
            .then(|| Tensor::U8(to_array(&[groups, n], zeros))),
        rel_error: if norm > 0.0 { (err / norm).sqrt() } else { 0.0 },
    }
}

/// `v` rounded to `dt` (f32, f16 or bf16), as f32.
fn stored(v: f32, dt: DType) -> f32 {
    match dt {
        DType::F16 => half::f16::from_f32(v).to_f32(),
        DType::BF16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

fn to_array<T>(shape: &[usize], v: Vec<T>) -> ndarray::ArrayD<T> {
    ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(shape), v).expect("sizes match")
}
