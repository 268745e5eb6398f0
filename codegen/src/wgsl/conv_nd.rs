//! Conv and FusedConv of 3 spatial dims in WGSL: a direct shader, one invocation per
//! output element summing its group's input channels × kernel taps in f32, with strides,
//! dilations, begin pads, groups, NCDHW or channels-last, and FusedConv's epilogue (bias,
//! activation, broadcast residual in the node's order), one rounding at the store. The
//! node is read by [`crate::lower::conv_nd`], as on CUDA, whose kernel mirrors this one
//! line by line (the index arithmetic both print is [`ConvNdSpec`]'s, in the WGSL
//! [`Wgsl`] syntax). f32/f16 storage (bf16 has no WGSL form and is refused); sizes are
//! baked into the source so the index math divides by constants, in u32 (tensors below
//! 2^31 elements).

use super::syntax::Wgsl;
use super::types::helpers_for;
use super::WgslKernel;
use crate::lower::conv_nd::ConvNdSpec;
use crate::template::fill_owned;
use crate::Result;
use gopt_ir::ops::fused::Activation;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("conv_nd.wgsl");

/// The WGSL storage type of a float operand.
fn storage(s: &ConvNdSpec, dt: DType, what: &str) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(s.site.unsupported(&format!("{other} {what}"))),
    }
}

/// A finite f32 literal of clip bound `v`.
fn lit(v: f64) -> String {
    format!("{:?}", v as f32)
}

/// `act(v)` for the f32 variable `v`, as a statement (NaN stays NaN through relu and
/// clip, as in the IR's `Activation::apply`; an infinite clip bound clamps nothing).
fn activation(act: Activation) -> String {
    match act {
        Activation::None => String::new(),
        Activation::Relu => "v = select(v, 0.0, v <= 0.0);".into(),
        Activation::Clip { lo, hi } => {
            let mut s = Vec::new();
            if lo > f64::NEG_INFINITY {
                s.push(format!("v = select(v, {}, v < {});", lit(lo), lit(lo)));
            }
            if hi < f64::INFINITY {
                s.push(format!("v = select(v, {}, v > {});", lit(hi), lit(hi)));
            }
            s.join(" ")
        }
        Activation::Silu => "v = v * gopt_sigmoid(v);".into(),
        Activation::Sigmoid => "v = gopt_sigmoid(v);".into(),
        Activation::Tanh => "v = gopt_tanh(v);".into(),
        Activation::Gelu => "v = 0.5 * v * (1.0 + gopt_erf(v * 0.70710678118654752));".into(),
        Activation::GeluTanh => {
            "v = 0.5 * v * (1.0 + gopt_tanh(0.79788456080286536 * (v + 0.044715 * v * v * v)));"
                .into()
        }
    }
}

/// The bindings: x, w, bias?, res? (read), y (read-write); and whether any is f16.
fn bindings(s: &ConvNdSpec, ost: &str) -> Result<(String, bool)> {
    let mut operands = vec![("x", s.x_dt, "convolutions"), ("w", s.x_dt, "convolutions")];
    operands.extend(s.bias.map(|b| ("bias", b.dtype, "biases")));
    operands.extend(
        s.residual
            .as_ref()
            .map(|r| ("res", r.operand.dtype, "residuals")),
    );
    let mut lines = Vec::new();
    for (i, &(v, dt, what)) in operands.iter().enumerate() {
        let t = storage(s, dt, what)?;
        lines.push(format!(
            "@group(0) @binding({i}) var<storage, read> {v}: array<{t}>;"
        ));
    }
    lines.push(format!(
        "@group(0) @binding({}) var<storage, read_write> y: array<{ost}>;",
        operands.len()
    ));
    let f16 = ost == "f16" || operands.iter().any(|o| o.1 == DType::F16);
    Ok((lines.join("\n"), f16))
}

/// Emits the shader for a Conv or FusedConv node of 3 spatial dims.
pub fn emit(s: &ConvNdSpec, name: &str) -> Result<WgslKernel> {
    let ost = storage(s, s.out_dt, "outputs")?;
    let (bindings, f16) = bindings(s, ost)?;
    if s.largest() >= 1 << 31 {
        return Err(s.site.unsupported("tensors of 2^31 elements or more"));
    }
    let epilogue = s.epilogue(&Wgsl::PLAIN, activation(s.act), format!("y[i] = {ost}(v);"));
    let total = s.total();
    let mut holes = s.holes(&Wgsl::PLAIN);
    holes.extend([
        ("enable", super::enable_f16(f16).to_string()),
        ("what", s.site.op.to_string()),
        ("bindings", bindings),
        ("helpers", helpers_for(&epilogue)),
        ("epilogue", epilogue),
    ]);
    let source = fill_owned(TEMPLATE, &holes)?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: s.site.node.clone(),
        source,
        workgroups: [
            u32::try_from(total.div_ceil(super::WORKGROUP as usize).clamp(1, 65535))
                .unwrap_or(65535),
            1,
            1,
        ],
        inputs: s.inputs(),
        outputs: vec![s.y.0],
        index_check: None,
        loop_iterations: None,
    })
}
