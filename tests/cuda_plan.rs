//! CUDA execution plans without a GPU: every shared model, in fp32, bf16 and fp16,
//! plans completely (every node a kernel or a cuBLASLt GEMM, none skipped), the plan's
//! whole module (kernels and GEMM epilogues) compiles with NVRTC for sm_90, values that
//! are alive at the same time never share arena bytes, and the plan survives a serde
//! round trip (it is what the artifact stores). The numbers on a GPU come from
//! `gopt test --backend cuda` in scripts/gpu-check.sh.

use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use gopt::codegen::plan::{self, CudaPlan, Place, Step};
use gopt::pipeline::{specialize, Options};
use std::collections::BTreeMap;
use std::path::Path;

fn include_dir() -> String {
    std::env::var("GOPT_CUDA_INCLUDE").unwrap_or_else(|_| "/usr/local/cuda/include".into())
}

fn model_plan(name: &str, bucket: &[(&str, u64)], precision: &str) -> (CudaPlan, Vec<u8>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/models")
        .join(name)
        .join("model.onnx");
    let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let b: BTreeMap<String, u64> = bucket.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let opts = Options::from_cli(precision, &[], &[]).expect("options");
    let v = specialize(&model.model, &b, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    plan::build(&v.graph).unwrap_or_else(|e| panic!("{name} {precision}: {e}"))
}

const MODELS: [(&str, &[(&str, u64)]); 3] = [
    ("bert_small", &[("batch", 2), ("seq", 128)]),
    ("gpt2_small", &[("batch", 1), ("seq", 64)]),
    ("mobilenet_v2", &[("batch", 1)]),
];

#[test]
fn shared_models_plan_completely_and_compile() {
    // SAFETY: only probes whether the shared library can be loaded.
    assert!(
        unsafe { cudarc::nvrtc::sys::is_culib_present() },
        "NVRTC not found: run scripts/test.sh (it installs the pinned wheel)"
    );
    for (name, bucket) in MODELS {
        for precision in ["fp32", "bf16", "fp16"] {
            let (p, blob) = model_plan(name, bucket, precision);
            assert_eq!(p.weights_bytes, blob.len());
            assert!(p.arena_bytes <= p.unplanned_bytes);
            let gemms = p.steps.iter().filter(|s| matches!(s, Step::Gemm(_))).count();
            assert!(gemms > 0, "{name}: no GEMM in the plan");
            let src = gopt::codegen::cuda::module_source(&p.kernels);
            let opts = CompileOptions {
                arch: Some("sm_90"),
                include_paths: vec![include_dir()],
                options: vec!["--std=c++17".into()],
                ..Default::default()
            };
            if let Err(e) = compile_ptx_with_opts(&src, opts) {
                panic!("{name} {precision}: NVRTC rejected the plan's module: {e:?}");
            }
            println!(
                "{name} {precision}: {} steps ({} GEMMs, {} kernels), arena {} B of {} B unplanned, weights {} B",
                p.steps.len(),
                gemms,
                p.kernels.len(),
                p.arena_bytes,
                p.unplanned_bytes,
                p.weights_bytes
            );
        }
    }
}

#[test]
fn no_step_writes_over_what_it_reads() {
    for (name, bucket) in MODELS {
        let (p, _) = model_plan(name, bucket, "fp32");
        let range = |v: u32| match p.places.get(&v) {
            Some(Place::Arena(o)) => Some((*o, *o + p.value_bytes[&v])),
            _ => None,
        };
        for s in &p.steps {
            let (ins, outs): (Vec<u32>, Vec<u32>) = match s {
                Step::Kernel(k) => (p.kernels[*k].inputs.clone(), p.kernels[*k].outputs.clone()),
                Step::Gemm(g) => {
                    let mut ins = vec![g.a, g.b];
                    ins.extend(g.bias.iter().chain(&g.residual));
                    (ins, vec![g.out])
                }
            };
            for o in &outs {
                let Some((o0, o1)) = range(*o) else { continue };
                for i in &ins {
                    if let Some((i0, i1)) = range(*i) {
                        let disjoint = o1 <= i0 || i1 <= o0;
                        let residual_c = matches!(s, Step::Gemm(g) if g.residual == Some(*i));
                        assert!(
                            disjoint || residual_c && o0 == i0,
                            "{name}: a step writes value {o} over value {i} it reads"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn plans_round_trip_through_json() {
    let (p, _) = model_plan("bert_small", &[("batch", 1), ("seq", 128)], "bf16");
    let text = serde_json::to_string(&p).expect("serialize");
    let back: CudaPlan = serde_json::from_str(&text).expect("deserialize");
    assert_eq!(serde_json::to_string(&back).expect("serialize"), text);
}
