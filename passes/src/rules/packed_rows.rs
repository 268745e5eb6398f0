//! The packed products' rows (`MatMulNBits` output columns), rearranged the way the
//! float rules rearrange a weight's columns: `fuse-sibling-packed` concatenates the rows
//! of products that read one input into one product, `fuse-rotate-half-into-packed`
//! permutes them per head for rotary's `rotate_half`. Rows are independent in the
//! packed layout (B `[N, blocks, blob]`, one scale and zero point per row and block),
//! so both are exact moves of bytes, with a sign folded into the scales.

use super::quantized::opt_var;
use super::{add_const, add_op, attrs, dtype, konst, shape, var};
use crate::analysis::{is_absent, Egraph};
use egg::{Id, Subst};
use gopt_ir::ops::NnOp;
use gopt_ir::{Attr, Attrs, Const, DType, Op, Tensor};

/// The source row and sign of row `j` after rotary's `rotate_half` per head of `d`
/// columns: row `i < d/2` of a head is minus row `i + d/2`, row `i ≥ d/2` is row
/// `i − d/2`.
fn rotated(j: usize, d: usize) -> (usize, bool) {
    let (head, i, h) = (j - j % d, j % d, d / 2);
    if i < h {
        (head + i + h, true)
    } else {
        (head + i - h, false)
    }
}

/// `t` (rows of `row` elements, one per output column) with its rows rotated per head,
/// the moved-down rows negated when `negate`.
fn rotate_rows(t: &Tensor, d: usize, row: usize, negate: bool) -> Option<Tensor> {
    let v = t.to_f64_vec();
    let rows = v.len() / row.max(1);
    let mut out = Vec::with_capacity(v.len());
    for j in 0..rows {
        let (src, neg) = rotated(j, d);
        let sign = if negate && neg { -1.0 } else { 1.0 };
        out.extend(v.get(src * row..(src + 1) * row)?.iter().map(|x| x * sign));
    }
    Tensor::from_f64s(t.dtype(), t.shape(), &out).ok()
}

/// `rotate_half(T(R(MatMulNBits(x, B, s, z, bias))))` = `T(R(MatMulNBits(x, B', s', z',
/// bias')))`: the packed rows of B and the zero points permuted per head (integers are
/// never negated), the scales and the bias permuted with the moved-down half negated,
/// so `(q − z) · (−s) = −w`, exact: rotary's rotate_half folded into the packed product,
/// as `fuse-rotate-half-into-weight` folds it into a float weight.
pub(super) fn rotate_half(eg: &mut Egraph, _: Id, s: &Subst) -> Option<Id> {
    use super::fusion::{lookup, slices_last};
    use gopt_ir::ops::ShapeOp;
    if opt_var(eg, s, "?gi").is_some() {
        return None;
    }
    let f = attrs(eg, s, "?f")?;
    let ch = ["?f", "?x", "?b", "?sc", "?z", "?gi", "?bias"].map(|v| eg.find(var(s, v)));
    let mm = eg.lookup(crate::lang::Term::Op(
        crate::lang::OpKey::one(Op::Nn(NnOp::MatMulNBits)),
        ch.to_vec(),
    ))?;
    let out = shape(eg, mm)?;
    let shape_id = var(s, "?shape");
    let split = shape(
        eg,
        lookup(eg, ShapeOp::Reshape, &[var(s, "?r"), mm, shape_id])?,
    )?;
    let (d, heads) = (*split.last()?, *split.get(split.len().checked_sub(2)?)?);
    let n = *out.last()?;
    if split.len() != out.len() + 1
        || split[..out.len() - 1] != out[..out.len() - 1]
        || heads * d != n
        || d % 2 != 0
    {
        return None;
    }
    let t = attrs(eg, s, "?t")?;
    let perm = t.ints("perm").ok()??.to_vec();
    let h = d as i64 / 2;
    if perm.last() != Some(&(split.len() as i64 - 1))
        || !slices_last(eg, s, 1, (split.len(), d as i64), (h, 2 * h))
        || !slices_last(eg, s, 2, (split.len(), d as i64), (0, h))
    {
        return None;
    }
    let b = konst(eg, var(s, "?b"))?;
    if b.dtype() != DType::U8 {
        return None;
    }
    let row = b.len() / n;
    let bshape = b.shape().to_vec();
    let b2 = b.map(
        "rotate-half-rows",
        &[d as u64],
        DType::U8,
        bshape,
        move |t| {
            let Tensor::U8(x) = t else {
                panic!(
                    "rotate-half-rows of a {} weight (the rule checks u8)",
                    t.dtype()
                )
            };
            let src: Vec<u8> = x.iter().copied().collect();
            let mut out = Vec::with_capacity(src.len());
            for j in 0..src.len() / row {
                let (from, _) = rotated(j, d);
                out.extend_from_slice(&src[from * row..(from + 1) * row]);
            }
            Tensor::U8(ndarray::ArrayD::from_shape_vec(t.shape(), out).expect("sizes match"))
        },
    );
    let sc = konst(eg, var(s, "?sc"))?;
    let sc2 = rotate_rows(sc.tensor(), d, sc.len() / n, true)?;
    let z2 = match opt_var(eg, s, "?z") {
        Some(z) => {
            let zt = konst(eg, z)?;
            Some(rotate_rows(zt.tensor(), d, zt.len() / n, false)?)
        }
        None => None,
    };
    let bias2 = match opt_var(eg, s, "?bias") {
        Some(bias) => Some(rotate_rows(konst(eg, bias)?.tensor(), d, 1, true)?),
        None => None,
    };
    let b2 = add_const(eg, b2);
    let sc2 = add_const(eg, sc2);
    let z2 = z2.map(|z| add_const(eg, z));
    let bias2 = bias2.map(|b| add_const(eg, b));
    let x = var(s, "?x");
    let g = add_op(
        eg,
        Op::Nn(NnOp::MatMulNBits),
        f,
        &[Some(x), Some(b2), Some(sc2), z2, None, bias2],
    );
    let r = attrs(eg, s, "?r")?;
    let rs = add_op(
        eg,
        Op::Shape(ShapeOp::Reshape),
        r,
        &[Some(g), Some(shape_id)],
    );
    Some(add_op(eg, Op::Shape(ShapeOp::Transpose), t, &[Some(rs)]))
}

/// A sibling of a packed product: its class, weight, scales, zero points and bias.
struct Sibling {
    class: Id,
    b: Id,
    scales: Id,
    zero: Option<Id>,
    bias: Option<Id>,
}

/// Every MatMulNBits reading the same input with the same K, bits and block, constant
/// operands and no `g_idx`, merged into one over the rows of all (B, scales, zero
/// points and bias concatenated along N); each member becomes a slice of its output.
/// As `fuse-sibling-matmul` for float weights: Q, K and V (and rotary's rotated copies
/// of Q and K) become one product, the gate and up projections another. The group is
/// recorded for extraction, which takes the merge only when all members move together.
pub(super) fn sibling(eg: &mut Egraph, id: Id, s: &Subst) -> Option<Id> {
    use crate::lang::{OpKey, Term};
    let x = var(s, "?x");
    let fa = attrs(eg, s, "?f")?;
    let same = |a: &Attrs| {
        ["K", "bits", "block_size"]
            .iter()
            .all(|k| a.int(k).ok().flatten() == fa.int(k).ok().flatten())
    };
    let key = OpKey::one(Op::Nn(NnOp::MatMulNBits));
    let mut members: Vec<Sibling> = Vec::new();
    let parents: Vec<Id> = eg[x].parents().collect();
    for p in parents {
        let p = eg.find(p);
        if members.iter().any(|m| m.class == p) {
            continue;
        }
        for n in &eg[p].nodes {
            let Term::Op(k, ch) = n else { continue };
            if *k != key || ch.len() != 7 || eg.find(ch[1]) != eg.find(x) {
                continue;
            }
            let Some(a) = crate::analysis::attrs_of(eg, ch[0]) else {
                continue;
            };
            if !same(a) || !is_absent(eg, ch[5]) {
                continue;
            }
            let opt = |c: Id| (!is_absent(eg, c)).then_some(c);
            let consts = [Some(ch[2]), Some(ch[3]), opt(ch[4]), opt(ch[6])];
            if consts.iter().flatten().any(|&c| konst(eg, c).is_none()) {
                continue;
            }
            members.push(Sibling {
                class: p,
                b: ch[2],
                scales: ch[3],
                zero: opt(ch[4]),
                bias: opt(ch[6]),
            });
            break;
        }
    }
    let triples: Vec<(Id, Id, Option<Id>)> =
        members.iter().map(|m| (m.class, m.b, m.bias)).collect();
    members.retain(|m| !super::fusion::is_merge_of(eg, m.class, &triples));
    // The same weight twice is one product with and without its bias: keep the biased.
    let keep: Vec<bool> = members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            !members.iter().enumerate().any(|(j, o)| {
                j != i
                    && eg.find(o.b) == eg.find(m.b)
                    && ((o.bias.is_some() && m.bias.is_none())
                        || (o.bias.is_some() == m.bias.is_some() && j < i))
            })
        })
        .collect();
    let mut members: Vec<Sibling> = members
        .into_iter()
        .zip(keep)
        .filter_map(|(m, k)| k.then_some(m))
        .collect();
    if members.len() < 2 {
        return None;
    }
    members.sort_by_key(|m| m.class);
    if members[0].class != eg.find(id) {
        return None;
    }
    let zero_forms: Vec<Option<DType>> = members
        .iter()
        .map(|m| m.zero.and_then(|z| dtype(eg, z)))
        .collect();
    if zero_forms.iter().any(|z| *z != zero_forms[0]) {
        return None;
    }
    let flat = |eg: &Egraph, c: Id| -> Option<Const> {
        let k = konst(eg, c)?;
        k.reshape(&[k.len()]).ok()
    };
    let mut bs = Vec::new();
    let mut scales = Vec::new();
    let mut zeros = Vec::new();
    let mut ns = Vec::new();
    for m in &members {
        let b = konst(eg, m.b)?;
        ns.push(*b.shape().first()?);
        bs.push(b);
        scales.push(flat(eg, m.scales)?);
        if let Some(z) = m.zero {
            zeros.push(flat(eg, z)?);
        }
    }
    let sdt = scales[0].dtype();
    let any_bias = members.iter().any(|m| m.bias.is_some());
    let mut biases = Vec::new();
    for (i, m) in members.iter().enumerate() {
        biases.push(match m.bias {
            Some(b) => flat(eg, b)?,
            None => Const::from(Tensor::zeros(sdt, &[ns[i]])),
        });
    }
    let n: usize = ns.iter().sum();
    let b = add_const(eg, Const::concat(&bs, 0).ok()?);
    let sc = add_const(eg, Const::concat(&scales, 0).ok()?);
    let z = match zeros.is_empty() {
        true => None,
        false => Some(add_const(eg, Const::concat(&zeros, 0).ok()?)),
    };
    let bias = match any_bias {
        true => Some(add_const(eg, Const::concat(&biases, 0).ok()?)),
        false => None,
    };
    let mut a = fa.clone();
    a.set("N", Attr::Int(n as i64));
    let merged = add_op(
        eg,
        Op::Nn(NnOp::MatMulNBits),
        a,
        &[Some(x), Some(b), Some(sc), z, None, bias],
    );
    if eg[merged].data.error.is_some() {
        return None;
    }
    let classes: Vec<Id> = members.iter().map(|m| m.class).collect();
    super::fusion::slice_members(eg, merged, &classes, &ns)
}
