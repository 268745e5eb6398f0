//! DFT and STFT in CUDA ([`crate::lower::spectral`]): one thread per output bin sums
//! the lane's terms directly; the lane (DFT's axis, the Hermitian extension of an
//! inverse one-sided DFT, or an STFT frame times its window) is read in place.

use super::elementwise::storage;
use super::support::{flit, store};
use super::Kernel;
use crate::lower::spectral::{spec, SpectralSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::{Graph, Node};

const TEMPLATE: &str = include_str!("spectral.cu");

/// How lane element `j` (or, for the Hermitian lane, its mirror) is loaded into
/// `re` and `im`.
fn lane(sp: &SpectralSpec) -> String {
    let comps = sp.comps;
    let load = |e: &str| {
        let im = if comps == 2 {
            format!("gopt_ld(x[({e}) * 2LL + 1])")
        } else {
            "0.0f".into()
        };
        (format!("gopt_ld(x[({e}) * {comps}LL])"), im)
    };
    let (re, im) = load(&format!("base + jj * {}LL", sp.lane_stride));
    let mut s = String::new();
    if sp.hermitian {
        s += &format!(
            "            const bool mirrored = j >= {half}LL;\n            const long long jj = mirrored ? {n}LL - j : j;\n",
            half = sp.n / 2 + 1,
            n = sp.n
        );
    } else {
        s += "            const long long jj = j;\n";
    }
    s += &format!(
        "            float re = 0.0f, im = 0.0f;\n            if (jj < {valid}LL) {{ re = {re}; im = {im}; }}\n",
        valid = sp.valid
    );
    if sp.hermitian {
        s += "            if (mirrored) im = -im;\n";
    }
    if sp.window.is_some() {
        s += "            const float wj = gopt_ld(w[jj]);\n            re *= wj;\n            im *= wj;\n";
    }
    s
}

/// Emits the kernel for DFT or STFT node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let sp = spec(g, node)?;
    let t = storage(sp.dtype);
    let mut params = vec![format!("const {t}* __restrict__ x")];
    let mut inputs = vec![sp.x.0];
    if let Some((w, wdt)) = sp.window {
        params.push(format!("const {}* __restrict__ w", storage(wdt)));
        inputs.push(w.0);
    }
    params.push(format!("{t}* __restrict__ out"));
    let scaled = |v: &str| store(sp.dtype, &format!("{v} * {}", flit(sp.scale)));
    let store_im = if sp.out_comps == 2 {
        format!("        out[b * 2LL + 1] = {};\n", scaled("acc_im"))
    } else {
        String::new()
    };
    // The Hermitian lane has all n elements; the others only the `valid` read ones.
    let lanes = if sp.hermitian {
        sp.n
    } else {
        sp.valid.min(sp.n)
    };
    let source = fill(
        TEMPLATE,
        &[
            ("what", node.op.name()),
            ("name", name),
            ("params", &params.join(", ")),
            ("total", &sp.bins_total().to_string()),
            ("inner", &sp.inner.max(1).to_string()),
            ("bins", &sp.bins.max(1).to_string()),
            ("frames", &sp.frames.max(1).to_string()),
            ("outer_stride", &sp.outer_stride.to_string()),
            ("frame_stride", &sp.frame_stride.to_string()),
            ("lanes", &lanes.to_string()),
            ("lane", &lane(&sp)),
            ("n", &sp.n.max(1).to_string()),
            ("sign", if sp.inverse { "" } else { "-" }),
            ("out_comps", &sp.out_comps.to_string()),
            ("store_re", &scaled("acc_re")),
            ("store_im", &store_im),
        ],
    )?;
    Ok(Kernel::flat(
        name,
        &node.name,
        source,
        sp.bins_total(),
        inputs,
        vec![sp.out.0],
    ))
}
