//! The repo's exported decoders (tests/data/decoders) as a prompt alone, the form the
//! prefill and tensor-parallel tests take: `position_ids` the constant `0..seq` in every
//! row (so the rotary tables fold to constants), the mask all ones, the caches empty
//! constants (no past).

use gopt::ir::{DType, Model, Tensor, TensorType};
use std::path::Path;

/// Decoder `name` of tests/data/decoders as a prompt of `batch` rows of `seq` tokens:
/// every input but `input_ids` made a constant.
pub fn prefill(name: &str, batch: usize, seq: usize) -> Model {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/decoders")
        .join(name)
        .join("model.onnx");
    let mut m = gopt::load_model(&path)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .model;
    let g = &mut m.graph;
    let ids: Vec<f64> = (0..batch * seq).map(|i| (i % seq) as f64).collect();
    let positions = Tensor::from_f64s(DType::I64, &[batch, seq], &ids).expect("positions");
    let ones = vec![1.0; batch * seq];
    let ones = Tensor::from_f64s(DType::I64, &[batch, seq], &ones).expect("mask");
    for v in g.inputs.clone() {
        let value = &g.values[v.index()];
        let ty = value.ty.clone().expect("typed input");
        let t = match value.name.as_str() {
            "input_ids" => continue,
            "position_ids" => positions.clone(),
            "attention_mask" => ones.clone(),
            // The caches, empty: a prompt with no past.
            _ => {
                let shape: Vec<usize> = ty
                    .shape
                    .iter()
                    .enumerate()
                    .map(|(a, d)| match a {
                        0 => batch,
                        2 => 0,
                        _ => d.known().expect("static cache dims") as usize,
                    })
                    .collect();
                Tensor::zeros(ty.dtype, &shape)
            }
        };
        g.inputs.retain(|i| *i != v);
        let shape = gopt::ir::dim::shape_of(t.shape());
        g.values[v.index()].ty = Some(TensorType::new(t.dtype(), shape));
        g.constants.insert(v, t.into());
    }
    m
}
