//! Channels-last convolutions with one group as GEMMs on cuBLASLt: `Y[N·OH·OW, M] =
//! im2col(X)[N·OH·OW, KH·KW·C] · W'[M, KH·KW·C]ᵀ`, where im2col is a generated copy
//! kernel (skipped for 1×1 convolutions with stride 1 and no padding, whose X already
//! is that matrix) and W' the weights reordered to `[M, KH, KW, C]` at compile time
//! (K padded to a multiple of 8 with zeros, so every row starts 16-byte aligned).
//! Bias, ReLU and a residual go to cuBLASLt's epilogue like any GEMM's, the rest to the
//! post kernel ([`super::gemm::finish`]). This puts convolutions on the same tensor-core
//! GEMMs as the transformers' linear layers.

use super::conv::spec;
use super::elementwise::storage;
use super::gemm::{finish, Gemm, Problem};
use super::Kernel;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::{DType, Graph, Node, Tensor, ValueId};

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

/// Lowers `node` (see [`crate::lower::conv::as_gemm`]); `weight_id` and `scratch_id` are value ids the plan
/// reserved for the reordered weights and the im2col matrix.
pub fn lower(
    g: &Graph,
    node: &Node,
    name: &str,
    kernels: &mut Vec<Kernel>,
    weight_id: u32,
    scratch_id: u32,
) -> Result<ConvGemm> {
    let s = spec(g, node)?;
    let input = |k: usize| node.inputs.get(k).copied().flatten();
    let (Some(x), Some(w)) = (input(0), input(1)) else {
        return Err(CodegenError::Plan(format!(
            "`{}`: missing X or W",
            node.name
        )));
    };
    let w = g
        .constant(w)
        .ok_or_else(|| CodegenError::Plan(format!("`{}`: weights are not constant", node.name)))?;
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
        let mut kernel = im2col(&s, name, x, scratch_id, kp)?;
        kernel.node = node.name.clone();
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
    let gemm = finish(
        g,
        node,
        &format!("{name}_epilogue"),
        kernels,
        problem,
        s.act,
        input(2),
        input(3),
    )?;
    Ok(ConvGemm {
        im2col,
        gemm,
        weight,
        scratch_bytes,
    })
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
    let v = if s.c % (16 / e) == 0 { 16 / e } else { 1 };
    let t = storage(s.x_dt);
    let rows = s.n * s.oh * s.ow;
    let zero = match s.x_dt {
        DType::BF16 => "__float2bfloat16(0.0f)",
        DType::F16 => "__float2half(0.0f)",
        _ => "0",
    };
    let mut holes = geometry(s, kp);
    holes.push(("t", t.into()));
    let name = format!("{name}_im2col");
    if v == 1 && e == 2 && kp % 8 == 0 {
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
