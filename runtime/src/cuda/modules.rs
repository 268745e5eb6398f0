//! A plan's kernels as CUDA modules. Kernels that differ only in their names (the same
//! layer repeated) compile once, and the distinct ones are split into modules NVRTC
//! compiles in parallel (through the PTX cache): a 12-layer BERT's 224 kernels took
//! 16.7 s as one module, 0.3 s this way.

use super::device::ptx_for;
use super::{drv, Device};
use crate::{Result, RuntimeError};
use cudarc::driver::{CudaFunction, CudaModule};
use std::sync::Arc;

/// A plan's kernels as modules: kernels that differ only in their names (the same
/// layer repeated) appear once, and the distinct ones are split into modules NVRTC
/// compiles in parallel. Returns the module sources, each kernel's module and the name
/// its function has there.
fn modules_of(kernels: &[gopt_codegen::cuda::Kernel]) -> (Vec<String>, Vec<(usize, String)>) {
    let mut by_body: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut unique: Vec<&gopt_codegen::cuda::Kernel> = Vec::new();
    let canon: Vec<usize> = kernels
        .iter()
        .map(|k| {
            let body = k.source.replace(&k.name, "\u{1}");
            *by_body.entry(body).or_insert_with(|| {
                unique.push(k);
                unique.len() - 1
            })
        })
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(16);
    let per = unique.len().div_ceil(threads).max(8);
    let sources = unique
        .chunks(per)
        .map(|chunk| {
            let mut src = String::from(gopt_codegen::cuda::PRELUDE);
            for k in chunk {
                src.push('\n');
                src.push_str(&k.source);
            }
            src
        })
        .collect();
    let place = canon
        .iter()
        .map(|&u| (u / per, unique[u].name.clone()))
        .collect();
    (sources, place)
}

/// Runs NVRTC on the plan's modules in parallel (through the PTX cache), without
/// touching the GPU: [`super::Executable::new`] then only loads them.
pub fn precompile(dev: &Device, kernels: &[gopt_codegen::cuda::Kernel]) -> Result<()> {
    let (sources, _) = modules_of(kernels);
    ptx_all(dev.arch, &sources).map(|_| ())
}

/// Compiles a plan's kernels with NVRTC for `arch` (`sm_90`) as a run on such a GPU
/// would, through the PTX cache, on a machine that needs no GPU: `gopt test
/// --plan-only` checks plans this way.
pub fn compile_for_arch(arch: &'static str, kernels: &[gopt_codegen::cuda::Kernel]) -> Result<()> {
    let (sources, _) = modules_of(kernels);
    ptx_all(arch, &sources).map(|_| ())
}

fn ptx_all(arch: &'static str, sources: &[String]) -> Result<Vec<cudarc::nvrtc::Ptx>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = sources
            .iter()
            .enumerate()
            .map(|(i, src)| {
                s.spawn(move || ptx_for(arch, &format!("the plan's kernels (module {i})"), src))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(RuntimeError::Cuda(
                        "an NVRTC compile thread panicked".into(),
                    ))
                })
            })
            .collect()
    })
}

/// Compiles (or finds in the cache) and loads a plan's kernels.
pub(crate) fn compile_kernels(
    dev: &Device,
    kernels: &[gopt_codegen::cuda::Kernel],
) -> Result<(Vec<Arc<CudaModule>>, Vec<CudaFunction>)> {
    let (sources, place) = modules_of(kernels);
    let ptx = ptx_all(dev.arch, &sources)?;
    let modules = ptx
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            dev.ctx
                .load_module(p)
                .map_err(drv(format!("loading the plan's kernels (module {i})")))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut funcs = Vec::with_capacity(kernels.len());
    for (k, (m, name)) in kernels.iter().zip(&place) {
        let f = modules[*m]
            .load_function(name)
            .map_err(drv(format!("finding kernel {name} (node `{}`)", k.node)))?;
        allow_shared(&f, k)?;
        funcs.push(f);
    }
    Ok((modules, funcs))
}

/// Static shared memory a block may use without opting in.
const STATIC_SHARED: u32 = 48 * 1024;

/// Lets `f` launch with `k`'s dynamic shared memory: past 48 KB a kernel must opt in
/// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`), up to the device's 227 KB.
pub(crate) fn allow_shared(f: &CudaFunction, k: &gopt_codegen::cuda::Kernel) -> Result<()> {
    if k.shared_mem <= STATIC_SHARED {
        return Ok(());
    }
    let bytes = i32::try_from(k.shared_mem).unwrap_or(i32::MAX);
    f.set_attribute(
        cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        bytes,
    )
    .map_err(drv(format!(
        "allowing kernel {} (node `{}`) {} bytes of shared memory",
        k.name, k.node, k.shared_mem
    )))
}
