//! Reductions in WGSL: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceSumSquare,
//! ReduceL1, ReduceL2, ReduceProd, ReduceLogSum, ReduceLogSumExp over any set of
//! constant axes (the `axes` input or the older attribute, `keepdims`,
//! `noop_with_empty_axes`), and GlobalAveragePool / GlobalMaxPool (the same reductions
//! over every spatial axis); each one's fold comes from
//! [`crate::lower::reduce::ReduceKind::fold`]. f32 or f16 data with f32 accumulation and one
//! rounding at the store. As in the CUDA emitter, adjacent axes of the same kind are
//! merged first; when each output's elements are one contiguous run (trailing axes, a
//! CNN head's mean over H x W), segments of 32 (short runs) or 256 (long runs)
//! invocations reduce each through workgroup memory, so loads are coalesced; otherwise
//! one invocation per output loops over its elements. Max and min propagate NaN like
//! the reference interpreter. Bool data takes ReduceMax (any) and ReduceMin (all),
//! folded as 0/1. An empty group gives the fold's identity, finished.

use super::WgslKernel;
use crate::lower::reduce::{Combine, Finish, Fold, Identity, Map, Spec};
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("reduce.wgsl");

/// The WGSL spelling of `f` over `n` elements: (identity, combine of `a` and `b`, map
/// of element `v`, finish of `acc`).
fn parts(f: Fold, n: usize) -> (&'static str, &'static str, &'static str, String) {
    const NEG_INF: &str = "bitcast<f32>(0xff800000u)";
    const POS_INF: &str = "bitcast<f32>(0x7f800000u)";
    let identity = match f.identity {
        Identity::Zero => "0.0",
        Identity::One => "1.0",
        Identity::NegInf => NEG_INF,
        Identity::PosInf => POS_INF,
    };
    let combine = match f.combine {
        Combine::Add => "a + b",
        Combine::Mul => "a * b",
        Combine::Max => "select(a, b, b != b || b > a)",
        Combine::Min => "select(a, b, b != b || b < a)",
        // max + log(1 + exp(min - max)); the larger itself where the smaller is -inf
        // or the larger +inf (no inf - inf).
        Combine::LogAddExp => {
            "select(max(a, b) + log(1.0 + exp(min(a, b) - max(a, b))), max(a, b), \
             min(a, b) == bitcast<f32>(0xff800000u) || max(a, b) == bitcast<f32>(0x7f800000u))"
        }
    };
    let map = match f.map {
        Map::Id => "v",
        Map::Square => "v * v",
        Map::Abs => "abs(v)",
    };
    let finish = match f.finish {
        Finish::Id => "acc".to_string(),
        Finish::Mean => format!("acc / {n}.0"),
        Finish::Sqrt => "sqrt(acc)".to_string(),
        Finish::Log => "gopt_log(acc)".to_string(),
    };
    (identity, combine, map, finish)
}

/// Emits the shader of reduction spec `geo`.
pub fn emit(geo: &Spec, name: &str) -> Result<WgslKernel> {
    let unsupported = |what: &str| super::refuse(&geo.site, what);
    // Bool (ReduceMax: any, ReduceMin: all) folds its 0/1 words as f32 and stores 0/1.
    let t = match geo.dtype {
        // f64 is stored as f32 (`super::storage_type`).
        DType::F32 | DType::F64 => "f32",
        DType::F16 => "f16",
        DType::Bool => "u32",
        other @ (DType::BF16
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64) => return Err(unsupported(&format!("{other} reductions"))),
    };
    let (dt, xs, runs, inner, outer) = (geo.dtype, &geo.xs, &geo.runs, geo.inner, geo.outer);
    if xs.iter().product::<usize>() >= 1 << 31 {
        return Err(unsupported("inputs of 2^31 elements or more"));
    }
    // An empty input's buffer is one word: nothing reads it (`inner` or `outer` is 0),
    // and each output of an empty group is the fold's identity, finished.
    let (identity, combine, map, finish) = parts(geo.fold, inner);
    let contiguous = geo.contiguous();
    let (body, groups) = if contiguous {
        // Segments of `tpr` invocations per output row, `256 / tpr` rows per workgroup.
        let tpr = if inner >= 1024 { 256 } else { 32 };
        let per = 256 / tpr;
        let blocks = outer.div_ceil(per);
        let body = format!(
            "    let lane = lid % {tpr}u;
    for (var blk: u32 = wid.x; blk < {blocks}u; blk = blk + nwg.x) {{
        let row = blk * {per}u + lid / {tpr}u;
        var acc: f32 = identity;
        if (row < {outer}u) {{
            for (var j: u32 = lane; j < {inner}u; j = j + {tpr}u) {{
                let v = f32(x[row * {inner}u + j]);
                acc = comb(acc, {map});
            }}
        }}
        red[lid] = acc;
        workgroupBarrier();
        for (var s: u32 = {half}u; s > 0u; s = s >> 1u) {{
            if (lane < s) {{
                red[lid] = comb(red[lid], red[lid + s]);
            }}
            workgroupBarrier();
        }}
        if (lane == 0u && row < {outer}u) {{
            let acc = red[lid];
            y[row] = {t}({finish});
        }}
        workgroupBarrier();
    }}
",
            half = tpr / 2
        );
        (body, blocks)
    } else {
        // Strides of the merged runs in x; kept runs decode the output index, reduced
        // runs the loop index.
        let sizes: Vec<usize> = runs.iter().map(|r| r.0).collect();
        let st = crate::lower::index::strides(&sizes);
        let decode = |red: bool, var: &str, off: &str| -> String {
            if runs.iter().any(|&(s, r)| r == red && s == 0) {
                // No outputs or no elements: the loop never decodes (and `% 0u` would
                // not validate).
                return format!("let {off}: u32 = 0u;");
            }
            let mut code = format!("var r_{off}: u32 = {var}; var {off}: u32 = 0u;");
            for (k, &(s, r)) in runs.iter().enumerate().rev() {
                if r == red {
                    code += &format!(
                        " {off} = {off} + (r_{off} % {s}u) * {}u; r_{off} = r_{off} / {s}u;",
                        st[k]
                    );
                }
            }
            code
        };
        let body = format!(
            "    for (var i: u32 = wid.x * 256u + lid; i < {outer}u; i = i + nwg.x * 256u) {{
        {}
        var acc: f32 = identity;
        for (var j: u32 = 0u; j < {inner}u; j = j + 1u) {{
            {}
            let v = f32(x[base + off]);
            acc = comb(acc, {map});
        }}
        y[i] = {t}({finish});
    }}
",
            decode(false, "i", "base"),
            decode(true, "j", "off")
        );
        (body, outer.div_ceil(256))
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", super::enable_f16(dt == DType::F16)),
            ("what", geo.site.op),
            (
                "how",
                if contiguous {
                    "segments of invocations per output row, combined through workgroup memory"
                } else {
                    "one invocation per output (grid-stride) looping over its elements"
                },
            ),
            ("t", t),
            ("combine", combine),
            ("identity", identity),
            ("helpers", &super::types::helpers_for(&finish)),
            ("body", &body),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: geo.site.node.clone(),
        source,
        workgroups: [groups.clamp(1, 65535) as u32, 1, 1],
        inputs: vec![geo.site.input(0)?],
        outputs: vec![geo.site.output(0)?],
        index_check: None,
        loop_iterations: None,
    })
}
