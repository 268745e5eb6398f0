//! bert_small's Q/K/V come from one GEMM at every precision. Its export has three
//! projection GEMMs per layer with zero biases (which algebra removes); at bf16/fp16 the
//! GEMMs attention reads are the low-type ones that casts moved through the slices reach,
//! so the merge must hold for them too, not only for the fp32 GEMMs.

use gopt::passes::Precision;
use gopt::pipeline::{specialize, Options};
use std::collections::BTreeMap;
use std::path::Path;

#[test]
fn bert_small_merges_qkv_at_fp32_bf16_and_fp16() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models/bert_small/model.onnx");
    let model = gopt::load_model(&path).expect("bert_small loads");
    let bucket: BTreeMap<String, u64> = [("batch".to_string(), 1), ("seq".to_string(), 128)].into();
    for p in [Precision::Fp32, Precision::Bf16, Precision::Fp16] {
        let v = specialize(&model.model, &bucket, &Options::new().precision(p)).expect("compiles");
        let r = v.report.as_ref().expect("optimized");
        assert_eq!(r.attention.fused, 2, "{p:?}\n{}", r.explain());
        assert_eq!(r.attention.qkv_one_gemm, 2, "{p:?}\n{}", r.explain());
    }
}
