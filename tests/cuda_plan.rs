//! CUDA execution plans without a GPU: every shared model, in fp32, bf16 and fp16,
//! plans completely (every node a kernel or a cuBLASLt GEMM, none skipped), the plan's
//! whole module (kernels and GEMM epilogues) compiles with NVRTC for sm_90, values that
//! are alive at the same time never share arena bytes, and the plan survives a serde
//! round trip (it is what the artifact stores). ResNet's `relu(conv + b + residual)`
//! runs in cuBLASLt's epilogue (or a post kernel ending with the activation), and a
//! small ResNet (tests/resnet_block/graph.rs) plans with it and a channels-last
//! MaxPool. The numbers on a GPU come from `gopt test --backend cuda` and the
//! `#[ignore]`d tests here, both run by scripts/gpu-check.sh.

use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use gopt::codegen::cuda::plan::{self, CudaPlan, Place, Step};
use gopt::pipeline::{specialize, Options};
use std::collections::BTreeMap;
use std::path::Path;

mod common;
use common::include_dir;

fn model_plan(name: &str, bucket: &[(&str, u64)], precision: &str) -> (CudaPlan, Vec<u8>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/models")
        .join(name)
        .join("model.onnx");
    let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let b: BTreeMap<String, u64> = bucket.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let opts = Options::new().precision(gopt::Precision::from_name(precision).expect("precision"));
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
            assert!(p.arena_bytes <= p.frame.unplanned_bytes);
            let gemms = p
                .steps
                .iter()
                .filter(|s| matches!(s, Step::Gemm(_)))
                .count();
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
                p.frame.unplanned_bytes,
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
            Some(Place::Arena(o)) => Some((*o, *o + p.frame.value_bytes[&v])),
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
                Step::Collective(c) => (vec![c.input], vec![c.output]),
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

/// A channels-last FusedConv with constant weights and bias (pseudo-random values).
fn nhwc_conv(
    dt: &str,
    c: usize,
    m: usize,
    k: usize,
    stride: usize,
    act: &str,
    residual: bool,
) -> String {
    let (n, h) = (2usize, 9usize);
    let pad = k / 2;
    let oh = (h + 2 * pad - k) / stride + 1;
    let vals = |len: usize, seed: usize| -> String {
        (0..len)
            .map(|i| {
                format!(
                    "{:.4}",
                    (((i * 7919 + seed * 104729) % 1000) as f64 / 1000.0 - 0.5) * 0.5
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let act_attr = match act {
        "clip" => r#"activation="clip", clip_min=0.0, clip_max=6.0, "#.to_string(),
        "none" => String::new(),
        a => format!(r#"activation="{a}", "#),
    };
    let (res_in, res_arg) = if residual {
        (format!(r#", %9 "r": {dt}[{n},{oh},{oh},{m}]"#), "%9")
    } else {
        (String::new(), "_")
    };
    format!(
        r#"graph "g"(%0 "x": {dt}[{n},{h},{h},{c}]{res_in}) -> (%3) {{
  %1 "w": {dt}[{m},{c},{k},{k}] = const [{w}]
  %2 "b": {dt}[{m}] = const [{b}]
  %3 "y": {dt}[{n},{oh},{oh},{m}] = FusedConv "conv"(%0, %1, %2, {res_arg}) {{{act_attr}layout="NHWC", pads=ints[{pad},{pad},{pad},{pad}], strides=ints[{stride},{stride}]}}
}}"#,
        w = vals(m * c * k * k, 1),
        b = vals(m, 2),
    )
}

const CONV_CASES: [(&str, usize, usize, usize, usize, &str, bool); 7] = [
    ("f32", 8, 16, 3, 1, "relu", false),
    ("bf16", 3, 16, 7, 2, "relu", false),
    ("f32", 3, 16, 7, 2, "none", false),
    ("bf16", 16, 32, 1, 1, "none", true),
    ("bf16", 16, 24, 3, 2, "clip", false),
    ("f16", 8, 8, 3, 1, "relu", true),
    ("bf16", 24, 8, 1, 1, "silu", false),
];

#[test]
fn channels_last_convolutions_plan_as_gemms() {
    for (dt, c, m, k, s, act, res) in CONV_CASES {
        let g = gopt::ir::verify(
            gopt::ir::text::parse(&nhwc_conv(dt, c, m, k, s, act, res)).expect("parses"),
        )
        .expect("verifies");
        let (p, _) = plan::build(&g).unwrap_or_else(|e| panic!("{dt} {k}x{k}: {e}"));
        let gemm = p
            .steps
            .iter()
            .find_map(|s| match s {
                Step::Gemm(g) => Some(g.clone()),
                Step::Kernel(_) | Step::Collective(_) => None,
            })
            .expect("the convolution is a GEMM");
        assert!(gemm.trans_b && gemm.n == m as u64, "{gemm:?}");
        let im2col = p.kernels.iter().any(|k| k.name.ends_with("_im2col"));
        assert_eq!(im2col, !(k == 1 && s == 1), "{dt} {k}x{k} s{s}");
        if im2col {
            assert_eq!(gemm.k % 8, 0, "K padded to a multiple of 8");
        }
        let src = gopt::codegen::cuda::module_source(&p.kernels);
        let opts = CompileOptions {
            arch: Some("sm_90"),
            include_paths: vec![include_dir()],
            options: vec!["--std=c++17".into()],
            ..Default::default()
        };
        if let Err(e) = compile_ptx_with_opts(&src, opts) {
            panic!("{dt} {k}x{k}: NVRTC rejected the module: {e:?}\n{src}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn channels_last_convolution_gemms_match_the_interpreter_on_the_gpu() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    for (dt, c, m, k, s, act, res) in CONV_CASES {
        let g = gopt::ir::verify(
            gopt::ir::text::parse(&nhwc_conv(dt, c, m, k, s, act, res)).expect("parses"),
        )
        .expect("verifies");
        let inputs: Vec<gopt::Tensor> = g
            .inputs
            .iter()
            .enumerate()
            .map(|(j, &v)| {
                let ty = g.ty(v).expect("typed");
                let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
                let len: usize = shape.iter().product();
                let vals: Vec<f64> = (0..len)
                    .map(|i| (((i * 2654435761 + j * 40503) % 2000) as f64 / 1000.0) - 1.0)
                    .collect();
                gopt::Tensor::from_f64s(ty.dtype, &shape, &vals).expect("tensor")
            })
            .collect();
        let want = gopt::ir::interp::run(&g, &inputs).expect("interpreter");
        let (p, blob) = plan::build(&g).expect("plans");
        let w = gopt::runtime::cuda::Weights::upload(&dev, &blob).expect("weights");
        let mut exe = gopt::runtime::cuda::Executable::new(&dev, p, w, true).expect("loads");
        let got = exe
            .run(&inputs)
            .unwrap_or_else(|e| panic!("{dt} {k}x{k}: {e}"));
        let (a, b) = (got[0].to_f64_vec(), want[0].to_f64_vec());
        let num: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
        let den: f64 = b.iter().map(|y| y * y).sum();
        let l2 = (num / den).sqrt();
        let bound = if dt == "f32" { 1e-5 } else { 1e-2 };
        assert!(
            l2 <= bound,
            "{dt} {k}x{k} s{s} {act}: relative L2 {l2:.3e} > {bound}"
        );
        println!(
            "conv as GEMM {dt} {c}->{m} {k}x{k} s{s} {act} residual={res}: relative L2 {l2:.2e}"
        );
    }
}

/// A GEMM padded to 64 columns (the layout rule's form) and sliced back.
fn padded_gemm(trans_b: bool) -> String {
    padded_gemm_to(trans_b, 52)
}

/// A GEMM padded to 64 columns and sliced back to `n` (52 f32 columns: rows stay
/// 16-byte aligned, so the slice folds into the GEMM; 49: they do not, so the output
/// stays in the padded rows).
fn padded_gemm_to(trans_b: bool, n: usize) -> String {
    let (m, k, np) = (8usize, 16usize, 64usize);
    let w: Vec<String> = (0..k * np)
        .map(|i| {
            let (r, c) = if trans_b {
                (i % k, i / k)
            } else {
                (i / np, i % np)
            };
            if c >= n {
                "0.0".into()
            } else {
                format!("{:.3}", ((r * 31 + c * 17) % 23) as f64 / 23.0 - 0.5)
            }
        })
        .collect();
    let wshape = if trans_b {
        format!("{np},{k}")
    } else {
        format!("{k},{np}")
    };
    format!(
        r#"graph "g"(%0 "x": f32[{m},{k}]) -> (%6) {{
  %1 "w": f32[{wshape}] = const [{w}]
  %2 "y": f32[{m},{np}] = FusedMatMul "mm"(%0, %1, _, _) {{trans_b={tb}}}
  %3 "s": i64[1] = const [0]
  %4 "e": i64[1] = const [{n}]
  %5 "a": i64[1] = const [1]
  %6 "out": f32[{m},{n}] = Slice "slice"(%2, %3, %4, %5)
}}"#,
        w = w.join(", "),
        tb = i32::from(trans_b)
    )
}

#[test]
fn a_slice_back_from_a_padded_gemm_folds_into_it() {
    for trans_b in [false, true] {
        let g = gopt::ir::verify(gopt::ir::text::parse(&padded_gemm(trans_b)).expect("parses"))
            .expect("verifies");
        let (p, _) = plan::build(&g).expect("plans");
        assert_eq!(p.steps.len(), 1, "trans_b={trans_b}: {:?}", p.steps);
        assert!(
            p.kernels.is_empty(),
            "the folded slice's kernel is never written: {:?}",
            p.kernels.iter().map(|k| &k.name).collect::<Vec<_>>()
        );
        let Step::Gemm(gm) = &p.steps[0] else {
            panic!("not a GEMM")
        };
        assert_eq!(gm.n, 52);
        assert_eq!(gm.ld_b, if trans_b { None } else { Some(64) });
        assert_eq!(gm.out, g.outputs[0].0);
    }
}

#[test]
fn an_unaligned_slice_to_an_output_is_read_back_from_the_padded_rows() {
    let g = gopt::ir::verify(gopt::ir::text::parse(&padded_gemm_to(false, 49)).expect("parses"))
        .expect("verifies");
    let (p, _) = plan::build(&g).expect("plans");
    assert_eq!(p.steps.len(), 1, "no slice kernel: {:?}", p.steps);
    let Step::Gemm(gm) = &p.steps[0] else {
        panic!("not a GEMM")
    };
    assert_eq!(gm.n, 64, "the GEMM keeps its aligned width");
    let out = &p.frame.outputs[0];
    assert_eq!((out.shape.clone(), out.row_pitch), (vec![8, 49], Some(64)));
    assert_eq!(
        p.places.get(&out.value),
        p.places.get(&gm.out),
        "the output is the GEMM's rows"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn a_folded_slice_matches_the_interpreter_on_the_gpu() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    for (trans_b, n) in [(false, 52), (true, 52), (false, 49), (true, 49)] {
        let g =
            gopt::ir::verify(gopt::ir::text::parse(&padded_gemm_to(trans_b, n)).expect("parses"))
                .expect("verifies");
        let vals: Vec<f64> = (0..8 * 16)
            .map(|i| ((i * 7) % 13) as f64 / 13.0 - 0.5)
            .collect();
        let x = gopt::Tensor::from_f64s(gopt::DType::F32, &[8, 16], &vals).expect("x");
        let want = gopt::ir::interp::run(&g, std::slice::from_ref(&x)).expect("interpreter");
        let (p, blob) = plan::build(&g).expect("plans");
        let w = gopt::runtime::cuda::Weights::upload(&dev, &blob).expect("weights");
        let mut exe = gopt::runtime::cuda::Executable::new(&dev, p, w, true).expect("loads");
        let got = exe.run(&[x]).expect("runs");
        assert_eq!(got[0].shape(), want[0].shape(), "n={n}");
        for (a, b) in got[0].to_f64_vec().iter().zip(want[0].to_f64_vec()) {
            assert!(
                (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
                "trans_b={trans_b} n={n}: {a} vs {b}"
            );
        }
    }
    println!("folded slice: padded GEMMs sliced back (folded, or read back from padded rows) match the interpreter");
}

#[test]
fn clip_without_a_min_compiles() {
    // ONNX Clip's min and max are optional inputs; an absent one must not stop codegen.
    let g = gopt::ir::verify(
        gopt::ir::text::parse(
            r#"graph "g"(%0 "x": f32[3,4]) -> (%2) {
  %1 "hi": f32[] = const [0.5]
  %2 "y": f32[3,4] = Clip "y"(%0, _, %1)
}"#,
        )
        .expect("parses"),
    )
    .expect("verifies");
    let (p, _) = plan::build(&g).expect("plans");
    let src = gopt::codegen::cuda::module_source(&p.kernels);
    assert!(src.contains("0.5"), "{src}");
    let opts = CompileOptions {
        arch: Some("sm_90"),
        include_paths: vec![include_dir()],
        options: vec!["--std=c++17".into()],
        ..Default::default()
    };
    compile_ptx_with_opts(&src, opts).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
}

#[test]
fn a_saved_artifact_loads_back_with_the_same_plans() {
    // Compiling for CUDA needs no GPU; running does (scripts/gpu-check.sh).
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models/bert_small/model.onnx");
    let model = gopt::load_model(&path).expect("model");
    let opts = Options::new()
        .precision(gopt::Precision::Bf16)
        .buckets("batch", [1, 2])
        .buckets("seq", [64])
        .backend(gopt::pipeline::Backend::Cuda);
    let compiled = gopt::compile(&model, &opts).expect("compiles");
    assert_eq!(compiled.buckets().len(), 2);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bert_small.gopt");
    let _ = std::fs::remove_dir_all(&dir);
    compiled.save(&dir).expect("saves");
    let loaded = gopt::Compiled::load(&dir, &Options::default()).expect("loads");
    assert_eq!(loaded.backend(), gopt::pipeline::Backend::Cuda);
    assert_eq!(loaded.weights_bytes(), compiled.weights_bytes());
    for (a, b) in compiled.buckets().iter().zip(loaded.buckets()) {
        assert_eq!(a.sizes, b.sizes);
        assert_eq!(
            serde_json::to_string(&a.plan).expect("json"),
            serde_json::to_string(&b.plan).expect("json")
        );
    }
    // Same input and options, same artifact, byte for byte.
    let again = dir.with_extension("again");
    let _ = std::fs::remove_dir_all(&again);
    gopt::compile(&model, &opts)
        .expect("compiles")
        .save(&again)
        .expect("saves");
    for f in ["plan.json", "kernels.cu", "weights.bin"] {
        assert!(
            std::fs::read(dir.join(f)).expect("read")
                == std::fs::read(again.join(f)).expect("read"),
            "{f} differs between two compiles"
        );
    }
    // A folder that is not an artifact is a clear error.
    let err = gopt::Compiled::load(Path::new(env!("CARGO_MANIFEST_DIR")), &Options::default())
        .err()
        .expect("not an artifact");
    assert!(err.to_string().contains("plan.json"), "{err}");
}

/// ResNet's order, `act(conv + b + residual)` (`epilogue="bias_residual_act"`), as a
/// channels-last GEMM: (dtype, residual dtype, activation, whether cuBLASLt's epilogue
/// does it all). cuBLASLt adds C and the bias before its activation, so a residual of
/// Y's dtype and ReLU fuse entirely; an f32 residual under a bf16 output, or an
/// activation cuBLASLt lacks, leaves a post kernel that ends with the activation.
const RESIDUAL_FIRST_CASES: [(&str, &str, &str, bool); 5] = [
    ("bf16", "bf16", "relu", true),
    ("f32", "f32", "relu", true),
    ("bf16", "f32", "relu", false),
    ("f16", "f16", "clip", false),
    ("bf16", "bf16", "silu", false),
];

fn residual_first_conv(dt: &str, rdt: &str, act: &str) -> gopt::ir::Verified {
    let text = nhwc_conv(dt, 16, 32, 3, 1, act, true)
        .replace(
            r#"layout="NHWC""#,
            r#"epilogue="bias_residual_act", layout="NHWC""#,
        )
        .replace(&format!(r#"%9 "r": {dt}["#), &format!(r#"%9 "r": {rdt}["#));
    gopt::ir::verify(gopt::ir::text::parse(&text).expect("parses")).expect("verifies")
}

fn nvrtc_compiles(p: &CudaPlan, what: &str) {
    let src = gopt::codegen::cuda::module_source(&p.kernels);
    let opts = CompileOptions {
        arch: Some("sm_90"),
        include_paths: vec![include_dir()],
        options: vec!["--std=c++17".into()],
        ..Default::default()
    };
    if let Err(e) = compile_ptx_with_opts(&src, opts) {
        panic!("{what}: NVRTC rejected the module: {e:?}\n{src}");
    }
}

#[test]
fn residual_before_activation_goes_to_the_gemm_epilogue() {
    use gopt::codegen::cuda::gemm::Epilogue;
    for (dt, rdt, act, all_in_library) in RESIDUAL_FIRST_CASES {
        let what = format!("{dt} residual {rdt} then {act}");
        let g = residual_first_conv(dt, rdt, act);
        let (p, _) = plan::build(&g).unwrap_or_else(|e| panic!("{what}: {e}"));
        let gemm = p
            .steps
            .iter()
            .find_map(|s| match s {
                Step::Gemm(g) => Some(g.clone()),
                Step::Kernel(_) | Step::Collective(_) => None,
            })
            .expect("the convolution is a GEMM");
        if all_in_library {
            assert_eq!(gemm.epilogue, Epilogue::Relu, "{what}");
            assert!(
                gemm.residual.is_some() && gemm.bias.is_some() && gemm.post.is_none(),
                "{what}: {gemm:?}"
            );
        } else {
            let post = gemm.post.expect("a post kernel");
            let src = &p.kernels[post].source;
            assert!(src.contains(&format!("y = {act}(")), "{what}: {src}");
        }
        nvrtc_compiles(&p, &what);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn residual_before_activation_matches_the_interpreter_on_the_gpu() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    for (dt, rdt, act, _) in RESIDUAL_FIRST_CASES {
        let g = residual_first_conv(dt, rdt, act);
        let l2 = gpu_vs_interpreter(&dev, &g, &g);
        let bound = if dt == "f32" { 1e-5 } else { 1e-2 };
        assert!(
            l2 <= bound,
            "{dt} residual {rdt} then {act}: relative L2 {l2:.3e} > {bound}"
        );
        println!("conv as GEMM {dt}, residual {rdt} then {act}: relative L2 {l2:.2e}");
    }
}

/// The relative L2 error of `g`'s plan run on the GPU against the interpreter running
/// `reference` (the same function) on the same pseudo-random inputs.
fn gpu_vs_interpreter(
    dev: &gopt::runtime::cuda::Device,
    g: &gopt::ir::Verified,
    reference: &gopt::ir::Verified,
) -> f64 {
    let inputs: Vec<gopt::Tensor> = g
        .inputs
        .iter()
        .enumerate()
        .map(|(j, &v)| {
            let ty = g.ty(v).expect("typed");
            let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
            common::random(ty.dtype, &shape, 7 + j as u64)
        })
        .collect();
    let want = gopt::ir::interp::run(reference, &inputs).expect("interpreter");
    let (p, blob) = plan::build(g).expect("plans");
    let w = gopt::runtime::cuda::Weights::upload(dev, &blob).expect("weights");
    let mut exe = gopt::runtime::cuda::Executable::new(dev, p, w, true).expect("loads");
    let got = exe.run(&inputs).unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (got[0].to_f64_vec(), want[0].to_f64_vec());
    let num: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

#[path = "resnet_block/graph.rs"]
mod resnet;

/// The small ResNet optimized at `precision` (the layout pass included).
fn resnet_optimized(precision: gopt::Precision) -> gopt::ir::Verified {
    let cfg = gopt::passes::Config {
        precision,
        ..Default::default()
    };
    gopt::passes::optimize(resnet::resnet_block(2), &cfg)
        .expect("optimizes")
        .graph
}

#[test]
fn resnet_block_plans_with_fused_epilogues_and_a_channels_last_pool() {
    for precision in [gopt::Precision::Fp32, gopt::Precision::Bf16] {
        let g = resnet_optimized(precision);
        let what = format!("{precision:?}");
        let ops = |op: &str| g.nodes.iter().filter(|n| n.op.name() == op).count();
        // Every Relu and Add is in a convolution's epilogue; the transposes left are
        // the input's and the head's.
        assert_eq!(
            (ops("Relu"), ops("Add"), ops("Transpose")),
            (0, 0, 2),
            "{what}\n{}",
            gopt::ir::text::print(&g)
        );
        let pool = g.nodes.iter().find(|n| n.op.name() == "MaxPool").unwrap();
        let rank = g.ty(pool.inputs[0].unwrap()).unwrap().shape.len();
        assert_eq!(rank, 5, "{what}: the pool runs on the [N, 1, H, W, C] view");
        let (p, _) = plan::build(&g).unwrap_or_else(|e| panic!("{what}: {e}"));
        let fused = p
            .steps
            .iter()
            .filter(|s| {
                matches!(s, Step::Gemm(g) if g.residual.is_some()
                    && g.epilogue == gopt::codegen::cuda::gemm::Epilogue::Relu)
            })
            .count();
        assert!(
            fused >= 1,
            "{what}: no GEMM adds a residual before its ReLU"
        );
        nvrtc_compiles(&p, &what);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn resnet_block_matches_the_interpreter_on_the_gpu() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    let reference = resnet::resnet_block(2);
    for (precision, bound) in [(gopt::Precision::Fp32, 1e-4), (gopt::Precision::Bf16, 2e-2)] {
        let g = resnet_optimized(precision);
        let l2 = gpu_vs_interpreter(&dev, &g, &reference);
        assert!(l2 <= bound, "{precision:?}: relative L2 {l2:.3e} > {bound}");
        println!("small ResNet {precision:?} on the GPU: relative L2 {l2:.2e} against fp32");
    }
}
