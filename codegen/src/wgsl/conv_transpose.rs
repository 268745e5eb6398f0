//! ConvTranspose, Col2Im, MaxUnpool and DeformConv in WGSL, as
//! [`crate::lower::conv_transpose`] reads them; f32 or f16 data, f32 arithmetic, one
//! rounding at the store. The CUDA writer (`cuda/conv_transpose.rs`) is a
//! line-by-line mirror of these shaders.
//!
//! - ConvTranspose and Col2Im are gathers: one invocation per output element
//!   (grid-stride) walks the kernel (block) taps with the bounds baked in and keeps the
//!   taps whose input position divides exactly by the stride inside the input.
//! - MaxUnpool runs in one workgroup: it zeroes the output, then writes the input
//!   elements 256 at a time, in order, each at the position its index names (the last
//!   of equal indices in a batch wins, and later batches overwrite earlier ones: the
//!   interpreter's sequential order). Each index is checked: one outside the
//!   default-sized output raises the node's code in the run's error word.
//! - DeformConv: one invocation per output element sums weight times the bilinear
//!   sample (zero outside the image) at each tap's offset position, times the mask.

use super::syntax::Wgsl;
use super::WgslKernel;
use crate::lower::conv_transpose::{
    walk, Col2ImSpec, ConvTransposeSpec, DeformConvSpec, Form, MaxUnpoolSpec, Spec, TapDim,
};
use crate::lower::support::Site;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const CONV_TRANSPOSE: &str = include_str!("conv_transpose.wgsl");
const COL2IM: &str = include_str!("conv_transpose_col2im.wgsl");
const UNPOOL: &str = include_str!("conv_transpose_unpool.wgsl");
const DEFORM: &str = include_str!("conv_transpose_deform.wgsl");

/// Emits the shader of a ConvTranspose, Col2Im, MaxUnpool or DeformConv node.
pub fn emit(spec: &Spec, name: &str) -> Result<WgslKernel> {
    let site = &spec.site;
    match &spec.form {
        Form::ConvTranspose(s) => conv_transpose(site, name, s),
        Form::Col2Im(s) => col2im(site, name, s),
        Form::MaxUnpool(s) => max_unpool(site, name, s),
        Form::DeformConv(s) => deform_conv(site, name, s),
    }
}

/// The WGSL storage type of float data of `dt`.
fn float_type(site: &Site, dt: DType) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(site.unsupported(&format!("{other} data"))),
    }
}

/// The output's element count `total` as u32, refusing it, or any of the operands'
/// sizes in `others`, where WGSL's u32 (and i32 coordinate) arithmetic cannot index.
fn check_size(site: &Site, total: usize, others: &[usize]) -> Result<u32> {
    if others.iter().any(|&s| s >= 1 << 31) {
        return Err(site.unsupported("tensors of 2^31 elements or more"));
    }
    u32::try_from(total)
        .ok()
        .filter(|&t| t < 1 << 31)
        .ok_or_else(|| site.unsupported("tensors of 2^31 elements or more"))
}

/// Storage bindings in order: the read-only ones (name, element type), then the
/// read-write ones.
fn bindings(reads: &[(&str, &str)], writes: &[(&str, &str)]) -> String {
    let read = reads.iter().map(|(n, t)| ("read", *n, *t));
    let write = writes.iter().map(|(n, t)| ("read_write", *n, *t));
    read.chain(write)
        .enumerate()
        .map(|(k, (access, n, t))| {
            format!("@group(0) @binding({k}) var<storage, {access}> {n}: array<{t}>;\n")
        })
        .collect()
}

/// Statements (indented eight spaces) decoding flat index `i` into the output
/// coordinates `o0..` of `dims` (as i32, innermost last), leaving the rest in `r`.
fn decode(dims: &[TapDim]) -> String {
    let mut s = String::from("        var r: u32 = i;\n");
    for (a, d) in dims.iter().enumerate().rev() {
        s += &format!(
            "        let o{a} = i32(r % {o}u); r = r / {o}u;\n",
            o = d.out
        );
    }
    s
}

/// ConvTranspose: the gather over the group's input channels and the kernel taps.
fn conv_transpose(site: &Site, name: &str, sp: &ConvTransposeSpec) -> Result<WgslKernel> {
    let t = float_type(site, sp.dtype)?;
    let (_, pin, taps) = sp.planes();
    let total = check_size(
        site,
        sp.total(),
        &[sp.n * sp.c * pin, sp.c * sp.mg() * taps],
    )?;
    let mut reads = vec![("x", t), ("w", t)];
    let mut inputs = vec![sp.x.0, sp.w.0];
    if let Some(b) = sp.bias {
        reads.push(("b", t));
        inputs.push(b.0);
    }
    let walk = walk(&sp.dims, &Wgsl::PLAIN, 3, |io, ko| {
        format!("acc = acc + f32(x[xb + u32({io})]) * f32(w[wb + u32({ko})]);")
    });
    let bias = match sp.bias {
        Some(_) => " + f32(b[m])",
        None => "",
    };
    let source = fill(
        CONV_TRANSPOSE,
        &[
            ("enable", super::enable_f16(t == "f16")),
            ("rank", &sp.dims.len().to_string()),
            ("group", &sp.group.to_string()),
            ("bindings", &bindings(&reads, &[("out", t)])),
            ("total", &total.to_string()),
            ("decode", &decode(&sp.dims)),
            ("m", &sp.m.to_string()),
            ("mg", &sp.mg().to_string()),
            ("cg", &sp.cg().to_string()),
            ("c", &sp.c.to_string()),
            ("pin", &pin.to_string()),
            ("taps", &taps.to_string()),
            ("walk", &walk),
            ("t", t),
            ("bias", bias),
        ],
    )?;
    Ok(WgslKernel::flat(
        name,
        &site.node,
        source,
        total,
        inputs,
        vec![sp.out.0],
    ))
}

/// Col2Im: the gather over the block taps of each channel.
fn col2im(site: &Site, name: &str, sp: &Col2ImSpec) -> Result<WgslKernel> {
    let t = float_type(site, sp.dtype)?;
    let (_, cols, taps) = sp.planes();
    let total = check_size(site, sp.total(), &[sp.n * sp.c * taps * cols])?;
    let walk = walk(&sp.dims, &Wgsl::PLAIN, 2, |io, ko| {
        format!("acc = acc + f32(x[xb + u32({ko}) * {cols}u + u32({io})]);")
    });
    let source = fill(
        COL2IM,
        &[
            ("enable", super::enable_f16(t == "f16")),
            ("rank", &sp.dims.len().to_string()),
            ("bindings", &bindings(&[("x", t)], &[("out", t)])),
            ("total", &total.to_string()),
            ("decode", &decode(&sp.dims)),
            ("block", &(taps * cols).to_string()),
            ("walk", &walk),
            ("t", t),
        ],
    )?;
    Ok(WgslKernel::flat(
        name,
        &site.node,
        source,
        total,
        vec![sp.x.0],
        vec![sp.out.0],
    ))
}

/// Statements (indented sixteen spaces) decoding the checked flat position `f` in the
/// default-sized output along its axes and setting `at` to the position in Y, unless
/// Y's shape cuts it off.
fn unpool_place(sp: &MaxUnpoolSpec) -> String {
    let mut place = String::from(
        "                var rr: u32 = u32(f);\n                var p: u32 = 0u;\n                var inside = true;\n",
    );
    for (inferred, target, stride) in sp.axes_rev() {
        place += &format!("                {{ let q = rr % {inferred}u; rr = rr / {inferred}u;");
        if inferred > target {
            place += &format!(" if (q >= {target}u) {{ inside = false; }}");
        }
        place += &format!(" p = p + q * {stride}u; }}\n");
    }
    place + "                if (inside) { at = p; }\n"
}

/// MaxUnpool: one workgroup zeroes the output, then places the input in order.
fn max_unpool(site: &Site, name: &str, sp: &MaxUnpoolSpec) -> Result<WgslKernel> {
    let dt = sp.dtype;
    let (t, _) = super::storage_type(dt).ok_or_else(|| site.unsupported(&format!("{dt} data")))?;
    let it = super::bounds::index_type(sp.index_dtype)
        .ok_or_else(|| site.unsupported(&format!("{} indices", sp.index_dtype)))?;
    let total = check_size(site, sp.total(), &[sp.len, sp.inferred_len()])?;
    let len = sp.inferred_len();
    if i32::try_from(len).is_err() {
        return Err(site.unsupported("an axis of 2^31 elements or more"));
    }
    let check = IndexCheck {
        code: sp.code,
        op: site.op.into(),
        what: sp.out_of_range(),
    };
    let load = if sp.index_dtype == DType::I64 {
        "            let fw = idx[j];\n            var f: i32 = bitcast<i32>(fw.x);\n            \
             if (fw.y != select(0u, 0xffffffffu, f < 0i)) { f = -1i; }\n"
            .to_string()
    } else {
        "            let f: i32 = idx[j];\n".to_string()
    };
    let source = fill(
        UNPOOL,
        &[
            ("enable", super::enable_f16(t == "f16")),
            (
                "bindings",
                &bindings(&[("x", t), ("idx", it)], &[("out", t)]),
            ),
            ("err", &super::bounds::error_binding(3)),
            ("t", t),
            ("total", &total.to_string()),
            ("len", &sp.len.to_string()),
            ("load", &load),
            ("limit", &len.to_string()),
            ("code", &check.code.to_string()),
            ("place", &unpool_place(sp)),
        ],
    )?;
    Ok(WgslKernel {
        index_check: Some(check),
        ..WgslKernel::one_workgroup(
            name,
            &site.node,
            source,
            vec![sp.x.0, sp.indices.0],
            vec![sp.out.0],
        )
    })
}

/// DeformConv: bilinear samples at offset positions, weighted and summed.
fn deform_conv(site: &Site, name: &str, sp: &DeformConvSpec) -> Result<WgslKernel> {
    let t = float_type(site, sp.dtype)?;
    let (h, w) = sp.hw;
    let (oh, ow) = sp.o;
    let total = check_size(
        site,
        sp.total(),
        &[
            sp.n * sp.c * h * w,
            sp.n * sp.offset_group * sp.taps() * 2 * oh * ow,
            sp.m * sp.cg() * sp.taps(),
        ],
    )?;
    let mut reads = vec![("x", t), ("w", t), ("off", t)];
    let mut inputs = vec![sp.x.0, sp.w.0, sp.offset.0];
    if let Some(b) = sp.bias {
        reads.push(("b", t));
        inputs.push(b.0);
    }
    if let Some(mk) = sp.mask {
        reads.push(("mask", t));
        inputs.push(mk.0);
    }
    let p = oh * ow;
    let mask = match sp.mask {
        Some(_) => format!("                    v = v * f32(mask[(ob + tap) * {p}u + q]);\n"),
        None => String::new(),
    };
    let bias = match sp.bias {
        Some(_) => " + f32(b[m])",
        None => "",
    };
    let s = |v: usize| v.to_string();
    let source = fill(
        DEFORM,
        &[
            ("enable", super::enable_f16(t == "f16")),
            ("bindings", &bindings(&reads, &[("out", t)])),
            ("h", &s(h)),
            ("w", &s(w)),
            ("total", &total.to_string()),
            ("oh", &s(oh)),
            ("ow", &s(ow)),
            ("m", &s(sp.m)),
            ("mg", &s(sp.mg())),
            ("cg", &s(sp.cg())),
            ("c", &s(sp.c)),
            ("cog", &s(sp.cog())),
            ("og", &s(sp.offset_group)),
            ("taps", &s(sp.taps())),
            ("kh", &s(sp.k.0)),
            ("kw", &s(sp.k.1)),
            ("p", &s(p)),
            ("sh", &s(sp.stride.0)),
            ("sw", &s(sp.stride.1)),
            ("dh", &s(sp.dilation.0)),
            ("dw", &s(sp.dilation.1)),
            ("ph", &s(sp.pad.0)),
            ("pw", &s(sp.pad.1)),
            ("mask", &mask),
            ("t", t),
            ("bias", bias),
        ],
    )?;
    Ok(WgslKernel::flat(
        name,
        &site.node,
        source,
        total,
        inputs,
        vec![sp.out.0],
    ))
}
