//! Opset upgrades: old forms of ops arrive in the IR in their latest-opset form.
//!
//! Each test builds one node at an old opset. The IR's op set is filled in family by
//! family; where an op a rewrite targets is not in the IR yet, the test checks that the
//! import reports it as unsupported (naming the node) instead of checking the rewrite.

mod common;
use common::*;
use gopt_frontends::onnx::{self, proto};
use gopt_ir::{Attr, Graph, Node};

/// Imports a single-node model, or checks the unsupported error when the IR lacks one of
/// `needs` (then returns `None`).
fn lower(
    n: proto::NodeProto,
    opset: i64,
    inputs: Vec<proto::ValueInfoProto>,
    outputs: &[&str],
    inits: Vec<proto::TensorProto>,
    needs: &[&str],
) -> Option<Graph> {
    let name = n.name.clone().unwrap_or_default();
    let m = model(
        graph(
            "g",
            vec![n],
            inputs,
            outputs.iter().map(|o| untyped(o)).collect(),
            inits,
        ),
        opset,
    );
    let r = onnx::import(&bytes(&m), None);
    if !has_ops(needs) {
        let e = r.expect_err("import must fail while an op is missing");
        assert!(e.is_unsupported(), "{e}");
        assert!(e.to_string().contains(&format!("`{name}`")), "{e}");
        return None;
    }
    Some(r.unwrap_or_else(|e| panic!("{name}: {e}")).model.graph)
}

fn const_input(g: &Graph, n: &Node, i: usize) -> Vec<f64> {
    let v = n.inputs[i].unwrap_or_else(|| panic!("input {i} of {} is omitted", n.name));
    g.constant(v)
        .unwrap_or_else(|| panic!("input {i} of {} is not a constant", n.name))
        .to_f64_vec()
}

fn ops(g: &Graph) -> Vec<&str> {
    g.nodes.iter().map(|n| n.op.name()).collect()
}

#[test]
fn reduce_axes_attribute_becomes_an_input() {
    for (op, opset) in [("ReduceSum", 11), ("ReduceMean", 13), ("ReduceMax", 17)] {
        let n = with(
            node(op, &["x"], &["y"], "r"),
            vec![a_ints("axes", &[1]), a_int("keepdims", 0)],
        );
        let Some(g) = lower(n, opset, vec![vf("x", &[2, 3])], &["y"], vec![], &[op]) else {
            continue;
        };
        let r = &g.nodes[0];
        assert_eq!(const_input(&g, r, 1), vec![1.0], "{op}");
        assert!(!r.attrs.has("axes"), "{op}");
        assert_eq!(r.attrs.int("keepdims").unwrap(), Some(0));
    }
    // At the opset where axes is an input already, nothing changes.
    let n = node("ReduceSum", &["x", "ax"], &["y"], "r");
    if let Some(g) = lower(
        n,
        13,
        vec![vf("x", &[2, 3])],
        &["y"],
        vec![ti64("ax", &[1], &[0])],
        &["ReduceSum"],
    ) {
        assert_eq!(const_input(&g, &g.nodes[0], 1), vec![0.0]);
    }
}

#[test]
fn squeeze_unsqueeze_split_before_13() {
    let n = with(
        node("Unsqueeze", &["x"], &["y"], "u"),
        vec![a_ints("axes", &[0, -1])],
    );
    if let Some(g) = lower(n, 11, vec![vf("x", &[3])], &["y"], vec![], &["Unsqueeze"]) {
        assert_eq!(const_input(&g, &g.nodes[0], 1), vec![0.0, -1.0]);
    }
    let n = with(
        node("Squeeze", &["x"], &["y"], "s"),
        vec![a_ints("axes", &[0])],
    );
    if let Some(g) = lower(n, 12, vec![vf("x", &[1, 3])], &["y"], vec![], &["Squeeze"]) {
        assert_eq!(const_input(&g, &g.nodes[0], 1), vec![0.0]);
    }
    let n = with(
        node("Split", &["x"], &["a", "b"], "sp"),
        vec![a_int("axis", 0), a_ints("split", &[1, 2])],
    );
    if let Some(g) = lower(n, 11, vec![vf("x", &[3])], &["a", "b"], vec![], &["Split"]) {
        assert_eq!(const_input(&g, &g.nodes[0], 1), vec![1.0, 2.0]);
        assert!(!g.nodes[0].attrs.has("num_outputs"));
    }
    // Equal split before 18: the output count becomes `num_outputs`.
    let n = node("Split", &["x"], &["a", "b", "c"], "sp");
    if let Some(g) = lower(
        n,
        13,
        vec![vf("x", &[6])],
        &["a", "b", "c"],
        vec![],
        &["Split"],
    ) {
        assert_eq!(g.nodes[0].attrs.int("num_outputs").unwrap(), Some(3));
        assert_eq!(g.nodes[0].inputs.len(), 1);
    }
}

#[test]
fn slice_topk_pad_clip_dropout_attributes_become_inputs() {
    let n = with(
        node("Slice", &["x"], &["y"], "sl"),
        vec![
            a_ints("starts", &[1]),
            a_ints("ends", &[3]),
            a_ints("axes", &[0]),
        ],
    );
    if let Some(g) = lower(n, 9, vec![vf("x", &[4])], &["y"], vec![], &["Slice"]) {
        let s = &g.nodes[0];
        assert_eq!(const_input(&g, s, 1), vec![1.0]);
        assert_eq!(const_input(&g, s, 2), vec![3.0]);
        assert_eq!(const_input(&g, s, 3), vec![0.0]);
    }
    let n = with(node("TopK", &["x"], &["v", "i"], "tk"), vec![a_int("k", 2)]);
    if let Some(g) = lower(n, 9, vec![vf("x", &[4])], &["v", "i"], vec![], &["TopK"]) {
        assert_eq!(const_input(&g, &g.nodes[0], 1), vec![2.0]);
    }
    let n = with(
        node("Pad", &["x"], &["y"], "pad"),
        vec![
            a_ints("pads", &[1, 2]),
            a_float("value", 1.5),
            a_str("mode", "constant"),
        ],
    );
    if let Some(g) = lower(n, 10, vec![vf("x", &[4])], &["y"], vec![], &["Pad"]) {
        let p = &g.nodes[0];
        assert_eq!(const_input(&g, p, 1), vec![1.0, 2.0]);
        assert_eq!(const_input(&g, p, 2), vec![1.5]);
        assert_eq!(p.attrs.str("mode").unwrap(), Some("constant"));
    }
    // Clip's bounds take the input's declared dtype.
    let n = with(
        node("Clip", &["x"], &["y"], "clip"),
        vec![a_float("min", 0.0), a_float("max", 6.0)],
    );
    if let Some(g) = lower(
        n,
        10,
        vec![vi("x", 10, &[D::N(4)])],
        &["y"],
        vec![],
        &["Clip"],
    ) {
        let c = &g.nodes[0];
        assert_eq!(const_input(&g, c, 1), vec![0.0]);
        assert_eq!(const_input(&g, c, 2), vec![6.0]);
        let hi = g.constant(c.inputs[2].unwrap()).unwrap();
        assert_eq!((hi.dtype(), hi.rank()), (gopt_ir::DType::F16, 0));
    }
    // Only `max`: `min` stays omitted.
    let n = with(
        node("Clip", &["x"], &["y"], "clip"),
        vec![a_float("max", 6.0)],
    );
    if let Some(g) = lower(n, 6 + 1, vec![vf("x", &[4])], &["y"], vec![], &["Clip"]) {
        assert_eq!(g.nodes[0].inputs[1], None);
        assert_eq!(const_input(&g, &g.nodes[0], 2), vec![6.0]);
    }
    let n = with(
        node("Dropout", &["x"], &["y"], "drop"),
        vec![a_float("ratio", 0.25)],
    );
    if let Some(g) = lower(n, 10, vec![vf("x", &[4])], &["y"], vec![], &["Dropout"]) {
        assert_eq!(const_input(&g, &g.nodes[0], 1), vec![0.25]);
    }
}

#[test]
fn old_softmax_flattens_to_2d() {
    for op in ["Softmax", "LogSoftmax", "Hardmax"] {
        // axis 1 of a rank-3 input: Shape → Flatten → op(axis=-1) → Reshape.
        let n = with(node(op, &["x"], &["y"], "sm"), vec![a_int("axis", 1)]);
        let needs = [op, "Shape", "Flatten", "Reshape"];
        if let Some(g) = lower(n, 11, vec![vf("x", &[2, 3, 4])], &["y"], vec![], &needs) {
            assert_eq!(ops(&g), ["Shape", "Flatten", op, "Reshape"]);
            assert_eq!(g.nodes[1].attrs.int("axis").unwrap(), Some(1));
            assert_eq!(g.nodes[2].attrs.int("axis").unwrap(), Some(-1));
            let y = g.find_value("y").unwrap();
            assert_eq!(g.nodes[3].outputs, vec![y]);
            assert_eq!(g.outputs, vec![y]);
        }
        // The last axis of a known rank is the modern op.
        let n = with(node(op, &["x"], &["y"], "sm"), vec![a_int("axis", 1)]);
        if let Some(g) = lower(n, 11, vec![vf("x", &[2, 3])], &["y"], vec![], &needs) {
            assert_eq!(ops(&g), [op]);
            assert_eq!(g.nodes[0].attrs.int("axis").unwrap(), Some(-1));
        }
    }
}

#[test]
fn upsample_becomes_resize() {
    // Opset 7-8: scales attribute.
    let n = with(
        node("Upsample", &["x"], &["y"], "up"),
        vec![
            a_floats("scales", &[1.0, 1.0, 2.0, 2.0]),
            a_str("mode", "nearest"),
        ],
    );
    if let Some(g) = lower(
        n,
        8,
        vec![vf("x", &[1, 1, 2, 2])],
        &["y"],
        vec![],
        &["Resize"],
    ) {
        let r = &g.nodes[0];
        assert_eq!(r.op.name(), "Resize");
        assert_eq!(r.inputs[1], None);
        assert_eq!(const_input(&g, r, 2), vec![1.0, 1.0, 2.0, 2.0]);
        assert_eq!(
            r.attrs.str("coordinate_transformation_mode").unwrap(),
            Some("asymmetric")
        );
        assert_eq!(r.attrs.str("nearest_mode").unwrap(), Some("floor"));
        assert_eq!(r.attrs.str("mode").unwrap(), Some("nearest"));
    }
    // Opset 9: scales input; downsampling rounds up.
    let n = with(
        node("Upsample", &["x", "s"], &["y"], "up"),
        vec![a_str("mode", "linear")],
    );
    let s = tf32("s", &[4], &[1.0, 1.0, 0.5, 0.5]);
    if let Some(g) = lower(
        n,
        9,
        vec![vf("x", &[1, 1, 4, 4])],
        &["y"],
        vec![s],
        &["Resize"],
    ) {
        let r = &g.nodes[0];
        assert_eq!(const_input(&g, r, 2), vec![1.0, 1.0, 0.5, 0.5]);
        assert_eq!(r.attrs.str("mode").unwrap(), Some("linear"));
        assert_eq!(r.attrs.str("nearest_mode").unwrap(), Some("ceil"));
    }
    // Resize 10: (X, scales) → (X, roi omitted, scales).
    let n = node("Resize", &["x", "s"], &["y"], "rs");
    let s = tf32("s", &[4], &[1.0, 1.0, 2.0, 3.0]);
    if let Some(g) = lower(
        n,
        10,
        vec![vf("x", &[1, 1, 2, 2])],
        &["y"],
        vec![s],
        &["Resize"],
    ) {
        let r = &g.nodes[0];
        assert_eq!(r.inputs.len(), 3);
        assert_eq!(r.inputs[1], None);
        assert_eq!(
            r.attrs.str("coordinate_transformation_mode").unwrap(),
            Some("asymmetric")
        );
    }
}

#[test]
fn renamed_modes_and_new_defaults() {
    let n = with(
        node("GridSample", &["x", "grid"], &["y"], "gs"),
        vec![a_str("mode", "bilinear")],
    );
    let ins = vec![vf("x", &[1, 1, 2, 2]), vf("grid", &[1, 2, 2, 2])];
    if let Some(g) = lower(n, 16, ins, &["y"], vec![], &["GridSample"]) {
        assert_eq!(g.nodes[0].attrs.str("mode").unwrap(), Some("linear"));
    }
    let n = node("RoiAlign", &["x", "rois", "idx"], &["y"], "roi");
    let ins = vec![
        vf("x", &[1, 1, 4, 4]),
        vf("rois", &[1, 4]),
        vi("idx", 7, &[D::N(1)]),
    ];
    if let Some(g) = lower(n, 10, ins, &["y"], vec![], &["RoiAlign"]) {
        assert_eq!(
            g.nodes[0].attrs.get("coordinate_transformation_mode"),
            Some(&Attr::Str("output_half_pixel".into()))
        );
    }
    let n = with(node("DFT", &["x"], &["y"], "dft"), vec![a_int("axis", 2)]);
    if let Some(g) = lower(
        n,
        17,
        vec![vf("x", &[1, 4, 4, 1])],
        &["y"],
        vec![],
        &["DFT"],
    ) {
        let d = &g.nodes[0];
        assert_eq!(d.inputs[1], None);
        assert_eq!(const_input(&g, d, 2), vec![2.0]);
        assert!(!d.attrs.has("axis"));
    }
}

#[test]
fn batch_norm_legacy_forms() {
    let ins = || {
        vec![
            vf("x", &[1, 2, 2, 2]),
            vf("s", &[2]),
            vf("b", &[2]),
            vf("m", &[2]),
            vf("v", &[2]),
        ]
    };
    let n = with(
        node(
            "BatchNormalization",
            &["x", "s", "b", "m", "v"],
            &["y"],
            "bn",
        ),
        vec![a_int("spatial", 1)],
    );
    if let Some(g) = lower(n, 8, ins(), &["y"], vec![], &["BatchNormalization"]) {
        assert!(!g.nodes[0].attrs.has("spatial"));
    }
    let n = with(
        node(
            "BatchNormalization",
            &["x", "s", "b", "m", "v"],
            &["y"],
            "bn",
        ),
        vec![a_int("spatial", 0)],
    );
    let m = model(graph("g", vec![n], ins(), vec![untyped("y")], vec![]), 8);
    let e = onnx::import(&bytes(&m), None).unwrap_err();
    assert!(e.is_unsupported());
    assert!(e.to_string().contains("spatial=0"), "{e}");
    // Training outputs before 14 set training_mode.
    let n = node(
        "BatchNormalization",
        &["x", "s", "b", "m", "v"],
        &["y", "rm", "rv"],
        "bn",
    );
    if let Some(g) = lower(
        n,
        9,
        ins(),
        &["y", "rm", "rv"],
        vec![],
        &["BatchNormalization"],
    ) {
        assert_eq!(g.nodes[0].attrs.int("training_mode").unwrap(), Some(1));
    }
}

#[test]
fn group_norm_18_repeats_scale_per_channel() {
    let n = with(
        node("GroupNormalization", &["x", "s", "b"], &["y"], "gn"),
        vec![a_int("num_groups", 2)],
    );
    let ins = vec![vf("x", &[1, 4, 2]), vf("s", &[2]), vf("b", &[2])];
    let needs = [
        "GroupNormalization",
        "Shape",
        "Div",
        "Concat",
        "Reshape",
        "Expand",
    ];
    if let Some(g) = lower(n, 18, ins, &["y"], vec![], &needs) {
        let gn = g.nodes.last().unwrap();
        assert_eq!(gn.op.name(), "GroupNormalization");
        assert_eq!(gn.attrs.int("stash_type").unwrap(), Some(1));
        for i in [1, 2] {
            let v = gn.inputs[i].unwrap();
            let producer = g.nodes.iter().find(|n| n.outputs.contains(&v)).unwrap();
            assert_eq!(producer.op.name(), "Reshape");
        }
    }
}

#[test]
fn legacy_broadcast_with_axis_is_unsupported() {
    let n = with(
        node("Add", &["x", "y"], &["z"], "add"),
        vec![a_int("broadcast", 1), a_int("axis", 1)],
    );
    let m = model(
        graph(
            "g",
            vec![n],
            vec![vf("x", &[2, 3, 4]), vf("y", &[3])],
            vec![untyped("z")],
            vec![],
        ),
        7,
    );
    let e = onnx::import(&bytes(&m), None).unwrap_err();
    assert!(e.is_unsupported());
    assert!(e.to_string().contains("`add`"), "{e}");
    assert!(e.to_string().contains("axis"), "{e}");
    // Without `axis`, legacy broadcasting is numpy's and the attribute is dropped.
    let n = with(
        node("Add", &["x", "y"], &["z"], "add"),
        vec![a_int("broadcast", 1)],
    );
    let g = lower(
        n,
        7,
        vec![vf("x", &[2, 3]), vf("y", &[3])],
        &["z"],
        vec![],
        &["Add"],
    )
    .unwrap();
    assert!(!g.nodes[0].attrs.has("broadcast"));
}

#[test]
fn old_scan_is_unsupported() {
    let body = graph("body", vec![], vec![], vec![], vec![]);
    let n = with(
        node("Scan", &["", "x"], &["y"], "scan8"),
        vec![a_graph("body", body), a_int("num_scan_inputs", 1)],
    );
    let m = model(
        graph(
            "g",
            vec![n],
            vec![vf("x", &[1, 2])],
            vec![untyped("y")],
            vec![],
        ),
        8,
    );
    let e = onnx::import(&bytes(&m), None).unwrap_err();
    assert!(e.is_unsupported());
    assert!(
        e.to_string().contains("`scan8` (Scan, ai.onnx opset 8)"),
        "{e}"
    );
}

#[test]
fn old_dropout_mask_keeps_the_input_dtype() {
    let n = node("Dropout", &["x"], &["y", "mask"], "drop");
    if let Some(g) = lower(
        n,
        9,
        vec![vf("x", &[4])],
        &["y", "mask"],
        vec![],
        &["Dropout", "CastLike"],
    ) {
        assert_eq!(ops(&g), ["Dropout", "CastLike"]);
        let mask = g.find_value("mask").unwrap();
        assert_eq!(g.nodes[1].outputs, vec![mask]);
        assert_eq!(g.nodes[1].inputs[0], Some(g.nodes[0].outputs[1]));
    }
}
