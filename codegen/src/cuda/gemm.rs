//! GEMMs (MatMul, FusedMatMul, Gemm; read by [`crate::lower::gemm`]) become cuBLASLt
//! calls: the plan records each as a [`Gemm`] — the column-major problem cuBLASLt sees,
//! its operands' values, dtypes and transposes, and which parts of the node's epilogue
//! cuBLASLt fuses (bias, ReLU, tanh-GELU, a residual as `C` with beta = 1). What it
//! cannot fuse (erf GELU, SiLU, tanh, sigmoid, a residual after an activation, a bias
//! that is not one value per column, Gemm's C scaled by a beta other than 1) becomes a
//! small in-place kernel after the GEMM, so no node is ever half-computed.
//!
//! Row-major `Y[M,N] = A[M,K]·B[K,N]` is column-major `Yᵀ[N,M] = Bᵀ[N,K]·Aᵀ[K,M]`: the
//! call passes B as cuBLASLt's first operand and A as its second, and a bias over N is
//! cuBLASLt's per-row bias. A stored transposed (Gemm's `transA`) is cuBLASLt's
//! transposed second operand.

use super::elementwise::storage;
use super::support::flit;
use super::Kernel;
use crate::lower::gemm::{GemmSpec, Operand, Tail};
use crate::lower::support::Site;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::fused::Activation;
use gopt_ir::DType;
use serde::{Deserialize, Serialize};

const POST: &str = include_str!("gemm_post.cu");
/// The activation-only post kernel, 16 bytes per thread (the GEMM output is
/// arena-aligned).
const POST_VEC: &str = include_str!("gemm_post_vec.cu");

/// What cuBLASLt applies after the product (its `CUBLASLT_EPILOGUE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Epilogue {
    /// Nothing.
    None,
    /// `max(x, 0)`.
    Relu,
    /// GELU, tanh approximation (cuBLASLt's GELU is the tanh form).
    GeluTanh,
}

/// One cuBLASLt matmul: `D = epilogue(alpha · op(B)·A + beta · C + bias)` in cuBLASLt's
/// column-major terms, batched with constant strides.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Gemm {
    /// The node it computes.
    pub node: String,
    /// Row-major A (`[.., M, K]`, or `[K, M]` when `trans_a`), B (`[.., K, N]`, or
    /// `[.., N, K]` when `trans_b`).
    pub a: u32,
    /// See `a`.
    pub b: u32,
    /// A bias over N fused into the epilogue (a value of dtype `bias_dtype`).
    pub bias: Option<u32>,
    /// The bias's dtype as stored (cuBLASLt wants the output's; the plan converts
    /// constants).
    pub bias_dtype: Option<DType>,
    /// A residual of the output's shape and dtype, added as `C` with beta = 1.
    pub residual: Option<u32>,
    /// The output.
    pub out: u32,
    /// Rows of A (all of A's batch dims folded in when B is shared).
    pub m: u64,
    /// Columns of the output.
    pub n: u64,
    /// The reduction length.
    pub k: u64,
    /// Batch count (1 when folded).
    pub batch: u32,
    /// Element strides between batches (0: broadcast).
    pub stride_a: i64,
    /// See `stride_a`.
    pub stride_b: i64,
    /// See `stride_a`.
    pub stride_d: i64,
    /// B is `[N, K]`.
    pub trans_b: bool,
    /// A is `[K, M]` (Gemm's `transA`; never with batches or a folded M).
    #[serde(default)]
    pub trans_a: bool,
    /// B's row length when it is wider than N (`[K, ld_b]` with only the first N
    /// columns used: a padded GEMM whose slice back was folded into it).
    #[serde(default)]
    pub ld_b: Option<u64>,
    /// Scale of the product.
    pub alpha: f32,
    /// Dtype of A and B.
    pub ab_dtype: DType,
    /// Dtype of the output (and of C).
    pub d_dtype: DType,
    /// The activation cuBLASLt applies.
    pub epilogue: Epilogue,
    /// The kernel (index into the plan's kernels) that finishes the epilogue, if any.
    pub post: Option<usize>,
}

fn unsupported(site: &Site, what: impl Into<String>) -> CodegenError {
    site.unsupported(&what.into()).for_backend("CUDA")
}

/// Lowers one GEMM node of spec `sp`. `kernels` receives the post kernel when one is
/// needed (its index is recorded in the returned [`Gemm`]); `name` names it.
pub fn lower(sp: &GemmSpec, name: &str, kernels: &mut Vec<Kernel>) -> Result<Gemm> {
    let (p, pr) = (&sp.parts, &sp.problem);
    let problem = Problem {
        a: pr.a.0,
        b: pr.b.0,
        m: pr.m,
        n: pr.n,
        k: pr.k,
        batch: pr.batch,
        stride_a: pr.stride_a as i64,
        stride_b: pr.stride_b as i64,
        trans_b: pr.trans_b,
        alpha: p.alpha,
        ab_dtype: pr.dtype,
    };
    let mut gm = finish(&sp.site, name, kernels, problem, &sp.tail)?;
    gm.trans_a = pr.trans_a;
    Ok(gm)
}

/// The GEMM step of `sp` when cuBLASLt does its whole epilogue (no post kernel), for
/// decisions made before the plan writes kernels (folding, [`super::fold`]); `None` when
/// part of it is left to a post kernel.
pub(crate) fn library_only(sp: &GemmSpec) -> Result<Option<Gemm>> {
    let mut post = Vec::new();
    let gm = lower(sp, "", &mut post)?;
    Ok((gm.post.is_none() && post.is_empty()).then_some(gm))
}

/// A GEMM's operands and sizes, before its epilogue is split between cuBLASLt and a
/// post kernel.
pub(crate) struct Problem {
    /// Row-major A `[M, K]` (per batch).
    pub a: u32,
    /// Row-major B `[K, N]`, or `[N, K]` with `trans_b`.
    pub b: u32,
    /// Rows.
    pub m: usize,
    /// Columns.
    pub n: usize,
    /// Reduction length.
    pub k: usize,
    /// Batches.
    pub batch: usize,
    /// Element stride between A's batches (0: shared).
    pub stride_a: i64,
    /// Element stride between B's batches (0: shared).
    pub stride_b: i64,
    /// B is `[N, K]`.
    pub trans_b: bool,
    /// Scale of the product.
    pub alpha: f32,
    /// Dtype of A and B.
    pub ab_dtype: DType,
}

/// Splits `act(alpha·A·B + beta·bias) + residual` (`tail`, the node's output) between
/// cuBLASLt's epilogue and, for what it cannot do, a post kernel pushed onto `kernels`.
/// cuBLASLt adds a bias unscaled, so a `beta` other than 1 leaves it to the post kernel.
pub(crate) fn finish(
    site: &Site,
    name: &str,
    kernels: &mut Vec<Kernel>,
    pr: Problem,
    tail: &Tail,
) -> Result<Gemm> {
    let (ddt, osh) = (tail.out.dtype, &tail.out.shape);
    if !matches!(ddt, DType::F32 | DType::F16 | DType::BF16) {
        return Err(unsupported(site, format!("output dtype {ddt}")));
    }
    let n = pr.n;
    let total: usize = osh.iter().product();
    // Bias: fused when it is one value per column (its elements = N, laid out along the
    // last axis), and of the output's dtype or a constant the plan converts.
    let bias_fusable = |v: &Operand| {
        v.shape.iter().product::<usize>() == n
            && v.shape.last().copied().unwrap_or(1) == n
            && (v.dtype == ddt || v.konst)
    };
    let residual_fusable =
        |v: &Operand| v.dtype == ddt && v.shape.iter().product::<usize>() == total;
    let act = tail.act;
    let fused_act = match act {
        Activation::None => Some(Epilogue::None),
        Activation::Relu => Some(Epilogue::Relu),
        Activation::GeluTanh => Some(Epilogue::GeluTanh),
        // The erf GELU as cuBLASLt's (tanh form) epilogue when the product's inputs are
        // 16-bit: the two differ by at most 4.7e-4 (at x = -2.70), under the rounding
        // these precisions already accept; fp32 and tf32 keep the exact erf in the post
        // kernel. One pass over the output instead of a second read and write of it.
        Activation::Gelu if matches!(pr.ab_dtype, DType::BF16 | DType::F16) => {
            Some(Epilogue::GeluTanh)
        }
        Activation::Gelu
        | Activation::Silu
        | Activation::Tanh
        | Activation::Sigmoid
        | Activation::Clip { .. } => None,
    };
    let mut gemm_bias = None;
    let mut post_bias = None;
    if let Some(bv) = &tail.bias {
        if tail.beta == 1.0 && bias_fusable(bv) {
            gemm_bias = Some(bv);
        } else {
            post_bias = Some((bv, tail.beta));
        }
    }
    // cuBLASLt adds C before its activation, the node adds the residual after: C only
    // when there is no activation left to apply.
    let mut gemm_res = None;
    let mut post_res = None;
    if let Some(r) = &tail.residual {
        if fused_act == Some(Epilogue::None) && residual_fusable(r) {
            gemm_res = Some(r);
        } else {
            post_res = Some(r);
        }
    }
    // An activation must come after the bias: if the bias is left for the post kernel,
    // so is the activation.
    let (epilogue, post_act) = match (fused_act, post_bias.is_some()) {
        (Some(e), false) => (e, None),
        (Some(Epilogue::None), true) => (Epilogue::None, None),
        (Some(_), true) | (None, false | true) => (Epilogue::None, Some(act)),
    };
    let post = if post_bias.is_some() || post_act.is_some() || post_res.is_some() {
        let k = post_kernel(site, name, &tail.out, post_bias, post_act, post_res)?;
        kernels.push(k);
        Some(kernels.len() - 1)
    } else {
        None
    };
    Ok(Gemm {
        node: site.node.clone(),
        a: pr.a,
        b: pr.b,
        bias: gemm_bias.map(|v| v.id.0),
        bias_dtype: gemm_bias.map(|v| v.dtype),
        residual: gemm_res.map(|v| v.id.0),
        out: tail.out.id.0,
        m: pr.m as u64,
        n: n as u64,
        k: pr.k as u64,
        batch: pr.batch as u32,
        stride_a: pr.stride_a,
        stride_b: pr.stride_b,
        stride_d: (pr.m * n) as i64,
        trans_b: pr.trans_b,
        trans_a: false,
        ld_b: None,
        alpha: pr.alpha,
        ab_dtype: pr.ab_dtype,
        d_dtype: ddt,
        epilogue,
        post,
    })
}

/// The activation in CUDA C over `v`.
fn act_code(act: Activation) -> String {
    match act {
        Activation::None => String::new(),
        Activation::Relu => "    v = fmaxf(v, 0.0f);\n".into(),
        Activation::Gelu => "    v = gopt_gelu(v);\n".into(),
        Activation::GeluTanh => "    v = gopt_gelu_tanh(v);\n".into(),
        Activation::Silu => "    v = v * gopt_sigmoid(v);\n".into(),
        Activation::Tanh => "    v = tanhf(v);\n".into(),
        Activation::Sigmoid => "    v = gopt_sigmoid(v);\n".into(),
        Activation::Clip { lo, hi } => format!(
            "    v = fminf(fmaxf(v, {}), {});\n",
            flit(lo as f32),
            flit(hi as f32)
        ),
    }
}

/// The index into a tensor of shape `s` that broadcasts to `out`, from coordinates
/// `c0..` of `out` (GEMM and convolution epilogues).
pub(crate) fn broadcast_index(s: &[usize], out: &[usize]) -> String {
    let off = out.len().saturating_sub(s.len());
    let mut terms = Vec::new();
    let mut stride = 1usize;
    for a in (0..s.len()).rev() {
        if s[a] != 1 {
            terms.push(format!("c{} * {stride}LL", a + off));
        }
        stride *= s[a];
    }
    if terms.is_empty() {
        "0".into()
    } else {
        terms.join(" + ")
    }
}

/// The post kernel of `out`: `act(y + scale·bias) + residual`, whichever are given.
fn post_kernel(
    site: &Site,
    name: &str,
    out: &Operand,
    bias: Option<(&Operand, f32)>,
    act: Option<Activation>,
    residual: Option<&Operand>,
) -> Result<Kernel> {
    let (ddt, osh) = (out.dtype, &out.shape[..]);
    let t = storage(ddt);
    let mut params = Vec::new();
    let mut inputs = Vec::new();
    let mut body = String::new();
    let mut formula = String::from("y");
    for (what, v) in [("b", bias), ("r", residual.map(|v| (v, 1.0)))] {
        let Some((v, scale)) = v else { continue };
        let s = &v.shape;
        if s.len() > osh.len() {
            return Err(unsupported(
                site,
                format!("{what} {s:?} over output {osh:?}"),
            ));
        }
        params.push(format!("const {}* __restrict__ {what}", storage(v.dtype)));
        inputs.push(v.id.0);
        let term = format!("gopt_ld({what}[{}])", broadcast_index(s, osh));
        let line = if scale == 1.0 {
            format!("    v += {term};\n")
        } else {
            format!("    v += {} * {term};\n", flit(scale))
        };
        if what == "b" {
            body.push_str(&line);
            formula = if scale == 1.0 {
                format!("({formula} + bias)")
            } else {
                format!("({formula} + beta·C)")
            };
            if let Some(a) = act {
                body.push_str(&act_code(a));
                formula = format!("{}{formula}", a.name());
            }
        } else {
            if bias.is_none() {
                if let Some(a) = act {
                    body.push_str(&act_code(a));
                    formula = format!("{}({formula})", a.name());
                }
            }
            body.push_str(&line);
            formula = format!("{formula} + residual");
        }
    }
    if bias.is_none() && residual.is_none() {
        if let Some(a) = act {
            body.push_str(&act_code(a));
            formula = format!("{}({formula})", a.name());
        }
    }
    params.push(format!("{t}* __restrict__ y"));
    let n: usize = osh.iter().product();
    // An activation alone reads nothing but y: 16-byte accesses (scalar 2-byte ones
    // run at a quarter of the bandwidth).
    let vec = 16 / ddt.size();
    if bias.is_none() && residual.is_none() && n.is_multiple_of(vec) {
        let source = fill(
            POST_VEC,
            &[
                ("what", "GEMM epilogue"),
                ("formula", &formula),
                ("name", name),
                ("params", &params.join(", ")),
                ("n", &n.to_string()),
                ("vec", &vec.to_string()),
                ("body", &body),
                ("t", t),
            ],
        )?;
        let mut k = Kernel::flat(name, &site.node, source, n / vec, inputs, vec![out.id.0]);
        k.vectorized = true;
        return Ok(k);
    }
    post_kernel_over(
        &site.node,
        out.id.0,
        name,
        "GEMM epilogue",
        &formula,
        &params,
        inputs,
        &body,
        osh,
        t,
    )
}

/// The in-place post kernel over output `out` of node `node` (shape `osh`, storage
/// type `t`), one
/// thread per element: `body` turns `v`, the value at element `i` (coordinates `c0`,
/// `c1`, …), into the result; `params` end with `y`, `inputs` are the other operands.
/// Shared by GEMM and convolution epilogues.
#[allow(clippy::too_many_arguments)]
pub(crate) fn post_kernel_over(
    node: &str,
    out: u32,
    name: &str,
    what: &str,
    formula: &str,
    params: &[String],
    inputs: Vec<u32>,
    body: &str,
    osh: &[usize],
    t: &str,
) -> Result<Kernel> {
    let n: usize = osh.iter().product();
    let mut coords = String::from("    long long rem = i;\n");
    for a in (0..osh.len()).rev() {
        coords.push_str(&format!(
            "    const long long c{a} = rem % {d}LL; rem /= {d}LL;\n",
            d = osh[a]
        ));
    }
    coords.push_str("    (void)rem;\n");
    let source = fill(
        POST,
        &[
            ("what", what),
            ("formula", formula),
            ("name", name),
            ("params", &params.join(", ")),
            ("n", &n.to_string()),
            ("coords", &coords),
            ("body", body),
            ("t", t),
        ],
    )?;
    let block = 256u32;
    Ok(Kernel {
        name: name.to_string(),
        node: node.to_string(),
        source,
        threads: n,
        vectorized: false,
        inputs,
        outputs: vec![out],
        shared_mem: 0,
        grid: u32::try_from(n.div_ceil(block as usize))
            .map_err(|_| CodegenError::Plan(format!("{what} grid too large")))?,
        block,
        index_check: None,
    })
}
