//! Split and Pad in WGSL, from the specs of [`crate::lower::split_pad`]. Split is one
//! shader writing every output (bound after the input, in order): an invocation per
//! input element finds its chunk along the axis. Pad is an invocation per output element
//! mapping each coordinate back to the input by the lowering's fold expressions
//! (constant, reflect, edge and wrap modes; negative pads crop), in i32; the constant
//! value is baked in when it is a graph constant and read from its one-element input
//! otherwise. Both copy storage elements as they are (any dtype WGSL storage holds).

use super::{types, WgslKernel};
use crate::lower::index::Lit;
use crate::lower::split_pad::{Chunk, PadSpec, PadValue, SplitPad, SplitSpec};
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("split_pad.wgsl");

/// Emits the shader of a Split or Pad node: its kernel, with the node's values bound.
pub fn emit(sp: &SplitPad, name: &str) -> Result<WgslKernel> {
    let (mut k, inputs, outputs) = match sp {
        SplitPad::Split(sp) => split(name, sp)?,
        SplitPad::Pad(p) => pad(name, p)?,
    };
    k.inputs = inputs;
    k.outputs = outputs;
    Ok(k)
}

fn elem(site: &Site, dt: DType) -> Result<&'static str> {
    super::storage_type(dt)
        .map(|(t, _)| t)
        .ok_or_else(|| site.unsupported(&format!("{dt} data")))
}

fn count(site: &Site, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| site.unsupported("more than 2^32 elements"))
}

/// The shader: `bindings` (bound in order), `n` invocations each running `body`.
fn shader(
    site: &Site,
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
    Ok(WgslKernel::flat(
        name,
        &site.node,
        source,
        n,
        Vec::new(),
        Vec::new(),
    ))
}

/// A shader with its input and output values.
type Bound = (WgslKernel, Vec<u32>, Vec<u32>);

fn split(name: &str, sp: &SplitSpec) -> Result<Bound> {
    let t = elem(&sp.site, sp.dtype)?;
    let mut bindings = vec![format!("var<storage, read> x: array<{t}>;")];
    bindings.extend(
        (0..sp.chunks.len()).map(|k| format!("var<storage, read_write> out{k}: array<{t}>;")),
    );
    // Every binding must be used to stay in the layout, also those of empty outputs
    // (and of the input, when every output is empty).
    let unused = |k: usize, c: &Chunk| {
        c.empty
            .then(|| format!("        _ = arrayLength(&out{k});\n"))
    };
    let mut body: String = sp
        .chunks
        .iter()
        .enumerate()
        .filter_map(|(k, c)| unused(k, c))
        .collect();
    if sp.chunks.iter().all(|c| c.empty) {
        body.insert_str(0, "        _ = arrayLength(&x);\n");
    } else {
        body += &format!(
            "        let in_ = i % {inner}u;\n        let a_ = (i / {inner}u) % {d}u;\n        let out_ = i / {outer}u;\n",
            inner = sp.inner,
            d = sp.len,
            outer = sp.inner * sp.len
        );
        let mut other = "";
        for (k, c) in sp.chunks.iter().enumerate().filter(|(_, c)| c.size > 0) {
            let (end, at) = sp.dest(c, Lit("u"));
            body += &format!("        {other}if (a_ < {end}) {{ out{k}[{at}] = x[i]; }}\n");
            other = "else ";
        }
    }
    let n = count(&sp.site, sp.total)?;
    let k = shader(
        &sp.site,
        name,
        "Split: one invocation per input element writes it to its chunk's output",
        sp.dtype,
        &bindings,
        n,
        &body,
    )?;
    Ok((k, vec![sp.x.0], sp.chunks.iter().map(|c| c.out.0).collect()))
}

fn pad(name: &str, p: &PadSpec) -> Result<Bound> {
    let lit = Lit("i");
    let t = elem(&p.site, p.dtype)?;
    let mut bindings = vec![format!("var<storage, read> x: array<{t}>;")];
    let mut inputs = vec![p.x.0];
    let literal = |c: &gopt_ir::Tensor| {
        types::storage_literal(c).ok_or_else(|| p.site.unsupported(&format!("{} data", p.dtype)))
    };
    let cv = match &p.value {
        PadValue::Zero => literal(&gopt_ir::Tensor::scalar_f64(p.dtype, 0.0))?,
        PadValue::Const(c) => literal(c)?,
        PadValue::Input(v) => {
            bindings.push(format!("var<storage, read> cv: array<{t}>;"));
            inputs.push(v.0);
            "cv[0]".into()
        }
    };
    bindings.push(format!("var<storage, read_write> out: array<{t}>;"));
    let mut body = String::from(
        "        var r_: u32 = i;\n        var in_ = true;\n        var src_: u32 = 0u;\n",
    );
    // Innermost axis first; a negative `q` (outside, constant mode) adds nothing.
    for a in p.axes.iter().rev() {
        body += &format!(
            "        {{\n            var q = i32(r_ % {o}u) - {b}i;\n            r_ = r_ / {o}u;\n",
            o = a.out_len,
            b = a.begin
        );
        if let Some(f) = a.fold {
            body += &format!("            q = {};\n", f.write(lit));
        }
        if let Some(c) = a.inside(lit) {
            body += &format!("            in_ = in_ && ({c});\n");
        }
        body += &format!(
            "            src_ = src_ + u32(max(q, 0i)) * {}u;\n        }}\n",
            a.stride
        );
    }
    body += &format!("        if (in_) {{ out[i] = x[src_]; }} else {{ out[i] = {cv}; }}\n");
    let n = count(&p.site, p.total)?;
    let what = format!(
        "Pad ({}): one invocation per output element reads its source element or the constant",
        p.mode.name()
    );
    let k = shader(&p.site, name, &what, p.dtype, &bindings, n, &body)?;
    Ok((k, inputs, vec![p.out.0]))
}
