//! Windowed pools: MaxPool and AveragePool over any number of spatial dims (NCHW), with
//! strides, dilations, explicit pads or `auto_pad`, `ceil_mode` and (average)
//! `count_include_pad`. One thread per output element walks its window with the
//! loop bounds baked in; the sum runs in f32 and rounds once. The semantics follow the
//! reference interpreter (`ir/src/ops/nn/pool.rs`): MaxPool keeps the first of equal
//! maxima and gives 0 for a window with no input element; the padded count of an
//! average counts taps before the end of the explicitly padded input (so `ceil_mode`
//! windows that run past it count less).

use super::elementwise::storage;
use super::support::{blocks, input, output, store};
use super::Kernel;
use crate::lower::pool::{spec, PoolSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::{Graph, Node};

const TEMPLATE: &str = include_str!("pool.cu");

/// Emits the kernel for a MaxPool or AveragePool node.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let PoolSpec {
        is_max,
        dtype: dt,
        xs: _,
        ys: _,
        dims,
        count_pad,
        total,
        plane,
    } = spec(g, node)?;
    // Output coordinates o{i} (innermost last), then the plane index.
    let mut decode = String::from("long long r_ = i;\n");
    for (i, d) in dims.iter().enumerate().rev() {
        decode += &format!(
            "        const long long o{i} = r_ % {o}LL; r_ /= {o}LL;\n",
            o = d.out
        );
    }
    decode += &format!(
        "        const {t}* __restrict__ xp = x + r_ * {plane}LL;\n",
        t = storage(dt)
    );
    // The window walk: one loop per dim, skipping taps outside the input.
    let mut open = String::new();
    let mut close = String::new();
    let mut padded = String::new();
    let mut offset = String::from("0LL");
    for (i, d) in dims.iter().enumerate() {
        let ind = " ".repeat(8 + 4 * i);
        open += &format!(
            "{ind}for (int t{i} = 0; t{i} < {k}; ++t{i}) {{\n{ind}    const long long c{i} = o{i} * {s}LL - {pb}LL + t{i} * {dl}LL;\n{ind}    if (c{i} < 0 || c{i} >= {inp}LL) continue;\n",
            k = d.kernel, s = d.stride, pb = d.pad_begin, dl = d.dilation, inp = d.input
        );
        close = format!("{ind}}}\n") + &close;
        offset = format!("({offset}) * {}LL + c{i}", d.input);
        padded += &format!(
            "        {{ int q_ = 0; for (int t = 0; t < {k}; ++t) q_ += (o{i} * {s}LL - {pb}LL + t * {dl}LL < {end}LL); padded *= q_; }}\n",
            k = d.kernel, s = d.stride, pb = d.pad_begin, dl = d.dilation, end = d.input + d.pad_end
        );
    }
    let inner = " ".repeat(8 + 4 * dims.len());
    let (init, step, result) = if is_max {
        (
            "        float best = 0.0f; bool any = false;\n".to_string(),
            format!("{inner}const float v = gopt_ld(xp[{offset}]);\n{inner}if (!any || v > best) {{ best = v; any = true; }}\n"),
            "best".to_string(),
        )
    } else {
        if count_pad {
            (
                format!("        float sum = 0.0f; long long padded = 1;\n{padded}"),
                format!("{inner}sum += gopt_ld(xp[{offset}]);\n"),
                "sum / (float)padded".to_string(),
            )
        } else {
            (
                "        float sum = 0.0f; int count = 0;\n".to_string(),
                format!("{inner}sum += gopt_ld(xp[{offset}]); ++count;\n"),
                "sum / (float)count".to_string(),
            )
        }
    };
    let body = format!("{init}{open}{step}{close}");
    let block = 256u32;
    let src = fill(
        TEMPLATE,
        &[
            ("what", node.op.name()),
            ("name", name),
            (
                "params",
                &format!(
                    "const {t}* __restrict__ x, {t}* __restrict__ out",
                    t = storage(dt)
                ),
            ),
            ("total", &total.to_string()),
            ("decode", &decode),
            ("body", &body),
            ("store", &store(dt, &result)),
        ],
    )?;
    Ok(Kernel {
        name: name.to_string(),
        node: node.name.clone(),
        source: src,
        threads: total,
        vectorized: false,
        inputs: vec![input(node, 0)?.0],
        outputs: vec![output(node, 0)?.0],
        shared_mem: 0,
        grid: blocks(total, block),
        block,
        index_check: None,
    })
}
