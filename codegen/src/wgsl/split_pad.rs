//! Split and Pad in WGSL, as the CUDA emitter has them (`cuda::split_pad`). Split is
//! one shader writing every output (bound after the input, in order): an invocation per
//! input element finds its chunk along the axis from the outputs' static shapes. Pad is
//! an invocation per output element mapping each coordinate back to the input
//! (constant, reflect, edge and wrap modes; negative pads crop); pads and axes must be
//! graph constants, the constant value is baked in when it is one and read from its
//! one-element input otherwise. Both copy storage elements as they are (any dtype WGSL
//! storage holds).

use super::unsupported;
use super::{types, WgslKernel, WORKGROUP};
use crate::lower::index::strides;
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::ShapeOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

const TEMPLATE: &str = include_str!("split_pad.wgsl");

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(op, Op::Shape(ShapeOp::Split | ShapeOp::Pad))
}

/// Emits the shader for a Split or Pad node.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    match node.op {
        Op::Shape(ShapeOp::Split) => split(g, node, name),
        Op::Shape(ShapeOp::Pad) => pad(g, node, name),
        _ => Err(unsupported(node, "this op (not Split or Pad)")),
    }
}

fn plan(node: &Node, what: impl std::fmt::Display) -> CodegenError {
    CodegenError::Plan(format!("node `{}` ({}): {what}", node.name, node.op))
}

fn typed(g: &Graph, node: &Node, v: ValueId) -> Result<(DType, Vec<usize>)> {
    let t = g.ty(v).map_err(|e| plan(node, e))?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
    Ok((t.dtype, s))
}

fn elem(node: &Node, dt: DType) -> Result<&'static str> {
    super::storage_type(dt)
        .map(|(t, _)| t)
        .ok_or_else(|| unsupported(node, format!("{dt} data")))
}

fn count(node: &Node, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| unsupported(node, "more than 2^32 elements"))
}

fn shader(
    node: &Node,
    name: &str,
    what: &str,
    dt: DType,
    bindings: &[String],
    n: u32,
    body: &str,
) -> Result<WgslKernel> {
    let bindings: Vec<String> = bindings
        .iter()
        .enumerate()
        .map(|(k, b)| format!("@group(0) @binding({k}) {b}"))
        .collect();
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", what),
            ("bindings", &bindings.join("\n")),
            ("n", &n.to_string()),
            ("body", body),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [n.div_ceil(WORKGROUP).clamp(1, 65535), 1, 1],
        inputs: Vec::new(),
        outputs: Vec::new(),
        index_check: None,
    })
}

fn split(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    for k in node.attrs.0.keys() {
        if !["axis", "num_outputs"].contains(&k.as_str()) {
            return Err(unsupported(node, format!("attribute `{k}`")));
        }
    }
    let x = node
        .inputs
        .first()
        .copied()
        .flatten()
        .ok_or_else(|| unsupported(node, "a missing input"))?;
    let (dt, xs) = typed(g, node, x)?;
    let t = elem(node, dt)?;
    let rank = xs.len() as i64;
    let axis = node.attrs.int_or("axis", 0).map_err(|e| plan(node, e))?;
    if axis < -rank || axis >= rank {
        return Err(unsupported(
            node,
            format!("axis {axis} of a rank-{rank} input"),
        ));
    }
    let axis = if axis < 0 { axis + rank } else { axis } as usize;
    let inner: usize = xs[axis + 1..].iter().product();
    let mut bindings = vec![format!("var<storage, read> x: array<{t}>;")];
    let mut body = format!(
        "        let in_ = i % {inner}u;\n        let a_ = (i / {inner}u) % {d}u;\n        let out_ = i / {outer}u;\n",
        d = xs[axis],
        outer = inner * xs[axis]
    );
    let mut begin = 0usize;
    let mut first = true;
    let mut unused = String::new();
    for (k, &v) in node.outputs.iter().enumerate() {
        let (odt, os) = typed(g, node, v)?;
        let size = os.get(axis).copied().unwrap_or(0);
        let mut want = xs.clone();
        want[axis] = size;
        if odt != dt || os != want {
            return Err(plan(node, format!("Split output {k} is {odt} {os:?}")));
        }
        bindings.push(format!("var<storage, read_write> out{k}: array<{t}>;"));
        let end = begin + size;
        if os.iter().product::<usize>() == 0 {
            // Nothing to write, but every binding must be used to stay in the layout.
            unused += &format!("        _ = arrayLength(&out{k});\n");
        }
        if size > 0 {
            body += &format!(
                "        {}if (a_ < {end}u) {{ out{k}[(out_ * {size}u + a_ - {begin}u) * {inner}u + in_] = x[i]; }}\n",
                if first { "" } else { "else " }
            );
            first = false;
        }
        begin = end;
    }
    if begin != xs[axis] {
        return Err(unsupported(
            node,
            "split sizes that do not add up to the axis",
        ));
    }
    body = unused + &body;
    if node.outputs.iter().all(|v| {
        typed(g, node, *v)
            .map(|(_, s)| s.iter().product::<usize>() == 0)
            .unwrap_or(true)
    }) {
        // Every output empty: nothing to write, but every binding must be used.
        body = "        _ = arrayLength(&x);\n".to_string();
        for k in 0..node.outputs.len() {
            body += &format!("        _ = arrayLength(&out{k});\n");
        }
    }
    let n = count(node, xs.iter().product())?;
    let mut k = shader(
        node,
        name,
        "Split: one invocation per input element writes it to its chunk's output",
        dt,
        &bindings,
        n,
        &body,
    )?;
    k.inputs = vec![x.0];
    k.outputs = node.outputs.iter().map(|v| v.0).collect();
    Ok(k)
}

fn const_ints(g: &Graph, node: &Node, k: usize, what: &str) -> Result<Option<Vec<i64>>> {
    match node.inputs.get(k).copied().flatten() {
        None => Ok(None),
        Some(v) => g
            .constant(v)
            .map(|t| Some(t.to_i64_vec()))
            .ok_or_else(|| unsupported(node, format!("{what} that are not constants"))),
    }
}

fn pad(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    for k in node.attrs.0.keys() {
        if k != "mode" {
            return Err(unsupported(node, format!("attribute `{k}`")));
        }
    }
    let mode = node
        .attrs
        .str_or("mode", "constant")
        .map_err(|e| plan(node, e))?;
    if !["constant", "reflect", "edge", "wrap"].contains(&mode) {
        return Err(unsupported(node, format!("pad mode `{mode}`")));
    }
    let x = node
        .inputs
        .first()
        .copied()
        .flatten()
        .ok_or_else(|| unsupported(node, "a missing input"))?;
    let out = *node
        .outputs
        .first()
        .ok_or_else(|| unsupported(node, "no output"))?;
    let (dt, xs) = typed(g, node, x)?;
    let (odt, ys) = typed(g, node, out)?;
    let t = elem(node, dt)?;
    let r = xs.len();
    let pads =
        const_ints(g, node, 1, "pads")?.ok_or_else(|| unsupported(node, "a missing pads input"))?;
    let axes: Vec<usize> = match const_ints(g, node, 3, "axes")? {
        None => (0..r).collect(),
        Some(a) => a
            .iter()
            .map(|&a| if a < 0 { a + r as i64 } else { a })
            .map(|a| usize::try_from(a).ok().filter(|&a| a < r))
            .collect::<Option<_>>()
            .ok_or_else(|| unsupported(node, "axes outside the input"))?,
    };
    if pads.len() != 2 * axes.len() || odt != dt || ys.len() != r {
        return Err(plan(node, format!("Pad pads {pads:?} for axes {axes:?}")));
    }
    if mode != "constant" && xs.iter().zip(&ys).any(|(&d, &o)| d == 0 && o > 0) {
        return Err(unsupported(
            node,
            "padding an empty axis outside constant mode",
        ));
    }
    let mut begin = vec![0i64; r];
    for (i, &a) in axes.iter().enumerate() {
        begin[a] = pads[i];
    }
    let mut bindings = vec![format!("var<storage, read> x: array<{t}>;")];
    let mut inputs = vec![x.0];
    let cv = match node.inputs.get(2).copied().flatten() {
        None => types::storage_literal(&gopt_ir::Tensor::scalar_f64(dt, 0.0))
            .ok_or_else(|| unsupported(node, format!("{dt} data")))?,
        Some(v) => match g.constant(v) {
            Some(c) if c.len() == 1 => types::storage_literal(&c.cast(dt))
                .ok_or_else(|| unsupported(node, format!("{dt} data")))?,
            Some(_) => return Err(unsupported(node, "a constant_value of several elements")),
            None => {
                let (cdt, _) = typed(g, node, v)?;
                if cdt != dt {
                    return Err(unsupported(
                        node,
                        "a run-time constant_value of another dtype",
                    ));
                }
                bindings.push(format!("var<storage, read> cv: array<{t}>;"));
                inputs.push(v.0);
                "cv[0]".into()
            }
        },
    };
    bindings.push(format!("var<storage, read_write> out: array<{t}>;"));
    let xst = strides(&xs);
    let mut body = String::from(
        "        var r_: u32 = i;\n        var in_ = true;\n        var src_: u32 = 0u;\n",
    );
    for a in (0..r).rev() {
        let (d, o) = (xs[a] as i64, ys[a]);
        body += &format!(
            "        {{\n            var q = i32(r_ % {o}u) - {};\n            r_ = r_ / {o}u;\n",
            begin[a]
        );
        if begin[a] != 0 || o as i64 != d {
            body += &match mode {
                "constant" => format!("            if (q < 0i || q >= {d}i) {{ in_ = false; }}\n"),
                "edge" => format!("            q = clamp(q, 0i, {}i);\n", d - 1),
                "wrap" => format!("            q = ((q % {d}i) + {d}i) % {d}i;\n"),
                _ if d == 1 => "            q = 0i;\n".to_string(),
                _ => format!(
                    "            q = ((q % {p}i) + {p}i) % {p}i;\n            if (q >= {d}i) {{ q = {p}i - q; }}\n",
                    p = 2 * (d - 1)
                ),
            };
        }
        body += &format!(
            "            src_ = src_ + u32(max(q, 0i)) * {}u;\n        }}\n",
            xst[a]
        );
    }
    body += &format!("        if (in_) {{ out[i] = x[src_]; }} else {{ out[i] = {cv}; }}\n");
    let n = count(node, ys.iter().product())?;
    let what = format!(
        "Pad ({mode}): one invocation per output element reads its source element or the constant"
    );
    let mut k = shader(node, name, &what, dt, &bindings, n, &body)?;
    k.inputs = inputs;
    k.outputs = vec![out.0];
    Ok(k)
}
