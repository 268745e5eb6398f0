//! Element-wise kernels: a single element-wise op or a `FusedElementwise` body becomes
//! one CUDA kernel. Shapes are static (one plan per bucket), so broadcast index math is
//! unrolled with constant divisors. When every tensor operand has the output's shape and
//! storage type (the common case after fusion), the kernel moves 16 bytes per access —
//! DESIGN.md measured 3.7 TB/s for that against 0.96 TB/s with scalar 2-byte accesses.
//! Values compute in `float` (`double` for f64), `bool`, `long long` (`unsigned long
//! long` for u64); 8/16/32-bit integer results are wrapped to their width after each op,
//! so a body sees the values the interpreter has. An input that is columns of a wider
//! tensor (a merged GEMM's piece, [`crate::lower::absorb::column_reads`]) is read there, through the
//! source's row pitch (16 bytes at a time where its columns allow). Each step's
//! description is printed by [`expr`];
//! a single Dropout also writes its all-true mask, and a Dropout whose training mode or
//! ratio is known only at run time fails the run where it would train.

use super::Kernel;
use crate::lower::elementwise::{Operand, Spec, Test};
use crate::template::fill;
use crate::{CodegenError, Result};
pub mod expr;

use gopt_ir::ops::ElementwiseOp as E;
use gopt_ir::{DType, Tensor};

const SCALAR: &str = include_str!("elementwise.cu");
const VECTOR: &str = include_str!("elementwise_vec.cu");

/// The C type a dtype is stored as on the device.
pub fn storage(dt: DType) -> &'static str {
    match dt {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F16 => "__half",
        DType::BF16 => "__nv_bfloat16",
        DType::I8 => "signed char",
        DType::I16 => "short",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::U8 | DType::Bool => "unsigned char",
        DType::U16 => "unsigned short",
        DType::U32 => "unsigned int",
        DType::U64 => "unsigned long long",
    }
}

/// The C type values of a dtype are computed in.
fn compute(dt: DType) -> &'static str {
    match dt {
        DType::F32 | DType::F16 | DType::BF16 => "float",
        DType::F64 => "double",
        DType::Bool => "bool",
        DType::U64 => "unsigned long long",
        DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U16 | DType::U32 => {
            "long long"
        }
    }
}

/// Converts a computed value to its storage type.
fn store(dt: DType, v: &str) -> String {
    match dt {
        DType::F16 => format!("__float2half_rn({v})"),
        DType::BF16 => format!("__float2bfloat16_rn({v})"),
        DType::Bool => format!("(unsigned char)({v})"),
        other => format!("({})({v})", storage(other)),
    }
}

/// Reads a stored element as its compute type.
fn load(dt: DType, v: &str) -> String {
    match dt {
        DType::Bool | DType::U8 => format!("(({}){v})", compute(dt)),
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => format!("gopt_ld({v})"),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => format!("gopt_ld({v})"),
        DType::U16 | DType::U32 | DType::U64 => format!("gopt_ld({v})"),
    }
}

/// A literal of a one-element constant in its compute type.
fn literal(t: &Tensor) -> Option<String> {
    let dt = t.dtype();
    match dt {
        DType::F32 | DType::F16 | DType::BF16 => {
            let v = t.to_f64_vec()[0] as f32;
            Some(if v.is_nan() {
                "__int_as_float(0x7fc00000)".into()
            } else if v.is_infinite() {
                if v > 0.0 {
                    "__int_as_float(0x7f800000)".into()
                } else {
                    "__int_as_float(0xff800000)".into()
                }
            } else {
                format!("{v:e}f")
            })
        }
        DType::F64 => Some(format!("{:e}", t.to_f64_vec()[0])),
        DType::Bool => Some(if t.to_i64_vec()[0] != 0 {
            "true".into()
        } else {
            "false".into()
        }),
        DType::U64 => Some(format!("{}ULL", t.to_i64_vec()[0] as u64)),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U16 | DType::U32 => {
            Some(match t.to_i64_vec()[0] {
                i64::MIN => "(-9223372036854775807LL - 1)".into(),
                v => format!("{v}LL"),
            })
        }
    }
}

/// Emits the kernel of element-wise spec `spec`.
pub fn emit(spec: &Spec, name: &str) -> Result<Kernel> {
    let shape = &spec.shape;
    let n: usize = shape.iter().product();
    let out_dt = spec.dtype;
    let check = &spec.check;
    let vec_elems = 16 / storage_size(out_dt);
    let vectorized = spec.mask.is_none()
        && check.is_none()
        && n.is_multiple_of(vec_elems)
        && n >= vec_elems
        && spec.inputs.iter().all(|i| {
            let whole = i.shape == *shape && i.dtype == out_dt;
            match &i.columns {
                Some(c) => whole && c.vectors(vec_elems),
                None => (i.shape.iter().product::<usize>() == 1) || whole,
            }
        });
    let mut index = String::new();
    let mut loads = String::new();
    let mut vec_loads = String::new();
    let mut sig = Vec::new();
    for (k, input) in spec.inputs.iter().enumerate() {
        let (dt, s) = (&input.dtype, &input.shape);
        sig.push(format!("const {}* __restrict__ in{k}", storage(*dt)));
        let var = format!("a{k}");
        let numel: usize = s.iter().product();
        let elem = if numel == 1 {
            "0".to_string()
        } else if s == shape {
            "i".to_string()
        } else {
            index += &offset_code(k, s, shape);
            format!("o{k}")
        };
        let elem = match &input.columns {
            Some(c) => c.index(&elem),
            None => elem,
        };
        if vectorized {
            if numel == 1 {
                loads += &format!(
                    "            const {} {var} = {};\n",
                    compute(*dt),
                    load(*dt, &format!("in{k}[{elem}]"))
                );
            } else {
                let at = match &input.columns {
                    Some(c) => {
                        format!("({}) / {vec_elems}", c.index(&format!("j * {vec_elems}LL")))
                    }
                    None => "j".to_string(),
                };
                vec_loads += &format!(
                    "        union {{ uint4 u; {} e[{vec_elems}]; }} l{k};\n        l{k}.u = reinterpret_cast<const uint4*>(in{k})[{at}];\n",
                    storage(*dt)
                );
                loads += &format!(
                    "            const {} {var} = {};\n",
                    compute(*dt),
                    load(*dt, &format!("l{k}.e[k]"))
                );
            }
        } else {
            loads += &format!(
                "        const {} {var} = {};\n",
                compute(*dt),
                load(*dt, &format!("in{k}[{elem}]"))
            );
        }
    }
    sig.push(format!("{}* __restrict__ out", storage(out_dt)));
    let mut outputs = vec![spec.site.output(0)?];
    if let Some(m) = spec.mask {
        sig.push("unsigned char* __restrict__ out1".into());
        outputs.push(m);
    }
    if check.is_some() {
        sig.push("unsigned int* __restrict__ gopt_err".into());
    }
    let name_of = |o: &Operand| -> Result<String> {
        Ok(match o {
            Operand::Input(k) => format!("a{k}"),
            Operand::Step(i) => format!("t{i}"),
            Operand::Const(t) => literal(t)
                .filter(|_| t.len() == 1)
                .ok_or_else(|| plan_err(spec, "a non-scalar constant inside the body"))?,
        })
    };
    let indent = if vectorized {
        "            "
    } else {
        "        "
    };
    let mut code = loads;
    for (i, step) in spec.steps.iter().enumerate() {
        if let (false, Some(c)) = (step.trains_if.is_empty(), check) {
            let cond = step
                .trains_if
                .iter()
                .map(|(v, test)| {
                    let n = name_of(v)?;
                    Ok(match test {
                        Test::True => n,
                        Test::NonZero => format!("{n} != 0"),
                    })
                })
                .collect::<Result<Vec<String>>>()?;
            code += &format!(
                "{indent}if (i == 0 && {}) atomicMax(gopt_err, {}u);\n",
                cond.join(" && "),
                c.code
            );
        }
        // An absent optional input (Clip's min or max) is an empty name.
        let args: Vec<(String, DType)> = step
            .args
            .iter()
            .map(|a| match a {
                None => Ok((String::new(), DType::F32)),
                Some(a) => Ok((name_of(&a.at)?, a.dtype)),
            })
            .collect::<Result<_>>()?;
        let odt = step.dtype;
        let e =
            expr::expr(&step.expr, &args, odt).map_err(|what| unsupported(spec, step.op, what))?;
        code += &format!("{indent}const {} t{i} = {};\n", compute(odt), wrap(odt, &e));
    }
    if spec.mask.is_some() {
        code += &format!("{indent}out1[i] = 1;\n");
    }
    let result = name_of(&spec.result)?;
    let n_s = n.to_string();
    let params_s = sig.join(", ");
    let store_s = store(out_dt, &result);
    let source = if vectorized {
        let v = vec_elems.to_string();
        fill(
            VECTOR,
            &[
                ("name", name),
                ("params", &params_s),
                ("n", &n_s),
                ("vec", &v),
                ("vec_loads", &vec_loads),
                ("out_t", storage(out_dt)),
                ("body", &code),
                ("store", &store_s),
            ],
        )?
    } else {
        fill(
            SCALAR,
            &[
                ("name", name),
                ("params", &params_s),
                ("n", &n_s),
                ("index", &index),
                ("body", &code),
                ("store", &store_s),
            ],
        )?
    };
    let threads = if vectorized { n / vec_elems } else { n };
    Ok(Kernel {
        name: name.to_string(),
        node: spec.site.node.clone(),
        source,
        threads,
        vectorized,
        inputs: spec
            .inputs
            .iter()
            .map(|i| i.columns.map_or(i.value, |c| c.source.0))
            .collect(),
        grid: u32::try_from(threads.div_ceil(256).clamp(1, 65_535 * 32)).unwrap_or(u32::MAX),
        block: 256,
        outputs,
        shared_mem: 0,
        index_check: check.clone(),
    })
}

fn storage_size(dt: DType) -> usize {
    match dt {
        DType::Bool => 1,
        d => d.size(),
    }
}

/// Per-axis offset of a broadcast input from the output's linear index `i`.
fn offset_code(k: usize, s: &[usize], out: &[usize]) -> String {
    let r = out.len();
    let pad = r - s.len();
    let mut code = format!("        long long o{k} = 0;\n        {{ long long r = i;\n");
    let mut stride = 1usize;
    let mut strides = vec![0usize; r];
    for a in (0..r).rev() {
        let d = if a >= pad { s[a - pad] } else { 1 };
        strides[a] = if d == 1 { 0 } else { stride };
        stride *= d;
    }
    for a in (0..r).rev() {
        if strides[a] != 0 {
            code += &format!("          o{k} += (r % {}LL) * {}LL;\n", out[a], strides[a]);
        }
        if a > 0 {
            code += &format!("          r /= {}LL;\n", out[a]);
        }
    }
    code += "        }\n";
    code
}

/// The error for body op `op` of `spec`'s node, an op or mode no CUDA kernel computes.
fn unsupported(spec: &Spec, op: E, what: String) -> CodegenError {
    CodegenError::Unsupported {
        node: spec.site.node.clone(),
        op: op.name().into(),
        backend: super::BACKEND,
        what,
    }
}

fn plan_err(spec: &Spec, what: &str) -> CodegenError {
    CodegenError::Plan(format!(
        "node `{}` ({}): {what}",
        spec.site.node, spec.site.op
    ))
}

/// `e`, a computed value of `dt`, wrapped to `dt`'s width when that is narrower than
/// its compute type (8/16/32-bit integers), so later ops in a body see the value the
/// interpreter has.
fn wrap(dt: DType, e: &str) -> String {
    match dt {
        DType::I8 | DType::I16 | DType::I32 | DType::U8 | DType::U16 | DType::U32 => {
            format!("(long long)({})({e})", storage(dt))
        }
        DType::F32
        | DType::F64
        | DType::F16
        | DType::BF16
        | DType::I64
        | DType::U64
        | DType::Bool => e.to_string(),
    }
}
