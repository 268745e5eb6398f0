//! Windowed pools: MaxPool (with its Indices output), AveragePool, LpPool and
//! GlobalLpPool over any number of spatial dims (NCHW), with strides, dilations,
//! explicit pads or `auto_pad`, `ceil_mode` and (average) `count_include_pad`. One
//! thread per output element walks its window with the loop bounds baked in; sums run
//! in f32 and round once. The semantics follow the reference interpreter
//! (`ir/src/ops/nn/pool.rs`): MaxPool keeps the first of equal maxima and gives 0 (and
//! index -1) for a window with no input element, and compares i8/u8 data as stored;
//! the padded count of an average counts taps before the end of the explicitly padded
//! input (so `ceil_mode` windows that run past it count less); an Lp pool sums
//! `|x|^p` (p multiplications) and takes the p-th root. The WGSL writer
//! (`wgsl/pool.rs`) mirrors this line by line.

use super::elementwise::storage;
use super::support::{blocks, store};
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::pool::{Mode, PoolSpec};
use crate::template::fill;
use crate::Result;

const TEMPLATE: &str = include_str!("pool.cu");

/// Statements multiplying `padded` by the taps of each dim before the end of the
/// explicitly padded input (AveragePool's `count_include_pad` divisor).
fn padded_count(sp: &PoolSpec) -> String {
    sp.dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            format!(
                "        {{ int q_ = 0; for (int t = 0; t < {k}; ++t) q_ += (o{i} * {s}LL - {pb}LL + t * {dl}LL < {end}LL); padded *= q_; }}\n",
                k = d.kernel, s = d.stride, pb = d.pad_begin, dl = d.dilation, end = d.input + d.pad_end
            )
        })
        .collect()
}

/// The window's body: (initialization, statements per tap, the stored value, the
/// statements after the walk that store the Indices output).
fn body(sp: &PoolSpec, offset: &str) -> (String, String, String, String) {
    let inner = " ".repeat(8 + 4 * sp.dims.len());
    let dt = sp.dtype;
    match sp.mode {
        Mode::Max { indices } => {
            let coords: Vec<String> = (0..sp.dims.len()).map(|i| format!("c{i}")).collect();
            let (arg_init, arg_set, arg_store) = match indices {
                None => (String::new(), String::new(), String::new()),
                Some(ix) => {
                    let at = match ix.col_major {
                        true => sp.col_major_index(&coords),
                        false => offset.to_string(),
                    };
                    (
                        "        long long arg = -1;\n".to_string(),
                        format!(" arg = r_ * {}LL + ({at});", sp.plane),
                        "        idx[i] = arg;\n".to_string(),
                    )
                }
            };
            let (init, step) = if sp.as_stored() {
                (
                    format!("        {t} best = 0; bool any = false;\n", t = storage(dt)),
                    format!("{inner}const {t} v = xp[{offset}];\n{inner}if (!any || v > best) {{ best = v; any = true;{arg_set} }}\n", t = storage(dt)),
                )
            } else {
                (
                    "        float best = 0.0f; bool any = false;\n".to_string(),
                    format!("{inner}const float v = gopt_ld(xp[{offset}]);\n{inner}if (!any || v > best) {{ best = v; any = true;{arg_set} }}\n"),
                )
            };
            (format!("{init}{arg_init}"), step, "best".into(), arg_store)
        }
        Mode::Average { count_pad: true } => (
            format!(
                "        float sum = 0.0f; long long padded = 1;\n{}",
                padded_count(sp)
            ),
            format!("{inner}sum += gopt_ld(xp[{offset}]);\n"),
            "sum / (float)padded".into(),
            String::new(),
        ),
        Mode::Average { count_pad: false } => (
            "        float sum = 0.0f; int count = 0;\n".to_string(),
            format!("{inner}sum += gopt_ld(xp[{offset}]); ++count;\n"),
            "sum / (float)count".into(),
            String::new(),
        ),
        Mode::Lp { p } => (
            "        float sum = 0.0f;\n".to_string(),
            format!("{inner}const float a = fabsf(gopt_ld(xp[{offset}]));\n{inner}float q = a;\n{inner}for (int e = 1; e < {p}; ++e) q *= a;\n{inner}sum += q;\n"),
            if p == 1 {
                "sum".into()
            } else if p == 2 {
                "sqrtf(sum)".into()
            } else {
                format!("(sum == 0.0f ? 0.0f : powf(sum, 1.0f / {p}.0f))")
            },
            String::new(),
        ),
    }
}

/// Emits the kernel for a MaxPool, AveragePool, LpPool or GlobalLpPool node.
pub fn emit(sp: &PoolSpec, name: &str) -> Result<Kernel> {
    let dt = sp.dtype;
    // Output coordinates o{i} (innermost last), then the plane index.
    let mut decode = String::from("long long r_ = i;\n");
    for (i, d) in sp.dims.iter().enumerate().rev() {
        decode += &format!(
            "        const long long o{i} = r_ % {o}LL; r_ /= {o}LL;\n",
            o = d.out
        );
    }
    decode += &format!(
        "        const {t}* __restrict__ xp = x + r_ * {plane}LL;\n",
        t = storage(dt),
        plane = sp.plane
    );
    let (open, close, offset) = sp.walk(&Cuda::PLAIN);
    let (init, step, result, after) = body(sp, &offset);
    let mut params = format!(
        "const {t}* __restrict__ x, {t}* __restrict__ out",
        t = storage(dt)
    );
    let mut outputs = vec![sp.y.0];
    if let Mode::Max {
        indices: Some(ix), ..
    } = sp.mode
    {
        params += ", long long* __restrict__ idx";
        outputs.push(ix.out.0);
    }
    let stored = if sp.as_stored() {
        result
    } else {
        store(dt, &result)
    };
    let block = 256u32;
    let src = fill(
        TEMPLATE,
        &[
            ("what", sp.site.op),
            ("name", name),
            ("params", &params),
            ("total", &sp.total.to_string()),
            ("decode", &decode),
            ("body", &format!("{init}{open}{step}{close}{after}")),
            ("store", &stored),
        ],
    )?;
    Ok(Kernel {
        name: name.to_string(),
        node: sp.site.node.clone(),
        source: src,
        threads: sp.total,
        vectorized: false,
        inputs: vec![sp.x.0],
        outputs,
        shared_mem: 0,
        grid: blocks(sp.total, block),
        block,
        index_check: None,
    })
}
