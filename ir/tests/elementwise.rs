//! The element-wise family through `Op::eval` and `Op::infer`, as the interpreter and
//! shape inference call it: attributes, symbolic broadcasting and output dtypes.

use gopt_ir::ops::{EvalCx, InferCx, InferInput};
use gopt_ir::{Attr, Attrs, DType, Dim, IrError, Node, Op, Tensor, TensorType, ValueId};
use ndarray::{ArrayD, IxDyn};

fn node(op: &str, attrs: &[(&str, Attr)], outputs: usize) -> Node {
    let mut a = Attrs::default();
    for (k, v) in attrs {
        a.set(k, v.clone());
    }
    Node {
        name: "n".into(),
        op: Op::from_name(op).expect("known op"),
        attrs: a,
        inputs: vec![],
        outputs: (0..outputs as u32).map(ValueId).collect(),
    }
}

fn eval(n: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, IrError> {
    n.op.eval(&EvalCx { lookup: &|_| None }, n, inputs)
}

fn infer(n: &Node, tys: &[Option<&TensorType>]) -> Result<Vec<TensorType>, IrError> {
    let ins: Vec<Option<InferInput>> = tys
        .iter()
        .map(|t| t.map(|ty| InferInput { ty, value: None }))
        .collect();
    n.op.infer(&mut InferCx::default(), n, &ins)
}

fn t<T: gopt_ir::Elem>(shape: &[usize], v: Vec<T>) -> Tensor {
    T::wrap(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

fn ty(dtype: DType, dims: &[Dim]) -> TensorType {
    TensorType::new(dtype, dims.to_vec())
}

#[test]
fn comparison_infers_bool_with_symbolic_broadcast() {
    let a = ty(
        DType::F32,
        &[Dim::sym("batch"), Dim::Known(1), Dim::Known(783)],
    );
    let b = ty(DType::F32, &[Dim::Known(50), Dim::Known(1)]);
    let out = infer(&node("Less", &[], 1), &[Some(&a), Some(&b)]).unwrap();
    let want = ty(
        DType::Bool,
        &[Dim::sym("batch"), Dim::Known(50), Dim::Known(783)],
    );
    assert_eq!(out, vec![want]);
    let c = ty(DType::I64, &[Dim::Known(50), Dim::Known(1)]);
    assert!(infer(&node("Add", &[], 1), &[Some(&a), Some(&c)]).is_err());
}

#[test]
fn float_only_ops_reject_integers_at_inference() {
    let x = ty(DType::I32, &[Dim::Known(3)]);
    let e = infer(&node("Sqrt", &[], 1), &[Some(&x)]).unwrap_err();
    assert!(matches!(e, IrError::Unsupported(_)), "{e}");
    assert!(infer(&node("Abs", &[], 1), &[Some(&x)]).is_ok());
}

#[test]
fn cast_and_castlike_take_their_dtype() {
    let x = t(&[3], vec![1.5f32, -2.5, 1e10]);
    let n = node("Cast", &[("to", Attr::DType(DType::I64))], 1);
    assert_eq!(
        eval(&n, &[Some(&x)]).unwrap()[0],
        t(&[3], vec![1i64, -2, 10_000_000_000])
    );
    let xt = ty(DType::F32, &[Dim::Known(3)]);
    assert_eq!(infer(&n, &[Some(&xt)]).unwrap()[0].dtype, DType::I64);
    let like = t(&[0], Vec::<f64>::new());
    let cl = node("CastLike", &[], 1);
    assert_eq!(
        eval(&cl, &[Some(&x), Some(&like)]).unwrap()[0].dtype(),
        DType::F64
    );
}

#[test]
fn mod_and_bitshift_read_their_attributes() {
    let x = t(&[2], vec![-7i32, 7]);
    let y = t(&[1], vec![3i32]);
    let floor = eval(&node("Mod", &[], 1), &[Some(&x), Some(&y)]).unwrap();
    assert_eq!(floor[0].to_i64_vec(), vec![2, 1]);
    let fmod = eval(
        &node("Mod", &[("fmod", Attr::Int(1))], 1),
        &[Some(&x), Some(&y)],
    )
    .unwrap();
    assert_eq!(fmod[0].to_i64_vec(), vec![-1, 1]);
    let u = t(&[3], vec![16u8, 4, 1]);
    let s = t(&[3], vec![1u8, 2, 3]);
    let left = node("BitShift", &[("direction", Attr::Str("LEFT".into()))], 1);
    assert_eq!(
        eval(&left, &[Some(&u), Some(&s)]).unwrap()[0].to_i64_vec(),
        vec![32, 16, 8]
    );
    let bad = node("BitShift", &[("direction", Attr::Str("UP".into()))], 1);
    assert!(eval(&bad, &[Some(&u), Some(&s)]).is_err());
}

#[test]
fn dropout_is_identity_in_inference() {
    let x = t(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
    let n = node("Dropout", &[], 2);
    let out = eval(&n, &[Some(&x), Some(&t(&[], vec![0.3f32]))]).unwrap();
    assert_eq!(out[0], x);
    assert_eq!(out[1], t(&[2, 2], vec![true; 4]));
    let training = t(&[], vec![true]);
    let e = eval(&n, &[Some(&x), None, Some(&training)]).unwrap_err();
    assert!(matches!(e, IrError::Unsupported(_)));
}

#[test]
fn only_random_ops_are_nondeterministic() {
    let random = [
        "Bernoulli",
        "RandomUniform",
        "RandomNormal",
        "RandomUniformLike",
    ];
    for op in Op::all() {
        if let Op::Elementwise(e) = op {
            let name = e.name();
            let expect =
                !(random.contains(&name) || name == "RandomNormalLike" || name == "Multinomial");
            assert_eq!(op.is_deterministic(), expect, "{name}");
        }
    }
}

#[test]
fn where_and_clip_infer_types() {
    let c = ty(DType::Bool, &[Dim::Known(4), Dim::Known(1)]);
    let x = ty(DType::F16, &[Dim::Known(5)]);
    let out = infer(&node("Where", &[], 1), &[Some(&c), Some(&x), Some(&x)]).unwrap();
    assert_eq!(out[0], ty(DType::F16, &[Dim::Known(4), Dim::Known(5)]));
    let lo = ty(DType::F16, &[]);
    let clip = infer(&node("Clip", &[], 1), &[Some(&x), None, Some(&lo)]).unwrap();
    assert_eq!(clip[0], x);
}
