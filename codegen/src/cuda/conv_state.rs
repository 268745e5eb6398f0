//! CausalConvWithState in CUDA ([`crate::lower::conv_state`]): one thread per element
//! of `y` (the taps summed over the padded input, bias, the sum rounded to the data's
//! type as the interpreter does, then SiLU) or of the new state (a copy of the padded
//! input's last `k - 1` positions).

use super::elementwise::storage;
use super::support::store;
use super::Kernel;
use crate::lower::conv_state::ConvStateSpec;
use crate::template::fill_owned;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("conv_state.cu");

/// `v` rounded to `dt` and back (the interpreter rounds the sum and the SiLU).
fn round(dt: DType, v: &str) -> String {
    if dt == DType::F16 {
        format!("__half2float(__float2half_rn({v}))")
    } else if dt == DType::BF16 {
        format!("__bfloat162float(__float2bfloat16_rn({v}))")
    } else {
        v.to_string()
    }
}

/// Emits the kernel of a CausalConvWithState node.
pub fn emit(sp: &ConvStateSpec, name: &str) -> Result<Kernel> {
    let t = storage(sp.dtype);
    let mut params = vec![
        format!("const {t}* __restrict__ x"),
        format!("const {t}* __restrict__ w"),
    ];
    let mut inputs = vec![sp.x.0, sp.w.0];
    let mut xparams = vec![format!("const {t}* __restrict__ x")];
    let mut xargs = vec!["x"];
    if let Some(b) = sp.bias {
        params.push(format!("const {t}* __restrict__ bias"));
        inputs.push(b.0);
    }
    let past = match sp.past {
        Some(p) => {
            params.push(format!("const {t}* __restrict__ past"));
            inputs.push(p.0);
            xparams.push(format!("const {t}* __restrict__ past"));
            xargs.push("past");
            format!("gopt_ld(past[bc * {}LL + p])", sp.k - 1)
        }
        None => "0.0f".into(),
    };
    params.push(format!("{t}* __restrict__ y"));
    let mut outputs = vec![sp.y.0];
    if let Some(s) = sp.state {
        params.push(format!("{t}* __restrict__ state"));
        outputs.push(s.0);
    }
    let state = if sp.state.is_some() {
        format!(
            "            const long long s = i - ny;\n            const long long j = s % {km1}LL;\n            const long long bc = s / {km1}LL;\n            state[s] = {};\n",
            store(
                sp.dtype,
                &format!("{name}_padded({}, bc, {}LL + j)", xargs.join(", "), sp.len)
            ),
            km1 = (sp.k - 1).max(1),
        )
    } else {
        String::new()
    };
    let bias = if sp.bias.is_some() {
        "            acc += gopt_ld(bias[c]);\n".to_string()
    } else {
        String::new()
    };
    let silu = if sp.silu {
        format!(
            "            v = {};\n",
            round(sp.dtype, "v * (1.0f / (1.0f + expf(-v)))")
        )
    } else {
        String::new()
    };
    let mut holes = sp.holes();
    holes.extend(
        [
            ("name", name),
            ("xparams", &xparams.join(", ")),
            ("xargs", &xargs.join(", ")),
            ("past", &past),
            ("params", &params.join(", ")),
            ("bias", &bias),
            ("round_acc", &round(sp.dtype, "acc")),
            ("silu", &silu),
            ("store_v", &store(sp.dtype, "v")),
            ("state", &state),
        ]
        .map(|(k, v): (&'static str, &str)| (k, v.to_string())),
    );
    let source = fill_owned(TEMPLATE, &holes)?;
    Ok(Kernel::flat(
        name,
        &sp.site.node,
        source,
        sp.y_elems() + sp.state_elems(),
        inputs,
        outputs,
    ))
}
