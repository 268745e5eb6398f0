//! The library API end to end: compile a model for its shape buckets, run it on a data
//! set, compare with the reference outputs, save the artifact and load it back.
//!
//! ```sh
//! cargo run --release --example compile_and_run                 # CPU backend
//! cargo run --release --example compile_and_run -- --cuda       # on an NVIDIA GPU
//! cargo run --release --example compile_and_run -- --wgpu       # any GPU, or lavapipe
//! ```
//!
//! It uses the small BERT shipped in `tests/data/models/bert_small`.

use gopt::tensor_io::read_tensor;
use gopt::{Backend, Options, Precision};
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cuda = std::env::args().any(|a| a == "--cuda");
    let wgpu = std::env::args().any(|a| a == "--wgpu");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models/bert_small");
    let model = gopt::load_model(&dir.join("model.onnx"))?;

    // bf16 on tensor cores with fp32 accumulation on the GPU; fp32 on the CPU. Two
    // buckets: batch 1 and 2, sequence 128 (shorter sequences are padded and masked).
    let backend = match (cuda, wgpu) {
        (true, _) => Backend::Cuda,
        (_, true) => Backend::Wgpu,
        _ => Backend::Cpu,
    };
    let opts = Options::new()
        .precision(if cuda {
            Precision::Bf16
        } else {
            Precision::Fp32
        })
        .buckets("batch", [1, 2])
        .buckets("seq", [128])
        .backend(backend);
    let mut compiled = gopt::compile(&model, &opts)?;
    for b in compiled.buckets() {
        println!(
            "bucket {}: {} kernels, {} launches per run, {} bytes of device memory",
            b.name(),
            b.kernels(),
            b.launches(),
            b.device_bytes()
        );
    }

    // Inputs in graph order (input_ids, attention_mask), from the first data set.
    let set = dir.join("test_data_set_0");
    let inputs = vec![
        read_tensor(&set.join("input_0.pb"))?.1,
        read_tensor(&set.join("input_1.pb"))?.1,
    ];
    let want = read_tensor(&set.join("output_0.pb"))?.1;
    let got = compiled.run(&inputs)?;
    let (g, w) = (got[0].to_f64_vec(), want.to_f64_vec());
    let err = g
        .iter()
        .zip(&w)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!(
        "output {:?}: max |difference| from the reference {err:.2e}",
        got[0].shape()
    );

    // The artifact: plan.json, kernels.cu (or kernels.wgsl), weights.bin, model.onnx
    // (the CPU backend has no plan to save).
    if cuda || wgpu {
        let out = std::env::temp_dir().join("bert_small.gopt");
        compiled.save(&out)?;
        let mut loaded = gopt::Compiled::load(&out, &opts)?;
        let again = loaded.run(&inputs)?;
        println!(
            "saved to {} and loaded back: same outputs: {}",
            out.display(),
            again[0] == got[0]
        );
    }
    Ok(())
}
