//! Helpers the CUDA test files share: NVRTC for sm_90 from the pinned CUDA 13.0 wheels
//! (scripts/test.sh puts them on `LD_LIBRARY_PATH` and in `GOPT_CUDA_INCLUDE`), the
//! seeded pseudo-random inputs the GPU tests run on, and the comparison of a GPU
//! result with the interpreter's ([`close`]).
#![allow(dead_code)]

pub mod cli;
pub mod decoders;
pub mod packed;

use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use gopt::ir::{DType, Tensor};
use std::path::Path;

/// The CUDA headers (cuda_bf16.h) NVRTC needs.
pub fn include_dir() -> String {
    if let Ok(d) = std::env::var("GOPT_CUDA_INCLUDE") {
        return d;
    }
    for d in ["/usr/local/cuda/include", "/usr/include"] {
        if Path::new(d).join("cuda_bf16.h").is_file() {
            return d.to_string();
        }
    }
    panic!(
        "no CUDA headers: run scripts/test.sh (it installs the pinned NVRTC and CUDA runtime \
         wheels) or set GOPT_CUDA_INCLUDE to a folder with cuda_bf16.h"
    );
}

/// Fails (never skips) when NVRTC cannot be loaded: a kernel never compiled does not
/// count.
pub fn nvrtc_ready() {
    // SAFETY: only probes whether the shared library can be loaded.
    let present = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    assert!(
        present,
        "NVRTC (libnvrtc.so.13) not found: run scripts/test.sh, which installs the pinned \
         wheel and sets LD_LIBRARY_PATH, or point LD_LIBRARY_PATH at a CUDA 13 lib folder"
    );
}

/// Compiles CUDA C to PTX for sm_90, as the runtime does on an H200.
pub fn compile(src: &str) -> Result<(), String> {
    let opts = CompileOptions {
        arch: Some("sm_90"),
        include_paths: vec![include_dir()],
        options: vec!["--std=c++17".into()],
        ..Default::default()
    };
    compile_ptx_with_opts(src, opts)
        .map(|_| ())
        .map_err(|e| format!("{e:?}"))
}

/// A seeded pseudo-random tensor: floats in [-2, 2), integers in 0..4, booleans
/// alternating (never all zero).
pub fn random(dt: DType, shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let vals: Vec<f64> = (0..n)
        .map(|k| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            match dt {
                DType::Bool => (k % 2) as f64,
                d if d.is_int() => (s % 4) as f64,
                _ => ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0,
            }
        })
        .collect();
    Tensor::from_f64s(dt, shape, &vals).expect("tensor")
}

/// The tensors a kernel test feeds `node`: the graph's constants where its inputs are
/// constants, seeded random tensors (seed `seed + input index`) otherwise, by value id.
pub fn node_inputs(
    g: &gopt::ir::Graph,
    node: &gopt::ir::Node,
    seed: u64,
) -> std::collections::BTreeMap<u32, Tensor> {
    let mut values = std::collections::BTreeMap::new();
    for (j, i) in node.inputs.iter().enumerate() {
        let Some(vid) = i else { continue };
        let t = match g.constant(*vid) {
            Some(c) => c.clone(),
            None => {
                let ty = g.ty(*vid).expect("typed");
                let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
                random(ty.dtype, &shape, seed + j as u64)
            }
        };
        values.insert(vid.0, t);
    }
    values
}

/// What the CPU interpreter computes for `node` on `values` (by value id).
pub fn reference(
    node: &gopt::ir::Node,
    values: &std::collections::BTreeMap<u32, Tensor>,
) -> Vec<Tensor> {
    let ins: Vec<Option<&Tensor>> = node
        .inputs
        .iter()
        .map(|i| i.and_then(|v| values.get(&v.0)))
        .collect();
    let lookup = |_: &str| None;
    node.op
        .eval(&gopt::ir::ops::EvalCx { lookup: &lookup }, node, &ins)
        .unwrap_or_else(|e| panic!("interpreter: {e}"))
}

/// Whether a GPU result `got` matches the interpreter's `want`: same dtype and shape;
/// integers and booleans exactly; f16/bf16 within one unit of their last place (rtol
/// 1e-2, atol 1e-3); f32/f64 within `(rtol, atol)` (GPU and CPU transcendental
/// functions differ in the last bits). NaN matches NaN.
pub fn close(got: &Tensor, want: &Tensor, (rtol32, atol32): (f64, f64)) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "{:?}{:?} vs {:?}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    if !got.dtype().is_float() {
        let (g, w) = (got.to_i64_vec(), want.to_i64_vec());
        return match (0..g.len()).find(|&i| g[i] != w[i]) {
            Some(i) => Err(format!("element {i}: GPU {}, CPU {}", g[i], w[i])),
            None => Ok(()),
        };
    }
    let (rtol, atol) = match want.dtype() {
        DType::F16 | DType::BF16 => (1e-2, 1e-3),
        _ => (rtol32, atol32),
    };
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        if !ok {
            return Err(format!("element {i}: GPU {a}, CPU {b}"));
        }
    }
    Ok(())
}

/// The f32/f64 tolerance of [`close`] for one kernel against the interpreter.
pub const KERNEL_TOL: (f64, f64) = (1e-5, 1e-6);

/// Compiles to machine code for `arch` (NVRTC runs ptxas for a real architecture, so
/// inline PTX is checked) and returns the log with ptxas' register and spill report.
pub fn compile_sass(src: &str, arch: &str) -> Result<String, String> {
    use cudarc::nvrtc::{result, sys};
    let csrc = std::ffi::CString::new(src).map_err(|e| e.to_string())?;
    let prog = result::create_program(&csrc, None).map_err(|e| format!("{e:?}"))?;
    let opts = [
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "--ptxas-options=-v".to_string(),
        format!("--include-path={}", include_dir()),
    ];
    // SAFETY: `prog` was just created and is destroyed once, below.
    let compiled = unsafe { result::compile_program(prog, &opts) };
    let log = unsafe { result::get_program_log(prog) }
        .map(|l| {
            unsafe { std::ffi::CStr::from_ptr(l.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    let mut size = 0usize;
    let cubin = compiled.is_ok()
        && unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) } == sys::nvrtcResult::NVRTC_SUCCESS
        && size > 0;
    unsafe { result::destroy_program(prog) }.map_err(|e| format!("{e:?}"))?;
    match (compiled, cubin) {
        (Ok(()), true) => Ok(log),
        (Ok(()), false) => Err(format!("no machine code:\n{log}")),
        (Err(e), _) => Err(format!("{e:?}\n{log}")),
    }
}

/// ptxas' report per kernel: (registers, the "stack frame, spill" line).
pub fn ptxas_report(log: &str) -> std::collections::BTreeMap<String, (u32, String)> {
    let mut out = std::collections::BTreeMap::new();
    let mut current: Option<String> = None;
    let mut frame = String::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            current = Some(rest.trim().to_string());
        } else if line.contains("stack frame") {
            frame = line.trim().to_string();
        } else if let (Some(f), Some(rest)) = (&current, line.split("Used ").nth(1)) {
            let regs = rest
                .split_whitespace()
                .next()
                .and_then(|r| r.parse().ok())
                .unwrap_or(u32::MAX);
            out.insert(f.clone(), (regs, std::mem::take(&mut frame)));
            current = None;
        }
    }
    out
}
