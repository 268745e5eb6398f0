//! [`ConvSpec`]: one convolution (ONNX `Conv` or gopt's `FusedConv`) with every size
//! resolved — groups, strides, dilations, explicit pads or `auto_pad`, NCHW or
//! channels-last, its dtypes and fused epilogue — read from the node once for every
//! backend, so the CUDA and WGSL kernels agree on each mode and refuse the same ones.

use super::index::{strides, sum};
use super::pool::ints;
use super::support::{check_float, input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::ops::fused::{Activation, EpilogueOrder};
use gopt_ir::ops::FusedOp;
use gopt_ir::{DType, Graph, Node, Op};

/// The attributes a Conv may carry (ConvInteger and QLinearConv too).
pub const PLAIN_ATTRS: &[&str] = &[
    "auto_pad",
    "dilations",
    "group",
    "kernel_shape",
    "pads",
    "strides",
];

/// The attributes only FusedConv adds (anything else is refused, not ignored).
pub const FUSED_ATTRS: &[&str] = &[
    "activation",
    "clip_min",
    "clip_max",
    "epilogue",
    "layout",
    "output_dtype",
];

/// The first attribute of Conv or FusedConv node `node` that neither takes.
pub fn stray_attr(node: &Node) -> Option<&str> {
    node.attrs
        .0
        .keys()
        .map(String::as_str)
        .find(|k| !PLAIN_ATTRS.contains(k) && !FUSED_ATTRS.contains(k))
}

/// Refuses a bias (of any operand kind, with its shape) that is not one value per
/// output channel (`m` of them).
pub fn check_bias<T>(node: &Node, bias: &Option<(T, Vec<usize>)>, m: usize) -> Result<()> {
    match bias {
        Some((_, bs)) if bs.as_slice() != [m] => Err(unsupported(
            node,
            "a bias that is not one value per output channel",
        )),
        Some(_) | None => Ok(()),
    }
}

/// One convolution with every size resolved (1-D convolutions have `h = kh = 1`).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvSpec {
    /// The node: its name, op and operands.
    pub site: Site,
    /// Batch, input channels, input height and width.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height (1 for 1-D).
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub m: usize,
    /// Groups.
    pub group: usize,
    /// Kernel height and width.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Output height and width.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// Strides (height, width).
    pub stride: (usize, usize),
    /// Dilations (height, width).
    pub dilation: (usize, usize),
    /// Padding before the input (height, width).
    pub pad: (usize, usize),
    /// Spatial dims of the node (1 or 2).
    pub spatial: usize,
    /// Channels-last tensors (`[N, *S, C]`).
    pub nhwc: bool,
    /// X's (and W's) dtype.
    pub x_dt: DType,
    /// Y's dtype.
    pub out_dt: DType,
    /// Bias dtype, when there is one.
    pub bias: Option<DType>,
    /// Residual dtype and shape, when there is one.
    pub residual: Option<(DType, Vec<usize>)>,
    /// The epilogue's activation.
    pub act: Activation,
    /// Whether the residual is added before or after the activation.
    pub order: EpilogueOrder,
    /// Y's shape (in its layout).
    pub y_shape: Vec<usize>,
}

impl ConvSpec {
    /// Input channels per group.
    pub fn cg(&self) -> usize {
        self.c / self.group
    }
    /// Output channels per group.
    pub fn mg(&self) -> usize {
        self.m / self.group
    }
    /// Output positions per image.
    pub fn p(&self) -> usize {
        self.oh * self.ow
    }
    /// Kernel taps.
    pub fn taps(&self) -> usize {
        self.kh * self.kw
    }

    /// The one-line description both backends put in the kernel's header comment.
    pub fn describe(&self) -> String {
        format!(
            "{}x{} kernel, stride {:?}, dilation {:?}, pad {:?}, {} -> {} channels in {} group(s), {} {}x{} -> {}x{}",
            self.kh, self.kw, self.stride, self.dilation, self.pad, self.c, self.m, self.group,
            self.layout(), self.h, self.w, self.oh, self.ow
        )
    }

    /// The layout's name.
    pub fn layout(&self) -> &'static str {
        if self.nhwc {
            "NHWC"
        } else {
            "NCHW"
        }
    }

    /// Y's offset of output channel `oc`, image `n` and output position `p` (variables
    /// in scope), integer literals written with suffix `int` (`LL` in CUDA, `u` in WGSL).
    pub fn y_index(&self, int: &str) -> String {
        let (m, p) = (self.m, self.p());
        if self.nhwc {
            format!("(n * {p}{int} + p) * {m}{int} + oc")
        } else {
            format!("(n * {m}{int} + oc) * {p}{int} + p")
        }
    }

    /// The residual's offset (shape `rs`) for the output element at `y` under numpy
    /// broadcasting, literals with suffix `int`, `zero` when it reads one element.
    pub fn residual_index(&self, rs: &[usize], y: &str, int: &str, zero: &str) -> String {
        if rs == self.y_shape.as_slice() {
            return y.to_string();
        }
        let ow = self.ow;
        let sp: Vec<String> = if self.spatial == 1 {
            vec!["p".into()]
        } else {
            vec![format!("(p / {ow}{int})"), format!("(p % {ow}{int})")]
        };
        let mut coords = vec!["n".to_string()];
        if self.nhwc {
            coords.extend(sp);
            coords.push("oc".into());
        } else {
            coords.push("oc".into());
            coords.extend(sp);
        }
        let lead = coords.len() - rs.len();
        let st = strides(rs);
        let terms: Vec<String> = (0..rs.len())
            .filter(|&a| rs[a] != 1)
            .map(|a| format!("{} * {}{int}", coords[a + lead], st[a]))
            .collect();
        sum(&terms, zero)
    }
}

/// Output size and begin padding of one spatial dim (ONNX `auto_pad` rules, as the
/// interpreter's window resolves them), for the convolutions of every rank.
pub fn resolve(
    node: &Node,
    auto_pad: &str,
    (input, k, s, d): (usize, usize, usize, usize),
    (pb, pe): (usize, usize),
) -> Result<(usize, usize)> {
    let span = (k - 1)
        .checked_mul(d)
        .and_then(|v| v.checked_add(1))
        .ok_or_else(|| unsupported(node, "a dilated kernel too large"))?;
    match auto_pad {
        "SAME_UPPER" | "SAME_LOWER" => {
            let out = input.div_ceil(s);
            let total = ((out.max(1) - 1) * s + span).saturating_sub(input);
            let begin = if auto_pad == "SAME_UPPER" {
                total / 2
            } else {
                total - total / 2
            };
            Ok((out, begin))
        }
        "NOTSET" | "" | "VALID" => {
            let (pb, pe) = if auto_pad == "VALID" {
                (0, 0)
            } else {
                (pb, pe)
            };
            let avail = input + pb + pe;
            if avail < span {
                return Err(unsupported(node, "a kernel larger than the padded input"));
            }
            Ok(((avail - span) / s + 1, pb))
        }
        other => Err(unsupported(node, &format!("auto_pad `{other}`"))),
    }
}

/// Reads `node` into a [`ConvSpec`].
pub fn spec(g: &Graph, node: &Node) -> Result<ConvSpec> {
    if let Some(k) = stray_attr(node) {
        return Err(unsupported(node, &format!("attribute `{k}`")));
    }
    let fused = node.op == Op::Fused(FusedOp::FusedConv);
    let (x_dt, xs) = typed(g, node, input(node, 0)?)?;
    let (w_dt, ws) = typed(g, node, input(node, 1)?)?;
    let (out_dt, y_shape) = typed(g, node, output(node, 0)?)?;
    check_float(node, x_dt, "convolutions")?;
    check_float(node, out_dt, "outputs")?;
    if w_dt != x_dt {
        return Err(unsupported(node, "weights of another dtype than X"));
    }
    let nhwc = match node.attrs.str_or("layout", "NCHW").map_err(plan)? {
        "NCHW" => false,
        "NHWC" => true,
        other => return Err(unsupported(node, &format!("layout `{other}`"))),
    };
    if !fused && FUSED_ATTRS.iter().any(|a| node.attrs.has(a)) {
        return Err(unsupported(node, "FusedConv attributes on a plain Conv"));
    }
    let rank = xs.len();
    let spatial = match rank {
        3 => 1,
        4 => 2,
        r => {
            return Err(unsupported(
                node,
                &format!("{}-D convolutions", r.saturating_sub(2)),
            ))
        }
    };
    if ws.len() != rank || node.outputs.len() != 1 {
        return Err(unsupported(node, "weights whose rank differs from X's"));
    }
    // NCHW view of X: [N, C, *S].
    let (n, c, sp) = if nhwc {
        (xs[0], xs[rank - 1], xs[1..rank - 1].to_vec())
    } else {
        (xs[0], xs[1], xs[2..].to_vec())
    };
    let group = usize::try_from(node.attrs.int_or("group", 1).map_err(plan)?)
        .map_err(|_| unsupported(node, "a negative group"))?;
    let m = ws[0];
    if group == 0 || c % group != 0 || m % group != 0 || ws[1] * group != c {
        return Err(unsupported(node, "channels that do not match the group"));
    }
    let ints = |name: &str, default: usize, len: usize| ints(node, name, default, len);
    let kernel = ws[2..].to_vec();
    if ints("kernel_shape", 0, spatial)? != kernel && node.attrs.has("kernel_shape") {
        return Err(unsupported(node, "a kernel_shape that differs from W's"));
    }
    let strides = ints("strides", 1, spatial)?;
    let dil = ints("dilations", 1, spatial)?;
    let pads = ints("pads", 0, 2 * spatial)?;
    if strides.contains(&0) || dil.contains(&0) || kernel.contains(&0) {
        return Err(unsupported(node, "zero strides, dilations or kernel dims"));
    }
    let auto_pad = node.attrs.str_or("auto_pad", "NOTSET").map_err(plan)?;
    let mut out = Vec::new();
    let mut begin = Vec::new();
    for i in 0..spatial {
        let (o, b) = resolve(
            node,
            auto_pad,
            (sp[i], kernel[i], strides[i], dil[i]),
            (pads[i], pads[spatial + i]),
        )?;
        out.push(o);
        begin.push(b);
    }
    let mut want = vec![n];
    if nhwc {
        want.extend(&out);
        want.push(m);
    } else {
        want.push(m);
        want.extend(&out);
    }
    if want != y_shape {
        return Err(plan(format!(
            "{}: output shape {y_shape:?}, expected {want:?}",
            node.name
        )));
    }
    let operand = |k: usize, what: &str| -> Result<Option<(DType, Vec<usize>)>> {
        match opt_input(node, k) {
            None => Ok(None),
            Some(v) => {
                let (dt, s) = typed(g, node, v)?;
                check_float(node, dt, what)?;
                Ok(Some((dt, s)))
            }
        }
    };
    let bias = operand(2, "biases")?;
    check_bias(node, &bias, m)?;
    let residual = if fused {
        operand(3, "residuals")?
    } else {
        None
    };
    if node.inputs.len() > if fused { 4 } else { 3 } {
        return Err(unsupported(node, "extra inputs"));
    }
    if let Some((_, rs)) = &residual {
        let lead = y_shape.len().checked_sub(rs.len());
        let ok = lead.is_some_and(|l| {
            rs.iter()
                .zip(&y_shape[l..])
                .all(|(&r, &y)| r == y || r == 1)
        });
        if !ok {
            return Err(unsupported(node, "a residual that does not broadcast to Y"));
        }
    }
    let act = if fused {
        Activation::from_node(
            node,
            &[
                "none",
                "relu",
                "clip",
                "silu",
                "sigmoid",
                "tanh",
                "gelu",
                "gelu_tanh",
            ],
        )
        .map_err(|e| unsupported(node, &e.to_string()))?
    } else {
        Activation::None
    };
    let order = EpilogueOrder::from_node(node).map_err(|e| unsupported(node, &e.to_string()))?;
    let two = |v: &[usize], d: usize| {
        if spatial == 1 {
            (d, v[0])
        } else {
            (v[0], v[1])
        }
    };
    Ok(ConvSpec {
        site: Site::of(node),
        n,
        c,
        h: two(&sp, 1).0,
        w: two(&sp, 1).1,
        m,
        group,
        kh: two(&kernel, 1).0,
        kw: two(&kernel, 1).1,
        oh: two(&out, 1).0,
        ow: two(&out, 1).1,
        stride: two(&strides, 1),
        dilation: two(&dil, 1),
        pad: two(&begin, 0),
        spatial,
        nhwc,
        x_dt,
        out_dt,
        bias: bias.map(|b| b.0),
        residual,
        act,
        order,
        y_shape,
    })
}

/// Whether a convolution runs as a GEMM over an im2col matrix where the backend has a
/// GEMM library: a channels-last 2-D `FusedConv` of one group with constant weights
/// (the layout pass makes these for tensor-core GEMMs).
pub fn as_gemm(g: &Graph, node: &Node, s: &ConvSpec) -> bool {
    node.op == Op::Fused(FusedOp::FusedConv)
        && s.nhwc
        && s.group == 1
        && s.spatial == 2
        && node
            .inputs
            .get(1)
            .copied()
            .flatten()
            .is_some_and(|w| g.konst(w).is_some())
}

/// The lowering of Conv or FusedConv node `node` of `g` (1-D or 2-D): a convolution
/// run as a GEMM where [`as_gemm`] says so, its kernel otherwise, or why it has none.
pub fn lowered(g: &Graph, node: &Node) -> Result<super::Lowered> {
    match spec(g, node) {
        Ok(s) if as_gemm(g, node, &s) => match gemm_spec(g, node, s) {
            Ok(cg) => Ok(super::Lowered::ConvGemm(Box::new(cg))),
            Err(crate::CodegenError::Unsupported { what, .. }) => {
                Ok(super::Lowered::Unsupported(what))
            }
            Err(e) => Err(e),
        },
        parsed => super::typed(parsed, |s| super::Spec::Conv(Box::new(s))),
    }
}

/// A convolution [`as_gemm`] runs as a GEMM, with what the GEMM's writer reads besides
/// the convolution's spec: X, the constant weights it reorders, and the epilogue's
/// operands typed (bias, residual, output).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvGemmSpec {
    /// The convolution (channels-last, one group, 2-D).
    pub conv: ConvSpec,
    /// The node.
    pub site: Site,
    /// The input X.
    pub x: gopt_ir::ValueId,
    /// The weights `[M, C, KH, KW]`, a constant.
    pub weight: gopt_ir::Const,
    /// The epilogue: activation, bias (input 2), residual (input 3), output.
    pub tail: super::gemm::Tail,
}

/// The [`ConvGemmSpec`] of `node`, whose convolution spec is `conv`.
fn gemm_spec(g: &Graph, node: &Node, conv: ConvSpec) -> Result<ConvGemmSpec> {
    let input = |k: usize| node.inputs.get(k).copied().flatten();
    let missing = || super::support::plan(format!("`{}`: missing X or W", node.name));
    let (x, w) = (input(0).ok_or_else(missing)?, input(1).ok_or_else(missing)?);
    let weight = g.konst(w).cloned().ok_or_else(|| {
        super::support::plan(format!("`{}`: weights are not constant", node.name))
    })?;
    let tail = super::gemm::tail(g, node, conv.act, input(2), 1.0, input(3))?;
    Ok(ConvGemmSpec {
        conv,
        site: Site::of(node),
        x,
        weight,
        tail,
    })
}
