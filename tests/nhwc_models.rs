//! The channels-last pass on the shared MobileNetV2 (batch 1, default options): every
//! convolution runs NHWC, only the transposes at the model's layout boundaries remain
//! (the NCHW input, the NCHW ReduceMean head), and the optimized graph computes what the
//! unoptimized one does on the published test data. A small ResNet in the exporter's ops
//! (tests/resnet_block/graph.rs) also fuses each `relu(conv + b + shortcut)` into one
//! convolution and pools channels-last.

use gopt::pipeline::{specialize, Options, Variant};
use gopt::testing::compare::{compare, Tolerance};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models/mobilenet_v2")
}

fn compile(opts: &Options) -> Variant {
    let model = gopt::load_model(&model_dir().join("model.onnx")).expect("loads");
    let bucket: BTreeMap<String, u64> = [("batch".to_string(), 1)].into();
    specialize(&model.model, &bucket, opts).expect("specializes")
}

fn count(v: &Variant, op: &str) -> usize {
    v.graph.nodes.iter().filter(|n| n.op.name() == op).count()
}

fn nhwc_convs(v: &Variant) -> usize {
    v.graph
        .nodes
        .iter()
        .filter(|n| {
            n.op.name() == "FusedConv" && n.attrs.str_or("layout", "NCHW").unwrap() == "NHWC"
        })
        .count()
}

fn read(name: &str) -> gopt::Tensor {
    gopt::tensor_io::read_tensor(&model_dir().join("test_data_set_0").join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .1
}

#[test]
fn mobilenet_v2_runs_channels_last() {
    let v = compile(&Options::default());
    let r = v.report.as_ref().expect("optimized");
    assert_eq!(r.channels_last, 52, "{}", r.explain());
    assert_eq!(nhwc_convs(&v), 52);
    assert_eq!(count(&v, "FusedConv"), 52);
    // The input to NHWC, the last conv's output back to NCHW for ReduceMean.
    assert_eq!(count(&v, "Transpose"), 2, "{}", r.explain());
    assert!(r
        .explain()
        .contains("layout: 52 convs channels-last, 2 transposes left"));

    let plain = compile(&Options::new().optimize(false));
    let nchw = compile(&Options::new().disable(gopt::Pass::Layout));
    assert_eq!(nhwc_convs(&nchw), 0);
    assert_eq!(count(&nchw, "Transpose"), 0);

    let input = read("input_0.pb");
    let run =
        |v: &Variant| gopt::ir::interp::run(&v.graph, std::slice::from_ref(&input)).expect("runs");
    let got = run(&v);
    let tight = Tolerance {
        rtol: 1e-5,
        atol: 1e-6,
    };
    // Only the layout differs from the NCHW optimized graph.
    for (g, w) in got.iter().zip(run(&nchw).iter()) {
        compare(g, w, tight).unwrap_or_else(|m| panic!("vs NCHW optimized: {m}"));
    }
    for (g, w) in got.iter().zip(run(&plain).iter()) {
        compare(
            g,
            w,
            Tolerance {
                rtol: 1e-4,
                atol: 1e-5,
            },
        )
        .unwrap_or_else(|m| panic!("vs unoptimized: {m}"));
    }
    let want = read("output_0.pb");
    compare(
        &got[0],
        &want,
        Tolerance {
            rtol: 1e-3,
            atol: 1e-4,
        },
    )
    .unwrap_or_else(|m| panic!("vs reference: {m}"));
}

#[path = "resnet_block/graph.rs"]
mod resnet;

/// The small ResNet at fp32: each bottleneck's `relu(conv + b + shortcut)` is one
/// FusedConv (`epilogue="bias_residual_act"`), MaxPool runs channels-last between two
/// views, and the optimized graph computes what the exported one does.
#[test]
fn resnet_block_fuses_residual_then_relu_and_pools_channels_last() {
    let before = resnet::resnet_block(2);
    let out = gopt::passes::optimize(before.clone(), &gopt::passes::Config::default())
        .expect("optimizes");
    let g = &out.graph;
    let ops = |op: &str| g.nodes.iter().filter(|n| n.op.name() == op).count();
    let text = gopt::ir::text::print(g);
    assert_eq!(ops("FusedConv"), 8, "{text}");
    assert_eq!((ops("Relu"), ops("Add")), (0, 0), "{text}");
    let residual_first = g
        .nodes
        .iter()
        .filter(|n| n.attrs.str_or("epilogue", "").unwrap() == "bias_residual_act")
        .count();
    assert_eq!(residual_first, 2, "{text}");
    // The input's transpose and the head's: none around the pool.
    assert_eq!(ops("Transpose"), 2, "{text}");
    let pool = g.nodes.iter().find(|n| n.op.name() == "MaxPool").unwrap();
    assert_eq!(
        g.ty(pool.inputs[0].unwrap()).unwrap().shape.len(),
        5,
        "{text}"
    );
    let x = gopt::Tensor::from_f64s(
        gopt::DType::F32,
        &[2, 3, 32, 32],
        &(0..2 * 3 * 32 * 32)
            .map(|i| ((i * 7919 % 2003) as f64 / 1001.5) - 1.0)
            .collect::<Vec<_>>(),
    )
    .expect("input");
    let want = gopt::ir::interp::run(&before, std::slice::from_ref(&x)).expect("runs");
    let got = gopt::ir::interp::run(g, &[x]).expect("runs");
    compare(
        &got[0],
        &want[0],
        Tolerance {
            rtol: 1e-4,
            atol: 1e-5,
        },
    )
    .unwrap_or_else(|m| panic!("vs unoptimized: {m}"));
}
