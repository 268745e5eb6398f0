//! Resize's coordinate modes and filters on awkward sizes; expected values come from
//! onnx.reference's Resize (onnx 1.23).

use super::*;
use crate::attr::Attr;
use crate::ops::{ImageOp, Op};
use ndarray::{ArrayD, IxDyn};

fn node(attrs: &[(&str, Attr)]) -> Node {
    let mut n = Node {
        name: "r".into(),
        op: Op::Image(ImageOp::Resize),
        attrs: Default::default(),
        inputs: vec![],
        outputs: vec![],
    };
    for (k, v) in attrs {
        n.attrs.set(k, v.clone());
    }
    n
}

fn run(attrs: &[(&str, Attr)], x: Tensor, roi: Option<Tensor>, target: Target) -> Vec<f64> {
    let n = node(attrs);
    let (s, z) = match target {
        Target::Scales(s) => (
            Some(Tensor::F32(
                ArrayD::from_shape_vec(IxDyn(&[s.len()]), s.iter().map(|&v| v as f32).collect())
                    .unwrap(),
            )),
            None,
        ),
        Target::Sizes(z) => (None, Some(Tensor::from_i64s(&z))),
    };
    let out = eval(&n, &[Some(&x), roi.as_ref(), s.as_ref(), z.as_ref()]).unwrap();
    out[0].to_f64_vec()
}

fn row(v: &[f32]) -> Tensor {
    Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[1, v.len()]), v.to_vec()).unwrap())
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
    }
}

fn s(v: &str) -> Attr {
    Attr::Str(v.into())
}

#[test]
fn linear_half_pixel_downsample_by_point_six() {
    let x = row(&[1.0, 2.0, 3.0, 4.0]);
    let y = run(
        &[("mode", s("linear"))],
        x,
        None,
        Target::Scales(vec![1.0, 0.6]),
    );
    close(&y, &[1.3333333, 3.0]);
}

#[test]
fn align_corners_uses_the_unrounded_output_width() {
    // 4 -> 2 with scale 0.6: x = y * 3 / (2.4 - 1).
    let x = row(&[1.0, 2.0, 3.0, 4.0]);
    let y = run(
        &[
            ("mode", s("linear")),
            ("coordinate_transformation_mode", s("align_corners")),
        ],
        x,
        None,
        Target::Scales(vec![1.0, 0.6]),
    );
    close(&y, &[1.0, 3.142857]);
}

#[test]
fn half_pixel_symmetric_recentres_a_truncated_output() {
    let x = row(&[0.0, 1.0, 2.0, 3.0, 4.0]);
    let y = run(
        &[
            ("mode", s("linear")),
            ("coordinate_transformation_mode", s("half_pixel_symmetric")),
        ],
        x,
        None,
        Target::Scales(vec![1.0, 0.7]),
    );
    close(&y, &[0.57142854, 2.0, 3.4285715]);
}

#[test]
fn nearest_modes_on_awkward_sizes() {
    let x = row(&[10.0, 20.0, 30.0]);
    // 3 -> 7, asymmetric: x = y * 3/7.
    let asym = |nm: &str| {
        run(
            &[
                ("coordinate_transformation_mode", s("asymmetric")),
                ("nearest_mode", s(nm)),
            ],
            x.clone(),
            None,
            Target::Sizes(vec![1, 7]),
        )
    };
    close(&asym("floor"), &[10.0, 10.0, 10.0, 20.0, 20.0, 30.0, 30.0]);
    close(&asym("ceil"), &[10.0, 20.0, 20.0, 30.0, 30.0, 30.0, 30.0]);
    close(
        &asym("round_prefer_floor"),
        &[10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 30.0],
    );
    close(
        &asym("round_prefer_ceil"),
        &[10.0, 10.0, 20.0, 20.0, 30.0, 30.0, 30.0],
    );
    // 3 -> 2 with half_pixel: x = (y+.5)*1.5-.5 = 0.25, 1.75.
    let y = run(&[], x.clone(), None, Target::Sizes(vec![1, 2]));
    close(&y, &[10.0, 30.0]);
    // pytorch_half_pixel with one output sample reads x = -0.5 -> clamped to 0.
    let y = run(
        &[("coordinate_transformation_mode", s("pytorch_half_pixel"))],
        x,
        None,
        Target::Sizes(vec![1, 1]),
    );
    close(&y, &[10.0]);
}

#[test]
fn tf_crop_and_resize_extrapolates_outside_the_crop() {
    let x = row(&[1.0, 2.0, 3.0, 4.0]);
    let roi = Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[4]), vec![0.0, 0.5, 1.0, 1.5]).unwrap());
    let y = run(
        &[
            ("mode", s("linear")),
            ("coordinate_transformation_mode", s("tf_crop_and_resize")),
            ("extrapolation_value", Attr::Float(-1.0)),
        ],
        x,
        Some(roi),
        Target::Sizes(vec![1, 3]),
    );
    // x = 1.5 + y * 1.0 * 3 / 2 -> 1.5, 3.0, 4.5 (outside).
    close(&y, &[2.5, 4.0, -1.0]);
}

#[test]
fn cubic_exclude_outside_renormalises() {
    let x = row(&[1.0, 2.0, 4.0, 8.0]);
    let y = run(
        &[
            ("mode", s("cubic")),
            ("cubic_coeff_a", Attr::Float(-0.5)),
            ("exclude_outside", Attr::Int(1)),
        ],
        x,
        None,
        Target::Sizes(vec![1, 3]),
    );
    close(&y, &[1.0919032, 2.8125, 7.5667405]);
}

#[test]
fn antialias_widens_the_filter_when_downsampling() {
    let x = row(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let y = run(
        &[("mode", s("linear")), ("antialias", Attr::Int(1))],
        x.clone(),
        None,
        Target::Sizes(vec![1, 3]),
    );
    close(&y, &[1.75, 4.0, 6.25]);
    let y = run(
        &[
            ("mode", s("cubic")),
            ("antialias", Attr::Int(1)),
            ("coordinate_transformation_mode", s("pytorch_half_pixel")),
        ],
        x,
        None,
        Target::Sizes(vec![1, 3]),
    );
    close(&y, &[1.6296076, 4.0, 6.370393]);
}

#[test]
fn keep_aspect_ratio_rounds_half_up() {
    let n = node(&[
        ("keep_aspect_ratio_policy", s("not_larger")),
        ("axes", Attr::Ints(vec![2, 3])),
    ]);
    let p = plan(&n, &[1, 1, 3, 5], Target::Sizes(vec![7, 7])).unwrap();
    // scale = min(7/3, 7/5) = 1.4: 3*1.4 = 4.2 -> 4, 5*1.4 = 7.
    assert_eq!(p.out, vec![1, 1, 4, 7]);
    let n = node(&[
        ("keep_aspect_ratio_policy", s("not_smaller")),
        ("axes", Attr::Ints(vec![3, 2])),
    ]);
    let p = plan(&n, &[1, 1, 3, 5], Target::Sizes(vec![7, 7])).unwrap();
    assert_eq!(p.out, vec![1, 1, 7, 12]);
}

#[test]
fn u8_input_rounds_half_to_even_and_saturates() {
    let x = Tensor::U8(ArrayD::from_shape_vec(IxDyn(&[1, 2]), vec![0, 255]).unwrap());
    let n = node(&[("mode", s("cubic"))]);
    let z = Tensor::from_i64s(&[1, 5]);
    let y = eval(&n, &[Some(&x), None, None, Some(&z)]).unwrap();
    assert_eq!(y[0].to_f64_vec(), vec![0.0, 21.0, 128.0, 234.0, 255.0]);
}

#[test]
fn infer_keeps_symbols_on_unscaled_axes_and_computes_the_rest() {
    use crate::dim::Dim;
    use crate::dtype::DType;
    let n = node(&[]);
    let x = TensorType::new(
        DType::F32,
        vec![
            Dim::sym("batch"),
            Dim::Known(3),
            Dim::Known(5),
            Dim::Known(7),
        ],
    );
    let scales =
        Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[4]), vec![1.0, 1.0, 0.5, 2.5]).unwrap());
    let sty = TensorType::new(DType::F32, vec![Dim::Known(4)]);
    let ins = [
        Some(InferInput {
            ty: &x,
            value: None,
        }),
        None,
        Some(InferInput {
            ty: &sty,
            value: Some(&scales),
        }),
    ];
    let mut cx = InferCx::default();
    let out = infer(&mut cx, &n, &ins).unwrap();
    assert_eq!(
        out[0].shape,
        vec![
            Dim::sym("batch"),
            Dim::Known(3),
            Dim::Known(2),
            Dim::Known(17)
        ]
    );
    // Unknown sizes: fresh symbols on every resized axis.
    let zty = TensorType::new(DType::I64, vec![Dim::Known(4)]);
    let ins = [
        Some(InferInput {
            ty: &x,
            value: None,
        }),
        None,
        None,
        Some(InferInput {
            ty: &zty,
            value: None,
        }),
    ];
    let out = infer(&mut cx, &n, &ins).unwrap();
    assert!(out[0].shape.iter().all(|d| d.known().is_none()));
}
