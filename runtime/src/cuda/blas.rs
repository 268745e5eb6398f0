//! cuBLASLt for the plan's GEMMs. Each [`Gemm`] step is prepared once — descriptors,
//! layouts, cuBLASLt's heuristic candidates (the first is used unless [`super::tune`]
//! measured a faster one), device pointers in the epilogue — so a run (or a CUDA-graph
//! capture) only issues `cublasLtMatmul`. fp32 GEMMs compute in
//! `CUBLAS_COMPUTE_32F` (fp32 results match the reference), or in
//! `CUBLAS_COMPUTE_32F_FAST_TF32` on tensor cores when the plan was compiled with
//! `--precision tf32`; f16/bf16 GEMMs accumulate in fp32.

use crate::{Result, RuntimeError};
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use gopt_codegen::cuda::gemm::{Epilogue, Gemm};
use gopt_ir::DType;
use std::ffi::c_void;
use std::sync::Arc;

/// cuBLASLt's workspace on Hopper (NVIDIA's recommendation).
pub const WORKSPACE: usize = 32 << 20;

/// How many algorithms the heuristic is asked for: the candidates [`super::tune`] times.
pub const CANDIDATES: usize = 8;

/// Which split of the work an algorithm makes, as cuBLASLt's configuration attributes
/// say (`None` where cuBLASLt does not say).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlgoConfig {
    /// `CUBLASLT_ALGO_CONFIG_TILE_ID` (a `cublasLtMatmulTile_t`).
    pub tile: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_STAGES_ID` (a `cublasLtMatmulStages_t`).
    pub stages: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_SPLITK_NUM`: K split in this many parts (1: none).
    pub split_k: Option<u32>,
}

/// The configuration `algo` was made with.
pub fn algo_config(algo: &sys::cublasLtMatmulAlgo_t) -> AlgoConfig {
    let read = |attr: sys::cublasLtMatmulAlgoConfigAttributes_t| -> Option<u32> {
        let mut v: u32 = 0;
        let mut written: usize = 0;
        // SAFETY: `algo` is a live algorithm value; the buffer is the attribute's 4 bytes
        // (uint32_t / int32_t for these three) and `written` a valid out pointer.
        let st = unsafe {
            sys::cublasLtMatmulAlgoConfigGetAttribute(
                algo,
                attr,
                (&mut v) as *mut u32 as *mut c_void,
                std::mem::size_of::<u32>(),
                &mut written,
            )
        };
        (st == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS && written == 4).then_some(v)
    };
    use sys::cublasLtMatmulAlgoConfigAttributes_t as A;
    AlgoConfig {
        tile: read(A::CUBLASLT_ALGO_CONFIG_TILE_ID),
        stages: read(A::CUBLASLT_ALGO_CONFIG_STAGES_ID),
        split_k: read(A::CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
    }
}

fn blas(what: impl Into<String>) -> impl FnOnce(lt::CublasError) -> RuntimeError {
    let what = what.into();
    move |e| RuntimeError::Driver {
        what,
        msg: format!("cuBLASLt: {e:?}"),
    }
}

/// A cuBLASLt handle and its workspace.
pub struct Lt {
    pub(crate) handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    ws_ptr: u64,
}

impl Lt {
    /// Creates the handle (after checking the library exists: cudarc panics otherwise).
    pub fn new(stream: &Arc<CudaStream>) -> Result<Lt> {
        // SAFETY: only tries to load the shared library.
        if !unsafe { sys::is_culib_present() } {
            return Err(RuntimeError::NoCuda("cuBLASLt"));
        }
        let handle = lt::create_handle().map_err(blas("creating a handle"))?;
        let workspace: CudaSlice<u8> =
            stream
                .alloc_zeros(WORKSPACE)
                .map_err(|e| RuntimeError::Driver {
                    what: "allocating the cuBLASLt workspace".into(),
                    msg: format!("{e:?}"),
                })?;
        let ws_ptr = {
            let (p, _g) = workspace.device_ptr(stream);
            p
        };
        Ok(Lt {
            handle,
            workspace,
            ws_ptr,
        })
    }

    /// Bytes of device memory the handle's workspace takes.
    pub fn workspace_bytes(&self) -> usize {
        self.workspace.len()
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `new` and is destroyed once.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

fn cuda_type(dt: DType) -> Option<sys::cudaDataType> {
    match dt {
        DType::F32 => Some(sys::cudaDataType_t::CUDA_R_32F),
        DType::F16 => Some(sys::cudaDataType_t::CUDA_R_16F),
        DType::BF16 => Some(sys::cudaDataType_t::CUDA_R_16BF),
        _ => None,
    }
}

struct Layout(sys::cublasLtMatrixLayout_t);

impl Layout {
    fn new(
        dt: sys::cudaDataType,
        rows: u64,
        cols: u64,
        ld: u64,
        batch: u32,
        stride: i64,
    ) -> Result<Layout> {
        let l = Layout(
            lt::create_matrix_layout(dt, rows, cols, ld as i64)
                .map_err(blas("creating a layout"))?,
        );
        if batch > 1 {
            let count = batch as i32;
            // SAFETY: attribute values of the documented types and sizes.
            unsafe {
                lt::set_matrix_layout_attribute(
                    l.0,
                    sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                    (&count) as *const i32 as *const c_void,
                    std::mem::size_of::<i32>(),
                )
                .map_err(blas("setting the batch count"))?;
                lt::set_matrix_layout_attribute(
                    l.0,
                    sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    (&stride) as *const i64 as *const c_void,
                    std::mem::size_of::<i64>(),
                )
                .map_err(blas("setting the batch stride"))?;
            }
        }
        Ok(l)
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: created by `new`, destroyed once.
        let _ = unsafe { lt::destroy_matrix_layout(self.0) };
    }
}

struct Desc(sys::cublasLtMatmulDesc_t);

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created by `prepare`, destroyed once.
        let _ = unsafe { lt::destroy_matmul_desc(self.0) };
    }
}

/// Device pointers of a GEMM's operands.
#[derive(Clone, Copy, Debug)]
pub struct Ptrs {
    /// Row-major A.
    pub a: u64,
    /// Row-major B.
    pub b: u64,
    /// The residual (C), if any.
    pub c: Option<u64>,
    /// The output.
    pub d: u64,
    /// The bias, if fused.
    pub bias: Option<u64>,
}

/// One GEMM, ready to issue.
pub struct Prepared {
    node: String,
    shape: String,
    desc: Desc,
    a: Layout,
    b: Layout,
    d: Layout,
    algo: sys::cublasLtMatmulAlgo_t,
    /// The heuristic's candidates, in its order (`algo` is the first unless tuned).
    candidates: Vec<sys::cublasLtMatmulAlgo_t>,
    alpha: f32,
    beta: f32,
    ptrs: Ptrs,
}

/// The compute type of `g`: fp32, or tf32 tensor-core math for an fp32 GEMM of a plan
/// compiled with `--precision tf32` (`tf32`).
pub fn compute_type(g: &Gemm, tf32: bool) -> sys::cublasComputeType_t {
    if tf32 && g.ab_dtype == DType::F32 {
        sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
    } else {
        sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
    }
}

/// Prepares `g` with its operands at `ptrs`; `tf32` lets fp32 GEMMs compute in tf32
/// (see [`compute_type`]).
pub fn prepare(lib: &Lt, g: &Gemm, ptrs: Ptrs, tf32: bool) -> Result<Prepared> {
    let what = |s: &str| format!("GEMM `{}`: {s}", g.node);
    let unsupported = |which: &str, dt: DType| {
        RuntimeError::Cuda(what(&format!("cuBLASLt has no {which} dtype {dt}")))
    };
    let ab = cuda_type(g.ab_dtype).ok_or_else(|| unsupported("operand", g.ab_dtype))?;
    let dt = cuda_type(g.d_dtype).ok_or_else(|| unsupported("output", g.d_dtype))?;
    let compute = compute_type(g, tf32);
    let desc = Desc(
        lt::create_matmul_desc(compute, sys::cudaDataType_t::CUDA_R_32F)
            .map_err(blas(what("creating the descriptor")))?,
    );
    let set = |attr: sys::cublasLtMatmulDescAttributes_t, ptr: *const c_void, size: usize| {
        // SAFETY: each call passes a value of the attribute's documented type and size.
        unsafe { lt::set_matmul_desc_attribute(desc.0, attr, ptr, size) }
            .map_err(blas(what("setting an attribute")))
    };
    // Row-major Y = A·B is column-major Yᵀ = Bᵀ·Aᵀ: cuBLASLt's A is our B, its B our A.
    let trans_a: i32 = i32::from(g.trans_b);
    set(
        sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
        (&trans_a) as *const i32 as *const c_void,
        4,
    )?;
    let trans_b: i32 = i32::from(g.trans_a);
    set(
        sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
        (&trans_b) as *const i32 as *const c_void,
        4,
    )?;
    let epilogue = match (g.epilogue, g.bias.is_some()) {
        (Epilogue::None, false) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
        (Epilogue::None, true) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
        (Epilogue::Relu, false) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU,
        (Epilogue::Relu, true) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS,
        (Epilogue::GeluTanh, false) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU,
        (Epilogue::GeluTanh, true) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS,
    };
    set(
        sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
        (&epilogue) as *const sys::cublasLtEpilogue_t as *const c_void,
        std::mem::size_of::<sys::cublasLtEpilogue_t>(),
    )?;
    if let Some(bias) = ptrs.bias {
        set(
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
            (&bias) as *const u64 as *const c_void,
            8,
        )?;
    }
    let (m, n, k) = (g.m, g.n, g.k);
    let a = if g.trans_b {
        Layout::new(ab, k, n, k, g.batch, g.stride_b)?
    } else {
        Layout::new(ab, n, k, g.ld_b.unwrap_or(n), g.batch, g.stride_b)?
    };
    // Our A stored `[K, M]` (transA) is column-major M×K, transposed by cuBLASLt.
    let b = if g.trans_a {
        Layout::new(ab, m, k, m, g.batch, g.stride_a)?
    } else {
        Layout::new(ab, k, m, k, g.batch, g.stride_a)?
    };
    let d = Layout::new(dt, n, m, n, g.batch, g.stride_d)?;
    let pref = lt::create_matmul_pref().map_err(blas(what("creating preferences")))?;
    let ws = lib.workspace_bytes();
    // SAFETY: the preference exists; the value is a usize as documented.
    unsafe {
        lt::set_matmul_pref_attribute(
            pref,
            sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            (&ws) as *const usize as *const c_void,
            std::mem::size_of::<usize>(),
        )
        .map_err(blas(what("setting the workspace size")))?;
    }
    let candidates = heuristics(lib, &desc, [&a, &b, &d], pref);
    // SAFETY: created above, destroyed once.
    let _ = unsafe { lt::destroy_matmul_pref(pref) };
    let candidates = candidates.map_err(|e| RuntimeError::Driver {
        what: what(&format!(
            "no cuBLASLt algorithm for {m}×{n}×{k} ×{} {} → {}",
            g.batch, g.ab_dtype, g.d_dtype
        )),
        msg: format!("{e:?}"),
    })?;
    let Some(&first) = candidates.first() else {
        return Err(RuntimeError::Driver {
            what: what(&format!(
                "no cuBLASLt algorithm for {m}×{n}×{k} ×{} {} → {}",
                g.batch, g.ab_dtype, g.d_dtype
            )),
            msg: "the heuristic returned no usable candidate".into(),
        });
    };
    Ok(Prepared {
        node: g.node.clone(),
        shape: format!(
            "M={m} N={n} K={k} batch={} {}×{} → {}{}, epilogue {:?}{}{}",
            g.batch,
            g.ab_dtype,
            g.ab_dtype,
            g.d_dtype,
            if compute == sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32 {
                " (tf32 math)"
            } else {
                ""
            },
            g.epilogue,
            if g.bias.is_some() { " +bias" } else { "" },
            if g.residual.is_some() {
                " +residual"
            } else {
                ""
            }
        ),
        desc,
        a,
        b,
        d,
        algo: first,
        candidates,
        alpha: g.alpha,
        beta: if g.residual.is_some() { 1.0 } else { 0.0 },
        ptrs,
    })
}

/// The heuristic's candidates for the prepared descriptors, best estimate first: those
/// of the first [`CANDIDATES`] whose state is success and whose workspace fits.
fn heuristics(
    lib: &Lt,
    desc: &Desc,
    [a, b, d]: [&Layout; 3],
    pref: sys::cublasLtMatmulPreference_t,
) -> std::result::Result<Vec<sys::cublasLtMatmulAlgo_t>, lt::CublasError> {
    // SAFETY: the result type is plain data (integers, floats, a status whose 0 is
    // CUBLAS_STATUS_SUCCESS), for which all-zero bytes are a valid value.
    let mut results: [sys::cublasLtMatmulHeuristicResult_t; CANDIDATES] =
        unsafe { std::mem::zeroed() };
    let mut count: std::ffi::c_int = 0;
    // SAFETY: every descriptor, layout and the preference are alive; `results` holds
    // CANDIDATES entries and `count` is a valid out pointer.
    unsafe {
        sys::cublasLtMatmulAlgoGetHeuristic(
            lib.handle,
            desc.0,
            a.0,
            b.0,
            d.0,
            d.0,
            pref,
            CANDIDATES as std::ffi::c_int,
            results.as_mut_ptr(),
            &mut count,
        )
    }
    .result()?;
    let count = usize::try_from(count).unwrap_or(0).min(CANDIDATES);
    Ok(results[..count]
        .iter()
        .filter(|r| {
            r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS
                && r.workspaceSize <= lib.workspace_bytes()
        })
        .map(|r| r.algo)
        .collect())
}

impl Prepared {
    /// Issues the matmul on `stream`.
    pub fn launch(&self, lib: &Lt, stream: &CudaStream) -> Result<()> {
        self.launch_with(lib, stream, &self.algo)
    }

    /// Issues the matmul on `stream` with `algo` (one of [`Prepared::candidates`], or an
    /// algorithm [`Prepared::check`] accepted).
    pub fn launch_with(
        &self,
        lib: &Lt,
        stream: &CudaStream,
        algo: &sys::cublasLtMatmulAlgo_t,
    ) -> Result<()> {
        let p = self.ptrs;
        let c = p.c.unwrap_or(p.d);
        // SAFETY: pointers come from the plan's arena and weights, sized for these
        // layouts; descriptors were prepared for them, and `algo` was given by the
        // heuristic or checked for them.
        unsafe {
            lt::matmul(
                lib.handle,
                self.desc.0,
                (&self.alpha) as *const f32 as *const c_void,
                (&self.beta) as *const f32 as *const c_void,
                p.b as *const c_void,
                self.a.0,
                p.a as *const c_void,
                self.b.0,
                c as *const c_void,
                self.d.0,
                p.d as *mut c_void,
                self.d.0,
                algo,
                lib.ws_ptr as *mut c_void,
                lib.workspace_bytes(),
                stream.cu_stream() as *mut _,
            )
        }
        .map_err(blas(format!("GEMM `{}` ({})", self.node, self.shape)))
    }

    /// Whether cuBLASLt accepts `algo` (a cached choice) for these descriptors, within
    /// the workspace (`cublasLtMatmulAlgoCheck`).
    pub fn check(&self, lib: &Lt, algo: &sys::cublasLtMatmulAlgo_t) -> bool {
        // SAFETY: plain data for which all-zero bytes are valid (see `heuristics`).
        let mut result: sys::cublasLtMatmulHeuristicResult_t = unsafe { std::mem::zeroed() };
        // SAFETY: descriptors and layouts are alive; `algo` and `result` are valid
        // pointers for the call.
        let st = unsafe {
            sys::cublasLtMatmulAlgoCheck(
                lib.handle,
                self.desc.0,
                self.a.0,
                self.b.0,
                self.d.0,
                self.d.0,
                algo,
                &mut result,
            )
        };
        st == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS
            && result.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS
            && result.workspaceSize <= lib.workspace_bytes()
    }

    /// The heuristic's candidates, best estimate first.
    pub fn candidates(&self) -> &[sys::cublasLtMatmulAlgo_t] {
        &self.candidates
    }

    /// Issues `algo` from now on (a candidate, or an algorithm [`Prepared::check`]
    /// accepted).
    pub(crate) fn set_algo(&mut self, algo: sys::cublasLtMatmulAlgo_t) {
        self.algo = algo;
    }

    /// The operands' device pointers.
    pub fn ptrs(&self) -> Ptrs {
        self.ptrs
    }

    /// The node it computes.
    pub fn node(&self) -> &str {
        &self.node
    }
}
