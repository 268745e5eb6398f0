//! Unit tests for the semantics the conformance cases touch lightly: empty groups,
//! tie-breaking, NaN, integer exactness, awkward sizes and inference with unknown
//! values.

use super::ReduceOp;
use crate::attr::{Attr, Attrs};
use crate::dim::{shape_of, Dim};
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::{EvalCx, InferCx, InferInput, Op};
use crate::tensor::Tensor;
use half::f16;
use ndarray::ArrayD;

fn node(op: ReduceOp, attrs: &[(&str, Attr)]) -> Node {
    let mut a = Attrs::default();
    for (k, v) in attrs {
        a.set(k, v.clone());
    }
    Node {
        name: "n".into(),
        op: Op::Reduce(op),
        attrs: a,
        inputs: Vec::new(),
        outputs: Vec::new(),
    }
}

fn run(op: ReduceOp, attrs: &[(&str, Attr)], inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let lookup = |_: &str| None;
    op.eval(&EvalCx { lookup: &lookup }, &node(op, attrs), inputs)
}

fn f32s(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64s(DType::F32, shape, v).expect("shape matches data")
}

fn ints(dtype: DType, shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_i64s(v)
        .reshape(shape)
        .expect("shape matches data")
        .cast(dtype)
}

fn axes(v: &[i64]) -> Tensor {
    Tensor::from_i64s(v)
}

#[test]
fn empty_set_reductions_give_identities() {
    let x = f32s(&[2, 0, 4], &[]);
    let ax = axes(&[1]);
    let cases = [
        (ReduceOp::ReduceSum, 0.0),
        (ReduceOp::ReduceProd, 1.0),
        (ReduceOp::ReduceMax, f64::NEG_INFINITY),
        (ReduceOp::ReduceMin, f64::INFINITY),
        (ReduceOp::ReduceL1, 0.0),
        (ReduceOp::ReduceL2, 0.0),
        (ReduceOp::ReduceSumSquare, 0.0),
        (ReduceOp::ReduceLogSum, f64::NEG_INFINITY),
        (ReduceOp::ReduceLogSumExp, f64::NEG_INFINITY),
    ];
    for (op, want) in cases {
        let y = &run(op, &[], &[Some(&x), Some(&ax)]).expect("reduces")[0];
        assert_eq!(y.shape(), &[2, 1, 4], "{op:?}");
        assert!(y.to_f64_vec().iter().all(|&v| v == want), "{op:?}: {y:?}");
    }
    let xi = ints(DType::I32, &[0, 3], &[]);
    let y = &run(
        ReduceOp::ReduceMax,
        &[("keepdims", Attr::Int(0))],
        &[Some(&xi), Some(&axes(&[0]))],
    )
    .expect("reduces")[0];
    assert_eq!(y.to_i64_vec(), vec![i32::MIN as i64; 3]);
    let xb = Tensor::Bool(ArrayD::from_elem(vec![0], false));
    let y = &run(ReduceOp::ReduceMin, &[], &[Some(&xb)]).expect("reduces")[0];
    assert_eq!(y, &Tensor::Bool(ArrayD::from_elem(vec![1], true)));
}

#[test]
fn noop_with_empty_axes_keeps_the_input() {
    let x = f32s(&[2, 2], &[1.0, -2.0, 3.0, 4.0]);
    let attrs = [("noop_with_empty_axes", Attr::Int(1))];
    let y = &run(ReduceOp::ReduceSum, &attrs, &[Some(&x), Some(&axes(&[]))]).expect("runs")[0];
    assert_eq!(y, &x);
    let y = &run(ReduceOp::ReduceSum, &[], &[Some(&x), Some(&axes(&[]))]).expect("runs")[0];
    assert_eq!(y.to_f64_vec(), vec![6.0]);
}

#[test]
fn integer_reductions_are_exact() {
    let big = (1i64 << 60) + 1;
    let x = ints(DType::I64, &[3], &[big, 1, -2]);
    let y = &run(ReduceOp::ReduceSum, &[], &[Some(&x)]).expect("runs")[0];
    assert_eq!(y.to_i64_vec(), vec![big - 1]);
    let x = ints(DType::I32, &[2, 2], &[1, 2, -3, -4]);
    let y = &run(ReduceOp::ReduceMean, &[], &[Some(&x), Some(&axes(&[1]))]).expect("runs")[0];
    assert_eq!(y.to_i64_vec(), vec![1, -3]);
    let y = &run(ReduceOp::ReduceL1, &[], &[Some(&x)]).expect("runs")[0];
    assert_eq!(y.to_i64_vec(), vec![10]);
}

#[test]
fn max_propagates_nan() {
    let x = f32s(&[3], &[1.0, f64::NAN, 2.0]);
    let y = &run(ReduceOp::ReduceMax, &[], &[Some(&x)]).expect("runs")[0];
    assert!(y.to_f64_vec()[0].is_nan());
}

#[test]
fn argmax_select_last_index_and_nan() {
    let x = f32s(&[5], &[1.0, 3.0, 3.0, 0.0, 3.0]);
    let first = &run(ReduceOp::ArgMax, &[], &[Some(&x)]).expect("runs")[0];
    assert_eq!(first.to_i64_vec(), vec![1]);
    let last = [("select_last_index", Attr::Int(1))];
    let y = &run(ReduceOp::ArgMax, &last, &[Some(&x)]).expect("runs")[0];
    assert_eq!(y.to_i64_vec(), vec![4]);
    let y = &run(ReduceOp::ArgMin, &last, &[Some(&x)]).expect("runs")[0];
    assert_eq!(y.to_i64_vec(), vec![3]);
    // numpy: the first NaN wins for argmax and argmin alike.
    let x = f32s(&[4], &[1.0, f64::NAN, 5.0, f64::NAN]);
    for op in [ReduceOp::ArgMax, ReduceOp::ArgMin] {
        let y = &run(op, &[], &[Some(&x)]).expect("runs")[0];
        assert_eq!(y.to_i64_vec(), vec![1], "{op:?}");
        let y = &run(op, &last, &[Some(&x)]).expect("runs")[0];
        assert_eq!(y.to_i64_vec(), vec![3], "{op:?}");
    }
}

#[test]
fn topk_breaks_ties_by_lower_index() {
    let x = f32s(
        &[2, 5],
        &[1.0, 3.0, 3.0, 2.0, 3.0, 0.0, 0.0, 1.0, f64::NAN, 0.0],
    );
    let k = axes(&[3]);
    let out = run(ReduceOp::TopK, &[], &[Some(&x), Some(&k)]).expect("runs");
    assert_eq!(out[1].to_i64_vec(), vec![1, 2, 4, 3, 2, 0]);
    let small = [("largest", Attr::Int(0))];
    let out = run(ReduceOp::TopK, &small, &[Some(&x), Some(&k)]).expect("runs");
    assert_eq!(out[0].to_f64_vec(), vec![1.0, 2.0, 3.0, 0.0, 0.0, 0.0]);
    assert_eq!(out[1].to_i64_vec(), vec![0, 3, 1, 0, 1, 4]);
    let too_big = axes(&[6]);
    assert!(matches!(
        run(ReduceOp::TopK, &[], &[Some(&x), Some(&too_big)]),
        Err(IrError::Shape(_))
    ));
}

#[test]
fn cumsum_exclusive_reverse_on_ints() {
    let x = ints(DType::I32, &[4], &[1, 2, 3, 4]);
    let attrs = [("exclusive", Attr::Int(1)), ("reverse", Attr::Int(1))];
    let axis = Tensor::I32(ndarray::arr0(0).into_dyn());
    let y = &run(ReduceOp::CumSum, &attrs, &[Some(&x), Some(&axis)]).expect("runs")[0];
    assert_eq!(y.to_i64_vec(), vec![9, 7, 4, 0]);
    let y = &run(ReduceOp::CumProd, &attrs, &[Some(&x), Some(&axis)]).expect("runs")[0];
    assert_eq!(y.to_i64_vec(), vec![24, 12, 4, 1]);
}

#[test]
fn softmax_on_f16_sums_to_one() {
    let x = Tensor::F16(ArrayD::from_shape_fn(vec![3, 7], |i| {
        f16::from_f32(i[1] as f32 * 0.5)
    }));
    let y = &run(ReduceOp::Softmax, &[], &[Some(&x)]).expect("runs")[0];
    assert_eq!(y.dtype(), DType::F16);
    for row in y.to_f64_vec().chunks(7) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 4e-3, "{row:?}");
    }
}

/// Deterministic pseudo-random values in [-2, 2).
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as f64 / (1u64 << 31) as f64) * 4.0 - 2.0
        })
        .collect()
}

#[test]
fn layer_norm_over_trailing_axes_at_awkward_sizes() {
    for &(rows, cols) in &[(3usize, 50usize), (50, 3), (2, 783), (1, 1)] {
        let xv = noise(rows * cols, rows as u64 * 31 + cols as u64);
        let sv = noise(cols, 7);
        let bv = noise(cols, 9);
        let x = f32s(&[rows, 1, cols], &xv);
        let (s, b) = (f32s(&[1, cols], &sv), f32s(&[cols], &bv));
        let out = run(
            ReduceOp::LayerNormalization,
            &[("axis", Attr::Int(1))],
            &[Some(&x), Some(&s), Some(&b)],
        )
        .expect("runs");
        assert_eq!(out[1].shape(), &[rows, 1, 1]);
        let (y, mean, inv) = (
            out[0].to_f64_vec(),
            out[1].to_f64_vec(),
            out[2].to_f64_vec(),
        );
        for r in 0..rows {
            let row = &xv[r * cols..(r + 1) * cols];
            let m = row.iter().sum::<f64>() / cols as f64;
            let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / cols as f64;
            let iv = 1.0 / (var + 1e-5).sqrt();
            assert!((mean[r] - m).abs() < 1e-5 && (inv[r] - iv).abs() < 1e-3 * iv);
            for c in 0..cols {
                let want = (row[c] - m) * iv * sv[c] + bv[c];
                let got = y[r * cols + c];
                assert!(
                    (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                    "{rows}x{cols} [{r},{c}]: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn nll_mean_skips_ignored_targets() {
    // Log-probabilities [N=3, C=2]; the second sample is ignored.
    let x = f32s(&[3, 2], &[-0.5, -1.0, -2.0, -0.1, -0.3, -4.0]);
    let t = ints(DType::I64, &[3], &[1, 7, 0]);
    let w = f32s(&[2], &[2.0, 3.0]);
    let attrs = [("ignore_index", Attr::Int(7))];
    let y = &run(
        ReduceOp::NegativeLogLikelihoodLoss,
        &attrs,
        &[Some(&x), Some(&t), Some(&w)],
    )
    .expect("runs")[0];
    assert_eq!(y.shape(), &[] as &[usize]);
    let want = (1.0 * 3.0 + 0.3 * 2.0) / (3.0 + 2.0);
    assert!((y.to_f64_vec()[0] - want).abs() < 1e-6);
    let y = &run(
        ReduceOp::NegativeLogLikelihoodLoss,
        &attrs,
        &[Some(&x), Some(&t)],
    )
    .expect("runs")[0];
    assert!((y.to_f64_vec()[0] - 0.65).abs() < 1e-6);
    let bad = ints(DType::I64, &[3], &[1, 2, 0]);
    assert!(run(
        ReduceOp::NegativeLogLikelihoodLoss,
        &[],
        &[Some(&x), Some(&bad)]
    )
    .is_err());
}

fn infer(
    op: ReduceOp,
    attrs: &[(&str, Attr)],
    inputs: &[(TensorType, Option<&Tensor>)],
) -> Result<Vec<TensorType>> {
    let ins: Vec<Option<InferInput>> = inputs
        .iter()
        .map(|(ty, value)| Some(InferInput { ty, value: *value }))
        .collect();
    op.infer(&mut InferCx::default(), &node(op, attrs), &ins)
}

#[test]
fn reduce_inference_with_known_and_unknown_axes() {
    let x = TensorType::new(
        DType::F32,
        vec![Dim::sym("b"), Dim::Known(77), Dim::Known(96)],
    );
    let ax_ty = TensorType::new(DType::I64, shape_of(&[1]));
    let ax = axes(&[-1]);
    let known = infer(
        ReduceOp::ReduceMean,
        &[],
        &[(x.clone(), None), (ax_ty.clone(), Some(&ax))],
    )
    .expect("infers");
    assert_eq!(
        known[0].shape,
        vec![Dim::sym("b"), Dim::Known(77), Dim::Known(1)]
    );
    let flat = [("keepdims", Attr::Int(0))];
    let known = infer(
        ReduceOp::ReduceMean,
        &flat,
        &[(x.clone(), None), (ax_ty.clone(), Some(&ax))],
    )
    .expect("infers");
    assert_eq!(known[0].shape, vec![Dim::sym("b"), Dim::Known(77)]);
    let unknown = infer(
        ReduceOp::ReduceSum,
        &[],
        &[(x.clone(), None), (ax_ty.clone(), None)],
    )
    .expect("infers");
    assert_eq!(unknown[0].shape.len(), 3);
    let unknown = infer(
        ReduceOp::ReduceSum,
        &flat,
        &[(x.clone(), None), (ax_ty, None)],
    )
    .expect("infers");
    assert_eq!(unknown[0].shape.len(), 2);
    let all = infer(ReduceOp::ReduceMax, &flat, &[(x.clone(), None)]).expect("infers");
    assert!(all[0].shape.is_empty());
    let k_ty = TensorType::new(DType::I64, shape_of(&[1]));
    let topk = infer(ReduceOp::TopK, &[], &[(x, None), (k_ty, None)]).expect("infers");
    assert_eq!(topk[1].dtype, DType::I64);
    assert!(matches!(topk[0].shape[2], Dim::Sym(_)));
}

#[test]
fn group_norm_rejects_uneven_groups_and_accepts_per_group_params() {
    let x = f32s(&[1, 5, 2], &noise(10, 3));
    let p = f32s(&[2], &[1.0, 0.0]);
    let attrs = [("num_groups", Attr::Int(2))];
    let r = run(
        ReduceOp::GroupNormalization,
        &attrs,
        &[Some(&x), Some(&p), Some(&p)],
    );
    assert!(matches!(r, Err(IrError::Shape(_))), "{r:?}");
    // Per-group scale and bias (before opset 21) equal the per-channel expansion.
    let x = f32s(&[1, 4, 3], &noise(12, 5));
    let (gs, gb) = (f32s(&[2], &[2.0, -1.0]), f32s(&[2], &[0.5, 0.25]));
    let (cs, cb) = (
        f32s(&[4], &[2.0, 2.0, -1.0, -1.0]),
        f32s(&[4], &[0.5, 0.5, 0.25, 0.25]),
    );
    let per_group = run(
        ReduceOp::GroupNormalization,
        &attrs,
        &[Some(&x), Some(&gs), Some(&gb)],
    );
    let per_channel = run(
        ReduceOp::GroupNormalization,
        &attrs,
        &[Some(&x), Some(&cs), Some(&cb)],
    );
    assert_eq!(per_group.expect("runs"), per_channel.expect("runs"));
}
