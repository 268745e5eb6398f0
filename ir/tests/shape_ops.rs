//! Semantics of the shape / data-movement family on the cases where the ONNX spec is
//! subtle (Slice clamping and negative steps, Reshape 0/-1/allowzero, uneven Split,
//! Pad modes, Unique), and symbolic shape inference on `batch`/`seq` dims. Expected
//! values come from numpy.

use gopt_ir::attr::{Attr, Attrs};
use gopt_ir::dim::{fmt_shape, Dim};
use gopt_ir::ops::{EvalCx, InferCx, InferInput, Op, ShapeOp};
use gopt_ir::{DType, Node, Result, Tensor, TensorType, ValueId};
use ndarray::{ArrayD, IxDyn};

fn node(op: ShapeOp, attrs: &[(&str, Attr)], n_out: usize) -> Node {
    let mut a = Attrs::default();
    for (k, v) in attrs {
        a.set(k, v.clone());
    }
    Node {
        name: "n".into(),
        op: Op::Shape(op),
        attrs: a,
        inputs: vec![],
        outputs: (0..n_out as u32).map(ValueId).collect(),
    }
}

fn run_n(
    op: ShapeOp,
    attrs: &[(&str, Attr)],
    inputs: &[Option<Tensor>],
    n_out: usize,
) -> Result<Vec<Tensor>> {
    let no_scope = |_: &str| None;
    let cx = EvalCx { lookup: &no_scope };
    let ins: Vec<Option<&Tensor>> = inputs.iter().map(|t| t.as_ref()).collect();
    op.eval(&cx, &node(op, attrs, n_out), &ins)
}

#[track_caller]
fn run(op: ShapeOp, attrs: &[(&str, Attr)], inputs: &[Option<Tensor>]) -> Tensor {
    run_n(op, attrs, inputs, 1).unwrap().remove(0)
}

fn i64s(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::I64(ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap())
}

fn v1(v: &[i64]) -> Option<Tensor> {
    Some(Tensor::from_i64s(v))
}

fn arange(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    i64s(shape, &(0..n as i64).collect::<Vec<_>>())
}

#[track_caller]
fn check(t: &Tensor, shape: &[usize], v: &[i64]) {
    assert_eq!(t.shape(), shape);
    assert_eq!(t.to_i64_vec(), v);
}

#[test]
fn slice_negative_steps_and_clamping() {
    let x = Some(arange(&[10]));
    let s = |st: i64, en: i64, step: i64| {
        run(
            ShapeOp::Slice,
            &[],
            &[x.clone(), v1(&[st]), v1(&[en]), v1(&[0]), v1(&[step])],
        )
    };
    check(&s(8, 2, -2), &[3], &[8, 6, 4]);
    check(&s(-1, -100, -3), &[4], &[9, 6, 3, 0]);
    check(&s(100, -100, -1), &[10], &[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    check(&s(-100, 3, 1), &[3], &[0, 1, 2]);
    check(&s(i64::MIN, i64::MAX, 4), &[3], &[0, 4, 8]);
    check(&s(3, 3, 1), &[0], &[]);
    check(&s(0, 10, i64::MAX), &[1], &[0]);
    check(&s(9, i64::MIN, i64::MIN), &[1], &[9]);
    check(&s(2, 5, -1), &[0], &[]);
    assert!(run_n(
        ShapeOp::Slice,
        &[],
        &[x.clone(), v1(&[0]), v1(&[1]), v1(&[0]), v1(&[0])],
        1
    )
    .is_err());
    // Axes default to 0..n; negative axes count from the end.
    let y = Some(arange(&[3, 4]));
    let t = run(
        ShapeOp::Slice,
        &[],
        &[y.clone(), v1(&[1]), v1(&[-1]), v1(&[-1])],
    );
    check(&t, &[3, 2], &[1, 2, 5, 6, 9, 10]);
    let t = run(
        ShapeOp::Slice,
        &[],
        &[y, v1(&[2, 3]), v1(&[0, 0]), None, v1(&[-1, -2])],
    );
    check(&t, &[2, 2], &[11, 9, 7, 5]);
}

#[test]
fn reshape_zero_minus_one_allowzero() {
    let x = Some(arange(&[2, 3, 4]));
    let t = run(ShapeOp::Reshape, &[], &[x.clone(), v1(&[0, -1])]);
    assert_eq!(t.shape(), &[2, 12]);
    let t = run(ShapeOp::Reshape, &[], &[x.clone(), v1(&[-1, 0, 2])]);
    assert_eq!(t.shape(), &[4, 3, 2]);
    assert!(run_n(ShapeOp::Reshape, &[], &[x.clone(), v1(&[-1, -1])], 1).is_err());
    assert!(run_n(ShapeOp::Reshape, &[], &[x.clone(), v1(&[5, -1])], 1).is_err());
    // allowzero: 0 is a real size.
    let e = Some(i64s(&[0, 3, 4], &[]));
    let z = [("allowzero", Attr::Int(1))];
    let t = run(ShapeOp::Reshape, &z, &[e.clone(), v1(&[3, 4, 0])]);
    assert_eq!(t.shape(), &[3, 4, 0]);
    let t = run(ShapeOp::Reshape, &[], &[e, v1(&[0, 4, 3])]);
    assert_eq!(t.shape(), &[0, 4, 3]);
    assert!(run_n(ShapeOp::Reshape, &z, &[x, v1(&[0, -1])], 1).is_err());
}

#[test]
fn split_uneven_and_explicit() {
    let x = Some(arange(&[7]));
    let outs = run_n(
        ShapeOp::Split,
        &[("num_outputs", Attr::Int(3))],
        std::slice::from_ref(&x),
        3,
    )
    .unwrap();
    let sizes: Vec<_> = outs.iter().map(|t| t.shape()[0]).collect();
    assert_eq!(sizes, [3, 3, 1]);
    check(&outs[2], &[1], &[6]);
    let outs = run_n(ShapeOp::Split, &[], &[x.clone(), v1(&[2, 0, 5])], 3).unwrap();
    check(&outs[1], &[0], &[]);
    check(&outs[2], &[5], &[2, 3, 4, 5, 6]);
    assert!(run_n(ShapeOp::Split, &[], &[x, v1(&[2, 2])], 2).is_err());
    let y = Some(arange(&[2, 6]));
    let outs = run_n(ShapeOp::Split, &[("axis", Attr::Int(-1))], &[y], 2).unwrap();
    check(&outs[1], &[2, 3], &[3, 4, 5, 9, 10, 11]);
}

#[test]
fn pad_modes() {
    let x = Some(arange(&[2, 3]));
    let pads = v1(&[1, 2, 1, 4]);
    let pad = |m: &str| {
        run(
            ShapeOp::Pad,
            &[("mode", Attr::Str(m.into()))],
            &[x.clone(), pads.clone()],
        )
    };
    check(
        &pad("reflect"),
        &[4, 9],
        &[
            5, 4, 3, 4, 5, 4, 3, 4, 5, 2, 1, 0, 1, 2, 1, 0, 1, 2, 5, 4, 3, 4, 5, 4, 3, 4, 5, 2, 1,
            0, 1, 2, 1, 0, 1, 2,
        ],
    );
    check(
        &pad("edge"),
        &[4, 9],
        &[
            0, 0, 0, 1, 2, 2, 2, 2, 2, 0, 0, 0, 1, 2, 2, 2, 2, 2, 3, 3, 3, 4, 5, 5, 5, 5, 5, 3, 3,
            3, 4, 5, 5, 5, 5, 5,
        ],
    );
    check(
        &pad("wrap"),
        &[4, 9],
        &[
            4, 5, 3, 4, 5, 3, 4, 5, 3, 1, 2, 0, 1, 2, 0, 1, 2, 0, 4, 5, 3, 4, 5, 3, 4, 5, 3, 1, 2,
            0, 1, 2, 0, 1, 2, 0,
        ],
    );
    // Reflection further than the axis is long keeps bouncing.
    let t = run(
        ShapeOp::Pad,
        &[("mode", Attr::Str("reflect".into()))],
        &[Some(arange(&[3])), v1(&[5, 5])],
    );
    check(&t, &[13], &[1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1]);
    // Constant with a value, on chosen axes; negative pads crop.
    let t = run(
        ShapeOp::Pad,
        &[],
        &[
            x.clone(),
            v1(&[1, -1, -1, 0]),
            Some(i64s(&[], &[9])),
            v1(&[-1, 0]),
        ],
    );
    check(&t, &[1, 3], &[9, 3, 4]);
}

#[test]
fn absurd_sizes_are_errors_not_aborts() {
    let x = Some(arange(&[2, 3]));
    let huge = v1(&[i64::MAX, 0, i64::MAX, 0]);
    assert!(run_n(ShapeOp::Pad, &[], &[x.clone(), huge], 1).is_err());
    let wrap = [("mode", Attr::Str("wrap".into()))];
    // Extreme pads that cancel out must not overflow.
    let _ = run_n(
        ShapeOp::Pad,
        &wrap,
        &[x.clone(), v1(&[i64::MIN, 0, i64::MAX, 0])],
        1,
    );
    assert!(run_n(ShapeOp::Expand, &[], &[x.clone(), v1(&[1 << 40, 2, 3])], 1).is_err());
    assert!(run_n(ShapeOp::ConstantOfShape, &[], &[v1(&[1 << 20, 1 << 20])], 1).is_err());
    assert!(run_n(ShapeOp::Tile, &[], &[x, v1(&[1 << 40, 1])], 1).is_err());
}

#[test]
fn unique_outputs() {
    let x = Tensor::from_f64s(
        DType::F32,
        &[8],
        &[2.0, 1.0, 1.0, 3.0, 4.0, 3.0, f64::NAN, 1.0],
    )
    .unwrap();
    let o = run_n(ShapeOp::Unique, &[], &[Some(x.clone())], 4).unwrap();
    let y = o[0].to_f64_vec();
    assert_eq!(&y[..4], &[1.0, 2.0, 3.0, 4.0]);
    assert!(y[4].is_nan());
    check(&o[1], &[5], &[1, 0, 3, 4, 6]);
    check(&o[2], &[8], &[1, 0, 0, 2, 3, 2, 4, 0]);
    check(&o[3], &[5], &[3, 1, 2, 1, 1]);
    // Unsorted: first-occurrence order.
    let o = run_n(ShapeOp::Unique, &[("sorted", Attr::Int(0))], &[Some(x)], 4).unwrap();
    assert_eq!(&o[0].to_f64_vec()[..4], &[2.0, 1.0, 3.0, 4.0]);
    check(&o[1], &[5], &[0, 1, 3, 4, 6]);
    check(&o[2], &[8], &[0, 1, 1, 2, 3, 2, 4, 1]);
    check(&o[3], &[5], &[1, 3, 2, 1, 1]);
    // Along an axis: rows compared lexicographically.
    let y = i64s(&[5, 2], &[3, 1, 0, 2, 3, 1, 1, 1, 0, 2]);
    let o = run_n(ShapeOp::Unique, &[("axis", Attr::Int(0))], &[Some(y)], 4).unwrap();
    check(&o[0], &[3, 2], &[0, 2, 1, 1, 3, 1]);
    check(&o[1], &[3], &[1, 3, 0]);
    check(&o[2], &[5], &[2, 0, 2, 1, 0]);
    check(&o[3], &[3], &[2, 1, 2]);
}

#[test]
fn gather_scatter_negative_indices_and_reductions() {
    let x = Some(arange(&[3, 2]));
    let t = run(
        ShapeOp::Gather,
        &[],
        &[x.clone(), Some(i64s(&[2, 2], &[0, -1, 1, 2]))],
    );
    check(&t, &[2, 2, 2], &[0, 1, 4, 5, 2, 3, 4, 5]);
    assert!(run_n(ShapeOp::Gather, &[], &[x.clone(), v1(&[3])], 1).is_err());
    let data = Some(i64s(&[5], &[1, 2, 3, 4, 5]));
    let idx = Some(i64s(&[4], &[1, -1, 1, 0]));
    let upd = Some(i64s(&[4], &[10, 20, 30, 40]));
    let sc = |r: &str| {
        run(
            ShapeOp::ScatterElements,
            &[("reduction", Attr::Str(r.into()))],
            &[data.clone(), idx.clone(), upd.clone()],
        )
    };
    check(&sc("none"), &[5], &[40, 30, 3, 4, 20]);
    check(&sc("add"), &[5], &[41, 42, 3, 4, 25]);
    check(&sc("mul"), &[5], &[40, 600, 3, 4, 100]);
    check(&sc("max"), &[5], &[40, 30, 3, 4, 20]);
    check(&sc("min"), &[5], &[1, 2, 3, 4, 5]);
    let t = run(
        ShapeOp::ScatterND,
        &[("reduction", Attr::Str("add".into()))],
        &[
            x,
            Some(i64s(&[2, 1], &[2, 2])),
            Some(i64s(&[2, 2], &[1, 1, 10, 10])),
        ],
    );
    check(&t, &[3, 2], &[0, 1, 2, 3, 15, 16]);
}

fn infer(op: ShapeOp, attrs: &[(&str, Attr)], ins: &[(TensorType, Option<Tensor>)]) -> Vec<String> {
    let mut cx = InferCx::default();
    let inputs: Vec<Option<InferInput>> = ins
        .iter()
        .map(|(ty, v)| {
            Some(InferInput {
                ty,
                value: v.as_ref(),
            })
        })
        .collect();
    op.infer(&mut cx, &node(op, attrs, 1), &inputs)
        .unwrap()
        .iter()
        .map(|t| fmt_shape(&t.shape))
        .collect()
}

fn sym_ty(dims: &[&str]) -> TensorType {
    TensorType::new(
        DType::F32,
        dims.iter()
            .map(|d| {
                d.parse::<u64>()
                    .map(Dim::Known)
                    .unwrap_or_else(|_| Dim::sym(d))
            })
            .collect(),
    )
}

fn const_in(v: &[i64]) -> (TensorType, Option<Tensor>) {
    (
        TensorType::new(DType::I64, vec![Dim::from(v.len())]),
        Some(Tensor::from_i64s(v)),
    )
}

#[test]
fn symbolic_inference() {
    let x = (sym_ty(&["batch", "seq", "96"]), None);
    let r = |spec: &[i64]| infer(ShapeOp::Reshape, &[], &[x.clone(), const_in(spec)]);
    assert_eq!(r(&[0, 0, 3, 32]), ["[batch,seq,3,32]"]);
    assert_eq!(r(&[-1, 96]), ["[(batch*seq),96]"]);
    assert_eq!(r(&[0, -1, 32]), ["[batch,(seq*3),32]"]);
    assert_eq!(r(&[0, 0, -1, 32]), ["[batch,seq,3,32]"]);
    // A shape computed at run time: its length is known, the dims are fresh.
    let dyn_shape = (TensorType::new(DType::I64, vec![Dim::Known(3)]), None);
    let out = infer(ShapeOp::Reshape, &[], &[x.clone(), dyn_shape]);
    assert_eq!(out[0].matches(',').count(), 2);
    assert_eq!(
        infer(
            ShapeOp::Flatten,
            &[("axis", Attr::Int(2))],
            std::slice::from_ref(&x)
        ),
        ["[(batch*seq),96]"]
    );
    assert_eq!(
        infer(
            ShapeOp::Flatten,
            &[("axis", Attr::Int(0))],
            std::slice::from_ref(&x)
        ),
        ["[1,((batch*seq)*96)]"]
    );
    let y = (sym_ty(&["batch", "1", "96"]), None);
    assert_eq!(
        infer(
            ShapeOp::Concat,
            &[("axis", Attr::Int(1))],
            &[x.clone(), y.clone()]
        ),
        ["[batch,(seq+1),96]"]
    );
    // Shape -> Gather(0) -> Unsqueeze: scalar index drops the axis.
    let shape_val = (TensorType::new(DType::I64, vec![Dim::Known(3)]), None);
    let idx0 = (TensorType::new(DType::I64, vec![]), Some(i64s(&[], &[0])));
    assert_eq!(
        infer(ShapeOp::Gather, &[], &[shape_val, idx0.clone()]),
        ["[]"]
    );
    assert_eq!(
        infer(
            ShapeOp::Gather,
            &[("axis", Attr::Int(1))],
            &[x.clone(), idx0]
        ),
        ["[batch,96]"]
    );
    assert_eq!(
        infer(ShapeOp::Unsqueeze, &[], &[y.clone(), const_in(&[0, -1])]),
        ["[1,batch,1,96,1]"]
    );
    assert_eq!(
        infer(ShapeOp::Squeeze, &[], std::slice::from_ref(&y)),
        ["[batch,96]"]
    );
    assert_eq!(
        infer(ShapeOp::Transpose, &[], std::slice::from_ref(&x)),
        ["[96,seq,batch]"]
    );
    let sl = infer(
        ShapeOp::Slice,
        &[],
        &[
            x.clone(),
            const_in(&[0, 10]),
            const_in(&[i64::MAX, 20]),
            const_in(&[1, 2]),
        ],
    );
    assert_eq!(sl, ["[batch,seq,10]"]);
    assert_eq!(
        infer(ShapeOp::Expand, &[], &[y, const_in(&[1, 7, 1])]),
        ["[batch,7,96]"]
    );
}

/// Exporters' shape sub-graphs: the contents of `Shape(x)` are followed through
/// Gather / Unsqueeze / Concat / Slice, so the consumers get exact symbolic dims.
#[test]
fn symbolic_shape_values_flow_through_graphs() {
    use gopt_ir::{infer_types, Graph};
    let mut g = Graph::new("shape_arith");
    let x = g.add_input("x", sym_ty(&["batch", "seq", "6"]));
    let c = |g: &mut Graph, name: &str, t: Tensor| Some(g.add_const(name, t));
    let i0 = c(&mut g, "i0", i64s(&[], &[0]));
    let i1 = c(&mut g, "i1", i64s(&[], &[1]));
    let ax0 = c(&mut g, "ax0", Tensor::from_i64s(&[0]));
    let tail = c(&mut g, "tail", Tensor::from_i64s(&[2, -1]));
    let one = c(&mut g, "one", i64s(&[], &[1]));
    let op = Op::Shape;
    let add = |g: &mut Graph, o: ShapeOp, attrs: Attrs, ins: Vec<Option<ValueId>>, out: &str| {
        let n = g.add_node(out, op(o), attrs, ins, &[out]);
        Some(g.node(n).outputs[0])
    };
    let shp = add(
        &mut g,
        ShapeOp::Shape,
        Attrs::default(),
        vec![Some(x)],
        "shp",
    );
    let b = add(
        &mut g,
        ShapeOp::Gather,
        Attrs::default(),
        vec![shp, i0],
        "b",
    );
    let s = add(
        &mut g,
        ShapeOp::Gather,
        Attrs::default(),
        vec![shp, i1],
        "s",
    );
    let bu = add(
        &mut g,
        ShapeOp::Unsqueeze,
        Attrs::default(),
        vec![b, ax0],
        "bu",
    );
    let su = add(
        &mut g,
        ShapeOp::Unsqueeze,
        Attrs::default(),
        vec![s, ax0],
        "su",
    );
    let mut axis0 = Attrs::default();
    axis0.set("axis", Attr::Int(0));
    let target = add(&mut g, ShapeOp::Concat, axis0, vec![bu, su, tail], "target");
    let y = add(
        &mut g,
        ShapeOp::Reshape,
        Attrs::default(),
        vec![Some(x), target],
        "y",
    );
    // Range(0, seq, 1) and ConstantOfShape(Shape(x)[0:2]) on the same values.
    let zero = c(&mut g, "zero", i64s(&[], &[0]));
    let pos = add(
        &mut g,
        ShapeOp::Range,
        Attrs::default(),
        vec![zero, s, one],
        "pos",
    );
    let end2 = c(&mut g, "end2", Tensor::from_i64s(&[2]));
    let start0 = c(&mut g, "start0", Tensor::from_i64s(&[0]));
    let bs = add(
        &mut g,
        ShapeOp::Slice,
        Attrs::default(),
        vec![shp, start0, end2],
        "bs",
    );
    let mask = add(
        &mut g,
        ShapeOp::ConstantOfShape,
        Attrs::default(),
        vec![bs],
        "mask",
    );
    // x[:, 0:seq] keeps the whole axis.
    let ax1 = c(&mut g, "ax1", Tensor::from_i64s(&[1]));
    let cut = add(
        &mut g,
        ShapeOp::Slice,
        Attrs::default(),
        vec![Some(x), start0, su, ax1],
        "cut",
    );
    g.outputs = [y, pos, mask, cut].into_iter().flatten().collect();
    infer_types(&mut g).unwrap();
    let ty = |v: Option<ValueId>| fmt_shape(&g.ty(v.unwrap()).unwrap().shape);
    assert_eq!(ty(target), "[4]");
    assert_eq!(ty(y), "[batch,seq,2,3]");
    assert_eq!(ty(pos), "[seq]");
    assert_eq!(ty(mask), "[batch,seq]");
    assert_eq!(ty(cut), "[batch,seq,6]");
}
