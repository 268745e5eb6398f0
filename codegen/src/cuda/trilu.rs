//! Trilu in CUDA ([`crate::lower::trilu`]): one thread per element keeps it or writes
//! zero, data of any dtype copied as stored; the diagonal `k` is a literal, or read on
//! the device from its one-element i64 input.

use super::elementwise::storage;
use super::support::{one_output, store};
use super::Kernel;
use crate::lower::trilu::{Diagonal, Spec};
use crate::template::fill;
use crate::Result;

const TEMPLATE: &str = include_str!("trilu.cu");

/// A diagonal this far out keeps or drops the same elements as any farther one (and its
/// literal, unlike `i64::MIN`'s, is valid C).
const FAR: i64 = 1 << 62;

/// Emits the kernel of Trilu spec `sp`.
pub fn emit(sp: &Spec, name: &str) -> Result<Kernel> {
    let t = storage(sp.dtype);
    let mut params = vec![format!("const {t}* __restrict__ x")];
    let mut inputs = vec![sp.x.0];
    let k = match sp.k {
        Diagonal::Const(k) => format!("    const long long k = {}LL;\n", k.clamp(-FAR, FAR)),
        Diagonal::Input(kv) => {
            params.push("const long long* __restrict__ kin".into());
            inputs.push(kv.0);
            "    const long long k = kin[0];\n".into()
        }
    };
    params.push(format!("{t}* __restrict__ out"));
    let source = fill(
        TEMPLATE,
        &[
            ("what", if sp.upper { "upper" } else { "lower" }),
            ("name", name),
            ("params", &params.join(", ")),
            ("k", &k),
            ("n", &sp.n.to_string()),
            ("h", &sp.h.max(1).to_string()),
            ("w", &sp.w.max(1).to_string()),
            ("cmp", if sp.upper { ">=" } else { "<=" }),
            ("zero", &store(sp.dtype, "0")),
        ],
    )?;
    Ok(one_output(&sp.site, name, source, sp.n, inputs, sp.out))
}
