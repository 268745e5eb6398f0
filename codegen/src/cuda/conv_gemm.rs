//! Channels-last convolutions with one group as GEMMs on cuBLASLt: `Y[N·OH·OW, M] =
//! im2col(X)[N·OH·OW, KH·KW·C] · W'[M, KH·KW·C]ᵀ`, where im2col is a generated copy
//! kernel (skipped for 1×1 convolutions with stride 1 and no padding, whose X already
//! is that matrix) and W' the weights reordered to `[M, KH, KW, C]` at compile time
//! (K padded to a multiple of 8 with zeros, so every row starts 16-byte aligned).
//! Bias, ReLU and a residual go to cuBLASLt's epilogue like any GEMM's, the rest to the
//! post kernel ([`super::gemm::finish`]). A residual added before the activation
//! (`epilogue="bias_residual_act"`, ResNet's `relu(conv(x) + b + identity)`) is
//! cuBLASLt's own order, `act(A·B + C + bias)`: with C the residual, the whole epilogue
//! fuses when the residual has Y's dtype; what is left runs in one post kernel of this
//! module that ends with the activation. This puts convolutions on the same
//! tensor-core GEMMs as the transformers' linear layers.

use super::conv_spec::ConvSpec;
use super::elementwise::storage;
use super::gemm::{broadcast_index, finish, post_kernel_over, Epilogue, Gemm, Problem};
use super::support::activation;
use super::Kernel;
use crate::lower::conv::ConvGemmSpec;
use crate::lower::gemm::{Operand, Tail};
use crate::lower::support::Site;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::fused::{Activation, EpilogueOrder};
use gopt_ir::{DType, Tensor, ValueId};

const IM2COL: &str = include_str!("im2col.cu");
const IM2COL_COLS: &str = include_str!("im2col_cols.cu");

/// A lowered convolution: the im2col kernel (if any), the GEMM, the reordered weights
/// (to add to the weights blob under `weight_id`), and the scratch the im2col matrix
/// needs (`scratch_id`, bytes).
pub struct ConvGemm {
    /// The im2col kernel, writing the scratch value.
    pub im2col: Option<Kernel>,
    /// The GEMM (its `b` is `weight_id`, its `a` X or the scratch).
    pub gemm: Gemm,
    /// The weights as the GEMM reads them.
    pub weight: Tensor,
    /// Bytes of the im2col matrix (0 without one).
    pub scratch_bytes: usize,
}

/// Lowers the convolution `cg` (see [`crate::lower::conv::as_gemm`]); `weight_id` and
/// `scratch_id` are value ids the plan reserved for the reordered weights and the im2col
/// matrix.
pub fn lower(
    cg: &ConvGemmSpec,
    name: &str,
    kernels: &mut Vec<Kernel>,
    weight_id: u32,
    scratch_id: u32,
) -> Result<ConvGemm> {
    let (s, x) = (&cg.conv, cg.x);
    let w = cg.weight.tensor();
    let taps = s.kh * s.kw;
    let k = taps * s.c;
    let direct = s.kh == 1
        && s.kw == 1
        && s.stride == (1, 1)
        && s.pad == (0, 0)
        && s.oh == s.h
        && s.ow == s.w;
    let kp = if direct { k } else { k.div_ceil(8) * 8 };
    let rows = s.n * s.oh * s.ow;
    let weight = reorder(w, s.m, s.c, s.kh, s.kw, kp)?;
    let (a, im2col, scratch_bytes) = if direct {
        (x.0, None, 0)
    } else {
        let mut kernel = im2col(s, name, x, scratch_id, kp)?;
        kernel.node = cg.site.node.clone();
        (scratch_id, Some(kernel), rows * kp * s.x_dt.size())
    };
    let problem = Problem {
        a,
        b: weight_id,
        m: rows,
        n: s.m,
        k: kp,
        batch: 1,
        stride_a: 0,
        stride_b: 0,
        trans_b: true,
        alpha: 1.0,
        ab_dtype: s.x_dt,
    };
    let epilogue = format!("{name}_epilogue");
    let (site, tail) = (&cg.site, &cg.tail);
    let gemm = match s.order {
        EpilogueOrder::ActThenResidual => finish(site, &epilogue, kernels, problem, tail)?,
        EpilogueOrder::ResidualThenAct => {
            residual_first(site, s, &epilogue, kernels, problem, tail)?
        }
    };
    Ok(ConvGemm {
        im2col,
        gemm,
        weight,
        scratch_bytes,
    })
}

/// Splits `act(A·W + bias + residual)` between cuBLASLt and a post kernel. cuBLASLt
/// adds C (the residual, beta = 1) and the bias before its activation, so with an
/// activation it has (ReLU, tanh-GELU) and every operand it can take, the GEMM does it
/// all; otherwise [`finish`] places the sums and the post kernel ends with the rest of
/// them and the activation.
fn residual_first(
    site: &Site,
    s: &ConvSpec,
    name: &str,
    kernels: &mut Vec<Kernel>,
    problem: Problem,
    tail: &Tail,
) -> Result<Gemm> {
    let sums = Tail {
        act: Activation::None,
        ..tail.clone()
    };
    let mut gm = finish(site, name, kernels, problem, &sums)?;
    let in_library = match s.act {
        Activation::None => return Ok(gm),
        Activation::Relu => Some(Epilogue::Relu),
        Activation::GeluTanh => Some(Epilogue::GeluTanh),
        Activation::Gelu
        | Activation::Silu
        | Activation::Tanh
        | Activation::Sigmoid
        | Activation::Clip { .. } => None,
    };
    if let (None, Some(e)) = (gm.post, in_library) {
        gm.epilogue = e;
        return Ok(gm);
    }
    let post_bias = tail.bias.as_ref().filter(|_| gm.bias.is_none());
    let post_res = tail.residual.as_ref().filter(|_| gm.residual.is_none());
    let k = post_kernel(site, &tail.out, s, name, post_bias, post_res)?;
    match gm.post {
        Some(i) => kernels[i] = k,
        None => {
            kernels.push(k);
            gm.post = Some(kernels.len() - 1);
        }
    }
    Ok(gm)
}

/// In place on the GEMM's output Y `[N, OH, OW, M]`: `y = act(y + bias + residual)`
/// with whichever of bias and residual cuBLASLt did not add.
fn post_kernel(
    site: &Site,
    out: &Operand,
    s: &ConvSpec,
    name: &str,
    bias: Option<&Operand>,
    residual: Option<&Operand>,
) -> Result<Kernel> {
    let ys = &s.y_shape;
    let mut params = Vec::new();
    let mut inputs = Vec::new();
    let mut body = String::new();
    let mut formula = String::from("y");
    if let Some(b) = bias {
        let dt = s.bias.unwrap_or(s.out_dt);
        params.push(format!("const {}* __restrict__ b", storage(dt)));
        inputs.push(b.id.0);
        body += &format!("    v += gopt_ld(b[c{}]);\n", ys.len() - 1);
        formula += " + bias";
    }
    if let (Some(r), Some((dt, rs))) = (residual, &s.residual) {
        params.push(format!("const {}* __restrict__ r", storage(*dt)));
        inputs.push(r.id.0);
        body += &format!("    v += gopt_ld(r[{}]);\n", broadcast_index(rs, ys));
        formula += " + residual";
    }
    body += &format!("    v = {};\n", activation(s.act, "v"));
    let formula = format!("{}({formula})", s.act.name());
    let t = storage(s.out_dt);
    params.push(format!("{t}* __restrict__ y"));
    post_kernel_over(
        &site.node,
        out.id.0,
        name,
        "convolution epilogue",
        &formula,
        &params,
        inputs,
        &body,
        ys,
        t,
    )
}

/// `W[M, C, KH, KW]` → `[M, KH·KW·C]` padded with zero columns to `kp`.
fn reorder(w: &Tensor, m: usize, c: usize, kh: usize, kw: usize, kp: usize) -> Result<Tensor> {
    let src = w.to_f64_vec();
    if src.len() != m * c * kh * kw {
        return Err(CodegenError::Plan(
            "convolution weights of an unexpected size".into(),
        ));
    }
    let mut out = vec![0.0; m * kp];
    for o in 0..m {
        for ci in 0..c {
            for y in 0..kh {
                for xk in 0..kw {
                    out[o * kp + (y * kw + xk) * c + ci] = src[((o * c + ci) * kh + y) * kw + xk];
                }
            }
        }
    }
    Tensor::from_f64s(w.dtype(), &[m, kp], &out).map_err(|e| CodegenError::Plan(e.to_string()))
}

/// The holes both im2col templates share: the convolution's geometry.
fn geometry(s: &super::conv_spec::ConvSpec, kp: usize) -> Vec<(&'static str, String)> {
    let v = [
        ("k", s.kh * s.kw * s.c),
        ("kp", kp),
        ("c", s.c),
        ("kw", s.kw),
        ("ow", s.ow),
        ("oh", s.oh),
        ("sh", s.stride.0),
        ("sw", s.stride.1),
        ("ph", s.pad.0),
        ("pw", s.pad.1),
        ("dh", s.dilation.0),
        ("dw", s.dilation.1),
        ("h", s.h),
        ("w", s.w),
    ];
    v.iter().map(|(k, x)| (*k, x.to_string())).collect()
}

/// Fills an im2col template and wraps it as a kernel of `total` threads.
fn im2col_kernel(
    template: &str,
    mut holes: Vec<(&'static str, String)>,
    name: String,
    total: usize,
    vectorized: bool,
    x: ValueId,
    scratch: u32,
) -> Result<Kernel> {
    holes.push(("what", "im2col".into()));
    holes.push(("name", name.clone()));
    holes.push(("total", total.to_string()));
    let refs: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let source = fill(template, &refs)?;
    let block = 256u32;
    Ok(Kernel {
        name,
        node: String::new(),
        source,
        threads: total,
        vectorized,
        inputs: vec![x.0],
        outputs: vec![scratch],
        shared_mem: 0,
        grid: u32::try_from(total.div_ceil(block as usize))
            .map_err(|_| CodegenError::Plan("im2col grid too large".into()))?,
        block,
        index_check: None,
    })
}

/// im2col: one thread per 16 bytes of a row when the channels allow it, else per
/// element; for channel counts that are not a multiple of 8 (an image's 3) in 16-bit
/// types, 8 columns per thread and one 16-byte store.
fn im2col(
    s: &super::conv_spec::ConvSpec,
    name: &str,
    x: ValueId,
    scratch: u32,
    kp: usize,
) -> Result<Kernel> {
    let e = s.x_dt.size();
    let v = if s.c.is_multiple_of(16 / e) {
        16 / e
    } else {
        1
    };
    let t = storage(s.x_dt);
    let rows = s.n * s.oh * s.ow;
    let zero = if s.x_dt == DType::BF16 {
        "__float2bfloat16(0.0f)"
    } else if s.x_dt == DType::F16 {
        "__float2half(0.0f)"
    } else {
        "0"
    };
    let mut holes = geometry(s, kp);
    holes.push(("t", t.into()));
    let name = format!("{name}_im2col");
    if v == 1 && e == 2 && kp.is_multiple_of(8) {
        holes.push(("kp8", (kp / 8).to_string()));
        holes.push(("zero", zero.into()));
        return im2col_kernel(IM2COL_COLS, holes, name, rows * (kp / 8), true, x, scratch);
    }
    let (vec, zero) = if v == 1 {
        (t.to_string(), zero.to_string())
    } else {
        (
            "uint4".to_string(),
            "make_uint4(0u, 0u, 0u, 0u)".to_string(),
        )
    };
    holes.push(("kpv", (kp / v).to_string()));
    holes.push(("v", v.to_string()));
    holes.push(("vec", vec));
    holes.push(("zero", zero));
    im2col_kernel(IM2COL, holes, name, rows * (kp / v), v > 1, x, scratch)
}
