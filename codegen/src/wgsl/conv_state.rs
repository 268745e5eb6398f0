//! CausalConvWithState in WGSL ([`crate::lower::conv_state`]): the same algorithm and
//! index arithmetic as the CUDA kernel (`cuda/conv_state.rs`), f32 and f16 data.

use super::types::{load, store};
use super::WgslKernel;
use crate::lower::conv_state::ConvStateSpec;
use crate::template::fill_owned;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("conv_state.wgsl");

/// `v` rounded to `dt` and back (the interpreter rounds the sum and the SiLU).
fn round(dt: DType, v: &str) -> String {
    if dt == DType::F16 {
        format!("f32(f16({v}))")
    } else {
        v.to_string()
    }
}

/// Emits the shader of a CausalConvWithState node.
pub fn emit(sp: &ConvStateSpec, name: &str) -> Result<WgslKernel> {
    let t = match sp.dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        other => return Err(sp.site.unsupported(&format!("{other} data"))),
    };
    let total = u32::try_from(sp.y_elems() + sp.state_elems())
        .map_err(|_| sp.site.unsupported("more than 2^32 elements"))?;
    let mut inputs = vec![sp.x.0, sp.w.0];
    let mut names = vec!["x", "w"];
    if let Some(b) = sp.bias {
        inputs.push(b.0);
        names.push("bias");
    }
    if let Some(p) = sp.past {
        inputs.push(p.0);
        names.push("past");
    }
    let mut bindings: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("@group(0) @binding({i}) var<storage, read> {n}: array<{t}>;"))
        .collect();
    let mut outputs = vec![sp.y.0];
    bindings.push(format!(
        "@group(0) @binding({}) var<storage, read_write> y: array<{t}>;",
        inputs.len()
    ));
    if let Some(s) = sp.state {
        outputs.push(s.0);
        bindings.push(format!(
            "@group(0) @binding({}) var<storage, read_write> state: array<{t}>;",
            inputs.len() + 1
        ));
    }
    let km1 = sp.k - 1;
    let past = if sp.past.is_some() {
        load(sp.dtype, &format!("past[bc * {km1}u + p]"))
    } else {
        "0.0".into()
    };
    let state = if sp.state.is_some() {
        format!(
            "            let s = i - ny;\n            let j = s % {km1p}u;\n            let bc = s / {km1p}u;\n            state[s] = {};\n",
            store(sp.dtype, &format!("padded(bc, {}u + j)", sp.len)),
            km1p = km1.max(1),
        )
    } else {
        String::new()
    };
    let bias = if sp.bias.is_some() {
        format!("            acc = acc + {};\n", load(sp.dtype, "bias[c]"))
    } else {
        String::new()
    };
    let silu = if sp.silu {
        format!(
            "            v = {};\n",
            round(sp.dtype, "v * (1.0 / (1.0 + exp(-v)))")
        )
    } else {
        String::new()
    };
    let mut holes = sp.holes();
    holes.extend(
        [
            ("enable", super::enable_f16(t == "f16")),
            ("bindings", &bindings.join("\n")),
            ("past", &past),
            (
                "load_x",
                &load(sp.dtype, &format!("x[bc * {}u + p - {km1}u]", sp.len)),
            ),
            ("load_w", &load(sp.dtype, &format!("w[c * {}u + j]", sp.k))),
            ("bias", &bias),
            ("round_acc", &round(sp.dtype, "acc")),
            ("silu", &silu),
            ("store_v", &store(sp.dtype, "v")),
            ("state", &state),
        ]
        .map(|(k, v): (&'static str, &str)| (k, v.to_string())),
    );
    let source = fill_owned(TEMPLATE, &holes)?;
    Ok(WgslKernel::flat(
        name,
        &sp.site.node,
        source,
        total,
        inputs,
        outputs,
    ))
}
