//! Typed values in WGSL kernels: what each storable dtype computes as, how it is loaded
//! from and stored to its storage type ([`super::storage_type`]), literals, and Cast with
//! the reference interpreter's (ONNX) semantics. WGSL has no 64-bit integers: i64/u64
//! values stay in their `vec2<u32>` bits and every operation on them is exact integer
//! code from `helpers.wgsl` (or refused by the caller).

use gopt_ir::{DType, Tensor};

const HELPERS: &str = include_str!("helpers.wgsl");

/// What a dtype computes as inside a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// f32 and f16, computed in f32.
    Float,
    /// bool (stored as one u32 per element, 0 or 1).
    Bool,
    /// i8, i16, i32, computed in i32 (8/16-bit values kept sign-extended).
    Int,
    /// u8, u16, u32, computed in u32 (8/16-bit values kept zero-extended).
    Uint,
    /// i64 and u64: their two's complement bits as `vec2<u32>`, low word first.
    Wide,
}

/// The kind of `dt`, if WGSL storage can hold it.
pub fn kind(dt: DType) -> Option<Kind> {
    Some(match dt {
        // f64 is stored and computed as f32 (`super::storage_type`).
        DType::F32 | DType::F16 | DType::F64 => Kind::Float,
        DType::Bool => Kind::Bool,
        DType::I8 | DType::I16 | DType::I32 => Kind::Int,
        DType::U8 | DType::U16 | DType::U32 => Kind::Uint,
        DType::I64 | DType::U64 => Kind::Wide,
        DType::BF16 => return None,
    })
}

/// The storage element `e` (of a tensor of `dt`) as its computed value.
pub fn load(dt: DType, e: &str) -> String {
    match dt {
        DType::F16 => format!("f32({e})"),
        DType::Bool => format!("({e} != 0u)"),
        DType::F32
        | DType::BF16
        | DType::F64
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => e.to_string(),
    }
}

/// A computed value `v` of `dt` as its storage element.
pub fn store(dt: DType, v: &str) -> String {
    match dt {
        DType::F16 => format!("f16({v})"),
        DType::Bool => format!("select(0u, 1u, {v})"),
        DType::F32
        | DType::BF16
        | DType::F64
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64 => v.to_string(),
    }
}

/// `v`, computed in `dt`'s kind, wrapped to `dt`'s width (8/16-bit integers).
pub fn wrap(dt: DType, v: &str) -> String {
    match dt {
        DType::I8 => format!("(({v} << 24u) >> 24u)"),
        DType::I16 => format!("(({v} << 16u) >> 16u)"),
        DType::U8 => format!("({v} & 0xffu)"),
        DType::U16 => format!("({v} & 0xffffu)"),
        DType::F32
        | DType::F16
        | DType::BF16
        | DType::F64
        | DType::I32
        | DType::I64
        | DType::U32
        | DType::U64
        | DType::Bool => v.to_string(),
    }
}

/// An f32 expression of `v` (non-finite values as bit patterns).
pub fn f32_literal(v: f32) -> String {
    if !v.is_finite() {
        return format!("bitcast<f32>({:#010x}u)", v.to_bits());
    }
    let s = format!("{v:?}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

/// A literal of the one-element tensor `t` as a computed value of its dtype.
pub fn literal(t: &Tensor) -> Option<String> {
    if t.len() != 1 {
        return None;
    }
    let dt = t.dtype();
    Some(match kind(dt)? {
        Kind::Float => f32_literal(t.to_f64_vec()[0] as f32),
        Kind::Bool => (if t.to_i64_vec()[0] != 0 {
            "true"
        } else {
            "false"
        })
        .into(),
        Kind::Int => format!("bitcast<i32>({}u)", t.to_i64_vec()[0] as i32 as u32),
        Kind::Uint => format!("{}u", t.to_i64_vec()[0] as u32),
        Kind::Wide => {
            let b = t.to_i64_vec()[0] as u64;
            format!("vec2<u32>({}u, {}u)", b as u32, (b >> 32) as u32)
        }
    })
}

/// A literal of `v` (already cast to `dt`) as `dt`'s storage element.
pub fn storage_literal(t: &Tensor) -> Option<String> {
    literal(t).map(|l| store(t.dtype(), &l))
}

/// Cast of the computed value `v` from `from` to `to`, as the interpreter's
/// `Tensor::cast` does it: floats to integers truncate toward zero and wrap (through
/// 64-bit bits), floats to bool are `x != 0` (NaN is true), integers to integers wrap,
/// 64-bit integers to floats round through f64 first.
pub fn cast(from: DType, to: DType, v: &str) -> Option<String> {
    use Kind::*;
    let f16 = |e: String| {
        if to == DType::F16 {
            format!("f32(f16({e}))")
        } else {
            e
        }
    };
    Some(match (kind(from)?, kind(to)?) {
        (Float, Float) => f16(v.to_string()),
        (Float, Bool) => format!("((bitcast<u32>({v}) & 0x7fffffffu) != 0u)"),
        (Float, Int) => wrap(to, &format!("bitcast<i32>(gopt_f2i({v}).x)")),
        (Float, Uint) => wrap(to, &format!("gopt_f2i({v}).x")),
        (Float, Wide) => format!("gopt_f2i({v})"),
        (Bool, Float) => format!("select(0.0, 1.0, {v})"),
        (Bool, Bool) => v.to_string(),
        (Bool, Int) => format!("select(0i, 1i, {v})"),
        (Bool, Uint) => format!("select(0u, 1u, {v})"),
        (Bool, Wide) => format!("vec2<u32>(select(0u, 1u, {v}), 0u)"),
        (Int | Uint, Float) => f16(format!("f32({v})")),
        (Int, Bool) => format!("({v} != 0i)"),
        (Uint, Bool) => format!("({v} != 0u)"),
        (Int, Int) | (Uint, Uint) => wrap(to, v),
        (Int, Uint) => wrap(to, &format!("bitcast<u32>({v})")),
        (Uint, Int) => wrap(to, &format!("bitcast<i32>({v})")),
        (Int, Wide) => format!("vec2<u32>(bitcast<u32>({v}), select(0u, 0xffffffffu, {v} < 0i))"),
        (Uint, Wide) => format!("vec2<u32>({v}, 0u)"),
        (Wide, Float) if from == DType::I64 => f16(format!("gopt_i64_to_f32({v})")),
        (Wide, Float) => f16(format!("gopt_u64_to_f32({v})")),
        (Wide, Bool) => format!("any({v} != vec2<u32>(0u, 0u))"),
        (Wide, Int) => wrap(to, &format!("bitcast<i32>({v}.x)")),
        (Wide, Uint) => wrap(to, &format!("{v}.x")),
        (Wide, Wide) => v.to_string(),
    })
}

/// The helper functions of `helpers.wgsl` that `code` calls, with the ones they call.
pub fn helpers_for(code: &str) -> String {
    let blocks: Vec<(&str, &str)> = HELPERS
        .split("\n\n")
        .filter_map(|b| {
            let at = b.find("fn ")?;
            let name = b[at + 3..].split('(').next()?;
            Some((name, b.trim()))
        })
        .collect();
    let mut used = vec![false; blocks.len()];
    let mut text = code.to_string();
    loop {
        let mut grew = false;
        for (k, (name, src)) in blocks.iter().enumerate() {
            if !used[k] && text.contains(&format!("{name}(")) {
                used[k] = true;
                text += src;
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    blocks
        .iter()
        .zip(&used)
        .filter(|(_, &u)| u)
        .map(|((_, src), _)| format!("{src}\n\n"))
        .collect()
}
