//! Conv and FusedConv of 3 spatial dims in CUDA: a direct kernel, one thread per output
//! element summing its group's input channels × kernel taps in f32, with strides,
//! dilations, begin pads, groups, NCDHW or channels-last, and FusedConv's epilogue
//! (bias, activation, broadcast residual in the node's order), one rounding at the
//! store. The node is read by [`crate::lower::conv_nd`]; the kernel is a line-by-line
//! mirror of the WGSL one (same decode, loops, bounds checks and epilogue), so what
//! lavapipe verifies there holds here; the index arithmetic both print is
//! [`ConvNdSpec`]'s, in the CUDA [`Cuda`] syntax. f32/f16/bf16 storage; sizes are baked
//! into the source (offsets in 64-bit integers, tap coordinates in `int`).

use super::elementwise::storage;
use super::support::{activation, store};
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::conv_nd::ConvNdSpec;
use crate::template::fill_owned;
use crate::Result;
use gopt_ir::ops::fused::Activation;

const TEMPLATE: &str = include_str!("conv_nd.cu");

/// The kernel parameter list: x, w, bias?, res?, out.
fn params(s: &ConvNdSpec) -> String {
    let t = storage(s.x_dt);
    let mut p = vec![
        format!("const {t}* __restrict__ x"),
        format!("const {t}* __restrict__ w"),
    ];
    if let Some(b) = s.bias {
        p.push(format!("const {}* __restrict__ bias", storage(b.dtype)));
    }
    if let Some(r) = &s.residual {
        p.push(format!(
            "const {}* __restrict__ res",
            storage(r.operand.dtype)
        ));
    }
    p.push(format!("{}* __restrict__ out", storage(s.out_dt)));
    p.join(", ")
}

/// Emits the kernel for a Conv or FusedConv node of 3 spatial dims.
pub fn emit(s: &ConvNdSpec, name: &str) -> Result<Kernel> {
    let act = if s.act == Activation::None {
        String::new()
    } else {
        format!("v = {};", activation(s.act, "v"))
    };
    let epilogue = s.epilogue(
        &Cuda::PLAIN,
        act,
        format!("out[i] = {};", store(s.out_dt, "v")),
    );
    let mut holes = s.holes(&Cuda::PLAIN);
    holes.extend([
        ("what", s.site.op.to_string()),
        ("name", name.to_string()),
        ("params", params(s)),
        ("epilogue", epilogue),
    ]);
    let source = fill_owned(TEMPLATE, &holes)?;
    Ok(Kernel::flat(
        name,
        &s.site.node,
        source,
        s.total(),
        s.inputs(),
        vec![s.y.0],
    ))
}
