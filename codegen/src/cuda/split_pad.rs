//! Split and Pad, the data-movement ops CNNs add to the ones in `movement`. Split is one
//! kernel writing every output: a thread per input element finds its chunk along the
//! axis (the chunk sizes come from the outputs' static shapes, which inference derived
//! from the `split` input or `num_outputs`). Pad is a thread per output element mapping
//! each coordinate back to the input (constant, reflect, edge and wrap modes; negative
//! pads crop), the constant value baked in when it is a graph constant and read from
//! its one-element input otherwise. Both copy storage bytes as they are (any dtype).

use super::elementwise::storage;
use super::support::{
    blocks, const_input, input, opt_input, output, plan, strides, typed, unsupported,
};
use super::Kernel;
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::ShapeOp;
use gopt_ir::{DType, Graph, Node, Op, Tensor};

const TEMPLATE: &str = include_str!("split_pad.cu");

/// Whether this emitter handles `op`.
pub fn handles(op: Op) -> bool {
    matches!(op, Op::Shape(ShapeOp::Split | ShapeOp::Pad))
}

/// Emits the kernel for a Split or Pad node.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    match node.op {
        Op::Shape(ShapeOp::Split) => split(g, node, name),
        Op::Shape(ShapeOp::Pad) => pad(g, node, name),
        _ => Err(unsupported(node, "this op (not Split or Pad)")),
    }
}

fn kernel(
    node: &Node,
    name: &str,
    source: String,
    total: usize,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
) -> Kernel {
    Kernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        threads: total,
        vectorized: false,
        inputs,
        outputs,
        shared_mem: 0,
        grid: blocks(total, 256),
        block: 256,
        index_check: None,
    }
}

fn split(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    for k in node.attrs.0.keys() {
        if !["axis", "num_outputs"].contains(&k.as_str()) {
            return Err(unsupported(node, &format!("attribute `{k}`")));
        }
    }
    let x = input(node, 0)?;
    let (dt, xs) = typed(g, node, x)?;
    let rank = xs.len() as i64;
    let axis = node.attrs.int_or("axis", 0).map_err(plan)?;
    if axis < -rank || axis >= rank {
        return Err(unsupported(
            node,
            &format!("axis {axis} of a rank-{rank} input"),
        ));
    }
    let axis = if axis < 0 { axis + rank } else { axis } as usize;
    let inner: usize = xs[axis + 1..].iter().product();
    let t = storage(dt);
    let mut params = vec![format!("const {t}* __restrict__ x")];
    let mut body = format!(
        "        const long long in_ = i % {inner}LL; const long long a_ = (i / {inner}LL) % {d}LL; const long long out_ = i / {outer}LL;\n",
        d = xs[axis],
        outer = inner * xs[axis]
    );
    let mut begin = 0usize;
    for (k, &v) in node.outputs.iter().enumerate() {
        let (odt, os) = typed(g, node, v)?;
        let size = os.get(axis).copied().unwrap_or(0);
        let mut want = xs.clone();
        want[axis] = size;
        if odt != dt || os != want {
            return Err(plan(format!("{}: Split output {k} is {os:?}", node.name)));
        }
        params.push(format!("{t}* __restrict__ out{k}"));
        let end = begin + size;
        if size > 0 {
            body += &format!(
                "        {}if (a_ < {end}LL) out{k}[(out_ * {size}LL + a_ - {begin}LL) * {inner}LL + in_] = x[i];\n",
                if begin == 0 { "" } else { "else " }
            );
        }
        begin = end;
    }
    if begin != xs[axis] {
        return Err(unsupported(
            node,
            "split sizes that do not add up to the axis",
        ));
    }
    let total: usize = xs.iter().product();
    let src = fill(
        TEMPLATE,
        &[
            (
                "what",
                "Split: one thread per input element writes it to its chunk's output",
            ),
            ("name", name),
            ("params", &params.join(", ")),
            ("total", &total.to_string()),
            ("body", &body),
        ],
    )?;
    let outputs = node.outputs.iter().map(|v| v.0).collect();
    Ok(kernel(node, name, src, total, vec![x.0], outputs))
}

/// A literal of `v` (already in `dt`) as `dt`'s storage type.
fn literal(dt: DType, t: &Tensor) -> String {
    let v = t.cast(dt);
    match dt {
        DType::F16 | DType::BF16 | DType::F32 => {
            let f = v.to_f64_vec().first().copied().unwrap_or(0.0) as f32;
            super::support::store(dt, &super::support::flit(f))
        }
        DType::F64 => format!("{:e}", v.to_f64_vec().first().copied().unwrap_or(0.0)),
        _ => format!(
            "({})({}LL)",
            storage(dt),
            v.to_i64_vec().first().copied().unwrap_or(0)
        ),
    }
}

fn pad(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    for k in node.attrs.0.keys() {
        if k != "mode" {
            return Err(unsupported(node, &format!("attribute `{k}`")));
        }
    }
    let mode = node.attrs.str_or("mode", "constant").map_err(plan)?;
    if !["constant", "reflect", "edge", "wrap"].contains(&mode) {
        return Err(unsupported(node, &format!("pad mode `{mode}`")));
    }
    let x = input(node, 0)?;
    let (dt, xs) = typed(g, node, x)?;
    let (odt, ys) = typed(g, node, output(node, 0)?)?;
    let r = xs.len();
    let pads = const_input(g, node, 1, "pads")?
        .ok_or_else(|| unsupported(node, "a missing pads input"))?
        .to_i64_vec();
    let axes: Vec<usize> = match const_input(g, node, 3, "axes")? {
        None => (0..r).collect(),
        Some(a) => a
            .to_i64_vec()
            .iter()
            .map(|&a| if a < 0 { a + r as i64 } else { a })
            .map(|a| usize::try_from(a).ok().filter(|&a| a < r))
            .collect::<Option<_>>()
            .ok_or_else(|| unsupported(node, "axes outside the input"))?,
    };
    if pads.len() != 2 * axes.len() || odt != dt || ys.len() != r {
        return Err(plan(format!(
            "{}: Pad pads {pads:?} for axes {axes:?}",
            node.name
        )));
    }
    let mut begin = vec![0i64; r];
    for (i, &a) in axes.iter().enumerate() {
        begin[a] = pads[i];
    }
    let t = storage(dt);
    let mut params = vec![format!("const {t}* __restrict__ x")];
    let mut inputs = vec![x.0];
    let cv = match opt_input(node, 2) {
        None => super::support::store(dt, "0.0f"),
        Some(v) => match g.constant(v) {
            Some(c) => literal(dt, c),
            None => {
                let (cdt, _) = typed(g, node, v)?;
                if cdt != dt {
                    return Err(unsupported(
                        node,
                        "a run-time constant_value of another dtype",
                    ));
                }
                params.push(format!("const {t}* __restrict__ cv"));
                inputs.push(v.0);
                "cv[0]".into()
            }
        },
    };
    params.push(format!("{t}* __restrict__ out"));
    let xst = strides(&xs);
    let mut body = String::from("        long long r_ = i; bool in_ = true; long long src_ = 0;\n");
    for a in (0..r).rev() {
        let (d, o) = (xs[a] as i64, ys[a]);
        body += &format!(
            "        {{ long long q = r_ % {o}LL - {}LL; r_ /= {o}LL;\n",
            begin[a]
        );
        if begin[a] != 0 || ys[a] as i64 != d {
            body += &match mode {
                "constant" => format!("          if (q < 0 || q >= {d}LL) in_ = false;\n"),
                "edge" => format!("          q = q < 0 ? 0 : (q >= {d}LL ? {d}LL - 1 : q);\n"),
                "wrap" => format!("          q = ((q % {d}LL) + {d}LL) % {d}LL;\n"),
                _ if d == 1 => "          q = 0;\n".to_string(),
                _ => format!(
                    "          {{ const long long per = {p}LL; q = ((q % per) + per) % per; if (q >= {d}LL) q = per - q; }}\n",
                    p = 2 * (d - 1)
                ),
            };
        }
        body += &format!("          src_ += q * {}LL; }}\n", xst[a]);
    }
    body += &format!("        out[i] = in_ ? x[src_] : {cv};\n");
    if mode != "constant" && xs.iter().zip(&ys).any(|(&d, &o)| d == 0 && o > 0) {
        return Err(unsupported(
            node,
            "padding an empty axis outside constant mode",
        ));
    }
    let total: usize = ys.iter().product();
    let what = format!(
        "Pad ({mode}): one thread per output element reads its source element or the constant"
    );
    let src = fill(
        TEMPLATE,
        &[
            ("what", &what),
            ("name", name),
            ("params", &params.join(", ")),
            ("total", &total.to_string()),
            ("body", &body),
        ],
    )?;
    Ok(kernel(
        node,
        name,
        src,
        total,
        inputs,
        vec![output(node, 0)?.0],
    ))
}
