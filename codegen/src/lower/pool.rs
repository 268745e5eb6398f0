//! The window of a windowed pool — MaxPool, AveragePool, LpPool, and GlobalLpPool as one
//! window over the whole plane — resolved per spatial dim as the interpreter resolves
//! it (kernel, strides, dilations, pads or `auto_pad`, `ceil_mode`), with the pool's
//! mode (MaxPool's Indices output and `storage_order`, AveragePool's
//! `count_include_pad`, LpPool's `p`), once for every backend. [`resolve`] is the same
//! window arithmetic for a convolution-like op whose kernel comes from its weights.

use super::support::{check_float, input, output, plan, typed, unsupported, Site};
use crate::twin::Syntax;
use crate::Result;
use gopt_ir::ops::NnOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

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
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// The window of a MaxPool, AveragePool or LpPool node per spatial dim (`sp` in, `out`
/// out): `kernel_shape` (required) and the rest as [`resolve`] reads them.
pub fn window(node: &Node, sp: &[usize], out: &[usize]) -> Result<Vec<Dim>> {
    let kernel = match node.attrs.ints("kernel_shape").map_err(plan)? {
        Some(k) if k.len() == sp.len() && k.iter().all(|&x| x >= 0) => {
            k.iter().map(|&x| x as usize).collect::<Vec<_>>()
        }
        Some(k) => return Err(unsupported(node, &format!("kernel_shape {k:?}"))),
        None => return Err(unsupported(node, "a missing kernel_shape")),
    };
    resolve(node, &kernel, sp, out)
}

/// List attribute `name` of `node`: `len` non-negative values, or `default` repeated
/// when absent (strides, dilations, pads, kernel shapes).
pub fn ints(node: &Node, name: &str, default: usize, len: usize) -> Result<Vec<usize>> {
    match node.attrs.ints(name).map_err(plan)? {
        None => Ok(vec![default; len]),
        Some(v) if v.len() == len && v.iter().all(|&x| x >= 0) => {
            Ok(v.iter().map(|&x| x as usize).collect())
        }
        Some(v) => Err(unsupported(node, &format!("{name} {v:?}"))),
    }
}

/// The window of `kernel` per spatial dim (`sp` in, `out` out): strides, dilations,
/// pads or `auto_pad`, `ceil_mode` read from `node`, as the interpreter resolves them
/// (a resolved output size other than `out` is a plan error).
pub fn resolve(node: &Node, kernel: &[usize], sp: &[usize], out: &[usize]) -> Result<Vec<Dim>> {
    let d = sp.len();
    if kernel.len() != d || out.len() != d {
        return Err(unsupported(node, "a kernel of another rank than the input"));
    }
    let ints = |name: &str, default: usize, len: usize| ints(node, name, default, len);
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

/// MaxPool's second output: the flat index of each maximum in X.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Indices {
    /// The i64 output.
    pub out: ValueId,
    /// `storage_order` 1: the index within the plane counts the spatial dims
    /// column-major (the first dim fastest).
    pub col_major: bool,
}

/// What a pool computes over its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// MaxPool: the first of equal maxima (0, and index -1, for a window without
    /// input elements), optionally with its index.
    Max {
        /// The Indices output, when the node has one.
        indices: Option<Indices>,
    },
    /// AveragePool: the sum over the window's input elements divided by their count,
    /// or (`count_pad`) by the taps before the end of the explicitly padded input.
    Average {
        /// `count_include_pad`.
        count_pad: bool,
    },
    /// LpPool and GlobalLpPool: `(sum |x|^p)^(1/p)` over the window's input elements.
    Lp {
        /// The exponent (a positive integer attribute).
        p: u32,
    },
}

/// A windowed pool node, read once for every backend: `[N, C, spatial...]` in and
/// out, the resolved window per spatial dim, and the mode.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSpec {
    /// The node: its name, op and operands.
    pub site: Site,
    /// What it computes.
    pub mode: Mode,
    /// X's (and Y's) dtype: a float, or i8/u8 for MaxPool.
    pub dtype: DType,
    /// X.
    pub x: ValueId,
    /// Y.
    pub y: ValueId,
    /// X's shape.
    pub xs: Vec<usize>,
    /// Y's shape.
    pub ys: Vec<usize>,
    /// The window per spatial dim.
    pub dims: Vec<Dim>,
    /// Output elements.
    pub total: usize,
    /// Elements of one input plane (the spatial dims together).
    pub plane: usize,
}

impl PoolSpec {
    /// Whether the data are compared as stored (MaxPool of i8 or u8), not in f32.
    pub fn as_stored(&self) -> bool {
        matches!(self.dtype, DType::I8 | DType::U8)
    }

    /// The window walk in syntax `sx`: loops opening one per spatial dim (skipping taps
    /// outside the input), their closing braces, and the tap's offset in its plane
    /// (output coordinates `o{i}` are signed variables in scope).
    pub fn walk(&self, sx: &dyn Syntax) -> (String, String, String) {
        let mut open = String::new();
        let mut close = String::new();
        let sg = sx.signed();
        let mut offset = format!("0{sg}");
        for (i, dim) in self.dims.iter().enumerate() {
            let (input, s, dl, pb) = (dim.input, dim.stride, dim.dilation, dim.pad_begin);
            let ind = " ".repeat(8 + 4 * i);
            open += &format!(
                "{ind}{}\n{ind}    {}c{i} = o{i} * {s}{sg} - {pb}{sg} + t{i} * {dl}{sg};\n{ind}    {}\n",
                sx.int_loop(&format!("t{i}"), dim.kernel),
                sx.let_head(),
                sx.continue_if(&format!("c{i} < 0 || c{i} >= {input}{sg}")),
            );
            close = format!("{ind}}}\n") + &close;
            offset = format!("({offset}) * {input}{sg} + c{i}");
        }
        (open, close, offset)
    }

    /// The flat index of input element `coords` (expressions of its spatial
    /// coordinates) within its plane when the plane is stored column-major: the first
    /// spatial dim fastest (`storage_order` 1).
    pub fn col_major_index(&self, coords: &[String]) -> String {
        let mut terms = Vec::new();
        let mut stride = 1usize;
        for (c, d) in coords.iter().zip(&self.dims) {
            terms.push(format!("{c} * {stride}"));
            stride *= d.input;
        }
        terms.join(" + ")
    }
}

/// The pool's mode, refusing attributes it does not take and modes no GPU kernel
/// implements.
fn mode(node: &Node, op: NnOp) -> Result<Mode> {
    let allowed = |extra: &[&str]| -> Result<()> {
        match node
            .attrs
            .0
            .keys()
            .find(|k| !ATTRS.contains(&k.as_str()) && !extra.contains(&k.as_str()))
        {
            Some(k) => Err(unsupported(node, &format!("attribute `{k}`"))),
            None => Ok(()),
        }
    };
    let p = || -> Result<u32> {
        let p = node.attrs.int_or("p", 2).map_err(plan)?;
        u32::try_from(p)
            .ok()
            .filter(|&p| (1..=64).contains(&p))
            .ok_or_else(|| unsupported(node, &format!("p = {p}")))
    };
    let no_storage_order = || match node.attrs.has("storage_order") {
        true => Err(unsupported(node, "storage_order off MaxPool")),
        false => Ok(()),
    };
    match op {
        NnOp::MaxPool => {
            allowed(&[])?;
            let indices = match node.outputs.get(1) {
                None => None,
                Some(&out) => Some(Indices {
                    out,
                    col_major: node.attrs.int_or("storage_order", 0).map_err(plan)? != 0,
                }),
            };
            Ok(Mode::Max { indices })
        }
        NnOp::AveragePool => {
            allowed(&[])?;
            no_storage_order()?;
            Ok(Mode::Average {
                count_pad: node.attrs.int_or("count_include_pad", 0).map_err(plan)? != 0,
            })
        }
        NnOp::LpPool => {
            allowed(&["p"])?;
            no_storage_order()?;
            if node.attrs.has("count_include_pad") {
                return Err(unsupported(node, "count_include_pad on LpPool"));
            }
            Ok(Mode::Lp { p: p()? })
        }
        NnOp::GlobalLpPool => {
            if let Some(k) = node.attrs.0.keys().find(|k| k.as_str() != "p") {
                return Err(unsupported(node, &format!("attribute `{k}`")));
            }
            Ok(Mode::Lp { p: p()? })
        }
        NnOp::MatMul
        | NnOp::Gemm
        | NnOp::Conv
        | NnOp::ConvTranspose
        | NnOp::ConvInteger
        | NnOp::QLinearConv
        | NnOp::DeformConv
        | NnOp::MatMulInteger
        | NnOp::QLinearMatMul
        | NnOp::QuantizeLinear
        | NnOp::DequantizeLinear
        | NnOp::DynamicQuantizeLinear
        | NnOp::GlobalAveragePool
        | NnOp::GlobalMaxPool
        | NnOp::MaxUnpool
        | NnOp::MatMulNBits
        | NnOp::Einsum
        | NnOp::Det => Err(plan(format!("{}: not a windowed pool", node.name))),
    }
}

/// The dtypes a pool's data may have: floats (computed in f32); MaxPool also takes
/// i8 and u8 (compared as stored), as the interpreter does.
fn check_dtype(node: &Node, mode: Mode, dt: DType) -> Result<()> {
    if matches!(mode, Mode::Max { .. }) && matches!(dt, DType::I8 | DType::U8) {
        Ok(())
    } else {
        check_float(node, dt, "pools")
    }
}

/// Reads pool node `node` of `g` (MaxPool, AveragePool, LpPool, GlobalLpPool),
/// refusing the modes no GPU kernel implements.
pub fn spec(g: &Graph, node: &Node) -> Result<PoolSpec> {
    let Op::Nn(op) = node.op else {
        return Err(plan(format!("{}: not a windowed pool", node.name)));
    };
    let mode = mode(node, op)?;
    let (x, y) = (input(node, 0)?, output(node, 0)?);
    let expected_outputs = match mode {
        Mode::Max {
            indices: Some(_), ..
        } => 2,
        Mode::Max { indices: None } | Mode::Average { .. } | Mode::Lp { .. } => 1,
    };
    if node.outputs.len() != expected_outputs {
        return Err(unsupported(node, "more outputs than the pool has"));
    }
    let (dtype, xs) = typed(g, node, x)?;
    let (out_dt, ys) = typed(g, node, y)?;
    check_dtype(node, mode, dtype)?;
    if xs.len() < 3 || ys.len() != xs.len() || out_dt != dtype || ys[..2] != xs[..2] {
        return Err(unsupported(node, "inputs other than [N, C, spatial...]"));
    }
    if let Mode::Max {
        indices: Some(ix), ..
    } = mode
    {
        let (it, is) = typed(g, node, ix.out)?;
        if it != DType::I64 || is != ys {
            return Err(unsupported(node, "Indices other than i64 of Y's shape"));
        }
    }
    let dims = if op == NnOp::GlobalLpPool {
        whole_plane(&xs[2..], &ys[2..])
            .ok_or_else(|| unsupported(node, "an output other than [N, C, 1, ...]"))?
    } else {
        window(node, &xs[2..], &ys[2..])?
    };
    let total: usize = ys.iter().product();
    let plane: usize = xs[2..].iter().product();
    Ok(PoolSpec {
        site: Site::of(node),
        mode,
        dtype,
        x,
        y,
        xs,
        ys,
        dims,
        total,
        plane,
    })
}

/// The window of a global pool: the whole plane, one output per plane (`None` when
/// the output's spatial dims are not all 1, or a dim is empty).
fn whole_plane(sp: &[usize], out: &[usize]) -> Option<Vec<Dim>> {
    if out.iter().any(|&o| o != 1) || sp.contains(&0) {
        return None;
    }
    Some(
        sp.iter()
            .map(|&input| Dim {
                input,
                out: 1,
                kernel: input,
                stride: 1,
                dilation: 1,
                pad_begin: 0,
                pad_end: 0,
            })
            .collect(),
    )
}
