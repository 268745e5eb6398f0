//! SwiGLU in CUDA ([`crate::lower::glu`]): each thread computes `a * sigmoid(alpha *
//! a) * b` in float, rounding the sigmoid and `a * sigmoid` to f16 or bf16 first where
//! the data is stored so (as the interpreter does), and stores the output's type or
//! that of the Cast it absorbs. `a` and `b` are read in place where they are columns of
//! a wider tensor. Where every run of 16 bytes of `a` and `b` is one aligned run of
//! their buffers, each thread moves 16 bytes of each per step; else one element.

use super::elementwise::storage;
use super::support::{flit, store};
use super::Kernel;
use crate::lower::absorb::Columns;
use crate::lower::glu::GluSpec;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("glu.cu");
const VECTOR: &str = include_str!("glu_vec.cu");

/// `v` (a float expression) rounded to `dt` and back to float, or `v` as it is.
fn rounded(dt: Option<DType>, v: &str) -> String {
    if dt == Some(DType::F16) {
        format!("__half2float(__float2half_rn({v}))")
    } else if dt == Some(DType::BF16) {
        format!("__bfloat162float(__float2bfloat16_rn({v}))")
    } else {
        v.to_string()
    }
}

/// The element of an input read in place (`cols`) or as its own buffer, for the
/// input's element `i`.
fn at(cols: Option<Columns>, i: &str) -> String {
    cols.map_or_else(|| i.to_string(), |c| c.index(i))
}

/// The 16-byte vector of an input for the thread's vector `j` of `vec` elements.
fn vector_at(cols: Option<Columns>, vec: usize) -> String {
    match cols {
        Some(c) => format!("({}) / {vec}", c.index(&format!("j * {vec}LL"))),
        None => "j".to_string(),
    }
}

/// The unsigned type of `bytes` bytes a vector of outputs is stored as.
fn vector_type(bytes: usize) -> Option<&'static str> {
    [
        (16, "uint4"),
        (8, "uint2"),
        (4, "unsigned int"),
        (2, "unsigned short"),
    ]
    .into_iter()
    .find_map(|(b, t)| (b == bytes).then_some(t))
}

/// Emits the kernel of SwiGLU spec `sp`.
pub fn emit(sp: &GluSpec, name: &str) -> Result<Kernel> {
    let round = sp.round();
    let alpha = flit(sp.alpha);
    let sig = rounded(round, &format!("1.0f / (1.0f + expf(-({alpha} * x)))"));
    let note = match round {
        Some(dt) => format!(", the sigmoid and a * sigmoid rounded to {dt}"),
        None => String::new(),
    };
    let note = match sp.out_dtype == sp.dtype {
        true => note,
        false => format!("{note}, stored as {}", sp.out_dtype),
    };
    let vec = 16 / sp.dtype.size();
    let ov = vector_type(vec * sp.out_dtype.size());
    let fits = |c: Option<Columns>| c.is_none_or(|c| c.vectors(vec));
    let vectorized = ov.is_some()
        && sp.n >= vec
        && sp.n.is_multiple_of(vec)
        && fits(sp.a_cols)
        && fits(sp.b_cols);
    let (vec_s, n_s, what) = (vec.to_string(), sp.n.to_string(), sp.dtype.to_string());
    let xs = rounded(round, "x * s");
    let mut subs: Vec<(&str, String)> = vec![
        ("what", what),
        ("alpha", alpha),
        ("note", note),
        ("name", name.to_string()),
        ("t", storage(sp.dtype).to_string()),
        ("to", storage(sp.out_dtype).to_string()),
        ("n", n_s),
        ("sig", sig),
        ("xs", xs),
    ];
    let source = if vectorized {
        subs.extend([
            ("vec", vec_s),
            ("ov", ov.unwrap_or("uint4").to_string()),
            ("ja", vector_at(sp.a_cols, vec)),
            ("jb", vector_at(sp.b_cols, vec)),
            ("store", store(sp.out_dtype, "xs * gopt_ld(lb.e[k])")),
        ]);
        fill(VECTOR, &refs(&subs))?
    } else {
        subs.extend([
            ("ia", at(sp.a_cols, "i")),
            (
                "store",
                store(
                    sp.out_dtype,
                    &format!("xs * gopt_ld(b[{}])", at(sp.b_cols, "i")),
                ),
            ),
        ]);
        fill(TEMPLATE, &refs(&subs))?
    };
    let threads = if vectorized { sp.n / vec } else { sp.n };
    let mut k = Kernel::flat(
        name,
        &sp.site.node,
        source,
        threads,
        vec![sp.a.0, sp.b.0],
        vec![sp.out.0],
    );
    k.vectorized = vectorized;
    Ok(k)
}

fn refs<'a>(subs: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    subs.iter().map(|(k, v)| (*k, v.as_str())).collect()
}
