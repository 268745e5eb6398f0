//! DFT and STFT in WGSL ([`crate::lower::spectral`]): one invocation per output bin
//! sums the lane's terms directly, the same algorithm and index arithmetic as the
//! CUDA kernel (`cuda/spectral.rs`); f32 and f16 data (u32 indices: products
//! `j * k` must fit, so the transform length is bounded).

use super::types::{f32_literal, load, store};
use super::{unsupported, WgslKernel};
use crate::lower::spectral::{spec, SpectralSpec};
use crate::template::fill;
use crate::Result;
use gopt_ir::{DType, Graph, Node};

const TEMPLATE: &str = include_str!("spectral.wgsl");

/// The longest transform: `j * k` and `4 * q` stay below 2^32.
const MAX_N: usize = 1 << 15;

/// How lane element `j` (or, for the Hermitian lane, its mirror) is loaded into `re`
/// and `im`.
fn lane(sp: &SpectralSpec) -> String {
    let comps = sp.comps;
    let e = format!("(base + jj * {}u)", sp.lane_stride);
    let re = load(sp.dtype, &format!("x[{e} * {comps}u]"));
    let im = if comps == 2 {
        load(sp.dtype, &format!("x[{e} * 2u + 1u]"))
    } else {
        "0.0".into()
    };
    let mut s = String::new();
    if sp.hermitian {
        s += &format!(
            "            let mirrored = j >= {half}u;\n            let jj = select(j, {n}u - j, mirrored);\n",
            half = sp.n / 2 + 1,
            n = sp.n
        );
    } else {
        s += "            let jj = j;\n";
    }
    s += &format!(
        "            var re = 0.0;\n            var im = 0.0;\n            if (jj < {valid}u) {{ re = {re}; im = {im}; }}\n",
        valid = sp.valid
    );
    if sp.hermitian {
        s += "            if (mirrored) { im = -im; }\n";
    }
    if let Some((_, wdt)) = sp.window {
        s += &format!(
            "            let wj = {};\n            re = re * wj;\n            im = im * wj;\n",
            load(wdt, "w[jj]")
        );
    }
    s
}

/// Emits the shader for DFT or STFT node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let sp = spec(g, node)?;
    let float = |dt: DType| match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(unsupported(node, format!("{other} data"))),
    };
    let t = float(sp.dtype)?;
    let wt = sp.window.map(|(_, wdt)| float(wdt)).transpose()?;
    if sp.n > MAX_N {
        return Err(unsupported(
            node,
            format!("a transform longer than {MAX_N}"),
        ));
    }
    let total = u32::try_from(sp.bins_total() * sp.out_comps)
        .map_err(|_| unsupported(node, "more than 2^32 elements"))?;
    let mut inputs = vec![sp.x.0];
    let wbinding = match (sp.window, wt) {
        (Some((w, _)), Some(wt)) => {
            inputs.push(w.0);
            format!("@group(0) @binding(1) var<storage, read> w: array<{wt}>;\n")
        }
        _ => String::new(),
    };
    let scaled = |v: &str| store(sp.dtype, &format!("{v} * {}", f32_literal(sp.scale)));
    let store_im = if sp.out_comps == 2 {
        format!("        out[b * 2u + 1u] = {};\n", scaled("acc_im"))
    } else {
        String::new()
    };
    let lanes = if sp.hermitian {
        sp.n
    } else {
        sp.valid.min(sp.n)
    };
    let bins = sp.bins_total() as u32;
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(t == "f16" || wt == Some("f16"))),
            ("what", node.op.name()),
            ("t", t),
            ("wbinding", &wbinding),
            ("obinding", &inputs.len().to_string()),
            ("total", &bins.to_string()),
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
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [total.div_ceil(super::WORKGROUP).clamp(1, 65535), 1, 1],
        inputs,
        outputs: vec![sp.out.0],
        index_check: None,
        loop_iterations: None,
    })
}
