//! CumSum and CumProd in CUDA ([`crate::lower::cumulative`]): one thread per lane along
//! the axis scans it once, in the reference's order, floats in f32 (f64 in double) with
//! one rounding per stored element, integers in 64-bit wrapping arithmetic truncated to
//! their width (exact, as on the CPU). An axis computed on the device is read from its
//! one-element input; one outside the rank raises the node's code in the run's error
//! word and scans the last axis instead, never reading outside the dims.

use super::elementwise::storage;
use super::support::store;
use super::Kernel;
use crate::lower::cumulative::{ScanAxis, Spec};
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("cumulative.cu");

/// Emits the kernel of spec `sp`.
pub fn emit(sp: &Spec, name: &str) -> Result<Kernel> {
    let dt = sp.dtype;
    let t = storage(dt);
    let (ct, load) = if dt == DType::F64 {
        ("double", "x[at]")
    } else if dt.is_float() {
        ("float", "gopt_ld(x[at])")
    } else {
        ("unsigned long long", "(unsigned long long)x[at]")
    };
    let (init, op) = if sp.prod { ("1", "*") } else { ("0", "+") };
    let mut params = vec![format!("const {t}* __restrict__ x")];
    let mut inputs = vec![sp.x.0];
    let mut check = None;
    let axis = match sp.axis {
        ScanAxis::Const { d, inner } => {
            format!("    const long long d = {d}LL, inner = {inner}LL;\n")
        }
        ScanAxis::Input { value, dtype } => {
            params.push(format!("const {}* __restrict__ ax", storage(dtype)));
            inputs.push(value.0);
            let rank = sp.shape.len();
            let c = IndexCheck {
                code: sp.code,
                op: sp.site.op.into(),
                what: format!("an axis out of range for rank {rank}"),
            };
            let dims: Vec<String> = sp.shape.iter().map(|d| format!("{d}LL")).collect();
            let code = format!(
                "    const long long dims[{rank}] = {{{}}};\n    long long a = (long long)ax[0];\n    if (a < 0) a += {rank}LL;\n    if (a < 0 || a >= {rank}LL) {{\n        if (blockIdx.x == 0 && threadIdx.x == 0) atomicMax(gopt_err, {}u);\n        a = {}LL;\n    }}\n    const long long d = dims[a];\n    long long inner = 1;\n    for (long long k = a + 1; k < {rank}LL; ++k) inner *= dims[k];\n",
                dims.join(", "),
                c.code,
                rank - 1
            );
            check = Some(c);
            code
        }
    };
    params.push(format!("{t}* __restrict__ out"));
    if check.is_some() {
        params.push("unsigned int* __restrict__ gopt_err".into());
    }
    let kept = if sp.exclusive { "acc" } else { "next" };
    let source = fill(
        TEMPLATE,
        &[
            ("what", sp.site.op),
            ("mode", sp.mode()),
            (
                "how",
                if ct == "unsigned long long" {
                    "integers wrapped to their width"
                } else {
                    "one rounding per stored element"
                },
            ),
            ("name", name),
            ("params", &params.join(", ")),
            ("axis", &axis),
            ("n", &sp.n.to_string()),
            ("ct", ct),
            ("init", init),
            ("reverse", if sp.reverse { "true" } else { "false" }),
            ("op", op),
            ("load", load),
            ("store", &store(dt, kept)),
        ],
    )?;
    Ok(Kernel {
        index_check: check,
        ..Kernel::flat(name, &sp.site.node, source, sp.n, inputs, vec![sp.out.0])
    })
}
