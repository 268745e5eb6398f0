//! DFT and STFT in WGSL ([`crate::lower::spectral`]): one invocation per output bin
//! sums the lane's terms directly, the same algorithm and index arithmetic as the
//! CUDA kernel (`cuda/spectral.rs`); f32 and f16 data (u32 indices: products
//! `j * k` must fit, so the transform length is bounded).

use super::syntax::Wgsl;
use super::types::store;
use super::WgslKernel;
use crate::lower::spectral::SpectralSpec;
use crate::template::fill_owned;
use crate::twin::spectral::fills;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("spectral.wgsl");

/// The longest transform: `j * k` and `4 * q` stay below 2^32.
const MAX_N: usize = 1 << 15;

/// Emits the shader of DFT or STFT spec `sp`.
pub fn emit(sp: &SpectralSpec, name: &str) -> Result<WgslKernel> {
    let site = &sp.site;
    let float = |dt: DType| match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(site.unsupported(&format!("{other} data"))),
    };
    let t = float(sp.dtype)?;
    let wt = sp.window.map(|(_, wdt)| float(wdt)).transpose()?;
    if sp.n > MAX_N {
        return Err(site.unsupported(&format!("a transform longer than {MAX_N}")));
    }
    let total = u32::try_from(sp.bins_total() * sp.out_comps)
        .map_err(|_| site.unsupported("more than 2^32 elements"))?;
    let mut inputs = vec![sp.x.0];
    let wbinding = match (sp.window, wt) {
        (Some((w, _)), Some(wt)) => {
            inputs.push(w.0);
            format!("@group(0) @binding(1) var<storage, read> w: array<{wt}>;\n")
        }
        (Some(_), None) | (None, Some(_)) | (None, None) => String::new(),
    };
    let mut values = fills(sp, &Wgsl::PLAIN, &|v| store(sp.dtype, v));
    values.extend([
        (
            "enable",
            super::enable_f16(t == "f16" || wt == Some("f16")).to_string(),
        ),
        ("t", t.to_string()),
        ("wbinding", wbinding),
        ("obinding", inputs.len().to_string()),
    ]);
    let source = fill_owned(TEMPLATE, &values)?;
    Ok(WgslKernel::flat(
        name,
        &site.node,
        source,
        total,
        inputs,
        vec![sp.out.0],
    ))
}
