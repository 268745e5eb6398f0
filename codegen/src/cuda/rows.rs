//! Row kernels: LayerNormalization and RMSNormalization over the trailing axes from
//! `axis` (LayerNorm's optional Mean and InvStdDev outputs too), Softmax, LogSoftmax
//! and LpNormalization along one axis, from the geometry [`crate::lower::rows`]
//! resolves. Statistics are in fp32 (two passes over the row for the variance, which
//! stays accurate where a one-pass sum of squares cancels), one rounding at the store.
//! Three kernels:
//! - register-cached (`rows_reg.cu`): contiguous rows that are a multiple of the
//!   16-byte vector and fit `MAX_PER_THREAD` elements per thread, one block per row,
//!   one read and one write of the row (the transformer path);
//! - one block per row (`rows.cu`): other contiguous rows, and rows whose elements are
//!   a few apart;
//! - one thread per row (`rows_lanes.cu`): rows whose elements are at least
//!   [`LANES_MIN`] apart (an axis other than the last), so adjacent threads read
//!   adjacent elements.

use super::elementwise::storage;
use super::Kernel;
use crate::lower::rows::{column_index, Column, Lp, Param, RowOp, Spec as Rows};
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("rows.cu");
const REGISTERS: &str = include_str!("rows_reg.cu");
const LANES: &str = include_str!("rows_lanes.cu");
/// Most elements one thread keeps in registers (larger rows loop over global memory).
pub const MAX_PER_THREAD: usize = 64;
/// Threads per row.
pub const BLOCK: u32 = 256;
/// The smallest distance between a row's elements that runs one thread per row.
pub const LANES_MIN: usize = 32;

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

/// Emits the row kernel of spec `r`.
pub fn emit(r: &Rows, name: &str) -> Result<Kernel> {
    if r.d == 0 || r.rows() == 0 {
        return Err(r.site.unsupported("empty rows"));
    }
    if let Some(k) = emit_registers(name, r)? {
        return Ok(k);
    }
    let (params, inputs, outputs) = signature(r);
    let what = r.site.op;
    let at = |c: &str| {
        if r.inner == 1 {
            format!("xr[{c}]")
        } else {
            format!("xr[{c} * {}LL]", r.inner)
        }
    };
    let lanes = r.inner >= LANES_MIN;
    let pass = if lanes {
        Pass {
            head: format!("for (long long c = 0; c < {}LL; ++c)", r.d),
            max: "",
            sum: "",
            lead: None,
        }
    } else {
        Pass {
            head: format!("for (int c = threadIdx.x; c < {}; c += blockDim.x)", r.d),
            max: "gopt_block_max",
            sum: "gopt_block_sum",
            lead: Some("threadIdx.x == 0"),
        }
    };
    let body = body(r, &pass, &at)?;
    let t = storage(r.dtype);
    let ot = storage(r.y.dtype);
    let rows = r.rows();
    let (source, grid, block) = if lanes {
        let source = fill(
            LANES,
            &[
                ("what", what),
                ("d", &r.d.to_string()),
                ("inner", &r.inner.to_string()),
                ("span", &(r.d * r.inner).to_string()),
                ("rows", &rows.to_string()),
                ("name", name),
                ("params", &params),
                ("t", t),
                ("ot", ot),
                ("body", &body),
            ],
        )?;
        (source, super::support::blocks(rows, 256), 256)
    } else {
        let base = if r.inner == 1 {
            format!("row * {}LL", r.d)
        } else {
            format!(
                "(row / {inner}LL) * {}LL + row % {inner}LL",
                r.d * r.inner,
                inner = r.inner
            )
        };
        let source = fill(
            TEMPLATE,
            &[
                ("what", what),
                ("block", &BLOCK.to_string()),
                ("d", &r.d.to_string()),
                ("name", name),
                ("params", &params),
                ("t", t),
                ("ot", ot),
                ("base", &base),
                ("body", &body),
            ],
        )?;
        let grid = u32::try_from(rows).map_err(|_| CodegenError::Plan("too many rows".into()))?;
        (source, grid, BLOCK)
    };
    Ok(Kernel {
        name: name.to_string(),
        node: r.site.node.clone(),
        source,
        threads: grid as usize * block as usize,
        vectorized: false,
        inputs,
        grid,
        block,
        outputs,
        shared_mem: 0,
        index_check: None,
    })
}

/// The kernel's parameter list, and the values its inputs and outputs bind: x, the
/// scale and bias, y, then LayerNorm's mean and inverse standard deviation.
fn signature(r: &Rows) -> (String, Vec<u32>, Vec<u32>) {
    let mut params = vec![format!("const {}* __restrict__ x", storage(r.dtype))];
    let mut inputs = vec![r.x.0];
    for (p, var) in [(&r.scale, "scale"), (&r.bias, "bias")] {
        if let Some(p) = p {
            params.push(format!("const {}* __restrict__ {var}", storage(p.dtype)));
            inputs.push(p.value.0);
        }
    }
    params.push(format!("{}* __restrict__ out", storage(r.y.dtype)));
    let mut outputs = vec![r.y.value.0];
    if let Some(o) = &r.also {
        params.push(format!("{}* __restrict__ out2", storage(o.dtype)));
        outputs.push(o.value.0);
    }
    for (o, var) in [(&r.mean, "mean_out"), (&r.inv_std_dev, "rstd_out")] {
        if let Some(o) = o {
            params.push(format!("{}* __restrict__ {var}", storage(o.dtype)));
            outputs.push(o.value.0);
        }
    }
    (params.join(", "), inputs, outputs)
}

/// How a kernel walks a row: the loop over its columns `c`, the reductions across the
/// threads sharing it (none when one thread has the row) and the condition of the
/// thread that writes the row's statistics.
struct Pass {
    head: String,
    max: &'static str,
    sum: &'static str,
    lead: Option<&'static str>,
}

impl Pass {
    fn each(&self, body: &str) -> String {
        format!("    {} {{ {body} }}\n", self.head)
    }

    fn reduce(&self, f: &str, v: &str) -> String {
        if f.is_empty() {
            v.to_string()
        } else {
            format!("{f}({v}, red)")
        }
    }
}

/// A per-column parameter's element for column `c`, as f32.
fn param_at(p: &Param, var: &str) -> String {
    let at = column_index(&p.column, "c", "");
    ld(p.dtype, &format!("{var}[{at}]"))
}

/// The statistics outputs' stores (LayerNorm's mean and `rstd`), by the lead thread.
fn stats(r: &Rows, lead: Option<&str>) -> String {
    let mut s = String::new();
    if let Some(o) = r.mean {
        s += &format!(" mean_out[row] = {};", st(o.dtype, "mean"));
    }
    if let Some(o) = r.inv_std_dev {
        s += &format!(" rstd_out[row] = {};", st(o.dtype, "rstd"));
    }
    match (s.is_empty(), lead) {
        (true, _) => s,
        (false, Some(cond)) => format!("    if ({cond}) {{{s} }}\n"),
        (false, None) => format!("   {s}\n"),
    }
}

/// The body of the block-per-row and thread-per-row kernels: `at(c)` reads column
/// `c` of the row (`yr` is the output row, with the same layout).
fn body(r: &Rows, pass: &Pass, at: &dyn Fn(&str) -> String) -> Result<String> {
    let (dt, d) = (r.dtype, r.d);
    let yt = r.y.dtype;
    let xv = ld(dt, &at("c"));
    let ya = at("c").replacen("xr", "yr", 1);
    // The second store (r.also) at the same element of `out2`.
    let set = |v: &str| match &r.also {
        Some(o) => format!(
            "{{ const float y_ = {v}; {ya} = {}; {} = {}; }}",
            st(yt, "y_"),
            ya.replacen("yr", "(out2 + (yr - out))", 1),
            st(o.dtype, "y_")
        ),
        None => format!("{ya} = {};", st(yt, v)),
    };
    let (mx, sm) = (pass.max, pass.sum);
    Ok(match r.op {
        RowOp::Softmax => format!(
            "    float m = __int_as_float(0xff800000);\n{}    m = {};\n    float s = 0.0f;\n{}    s = {};\n    const float inv = 1.0f / s;\n{}",
            pass.each(&format!("m = fmaxf(m, {xv});")),
            pass.reduce(mx, "m"),
            pass.each(&format!("s += expf({xv} - m);")),
            pass.reduce(sm, "s"),
            pass.each(&set(&format!("expf({xv} - m) * inv")))
        ),
        RowOp::LogSoftmax => format!(
            "    float m = __int_as_float(0xff800000);\n{}    m = {};\n    float s = 0.0f;\n{}    const float shift = m + logf({});\n{}",
            pass.each(&format!("m = fmaxf(m, {xv});")),
            pass.reduce(mx, "m"),
            pass.each(&format!("s += expf({xv} - m);")),
            pass.reduce(sm, "s"),
            pass.each(&set(&format!("{xv} - shift")))
        ),
        RowOp::LpNorm(lp) => {
            let (map, root) = match lp {
                Lp::L1 => ("fabsf(v)", ""),
                Lp::L2 => ("v * v", "sqrtf"),
            };
            format!(
                "    float q = 0.0f;\n{}    const float norm = {root}({});\n{}",
                pass.each(&format!("const float v = {xv}; q += {map};")),
                pass.reduce(sm, "q"),
                pass.each(&set(&format!("norm == 0.0f ? 0.0f : {xv} / norm")))
            )
        }
        RowOp::LayerNorm | RowOp::RmsNorm => {
            let sc = r
                .scale
                .as_ref()
                .map(|p| param_at(p, "scale"))
                .unwrap_or_else(|| "1.0f".into());
            let bi = r
                .bias
                .as_ref()
                .map(|p| format!(" + {}", param_at(p, "bias")))
                .unwrap_or_default();
            let mean = if r.op == RowOp::RmsNorm {
                "    const float mean = 0.0f;\n".to_string()
            } else {
                format!(
                    "    float s = 0.0f;\n{}    const float mean = {} / {d}.0f;\n",
                    pass.each(&format!("s += {xv};")),
                    pass.reduce(sm, "s")
                )
            };
            format!(
                "{mean}    float q = 0.0f;\n{}    const float rstd = rsqrtf({} / {d}.0f + {:e}f);\n{}{}",
                pass.each(&format!("const float v = {xv} - mean; q += v * v;")),
                pass.reduce(sm, "q"),
                r.epsilon,
                pass.each(&set(&format!("({xv} - mean) * rstd * {sc}{bi}"))),
                stats(r, pass.lead)
            )
        }
    })
}

/// The type one store of `bytes` bytes moves (16, 8 or 4).
fn vector(bytes: usize) -> Option<&'static str> {
    [(16, "uint4"), (8, "uint2"), (4, "unsigned int")]
        .into_iter()
        .find(|&(b, _)| b == bytes)
        .map(|(_, t)| t)
}

/// The register-cached variant: contiguous rows whose length is a multiple of the
/// 16-byte vector and fits `MAX_PER_THREAD` elements per thread, the output in a float
/// type (the input's, or a Cast's the kernel stores for: as many elements per store).
fn emit_registers(name: &str, r: &Rows) -> Result<Option<Kernel>> {
    let (d, dt) = (r.d, r.dtype);
    let rows = r.rows();
    let vec = 16 / dt.size();
    let yt = r.y.dtype;
    let Some(ovec) = vector(vec * yt.size()) else {
        return Ok(None);
    };
    if !r.contiguous() || !matches!(yt, DType::F32 | DType::F16 | DType::BF16) {
        return Ok(None);
    }
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
    let (params, inputs, outputs) = signature(r);
    let for_all = |body: &str| {
        format!(
            "#pragma unroll\n    for (int k = 0; k < {per} / {vec}; ++k) {{ if (!ok[k]) continue; for (int e = 0; e < {vec}; ++e) {{ const float x_ = v[k * {vec} + e]; {body} }} }}\n"
        )
    };
    let mut pre = String::new();
    let ex = |e: &str| e.to_string();
    let (body, expr) = match r.op {
        RowOp::Softmax => (
            format!(
                "    float m = __int_as_float(0xff800000);\n    {}    m = gopt_block_max(m, red);\n    float s = 0.0f;\n    {}    const float inv = 1.0f / gopt_block_sum(s, red);\n",
                for_all("m = fmaxf(m, x_);"),
                for_all("s += expf(x_ - m);")
            ),
            ex("expf(v[k * VEC + e] - m) * inv"),
        ),
        RowOp::LogSoftmax => (
            format!(
                "    float m = __int_as_float(0xff800000);\n    {}    m = gopt_block_max(m, red);\n    float s = 0.0f;\n    {}    const float shift = m + logf(gopt_block_sum(s, red));\n",
                for_all("m = fmaxf(m, x_);"),
                for_all("s += expf(x_ - m);")
            ),
            ex("v[k * VEC + e] - shift"),
        ),
        RowOp::LpNorm(lp) => {
            let (map, root) = match lp {
                Lp::L1 => ("fabsf(x_)", ""),
                Lp::L2 => ("x_ * x_", "sqrtf"),
            };
            (
                format!(
                    "    float q = 0.0f;\n    {}    const float norm = {root}(gopt_block_sum(q, red));\n",
                    for_all(&format!("q += {map};"))
                ),
                ex("norm == 0.0f ? 0.0f : v[k * VEC + e] / norm"),
            )
        }
        RowOp::LayerNorm | RowOp::RmsNorm => {
            // Per-column parameters in x's storage type load 16 bytes at a time too.
            let mut param = |p: &Param, var: &str| -> String {
                match &p.column {
                    Column::Each if p.dtype == dt => {
                        pre += &format!(
                            "        union {{ uint4 u; {t} e[{vec}]; }} {var}v;\n        {var}v.u = reinterpret_cast<const uint4*>({var})[c0 / {vec}];\n"
                        );
                        format!("gopt_ld({var}v.e[e])")
                    }
                    Column::Each | Column::One | Column::Terms(_) => param_at(p, var),
                }
            };
            let sc = r
                .scale
                .as_ref()
                .map(|p| param(p, "scale"))
                .unwrap_or_else(|| "1.0f".into());
            let bi = r
                .bias
                .as_ref()
                .map(|p| format!(" + {}", param(p, "bias")))
                .unwrap_or_default();
            let mean = if r.op == RowOp::RmsNorm {
                "    const float mean = 0.0f;\n".to_string()
            } else {
                format!(
                    "    float s = 0.0f;\n    {}    const float mean = gopt_block_sum(s, red) / {d}.0f;\n",
                    for_all("s += x_;")
                )
            };
            (
                format!(
                    "{mean}    float q = 0.0f;\n    {}    const float rstd = rsqrtf(gopt_block_sum(q, red) / {d}.0f + {:e}f);\n{}",
                    for_all("const float u = x_ - mean; q += u * u;"),
                    r.epsilon,
                    stats(r, Some("threadIdx.x == 0"))
                ),
                ex(&format!("(v[k * VEC + e] - mean) * rstd * {sc}{bi}")),
            )
        }
    };
    let vec_s = vec.to_string();
    let store = st(yt, &expr).replace("VEC", &vec_s);
    // r.also: the same values stored again in the Cast's type.
    let store2 = match &r.also {
        Some(o) => {
            let Some(ov) = vector(vec * o.dtype.size()) else {
                return Ok(None);
            };
            format!(
                "        {{\n            union {{ {ov} u; {ot} e[{vec}]; }} s2;\n#pragma unroll\n            for (int e = 0; e < {vec}; ++e) {{ const int c = c0 + e; s2.e[e] = {}; }}\n            reinterpret_cast<{ov}*>(out2 + row * {d}LL)[c0 / {vec}] = s2.u;\n        }}\n",
                st(o.dtype, &expr).replace("VEC", &vec_s),
                ot = storage(o.dtype)
            )
        }
        None => String::new(),
    };
    let source = fill(
        REGISTERS,
        &[
            ("what", r.site.op),
            ("block", &block.to_string()),
            ("d", &d.to_string()),
            ("per", &per.to_string()),
            ("vec", &vec_s),
            ("name", name),
            ("params", &params),
            ("t", t),
            ("ot", storage(yt)),
            ("ovec", ovec),
            ("body", &body),
            ("pre", &pre),
            ("store", &store),
            ("store2", &store2),
        ],
    )?;
    Ok(Some(Kernel {
        name: name.to_string(),
        node: r.site.node.clone(),
        source,
        threads: rows * block,
        vectorized: true,
        inputs,
        grid: u32::try_from(rows).map_err(|_| CodegenError::Plan("too many rows".into()))?,
        block: block as u32,
        outputs,
        shared_mem: 0,
        index_check: None,
    }))
}
