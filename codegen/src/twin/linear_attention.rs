//! LinearAttention ([`crate::lower::linear_attention`]) for both writers: the values
//! their templates (`linear_attention.cu`, `linear_attention.wgsl`) are filled with,
//! the decay, delta-rule and state steps spelled in each backend's [`Syntax`].

use super::Syntax;
use crate::lower::linear_attention::LinearAttentionSpec;

/// The template values both backends fill the same way, by name; `store` spells an f32
/// value as an element of a dtype.
pub fn fills(
    sp: &LinearAttentionSpec,
    sx: &dyn Syntax,
    store: &dyn Fn(gopt_ir::DType, &str) -> String,
) -> Vec<(&'static str, String)> {
    let past = match sp.past {
        Some(_) => sx.load_f32(&format!(
            "past[(bg * {} + d) * {} + j]",
            sx.index(sp.dk),
            sx.index(sp.dv)
        )),
        None => sx.fl("0.0"),
    };
    let state = match sp.state {
        Some(x) => {
            let at = format!(
                "state[(bg * {} + d) * {} + j]",
                sx.index(sp.dk),
                sx.index(sp.dv)
            );
            format!(
                "{}        {} {{\n            {at} = {};\n        }}\n",
                unroll(sx),
                sx.for_count("d", sp.dk),
                store(x.dtype, "s[d]")
            )
        }
        None => String::new(),
    };
    vec![
        ("rule", sp.rule_name().to_string()),
        ("kv_heads", sp.kv_heads.to_string()),
        ("dk", sp.dk.to_string()),
        ("dv", sp.dv.max(1).to_string()),
        ("group", sp.group().to_string()),
        ("steps", sp.steps.to_string()),
        ("past", past),
        ("kw", (sp.kv_heads * sp.dk).to_string()),
        ("decay", decay_step(sp, sx)),
        ("delta", delta_step(sp, sx)),
        ("qw", (sp.q_heads * sp.dk).to_string()),
        ("ow", (sp.q_heads * sp.dv).to_string()),
        (
            "store_out",
            store(sp.out.dtype, &format!("{} * o", sx.f32(sp.scale))),
        ),
        ("state", state),
    ]
}

/// The unroll line (unindented, as the CUDA kernels spell it), or nothing.
fn unroll(sx: &dyn Syntax) -> String {
    sx.unroll().map_or(String::new(), |u| format!("{u}\n"))
}

/// The step that scales the state's rows by `exp(decay)` (nothing without a gate).
fn decay_step(sp: &LinearAttentionSpec, sx: &dyn Syntax) -> String {
    const IN: &str = "            ";
    let each = format!("{}{IN}{}", unroll(sx), sx.for_count("d", sp.dk));
    match sp.decay {
        None => String::new(),
        Some(d) if d.per_key => format!(
            "{each} {{\n{IN}    s[d] = s[d] * {};\n{IN}}}\n",
            sx.math(super::Math::Exp, &sx.load_f32("decay[kb + d]"))
        ),
        Some(_) => {
            let at = format!("decay[row * {} + g]", sx.index(sp.kv_heads));
            let e = sx.math(super::Math::Exp, &sx.load_f32(&at));
            format!(
                "{IN}{}\n{each} {{\n{IN}    s[d] = s[d] * e;\n{IN}}}\n",
                sx.let_(super::Ty::F32, "e", &e)
            )
        }
    }
}

/// The delta rule's correction `u = beta * (u - Sᵀk)` (nothing without it).
fn delta_step(sp: &LinearAttentionSpec, sx: &dyn Syntax) -> String {
    const IN: &str = "            ";
    let Some(be) = sp.beta else {
        return String::new();
    };
    let at = if be.shared {
        "row".to_string()
    } else {
        format!("row * {} + g", sx.index(sp.kv_heads))
    };
    format!(
        "{IN}{}\n{}{IN}{} {{\n{IN}    rt = rt + s[d] * {};\n{IN}}}\n{IN}u = {} * (u - rt);\n",
        sx.var(super::Ty::F32, "rt", &sx.fl("0.0")),
        unroll(sx),
        sx.for_count("d", sp.dk),
        sx.load_f32("k[kb + d]"),
        sx.load_f32(&format!("beta[{at}]")),
    )
}
