//! The index check of the WGSL kernels that read indices (Gather, GatherElements, the
//! losses' targets): the indices may be computed on the device, so each one is wrapped
//! (negative counts from the end), checked against its axis, and one out of range
//! raises the node's code in the run's error word (`atomicMax` on an `atomic<u32>`
//! bound after the outputs) and reads element 0 instead, never outside the data. An
//! i64 index is read as two 32-bit words (WGSL has no 64-bit integers): one whose high
//! word is not the low word's sign is out of range too, not read modulo 2^32.

use gopt_ir::DType;

/// The error word's declaration, at binding `k` (the one after the outputs).
pub(crate) fn error_binding(k: usize) -> String {
    format!("@group(0) @binding({k}) var<storage, read_write> gopt_err: atomic<u32>;")
}

/// The WGSL storage element of indices of `dt`, or `None` for dtypes the kernels do
/// not read indices of.
pub(crate) fn index_type(dt: DType) -> Option<&'static str> {
    match dt {
        DType::I64 => Some("vec2<u32>"),
        DType::I32 => Some("i32"),
        DType::F32
        | DType::F16
        | DType::BF16
        | DType::F64
        | DType::I8
        | DType::I16
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64
        | DType::Bool => None,
    }
}

/// Statements (indented eight spaces) that read the index `elem` (an expression of the
/// index array's element type, [`index_type`] of `dt`), wrap it, check it against `len`
/// and define `let {k}: u32` in `0..len`; out of range raises `code`.
pub(crate) fn read_index(dt: DType, elem: &str, len: usize, code: u32, k: &str) -> String {
    let load = match dt {
        DType::I64 => format!(
            "        let {k}w = {elem};\n        var {k}s: i32 = bitcast<i32>({k}w.x);\n        \
             if ({k}w.y != select(0u, 0xffffffffu, {k}s < 0i)) {{ {k}s = {len}i; }}\n"
        ),
        DType::F32
        | DType::F16
        | DType::BF16
        | DType::F64
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64
        | DType::Bool => {
            format!("        var {k}s: i32 = {elem};\n")
        }
    };
    format!(
        "{load}        if ({k}s < 0i) {{ {k}s = {k}s + {len}i; }}\n        \
         if ({k}s < 0i || {k}s >= {len}i) {{ atomicMax(&gopt_err, {code}u); {k}s = 0i; }}\n        \
         let {k} = u32({k}s);\n"
    )
}
