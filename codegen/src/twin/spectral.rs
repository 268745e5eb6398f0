//! DFT and STFT ([`crate::lower::spectral`]) for both writers: the values their
//! templates (`cuda/spectral.cu`, `wgsl/spectral.wgsl`) are filled with, the lane's
//! loads spelled in each backend's [`Syntax`].

use super::{Syntax, Ty};
use crate::lower::spectral::SpectralSpec;

/// The template values both backends fill the same way, by name; `store` spells an f32
/// value as an output element.
pub fn fills(
    sp: &SpectralSpec,
    sx: &dyn Syntax,
    store: &dyn Fn(&str) -> String,
) -> Vec<(&'static str, String)> {
    let scaled = |v: &str| store(&format!("{v} * {}", sx.f32(sp.scale)));
    let store_im = if sp.out_comps == 2 {
        format!(
            "        out[b * {} + {}] = {};\n",
            sx.index(2),
            sx.index(1),
            scaled("acc_im")
        )
    } else {
        String::new()
    };
    // The Hermitian lane has all n elements; the others only the `valid` read ones.
    let lanes = if sp.hermitian {
        sp.n
    } else {
        sp.valid.min(sp.n)
    };
    vec![
        ("what", sp.site.op.to_string()),
        ("total", sp.bins_total().to_string()),
        ("inner", sp.inner.max(1).to_string()),
        ("bins", sp.bins.max(1).to_string()),
        ("frames", sp.frames.max(1).to_string()),
        ("outer_stride", sp.outer_stride.to_string()),
        ("frame_stride", sp.frame_stride.to_string()),
        ("lanes", lanes.to_string()),
        ("lane", lane(sp, sx)),
        ("n", sp.n.max(1).to_string()),
        ("sign", if sp.inverse { "" } else { "-" }.to_string()),
        ("out_comps", sp.out_comps.to_string()),
        ("store_re", scaled("acc_re")),
        ("store_im", store_im),
    ]
}

/// How lane element `j` (or, for the Hermitian lane, its mirror) is loaded into `re`
/// and `im`.
fn lane(sp: &SpectralSpec, sx: &dyn Syntax) -> String {
    const IN: &str = "            ";
    let e = format!("(base + jj * {})", sx.index(sp.lane_stride));
    let re = sx.load_f32(&format!("x[{e} * {}]", sx.index(sp.comps)));
    let im = if sp.comps == 2 {
        sx.load_f32(&format!("x[{e} * {} + {}]", sx.index(2), sx.index(1)))
    } else {
        sx.fl("0.0")
    };
    let mut s = String::new();
    if sp.hermitian {
        let mirrored = format!("j >= {}", sx.index(sp.n / 2 + 1));
        let jj = sx.select("mirrored", &format!("{} - j", sx.index(sp.n)), "j");
        s += &format!(
            "{IN}{}\n{IN}{}\n",
            sx.let_(Ty::Bool, "mirrored", &mirrored),
            sx.let_(Ty::Index, "jj", &jj)
        );
    } else {
        s += &format!("{IN}{}\n", sx.let_(Ty::Index, "jj", "j"));
    }
    s += &format!(
        "{IN}{}\n{IN}{}\n{IN}if (jj < {}) {{ re = {re}; im = {im}; }}\n",
        sx.var(Ty::F32, "re", &sx.fl("0.0")),
        sx.var(Ty::F32, "im", &sx.fl("0.0")),
        sx.index(sp.valid),
    );
    if sp.hermitian {
        s += &format!("{IN}if (mirrored) {{ im = -im; }}\n");
    }
    if sp.window.is_some() {
        s += &format!(
            "{IN}{}\n{IN}re = re * wj;\n{IN}im = im * wj;\n",
            sx.let_(Ty::F32, "wj", &sx.load_f32("w[jj]"))
        );
    }
    s
}
