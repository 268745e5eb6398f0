//! Split and Pad, the data-movement ops CNNs add to the ones in `movement`, from the
//! specs of [`crate::lower::split_pad`]. Split is one kernel writing every output: a
//! thread per input element finds its chunk along the axis. Pad is a thread per output
//! element mapping each coordinate back to the input by the lowering's fold expressions
//! (constant, reflect, edge and wrap modes; negative pads crop), the constant value
//! baked in when it is a graph constant and read from its one-element input otherwise.
//! Both copy storage bytes as they are (any dtype).

use super::elementwise::storage;
use super::support::{flit, store};
use super::Kernel;
use crate::lower::index::Lit;
use crate::lower::split_pad::{PadAxis, PadSpec, PadValue, SplitPad, SplitSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, Tensor};

const TEMPLATE: &str = include_str!("split_pad.cu");

/// Emits the kernel of a Split or Pad node.
pub fn emit(sp: &SplitPad, name: &str) -> Result<Kernel> {
    match sp {
        SplitPad::Split(sp) => split(name, sp),
        SplitPad::Pad(p) => pad(name, p),
    }
}

fn split(name: &str, sp: &SplitSpec) -> Result<Kernel> {
    let t = storage(sp.dtype);
    let mut params = vec![format!("const {t}* __restrict__ x")];
    let mut body = format!(
        "        const long long in_ = i % {inner}LL; const long long a_ = (i / {inner}LL) % {d}LL; const long long out_ = i / {outer}LL;\n",
        inner = sp.inner,
        d = sp.len,
        outer = sp.inner * sp.len
    );
    let mut first = true;
    for (k, c) in sp.chunks.iter().enumerate() {
        params.push(format!("{t}* __restrict__ out{k}"));
        if c.size > 0 {
            let (end, at) = sp.dest(c, Lit("LL"));
            let other = if first { "" } else { "else " };
            body += &format!("        {other}if (a_ < {end}) out{k}[{at}] = x[i];\n");
            first = false;
        }
    }
    let src = fill(
        TEMPLATE,
        &[
            (
                "what",
                "Split: one thread per input element writes it to its chunk's output",
            ),
            ("name", name),
            ("params", &params.join(", ")),
            ("total", &sp.total.to_string()),
            ("body", &body),
        ],
    )?;
    let outputs = sp.chunks.iter().map(|c| c.out.0).collect();
    Ok(Kernel::flat(
        name,
        &sp.site.node,
        src,
        sp.total,
        vec![sp.x.0],
        outputs,
    ))
}

/// A literal of `t` (one element, in the data's dtype) as the dtype's storage type.
fn literal(t: &Tensor) -> String {
    let dt = t.dtype();
    let first = t.to_f64_vec().first().copied().unwrap_or(0.0);
    if dt == DType::F64 {
        format!("{first:e}")
    } else if dt.is_float() {
        store(dt, &flit(first as f32))
    } else {
        let v = t.to_i64_vec().first().copied().unwrap_or(0);
        format!("({})({v}LL)", storage(dt))
    }
}

fn pad(name: &str, p: &PadSpec) -> Result<Kernel> {
    let lit = Lit("LL");
    let t = storage(p.dtype);
    let mut params = vec![format!("const {t}* __restrict__ x")];
    let mut inputs = vec![p.x.0];
    let cv = match &p.value {
        PadValue::Zero => store(p.dtype, "0.0f"),
        PadValue::Const(c) => literal(c),
        PadValue::Input(v) => {
            params.push(format!("const {t}* __restrict__ cv"));
            inputs.push(v.0);
            "cv[0]".into()
        }
    };
    params.push(format!("{t}* __restrict__ out"));
    // Innermost axis first; each block reads one coordinate off `r_`.
    let axis = |a: &PadAxis| {
        let fold = a
            .fold
            .map_or(String::new(), |f| format!(" q = {};", f.write(lit)));
        let inside = a
            .inside(lit)
            .map_or(String::new(), |c| format!(" in_ = in_ && ({c});"));
        format!(
            "        {{ long long q = r_ % {o}LL - {b}LL; r_ /= {o}LL;{fold}{inside} src_ += q * {s}LL; }}\n",
            o = a.out_len,
            b = a.begin,
            s = a.stride
        )
    };
    let body = format!(
        "        long long r_ = i; bool in_ = true; long long src_ = 0;\n{}        out[i] = in_ ? x[src_] : {cv};\n",
        p.axes.iter().rev().map(axis).collect::<String>()
    );
    let what = format!(
        "Pad ({}): one thread per output element reads its source element or the constant",
        p.mode.name()
    );
    let src = fill(
        TEMPLATE,
        &[
            ("what", &what),
            ("name", name),
            ("params", &params.join(", ")),
            ("total", &p.total.to_string()),
            ("body", &body),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &p.site.node,
        src,
        p.total,
        inputs,
        vec![p.out.0],
    ))
}
