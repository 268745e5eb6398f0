//! Attention family checked against naive f64 implementations at awkward sizes: causal
//! and padding masks with grouped-query heads, 3-D inputs with a KV cache, short
//! additive masks, rotary embeddings and symbolic shape inference.

use gopt_ir::dim::Dim;
use gopt_ir::ops::{EvalCx, InferCx, InferInput};
use gopt_ir::{Attr, Attrs, DType, Node, Op, Tensor, TensorType, ValueId};

/// Deterministic values in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn f32s(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f64s(DType::F32, shape, &data(n, seed)).unwrap()
}

fn node(op: &str, attrs: &[(&str, Attr)], n_in: usize, n_out: usize) -> Node {
    let mut a = Attrs::default();
    for (k, v) in attrs {
        a.set(k, v.clone());
    }
    Node {
        name: "n".into(),
        op: Op::from_name(op).unwrap(),
        attrs: a,
        inputs: (0..n_in).map(|i| Some(ValueId(i as u32))).collect(),
        outputs: (0..n_out).map(|i| ValueId(100 + i as u32)).collect(),
    }
}

fn eval(n: &Node, inputs: &[Option<&Tensor>]) -> Vec<Tensor> {
    let cx = EvalCx { lookup: &|_| None };
    n.op.eval(&cx, n, inputs).unwrap()
}

#[track_caller]
fn assert_close(got: &Tensor, want: &[f64], tol: f64) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "element count");
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol, "element {i}: got {a}, want {b}");
    }
}

/// Naive attention over 4-D row-major data; `allowed(b, i, j)` masks keys. Rows with
/// no allowed key are zero.
#[allow(clippy::too_many_arguments)]
fn naive(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (b, hq, hk, sq, skv, d, dv): (usize, usize, usize, usize, usize, usize, usize),
    allowed: impl Fn(usize, usize, usize) -> bool,
) -> Vec<f64> {
    let scale = 1.0 / (d as f64).sqrt();
    let mut y = vec![0.0; b * hq * sq * dv];
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / (hq / hk);
            for i in 0..sq {
                let qrow = &q[((bi * hq + h) * sq + i) * d..][..d];
                let scores: Vec<Option<f64>> = (0..skv)
                    .map(|j| {
                        allowed(bi, i, j).then(|| {
                            let krow = &k[((bi * hk + kh) * skv + j) * d..][..d];
                            scale * qrow.iter().zip(krow).map(|(a, b)| a * b).sum::<f64>()
                        })
                    })
                    .collect();
                let max = scores
                    .iter()
                    .flatten()
                    .cloned()
                    .fold(f64::NEG_INFINITY, f64::max);
                if max == f64::NEG_INFINITY {
                    continue;
                }
                let e: Vec<f64> = scores
                    .iter()
                    .map(|s| s.map_or(0.0, |s| (s - max).exp()))
                    .collect();
                let sum: f64 = e.iter().sum();
                for (j, w) in e.iter().enumerate() {
                    for c in 0..dv {
                        y[((bi * hq + h) * sq + i) * dv + c] +=
                            w / sum * v[((bi * hk + kh) * skv + j) * dv + c];
                    }
                }
            }
        }
    }
    y
}

#[test]
fn causal_gqa_with_padding_and_bool_mask() {
    let (b, hq, hk, sq, skv, d, dv) = (2, 6, 2, 5, 7, 3, 5);
    let q = f32s(&[b, hq, sq, d], 1);
    let k = f32s(&[b, hk, skv, d], 2);
    let v = f32s(&[b, hk, skv, dv], 3);
    // Bool mask over (q, kv), broadcast over batch and heads; one key hidden per row.
    let mask_vals: Vec<bool> = (0..sq * skv).map(|n| (n * 7) % 5 != 0).collect();
    let mask =
        Tensor::Bool(ndarray::ArrayD::from_shape_vec(vec![sq, skv], mask_vals.clone()).unwrap());
    let lens = Tensor::from_i64s(&[7, 4]);
    let n = node("Attention", &[("is_causal", Attr::Int(1))], 7, 1);
    let y = &eval(
        &n,
        &[
            Some(&q),
            Some(&k),
            Some(&v),
            Some(&mask),
            None,
            None,
            Some(&lens),
        ],
    )[0];
    assert_eq!(y.shape(), [b, hq, sq, dv]);
    let lens = [7i64, 4];
    let want = naive(
        &q.to_f64_vec(),
        &k.to_f64_vec(),
        &v.to_f64_vec(),
        (b, hq, hk, sq, skv, d, dv),
        |bi, i, j| {
            let offset = lens[bi] - sq as i64;
            mask_vals[i * skv + j] && (j as i64) <= i as i64 + offset && (j as i64) < lens[bi]
        },
    );
    assert_close(y, &want, 1e-5);
    // Batch 1 has offset 4 - 5 = -1: its first query sees no key and is zero.
    let yv = y.to_f64_vec();
    let row = &yv[((hq) * sq) * dv..][..dv];
    assert!(row.iter().all(|&x| x == 0.0));
}

#[test]
fn three_d_with_cache_matches_naive() {
    let (b, hq, hk, sq, past, new, d, dv) = (1, 4, 2, 3, 2, 3, 2, 3);
    let skv = past + new;
    let q = f32s(&[b, sq, hq * d], 4);
    let k = f32s(&[b, new, hk * d], 5);
    let v = f32s(&[b, new, hk * dv], 6);
    let pk = f32s(&[b, hk, past, d], 7);
    let pv = f32s(&[b, hk, past, dv], 8);
    let attrs = [
        ("q_num_heads", Attr::Int(hq as i64)),
        ("kv_num_heads", Attr::Int(hk as i64)),
        ("is_causal", Attr::Int(1)),
    ];
    let n = node("Attention", &attrs, 6, 4);
    let outs = eval(
        &n,
        &[Some(&q), Some(&k), Some(&v), None, Some(&pk), Some(&pv)],
    );
    assert_eq!(outs[0].shape(), [b, sq, hq * dv]);
    assert_eq!(outs[1].shape(), [b, hk, skv, d]);
    assert_eq!(outs[2].shape(), [b, hk, skv, dv]);
    assert_eq!(outs[3].shape(), [b, hq, sq, skv]);
    // Rebuild 4-D layouts for the naive version.
    let heads = |t: &Tensor, s: usize, h: usize, hd: usize| -> Vec<f64> {
        let x = t.to_f64_vec();
        let mut out = vec![0.0; h * s * hd];
        for si in 0..s {
            for hi in 0..h {
                for c in 0..hd {
                    out[(hi * s + si) * hd + c] = x[(si * h + hi) * hd + c];
                }
            }
        }
        out
    };
    let q4 = heads(&q, sq, hq, d);
    let (kn, vn) = (heads(&k, new, hk, d), heads(&v, new, hk, dv));
    let cat = |p: &Tensor, n: &[f64], hd: usize| -> Vec<f64> {
        let pv = p.to_f64_vec();
        let mut out = Vec::new();
        for h in 0..hk {
            out.extend_from_slice(&pv[h * past * hd..(h + 1) * past * hd]);
            out.extend_from_slice(&n[h * new * hd..(h + 1) * new * hd]);
        }
        out
    };
    let (k4, v4) = (cat(&pk, &kn, d), cat(&pv, &vn, dv));
    assert_close(&outs[1], &k4, 0.0);
    let y4 = naive(&q4, &k4, &v4, (b, hq, hk, sq, skv, d, dv), |_, i, j| {
        j <= i + past
    });
    let mut want = vec![0.0; b * sq * hq * dv];
    for h in 0..hq {
        for i in 0..sq {
            for c in 0..dv {
                want[(i * hq + h) * dv + c] = y4[(h * sq + i) * dv + c];
            }
        }
    }
    assert_close(&outs[0], &want, 1e-5);
}

#[test]
fn short_float_mask_is_padded_with_neg_inf() {
    let (sq, skv, d) = (3, 5, 4);
    let q = f32s(&[1, 1, sq, d], 9);
    let k = f32s(&[1, 1, skv, d], 10);
    let v = f32s(&[1, 1, skv, d], 11);
    let bias = f32s(&[sq, 2], 12);
    let n = node(
        "Attention",
        &[("qk_matmul_output_mode", Attr::Int(3))],
        4,
        4,
    );
    let outs = eval(&n, &[Some(&q), Some(&k), Some(&v), Some(&bias)]);
    let probs = outs[3].to_f64_vec();
    for i in 0..sq {
        let row = &probs[i * skv..(i + 1) * skv];
        assert!(
            row[2..].iter().all(|&p| p == 0.0),
            "padded keys get no weight"
        );
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-6);
    }
}

#[test]
fn attention_infers_symbolic_shapes() {
    let sym = |s: &str| Dim::sym(s);
    let q = TensorType::new(DType::F16, vec![sym("b"), sym("s"), Dim::Known(64)]);
    let k = TensorType::new(DType::F16, vec![sym("b"), sym("t"), Dim::Known(32)]);
    let pk = TensorType::new(
        DType::F16,
        vec![sym("b"), Dim::Known(2), sym("p"), Dim::Known(16)],
    );
    let ins = [
        Some(InferInput {
            ty: &q,
            value: None,
        }),
        Some(InferInput {
            ty: &k,
            value: None,
        }),
        Some(InferInput {
            ty: &k,
            value: None,
        }),
        None,
        Some(InferInput {
            ty: &pk,
            value: None,
        }),
        Some(InferInput {
            ty: &pk,
            value: None,
        }),
    ];
    let attrs = [
        ("q_num_heads", Attr::Int(4)),
        ("kv_num_heads", Attr::Int(2)),
    ];
    let n = node("Attention", &attrs, 6, 4);
    let tys = n.op.infer(&mut InferCx::default(), &n, &ins).unwrap();
    let total = sym("p").add(&sym("t"));
    assert_eq!(tys[0].shape, vec![sym("b"), sym("s"), Dim::Known(64)]);
    assert_eq!(
        tys[1].shape,
        vec![sym("b"), Dim::Known(2), total.clone(), Dim::Known(16)]
    );
    assert_eq!(tys[3].shape, vec![sym("b"), Dim::Known(4), sym("s"), total]);
}

#[test]
fn rotary_halves_and_interleaved_rotate_pairs() {
    // One head of size 4, two positions; angles from the caches.
    let x =
        Tensor::from_f64s(DType::F32, &[1, 1, 2, 4], &[1., 2., 3., 4., 5., 6., 7., 8.]).unwrap();
    let (c, s) = (0.6f64, 0.8f64);
    let cos = Tensor::from_f64s(DType::F32, &[2, 2], &[1., 1., c, c]).unwrap();
    let sin = Tensor::from_f64s(DType::F32, &[2, 2], &[0., 0., s, s]).unwrap();
    let pos = Tensor::from_i64s(&[0, 1]).reshape(&[1, 2]).unwrap();
    let n = node("RotaryEmbedding", &[], 4, 1);
    let y = &eval(&n, &[Some(&x), Some(&cos), Some(&sin), Some(&pos)])[0];
    // Halves: pairs (0,2), (1,3).
    let want = [
        1.,
        2.,
        3.,
        4.,
        5. * c - 7. * s,
        6. * c - 8. * s,
        5. * s + 7. * c,
        6. * s + 8. * c,
    ];
    assert_close(y, &want, 1e-6);
    let n = node("RotaryEmbedding", &[("interleaved", Attr::Int(1))], 4, 1);
    let y = &eval(&n, &[Some(&x), Some(&cos), Some(&sin), Some(&pos)])[0];
    // Interleaved: pairs (0,1), (2,3).
    let want = [
        1.,
        2.,
        3.,
        4.,
        5. * c - 6. * s,
        5. * s + 6. * c,
        7. * c - 8. * s,
        7. * s + 8. * c,
    ];
    assert_close(y, &want, 1e-6);
}

#[test]
fn tensor_scatter_wraps_in_circular_mode() {
    let cache = Tensor::zeros(DType::F32, &[2, 4, 1]);
    let upd = Tensor::from_f64s(DType::F32, &[2, 2, 1], &[1., 2., 3., 4.]).unwrap();
    let idx = Tensor::from_i64s(&[3, 1]);
    let n = node(
        "TensorScatter",
        &[
            ("mode", Attr::Str("circular".into())),
            ("axis", Attr::Int(1)),
        ],
        3,
        1,
    );
    let y = &eval(&n, &[Some(&cache), Some(&upd), Some(&idx)])[0];
    assert_close(y, &[2., 0., 0., 1., 0., 3., 4., 0.], 0.0);
    let n = node("TensorScatter", &[("axis", Attr::Int(1))], 3, 1);
    let cx = EvalCx { lookup: &|_| None };
    assert!(n
        .op
        .eval(&cx, &n, &[Some(&cache), Some(&upd), Some(&idx)])
        .is_err());
}
