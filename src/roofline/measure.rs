//! Measuring a device's [`Peaks`]: the copy bandwidth from the runtime
//! (`Device::copy_bandwidth`, `WgpuDevice::copy_bandwidth`), and everything else by
//! compiling and profiling tiny graphs through gopt's own pipeline, so the roofs come
//! from the same GEMM calls and launch path a model's kernels take: a large MatMul per
//! unit (bf16 and f16 inputs for the tensor cores, f32 with `--precision tf32`, f32
//! plain) and a one-element Neg for the floor of a kernel's time.

use super::{peaks_error, Peaks, VERSION};
use crate::pipeline::{Backend, Options};
use crate::{compile, Executor, Imported, Model, Precision, Result, Tensor};
use gopt_ir::DType;
use gopt_runtime::StepTime;
use std::collections::BTreeMap;

/// Profile iterations per measurement (the median is kept).
const ITERS: usize = 10;

/// Measures the peaks of the device `backend` runs on (`adapter`: the wgpu adapter's
/// name filter). Takes seconds: a few GEMMs of 8192³ on CUDA, 512³ on a CPU adapter.
pub fn measure(backend: Backend, adapter: Option<&str>) -> Result<Peaks> {
    match backend {
        Backend::Cuda => cuda(),
        Backend::Wgpu => wgpu(adapter),
        Backend::Cpu => Err(peaks_error(
            "the CPU interpreter has no roofline: profile on cuda or wgpu".into(),
        )),
    }
}

fn cuda() -> Result<Peaks> {
    let dev = crate::cuda::device()?;
    let copy_bytes = 1usize << 30;
    let copy = dev.copy_bandwidth(copy_bytes, ITERS)?;
    let sms = dev.sm_count()?;
    let n = 8192;
    let mut compute = BTreeMap::new();
    let mut how = vec![format!(
        "copy: cuMemcpyDtoD of {} between CUDA events, best of {ITERS}, read + write counted",
        crate::report::human_bytes(copy_bytes as u64)
    )];
    for (key, dt, precision) in [
        ("bf16", DType::BF16, Precision::Fp32),
        ("f16", DType::F16, Precision::Fp32),
        ("tf32", DType::F32, Precision::Tf32),
        ("fp32", DType::F32, Precision::Fp32),
    ] {
        let s = gemm_seconds(Backend::Cuda, None, n, dt, precision)?;
        compute.insert(key.to_string(), 2.0 * (n as f64).powi(3) / s);
    }
    how.push(format!(
        "GEMM: a {n}×{n}×{n} MatMul compiled by gopt (cuBLASLt), its step timed between \
         CUDA events, median of {ITERS}"
    ));
    let floor = floor_seconds(Backend::Cuda, None)?;
    how.push("floor: a one-element Neg kernel timed as --profile times a step".into());
    Ok(Peaks {
        version: VERSION,
        backend: "cuda".into(),
        device: dev.name.clone(),
        copy_bytes_per_s: copy,
        compute,
        floor_s: floor,
        sms: Some(sms),
        how,
        measured_at: now(),
    })
}

fn wgpu(adapter: Option<&str>) -> Result<Peaks> {
    let dev = crate::wgpu::device(adapter)?;
    let cpu = dev.adapter.kind.to_ascii_lowercase().contains("cpu");
    let copy_bytes: u64 = if cpu { 64 << 20 } else { 256 << 20 };
    let copy = dev.copy_bandwidth(copy_bytes, ITERS)?;
    let n = if cpu { 512 } else { 4096 };
    let mut compute = BTreeMap::new();
    let mut units = vec![("fp32", DType::F32)];
    if dev.adapter.f16 {
        // wgpu has no bf16 storage: a bf16 request runs in f16, so the f16 rate is the
        // roof of the `bf16` unit too.
        units.push(("f16", DType::F16));
    }
    for (key, dt) in units {
        let s = gemm_seconds(Backend::Wgpu, adapter, n, dt, Precision::Fp32)?;
        let r = 2.0 * (n as f64).powi(3) / s;
        compute.insert(key.to_string(), r);
        if key == "f16" {
            compute.insert("bf16".to_string(), r);
        }
    }
    let floor = floor_seconds(Backend::Wgpu, adapter)?;
    let clock = if dev.adapter.timestamps {
        "GPU timestamps"
    } else {
        "the wall clock"
    };
    Ok(Peaks {
        version: VERSION,
        backend: "wgpu".into(),
        device: format!("{} ({})", dev.adapter.name, dev.adapter.backend),
        copy_bytes_per_s: copy,
        compute,
        floor_s: floor,
        sms: None,
        how: vec![
            format!(
                "copy: copy_buffer_to_buffer of {}, submit to completion on the wall clock, \
                 best of {ITERS}, read + write counted",
                crate::report::human_bytes(copy_bytes)
            ),
            format!(
                "GEMM: a {n}×{n}×{n} MatMul compiled by gopt (WGSL), its dispatch timed by \
                 {clock}, median of {ITERS}"
            ),
            "floor: a one-element Neg shader timed as --profile times a dispatch".into(),
        ],
        measured_at: now(),
    })
}

/// Seconds of the slowest step of a `n×n×n` MatMul of `dt` inputs.
fn gemm_seconds(
    backend: Backend,
    adapter: Option<&str>,
    n: usize,
    dt: DType,
    precision: Precision,
) -> Result<f64> {
    let ty = format!("{}[{n},{n}]", dt.name());
    let text = format!(
        r#"graph "peak_gemm"(%0 "a": {ty}, %1 "b": {ty}) -> (%2) {{
  %2 "c": {ty} = MatMul "peak_gemm"(%0, %1) {{}}
}}"#
    );
    let steps = profile(&text, backend, adapter, precision)?;
    let ms = steps.iter().map(|s| s.ms).fold(0.0, f64::max);
    Ok(ms / 1e3)
}

/// Seconds of a one-element kernel, timed as a step.
fn floor_seconds(backend: Backend, adapter: Option<&str>) -> Result<f64> {
    let text = r#"graph "peak_floor"(%0 "x": f32[1]) -> (%1) {
  %1 "y": f32[1] = Neg "peak_floor"(%0) {}
}"#;
    let steps = profile(text, backend, adapter, Precision::Fp32)?;
    steps
        .iter()
        .map(|s| s.ms / 1e3)
        .reduce(f64::min)
        .ok_or_else(|| peaks_error("the one-element kernel's plan has no step to time".into()))
}

/// Compiles `text` for `backend` and times each step (`ITERS` runs, medians).
fn profile(
    text: &str,
    backend: Backend,
    adapter: Option<&str>,
    precision: Precision,
) -> Result<Vec<StepTime>> {
    let graph = gopt_ir::text::parse(text)?;
    let inputs = random_inputs(&graph)?;
    let imported = Imported {
        model: Model {
            graph,
            meta: Default::default(),
        },
        opsets: vec![(String::new(), 21)],
        ir_version: 10,
        producer: "gopt peaks".into(),
        source: None,
    };
    let mut opts = Options::new().backend(backend).precision(precision);
    if let Some(a) = adapter {
        opts = opts.adapter(a);
    }
    if backend == Backend::Wgpu {
        opts = opts.wgsl_f16(crate::wgpu::device(adapter)?.adapter.f16);
    }
    let mut c = compile(&imported, &opts)?;
    let steps = match c.executor(0)? {
        Executor::Cuda(exe) => {
            exe.set_inputs(&inputs)?;
            exe.profile(ITERS)?
        }
        Executor::Wgpu(exe) => {
            exe.set_inputs(&inputs)?;
            exe.profile(ITERS)?
        }
    };
    if steps.is_empty() {
        return Err(peaks_error(format!(
            "{} gave no step times (an adapter without timestamp queries cannot be profiled)",
            backend.name()
        )));
    }
    Ok(steps)
}

/// Inputs of `g`'s declared types, filled with values in [-1, 1) from a fixed LCG
/// (tensor cores draw less power, and run faster, on zeros).
fn random_inputs(g: &gopt_ir::Graph) -> Result<Vec<Tensor>> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    g.inputs
        .iter()
        .map(|&v| {
            let ty = g
                .value(v)
                .ty
                .as_ref()
                .ok_or_else(|| peaks_error("a peak graph input without a type".into()))?;
            let shape = gopt_ir::dim::concrete(&ty.shape)
                .ok_or_else(|| peaks_error("a peak graph input without a static shape".into()))?;
            let n: usize = shape.iter().product();
            let vals: Vec<f64> = (0..n)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (state >> 40) as f64 / (1u64 << 23) as f64 - 1.0
                })
                .collect();
            Ok(Tensor::from_f64s(ty.dtype, &shape, &vals)?)
        })
        .collect()
}

/// Seconds since the Unix epoch, now.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
