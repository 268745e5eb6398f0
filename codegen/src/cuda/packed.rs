//! Products with a packed low-bit weight (MatMulNBits) on CUDA, on the path
//! [`crate::lower::packed`] picks: up to its `GEMV_MAX_ROWS` rows one fused GEMV kernel
//! (`packed_gemv.rs`); above, the weight is dequantized into `[N, K]` scratch of A's type
//! (`packed_dequant.cu`) and multiplied by cuBLASLt with a transposed B and the bias in
//! its epilogue. This module owns the steps, the dequantize kernel, and what the
//! templates share: how B is loaded (16-byte words, 8 when rows are only 8-aligned), A's
//! load width, the zero-point form and the kernel parameters. Every template is
//! specialized on the shapes, bits, block size, zero-point form and dtype.

use super::elementwise::storage;
use super::gemm::{finish, Gemm, Problem};
use super::support::{blocks, store};
use super::Kernel;
use crate::lower::packed::{PackedSpec, Path};
use crate::lower::support::Site;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::nn::nbits::{NBits, ZeroPoints};

#[path = "packed_gemv.rs"]
mod gemv;

const DEQUANT: &str = include_str!("packed_dequant.cu");

/// Threads per block of the dequantize kernel.
const DEQUANT_BLOCK: u32 = 256;

/// The steps of one MatMulNBits node: kernels in order, then a GEMM if any.
pub struct PackedSteps {
    /// Generated kernels, launched in order.
    pub kernels: Vec<Kernel>,
    /// The GEMM after them (the dequantize path).
    pub gemm: Option<Gemm>,
    /// Bytes of scratch (value id `scratch` in the plan) the steps use.
    pub scratch_bytes: usize,
}

/// The error for a form of `site` these kernels do not take.
fn unsupported(site: &Site, what: &str) -> CodegenError {
    site.unsupported(what).for_backend("CUDA")
}

/// The steps of `p` (kernels named from `name`); `scratch` is the value id the plan
/// gives the dequantized weight.
pub fn lower(p: &PackedSpec, name: &str, scratch: u32) -> Result<PackedSteps> {
    if p.rows == 0 || p.nb.n == 0 || p.nb.k == 0 {
        return Err(unsupported(&p.site, "an empty product"));
    }
    match p.path() {
        Path::Gemv => Ok(PackedSteps {
            kernels: vec![gemv::emit(p, &format!("{name}_packed_gemv"))?],
            gemm: None,
            scratch_bytes: 0,
        }),
        Path::DequantizeGemm => {
            let k = dequant(p, &format!("{name}_packed_dequant"), scratch)?;
            let problem = Problem {
                a: p.a.0,
                b: scratch,
                m: p.rows,
                n: p.nb.n,
                k: p.nb.k,
                batch: 1,
                stride_a: 0,
                stride_b: 0,
                trans_b: true,
                alpha: 1.0,
                ab_dtype: p.dtype,
            };
            // A bias of N values in the output's dtype always fuses into cuBLASLt's
            // epilogue: nothing is left for a post kernel.
            let mut post = Vec::new();
            let epilogue = format!("{name}_epilogue");
            let gm = finish(&p.site, &epilogue, &mut post, problem, &p.tail)?;
            if !post.is_empty() || gm.post.is_some() {
                return Err(CodegenError::Plan(format!(
                    "MatMulNBits `{}`: its GEMM needs a post kernel",
                    p.site.node
                )));
            }
            Ok(PackedSteps {
                kernels: vec![k],
                gemm: Some(gm),
                scratch_bytes: p.scratch_bytes(),
            })
        }
    }
}

/// Bytes of each load of B: 16 when every row of B is 16-byte aligned; 8 otherwise
/// (4-bit blocks of 16 are 8 bytes, and an odd count of them leaves rows 8-aligned).
fn word_bytes(nb: &NBits) -> usize {
    if (nb.blocks * nb.blob).is_multiple_of(16) {
        16
    } else {
        8
    }
}

/// Weights per load of B.
fn word_elems(nb: &NBits) -> usize {
    word_bytes(nb) * 8 / nb.bits
}

/// The CUDA type of one `bytes`-byte load.
fn word_type(bytes: usize) -> &'static str {
    if bytes == 16 {
        "uint4"
    } else if bytes == 8 {
        "uint2"
    } else if bytes == 4 {
        "unsigned int"
    } else {
        "unsigned short"
    }
}

/// Elements of A per load: the most (up to `max`) whose bytes every row start keeps
/// aligned (rows start at multiples of `K` elements; the buffer itself is aligned).
fn a_elems(k: usize, max: usize) -> usize {
    let mut e = max;
    while e > 1 && !k.is_multiple_of(e) {
        e /= 2;
    }
    e
}

/// The zero-point form as the templates' `ZF`, its pointer declarations, and a word for
/// the comment.
fn zero_form(nb: &NBits, t: &str) -> (usize, String, &'static str) {
    let (zf, zq, zf_ptr, what) = match nb.zero {
        ZeroPoints::Default => (0, "nullptr", "nullptr", "default"),
        ZeroPoints::Packed => (1, "zp", "nullptr", "packed u8"),
        ZeroPoints::Float => (2, "nullptr", "zp", "float"),
    };
    let decl = format!(
        "const unsigned char* __restrict__ zq = {zq};\n    const {t}* __restrict__ zf = {zf_ptr};"
    );
    (zf, decl, what)
}

/// The kernel parameters reading `p`'s inputs (A and the bias only for a GEMV: B, the
/// scales and the zero points always) and the value ids they bind, in order; the
/// output parameter is added by the caller.
fn inputs(p: &PackedSpec, t: &str, gemv: bool) -> (Vec<String>, Vec<u32>) {
    let mut params = Vec::new();
    let mut ids = Vec::new();
    if gemv {
        params.push(format!("const {t}* __restrict__ a"));
        ids.push(p.a.0);
    }
    params.push("const unsigned char* __restrict__ b".to_string());
    params.push(format!("const {t}* __restrict__ scales"));
    ids.extend([p.b.0, p.scales.0]);
    if let Some(z) = p.zero_points {
        let zt = match p.nb.zero {
            ZeroPoints::Packed => "unsigned char",
            ZeroPoints::Float | ZeroPoints::Default => t,
        };
        params.push(format!("const {zt}* __restrict__ zp"));
        ids.push(z.0);
    }
    if let Some(bias) = p.bias.filter(|_| gemv) {
        params.push(format!("const {t}* __restrict__ bias"));
        ids.push(bias.0);
    }
    (params, ids)
}

/// The holes every template shares: the sizes of the packed weight.
fn common(p: &PackedSpec) -> Vec<(&'static str, String)> {
    let nb = &p.nb;
    vec![
        ("n", nb.n.to_string()),
        ("k", nb.k.to_string()),
        ("bits", nb.bits.to_string()),
        ("block", nb.block.to_string()),
        ("blocks", nb.blocks.to_string()),
        ("blob", nb.blob.to_string()),
        ("zrow", nb.zero_row_bytes().to_string()),
    ]
}

/// Fills `template` with `holes`, each value owned.
fn fill_owned(template: &str, holes: &[(&'static str, String)]) -> Result<String> {
    let refs: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    fill(template, &refs)
}

/// The dequantize kernel: `p`'s weight as `[N, K]` of A's dtype into value `scratch`.
fn dequant(p: &PackedSpec, name: &str, scratch: u32) -> Result<Kernel> {
    let nb = &p.nb;
    let t = storage(p.dtype);
    let epu = 32 / nb.bits;
    let (zf, zp_decl, zero) = zero_form(nb, t);
    // A is the GEMM's, and the bias its epilogue's: the kernel reads neither.
    let (mut params, ids) = inputs(p, t, false);
    params.push(format!("{t}* __restrict__ y"));
    let out_bytes = epu * p.dtype.size();
    let ow = if out_bytes.is_multiple_of(16) { 16 } else { 8 };
    let words = nb.n * nb.k.div_ceil(epu);
    let mut holes = common(p);
    holes.extend([
        ("name", name.to_string()),
        ("params", params.join(", ")),
        ("t", t.to_string()),
        ("zero", zero.to_string()),
        ("epu", epu.to_string()),
        ("ow", ow.to_string()),
        ("ovec_t", word_type(ow).to_string()),
        ("ru", (nb.blocks * nb.blob / 4).to_string()),
        ("zf", zf.to_string()),
        ("zp_decl", zp_decl),
        ("block_threads", DEQUANT_BLOCK.to_string()),
        ("store", store(p.dtype, "v")),
    ]);
    Ok(Kernel {
        name: name.to_string(),
        node: p.site.node.clone(),
        source: fill_owned(DEQUANT, &holes)?,
        threads: words,
        vectorized: nb.k.is_multiple_of(epu),
        inputs: ids,
        outputs: vec![scratch],
        shared_mem: 0,
        grid: blocks(words, DEQUANT_BLOCK),
        block: DEQUANT_BLOCK,
        index_check: None,
    })
}

/// The epilogue line adding the bias (if any) to `v`, and the formula's tail.
fn bias_code(p: &PackedSpec) -> (String, String) {
    match p.bias {
        Some(_) => (
            "                v += gopt_ld(bias[n]);\n".to_string(),
            " + bias".to_string(),
        ),
        None => (String::new(), String::new()),
    }
}

fn grid_u32(site: &Site, grid: usize) -> Result<u32> {
    u32::try_from(grid)
        .ok()
        .filter(|&g| g <= i32::MAX as u32 / 256)
        .ok_or_else(|| {
            CodegenError::Plan(format!(
                "node `{}`: GEMV grid of {grid} blocks too large",
                site.node
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_follow_the_row_alignment() {
        assert_eq!(a_elems(2048, 8), 8);
        assert_eq!(a_elems(4160, 8), 8);
        assert_eq!(a_elems(100, 8), 4);
        assert_eq!(a_elems(101, 4), 1);
    }
}
