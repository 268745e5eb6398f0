//! ConvTranspose, Col2Im, MaxUnpool and DeformConv in CUDA, as
//! [`crate::lower::conv_transpose`] reads them; float data (f32, f16, bf16) computed
//! in f32 with one rounding at the store. Each kernel is a line-by-line mirror of the
//! WGSL writer's shader (`wgsl/conv_transpose.rs`), so both run one algorithm:
//!
//! - ConvTranspose and Col2Im are gathers: one thread per output element (grid-stride)
//!   walks the kernel (block) taps with the bounds baked in and keeps the taps whose
//!   input position divides exactly by the stride inside the input.
//! - MaxUnpool runs in one block of 256: it zeroes the output, then writes the input
//!   elements 256 at a time, in order, each at the position its index names (the last
//!   of equal indices in a batch wins, later batches overwrite earlier ones: the
//!   interpreter's sequential order). Each index is checked
//!   ([`crate::plan::IndexCheck`]): one outside the default-sized output raises the
//!   node's code in the run's error word and is skipped.
//! - DeformConv: one thread per output element sums weight times the bilinear sample
//!   (zero outside the image) at each tap's offset position, times the mask.

use super::elementwise::storage;
use super::support::{one_output, store};
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::conv_transpose::{
    walk, Col2ImSpec, ConvTransposeSpec, DeformConvSpec, Form, MaxUnpoolSpec, Spec, TapDim,
};
use crate::lower::support::Site;
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const CONV_TRANSPOSE: &str = include_str!("conv_transpose.cu");
const COL2IM: &str = include_str!("conv_transpose_col2im.cu");
const UNPOOL: &str = include_str!("conv_transpose_unpool.cu");
const DEFORM: &str = include_str!("conv_transpose_deform.cu");

/// Emits the kernel of a ConvTranspose, Col2Im, MaxUnpool or DeformConv node.
pub fn emit(spec: &Spec, name: &str) -> Result<Kernel> {
    let site = &spec.site;
    match &spec.form {
        Form::ConvTranspose(s) => conv_transpose(site, name, s),
        Form::Col2Im(s) => col2im(site, name, s),
        Form::MaxUnpool(s) => max_unpool(site, name, s),
        Form::DeformConv(s) => deform_conv(site, name, s),
    }
}

/// Kernel parameters: the read-only tensors (name, dtype), then the written ones.
fn params(reads: &[(&str, DType)], writes: &[(&str, DType)]) -> String {
    let read = reads
        .iter()
        .map(|(n, dt)| format!("const {}* __restrict__ {n}", storage(*dt)));
    let write = writes
        .iter()
        .map(|(n, dt)| format!("{}* __restrict__ {n}", storage(*dt)));
    read.chain(write).collect::<Vec<_>>().join(", ")
}

/// Statements (indented eight spaces) decoding flat index `i` into the output
/// coordinates `o0..` of `dims` (innermost last), leaving the rest in `r`.
fn decode(dims: &[TapDim]) -> String {
    let mut s = String::from("        long long r = i;\n");
    for (a, d) in dims.iter().enumerate().rev() {
        s += &format!(
            "        const long long o{a} = r % {o}LL; r /= {o}LL;\n",
            o = d.out
        );
    }
    s
}

/// ConvTranspose: the gather over the group's input channels and the kernel taps.
fn conv_transpose(site: &Site, name: &str, sp: &ConvTransposeSpec) -> Result<Kernel> {
    let dt = sp.dtype;
    let (_, pin, taps) = sp.planes();
    let mut reads = vec![("x", dt), ("w", dt)];
    let mut inputs = vec![sp.x.0, sp.w.0];
    if let Some(b) = sp.bias {
        reads.push(("b", dt));
        inputs.push(b.0);
    }
    let walk = walk(&sp.dims, &Cuda::PLAIN, 3, |io, ko| {
        format!("acc += gopt_ld(x[xb + {io}]) * gopt_ld(w[wb + {ko}]);")
    });
    let bias = match sp.bias {
        Some(_) => "acc + gopt_ld(b[m])",
        None => "acc",
    };
    let source = fill(
        CONV_TRANSPOSE,
        &[
            ("rank", &sp.dims.len().to_string()),
            ("group", &sp.group.to_string()),
            ("name", name),
            ("params", &params(&reads, &[("out", dt)])),
            ("total", &sp.total().to_string()),
            ("decode", &decode(&sp.dims)),
            ("m", &sp.m.to_string()),
            ("mg", &sp.mg().to_string()),
            ("cg", &sp.cg().to_string()),
            ("c", &sp.c.to_string()),
            ("pin", &pin.to_string()),
            ("taps", &taps.to_string()),
            ("walk", &walk),
            ("store", &store(dt, bias)),
        ],
    )?;
    Ok(one_output(site, name, source, sp.total(), inputs, sp.out))
}

/// Col2Im: the gather over the block taps of each channel.
fn col2im(site: &Site, name: &str, sp: &Col2ImSpec) -> Result<Kernel> {
    let dt = sp.dtype;
    let (_, cols, taps) = sp.planes();
    let walk = walk(&sp.dims, &Cuda::PLAIN, 2, |io, ko| {
        format!("acc += gopt_ld(x[xb + ({ko}) * {cols}LL + ({io})]);")
    });
    let source = fill(
        COL2IM,
        &[
            ("rank", &sp.dims.len().to_string()),
            ("name", name),
            ("params", &params(&[("x", dt)], &[("out", dt)])),
            ("total", &sp.total().to_string()),
            ("decode", &decode(&sp.dims)),
            ("block", &(taps * cols).to_string()),
            ("walk", &walk),
            ("store", &store(dt, "acc")),
        ],
    )?;
    let inputs = vec![sp.x.0];
    Ok(one_output(site, name, source, sp.total(), inputs, sp.out))
}

/// Statements (indented sixteen spaces) decoding the checked flat position `f` in the
/// default-sized output along its axes and setting `at` to the position in Y, unless
/// Y's shape cuts it off.
fn unpool_place(sp: &MaxUnpoolSpec) -> String {
    let mut place = String::from(
        "                long long rr = f;\n                long long p = 0;\n                bool inside = true;\n",
    );
    for (inferred, target, stride) in sp.axes_rev() {
        place += &format!(
            "                {{ const long long q = rr % {inferred}LL; rr /= {inferred}LL;"
        );
        if inferred > target {
            place += &format!(" if (q >= {target}LL) inside = false;");
        }
        place += &format!(" p += q * {stride}LL; }}\n");
    }
    place + "                if (inside) at = p;\n"
}

/// MaxUnpool: one block zeroes the output, then places the input in order.
fn max_unpool(site: &Site, name: &str, sp: &MaxUnpoolSpec) -> Result<Kernel> {
    let dt = sp.dtype;
    let code = sp.code;
    let source = fill(
        UNPOOL,
        &[
            ("name", name),
            (
                "params",
                &params(&[("x", dt), ("idx", sp.index_dtype)], &[("out", dt)]),
            ),
            ("t", storage(dt)),
            ("total", &sp.total().to_string()),
            ("len", &sp.len.to_string()),
            ("limit", &sp.inferred_len().to_string()),
            ("code", &code.to_string()),
            ("place", &unpool_place(sp)),
        ],
    )?;
    Ok(Kernel {
        name: name.to_string(),
        node: site.node.clone(),
        source,
        threads: 256,
        vectorized: false,
        inputs: vec![sp.x.0, sp.indices.0],
        outputs: vec![sp.out.0],
        shared_mem: 0,
        grid: 1,
        block: 256,
        index_check: Some(IndexCheck {
            code,
            op: site.op.into(),
            what: sp.out_of_range(),
        }),
    })
}

/// DeformConv: bilinear samples at offset positions, weighted and summed.
fn deform_conv(site: &Site, name: &str, sp: &DeformConvSpec) -> Result<Kernel> {
    let dt = sp.dtype;
    let (h, w) = sp.hw;
    let (oh, ow) = sp.o;
    let mut reads = vec![("x", dt), ("w", dt), ("off", dt)];
    let mut inputs = vec![sp.x.0, sp.w.0, sp.offset.0];
    if let Some(b) = sp.bias {
        reads.push(("b", dt));
        inputs.push(b.0);
    }
    if let Some(mk) = sp.mask {
        reads.push(("mask", dt));
        inputs.push(mk.0);
    }
    let p = oh * ow;
    let mask = match sp.mask {
        Some(_) => format!("                    v = v * gopt_ld(mask[(ob + tap) * {p}LL + q]);\n"),
        None => String::new(),
    };
    let bias = match sp.bias {
        Some(_) => "acc + gopt_ld(b[m])",
        None => "acc",
    };
    let s = |v: usize| v.to_string();
    let source = fill(
        DEFORM,
        &[
            ("name", name),
            ("params", &params(&reads, &[("out", dt)])),
            ("t", storage(dt)),
            ("h", &s(h)),
            ("w", &s(w)),
            ("total", &s(sp.total())),
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
            ("store", &store(dt, bias)),
        ],
    )?;
    Ok(one_output(site, name, source, sp.total(), inputs, sp.out))
}
