//! Products with a packed low-bit weight (MatMulNBits, read once for every backend by
//! [`crate::lower::packed`]) in WGSL. WGSL has no library GEMM to hand a dequantized
//! weight to, so one shader serves both of [`crate::lower::packed::Path`]'s row ranges:
//! a workgroup of 64 invocations computes a tile of up to [`MAX_ROWS`] rows by 4 output
//! columns, the weight dequantized once per tile. The invocations split K into runs of
//! 8 weights, each inside one block, so a scale and a zero point are read once per run
//! and column; the 4 columns' runs are dequantized into two 4×4 matrices in registers
//! and multiplied into every row of the tile (f32 throughout, no indexed private
//! arrays, which drivers put in local memory). Partial sums meet in workgroup memory,
//! the bias is added there, and the output is rounded once to A's type.
//!
//! u8 data is stored one byte per 32-bit word in WGSL ([`super::storage_type`]), B and
//! packed zero points included, so the shader reads B a byte per word: on the device a
//! 4-bit weight takes 16 bits, an 8-bit one 32 (the packing saves bytes in the
//! artifact, not yet on the GPU). f32 and f16 (with the adapter's SHADER_F16) are
//! computed; bf16 has no WGSL form and is refused.

use super::{enable_f16, refuse, storage_type, WgslKernel};
use crate::lower::packed::PackedSpec;
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::nn::nbits::ZeroPoints;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("packed.wgsl");

/// Most rows one workgroup multiplies (its accumulators are one vec4 per row).
pub const MAX_ROWS: usize = 8;

/// Output columns per workgroup.
const COLS: usize = 4;

/// Invocations per workgroup (the template's `WG`).
const WG: usize = 64;

/// Workgroups one dispatch dimension holds.
const MAX_DISPATCH: usize = 65_535;

/// The error for a form of `site` this shader does not take.
fn unsupported(site: &Site, what: impl Into<String>) -> crate::CodegenError {
    refuse(site, &what.into())
}

/// The shader of MatMulNBits `sp`.
pub fn emit(sp: &PackedSpec, name: &str) -> Result<WgslKernel> {
    let site = &sp.site;
    let nb = sp.nb;
    let (ty, _) = storage_type(sp.dtype)
        .filter(|_| sp.dtype.is_float())
        .ok_or_else(|| unsupported(site, format!("{} activations", sp.dtype)))?;
    if sp.rows == 0 {
        return Err(unsupported(site, "an empty output"));
    }
    let u32_of = |n: usize| {
        u32::try_from(n).map_err(|_| unsupported(site, "more than 2^32 elements in an operand"))
    };
    for n in [sp.rows * nb.k, sp.rows * nb.n, nb.weight_bytes()] {
        u32_of(n)?;
    }
    let rows = sp.rows.min(MAX_ROWS);
    let tiles_n = nb.n.div_ceil(COLS);
    let tiles = tiles_n * sp.rows.div_ceil(rows);
    let x = tiles.min(MAX_DISPATCH);
    let y = tiles.div_ceil(x);
    if y > MAX_DISPATCH {
        return Err(unsupported(site, "more than 65535² workgroups"));
    }
    let b = Binds::new(site, sp)?;
    let source = fill(
        TEMPLATE,
        &[
            ("enable", enable_f16(ty == "f16")),
            ("what", &what(sp)),
            ("bias_note", if nb.bias { " + bias[n]" } else { "" }),
            ("bindings", &b.decls),
            ("k", &nb.k.to_string()),
            ("n", &nb.n.to_string()),
            ("m", &sp.rows.to_string()),
            ("block", &nb.block.to_string()),
            ("blocks", &nb.blocks.to_string()),
            ("blob", &nb.blob.to_string()),
            ("bits", &nb.bits.to_string()),
            ("zrow", &nb.zero_row_bytes().to_string()),
            ("rows", &rows.to_string()),
            ("tiles_n", &tiles_n.to_string()),
            ("tiles", &u32_of(tiles)?.to_string()),
            ("parts", &(rows * WG).to_string()),
            ("zero", &zero(sp)),
            ("bias", if nb.bias { "f32(bias[n])" } else { "0.0" }),
            ("unpack", unpack(nb.bits)),
            (
                "declare",
                &per_row(rows, "    var acc{r} = vec4<f32>(0.0);"),
            ),
            (
                "accumulate",
                &per_row(
                    rows,
                    "        let x{r} = activations(min(m0 + {r}u, M - 1u), k0);\n        \
                     acc{r} = acc{r} + x{r}.lo * wl + x{r}.hi * wh;",
                ),
            ),
            ("spill", &per_row(rows, "    part[{r}u * WG + t] = acc{r};")),
            ("ty", ty),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: site.node.clone(),
        source,
        workgroups: [u32_of(x)?, u32_of(y)?, 1],
        inputs: b.inputs,
        outputs: vec![sp.out.0],
        index_check: None,
        loop_iterations: None,
    })
}

/// The storage bindings: A, B, the scales, the zero points and bias where given, then
/// the output, numbered in that order.
struct Binds {
    decls: String,
    inputs: Vec<u32>,
}

impl Binds {
    fn new(site: &Site, sp: &PackedSpec) -> Result<Binds> {
        let mut b = Binds {
            decls: String::new(),
            inputs: Vec::new(),
        };
        b.read(site, "a", sp.a.0, sp.dtype)?;
        b.read(site, "b", sp.b.0, DType::U8)?;
        b.read(site, "scales", sp.scales.0, sp.dtype)?;
        if let Some(z) = sp.zero_points {
            let dt = match sp.nb.zero {
                ZeroPoints::Packed | ZeroPoints::Default => DType::U8,
                ZeroPoints::Float => sp.dtype,
            };
            b.read(site, "zp", z.0, dt)?;
        }
        if let Some(v) = sp.bias {
            b.read(site, "bias", v.0, sp.dtype)?;
        }
        let (t, _) = element(site, sp.dtype)?;
        b.decls += &format!(
            "@group(0) @binding({}) var<storage, read_write> out: array<{t}>;",
            b.inputs.len()
        );
        Ok(b)
    }

    fn read(&mut self, site: &Site, name: &str, v: u32, dt: DType) -> Result<()> {
        let (t, _) = element(site, dt)?;
        self.decls += &format!(
            "@group(0) @binding({}) var<storage, read> {name}: array<{t}>;\n",
            self.inputs.len()
        );
        self.inputs.push(v);
        Ok(())
    }
}

fn element(site: &Site, dt: DType) -> Result<(&'static str, usize)> {
    storage_type(dt).ok_or_else(|| unsupported(site, format!("{dt} operands")))
}

/// The zero point of column `n`, block `blk` as an f32 expression.
fn zero(sp: &PackedSpec) -> String {
    let nb = &sp.nb;
    match nb.zero {
        ZeroPoints::Packed if nb.bits == 4 => {
            "f32((zp[n * ZROW + blk / 2u] >> ((blk % 2u) * 4u)) & 15u)".into()
        }
        ZeroPoints::Packed => "f32(zp[n * ZROW + blk] & 255u)".into(),
        ZeroPoints::Float => "f32(zp[n * BLOCKS + blk])".into(),
        ZeroPoints::Default => format!("{}.0", nb.default_zero()),
    }
}

/// Code that sets `q_lo` and `q_hi` (vec4<f32>) to the 8 quantized values from byte
/// `at` of B on.
fn unpack(bits: usize) -> &'static str {
    if bits == 4 {
        // Element 2j is the low nibble of byte j.
        "    let b0 = b[at];\n    let b1 = b[at + 1u];\n    let b2 = b[at + 2u];\n    \
         let b3 = b[at + 3u];\n    \
         let q_lo = vec4<f32>(vec4<u32>(b0, b0 >> 4u, b1, b1 >> 4u) & vec4<u32>(15u));\n    \
         let q_hi = vec4<f32>(vec4<u32>(b2, b2 >> 4u, b3, b3 >> 4u) & vec4<u32>(15u));"
    } else {
        "    let q_lo = vec4<f32>(vec4<u32>(b[at], b[at + 1u], b[at + 2u], b[at + 3u]) \
         & vec4<u32>(255u));\n    \
         let q_hi = vec4<f32>(vec4<u32>(b[at + 4u], b[at + 5u], b[at + 6u], b[at + 7u]) \
         & vec4<u32>(255u));"
    }
}

/// `line` once per row of the tile, `{r}` replaced by the row.
fn per_row(rows: usize, line: &str) -> String {
    (0..rows)
        .map(|r| line.replace("{r}", &r.to_string()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The header's summary of the variant.
fn what(sp: &PackedSpec) -> String {
    let nb = &sp.nb;
    let zero = match nb.zero {
        ZeroPoints::Default => format!("zero point {}", nb.default_zero()),
        ZeroPoints::Packed => "u8 zero points".into(),
        ZeroPoints::Float => format!("{} zero points", sp.dtype),
    };
    format!(
        "{}, {}-bit weights in blocks of {}, {zero}",
        sp.dtype, nb.bits, nb.block
    )
}
