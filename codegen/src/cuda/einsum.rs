//! Einsum and Det in CUDA ([`crate::lower::einsum`]). Einsum: one thread per output
//! element sums the products of the operands' elements over the contracted labels,
//! floats in f32 (f64 in double), integers in 64-bit unsigned arithmetic (wrapping, so
//! exact once truncated to their width, as the interpreter's wrapping math). Det: one
//! thread per matrix, LU with partial pivoting in f32 (f64 in double). The WGSL
//! kernels are the same algorithms line by line.

use super::elementwise::storage;
use super::support::store;
use super::Kernel;
use crate::lower::einsum::{Axis, Contraction, DetSpec, EinsumSpec, Form};
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const EINSUM: &str = include_str!("einsum.cu");
const DET: &str = include_str!("det.cu");

/// Emits the kernel of an Einsum or Det node.
pub fn emit(spec: &EinsumSpec, name: &str) -> Result<Kernel> {
    match &spec.form {
        Form::Einsum(c) => einsum(&spec.site, name, c),
        Form::Det(d) => det(&spec.site, name, d),
    }
}

/// The compute type of a float dtype: `double` for f64, else `float`.
fn float_type(dt: DType) -> &'static str {
    if dt == DType::F64 {
        "double"
    } else {
        "float"
    }
}

/// Statements (indented `pad`) that decode `var` over `axes` (innermost last) and add
/// each operand's offset into `{off}{k}`.
fn decode(axes: &[Axis], var: &str, off: &str, pad: &str) -> String {
    let mut code = String::new();
    for a in axes.iter().rev() {
        code += &format!(
            "{pad}{{\n{pad}    const long long v = {var} % {s}LL;\n{pad}    {var} /= {s}LL;\n",
            s = a.size
        );
        for (k, &st) in a.strides.iter().enumerate() {
            if st != 0 {
                code += &format!("{pad}    {off}{k} += v * {st}LL;\n");
            }
        }
        code += &format!("{pad}    (void)v;\n{pad}}}\n");
    }
    code
}

fn einsum(site: &Site, name: &str, c: &Contraction) -> Result<Kernel> {
    let dt = c.dtype;
    let t = storage(dt);
    let ops = c.inputs.len();
    let float = dt.is_float();
    let mut params: Vec<String> = (0..ops)
        .map(|k| format!("const {t}* __restrict__ x{k}"))
        .collect();
    params.push(format!("{t}* __restrict__ out"));
    let list = |p: &str, init: &dyn Fn(usize) -> String| {
        (0..ops)
            .map(|k| format!("{p}{k} = {}", init(k)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut outer = String::new();
    let mut inner = String::new();
    if ops > 0 {
        outer = format!("        long long {};\n", list("b", &|_| "0".into()));
        inner = format!(
            "            long long {};\n",
            list("o", &|k| format!("b{k}"))
        );
    }
    outer += &decode(&c.outer, "r", "b", "        ");
    inner += &decode(&c.contracted, "rq", "o", "            ");
    let (acc, zero, term) = if float {
        let ct = float_type(dt);
        let factors: Vec<String> = (0..ops)
            .map(|k| format!("({ct})gopt_ld(x{k}[o{k}])"))
            .collect();
        (ct, format!("({ct})0"), format!("({})", factors.join(" * ")))
    } else {
        let factors: Vec<String> = (0..ops)
            .map(|k| format!("(unsigned long long)x{k}[o{k}]"))
            .collect();
        (
            "unsigned long long",
            "0ULL".to_string(),
            format!("({})", factors.join(" * ")),
        )
    };
    let out = if float {
        store(dt, "acc")
    } else {
        format!("({t})acc")
    };
    let source = fill(
        EINSUM,
        &[
            ("operands", &ops.to_string()),
            ("name", name),
            ("params", &params.join(", ")),
            ("n", &c.n().to_string()),
            ("terms", &c.terms().to_string()),
            ("acc", acc),
            ("outer", &outer),
            ("zero", &zero),
            ("inner", &inner),
            ("term", &term),
            ("store", &out),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &site.node,
        source,
        c.n(),
        c.inputs.iter().map(|v| v.0).collect(),
        vec![c.out.0],
    ))
}

fn det(site: &Site, name: &str, d: &DetSpec) -> Result<Kernel> {
    let ct = float_type(d.dtype);
    let source = fill(
        DET,
        &[
            ("batch", &d.batch.to_string()),
            ("m", &d.m.to_string()),
            ("mm", &(d.m * d.m).max(1).to_string()),
            ("ct", ct),
            ("name", name),
            ("t", storage(d.dtype)),
            ("abs", if ct == "double" { "fabs" } else { "fabsf" }),
            ("store", &store(d.dtype, "d")),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &site.node,
        source,
        d.batch,
        vec![d.x.0],
        vec![d.out.0],
    ))
}
