//! Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
//! ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum and ReduceLogSumExp over any set
//! of constant axes (the `axes` input or the older attribute, `keepdims`,
//! `noop_with_empty_axes`), and GlobalAveragePool / GlobalMaxPool (the same reductions
//! over every spatial axis); each one's fold comes from [`crate::lower::reduce::ReduceKind::fold`].
//! Accumulation is in f32 (f64 for f64 data) with one rounding at the store. Adjacent axes of the same
//! kind are merged first; when the reduced elements of each output are one contiguous
//! run (trailing axes, the CNN head's mean over H x W) a warp (short runs) or a block
//! (long runs) reduces each with shuffles, so loads are coalesced; otherwise one thread
//! per output loops over its elements. Max and min propagate NaN like the reference
//! interpreter. Bool data takes ReduceMax (any) and ReduceMin (all), folded as 0/1.

use super::elementwise::storage;
use super::support::{blocks, store};
use super::Kernel;
use crate::lower::reduce::{Combine, Finish, Fold, Identity, Map, Spec};
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const ROWS: &str = include_str!("reduce_rows.cu");
const LOOP: &str = include_str!("reduce_loop.cu");

/// The CUDA spelling of `f` over `n` elements accumulated in `acc` (`float`, or
/// `double` for f64 data): (identity, combine of `a` and `b`, map of element `v`,
/// finish of `acc`).
fn parts(f: Fold, n: usize, acc: &str) -> (&'static str, &'static str, String, String) {
    // Math functions take an `f` suffix in float.
    let sfx = if acc == "float" { "f" } else { "" };
    let identity = match f.identity {
        Identity::Zero => "0.0f",
        Identity::One => "1.0f",
        Identity::NegInf => "__int_as_float(0xff800000)",
        Identity::PosInf => "__int_as_float(0x7f800000)",
    };
    let combine = match f.combine {
        Combine::Add => "a + b",
        Combine::Mul => "a * b",
        Combine::Max => "(b != b || b > a) ? b : a",
        Combine::Min => "(b != b || b < a) ? b : a",
        Combine::LogAddExp => "gopt_logaddexp(a, b)",
    };
    let map = match f.map {
        Map::Id => "v".to_string(),
        Map::Square => "v * v".to_string(),
        Map::Abs => format!("fabs{sfx}(v)"),
    };
    let finish = match f.finish {
        Finish::Id => "acc".to_string(),
        Finish::Mean => format!("acc / {n}.0f"),
        Finish::Sqrt => format!("sqrt{sfx}(acc)"),
        Finish::Log => format!("log{sfx}(acc)"),
    };
    (identity, combine, map, finish)
}

/// Emits the kernel of reduction spec `geo`.
pub fn emit(geo: &Spec, name: &str) -> Result<Kernel> {
    let dt = geo.dtype;
    // Floats accumulate in f32, f64 in double; bool (max: any, min: all) as 0/1 in
    // f32, stored back as 0/1.
    let acc = if dt == DType::F64 {
        "double"
    } else if dt.is_float() || dt == DType::Bool {
        "float"
    } else {
        return Err(geo.site.unsupported(&format!("{dt} reductions")));
    };
    let Spec {
        runs, inner, outer, ..
    } = geo;
    let (inner, outer) = (*inner, *outer);
    let (identity, combine, map, finish) = parts(geo.fold, inner, acc);
    let t = storage(dt);
    let params = format!("const {t}* __restrict__ x, {t}* __restrict__ out");
    let contiguous = geo.contiguous();
    let common = |what: &'static str| -> Vec<(&'static str, String)> {
        vec![
            ("what", what.to_string()),
            ("name", name.to_string()),
            ("params", params.clone()),
            ("identity", identity.to_string()),
            ("combine", combine.to_string()),
            ("map", map.clone()),
            ("acc", acc.to_string()),
            (
                "acc_name",
                if acc == "float" { "f32" } else { "f64" }.to_string(),
            ),
            ("store", store(dt, &finish)),
        ]
    };
    let (source, grid, block) = if contiguous {
        let tpr = if inner >= 1024 { 256 } else { 32 };
        let mut v = common(geo.site.op);
        v.extend([
            ("tpr", tpr.to_string()),
            ("rows", outer.to_string()),
            ("len", inner.to_string()),
        ]);
        let v: Vec<(&str, &str)> = v.iter().map(|(k, s)| (*k, s.as_str())).collect();
        (fill(ROWS, &v)?, blocks(outer, 256 / tpr as u32), 256)
    } else {
        // Strides of the merged runs in x; kept runs decode the output index, reduced
        // runs the loop index.
        let sizes: Vec<usize> = runs.iter().map(|r| r.0).collect();
        let st = super::support::strides(&sizes);
        let decode = |red: bool, var: &str| -> String {
            if runs.iter().any(|&(s, r)| r == red && s == 0) {
                // No outputs or no elements: the loop never decodes (no `% 0`).
                return format!("long long r_ = {var}; long long off_ = 0;");
            }
            let mut code = format!("long long r_ = {var}; long long off_ = 0;");
            for (k, &(s, r)) in runs.iter().enumerate().rev() {
                if r == red {
                    code += &format!(" off_ += (r_ % {s}LL) * {}LL; r_ /= {s}LL;", st[k]);
                }
            }
            code
        };
        let mut v = common(geo.site.op);
        v.extend([
            ("total", outer.to_string()),
            ("inner", inner.to_string()),
            ("base", decode(false, "i")),
            ("offset", decode(true, "j")),
        ]);
        let v: Vec<(&str, &str)> = v.iter().map(|(k, s)| (*k, s.as_str())).collect();
        (fill(LOOP, &v)?, blocks(outer, 256), 256)
    };
    Ok(Kernel {
        name: name.to_string(),
        node: geo.site.node.clone(),
        source,
        threads: grid as usize * block as usize,
        vectorized: false,
        inputs: vec![geo.site.input(0)?],
        outputs: vec![geo.site.output(0)?],
        shared_mem: 0,
        grid,
        block,
        index_check: None,
    })
}
