//! The quantization ops in WGSL ([`crate::lower::quant`] reads each node once for both
//! backends): QuantizeLinear and DequantizeLinear one invocation per element,
//! DynamicQuantizeLinear in one workgroup (range first, then the data), and the integer
//! products (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv) one invocation per
//! output summing in wrapping 32-bit integers. The QLinear ops requantize with
//! `q_requant` (`quant_requant.wgsl`): `rint(acc * mult + zero_point)` from the exact
//! 64-bit product, since an f32 product would round before the ties the reference
//! breaks in f64. 8/16-bit data is stored one 32-bit word per element; bf16 scales,
//! data and `precision` have no WGSL form and are refused.

use super::types::helpers_for;
use super::WgslKernel;
use crate::lower::index::Lit;
use crate::lower::quant::{
    Affine, DequantizeSpec, DynamicSpec, Form, IntConvSpec, IntMatMulSpec, IntOperand, QuantSpec,
    QuantizeSpec, Requant, Scale,
};
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, ValueId};

const LINEAR: &str = include_str!("quant_linear.wgsl");
const DYNAMIC: &str = include_str!("quant_dynamic.wgsl");
const MATMUL: &str = include_str!("quant_matmul.wgsl");
const CONV: &str = include_str!("quant_conv.wgsl");
const REQUANT: &str = include_str!("quant_requant.wgsl");

/// Integer literals of index arithmetic (u32).
const U: Lit = Lit("u");

/// Emits the shader of a quantization node.
pub fn emit(spec: &QuantSpec, name: &str) -> Result<WgslKernel> {
    let site = &spec.site;
    match &spec.form {
        Form::Quantize(sp) => quantize(site, name, sp),
        Form::Dequantize(sp) => dequantize(site, name, sp),
        Form::Dynamic(sp) => dynamic(site, name, sp),
        Form::MatMul(sp) => matmul(site, name, sp),
        Form::Conv(sp) => conv(site, name, sp),
    }
}

/// A shader's storage bindings: the read-only inputs, then the outputs, numbered in
/// that order.
struct Binds<'n> {
    site: &'n Site,
    decls: String,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    f16: bool,
}

impl<'n> Binds<'n> {
    fn new(site: &'n Site) -> Self {
        Binds {
            site,
            decls: String::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            f16: false,
        }
    }

    /// Declares `name`, a tensor of `dt`, at the next binding.
    fn bind(&mut self, name: &str, dt: DType, access: &str) -> Result<&'static str> {
        let (t, _) = super::storage_type(dt)
            .ok_or_else(|| self.site.unsupported(&format!("{dt} operands")))?;
        self.f16 |= dt == DType::F16;
        self.decls += &format!(
            "@group(0) @binding({}) var<storage, {access}> {name}: array<{t}>;\n",
            self.inputs.len() + self.outputs.len()
        );
        Ok(t)
    }

    /// Binds input `name` (every input before the first output).
    fn read(&mut self, name: &str, v: ValueId, dt: DType) -> Result<&'static str> {
        let t = self.bind(name, dt, "read")?;
        self.inputs.push(v.0);
        Ok(t)
    }

    /// Binds output `name`.
    fn write(&mut self, name: &str, v: ValueId, dt: DType) -> Result<&'static str> {
        let t = self.bind(name, dt, "read_write")?;
        self.outputs.push(v.0);
        Ok(t)
    }

    /// The kernel of `source` over `threads` invocations in 1-D workgroups.
    fn kernel(self, name: &str, source: String, threads: u32) -> WgslKernel {
        WgslKernel::flat(
            name,
            &self.site.node,
            source,
            threads,
            self.inputs,
            self.outputs,
        )
    }
}

/// A count the shader indexes with u32.
fn count32(site: &Site, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| site.unsupported("more than 2^32 elements"))
}

/// `e` (an f32 expression) rounded to `dt` and back, for the float types WGSL has.
fn rounded(site: &Site, dt: DType, e: &str) -> Result<String> {
    match dt {
        DType::F32 => Ok(e.to_string()),
        DType::F16 => Ok(format!("f32(f16({e}))")),
        other => Err(site.unsupported(&format!("rounding to {other}"))),
    }
}

/// The bindings and per-element reads QuantizeLinear and DequantizeLinear share:
/// data, scale and zero point bound, the output's storage type returned.
fn affine(b: &mut Binds, a: &Affine) -> Result<(&'static str, String)> {
    b.read("x", a.x, a.x_dt)?;
    b.read("scale", a.scale.v, a.scale.dt)?;
    let zero = match a.zero {
        Some(z) => {
            b.read("zp", z.v, z.dt)?;
            format!("f32(zp[{}])", z.map.index("i", U))
        }
        None => "0.0".to_string(),
    };
    Ok((b.write("y", a.out, a.out_dt)?, zero))
}

/// Fills the element-wise template for QuantizeLinear or DequantizeLinear.
fn linear(
    b: Binds,
    name: &str,
    what: &str,
    a: &Affine,
    zero: &str,
    body: &str,
) -> Result<WgslKernel> {
    let n = count32(b.site, a.n)?;
    let params = a.params_note();
    let source = fill(
        LINEAR,
        &[
            ("enable", super::enable_f16(b.f16)),
            ("what", what),
            ("n", &n.to_string()),
            ("params", params),
            ("bindings", &b.decls),
            ("helpers", &helpers_for(body)),
            ("sidx", &a.scale.map.index("i", U)),
            ("zero", zero),
            ("body", body),
        ],
    )?;
    Ok(b.kernel(name, source, n))
}

/// QuantizeLinear: `saturate(rint(x / scale) + zero_point)`, the data, the scale and
/// their quotient rounded to the precision type.
fn quantize(site: &Site, name: &str, sp: &QuantizeSpec) -> Result<WgslKernel> {
    let a = &sp.affine;
    let mut b = Binds::new(site);
    let (yt, zero) = affine(&mut b, a)?;
    let r = |e: &str| rounded(site, sp.prec, e);
    let body = format!(
        "        let v = {};\n        let q = {};\n        let r = round(q) + z;\n        \
         y[i] = {yt}(select(clamp(r, {}.0, {}.0), 0.0, gopt_isnan(r)));\n",
        r("f32(x[i])")?,
        r(&format!("v / {}", r("s")?))?,
        sp.lo,
        sp.hi
    );
    linear(b, name, "QuantizeLinear", a, &zero, &body)
}

/// DequantizeLinear: `(x - zero_point) * scale` in f32, stored as the output's type.
fn dequantize(site: &Site, name: &str, sp: &DequantizeSpec) -> Result<WgslKernel> {
    let a = &sp.affine;
    let mut b = Binds::new(site);
    let (yt, zero) = affine(&mut b, a)?;
    let body = format!("        y[i] = {yt}((f32(x[i]) - z) * s);\n");
    linear(b, name, "DequantizeLinear", a, &zero, &body)
}

/// DynamicQuantizeLinear in one workgroup.
fn dynamic(site: &Site, name: &str, sp: &DynamicSpec) -> Result<WgslKernel> {
    let mut b = Binds::new(site);
    let xt = b.read("x", sp.x, sp.x_dt)?;
    b.write("y", sp.y, DType::U8)?;
    b.write("y_scale", sp.scale, sp.x_dt)?;
    b.write("y_zero", sp.zero, DType::U8)?;
    let n = count32(site, sp.n)?;
    let source = fill(
        DYNAMIC,
        &[
            ("enable", super::enable_f16(b.f16)),
            ("n", &n.to_string()),
            ("xt", xt),
            ("helpers", &helpers_for("gopt_isnan( gopt_div(")),
        ],
    )?;
    Ok(WgslKernel {
        workgroups: [1, 1, 1],
        ..b.kernel(name, source, 1)
    })
}

/// Binds the zero point of `op` as `var` and gives the i32 expression of the one an
/// element reads (`at` indexes a per-axis one).
fn zero_point(b: &mut Binds, op: &IntOperand, var: &str, at: &str) -> Result<String> {
    Ok(match op.zero {
        None => "0i".to_string(),
        Some((z, per_axis)) => {
            b.read(var, z, op.dt)?;
            format!("i32({var}[{}])", if per_axis { at } else { "0u" })
        }
    })
}

/// The requantization's bindings (after the others of `b`), its helper function, the
/// multiplier of an output (the first scale indexed by `at1`, the second by `at2` where
/// they are per axis), and Y's zero point.
fn requant(
    b: &mut Binds,
    rq: &Requant,
    (at1, at2): (&str, &str),
) -> Result<(String, String, String)> {
    let site = b.site;
    let mut scale = |s: &Scale, var: &str, at: &str| -> Result<String> {
        b.read(var, s.v, s.dt)?;
        Ok(format!(
            "f32({var}[{}])",
            if s.per_axis { at } else { "0u" }
        ))
    };
    let s1 = scale(&rq.s1, "s1", at1)?;
    let s2 = scale(&rq.s2, "s2", at2)?;
    let sy = scale(&rq.sy, "sy", "0u")?;
    let r = |e: &str| rounded(site, rq.round, e);
    let mult = r(&format!("({}) / {sy}", r(&format!("{s1} * {s2}"))?))?;
    let zy = match rq.y_zero {
        Some(z) => {
            b.read("y_zero", z, rq.out_dt)?;
            "i32(y_zero[0])".to_string()
        }
        None => "0i".to_string(),
    };
    let f = format!("{REQUANT}{}", helpers_for(REQUANT));
    Ok((f, mult, zy))
}

/// The store of output `i` from the i32 sum `acc`: as it is, or requantized with
/// `mult` and `zy`.
fn store(yt: &str, rq: Option<(&Requant, &str, &str)>) -> String {
    match rq {
        None => "        y[i] = bitcast<i32>(acc);\n".to_string(),
        Some((rq, mult, zy)) => format!(
            "        let mult = {mult};\n        \
             y[i] = {yt}(q_requant(bitcast<i32>(acc), mult, {zy}, {}i, {}i));\n",
            rq.lo, rq.hi
        ),
    }
}

/// MatMulInteger or QLinearMatMul.
fn matmul(site: &Site, name: &str, sp: &IntMatMulSpec) -> Result<WgslKernel> {
    let count = count32(site, sp.count)?;
    let mut b = Binds::new(site);
    b.read("a", sp.a.v, sp.a.dt)?;
    b.read("b", sp.b.v, sp.b.dt)?;
    let za = zero_point(&mut b, &sp.a, "a_zero", "row")?;
    let zb = zero_point(&mut b, &sp.b, "b_zero", "col")?;
    let rq = match &sp.requant {
        Some(rq) => Some((rq, requant(&mut b, rq, ("row", "col"))?)),
        None => None,
    };
    let yt = b.write("y", sp.out, sp.out_dt)?;
    let mut batch = String::new();
    for &(d, sa, sb) in &sp.batch {
        if sa != 0 {
            batch += &format!("        ao = ao + (r % {d}u) * {sa}u;\n");
        }
        if sb != 0 {
            batch += &format!("        bo = bo + (r % {d}u) * {sb}u;\n");
        }
        batch += &format!("        r = r / {d}u;\n");
    }
    let (fun, how, st) = match &rq {
        None => (String::new(), "", store(yt, None)),
        Some((rq, (f, mult, zy))) => (
            f.clone(),
            ", then requantized",
            store(yt, Some((rq, mult, zy))),
        ),
    };
    let source = fill(
        MATMUL,
        &[
            ("enable", super::enable_f16(b.f16)),
            ("what", site.op),
            ("m", &sp.m.max(1).to_string()),
            ("k", &sp.k.to_string()),
            ("n", &sp.n.max(1).to_string()),
            ("mn", &(sp.m * sp.n).max(1).to_string()),
            ("count", &count.to_string()),
            ("how", how),
            ("bindings", &b.decls),
            ("requant", &fun),
            ("batch", &batch),
            ("za", &za),
            ("zb", &zb),
            ("store", &st),
        ],
    )?;
    Ok(b.kernel(name, source, count))
}

/// ConvInteger or QLinearConv.
fn conv(site: &Site, name: &str, sp: &IntConvSpec) -> Result<WgslKernel> {
    let count = count32(site, sp.count)?;
    let mut b = Binds::new(site);
    b.read("x", sp.x.v, sp.x.dt)?;
    b.read("w", sp.w.v, sp.w.dt)?;
    let zx = zero_point(&mut b, &sp.x, "x_zero", "0u")?;
    let zw = zero_point(&mut b, &sp.w, "w_zero", "oc")?;
    let acc0 = match sp.bias {
        Some(v) => {
            b.read("bias", v, DType::I32)?;
            "bitcast<u32>(bias[oc])"
        }
        None => "0u",
    };
    let rq = match &sp.requant {
        Some(rq) => Some((rq, requant(&mut b, rq, ("0u", "oc"))?)),
        None => None,
    };
    let yt = b.write("y", sp.out, sp.out_dt)?;
    let mut coords = String::new();
    let mut taps = String::new();
    let mut in_stride = 1usize;
    for (d, dim) in sp.dims.iter().enumerate().rev() {
        coords += &format!(
            "        let o{d} = r % {o}u;\n        r = r / {o}u;\n",
            o = dim.out.max(1)
        );
        taps += &format!(
            "                let k{d} = tr % {k}u;\n                tr = tr / {k}u;\n                \
             let p{d} = i32(o{d} * {s}u + k{d} * {dl}u) - {pb}i;\n                \
             ok = ok && p{d} >= 0i && p{d} < {inp}i;\n                at = at + p{d} * {in_stride}i;\n",
            k = dim.kernel,
            s = dim.stride,
            dl = dim.dilation,
            pb = dim.pad_begin,
            inp = dim.input,
        );
        in_stride *= dim.input;
    }
    if i32::try_from(in_stride).is_err() || i32::try_from(sp.count).is_err() {
        return Err(site.unsupported("planes of 2^31 elements or more"));
    }
    let (fun, how, st) = match &rq {
        None => (String::new(), "", store(yt, None)),
        Some((rq, (f, mult, zy))) => (
            f.clone(),
            ", the bias added, then requantized",
            store(yt, Some((rq, mult, zy))),
        ),
    };
    let source = fill(
        CONV,
        &[
            ("enable", super::enable_f16(b.f16)),
            ("what", site.op),
            ("spatial", &sp.dims.len().to_string()),
            ("m", &sp.m.max(1).to_string()),
            ("group", &sp.group.to_string()),
            ("cg", &sp.cg().to_string()),
            ("taps", &sp.taps().to_string()),
            ("how", how),
            ("bindings", &b.decls),
            ("requant", &fun),
            ("count", &count.to_string()),
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
    Ok(b.kernel(name, source, count))
}
