//! Windowed pools in WGSL: MaxPool and AveragePool over any number of spatial dims
//! (`[N, C, spatial...]`), with strides, dilations, explicit pads or `auto_pad`,
//! `ceil_mode` and (average) `count_include_pad`, f32 or f16 data. One invocation per
//! output element (grid-stride) walks its window with the bounds baked in; sums run in
//! f32 and round once. The semantics are the reference interpreter's
//! (`ir/src/ops/nn/pool.rs`) and the CUDA emitter's: MaxPool keeps the first of equal
//! maxima and gives 0 for a window without input elements; the padded count of an
//! average counts the taps before the end of the explicitly padded input (so
//! `ceil_mode` windows that run past it count less). MaxPool's Indices output is
//! refused.

use super::unsupported;
use super::WgslKernel;
use crate::lower::pool::PoolSpec;
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, Graph, Node};

const TEMPLATE: &str = include_str!("pool.wgsl");

/// Emits the shader for a MaxPool or AveragePool node.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let PoolSpec {
        is_max,
        dtype: dt,
        xs,
        ys,
        dims,
        count_pad,
        total,
        plane,
    } = crate::lower::pool::spec(g, node).map_err(|e| e.for_backend(super::BACKEND))?;
    let t = match dt {
        DType::F32 => "f32",
        DType::F16 => "f16",
        other => return Err(unsupported(node, format!("{other} pools"))),
    };
    if total >= 1 << 31 || xs.iter().product::<usize>() >= 1 << 31 {
        return Err(unsupported(node, "tensors of 2^31 elements or more"));
    }
    // Output coordinates o{i} (innermost last), then the plane's first element.
    let mut decode = String::from("        var r: u32 = i;\n");
    for i in (0..dims.len()).rev() {
        decode += &format!(
            "        let o{i} = i32(r % {o}u); r = r / {o}u;\n",
            o = ys[2 + i]
        );
    }
    decode += &format!("        let base = r * {plane}u;\n");
    // The window walk: one loop per dim, skipping taps outside the input.
    let mut open = String::new();
    let mut close = String::new();
    let mut padded = String::new();
    let mut offset = String::from("0");
    for (i, d) in dims.iter().enumerate() {
        let (input, k, s, dl, pb, pe) = (
            d.input,
            d.kernel,
            d.stride,
            d.dilation,
            d.pad_begin,
            d.pad_end,
        );
        let ind = " ".repeat(8 + 4 * i);
        open += &format!(
            "{ind}for (var t{i}: i32 = 0; t{i} < {k}; t{i} = t{i} + 1) {{\n{ind}    let c{i} = o{i} * {s} - {pb} + t{i} * {dl};\n{ind}    if (c{i} < 0 || c{i} >= {input}) {{ continue; }}\n"
        );
        close = format!("{ind}}}\n") + &close;
        offset = format!("({offset}) * {input} + c{i}");
        padded += &format!(
            "        {{ var q: i32 = 0; for (var t: i32 = 0; t < {k}; t = t + 1) {{ if (o{i} * {s} - {pb} + t * {dl} < {end}) {{ q = q + 1; }} }} padded = padded * q; }}\n",
            end = input + pe
        );
    }
    let inner = " ".repeat(8 + 4 * dims.len());
    let load = format!("f32(x[base + u32({offset})])");
    let (init, step, result) = if is_max {
        (
            "        var best: f32 = 0.0;\n        var any: bool = false;\n".to_string(),
            format!("{inner}let v = {load};\n{inner}if (!any || v > best) {{ best = v; any = true; }}\n"),
            "best",
        )
    } else if count_pad {
        (
            format!("        var sum: f32 = 0.0;\n        var padded: i32 = 1;\n{padded}"),
            format!("{inner}sum = sum + {load};\n"),
            "sum / f32(padded)",
        )
    } else {
        (
            "        var sum: f32 = 0.0;\n        var count: i32 = 0;\n".to_string(),
            format!("{inner}sum = sum + {load};\n{inner}count = count + 1;\n"),
            "sum / f32(count)",
        )
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", node.op.name()),
            ("t", t),
            ("total", &total.to_string()),
            ("decode", &decode),
            ("body", &format!("{init}{open}{step}{close}")),
            ("store", &format!("{t}({result})")),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [total.div_ceil(256).clamp(1, 65535) as u32, 1, 1],
        inputs: vec![crate::lower::support::input(node, 0)?.0],
        outputs: vec![node.outputs[0].0],
        index_check: None,
    })
}
