//! The nn family against naive references at awkward sizes: MatMul/Gemm against a
//! triple loop, Conv/ConvTranspose against direct (de)convolution, pools at ceil_mode
//! edges, quantization rounding, Einsum, and shape inference with symbolic dims.

use gopt_ir::dim::{shape_of, Dim};
use gopt_ir::ops::{EvalCx, InferCx, InferInput};
use gopt_ir::{Attr, Attrs, DType, Node, Op, Tensor, TensorType, ValueId};

/// Deterministic pseudo-random values in [-1, 1).
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

fn tensor(dt: DType, shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f64s(dt, shape, &data(n, seed)).expect("shape matches")
}

fn node(op: &str, attrs: &[(&str, Attr)], n_in: usize, n_out: usize) -> Node {
    let mut a = Attrs::default();
    for (k, v) in attrs {
        a.set(k, v.clone());
    }
    Node {
        name: "n".into(),
        op: Op::from_name(op).expect("known op"),
        attrs: a,
        inputs: (0..n_in).map(|i| Some(ValueId(i as u32))).collect(),
        outputs: (0..n_out).map(|i| ValueId(100 + i as u32)).collect(),
    }
}

fn eval(n: &Node, inputs: &[Option<&Tensor>]) -> Vec<Tensor> {
    let lookup = |_: &str| None;
    let cx = EvalCx { lookup: &lookup };
    n.op.eval(&cx, n, inputs).expect("eval succeeds")
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

#[track_caller]
fn assert_close(got: &Tensor, shape: &[usize], want: &[f64], tol: f64) {
    assert_eq!(got.shape(), shape, "shape");
    let g = got.to_f64_vec();
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "element {i}: got {a}, want {b}"
        );
    }
}

/// Naive batched matmul of row-major `[batch, m, k]` x `[batch, k, n]` (batch 1 = shared).
fn naive_mm(a: &[f64], b: &[f64], batch: (usize, usize), m: usize, k: usize, n: usize) -> Vec<f64> {
    let nb = batch.0.max(batch.1);
    let mut out = vec![0.0; nb * m * n];
    for bi in 0..nb {
        let (ao, bo) = (
            if batch.0 == 1 { 0 } else { bi * m * k },
            if batch.1 == 1 { 0 } else { bi * k * n },
        );
        for i in 0..m {
            for j in 0..n {
                out[(bi * m + i) * n + j] =
                    (0..k).map(|p| a[ao + i * k + p] * b[bo + p * n + j]).sum();
            }
        }
    }
    out
}

#[test]
fn matmul_awkward_sizes_match_naive() {
    for &(m, k, n) in &[
        (3, 50, 783),
        (783, 3, 50),
        (50, 783, 3),
        (1, 783, 50),
        (3, 3, 3),
    ] {
        for (dt, tol) in [(DType::F32, 1e-4), (DType::F64, 1e-12)] {
            let (a, b) = (tensor(dt, &[2, m, k], 1), tensor(dt, &[k, n], 2));
            let got = &eval(&node("MatMul", &[], 2, 1), &[Some(&a), Some(&b)])[0];
            let want = naive_mm(&a.to_f64_vec(), &b.to_f64_vec(), (2, 1), m, k, n);
            assert_close(got, &[2, m, n], &want, tol);
        }
    }
}

#[test]
fn matmul_broadcasts_batches_and_promotes_vectors() {
    let (a, b) = (
        tensor(DType::F32, &[1, 5, 7], 3),
        tensor(DType::F32, &[3, 7, 50], 4),
    );
    let got = &eval(&node("MatMul", &[], 2, 1), &[Some(&a), Some(&b)])[0];
    let want = naive_mm(&a.to_f64_vec(), &b.to_f64_vec(), (1, 3), 5, 7, 50);
    assert_close(got, &[3, 5, 50], &want, 1e-5);

    let (v, w) = (
        tensor(DType::F32, &[50], 5),
        tensor(DType::F32, &[50, 3], 6),
    );
    let got = &eval(&node("MatMul", &[], 2, 1), &[Some(&v), Some(&w)])[0];
    let want = naive_mm(&v.to_f64_vec(), &w.to_f64_vec(), (1, 1), 1, 50, 3);
    assert_close(got, &[3], &want, 1e-5);

    let h = tensor(DType::F16, &[4, 50], 7);
    let g = tensor(DType::F16, &[50, 3], 8);
    let got = &eval(&node("MatMul", &[], 2, 1), &[Some(&h), Some(&g)])[0];
    assert_eq!(got.dtype(), DType::F16);
    let want = naive_mm(&h.to_f64_vec(), &g.to_f64_vec(), (1, 1), 4, 50, 3);
    assert_close(got, &[4, 3], &want, 2e-3);
}

#[test]
fn gemm_transposes_scales_and_broadcasts_bias() {
    let (m, k, n) = (50, 783, 3);
    for (ta, tb) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
        let a = tensor(DType::F32, &if ta == 1 { [k, m] } else { [m, k] }, 9);
        let b = tensor(DType::F32, &if tb == 1 { [n, k] } else { [k, n] }, 10);
        let c = tensor(DType::F32, &[m, 1], 11);
        let attrs = [
            ("transA", Attr::Int(ta)),
            ("transB", Attr::Int(tb)),
            ("alpha", Attr::Float(0.5)),
            ("beta", Attr::Float(-2.0)),
        ];
        let got = &eval(&node("Gemm", &attrs, 3, 1), &[Some(&a), Some(&b), Some(&c)])[0];
        let (av, bv, cv) = (a.to_f64_vec(), b.to_f64_vec(), c.to_f64_vec());
        let at = |i: usize, p: usize| {
            if ta == 1 {
                av[p * m + i]
            } else {
                av[i * k + p]
            }
        };
        let bt = |p: usize, j: usize| {
            if tb == 1 {
                bv[j * k + p]
            } else {
                bv[p * n + j]
            }
        };
        let want: Vec<f64> = (0..m * n)
            .map(|ij| {
                let (i, j) = (ij / n, ij % n);
                0.5 * (0..k).map(|p| at(i, p) * bt(p, j)).sum::<f64>() - 2.0 * cv[i]
            })
            .collect();
        assert_close(got, &[m, n], &want, 1e-4);
    }
}

/// Direct N-D convolution: `x [N, C, *S]`, `w [M, C/g, *K]`, explicit pads.
#[allow(clippy::too_many_arguments)]
fn naive_conv(
    x: &[f64],
    xs: &[usize],
    w: &[f64],
    ws: &[usize],
    group: usize,
    strides: &[usize],
    dil: &[usize],
    pads: &[usize],
) -> (Vec<usize>, Vec<f64>) {
    let d = xs.len() - 2;
    let out_sp: Vec<usize> = (0..d)
        .map(|i| {
            (xs[i + 2] + pads[i] + pads[d + i] - dil[i] * (ws[i + 2] - 1) - 1) / strides[i] + 1
        })
        .collect();
    let (n, c, m) = (xs[0], xs[1], ws[0]);
    let (cg, mg) = (c / group, m / group);
    let taps: usize = ws[2..].iter().product();
    let pout: usize = out_sp.iter().product();
    let pin: usize = xs[2..].iter().product();
    let unflat = |mut f: usize, dims: &[usize]| {
        let mut v = vec![0; dims.len()];
        for i in (0..dims.len()).rev() {
            v[i] = f % dims[i];
            f /= dims[i];
        }
        v
    };
    let mut out = vec![0.0; n * m * pout];
    for ni in 0..n {
        for oc in 0..m {
            let g = oc / mg;
            for o in 0..pout {
                let oi = unflat(o, &out_sp);
                let mut acc = 0.0;
                for ci in 0..cg {
                    for t in 0..taps {
                        let ki = unflat(t, &ws[2..]);
                        let mut idx = 0usize;
                        let mut ok = true;
                        for dd in 0..d {
                            let c =
                                (oi[dd] * strides[dd] + ki[dd] * dil[dd]) as i64 - pads[dd] as i64;
                            if c < 0 || c >= xs[dd + 2] as i64 {
                                ok = false;
                            }
                            idx = idx * xs[dd + 2] + c.max(0) as usize;
                        }
                        if ok {
                            acc += x[(ni * c + g * cg + ci) * pin + idx]
                                * w[(oc * cg + ci) * taps + t];
                        }
                    }
                }
                out[(ni * m + oc) * pout + o] = acc;
            }
        }
    }
    let mut shape = vec![n, m];
    shape.extend(out_sp);
    (shape, out)
}

#[test]
fn conv_matches_direct_convolution() {
    // (x shape, w shape, group, strides, dilations, pads)
    type Case = (
        Vec<usize>,
        Vec<usize>,
        usize,
        Vec<usize>,
        Vec<usize>,
        Vec<usize>,
    );
    let cases: Vec<Case> = vec![
        (
            vec![2, 4, 11, 9],
            vec![6, 2, 3, 2],
            2,
            vec![2, 1],
            vec![1, 2],
            vec![1, 0, 2, 1],
        ),
        (
            vec![1, 6, 13, 13],
            vec![6, 1, 3, 3],
            6,
            vec![2, 2],
            vec![1, 1],
            vec![1, 1, 1, 1],
        ),
        (
            vec![1, 3, 12, 12],
            vec![9, 1, 3, 3],
            3,
            vec![1, 1],
            vec![2, 2],
            vec![2, 2, 2, 2],
        ),
        (
            vec![1, 5, 50],
            vec![3, 5, 3],
            1,
            vec![3],
            vec![2],
            vec![0, 4],
        ),
        (
            vec![1, 2, 5, 6, 7],
            vec![4, 2, 2, 3, 2],
            1,
            vec![1, 2, 2],
            vec![1, 1, 2],
            vec![1, 0, 1, 0, 1, 1],
        ),
        (
            vec![2, 16, 7, 7],
            vec![8, 16, 1, 1],
            1,
            vec![1, 1],
            vec![1, 1],
            vec![0, 0, 0, 0],
        ),
    ];
    for (i, (xs, ws, group, strides, dil, pads)) in cases.into_iter().enumerate() {
        let (x, w) = (
            tensor(DType::F32, &xs, 20 + i as u64),
            tensor(DType::F32, &ws, 40 + i as u64),
        );
        let b = tensor(DType::F32, &[ws[0]], 60 + i as u64);
        let to_i = |v: &[usize]| ints(&v.iter().map(|&x| x as i64).collect::<Vec<_>>());
        let attrs = [
            ("group", Attr::Int(group as i64)),
            ("strides", to_i(&strides)),
            ("dilations", to_i(&dil)),
            ("pads", to_i(&pads)),
        ];
        let got = &eval(&node("Conv", &attrs, 3, 1), &[Some(&x), Some(&w), Some(&b)])[0];
        let (shape, mut want) = naive_conv(
            &x.to_f64_vec(),
            &xs,
            &w.to_f64_vec(),
            &ws,
            group,
            &strides,
            &dil,
            &pads,
        );
        let plane: usize = shape[2..].iter().product();
        let bv = b.to_f64_vec();
        want.iter_mut()
            .enumerate()
            .for_each(|(j, v)| *v += bv[(j / plane) % ws[0]]);
        assert_close(got, &shape, &want, 1e-4);
    }
}

#[test]
fn conv_transpose_is_the_adjoint_scatter() {
    // x [1, 2, 3, 4], w [2, 3, 3, 2], strides [2, 3], pads [1, 0, 0, 1], output_padding [1, 1]
    let (x, w) = (
        tensor(DType::F64, &[1, 2, 3, 4], 70),
        tensor(DType::F64, &[2, 3, 3, 2], 71),
    );
    let attrs = [
        ("strides", ints(&[2, 3])),
        ("pads", ints(&[1, 0, 0, 1])),
        ("output_padding", ints(&[1, 1])),
    ];
    let got = &eval(&node("ConvTranspose", &attrs, 2, 1), &[Some(&x), Some(&w)])[0];
    // Output dims: 2*(3-1)+1+3-1-0 = 7 and 3*(4-1)+1+2-0-1 = 11.
    let (oh, ow) = (7, 11);
    let (xv, wv) = (x.to_f64_vec(), w.to_f64_vec());
    let mut want = vec![0.0; 3 * oh * ow];
    for c in 0..2 {
        for (i, j) in (0..3).flat_map(|i| (0..4).map(move |j| (i, j))) {
            for m in 0..3 {
                for (ki, kj) in (0..3).flat_map(|a| (0..2).map(move |b| (a, b))) {
                    let (y, z) = (i as i64 * 2 - 1 + ki as i64, j as i64 * 3 + kj as i64);
                    if y >= 0 && (y as usize) < oh && z >= 0 && (z as usize) < ow {
                        want[(m * oh + y as usize) * ow + z as usize] +=
                            xv[(c * 3 + i) * 4 + j] * wv[((c * 3 + m) * 3 + ki) * 2 + kj];
                    }
                }
            }
        }
    }
    assert_close(got, &[1, 3, oh, ow], &want, 1e-12);
}

#[test]
fn pool_ceil_mode_edges() {
    // 2x2 input, kernel 1, stride 2, ceil: the second window would start in the padding
    // region past the input, so the output stays 1x1.
    let x = Tensor::from_f64s(DType::F32, &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]).expect("shape");
    let attrs = [
        ("kernel_shape", ints(&[1, 1])),
        ("strides", ints(&[2, 2])),
        ("ceil_mode", Attr::Int(1)),
    ];
    assert_close(
        &eval(&node("MaxPool", &attrs, 1, 1), &[Some(&x)])[0],
        &[1, 1, 1, 1],
        &[1.0],
        0.0,
    );

    // 1x5 input, kernel 2, stride 2, ceil: a third, partial window [4, 5).
    let x = Tensor::from_f64s(DType::F32, &[1, 1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]).expect("shape");
    let attrs = [
        ("kernel_shape", ints(&[2])),
        ("strides", ints(&[2])),
        ("ceil_mode", Attr::Int(1)),
    ];
    assert_close(
        &eval(&node("AveragePool", &attrs, 1, 1), &[Some(&x)])[0],
        &[1, 1, 3],
        &[1.5, 3.5, 5.0],
        1e-7,
    );
    let outs = eval(&node("MaxPool", &attrs, 1, 2), &[Some(&x)]);
    assert_close(&outs[0], &[1, 1, 3], &[2.0, 4.0, 5.0], 0.0);
    assert_eq!(outs[1].to_i64_vec(), vec![1, 3, 4]);

    // With pads [1, 1] and count_include_pad, the divisor counts padding inside the
    // padded input but not the window's overhang past it.
    let mut attrs = attrs.to_vec();
    attrs.push(("pads", ints(&[1, 1])));
    attrs.push(("count_include_pad", Attr::Int(1)));
    // Windows start at -1, 1, 3; one at 5 would start in the end padding, so ceil_mode
    // drops it. The padded extent is [-1, 6).
    assert_close(
        &eval(&node("AveragePool", &attrs, 1, 1), &[Some(&x)])[0],
        &[1, 1, 3],
        &[0.5, 2.5, 4.5],
        1e-7,
    );
}

#[test]
fn quantize_rounds_half_to_even_and_saturates() {
    let x =
        Tensor::from_f64s(DType::F32, &[6], &[0.5, 1.5, 2.5, -0.5, 300.0, -300.0]).expect("shape");
    let s = Tensor::scalar_f64(DType::F32, 1.0);
    let z = Tensor::scalar_f64(DType::I8, 0.0);
    let got = &eval(
        &node("QuantizeLinear", &[], 3, 1),
        &[Some(&x), Some(&s), Some(&z)],
    )[0];
    assert_eq!(got.dtype(), DType::I8);
    assert_eq!(got.to_i64_vec(), vec![0, 2, 2, 0, 127, -128]);
    let q = Tensor::from_f64s(DType::U8, &[3], &[0.0, 128.0, 255.0]).expect("shape");
    let zq = Tensor::scalar_f64(DType::U8, 128.0);
    let s = Tensor::scalar_f64(DType::F32, 0.5);
    let got = &eval(
        &node("DequantizeLinear", &[], 3, 1),
        &[Some(&q), Some(&s), Some(&zq)],
    )[0];
    assert_close(got, &[3], &[-64.0, 0.0, 63.5], 0.0);
}

#[test]
fn einsum_diagonal_ellipsis_and_contraction() {
    let a = tensor(DType::F64, &[2, 3, 3], 80);
    let got = &eval(
        &node(
            "Einsum",
            &[("equation", Attr::Str("...ii->...i".into()))],
            1,
            1,
        ),
        &[Some(&a)],
    )[0];
    let av = a.to_f64_vec();
    let want: Vec<f64> = (0..6).map(|k| av[(k / 3) * 9 + (k % 3) * 4]).collect();
    assert_close(got, &[2, 3], &want, 1e-12);

    let (x, y) = (
        tensor(DType::F64, &[2, 3, 4], 81),
        tensor(DType::F64, &[4, 5], 82),
    );
    let got = &eval(
        &node("Einsum", &[("equation", Attr::Str("bij,jk".into()))], 2, 1),
        &[Some(&x), Some(&y)],
    )[0];
    let want = naive_mm(&x.to_f64_vec(), &y.to_f64_vec(), (1, 1), 6, 4, 5);
    assert_close(got, &[2, 3, 5], &want, 1e-12);
}

fn infer(n: &Node, tys: &[TensorType]) -> Vec<TensorType> {
    let ins: Vec<Option<InferInput>> = tys
        .iter()
        .map(|t| Some(InferInput { ty: t, value: None }))
        .collect();
    n.op.infer(&mut InferCx::default(), n, &ins)
        .expect("inference succeeds")
}

#[test]
fn infer_keeps_symbolic_batch_dims() {
    let b = Dim::sym("batch");
    let seq = Dim::sym("seq");
    let x = TensorType::new(
        DType::F32,
        vec![b.clone(), 3u64.into(), 224u64.into(), 224u64.into()],
    );
    let w = TensorType::new(DType::F32, shape_of(&[16, 3, 3, 3]));
    let attrs = [("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 1, 1]))];
    let out = infer(&node("Conv", &attrs, 2, 1), &[x, w.clone()]);
    assert_eq!(
        out[0].shape,
        vec![b.clone(), 16u64.into(), 112u64.into(), 112u64.into()]
    );

    let a = TensorType::new(DType::F32, vec![b.clone(), seq.clone(), 96u64.into()]);
    let m = TensorType::new(DType::F32, shape_of(&[96, 288]));
    let out = infer(&node("MatMul", &[], 2, 1), &[a, m]);
    assert_eq!(out[0].shape, vec![b.clone(), seq.clone(), 288u64.into()]);

    // Symbolic spatial dims: stride 1, pad 1, kernel 3 keeps the size; stride 2 halves
    // it (rounding up).
    let h = Dim::sym("h");
    let x = TensorType::new(
        DType::F32,
        vec![b.clone(), 3u64.into(), h.clone(), h.clone()],
    );
    let out = infer(
        &node("Conv", &[("pads", ints(&[1, 1, 1, 1]))], 2, 1),
        &[x.clone(), w.clone()],
    );
    assert_eq!(out[0].shape[2], h);
    let out = infer(&node("Conv", &attrs, 2, 1), &[x, w]);
    assert_eq!(out[0].shape[2], h.add(&Dim::Known(1)).div(&Dim::Known(2)));

    let x = TensorType::new(
        DType::F32,
        vec![b.clone(), 8u64.into(), 7u64.into(), 7u64.into()],
    );
    let attrs = [
        ("kernel_shape", ints(&[3, 3])),
        ("strides", ints(&[2, 2])),
        ("ceil_mode", Attr::Int(1)),
    ];
    let out = infer(&node("MaxPool", &attrs, 1, 2), &[x]);
    assert_eq!(out[0].shape, vec![b, 8u64.into(), 3u64.into(), 3u64.into()]);
    assert_eq!(out[1].dtype, DType::I64);
}
