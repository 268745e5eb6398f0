//! Windowed pools in WGSL: MaxPool (with its Indices output), AveragePool, LpPool and
//! GlobalLpPool over any number of spatial dims (`[N, C, spatial...]`), with strides,
//! dilations, explicit pads or `auto_pad`, `ceil_mode` and (average)
//! `count_include_pad`; f32 or f16 data (MaxPool also i8 and u8, compared as stored
//! in their 32-bit words). One invocation per output element (grid-stride) walks its
//! window with the bounds baked in; sums run in f32 and round once. The semantics are
//! the reference interpreter's (`ir/src/ops/nn/pool.rs`) and the CUDA emitter's, line
//! by line: MaxPool keeps the first of equal maxima and gives 0 (index -1) for a
//! window without input elements; the padded count of an average counts the taps
//! before the end of the explicitly padded input (so `ceil_mode` windows that run
//! past it count less); an Lp pool sums `|x|^p` (p multiplications) and takes the
//! p-th root. The Indices are i64, written as two 32-bit words.

use super::syntax::Wgsl;
use super::WgslKernel;
use crate::lower::pool::{Mode, PoolSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("pool.wgsl");

/// Statements multiplying `padded` by the taps of each dim before the end of the
/// explicitly padded input (AveragePool's `count_include_pad` divisor).
fn padded_count(sp: &PoolSpec) -> String {
    sp.dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let (k, s, dl, pb) = (d.kernel, d.stride, d.dilation, d.pad_begin);
            format!(
                "        {{ var q: i32 = 0; for (var t: i32 = 0; t < {k}; t = t + 1) {{ if (o{i} * {s} - {pb} + t * {dl} < {end}) {{ q = q + 1; }} }} padded = padded * q; }}\n",
                end = d.input + d.pad_end
            )
        })
        .collect()
}

/// The window's body: (initialization, statements per tap, the stored value, the
/// statements after the walk that store the Indices output).
fn body(sp: &PoolSpec, t: &str, offset: &str) -> (String, String, String, String) {
    let inner = " ".repeat(8 + 4 * sp.dims.len());
    let load = format!("f32(x[base + u32({offset})])");
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
                        "        var arg: i32 = -1;\n".to_string(),
                        format!(" arg = i32(base) + ({at});"),
                        "        idx[i] = vec2<u32>(bitcast<u32>(arg), select(0u, 0xffffffffu, arg < 0));\n".to_string(),
                    )
                }
            };
            let (init, step) = if sp.as_stored() {
                (
                    format!("        var best: {t} = {t}();\n        var any: bool = false;\n"),
                    format!("{inner}let v = x[base + u32({offset})];\n{inner}if (!any || v > best) {{ best = v; any = true;{arg_set} }}\n"),
                )
            } else {
                (
                    "        var best: f32 = 0.0;\n        var any: bool = false;\n".to_string(),
                    format!("{inner}let v = {load};\n{inner}if (!any || v > best) {{ best = v; any = true;{arg_set} }}\n"),
                )
            };
            (format!("{init}{arg_init}"), step, "best".into(), arg_store)
        }
        Mode::Average { count_pad: true } => (
            format!(
                "        var sum: f32 = 0.0;\n        var padded: i32 = 1;\n{}",
                padded_count(sp)
            ),
            format!("{inner}sum = sum + {load};\n"),
            "sum / f32(padded)".into(),
            String::new(),
        ),
        Mode::Average { count_pad: false } => (
            "        var sum: f32 = 0.0;\n        var count: i32 = 0;\n".to_string(),
            format!("{inner}sum = sum + {load};\n{inner}count = count + 1;\n"),
            "sum / f32(count)".into(),
            String::new(),
        ),
        Mode::Lp { p } => (
            "        var sum: f32 = 0.0;\n".to_string(),
            format!("{inner}let a = abs({load});\n{inner}var q: f32 = a;\n{inner}for (var e: i32 = 1; e < {p}; e = e + 1) {{ q = q * a; }}\n{inner}sum = sum + q;\n"),
            if p == 1 {
                "sum".into()
            } else if p == 2 {
                "sqrt(sum)".into()
            } else {
                format!("select(pow(sum, 1.0 / {p}.0), 0.0, sum == 0.0)")
            },
            String::new(),
        ),
    }
}

/// Emits the shader for a MaxPool, AveragePool, LpPool or GlobalLpPool node.
pub fn emit(sp: &PoolSpec, name: &str) -> Result<WgslKernel> {
    let dt = sp.dtype;
    let t = match dt {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::I8 => "i32",
        DType::U8 => "u32",
        other => return Err(sp.site.unsupported(&format!("{other} pools"))),
    };
    if sp.total >= 1 << 31 || sp.xs.iter().product::<usize>() >= 1 << 31 {
        return Err(sp.site.unsupported("tensors of 2^31 elements or more"));
    }
    // Output coordinates o{i} (innermost last), then the plane's first element.
    let mut decode = String::from("        var r: u32 = i;\n");
    for i in (0..sp.dims.len()).rev() {
        decode += &format!(
            "        let o{i} = i32(r % {o}u); r = r / {o}u;\n",
            o = sp.ys[2 + i]
        );
    }
    decode += &format!("        let base = r * {}u;\n", sp.plane);
    let (open, close, offset) = sp.walk(&Wgsl::PLAIN);
    let (init, step, result, after) = body(sp, t, &offset);
    let mut outputs = vec![sp.y.0];
    let mut idx_binding = String::new();
    if let Mode::Max {
        indices: Some(ix), ..
    } = sp.mode
    {
        idx_binding =
            "@group(0) @binding(2) var<storage, read_write> idx: array<vec2<u32>>;\n".into();
        outputs.push(ix.out.0);
    }
    let stored = if sp.as_stored() {
        result
    } else {
        format!("{t}({result})")
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", sp.site.op),
            ("t", t),
            ("idx", &idx_binding),
            ("total", &sp.total.to_string()),
            ("decode", &decode),
            ("body", &format!("{init}{open}{step}{close}{after}")),
            ("store", &stored),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: sp.site.node.clone(),
        source,
        workgroups: [sp.total.div_ceil(256).clamp(1, 65535) as u32, 1, 1],
        inputs: vec![sp.x.0],
        outputs,
        index_check: None,
        loop_iterations: None,
    })
}
