//! Einsum and Det in WGSL. Einsum: one invocation per output element sums the products
//! of the operands' elements over the contracted labels, f32/f16 in f32, i32 and u32
//! in their own (wrapping) arithmetic, i64/u64 as `vec2<u32>` words with the exact
//! 64-bit helpers. Det: one invocation per matrix, LU with partial pivoting in f32.
//! WGSL has no f64 or bf16 storage: those are refused. The CUDA kernels are the same
//! algorithms line by line. The node is read once, for both backends, by
//! [`crate::lower::einsum`].

use super::types::{self, kind, Kind};
use super::WgslKernel;
use crate::lower::einsum::{Axis, Contraction, DetSpec, EinsumSpec, Form};
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const EINSUM: &str = include_str!("einsum.wgsl");
const DET: &str = include_str!("det.wgsl");

/// Emits the shader of an Einsum or Det node.
pub fn emit(spec: &EinsumSpec, name: &str) -> Result<WgslKernel> {
    match &spec.form {
        Form::Einsum(c) => einsum(&spec.site, name, c),
        Form::Det(d) => det(&spec.site, name, d),
    }
}

/// Statements (indented `pad`) that decode `var` over `axes` (innermost last) and add
/// each operand's offset into `{off}{k}`.
fn decode(axes: &[Axis], var: &str, off: &str, pad: &str) -> String {
    let mut code = String::new();
    for a in axes.iter().rev() {
        code += &format!(
            "{pad}{{\n{pad}    let v = {var} % {s}u;\n{pad}    {var} = {var} / {s}u;\n",
            s = a.size
        );
        for (k, &st) in a.strides.iter().enumerate() {
            if st != 0 {
                code += &format!("{pad}    {off}{k} = {off}{k} + v * {st}u;\n");
            }
        }
        code += &format!("{pad}}}\n");
    }
    code
}

fn einsum(site: &Site, name: &str, c: &Contraction) -> Result<WgslKernel> {
    let dt = c.dtype;
    let (t, _) =
        super::storage_type(dt).ok_or_else(|| site.unsupported(&format!("{dt} operands")))?;
    let n = u32::try_from(c.n()).map_err(|_| site.unsupported("2^32 output elements"))?;
    let terms = u32::try_from(c.terms()).map_err(|_| site.unsupported("2^32 terms per output"))?;
    for &len in &c.lens {
        if len >= 1 << 31 {
            return Err(site.unsupported("an operand of 2^31 elements or more"));
        }
    }
    let ops = c.inputs.len();
    if ops == 0 {
        return Err(site.unsupported("no operands"));
    }
    let mut bindings = String::new();
    for k in 0..ops {
        bindings += &format!("@group(0) @binding({k}) var<storage, read> x{k}: array<{t}>;\n");
    }
    bindings += &format!("@group(0) @binding({ops}) var<storage, read_write> out: array<{t}>;\n");
    let mut outer: String = (0..ops)
        .map(|k| format!("        var b{k}: u32 = 0u;\n"))
        .collect();
    let mut inner: String = (0..ops)
        .map(|k| format!("            var o{k}: u32 = b{k};\n"))
        .collect();
    outer += &decode(&c.outer, "r", "b", "        ");
    inner += &decode(&c.contracted, "rq", "o", "            ");
    let elem = |k: usize| types::load(dt, &format!("x{k}[o{k}]"));
    let (acc, zero, add) = match kind(dt) {
        Some(Kind::Float) => {
            let f: Vec<String> = (0..ops).map(elem).collect();
            (
                "f32",
                "0.0".to_string(),
                format!("acc + ({})", f.join(" * ")),
            )
        }
        Some(Kind::Int) => {
            let f: Vec<String> = (0..ops).map(elem).collect();
            (
                "i32",
                "0i".to_string(),
                format!("acc + ({})", f.join(" * ")),
            )
        }
        Some(Kind::Uint) => {
            let f: Vec<String> = (0..ops).map(elem).collect();
            (
                "u32",
                "0u".to_string(),
                format!("acc + ({})", f.join(" * ")),
            )
        }
        Some(Kind::Wide) => {
            let term = (1..ops).fold(elem(0), |p, k| format!("gopt_mul64({p}, {})", elem(k)));
            (
                "vec2<u32>",
                "vec2<u32>(0u, 0u)".to_string(),
                format!("gopt_add64(acc, {term})"),
            )
        }
        Some(Kind::Bool) | None => return Err(site.unsupported(&format!("{dt} operands"))),
    };
    let source = fill(
        EINSUM,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("operands", &ops.to_string()),
            ("n", &n.to_string()),
            ("terms", &terms.to_string()),
            ("acc", acc),
            ("bindings", &bindings),
            ("helpers", &types::helpers_for(&add)),
            ("outer", &outer),
            ("zero", &zero),
            ("inner", &inner),
            ("add", &add),
            ("store", &types::store(dt, "acc")),
        ],
    )?;
    Ok(WgslKernel::flat(
        name,
        &site.node,
        source,
        n,
        c.inputs.iter().map(|v| v.0).collect(),
        vec![c.out.0],
    ))
}

fn det(site: &Site, name: &str, d: &DetSpec) -> Result<WgslKernel> {
    let t = match d.dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        other => return Err(site.unsupported(&format!("{other} data"))),
    };
    let batch = u32::try_from(d.batch).map_err(|_| site.unsupported("2^32 matrices"))?;
    if d.batch * d.m * d.m >= 1 << 31 {
        return Err(site.unsupported("2^31 elements or more"));
    }
    let source = fill(
        DET,
        &[
            ("enable", super::enable_f16(d.dtype == DType::F16)),
            ("batch", &batch.to_string()),
            ("m", &d.m.to_string()),
            ("mm", &(d.m * d.m).max(1).to_string()),
            ("t", t),
            ("store", &types::store(d.dtype, "d")),
        ],
    )?;
    Ok(WgslKernel::flat(
        name,
        &site.node,
        source,
        batch,
        vec![d.x.0],
        vec![d.out.0],
    ))
}
