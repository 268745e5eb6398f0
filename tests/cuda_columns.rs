//! Columns read in place: where one GEMM computes several products side by side (a
//! sibling merge: Q/K/V with their rotate-half twins, Llama's gate and up projections)
//! and Slices cut them apart for element-wise kernels (rotary math, casts) or SwiGLU,
//! the CUDA plan copies nothing: each reader indexes the GEMM's rows with its pitch and
//! the slice's first column, 16 bytes at a time where the columns allow (RotaryEmbedding
//! reads its X so too). SwiGLU and RotaryEmbedding store the Cast after them (their only
//! reader) in the cast's type. Without a GPU: the plans
//! have no slice step, the readers name the GEMM's output, and the module compiles
//! with NVRTC for sm_90. On a GPU (`#[ignore]`d here; scripts/gpu-check.sh runs it):
//! the plans' results match the interpreter.

use gopt::codegen::cuda::plan::{self, CudaPlan, Step};
use gopt::ir::{text, verify, Verified};

mod common;
use common::{compile, nvrtc_ready};

fn vals(n: usize, seed: u64) -> String {
    let v: Vec<String> = common::random(gopt::ir::DType::F32, &[n], seed)
        .to_f64_vec()
        .iter()
        .map(|x| format!("{:.4}", x * 0.25))
        .collect();
    format!("[{}]", v.join(", "))
}

fn load(src: &str) -> Verified {
    verify(text::parse(src).unwrap_or_else(|e| panic!("parses: {e}\n{src}")))
        .unwrap_or_else(|e| panic!("verifies: {e}\n{src}"))
}

/// Llama's MLP after the sibling merge: one GEMM over `[Wg | Wu]`, SwiGLU of its two
/// halves (`ff` columns each), the cast to bf16 the down projection reads.
fn mlp(ff: usize) -> Verified {
    load(&format!(
        r#"graph "g"(%0 "x": bf16[2,8,16]) -> (%11) {{
  %1 "w": bf16[16,{w}] = const {wv}
  %2 "m": f32[2,8,{w}] = FusedMatMul "m"(%0, %1) {{output_dtype=dtype f32}}
  %3 "s0": i64[1] = const [0]
  %4 "s1": i64[1] = const [{ff}]
  %5 "s2": i64[1] = const [{w}]
  %6 "ax": i64[1] = const [-1]
  %7 "gate": f32[2,8,{ff}] = Slice "gate"(%2, %3, %4, %6)
  %8 "up": f32[2,8,{ff}] = Slice "up"(%2, %4, %5, %6)
  %9 "y": f32[2,8,{ff}] = SwiGLU "y"(%7, %8)
  %10 "c": bf16[2,8,{ff}] = Cast "c"(%9) {{to=dtype bf16}}
  %12 "wd": bf16[{ff},16] = const {wd}
  %11 "down": f32[2,8,16] = FusedMatMul "down"(%10, %12) {{output_dtype=dtype f32}}
}}"#,
        w = 2 * ff,
        wv = vals(16 * 2 * ff, 1),
        wd = vals(ff * 16, 2),
    ))
}

/// Rotary math on a merged Q/K/V GEMM's pieces: `q·cos + q'·sin` over head views of two
/// slices (`h` heads of 8), their plain sum, and V's slice cast to bf16, `gap` columns
/// after them.
fn rotary(h: usize, gap: usize) -> Verified {
    let d = 8 * h;
    let w = 2 * d + gap + 8;
    load(&format!(
        r#"graph "g"(%0 "x": bf16[2,4,16]) -> (%14, %15, %24) {{
  %1 "w": bf16[16,{w}] = const {wv}
  %2 "m": f32[2,4,{w}] = FusedMatMul "m"(%0, %1) {{output_dtype=dtype f32}}
  %3 "s0": i64[1] = const [0]
  %4 "s1": i64[1] = const [{d}]
  %5 "s2": i64[1] = const [{s2}]
  %6 "s3": i64[1] = const [{s3}]
  %7 "ax": i64[1] = const [-1]
  %8 "q": f32[2,4,{d}] = Slice "q"(%2, %3, %4, %7)
  %9 "qr": f32[2,4,{d}] = Slice "qr"(%2, %4, %5, %7)
  %16 "s4": i64[1] = const [{w}]
  %10 "v": f32[2,4,8] = Slice "v"(%2, %6, %16, %7)
  %17 "heads": i64[4] = const [2, 4, {h}, 8]
  %18 "qh": f32[2,4,{h},8] = Reshape "qh"(%8, %17)
  %19 "qrh": f32[2,4,{h},8] = Reshape "qrh"(%9, %17)
  %20 "cos": f32[1,4,1,8] = const {cos}
  %21 "sin": f32[1,4,1,8] = const {sin}
  %22 "a": f32[2,4,{h},8] = Mul "a"(%18, %20)
  %23 "b": f32[2,4,{h},8] = Mul "b"(%19, %21)
  %14 "rot": f32[2,4,{h},8] = Add "rot"(%22, %23)
  %15 "vc": bf16[2,4,8] = Cast "vc"(%10) {{to=dtype bf16}}
  %24 "sum": f32[2,4,{d}] = Add "sum"(%8, %9)
}}"#,
        s2 = 2 * d,
        s3 = 2 * d + gap,
        wv = vals(16 * w, 3),
        cos = vals(32, 4),
        sin = vals(32, 5),
    ))
}

/// RotaryEmbedding over the rows of a merged GEMM's first 16 columns (2 heads of 8),
/// cast to bf16 for the next GEMM.
fn rotary_rows() -> Verified {
    load(&format!(
        r#"graph "g"(%0 "x": bf16[2,4,16]) -> (%9) {{
  %1 "w": bf16[16,24] = const {wv}
  %2 "m": f32[2,4,24] = FusedMatMul "m"(%0, %1) {{output_dtype=dtype f32}}
  %3 "s0": i64[1] = const [0]
  %4 "s1": i64[1] = const [16]
  %5 "ax": i64[1] = const [-1]
  %6 "q": f32[2,4,16] = Slice "q"(%2, %3, %4, %5)
  %10 "cos": f32[1,4,4] = const {cos}
  %11 "sin": f32[1,4,4] = const {sin}
  %7 "r": f32[2,4,16] = RotaryEmbedding "r"(%6, %10, %11) {{num_heads=2}}
  %8 "c": bf16[2,4,16] = Cast "c"(%7) {{to=dtype bf16}}
  %12 "wo": bf16[16,8] = const {wo}
  %9 "y": f32[2,4,8] = FusedMatMul "y"(%8, %12) {{output_dtype=dtype f32}}
}}"#,
        wv = vals(16 * 24, 6),
        wo = vals(16 * 8, 9),
        cos = vals(16, 7),
        sin = vals(16, 8),
    ))
}

fn built(g: &Verified, what: &str) -> CudaPlan {
    let mut g = g.clone().into_inner();
    gopt::passes::group::fuse_elementwise(&mut g).expect("groups");
    let g = verify(g).expect("verifies");
    plan::build(&g).unwrap_or_else(|e| panic!("{what}: {e}")).0
}

fn kinds(p: &CudaPlan) -> Vec<&str> {
    p.step_kinds()
}

fn gemm_out(p: &CudaPlan) -> u32 {
    p.steps
        .iter()
        .find_map(|s| match s {
            Step::Gemm(g) if g.node == "m" => Some(g.out),
            Step::Gemm(_) | Step::Kernel(_) | Step::Collective(_) => None,
        })
        .expect("the merged GEMM")
}

#[test]
fn swiglu_reads_the_merged_gemm_and_stores_the_cast() {
    nvrtc_ready();
    // 32 columns: 16-byte reads; 6: one element at a time (rows of 6 f32 are 24 bytes).
    for (ff, vectorized) in [(32, true), (6, false)] {
        let what = format!("SwiGLU over 2 x {ff} columns");
        let p = built(&mlp(ff), &what);
        assert_eq!(kinds(&p), ["gemm", "swiglu", "gemm"], "{what}");
        let m = gemm_out(&p);
        let glu = p
            .kernels
            .iter()
            .find(|k| k.node == "y")
            .expect("a SwiGLU kernel");
        assert_eq!(glu.inputs, [m, m], "{what}: both halves read from the GEMM");
        assert_eq!(glu.vectorized, vectorized, "{what}");
        assert!(
            glu.source.contains("__nv_bfloat16* __restrict__ out")
                && glu.source.contains(&format!("{ff}LL")),
            "{what}: stores bf16, indexes the halves\n{}",
            glu.source
        );
        let src = gopt::codegen::cuda::module_source(&p.kernels);
        compile(&src).unwrap_or_else(|e| panic!("{what}: NVRTC: {e}\n{src}"));
    }
}

#[test]
fn element_wise_kernels_read_slices_in_place() {
    nvrtc_ready();
    // Rows of 40 f32 (16-byte vectors of the pieces), then of 43 (scalar reads).
    for (h, gap, vectorized) in [(2, 0, true), (2, 3, false)] {
        let what = format!("rotary over {h} heads, V {gap} columns further");
        let p = built(&rotary(h, gap), &what);
        assert!(
            !kinds(&p).contains(&"slice"),
            "{what}: no copies: {:?}",
            kinds(&p)
        );
        let m = gemm_out(&p);
        for k in &p.kernels {
            assert!(
                k.inputs.contains(&m),
                "{what}: kernel {} reads the GEMM's rows\n{}",
                k.name,
                k.source
            );
        }
        // The rotary kernel reads cos and sin broadcast (one element at a time); the
        // sum reads only whole pieces.
        let sum = p.kernels.iter().find(|k| k.node == "sum").expect("the sum");
        assert_eq!(sum.vectorized, vectorized, "{what}\n{}", sum.source);
        let src = gopt::codegen::cuda::module_source(&p.kernels);
        compile(&src).unwrap_or_else(|e| panic!("{what}: NVRTC: {e}\n{src}"));
    }
}

#[test]
fn rotary_reads_its_rows_in_place_and_stores_the_cast() {
    nvrtc_ready();
    let p = built(&rotary_rows(), "rotary rows");
    assert_eq!(kinds(&p), ["gemm", "rotaryembedding", "gemm"]);
    let m = gemm_out(&p);
    let rot = p
        .kernels
        .iter()
        .find(|k| k.node == "r")
        .expect("the rotary kernel");
    assert_eq!(rot.inputs[0], m, "X read from the GEMM's rows");
    assert!(
        rot.source.contains("__nv_bfloat16* __restrict__ y") && rot.source.contains("24LL"),
        "{}",
        rot.source
    );
    let src = gopt::codegen::cuda::module_source(&p.kernels);
    compile(&src).unwrap_or_else(|e| panic!("NVRTC: {e}\n{src}"));
}

/// The relative L2 error of each output of `g`'s plan on the GPU against the
/// interpreter.
fn gpu_errors(dev: &gopt::runtime::cuda::Device, g: &Verified) -> Vec<f64> {
    let inputs: Vec<gopt::Tensor> = g
        .inputs
        .iter()
        .enumerate()
        .map(|(j, &v)| {
            let ty = g.ty(v).expect("typed");
            let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
            common::random(ty.dtype, &shape, 11 + j as u64)
        })
        .collect();
    let want = gopt::ir::interp::run(g, &inputs).expect("interpreter");
    let mut grouped = g.clone().into_inner();
    gopt::passes::group::fuse_elementwise(&mut grouped).expect("groups");
    let (p, blob) = plan::build(&verify(grouped).expect("verifies")).expect("plans");
    let w = gopt::runtime::cuda::Weights::upload(dev, &blob).expect("weights");
    let mut exe = gopt::runtime::cuda::Executable::new(dev, p, w, true).expect("loads");
    let got = exe.run(&inputs).unwrap_or_else(|e| panic!("{e}"));
    got.iter()
        .zip(&want)
        .map(|(a, b)| {
            let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
            let num: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
            let den: f64 = b.iter().map(|y| y * y).sum();
            (num / den).sqrt()
        })
        .collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn column_reads_match_the_interpreter_on_the_gpu() {
    let dev = gopt::cuda::device().unwrap_or_else(|e| panic!("{e}"));
    let cases = [
        ("SwiGLU 2 x 32", mlp(32)),
        ("SwiGLU 2 x 6", mlp(6)),
        ("rotary, rows of 40", rotary(2, 0)),
        ("rotary, rows of 43", rotary(2, 3)),
        ("RotaryEmbedding over rows of 24", rotary_rows()),
    ];
    for (what, g) in cases {
        // bf16 products (the GEMMs read bf16; SwiGLU's result is rounded to bf16 once).
        for (k, l2) in gpu_errors(&dev, &g).into_iter().enumerate() {
            assert!(l2 <= 1e-2, "{what}: output {k}: relative L2 {l2:.3e}");
            println!("{what}: output {k}: relative L2 {l2:.2e}");
        }
    }
}
