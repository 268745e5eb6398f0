//! Small helpers the CUDA writers share: CUDA expressions (float literals, stores that
//! round once to the storage type, activations) and launch shapes. Reading a node's
//! operands is lowering's (`crate::lower::support`): writers take specs only.
//! The kernel of a node with one output ([`one_output`]) and how compared elements
//! are read ([`Compared`]) live here too, so the writers that need them say it once.

use super::elementwise::storage;
use super::Kernel;
use crate::lower::support::Site;
use gopt_ir::ops::fused::Activation;
use gopt_ir::{DType, ValueId};

pub use crate::lower::index::strides;

/// A float literal of `v` as CUDA `float` (infinities and NaN by bit pattern).
pub fn flit(v: f32) -> String {
    if v.is_nan() {
        "__int_as_float(0x7fc00000)".into()
    } else if v == f32::INFINITY {
        "__int_as_float(0x7f800000)".into()
    } else if v == f32::NEG_INFINITY {
        "__int_as_float(0xff800000)".into()
    } else {
        format!("{v:e}f")
    }
}

/// `v` (an f32 expression) rounded once to the storage type of `dt`.
pub fn store(dt: DType, v: &str) -> String {
    match dt {
        DType::F16 => format!("__float2half_rn({v})"),
        DType::BF16 => format!("__float2bfloat16_rn({v})"),
        DType::F32 => v.to_string(),
        other => format!("({})({v})", storage(other)),
    }
}

/// An activation applied to the f32 variable `v`, as an expression (NaN stays NaN
/// through relu and clip, as in the IR's `Activation::apply`).
pub fn activation(act: Activation, v: &str) -> String {
    match act {
        Activation::None => v.to_string(),
        Activation::Relu => format!("({v} <= 0.0f ? 0.0f : {v})"),
        Activation::Clip { lo, hi } => format!(
            "({v} < {lo} ? {lo} : ({v} > {hi} ? {hi} : {v}))",
            lo = flit(lo as f32),
            hi = flit(hi as f32)
        ),
        Activation::Silu => format!("({v} * gopt_sigmoid({v}))"),
        Activation::Sigmoid => format!("gopt_sigmoid({v})"),
        Activation::Tanh => format!("tanhf({v})"),
        Activation::Gelu => format!("gopt_gelu({v})"),
        Activation::GeluTanh => format!("gopt_gelu_tanh({v})"),
    }
}

/// Blocks for `n` threads in blocks of `block` (grid-stride loops cover the rest).
pub fn blocks(n: usize, block: u32) -> u32 {
    u32::try_from(n.div_ceil(block as usize).clamp(1, 65_535 * 32)).unwrap_or(u32::MAX)
}

/// The kernel of `n` threads ([`Kernel::flat`]) that the node of `site` runs, writing
/// its one output `out`.
pub fn one_output(
    site: &Site,
    name: &str,
    source: String,
    n: usize,
    inputs: Vec<u32>,
    out: ValueId,
) -> Kernel {
    Kernel::flat(name, &site.node, source, n, inputs, vec![out.0])
}

/// How a kernel that compares elements of one dtype reads them (ArgMax, ArgMin, Hardmax
/// and TopK alike): floats in f32 (f64 in double) through `gopt_ld`, NaN tested;
/// integers in their own type, exactly, never NaN.
pub struct Compared {
    /// The type elements are compared in.
    pub ct: &'static str,
    /// Whether they are floats (and may be NaN).
    float: bool,
}

impl Compared {
    /// How elements of `dt` are compared.
    pub fn of(dt: DType) -> Compared {
        let ct = if dt == DType::F64 {
            "double"
        } else if dt.is_float() {
            "float"
        } else {
            storage(dt)
        };
        Compared {
            ct,
            float: dt.is_float(),
        }
    }

    /// Element `at` of `x`, read in the compare type.
    pub fn read(&self, at: &str) -> String {
        if self.float {
            format!("gopt_ld(x[{at}])")
        } else {
            format!("x[{at}]")
        }
    }

    /// Whether compared value `v` is NaN.
    pub fn isnan(&self, v: &str) -> String {
        if self.float {
            format!("isnan({v})")
        } else {
            "false".to_string()
        }
    }
}
