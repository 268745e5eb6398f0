//! The channels-last pass on the shared MobileNetV2 (batch 1, default options): every
//! convolution runs NHWC, only the transposes at the model's layout boundaries remain
//! (the NCHW input, the NCHW ReduceMean head), and the optimized graph computes what the
//! unoptimized one does on the published test data.

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
