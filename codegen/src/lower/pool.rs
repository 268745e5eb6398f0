//! The window of a MaxPool or AveragePool node — kernel, strides, dilations, pads or
//! `auto_pad`, `ceil_mode` — resolved per spatial dim as the interpreter resolves it,
//! once for every backend.

use super::support::{check_float, input, output, plan, typed, unsupported};
use crate::Result;
use gopt_ir::ops::NnOp;
use gopt_ir::{DType, Graph, Node, Op};

/// The attributes the windowed pools may carry.
pub const ATTRS: &[&str] = &[
    "auto_pad",
    "ceil_mode",
    "count_include_pad",
    "dilations",
    "kernel_shape",
    "pads",
    "storage_order",
    "strides",
];

/// One spatial dim of the window, resolved.
#[derive(Clone, Debug)]
pub struct Dim {
    /// Input size.
    pub input: usize,
    /// Output size.
    pub out: usize,
    /// Window size.
    pub kernel: usize,
    /// Stride.
    pub stride: usize,
    /// Dilation.
    pub dilation: usize,
    /// Padding before.
    pub pad_begin: usize,
    /// Padding after.
    pub pad_end: usize,
}

/// The window of a MaxPool or AveragePool node per spatial dim (`sp` in, `out` out):
/// kernel, strides, dilations, pads or `auto_pad`, `ceil_mode`, as the interpreter
/// resolves them.
pub fn window(node: &Node, sp: &[usize], out: &[usize]) -> Result<Vec<Dim>> {
    let d = sp.len();
    let ints = |name: &str, default: usize, len: usize| -> Result<Vec<usize>> {
        match node.attrs.ints(name).map_err(plan)? {
            None => Ok(vec![default; len]),
            Some(v) if v.len() == len && v.iter().all(|&x| x >= 0) => {
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            Some(v) => Err(unsupported(node, &format!("{name} {v:?}"))),
        }
    };
    let kernel = match node.attrs.ints("kernel_shape").map_err(plan)? {
        Some(_) => ints("kernel_shape", 0, d)?,
        None => return Err(unsupported(node, "a missing kernel_shape")),
    };
    let strides = ints("strides", 1, d)?;
    let dil = ints("dilations", 1, d)?;
    let pads = ints("pads", 0, 2 * d)?;
    let ceil = node.attrs.int_or("ceil_mode", 0).map_err(plan)? != 0;
    let auto_pad = node.attrs.str_or("auto_pad", "NOTSET").map_err(plan)?;
    if kernel.contains(&0) || strides.contains(&0) || dil.contains(&0) {
        return Err(unsupported(node, "zero kernel dims, strides or dilations"));
    }
    (0..d)
        .map(|i| {
            let (input, k, s) = (sp[i], kernel[i], strides[i]);
            let span = (k - 1) * dil[i] + 1;
            let (o, pb, pe) = match auto_pad {
                "SAME_UPPER" | "SAME_LOWER" => {
                    let o = input.div_ceil(s);
                    let total = ((o.max(1) - 1) * s + span).saturating_sub(input);
                    let b = if auto_pad == "SAME_UPPER" {
                        total / 2
                    } else {
                        total - total / 2
                    };
                    (o, b, total - b)
                }
                "NOTSET" | "" | "VALID" => {
                    let (pb, pe) = if auto_pad == "VALID" {
                        (0, 0)
                    } else {
                        (pads[i], pads[d + i])
                    };
                    let avail = (input + pb + pe).checked_sub(span).ok_or_else(|| {
                        unsupported(node, "a window larger than the padded input")
                    })?;
                    let mut o = if ceil {
                        avail.div_ceil(s) + 1
                    } else {
                        avail / s + 1
                    };
                    if ceil && (o - 1) * s >= input + pb {
                        o -= 1;
                    }
                    (o, pb, pe)
                }
                other => return Err(unsupported(node, &format!("auto_pad `{other}`"))),
            };
            if o != out[i] {
                return Err(plan(format!(
                    "{}: output dim {i} is {}, expected {o}",
                    node.name, out[i]
                )));
            }
            Ok(Dim {
                input,
                out: o,
                kernel: k,
                stride: s,
                dilation: dil[i],
                pad_begin: pb,
                pad_end: pe,
            })
        })
        .collect()
}

/// A MaxPool or AveragePool node, read once for every backend: `[N, C, spatial...]`
/// in and out, the resolved window per spatial dim, and the mode.
#[derive(Clone, Debug)]
pub struct PoolSpec {
    /// MaxPool (else AveragePool).
    pub is_max: bool,
    /// X's (and Y's) dtype, a float.
    pub dtype: DType,
    /// X's shape.
    pub xs: Vec<usize>,
    /// Y's shape.
    pub ys: Vec<usize>,
    /// The window per spatial dim.
    pub dims: Vec<Dim>,
    /// AveragePool's `count_include_pad`.
    pub count_pad: bool,
    /// Output elements.
    pub total: usize,
    /// Elements of one input plane (the spatial dims together).
    pub plane: usize,
}

/// Reads pool node `node` of `g`, refusing the modes no GPU kernel implements
/// (MaxPool's Indices output, attributes outside [`ATTRS`], non-float data).
pub fn spec(g: &Graph, node: &Node) -> Result<PoolSpec> {
    if let Some(k) = node.attrs.0.keys().find(|k| !ATTRS.contains(&k.as_str())) {
        return Err(unsupported(node, &format!("attribute `{k}`")));
    }
    let is_max = node.op == Op::Nn(NnOp::MaxPool);
    if node.outputs.len() != 1 {
        return Err(unsupported(node, "MaxPool's Indices output"));
    }
    if !is_max && node.attrs.has("storage_order") {
        return Err(unsupported(node, "storage_order on AveragePool"));
    }
    let (dtype, xs) = typed(g, node, input(node, 0)?)?;
    let (out_dt, ys) = typed(g, node, output(node, 0)?)?;
    check_float(node, dtype, "pools")?;
    if xs.len() < 3 || ys.len() != xs.len() || out_dt != dtype {
        return Err(unsupported(node, "inputs other than [N, C, spatial...]"));
    }
    let dims = window(node, &xs[2..], &ys[2..])?;
    let count_pad = node.attrs.int_or("count_include_pad", 0).map_err(plan)? != 0;
    let total: usize = ys.iter().product();
    let plane: usize = xs[2..].iter().product();
    Ok(PoolSpec {
        is_max,
        dtype,
        xs,
        ys,
        dims,
        count_pad,
        total,
        plane,
    })
}
