//! Quantized weights: a product whose weight is dequantized from constant integers
//! becomes one MatMulNBits that reads the packed integers (a QDQ export, an int4 model,
//! or gopt's own `--quantize`, which writes the same form: [`crate::quantize`]).
//!
//! - `fuse-dequantize-matmul`: `MatMul(A, DequantizeLinear(q[K, N], scale, zp))`, with
//!   per-tensor, per-column (axis 1) or blocked-along-K (axis 0, a power-of-two block
//!   of at least 16) parameters, = `MatMulNBits(A, pack(qᵀ), scaleᵀ, zpᵀ)`. Exact: the
//!   integers move, shifted by a constant that the zero point absorbs (i8 values
//!   `v` are stored as `v + 2^(bits−1)`); they are stored in 4 bits when every value
//!   and zero point fits (int4 weights imported one per byte), else 8. The packing is
//!   a lazy view of the weight ([`gopt_ir::Const::map`]): done once, when the plan's
//!   weights are written, for every bucket. (`-no-zero-point`: the same for a
//!   DequantizeLinear given two inputs.)
//! - `fuse-rotate-half-into-packed`: rotary's `rotate_half` of a packed product's output
//!   folded into its rows (B's rows and the zero points permuted per head, the scales
//!   and bias permuted with half negated), as `fuse-rotate-half-into-weight` does for a
//!   float weight.
//! - `fuse-sibling-packed`: packed products of one input with the same K, bits and
//!   block merged into one over all their rows (Q, K and V; gate and up), each a slice
//!   of it, as `fuse-sibling-matmul` merges float GEMMs.
//! - `fuse-packed-bias`: `MatMulNBits(..) + c` with `c` a constant over N = the bias
//!   input.
//! - `precision-packed` (with `--precision bf16|fp16`): A, the scales and the bias in
//!   the low type, the integers unchanged, fp32 accumulation in the kernel (on CUDA the
//!   GEMV then runs on tensor cores; with fp32 A it runs on CUDA cores, several times
//!   slower).

use super::packed_rows::{rotate_half, sibling};
use super::{add_const, add_op, attrs, dtype, konst, rule, shape, var, Rule};
use crate::analysis::{is_absent, Egraph};
use egg::{Id, Subst, Var};
use gopt_ir::ops::nn::nbits::{NBits, ZeroPoints};
use gopt_ir::ops::{ElementwiseOp, NnOp};
use gopt_ir::{Attr, Attrs, Const, DType, Op, Tensor};

/// The fusion table's quantized-weight rules.
pub fn rules() -> Vec<Rule> {
    vec![
        rule(
            "fuse-dequantize-matmul",
            "(MatMul ?f ?a (DequantizeLinear ?g ?w ?s ?z))",
            fuse_dequantize,
        ),
        rule(
            "fuse-dequantize-matmul-no-zero-point",
            "(MatMul ?f ?a (DequantizeLinear ?g ?w ?s))",
            fuse_dequantize,
        ),
        // rotate_half(T(R(MatMulNBits(x, B, s, z, bias)))) = T(R(MatMulNBits(x, B', s', z',
        // bias'))): rotary's rotate_half folded into the packed product's rows
        rule(
            "fuse-rotate-half-into-packed",
            "(Concat ?c (Neg ?n (Slice ?s1 (Transpose ?t (Reshape ?r (MatMulNBits ?f ?x ?b ?sc ?z ?gi ?bias) ?shape)) ?st1 ?en1 ?ax1 ?sp1)) (Slice ?s2 (Transpose ?t (Reshape ?r (MatMulNBits ?f ?x ?b ?sc ?z ?gi ?bias) ?shape)) ?st2 ?en2 ?ax2 ?sp2))",
            rotate_half,
        ),
        // Packed products of one input merged into one over all their rows
        rule(
            "fuse-sibling-packed",
            "(MatMulNBits ?f ?x ?b ?sc ?z ?gi ?bias)",
            sibling,
        ),
        rule(
            "fuse-packed-bias",
            "(Add ?f (MatMulNBits ?g ?a ?b ?s ?z ?x ?bias) ?c)",
            fuse_bias,
        ),
    ]
}

/// The precision rule for low type `low`.
pub fn precision(low: DType) -> Vec<Rule> {
    let build: super::Build = match low {
        DType::F16 => |e, id, s| lower(e, id, s, DType::F16),
        _ => |e, id, s| lower(e, id, s, DType::BF16),
    };
    vec![rule(
        "precision-packed",
        "(MatMulNBits ?f ?a ?b ?s ?z ?x ?bias)",
        build,
    )]
}

/// The class bound to `name`, if the pattern has it and it is not an omitted input.
pub(super) fn opt_var(eg: &Egraph, s: &Subst, name: &str) -> Option<Id> {
    let v: Var = name.parse().ok()?;
    s.get(v).copied().filter(|&id| !is_absent(eg, id))
}

/// Where a dequantized element `(k, n)` finds its parameters.
#[derive(Clone, Copy)]
enum Params {
    /// One scale for the tensor.
    Tensor,
    /// One per column n.
    Column,
    /// One per block of `block` along K, per column.
    Blocked(usize),
}

impl Params {
    fn index(self, k: usize, n: usize, cols: usize) -> usize {
        match self {
            Params::Tensor => 0,
            Params::Column => n,
            Params::Blocked(b) => (k / b) * cols + n,
        }
    }
}

fn fuse_dequantize(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    let a = var(s, "?a");
    let g = attrs(eg, s, "?g")?;
    let w = konst(eg, var(s, "?w"))?;
    let scale = konst(eg, var(s, "?s"))?;
    let zero = match opt_var(eg, s, "?z") {
        Some(z) => Some(konst(eg, z)?),
        None => None,
    };
    let dt = scale.dtype();
    if dtype(eg, a)? != dt || !matches!(dt, DType::F32 | DType::F16 | DType::BF16) {
        return None;
    }
    if g.dtype("output_dtype").ok()?.is_some_and(|o| o != dt) {
        return None;
    }
    let signed = match w.dtype() {
        DType::I8 => true,
        DType::U8 => false,
        _ => return None,
    };
    if zero.as_ref().is_some_and(|z| z.dtype() != w.dtype()) {
        return None;
    }
    let [k, n] = *w.shape() else { return None };
    let axis = g.int_or("axis", 1).ok()?;
    let axis = if axis < 0 { axis + 2 } else { axis };
    let bs = g.int_or("block_size", 0).ok()?;
    let default_block = k.next_power_of_two().clamp(16, 128);
    let (params, block) = match (scale.len(), bs, axis) {
        (1, 0, _) if scale.rank() <= 1 => (Params::Tensor, default_block),
        (len, 0, 1) if len == n && scale.rank() == 1 => (Params::Column, default_block),
        (_, b, 0) if b >= 16 && (b as usize).is_power_of_two() => {
            let b = b as usize;
            (scale.shape() == [k.div_ceil(b), n]).then_some(())?;
            (Params::Blocked(b), b)
        }
        _ => return None,
    };
    if zero.as_ref().is_some_and(|z| z.shape() != scale.shape()) {
        return None;
    }
    let zeros: Vec<i64> = match &zero {
        Some(z) => z.tensor().to_i64_vec(),
        None => vec![0],
    };
    // 4 bits when every stored value (and zero point) fits, shifted into 0..16.
    let (lo, hi) = w.with_tensor(range)?;
    let zlo = zeros.iter().copied().min().unwrap_or(0);
    let zhi = zeros.iter().copied().max().unwrap_or(0);
    let (lo, hi) = (lo.min(zlo), hi.max(zhi));
    let bits = match signed {
        true if lo >= -8 && hi <= 7 => 4,
        false if hi <= 15 => 4,
        _ => 8,
    };
    let offset: i64 = if signed { 1 << (bits - 1) } else { 0 };
    let nb = NBits {
        k,
        n,
        bits,
        block,
        blocks: k.div_ceil(block),
        blob: block * bits / 8,
        zero: ZeroPoints::Default,
        bias: false,
    };
    let sv = scale.tensor().to_f64_vec();
    let mut scales = Vec::with_capacity(n * nb.blocks);
    let mut zps = Vec::with_capacity(n * nb.blocks);
    for col in 0..n {
        for blk in 0..nb.blocks {
            let p = params.index(blk * block, col, n);
            scales.push(*sv.get(p)?);
            let z = if zero.is_some() { *zeros.get(p)? } else { 0 };
            zps.push((z + offset) as u32);
        }
    }
    let zero_form = if zps.iter().all(|&z| z == nb.default_zero()) {
        ZeroPoints::Default
    } else {
        ZeroPoints::Packed
    };
    let packed = packed_weight(&w, nb, offset);
    let scales = Tensor::from_f64s(dt, &[n * nb.blocks], &scales).ok()?;
    let b = add_const(eg, packed);
    let sc = add_const(eg, scales);
    let zp = match zero_form {
        ZeroPoints::Packed => {
            let nbz = NBits {
                zero: zero_form,
                ..nb
            };
            let bytes = gopt_ir::ops::nn::nbits::pack_zero_points(&nbz, &zps);
            let t = Tensor::U8(ndarray::ArrayD::from_shape_vec(vec![bytes.len()], bytes).ok()?);
            Some(add_const(eg, t))
        }
        ZeroPoints::Default | ZeroPoints::Float => None,
    };
    let mut f = Attrs::default();
    f.set("K", Attr::Int(k as i64));
    f.set("N", Attr::Int(n as i64));
    f.set("bits", Attr::Int(bits as i64));
    f.set("block_size", Attr::Int(block as i64));
    Some(add_op(
        eg,
        Op::Nn(NnOp::MatMulNBits),
        f,
        &[Some(a), Some(b), Some(sc), zp, None, None],
    ))
}

/// The smallest and largest integer of an i8/u8 tensor (a plain pass over the bytes,
/// which the compiler vectorizes: every bucket scans each weight once).
fn range(t: &Tensor) -> Option<(i64, i64)> {
    fn span<T: Copy + Ord + Into<i64>>(x: &ndarray::ArrayD<T>) -> Option<(i64, i64)> {
        let v = x.as_slice()?;
        let lo = v.iter().copied().min()?;
        let hi = v.iter().copied().max()?;
        Some((lo.into(), hi.into()))
    }
    match t {
        Tensor::I8(x) => span(x),
        Tensor::U8(x) => span(x),
        _ => None,
    }
}

/// `w` (`[K, N]`, i8 or u8) packed into MatMulNBits' `[N, blocks, blob]`, each value
/// shifted by `offset`: a lazy view, computed when the weights are written.
fn packed_weight(w: &Const, nb: NBits, offset: i64) -> Const {
    let params = [
        nb.k as u64,
        nb.n as u64,
        nb.bits as u64,
        nb.block as u64,
        offset as u64,
    ];
    let shape = vec![nb.n, nb.blocks, nb.blob];
    w.map("nbits-pack", &params, DType::U8, shape.clone(), move |t| {
        let mut b = vec![0u8; nb.weight_bytes()];
        let mut put = |k: usize, col: usize, v: i64| {
            let v = (v + offset) as u8;
            let (blk, j) = (k / nb.block, k % nb.block);
            let at = (col * nb.blocks + blk) * nb.blob;
            match nb.bits {
                8 => b[at + j] = v,
                _ => b[at + j / 2] |= (v & 0xf) << ((j % 2) * 4),
            }
        };
        match t {
            Tensor::I8(x) => x
                .iter()
                .enumerate()
                .for_each(|(i, &v)| put(i / nb.n, i % nb.n, i64::from(v))),
            Tensor::U8(x) => x
                .iter()
                .enumerate()
                .for_each(|(i, &v)| put(i / nb.n, i % nb.n, i64::from(v))),
            other => panic!(
                "nbits-pack of a {} weight (the rule checks i8/u8)",
                other.dtype()
            ),
        }
        Tensor::U8(ndarray::ArrayD::from_shape_vec(shape.clone(), b).expect("sizes match"))
    })
}

fn fuse_bias(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    if opt_var(eg, s, "?bias").is_some() || opt_var(eg, s, "?x").is_some() {
        return None;
    }
    let (a, c) = (var(s, "?a"), var(s, "?c"));
    let g = attrs(eg, s, "?g")?;
    let n = g.int("N").ok()?? as usize;
    konst(eg, c)?;
    if shape(eg, c)? != [n] || dtype(eg, c)? != dtype(eg, a)? {
        return None;
    }
    let z = opt_var(eg, s, "?z");
    Some(add_op(
        eg,
        Op::Nn(NnOp::MatMulNBits),
        g,
        &[
            Some(a),
            Some(var(s, "?b")),
            Some(var(s, "?s")),
            z,
            None,
            Some(c),
        ],
    ))
}

fn cast(eg: &mut Egraph, x: Id, to: DType) -> Id {
    let mut a = Attrs::default();
    a.set("to", Attr::DType(to));
    add_op(eg, Op::Elementwise(ElementwiseOp::Cast), a, &[Some(x)])
}

/// `fp32(MatMulNBits(low(A), B, low(scales), zp, low(bias)))` for an fp32 product that
/// does not compute a graph output.
fn lower(eg: &mut Egraph, id: Id, s: &Subst, low: DType) -> Option<Id> {
    let a = var(s, "?a");
    let c = eg.find(id);
    if dtype(eg, a)? != DType::F32 || eg.analysis.roots.iter().any(|r| eg.find(*r) == c) {
        return None;
    }
    if opt_var(eg, s, "?x").is_some() {
        return None;
    }
    let f = attrs(eg, s, "?f")?;
    let la = cast(eg, a, low);
    let ls = cast(eg, var(s, "?s"), low);
    let z = match opt_var(eg, s, "?z") {
        Some(z) if dtype(eg, z)? == DType::F32 => Some(cast(eg, z, low)),
        other => other,
    };
    let bias = opt_var(eg, s, "?bias").map(|b| cast(eg, b, low));
    let out = add_op(
        eg,
        Op::Nn(NnOp::MatMulNBits),
        f,
        &[Some(la), Some(var(s, "?b")), Some(ls), z, None, bias],
    );
    Some(cast(eg, out, DType::F32))
}
