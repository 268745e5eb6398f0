//! ConvTranspose, Col2Im, MaxUnpool and DeformConv, read once for every backend.
//!
//! ConvTranspose and Col2Im scatter input columns into an output image; on a GPU they
//! run as a gather instead (one thread per output element, no atomics, a fixed
//! summation order): output coordinate `o` of a spatial dim receives input coordinate
//! `i` through kernel tap `k` when `o = i * stride - pad + k * dilation`, so a thread
//! walks the taps and keeps those whose `o + pad - k * dilation` is a multiple of the
//! stride inside the input ([`TapDim`]). ConvTranspose sums input channel times weight
//! over its group's channels; Col2Im sums the columns of its channel.
//!
//! MaxUnpool writes each input element at the flat output position its index names
//! (indices read on the device and checked, the last of equal indices winning, as the
//! interpreter's sequential loop does), into the default-sized output placed at the
//! start of `output_shape`. DeformConv is a 2-D convolution whose taps sample the input
//! bilinearly at offset positions, optionally scaled by a mask.
//!
//! The sizes, pads and output shapes are resolved as the interpreter resolves them
//! (`ir/src/ops/nn/conv_transpose.rs`, `pool.rs`, `deform.rs`, `image/roi.rs`); every
//! attribute a node carries is either read here or refused.

use super::pool::resolve;
use super::support::{
    check_float, const_input, input, opt_input, output, plan, typed, unsupported, Sited,
};
use crate::twin::Syntax;
use crate::Result;
use gopt_ir::ops::{ImageOp, NnOp};
use gopt_ir::{DType, Graph, Node, Op, ValueId};

/// One spatial dim of a gather over kernel taps: output coordinate `o` reads input
/// coordinate `(o + pad - k * dilation) / stride` through tap `k`, when that divides
/// exactly and lies in `0..input`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TapDim {
    /// Output size.
    pub out: usize,
    /// Input size (ConvTranspose's X, Col2Im's block positions).
    pub input: usize,
    /// Taps (kernel or block size).
    pub kernel: usize,
    /// Stride.
    pub stride: usize,
    /// Dilation.
    pub dilation: usize,
    /// Padding before the output.
    pub pad: usize,
}

/// The tap walk over `dims` at indentation `depth` in syntax `sx`: one loop per dim
/// over its taps `k{a}`, skipping those whose input coordinate `i{a}` is fractional or
/// outside the input, with `body(input offset, tap offset)` (flat row-major signed
/// expressions) innermost. Output coordinates `o{a}` are signed variables in scope.
pub fn walk(
    dims: &[TapDim],
    sx: &dyn Syntax,
    depth: usize,
    body: impl Fn(&str, &str) -> String,
) -> String {
    let mut open = String::new();
    let mut close = String::new();
    let int = sx.signed();
    let zero = format!("0{int}");
    let (mut ioff, mut koff) = (zero.clone(), zero);
    for (a, dim) in dims.iter().enumerate() {
        let ind = " ".repeat(4 * (depth + a));
        let (k, s, dl, pad, inp) = (dim.kernel, dim.stride, dim.dilation, dim.pad, dim.input);
        let frac = if s == 1 {
            String::new()
        } else {
            format!(" || q{a} % {s}{int} != 0")
        };
        let l = sx.let_head();
        open += &format!(
            "{ind}{}\n\
             {ind}    {l}q{a} = o{a} + {pad}{int} - k{a} * {dl}{int};\n\
             {ind}    {}\n\
             {ind}    {l}i{a} = q{a} / {s}{int};\n\
             {ind}    {}\n",
            sx.signed_loop(&format!("k{a}"), k),
            sx.continue_if(&format!("q{a} < 0{frac}")),
            sx.continue_if(&format!("i{a} >= {inp}{int}")),
        );
        close = format!("{ind}}}\n") + &close;
        ioff = format!("({ioff}) * {inp}{int} + i{a}");
        koff = format!("({koff}) * {k}{int} + k{a}");
    }
    let inner = " ".repeat(4 * (depth + dims.len()));
    format!("{open}{inner}{}\n{close}", body(&ioff, &koff))
}

/// Products of the dims' sizes: (output plane, input plane, taps).
fn planes(dims: &[TapDim]) -> (usize, usize, usize) {
    dims.iter().fold((1, 1, 1), |(o, i, k), d| {
        (o * d.out, i * d.input, k * d.kernel)
    })
}

/// A ConvTranspose node, resolved: `Y[n, m, o] = B[m] + sum over the channels `c` of
/// m's group and the taps `k` of X[n, c, i] * W[c, m mod M/group, k]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvTransposeSpec {
    /// X, `[N, C, *S]`.
    pub x: ValueId,
    /// W, `[C, M / group, *K]`.
    pub w: ValueId,
    /// B, `[M]`, when present.
    pub bias: Option<ValueId>,
    /// Y, `[N, M, *O]`.
    pub out: ValueId,
    /// The dtype of every operand (a float, computed in f32).
    pub dtype: DType,
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Output channels.
    pub m: usize,
    /// Groups.
    pub group: usize,
    /// Per spatial dim, the gather.
    pub dims: Vec<TapDim>,
}

impl ConvTransposeSpec {
    /// Input channels per group.
    pub fn cg(&self) -> usize {
        self.c / self.group
    }

    /// Output channels per group.
    pub fn mg(&self) -> usize {
        self.m / self.group
    }

    /// (Output plane, input plane, taps) elements.
    pub fn planes(&self) -> (usize, usize, usize) {
        planes(&self.dims)
    }

    /// Output elements.
    pub fn total(&self) -> usize {
        self.n * self.m * self.planes().0
    }
}

/// A Col2Im node, resolved: `Y[n, c, p] = sum over the block taps `k` of
/// X[n, c * taps + k, l]`, `l` the block position (column) that puts tap `k` at `p`.
#[derive(Clone, Debug, PartialEq)]
pub struct Col2ImSpec {
    /// X, `[N, C * taps, L]`.
    pub x: ValueId,
    /// Y, `[N, C, *image_shape]`.
    pub out: ValueId,
    /// X's and Y's dtype (a float, computed in f32).
    pub dtype: DType,
    /// Batch.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Per spatial dim, the gather (`input` is the number of block positions).
    pub dims: Vec<TapDim>,
}

impl Col2ImSpec {
    /// (Output plane, block positions L, block taps) elements.
    pub fn planes(&self) -> (usize, usize, usize) {
        planes(&self.dims)
    }

    /// Output elements.
    pub fn total(&self) -> usize {
        self.n * self.c * self.planes().0
    }
}

/// A MaxUnpool node, resolved: the default-sized output (`inferred`) gets X's elements
/// at the flat positions in I (zero elsewhere), and is placed at the start of the
/// output (cut or padded with zeros where the shapes differ).
#[derive(Clone, Debug, PartialEq)]
pub struct MaxUnpoolSpec {
    /// X.
    pub x: ValueId,
    /// I (X's shape), flat positions in the default-sized output.
    pub indices: ValueId,
    /// Y.
    pub out: ValueId,
    /// X's and Y's dtype (copied as stored).
    pub dtype: DType,
    /// I's dtype (i64, or i32).
    pub index_dtype: DType,
    /// The node's code in the run's error word ([`crate::plan::index_code`]).
    pub code: u32,
    /// X's elements.
    pub len: usize,
    /// The default output shape: `(in - 1) * stride - pads + kernel` per spatial dim.
    pub inferred: Vec<usize>,
    /// Y's shape.
    pub target: Vec<usize>,
}

impl MaxUnpoolSpec {
    /// Elements of the default-sized output (the range an index must lie in).
    pub fn inferred_len(&self) -> usize {
        self.inferred.iter().product()
    }

    /// Output elements.
    pub fn total(&self) -> usize {
        self.target.iter().product()
    }

    /// Per axis from the last, (the default output's dim, Y's dim, Y's stride): the
    /// axes a flat default-output position is decoded along and re-encoded into Y.
    pub fn axes_rev(&self) -> Vec<(usize, usize, usize)> {
        let st = super::index::strides(&self.target);
        (0..self.target.len())
            .rev()
            .map(|a| (self.inferred[a], self.target[a], st[a]))
            .collect()
    }

    /// What an index out of range is, for the run's error message.
    pub fn out_of_range(&self) -> String {
        format!(
            "an index outside the output's {} elements",
            self.inferred_len()
        )
    }
}

/// A DeformConv node (2-D), resolved: `Y[n, m, oy, ox] = B[m] + sum over the channels
/// `c` of m's group and taps `(ki, kj)` of W[m, c, ki, kj] * mask * X[n, c] sampled
/// bilinearly at (oy * stride - pad + ki * dilation + offset_y, the same along x)`.
#[derive(Clone, Debug, PartialEq)]
pub struct DeformConvSpec {
    /// X, `[N, C, H, W]`.
    pub x: ValueId,
    /// W, `[M, C / group, kh, kw]`.
    pub w: ValueId,
    /// The offsets, `[N, offset_group * kh * kw * 2, oh, ow]` (y then x per tap).
    pub offset: ValueId,
    /// B, `[M]`, when present.
    pub bias: Option<ValueId>,
    /// The mask, `[N, offset_group * kh * kw, oh, ow]`, when present.
    pub mask: Option<ValueId>,
    /// Y, `[N, M, oh, ow]`.
    pub out: ValueId,
    /// The dtype of every operand (a float, computed in f32).
    pub dtype: DType,
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height and width.
    pub hw: (usize, usize),
    /// Output channels.
    pub m: usize,
    /// Groups.
    pub group: usize,
    /// Offset groups.
    pub offset_group: usize,
    /// Kernel height and width.
    pub k: (usize, usize),
    /// Output height and width.
    pub o: (usize, usize),
    /// Strides (height, width).
    pub stride: (usize, usize),
    /// Dilations (height, width).
    pub dilation: (usize, usize),
    /// Padding before (height, width).
    pub pad: (usize, usize),
}

impl DeformConvSpec {
    /// Input channels per group.
    pub fn cg(&self) -> usize {
        self.c / self.group
    }

    /// Output channels per group.
    pub fn mg(&self) -> usize {
        self.m / self.group
    }

    /// Input channels per offset group.
    pub fn cog(&self) -> usize {
        self.c / self.offset_group
    }

    /// Kernel taps.
    pub fn taps(&self) -> usize {
        self.k.0 * self.k.1
    }

    /// Output elements.
    pub fn total(&self) -> usize {
        self.n * self.m * self.o.0 * self.o.1
    }
}

/// A node of this family, resolved: where it is, and which op with what.
pub type Spec = Sited<Form>;

/// The op of a node of this family, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Form {
    /// ConvTranspose.
    ConvTranspose(ConvTransposeSpec),
    /// Col2Im.
    Col2Im(Col2ImSpec),
    /// MaxUnpool.
    MaxUnpool(MaxUnpoolSpec),
    /// DeformConv.
    DeformConv(DeformConvSpec),
}

/// Reads node `node` of `g` (ConvTranspose, Col2Im, MaxUnpool or DeformConv).
pub fn spec(g: &Graph, node: &Node) -> Result<Spec> {
    Sited::read(g, node, form)
}

/// Reads the op of node `node` of `g`.
fn form(g: &Graph, node: &Node) -> Result<Form> {
    let other = || Err(plan(format!("{}: not a transposed convolution", node.name)));
    match node.op {
        Op::Nn(o) => match o {
            NnOp::ConvTranspose => conv_transpose(g, node).map(Form::ConvTranspose),
            NnOp::MaxUnpool => max_unpool(g, node).map(Form::MaxUnpool),
            NnOp::DeformConv => deform_conv(g, node).map(Form::DeformConv),
            NnOp::MatMul
            | NnOp::Gemm
            | NnOp::Conv
            | NnOp::ConvInteger
            | NnOp::QLinearConv
            | NnOp::MatMulInteger
            | NnOp::QLinearMatMul
            | NnOp::MatMulNBits
            | NnOp::QuantizeLinear
            | NnOp::DequantizeLinear
            | NnOp::DynamicQuantizeLinear
            | NnOp::AveragePool
            | NnOp::MaxPool
            | NnOp::LpPool
            | NnOp::GlobalAveragePool
            | NnOp::GlobalMaxPool
            | NnOp::GlobalLpPool
            | NnOp::Einsum
            | NnOp::Det => other(),
        },
        Op::Image(i) => match i {
            ImageOp::Col2Im => col2im(g, node).map(Form::Col2Im),
            ImageOp::Resize
            | ImageOp::GridSample
            | ImageOp::AffineGrid
            | ImageOp::RoiAlign
            | ImageOp::NonMaxSuppression
            | ImageOp::DFT
            | ImageOp::STFT
            | ImageOp::HannWindow
            | ImageOp::HammingWindow
            | ImageOp::BlackmanWindow
            | ImageOp::MelWeightMatrix
            | ImageOp::TfIdfVectorizer
            | ImageOp::Adagrad
            | ImageOp::Adam
            | ImageOp::Momentum
            | ImageOp::Binarizer
            | ImageOp::ArrayFeatureExtractor
            | ImageOp::LabelEncoder
            | ImageOp::TreeEnsemble => other(),
        },
        Op::Elementwise(_)
        | Op::Reduce(_)
        | Op::Shape(_)
        | Op::Control(_)
        | Op::Attention(_)
        | Op::Fused(_)
        | Op::Collective(_) => other(),
    }
}

/// Refuses an attribute of `node` outside `allowed` (never ignored).
fn check_attrs(node: &Node, allowed: &[&str]) -> Result<()> {
    match node.attrs.0.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(unsupported(node, &format!("attribute `{k}`"))),
        None => Ok(()),
    }
}

/// Integer attribute `name` of exactly `len` values, each at least `min`, or `default`
/// repeated.
fn ints(node: &Node, name: &str, len: usize, default: usize, min: i64) -> Result<Vec<usize>> {
    match node.attrs.ints(name).map_err(plan)? {
        None => Ok(vec![default; len]),
        Some(v) if v.len() == len && v.iter().all(|&x| x >= min) => {
            Ok(v.iter().map(|&x| x as usize).collect())
        }
        Some(v) => Err(unsupported(node, &format!("{name} {v:?}"))),
    }
}

/// Integer attribute `name`'s last `d` values (some exporters write whole shapes), as
/// the interpreter reads `output_padding` and `output_shape`.
fn tail_ints(node: &Node, name: &str, d: usize) -> Result<Option<Vec<i64>>> {
    match node.attrs.ints(name).map_err(plan)? {
        None => Ok(None),
        Some(v) if v.len() >= d => Ok(Some(v[v.len() - d..].to_vec())),
        Some(v) => Err(unsupported(node, &format!("{name} {v:?}"))),
    }
}

/// The kernel: `kernel_shape` when given (it must match the weights'), else the
/// weights' spatial dims.
fn kernel(node: &Node, from_weights: &[usize]) -> Result<Vec<usize>> {
    let k = ints(node, "kernel_shape", from_weights.len(), 0, 1)?;
    if node.attrs.has("kernel_shape") && k != from_weights {
        return Err(unsupported(
            node,
            &format!("kernel_shape {k:?} other than the weights' {from_weights:?}"),
        ));
    }
    Ok(from_weights.to_vec())
}

/// The float dtype every operand in `vs` of `node` has.
fn same_float(g: &Graph, node: &Node, vs: &[ValueId]) -> Result<DType> {
    let mut dt = None;
    for &v in vs {
        let (t, _) = typed(g, node, v)?;
        check_float(node, t, "data")?;
        if dt.is_some_and(|d| d != t) {
            return Err(unsupported(node, "operands of different dtypes"));
        }
        dt = Some(t);
    }
    dt.ok_or_else(|| plan(format!("{}: no operands", node.name)))
}

/// An optional bias input `k` of `m` elements.
fn bias(g: &Graph, node: &Node, k: usize, m: usize) -> Result<Option<ValueId>> {
    match opt_input(node, k) {
        None => Ok(None),
        Some(b) => {
            if typed(g, node, b)?.1 != [m] {
                return Err(unsupported(node, "a bias other than [M]"));
            }
            Ok(Some(b))
        }
    }
}

/// Reads a ConvTranspose node.
fn conv_transpose(g: &Graph, node: &Node) -> Result<ConvTransposeSpec> {
    check_attrs(
        node,
        &[
            "auto_pad",
            "dilations",
            "group",
            "kernel_shape",
            "output_padding",
            "output_shape",
            "pads",
            "strides",
        ],
    )?;
    let (x, w, out) = (input(node, 0)?, input(node, 1)?, output(node, 0)?);
    let (xs, ws, ys) = (
        typed(g, node, x)?.1,
        typed(g, node, w)?.1,
        typed(g, node, out)?.1,
    );
    let d = xs.len().saturating_sub(2);
    if d == 0 || ws.len() != xs.len() || ys.len() != xs.len() {
        return Err(unsupported(
            node,
            "X and W other than [N, C, spatial...] and [C, M/group, kernel...]",
        ));
    }
    let group =
        usize::try_from(node.attrs.int_or("group", 1).map_err(plan)?.max(1)).map_err(plan)?;
    let (n, c, m) = (xs[0], xs[1], ws[1] * group);
    if ws[0] != c || c % group != 0 || ys[0] != n || ys[1] != m {
        return Err(unsupported(node, "channels that do not match the group"));
    }
    if [n, c, m].contains(&0) {
        return Err(unsupported(node, "an empty tensor"));
    }
    let mut operands = vec![x, w];
    let bias = bias(g, node, 2, m)?;
    operands.extend(bias);
    let dtype = same_float(g, node, &operands)?;
    let kernel = kernel(node, &ws[2..])?;
    let dims = transposed_dims(node, &xs[2..], &kernel, &ys[2..])?;
    Ok(ConvTransposeSpec {
        x,
        w,
        bias,
        out,
        dtype,
        n,
        c,
        m,
        group,
        dims,
    })
}

/// ConvTranspose's gather per spatial dim, for `input` spatial dims, `kernel` and
/// `out` spatial dims: the output size and begin pad from `output_shape`, `auto_pad`
/// or explicit `pads` (`output_padding` extending the end) as the interpreter resolves
/// them (a size other than `out` is a plan error).
fn transposed_dims(
    node: &Node,
    input: &[usize],
    kernel: &[usize],
    out: &[usize],
) -> Result<Vec<TapDim>> {
    let d = input.len();
    let strides = ints(node, "strides", d, 1, 1)?;
    let dilations = ints(node, "dilations", d, 1, 1)?;
    let pads = ints(node, "pads", 2 * d, 0, 0)?;
    let auto_pad = node.attrs.str_or("auto_pad", "NOTSET").map_err(plan)?;
    let same = match auto_pad {
        "SAME_UPPER" | "SAME_LOWER" => true,
        "NOTSET" | "" | "VALID" => false,
        other => return Err(unsupported(node, &format!("auto_pad `{other}`"))),
    };
    let adj = tail_ints(node, "output_padding", d)?.unwrap_or(vec![0; d]);
    let out_shape = tail_ints(node, "output_shape", d)?;
    let explicit_pads = node.attrs.has("pads");
    (0..d)
        .map(|i| {
            // i128 holds every product of i64 attributes and sizes: nothing wraps.
            let s = strides[i] as i128;
            let full = s * (input[i] as i128 - 1)
                + adj[i] as i128
                + ((kernel[i] as i128 - 1) * dilations[i] as i128 + 1);
            let split = |total: i128| {
                if auto_pad == "SAME_UPPER" {
                    total / 2
                } else {
                    total - total / 2
                }
            };
            let (o, pad) = match &out_shape {
                Some(os) if !explicit_pads || same => {
                    (os[i] as i128, split((full - os[i] as i128).max(0)))
                }
                Some(os) => (os[i] as i128, pads[i] as i128),
                None if same => {
                    let o = input[i] as i128 * s;
                    (o, split((full - o).max(0)))
                }
                None if auto_pad == "VALID" => (full, 0),
                None => (
                    full - pads[i] as i128 - pads[d + i] as i128,
                    pads[i] as i128,
                ),
            };
            if o != out[i] as i128 {
                return Err(plan(format!(
                    "{}: output dim {i} is {}, expected {o}",
                    node.name, out[i]
                )));
            }
            Ok(TapDim {
                out: out[i],
                input: input[i],
                kernel: kernel[i],
                stride: strides[i],
                dilation: dilations[i],
                pad: usize::try_from(pad).map_err(plan)?,
            })
        })
        .collect()
}

/// A constant 1-D integer input `k` of `node` (Col2Im's shapes).
fn const_ints(g: &Graph, node: &Node, k: usize, what: &str) -> Result<Vec<i64>> {
    const_input(g, node, k, what)?
        .map(|t| t.to_i64_vec())
        .ok_or_else(|| unsupported(node, &format!("a missing {what}")))
}

/// Reads a Col2Im node.
fn col2im(g: &Graph, node: &Node) -> Result<Col2ImSpec> {
    check_attrs(node, &["dilations", "pads", "strides"])?;
    let (x, out) = (input(node, 0)?, output(node, 0)?);
    let image = const_ints(g, node, 1, "image_shape")?;
    let block = const_ints(g, node, 2, "block_shape")?;
    let d = image.len();
    if block.len() != d || image.iter().chain(&block).any(|&v| v <= 0) {
        return Err(unsupported(
            node,
            "image and block shapes that are not positive and of one length",
        ));
    }
    let dilations = ints(node, "dilations", d, 1, 1)?;
    let pads = ints(node, "pads", 2 * d, 0, 0)?;
    let strides = ints(node, "strides", d, 1, 1)?;
    let dtype = same_float(g, node, &[x, out])?;
    let (xs, ys) = (typed(g, node, x)?.1, typed(g, node, out)?.1);
    let taps: i64 = block.iter().product();
    let dims = (0..d)
        .map(|i| {
            let span = dilations[i] as i64 * (block[i] - 1) + 1;
            let cols = (image[i] + (pads[i] + pads[d + i]) as i64 - span) / strides[i] as i64 + 1;
            Ok(TapDim {
                out: usize::try_from(image[i]).map_err(plan)?,
                input: usize::try_from(cols)
                    .ok()
                    .filter(|&c| c >= 1)
                    .ok_or_else(|| unsupported(node, "a block larger than the padded image"))?,
                kernel: usize::try_from(block[i]).map_err(plan)?,
                stride: strides[i],
                dilation: dilations[i],
                pad: pads[i],
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let (_, cols, bl) = planes(&dims);
    let [n, cb, l] = xs[..] else {
        return Err(unsupported(node, "an input other than [N, C * block, L]"));
    };
    if bl as i64 != taps || cb % bl != 0 || l != cols {
        return Err(unsupported(
            node,
            "an input other than [N, C * block, L] for this geometry",
        ));
    }
    let c = cb / bl;
    if n == 0 || c == 0 {
        return Err(unsupported(node, "an empty tensor"));
    }
    let mut want = vec![n, c];
    want.extend(dims.iter().map(|t| t.out));
    if ys != want {
        return Err(plan(format!(
            "{}: output {ys:?}, expected {want:?}",
            node.name
        )));
    }
    Ok(Col2ImSpec {
        x,
        out,
        dtype,
        n,
        c,
        dims,
    })
}

/// Reads a MaxUnpool node.
fn max_unpool(g: &Graph, node: &Node) -> Result<MaxUnpoolSpec> {
    check_attrs(node, &["kernel_shape", "pads", "strides"])?;
    let (x, indices, out) = (input(node, 0)?, input(node, 1)?, output(node, 0)?);
    let (dtype, xs) = typed(g, node, x)?;
    let (index_dtype, is) = typed(g, node, indices)?;
    let (out_dt, target) = typed(g, node, out)?;
    let d = xs.len().saturating_sub(2);
    if d == 0 || is != xs || target.len() != xs.len() || out_dt != dtype {
        return Err(unsupported(
            node,
            "X and I other than one [N, C, spatial...] shape",
        ));
    }
    if matches!(dtype, DType::I64 | DType::U64) {
        // The interpreter moves values through f64, which rounds 64-bit integers.
        return Err(unsupported(node, &format!("{dtype} data")));
    }
    if !matches!(index_dtype, DType::I64 | DType::I32) {
        return Err(unsupported(node, &format!("{index_dtype} indices")));
    }
    let kernel = match node.attrs.ints("kernel_shape").map_err(plan)? {
        Some(_) => ints(node, "kernel_shape", d, 0, 1)?,
        None => return Err(unsupported(node, "a missing kernel_shape")),
    };
    let strides = ints(node, "strides", d, 1, 1)?;
    let pads = ints(node, "pads", 2 * d, 0, 0)?;
    let mut inferred = xs[..2].to_vec();
    for i in 0..d {
        let v = (xs[2 + i] as i128 - 1) * strides[i] as i128 + kernel[i] as i128
            - (pads[i] as i128 + pads[d + i] as i128);
        inferred.push(
            usize::try_from(v)
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| unsupported(node, "an empty default output"))?,
        );
    }
    Ok(MaxUnpoolSpec {
        x,
        indices,
        out,
        dtype,
        index_dtype,
        code: crate::plan::index_code(g, node)?,
        len: xs.iter().product(),
        inferred,
        target,
    })
}

/// Reads a DeformConv node.
fn deform_conv(g: &Graph, node: &Node) -> Result<DeformConvSpec> {
    check_attrs(
        node,
        &[
            "dilations",
            "group",
            "kernel_shape",
            "offset_group",
            "pads",
            "strides",
        ],
    )?;
    let (x, w, offset, out) = (
        input(node, 0)?,
        input(node, 1)?,
        input(node, 2)?,
        output(node, 0)?,
    );
    let (xs, ws, os, ys) = (
        typed(g, node, x)?.1,
        typed(g, node, w)?.1,
        typed(g, node, offset)?.1,
        typed(g, node, out)?.1,
    );
    let (&[n, c, h, wd], &[m, wc, _, _], &[_, _, oh, ow]) = (&xs[..], &ws[..], &ys[..]) else {
        return Err(unsupported(node, "tensors other than 2-D images"));
    };
    let group =
        usize::try_from(node.attrs.int_or("group", 1).map_err(plan)?.max(1)).map_err(plan)?;
    let og = usize::try_from(node.attrs.int_or("offset_group", 1).map_err(plan)?.max(1))
        .map_err(plan)?;
    if [n, c, m].contains(&0) {
        return Err(unsupported(node, "an empty tensor"));
    }
    if c != wc * group || m % group != 0 || c % og != 0 || ys[..2] != [n, m] {
        return Err(unsupported(node, "channels that do not match the groups"));
    }
    let k = kernel(node, &ws[2..])?;
    let dims = resolve(node, &k, &xs[2..], &ys[2..])?;
    let taps = k[0] * k[1];
    if os != [n, og * taps * 2, oh, ow] {
        return Err(unsupported(
            node,
            "an offset other than [N, offset_group * taps * 2, oh, ow]",
        ));
    }
    let mask = opt_input(node, 4);
    if let Some(mk) = mask {
        if typed(g, node, mk)?.1 != [n, og * taps, oh, ow] {
            return Err(unsupported(
                node,
                "a mask other than [N, offset_group * taps, oh, ow]",
            ));
        }
    }
    let bias = bias(g, node, 3, m)?;
    let mut operands = vec![x, w, offset, out];
    operands.extend(bias);
    operands.extend(mask);
    let dtype = same_float(g, node, &operands)?;
    Ok(DeformConvSpec {
        x,
        w,
        offset,
        bias,
        mask,
        out,
        dtype,
        n,
        c,
        hw: (h, wd),
        m,
        group,
        offset_group: og,
        k: (k[0], k[1]),
        o: (oh, ow),
        stride: (dims[0].stride, dims[1].stride),
        dilation: (dims[0].dilation, dims[1].dilation),
        pad: (dims[0].pad_begin, dims[1].pad_begin),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::support::test_graph as graph;

    fn conv_transpose_dims(attrs: &str, y: &str) -> Vec<TapDim> {
        let g = graph(&format!(
            r#"graph "g"(%0 "x": f32[1,1,3,3], %1 "w": f32[1,2,3,3]) -> (%2) {{
  %2 "y": f32{y} = ConvTranspose "ct"(%0, %1) {{{attrs}}}
}}"#
        ));
        match spec(&g, &g.nodes[0]).map(|s| s.form) {
            Ok(Form::ConvTranspose(s)) => s.dims,
            other => panic!("not a ConvTranspose: {other:?}"),
        }
    }

    fn tap(out: usize, input: usize, kernel: usize, stride: usize, pad: usize) -> TapDim {
        TapDim {
            out,
            input,
            kernel,
            stride,
            dilation: 1,
            pad,
        }
    }

    /// Explicit pads: the output loses them, the gather starts `pads` in.
    #[test]
    fn conv_transpose_pads() {
        let dims = conv_transpose_dims("strides=ints[3,2], pads=ints[1,2,1,2]", "[1,2,7,3]");
        assert_eq!(dims, vec![tap(7, 3, 3, 3, 1), tap(3, 3, 3, 2, 2)]);
    }

    /// SAME_LOWER: output `in * stride`, the odd pad at the start.
    #[test]
    fn conv_transpose_same_lower() {
        let dims = conv_transpose_dims(r#"strides=ints[2,2], auto_pad="SAME_LOWER""#, "[1,2,6,6]");
        assert_eq!(dims, vec![tap(6, 3, 3, 2, 1); 2]);
    }

    /// `output_shape` (with `output_padding`): the surplus of the full size (10) over
    /// it (9) is split as SAME_LOWER splits it.
    #[test]
    fn conv_transpose_output_shape() {
        let dims = conv_transpose_dims(
            "strides=ints[3,2], output_padding=ints[1,1], output_shape=ints[9,8]",
            "[1,2,9,8]",
        );
        assert_eq!(dims, vec![tap(9, 3, 3, 3, 1), tap(8, 3, 3, 2, 0)]);
    }

    /// MaxUnpool: the default output from kernel, strides and pads.
    #[test]
    fn max_unpool_inferred_shape() {
        let g = graph(
            r#"graph "g"(%0 "x": f32[1,1,2,2], %1 "i": i64[1,1,2,2]) -> (%2) {
  %2 "y": f32[1,1,4,4] = MaxUnpool "u"(%0, %1) {kernel_shape=ints[2,2], strides=ints[2,2]}
}"#,
        );
        match spec(&g, &g.nodes[0]).map(|s| s.form) {
            Ok(Form::MaxUnpool(s)) => {
                assert_eq!(s.inferred, vec![1, 1, 4, 4]);
                assert_eq!(s.axes_rev()[0], (4, 4, 1));
            }
            other => panic!("not a MaxUnpool: {other:?}"),
        }
    }
}
