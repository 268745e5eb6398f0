//! Windowed pools: MaxPool and AveragePool over any number of spatial dims (NCHW), with
//! strides, dilations, explicit pads or `auto_pad`, `ceil_mode` and (average)
//! `count_include_pad`. One thread per output element walks its window with the
//! loop bounds baked in; the sum runs in f32 and rounds once. The semantics follow the
//! reference interpreter (`ir/src/ops/nn/pool.rs`): MaxPool keeps the first of equal
//! maxima and gives 0 for a window with no input element; the padded count of an
//! average counts taps before the end of the explicitly padded input (so `ceil_mode`
//! windows that run past it count less).

use super::elementwise::storage;
use super::support::{blocks, check_float, input, output, plan, store, typed, unsupported};
use super::Kernel;
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::NnOp;
use gopt_ir::{Graph, Node, Op};

const TEMPLATE: &str = include_str!("pool.cu");

/// The attributes the windowed pools may carry.
const ATTRS: &[&str] = &[
    "auto_pad",
    "ceil_mode",
    "count_include_pad",
    "dilations",
    "kernel_shape",
    "pads",
    "storage_order",
    "strides",
];

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(op, Op::Nn(NnOp::MaxPool | NnOp::AveragePool))
}

/// One spatial dim of the window, resolved.
pub(crate) struct Dim {
    pub(crate) input: usize,
    pub(crate) out: usize,
    pub(crate) kernel: usize,
    pub(crate) stride: usize,
    pub(crate) dilation: usize,
    pub(crate) pad_begin: usize,
    pub(crate) pad_end: usize,
}

/// The window of a MaxPool or AveragePool node per spatial dim (`sp` in, `out` out):
/// kernel, strides, dilations, pads or `auto_pad`, `ceil_mode`, as the interpreter
/// resolves them. The WGSL emitter uses it too, so both backends agree on every mode.
pub(crate) fn window(node: &Node, sp: &[usize], out: &[usize]) -> Result<Vec<Dim>> {
    let d = sp.len();
    let ints = |name: &str, default: usize, len: usize| -> Result<Vec<usize>> {
        match node.attrs.ints(name).map_err(plan)? {
            None => Ok(vec![default; len]),
            Some(v) if v.len() == len && v.iter().all(|&x| x >= 0) => {
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            Some(v) => Err(unsupported(node, &format!("{name} {v:?}"))),
        }
    };
    let kernel = match node.attrs.ints("kernel_shape").map_err(plan)? {
        Some(_) => ints("kernel_shape", 0, d)?,
        None => return Err(unsupported(node, "a missing kernel_shape")),
    };
    let strides = ints("strides", 1, d)?;
    let dil = ints("dilations", 1, d)?;
    let pads = ints("pads", 0, 2 * d)?;
    let ceil = node.attrs.int_or("ceil_mode", 0).map_err(plan)? != 0;
    let auto_pad = node.attrs.str_or("auto_pad", "NOTSET").map_err(plan)?;
    if kernel.contains(&0) || strides.contains(&0) || dil.contains(&0) {
        return Err(unsupported(node, "zero kernel dims, strides or dilations"));
    }
    (0..d)
        .map(|i| {
            let (input, k, s) = (sp[i], kernel[i], strides[i]);
            let span = (k - 1) * dil[i] + 1;
            let (o, pb, pe) = match auto_pad {
                "SAME_UPPER" | "SAME_LOWER" => {
                    let o = input.div_ceil(s);
                    let total = ((o.max(1) - 1) * s + span).saturating_sub(input);
                    let b = if auto_pad == "SAME_UPPER" {
                        total / 2
                    } else {
                        total - total / 2
                    };
                    (o, b, total - b)
                }
                "NOTSET" | "" | "VALID" => {
                    let (pb, pe) = if auto_pad == "VALID" {
                        (0, 0)
                    } else {
                        (pads[i], pads[d + i])
                    };
                    let avail = (input + pb + pe).checked_sub(span).ok_or_else(|| {
                        unsupported(node, "a window larger than the padded input")
                    })?;
                    let mut o = if ceil {
                        avail.div_ceil(s) + 1
                    } else {
                        avail / s + 1
                    };
                    if ceil && (o - 1) * s >= input + pb {
                        o -= 1;
                    }
                    (o, pb, pe)
                }
                other => return Err(unsupported(node, &format!("auto_pad `{other}`"))),
            };
            if o != out[i] {
                return Err(plan(format!(
                    "{}: output dim {i} is {}, expected {o}",
                    node.name, out[i]
                )));
            }
            Ok(Dim {
                input,
                out: o,
                kernel: k,
                stride: s,
                dilation: dil[i],
                pad_begin: pb,
                pad_end: pe,
            })
        })
        .collect()
}

/// Emits the kernel for a MaxPool or AveragePool node.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    if let Some(k) = node.attrs.0.keys().find(|k| !ATTRS.contains(&k.as_str())) {
        return Err(unsupported(node, &format!("attribute `{k}`")));
    }
    let is_max = node.op == Op::Nn(NnOp::MaxPool);
    if node.outputs.len() != 1 {
        return Err(unsupported(node, "MaxPool's Indices output"));
    }
    if !is_max && node.attrs.has("storage_order") {
        return Err(unsupported(node, "storage_order on AveragePool"));
    }
    let (dt, xs) = typed(g, node, input(node, 0)?)?;
    let (out_dt, ys) = typed(g, node, output(node, 0)?)?;
    check_float(node, dt, "pools")?;
    if xs.len() < 3 || ys.len() != xs.len() || out_dt != dt {
        return Err(unsupported(node, "inputs other than [N, C, spatial...]"));
    }
    let dims = window(node, &xs[2..], &ys[2..])?;
    let count_pad = node.attrs.int_or("count_include_pad", 0).map_err(plan)? != 0;
    let total: usize = ys.iter().product();
    let plane: usize = xs[2..].iter().product();
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
