//! The quantization ops in CUDA ([`crate::lower::quant`] reads each node once for both
//! backends), line for line the WGSL kernels' algorithms: QuantizeLinear and
//! DequantizeLinear one thread per element, DynamicQuantizeLinear in one block (range
//! first, then the data), and the integer products (MatMulInteger, QLinearMatMul,
//! ConvInteger, QLinearConv) one thread per output summing in wrapping 32-bit
//! integers. The QLinear ops requantize in double (`quant_requant.cu`), which rounds
//! `acc * mult + zero_point` as the reference's f64 does (WGSL, without doubles, rounds
//! the exact product instead).

use super::elementwise::storage;
use super::support::store;
use super::Kernel;
use crate::lower::index::Lit;
use crate::lower::quant::{
    Affine, DequantizeSpec, DynamicSpec, Form, IntConvSpec, IntMatMulSpec, IntOperand, QuantSpec,
    QuantizeSpec, Requant, Scale,
};
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, ValueId};

const LINEAR: &str = include_str!("quant_linear.cu");
const DYNAMIC: &str = include_str!("quant_dynamic.cu");
const MATMUL: &str = include_str!("quant_matmul.cu");
const CONV: &str = include_str!("quant_conv.cu");
const REQUANT: &str = include_str!("quant_requant.cu");

/// Integer literals of index arithmetic (long long).
const L: Lit = Lit("LL");

/// Emits the kernel of a quantization node.
pub fn emit(spec: &QuantSpec, name: &str) -> Result<Kernel> {
    let site = &spec.site;
    match &spec.form {
        Form::Quantize(sp) => quantize(site, name, sp),
        Form::Dequantize(sp) => dequantize(site, name, sp),
        Form::Dynamic(sp) => dynamic(site, name, sp),
        Form::MatMul(sp) => matmul(site, name, sp),
        Form::Conv(sp) => conv(site, name, sp),
    }
}

/// A kernel's tensor parameters: the inputs, then the outputs, in order.
struct Params {
    sig: Vec<String>,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
}

impl Params {
    fn new() -> Self {
        Params {
            sig: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// Adds input `name`, tensor `v` of `dt` (every input before the first output).
    fn read(&mut self, name: &str, v: ValueId, dt: DType) {
        self.sig
            .push(format!("const {}* __restrict__ {name}", storage(dt)));
        self.inputs.push(v.0);
    }

    /// Adds output `name`.
    fn write(&mut self, name: &str, v: ValueId, dt: DType) {
        self.sig
            .push(format!("{}* __restrict__ {name}", storage(dt)));
        self.outputs.push(v.0);
    }

    /// The kernel of `source` over `threads` threads in blocks of 256.
    fn kernel(self, name: &str, site: &Site, source: String, threads: usize) -> Kernel {
        Kernel::flat(name, &site.node, source, threads, self.inputs, self.outputs)
    }
}

/// `e` (a float expression) rounded to `dt` and back.
fn rounded(site: &Site, dt: DType, e: &str) -> Result<String> {
    match dt {
        DType::F32 => Ok(e.to_string()),
        DType::F16 => Ok(format!("__half2float(__float2half_rn({e}))")),
        DType::BF16 => Ok(format!("__bfloat162float(__float2bfloat16_rn({e}))")),
        other => Err(site.unsupported(&format!("rounding to {other}"))),
    }
}

/// The parameters and per-element reads QuantizeLinear and DequantizeLinear share:
/// data, scale and zero point, then the output; the zero point's expression returned.
fn affine(p: &mut Params, a: &Affine) -> String {
    p.read("x", a.x, a.x_dt);
    p.read("scale", a.scale.v, a.scale.dt);
    let zero = match a.zero {
        Some(z) => {
            p.read("zp", z.v, z.dt);
            format!("(float)zp[{}]", z.map.index("i", L))
        }
        None => "0.0f".to_string(),
    };
    p.write("y", a.out, a.out_dt);
    zero
}

/// Fills the element-wise template for QuantizeLinear or DequantizeLinear.
fn linear(
    p: Params,
    site: &Site,
    name: &str,
    a: &Affine,
    zero: &str,
    body: &str,
) -> Result<Kernel> {
    let params = a.params_note();
    let source = fill(
        LINEAR,
        &[
            ("what", site.op),
            ("n", &a.n.to_string()),
            ("params", params),
            ("name", name),
            ("sig", &p.sig.join(", ")),
            ("sidx", &a.scale.map.index("i", L)),
            ("zero", zero),
            ("body", body),
        ],
    )?;
    Ok(p.kernel(name, site, source, a.n))
}

/// QuantizeLinear: `saturate(rint(x / scale) + zero_point)`, the data, the scale and
/// their quotient rounded to the precision type.
fn quantize(site: &Site, name: &str, sp: &QuantizeSpec) -> Result<Kernel> {
    let a = &sp.affine;
    let mut p = Params::new();
    let zero = affine(&mut p, a);
    let r = |e: &str| rounded(site, sp.prec, e);
    let body = format!(
        "        const float v = {};\n        const float q = {};\n        \
         const float r = rintf(q) + z;\n        \
         y[i] = ({})(r != r ? 0.0f : fminf(fmaxf(r, {}.0f), {}.0f));\n",
        r("gopt_ld(x[i])")?,
        r(&format!("v / {}", r("s")?))?,
        storage(a.out_dt),
        sp.lo,
        sp.hi
    );
    linear(p, site, name, a, &zero, &body)
}

/// DequantizeLinear: `(x - zero_point) * scale` in float, stored as the output's type.
fn dequantize(site: &Site, name: &str, sp: &DequantizeSpec) -> Result<Kernel> {
    let a = &sp.affine;
    let mut p = Params::new();
    let zero = affine(&mut p, a);
    let body = format!(
        "        y[i] = {};\n",
        store(a.out_dt, "((float)x[i] - z) * s")
    );
    linear(p, site, name, a, &zero, &body)
}

/// DynamicQuantizeLinear in one block of 256 threads.
fn dynamic(site: &Site, name: &str, sp: &DynamicSpec) -> Result<Kernel> {
    let source = fill(
        DYNAMIC,
        &[
            ("n", &sp.n.to_string()),
            ("name", name),
            ("xt", storage(sp.x_dt)),
            ("store_scale", &store(sp.x_dt, "scale")),
        ],
    )?;
    Ok(Kernel {
        grid: 1,
        ..Kernel::flat(
            name,
            &site.node,
            source,
            256,
            vec![sp.x.0],
            vec![sp.y.0, sp.scale.0, sp.zero.0],
        )
    })
}

/// Adds the zero point of `op` as `var` and gives the int expression of the one an
/// element reads (`at` indexes a per-axis one).
fn zero_point(p: &mut Params, op: &IntOperand, var: &str, at: &str) -> String {
    match op.zero {
        None => "0".to_string(),
        Some((z, per_axis)) => {
            p.read(var, z, op.dt);
            format!("(int){var}[{}]", if per_axis { at } else { "0" })
        }
    }
}

/// The requantization's parameters (after the others of `p`), its device function
/// (named after the kernel), the multiplier of an output (the first scale indexed by
/// `at1`, the second by `at2` where they are per axis), and Y's zero point.
fn requant(
    p: &mut Params,
    site: &Site,
    name: &str,
    rq: &Requant,
    (at1, at2): (&str, &str),
) -> Result<(String, String, String)> {
    let mut scale = |s: &Scale, var: &str, at: &str| -> String {
        p.read(var, s.v, s.dt);
        format!("gopt_ld({var}[{}])", if s.per_axis { at } else { "0" })
    };
    let s1 = scale(&rq.s1, "s1", at1);
    let s2 = scale(&rq.s2, "s2", at2);
    let sy = scale(&rq.sy, "sy", "0");
    let r = |e: &str| rounded(site, rq.round, e);
    let mult = r(&format!("({}) / {sy}", r(&format!("{s1} * {s2}"))?))?;
    let zy = match rq.y_zero {
        Some(z) => {
            p.read("y_zero", z, rq.out_dt);
            "(int)y_zero[0]".to_string()
        }
        None => "0".to_string(),
    };
    Ok((fill(REQUANT, &[("name", name)])?, mult, zy))
}

/// The store of output `i` from the 32-bit sum `acc`: as it is, or requantized with
/// `mult` and `zy` by the kernel's device function.
fn store_acc(name: &str, out_dt: DType, rq: Option<(&Requant, &str, &str)>) -> String {
    match rq {
        None => "        y[i] = (int)acc;\n".to_string(),
        Some((rq, mult, zy)) => format!(
            "        const float mult = {mult};\n        \
             y[i] = ({})({name}_requant((int)acc, mult, {zy}, {}, {}));\n",
            storage(out_dt),
            rq.lo,
            rq.hi
        ),
    }
}

/// MatMulInteger or QLinearMatMul.
fn matmul(site: &Site, name: &str, sp: &IntMatMulSpec) -> Result<Kernel> {
    let mut p = Params::new();
    p.read("a", sp.a.v, sp.a.dt);
    p.read("b", sp.b.v, sp.b.dt);
    let za = zero_point(&mut p, &sp.a, "a_zero", "row");
    let zb = zero_point(&mut p, &sp.b, "b_zero", "col");
    let rq = match &sp.requant {
        Some(rq) => Some((rq, requant(&mut p, site, name, rq, ("row", "col"))?)),
        None => None,
    };
    p.write("y", sp.out, sp.out_dt);
    let mut batch = String::new();
    for &(d, sa, sb) in &sp.batch {
        if sa != 0 {
            batch += &format!("        ao += (r % {d}LL) * {sa}LL;\n");
        }
        if sb != 0 {
            batch += &format!("        bo += (r % {d}LL) * {sb}LL;\n");
        }
        batch += &format!("        r /= {d}LL;\n");
    }
    let (fun, how, st) = match &rq {
        None => (String::new(), "", store_acc(name, sp.out_dt, None)),
        Some((rq, (f, mult, zy))) => (
            f.clone(),
            ", then requantized",
            store_acc(name, sp.out_dt, Some((rq, mult, zy))),
        ),
    };
    let source = fill(
        MATMUL,
        &[
            ("what", site.op),
            ("m", &sp.m.max(1).to_string()),
            ("k", &sp.k.to_string()),
            ("n", &sp.n.max(1).to_string()),
            ("mn", &(sp.m * sp.n).max(1).to_string()),
            ("count", &sp.count.to_string()),
            ("how", how),
            ("requant", &fun),
            ("name", name),
            ("sig", &p.sig.join(", ")),
            ("batch", &batch),
            ("za", &za),
            ("zb", &zb),
            ("store", &st),
        ],
    )?;
    Ok(p.kernel(name, site, source, sp.count))
}

/// ConvInteger or QLinearConv.
fn conv(site: &Site, name: &str, sp: &IntConvSpec) -> Result<Kernel> {
    let mut p = Params::new();
    p.read("x", sp.x.v, sp.x.dt);
    p.read("w", sp.w.v, sp.w.dt);
    let zx = zero_point(&mut p, &sp.x, "x_zero", "0");
    let zw = zero_point(&mut p, &sp.w, "w_zero", "oc");
    let acc0 = match sp.bias {
        Some(v) => {
            p.read("bias", v, DType::I32);
            "(unsigned int)bias[oc]"
        }
        None => "0u",
    };
    let rq = match &sp.requant {
        Some(rq) => Some((rq, requant(&mut p, site, name, rq, ("0", "oc"))?)),
        None => None,
    };
    p.write("y", sp.out, sp.out_dt);
    let mut coords = String::new();
    let mut taps = String::new();
    let mut in_stride = 1usize;
    for (d, dim) in sp.dims.iter().enumerate().rev() {
        coords += &format!(
            "        const long long o{d} = r % {o}LL;\n        r /= {o}LL;\n",
            o = dim.out.max(1)
        );
        taps += &format!(
            "                const long long k{d} = tr % {k}LL;\n                tr /= {k}LL;\n                \
             const long long p{d} = o{d} * {s}LL + k{d} * {dl}LL - {pb}LL;\n                \
             ok = ok && p{d} >= 0 && p{d} < {inp}LL;\n                at += p{d} * {in_stride}LL;\n",
            k = dim.kernel,
            s = dim.stride,
            dl = dim.dilation,
            pb = dim.pad_begin,
            inp = dim.input,
        );
        in_stride *= dim.input;
    }
    let (fun, how, st) = match &rq {
        None => (String::new(), "", store_acc(name, sp.out_dt, None)),
        Some((rq, (f, mult, zy))) => (
            f.clone(),
            ", the bias added, then requantized",
            store_acc(name, sp.out_dt, Some((rq, mult, zy))),
        ),
    };
    let source = fill(
        CONV,
        &[
            ("what", site.op),
            ("spatial", &sp.dims.len().to_string()),
            ("m", &sp.m.max(1).to_string()),
            ("group", &sp.group.to_string()),
            ("cg", &sp.cg().to_string()),
            ("taps", &sp.taps().to_string()),
            ("how", how),
            ("requant", &fun),
            ("name", name),
            ("sig", &p.sig.join(", ")),
            ("count", &sp.count.to_string()),
            ("coords", &coords),
            ("c", &sp.c.to_string()),
            ("mg", &sp.mg().max(1).to_string()),
            ("in_size", &sp.in_size().to_string()),
            ("zx", &zx),
            ("zw", &zw),
            ("acc0", acc0),
            ("taps_code", &taps),
            ("store", &st),
        ],
    )?;
    Ok(p.kernel(name, site, source, sp.count))
}
