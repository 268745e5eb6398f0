//! Row kernels: LayerNormalization, RMSNormalization and Softmax over the last axis, one
//! block per row, statistics in fp32 (two passes over the row for the variance, which
//! stays accurate where a one-pass sum of squares cancels).

use super::elementwise::storage;
use super::Kernel;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::ReduceOp;
use gopt_ir::{DType, Graph, Node, Op};

const TEMPLATE: &str = include_str!("rows.cu");
const REGISTERS: &str = include_str!("rows_reg.cu");
/// Most elements one thread keeps in registers (larger rows loop over global memory).
pub const MAX_PER_THREAD: usize = 64;
/// Threads per row.
pub const BLOCK: u32 = 256;

fn unsupported(node: &Node, what: &str) -> CodegenError {
    CodegenError::Unsupported {
        node: node.name.clone(),
        op: node.op.name().into(),
        backend: "CUDA",
        what: what.into(),
    }
}

fn ld(_dt: DType, v: &str) -> String {
    format!("gopt_ld({v})")
}

fn st(dt: DType, v: &str) -> String {
    match dt {
        DType::F16 => format!("__float2half_rn({v})"),
        DType::BF16 => format!("__float2bfloat16_rn({v})"),
        DType::F32 => v.to_string(),
        other => format!("({})({v})", storage(other)),
    }
}

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(
        op,
        Op::Reduce(ReduceOp::LayerNormalization | ReduceOp::RMSNormalization | ReduceOp::Softmax)
    )
}

/// Emits the row kernel for `node`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let (_, dt, shape, d) = crate::lower::index::row(g, node).map_err(|w| unsupported(node, &w))?;
    let rows: usize = shape[..shape.len() - 1].iter().product();
    if !matches!(dt, DType::F32 | DType::F16 | DType::BF16) {
        return Err(unsupported(node, &format!("{dt} data")));
    }
    let t = storage(dt);
    let mut params = vec![format!("const {t}* __restrict__ x")];
    let per_row = |k: usize| -> Result<Option<DType>> {
        crate::lower::index::per_column(g, node, k, d)
            .map(|p| p.map(|(_, dt)| dt))
            .map_err(|w| unsupported(node, &w))
    };
    if let Some(k) = emit_registers(node, name, &shape, dt, &per_row)? {
        return Ok(k);
    }
    let loop_ = |body: &str| {
        format!("    for (int c = threadIdx.x; c < {d}; c += blockDim.x) {{ {body} }}\n")
    };
    let xv = ld(dt, "xr[c]");
    let body = match node.op {
        Op::Reduce(ReduceOp::Softmax) => {
            format!(
                "    float m = __int_as_float(0xff800000);\n{}    m = gopt_block_max(m, red);\n    float s = 0.0f;\n{}    s = gopt_block_sum(s, red);\n    const float inv = 1.0f / s;\n{}",
                loop_(&format!("m = fmaxf(m, {xv});")),
                loop_(&format!("s += expf({xv} - m);")),
                loop_(&format!("yr[c] = {};", st(dt, &format!("expf({xv} - m) * inv"))))
            )
        }
        Op::Reduce(op @ (ReduceOp::LayerNormalization | ReduceOp::RMSNormalization)) => {
            let eps = node
                .attrs
                .float_or("epsilon", 1e-5)
                .map_err(|e| CodegenError::Plan(e.to_string()))?;
            let rms = op == ReduceOp::RMSNormalization;
            let scale = per_row(1)?;
            let bias = if rms { None } else { per_row(2)? };
            if let Some(s) = scale {
                params.push(format!("const {}* __restrict__ scale", storage(s)));
            }
            if let Some(b) = bias {
                params.push(format!("const {}* __restrict__ bias", storage(b)));
            }
            let sc = scale
                .map(|s| ld(s, "scale[c]"))
                .unwrap_or_else(|| "1.0f".into());
            let bi = bias
                .map(|b| format!(" + {}", ld(b, "bias[c]")))
                .unwrap_or_default();
            let mean = if rms {
                "    const float mean = 0.0f;\n".to_string()
            } else {
                format!(
                    "    float s = 0.0f;\n{}    const float mean = gopt_block_sum(s, red) / {d}.0f;\n",
                    loop_(&format!("s += {xv};"))
                )
            };
            format!(
                "{mean}    float q = 0.0f;\n{}    const float rstd = rsqrtf(gopt_block_sum(q, red) / {d}.0f + {eps:e}f);\n{}",
                loop_(&format!("const float v = {xv} - mean; q += v * v;")),
                loop_(&format!("yr[c] = {};", st(dt, &format!("({xv} - mean) * rstd * {sc}{bi}"))))
            )
        }
        _ => return Err(unsupported(node, "this op (not a row kernel)")),
    };
    params.push(format!("{t}* __restrict__ out"));
    let what = node.op.name();
    let block = BLOCK.to_string();
    let d_s = d.to_string();
    let params_s = params.join(", ");
    let source = fill(
        TEMPLATE,
        &[
            ("what", what),
            ("block", &block),
            ("d", &d_s),
            ("name", name),
            ("params", &params_s),
            ("t", t),
            ("body", &body),
        ],
    )?;
    let inputs = node.inputs.iter().flatten().map(|v| v.0).collect();
    Ok(Kernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        threads: rows * BLOCK as usize,
        vectorized: false,
        inputs,
        grid: u32::try_from(rows).map_err(|_| CodegenError::Plan("too many rows".into()))?,
        block: BLOCK,
        outputs: vec![node.outputs[0].0],
        shared_mem: 0,
        index_check: None,
    })
}

/// The register-cached variant: rows whose length is a multiple of the 16-byte vector
/// and fits `MAX_PER_THREAD` elements per thread.
fn emit_registers(
    node: &Node,
    name: &str,
    shape: &[usize],
    dt: DType,
    per_row: &dyn Fn(usize) -> Result<Option<DType>>,
) -> Result<Option<Kernel>> {
    let d = *shape.last().unwrap_or(&0);
    let rows: usize = shape[..shape.len() - 1].iter().product();
    let vec = 16 / dt.size();
    if d == 0 || d % vec != 0 {
        return Ok(None);
    }
    let lanes = d / vec;
    let block = lanes.next_power_of_two().clamp(32, BLOCK as usize);
    let per = lanes.div_ceil(block) * vec;
    if per > MAX_PER_THREAD {
        return Ok(None);
    }
    let t = storage(dt);
    let mut params = vec![format!("const {t}* __restrict__ x")];
    let for_all = |body: &str| {
        format!(
            "#pragma unroll\n    for (int k = 0; k < {per} / {vec}; ++k) {{ if (!ok[k]) continue; for (int e = 0; e < {vec}; ++e) {{ const float x_ = v[k * {vec} + e]; {body} }} }}\n"
        )
    };
    let mut pre = String::new();
    let (body, store) = match node.op {
        Op::Reduce(ReduceOp::Softmax) => (
            format!(
                "    float m = __int_as_float(0xff800000);\n    {}    m = gopt_block_max(m, red);\n    float s = 0.0f;\n    {}    const float inv = 1.0f / gopt_block_sum(s, red);\n",
                for_all("m = fmaxf(m, x_);"),
                for_all("s += expf(x_ - m);")
            ),
            st(dt, "expf(v[k * VEC + e] - m) * inv"),
        ),
        Op::Reduce(op @ (ReduceOp::LayerNormalization | ReduceOp::RMSNormalization)) => {
            let eps = node.attrs.float_or("epsilon", 1e-5).map_err(|e| CodegenError::Plan(e.to_string()))?;
            let rms = op == ReduceOp::RMSNormalization;
            let scale = per_row(1)?;
            let bias = if rms { None } else { per_row(2)? };
            if let Some(sd) = scale {
                params.push(format!("const {}* __restrict__ scale", storage(sd)));
            }
            if let Some(b) = bias {
                params.push(format!("const {}* __restrict__ bias", storage(b)));
            }
            // Per-column parameters in x's storage type load 16 bytes at a time too.
            let mut param = |p: &str, pd: DType| -> String {
                if pd == dt {
                    pre += &format!(
                        "        union {{ uint4 u; {t} e[{vec}]; }} {p}v;\n        {p}v.u = reinterpret_cast<const uint4*>({p})[c0 / {vec}];\n"
                    );
                    format!("gopt_ld({p}v.e[e])")
                } else {
                    format!("gopt_ld({p}[c])")
                }
            };
            let sc = scale.map(|sd| param("scale", sd)).unwrap_or_else(|| "1.0f".into());
            let bi = bias.map(|bd| format!(" + {}", param("bias", bd))).unwrap_or_default();
            let mean = if rms {
                "    const float mean = 0.0f;\n".to_string()
            } else {
                format!(
                    "    float s = 0.0f;\n    {}    const float mean = gopt_block_sum(s, red) / {d}.0f;\n",
                    for_all("s += x_;")
                )
            };
            (
                format!(
                    "{mean}    float q = 0.0f;\n    {}    const float rstd = rsqrtf(gopt_block_sum(q, red) / {d}.0f + {eps:e}f);\n",
                    for_all("const float u = x_ - mean; q += u * u;")
                ),
                st(dt, &format!("(v[k * VEC + e] - mean) * rstd * {sc}{bi}")),
            )
        }
        _ => return Ok(None),
    };
    params.push(format!("{t}* __restrict__ out"));
    let vec_s = vec.to_string();
    let store = store.replace("VEC", &vec_s);
    let source = fill(
        REGISTERS,
        &[
            ("what", node.op.name()),
            ("block", &block.to_string()),
            ("d", &d.to_string()),
            ("per", &per.to_string()),
            ("vec", &vec_s),
            ("name", name),
            ("params", &params.join(", ")),
            ("t", t),
            ("body", &body),
            ("pre", &pre),
            ("store", &store),
        ],
    )?;
    Ok(Some(Kernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        threads: rows * block,
        vectorized: true,
        inputs: node.inputs.iter().flatten().map(|v| v.0).collect(),
        grid: u32::try_from(rows).map_err(|_| CodegenError::Plan("too many rows".into()))?,
        block: block as u32,
        outputs: vec![node.outputs[0].0],
        shared_mem: 0,
        index_check: None,
    }))
}
