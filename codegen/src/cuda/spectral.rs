//! DFT and STFT in CUDA ([`crate::lower::spectral`]): one thread per output bin sums
//! the lane's terms directly; the lane (DFT's axis, the Hermitian extension of an
//! inverse one-sided DFT, or an STFT frame times its window) is read in place. The
//! template's values are the WGSL writer's ([`crate::twin::spectral`]).

use super::elementwise::storage;
use super::support::store;
use super::syntax::Cuda;
use super::Kernel;
use crate::lower::spectral::SpectralSpec;
use crate::template::fill_owned;
use crate::twin::spectral::fills;
use crate::Result;

const TEMPLATE: &str = include_str!("spectral.cu");

/// Emits the kernel of DFT or STFT spec `sp`.
pub fn emit(sp: &SpectralSpec, name: &str) -> Result<Kernel> {
    let t = storage(sp.dtype);
    let mut params = vec![format!("const {t}* __restrict__ x")];
    let mut inputs = vec![sp.x.0];
    if let Some((w, wdt)) = sp.window {
        params.push(format!("const {}* __restrict__ w", storage(wdt)));
        inputs.push(w.0);
    }
    params.push(format!("{t}* __restrict__ out"));
    let mut values = fills(sp, &Cuda { name }, &|v| store(sp.dtype, v));
    values.extend([("name", name.to_string()), ("params", params.join(", "))]);
    let source = fill_owned(TEMPLATE, &values)?;
    Ok(Kernel::flat(
        name,
        &sp.site.node,
        source,
        sp.bins_total(),
        inputs,
        vec![sp.out.0],
    ))
}
