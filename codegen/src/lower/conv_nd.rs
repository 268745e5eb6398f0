//! Conv and FusedConv of 3 spatial dims (X of rank 5: video models), read once for every
//! backend. The 1-D and 2-D kernels of [`super::conv`] are tiled implicit GEMMs built
//! around a 2-D window; a 3-D convolution runs instead as a direct kernel, one thread
//! per output element summing over its group's `C/group` input channels × `kd × kh × kw`
//! taps. [`ConvNdSpec`] holds everything both writers need: the sizes, strides,
//! dilations and begin pads per spatial dim (explicit `pads` or `auto_pad` resolved as
//! the interpreter resolves them), the group, NCDHW or channels-last (`layout="NHWC"`,
//! `[N, D, H, W, C]`), the dtypes and FusedConv's epilogue (bias, activation, broadcast
//! residual, in the node's `epilogue` order), so the CUDA and WGSL kernels accept and
//! refuse the same nodes and index the same way.

use super::conv::{check_bias, resolve, stray_attr, FUSED_ATTRS};
use super::pool::ints;
use super::support::{check_float, input, opt_input, output, plan, typed, unsupported, Site};
use crate::twin::{Syntax, Ty};
use crate::Result;
use gopt_ir::ops::fused::{Activation, EpilogueOrder, CONV_ACTIVATIONS};
use gopt_ir::ops::FusedOp;
use gopt_ir::{DType, Graph, Node, Op, ValueId};

/// Spatial dims this family convolves over.
pub const SPATIAL: usize = 3;

/// Spatial sizes, strides and pads at or above this are refused (both kernels compute
/// the tap coordinates in 32-bit signed integers).
const COORD_LIMIT: usize = 1 << 24;

/// Whether `n` convolves over 3 spatial dims (X of rank 5): the 1-D and 2-D kernels of
/// [`super::conv`] do not cover it.
pub fn applies(g: &Graph, n: &Node) -> bool {
    n.inputs
        .first()
        .copied()
        .flatten()
        .and_then(|x| g.ty(x).ok())
        .is_some_and(|t| t.shape.len() == 5)
}

/// A tensor the kernel reads besides X and W: its value and dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    /// The graph value.
    pub value: ValueId,
    /// Its dtype (a float type).
    pub dtype: DType,
}

/// FusedConv's residual, broadcast to Y.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Residual {
    /// The tensor.
    pub operand: Operand,
    /// Its stride along each of Y's 5 axes (in Y's layout; 0 where it broadcasts).
    pub strides: [usize; 5],
    /// Whether it has Y's shape (then its offset is Y's).
    pub full: bool,
}

/// One 3-D convolution with every size resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvNdSpec {
    /// The node: its name, op and operands.
    pub site: Site,
    /// The input `[N, C, D, H, W]` (or `[N, D, H, W, C]`).
    pub x: ValueId,
    /// The weights `[M, C/group, KD, KH, KW]` (in every layout).
    pub w: ValueId,
    /// The per-output-channel bias, when there is one.
    pub bias: Option<Operand>,
    /// FusedConv's residual, when there is one.
    pub residual: Option<Residual>,
    /// The output `[N, M, OD, OH, OW]` (or `[N, OD, OH, OW, M]`).
    pub y: ValueId,
    /// X's (and W's) dtype.
    pub x_dt: DType,
    /// Y's dtype.
    pub out_dt: DType,
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Output channels.
    pub m: usize,
    /// Groups.
    pub group: usize,
    /// Input spatial dims (depth, height, width).
    pub input: [usize; SPATIAL],
    /// Kernel dims.
    pub kernel: [usize; SPATIAL],
    /// Output spatial dims.
    pub output: [usize; SPATIAL],
    /// Strides.
    pub stride: [usize; SPATIAL],
    /// Dilations.
    pub dilation: [usize; SPATIAL],
    /// Padding before the input, per dim (the end padding only sizes the output).
    pub pad: [usize; SPATIAL],
    /// Channels-last tensors (X, Y and the residual are `[N, *S, C]`).
    pub channels_last: bool,
    /// The epilogue's activation (none for Conv).
    pub act: Activation,
    /// Whether the residual is added before or after the activation.
    pub order: EpilogueOrder,
}

impl ConvNdSpec {
    /// Input channels per group.
    pub fn cg(&self) -> usize {
        self.c / self.group
    }

    /// Output channels per group.
    pub fn mg(&self) -> usize {
        self.m / self.group
    }

    /// Kernel taps (`kd × kh × kw`).
    pub fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Input positions per image and channel (`d × h × w`).
    pub fn in_positions(&self) -> usize {
        self.input.iter().product()
    }

    /// Output elements (one thread each).
    pub fn total(&self) -> usize {
        self.n * self.m * self.output.iter().product::<usize>()
    }

    /// Y's shape in its layout.
    pub fn y_shape(&self) -> Vec<usize> {
        layout_shape(self.n, self.m, &self.output, self.channels_last)
    }

    /// The graph values the kernel reads, in parameter (binding) order: X, W, bias?,
    /// residual?.
    pub fn inputs(&self) -> Vec<u32> {
        let mut v = vec![self.x.0, self.w.0];
        v.extend(self.bias.map(|b| b.value.0));
        v.extend(self.residual.as_ref().map(|r| r.operand.value.0));
        v
    }

    /// The most elements of X, W and Y (the residual has at most Y's): what a
    /// writer's index width must hold.
    pub fn largest(&self) -> usize {
        let x = self.n * self.c * self.in_positions();
        let w = self.m * self.cg() * self.taps();
        x.max(w).max(self.total())
    }

    /// A one-line description for the kernel's header comment.
    pub fn describe(&self) -> String {
        format!(
            "kernel {:?}, stride {:?}, dilation {:?}, pad {:?}, {} -> {} channels in {} group(s), {} {:?} -> {:?}",
            self.kernel,
            self.stride,
            self.dilation,
            self.pad,
            self.c,
            self.m,
            self.group,
            if self.channels_last { "NDHWC" } else { "NCDHW" },
            self.input,
            self.output
        )
    }

    /// The output coordinates `n, oc, od, oh, ow` of element `i` (Y's layout order, last
    /// axis fastest).
    pub fn decode(&self, sx: &dyn Syntax) -> String {
        let [od, oh, ow] = self.output.map(|v| sx.index(v));
        let m = sx.index(self.m);
        let (l, v, p) = (sx.let_head(), sx.var_head(), " ".repeat(8));
        if self.channels_last {
            format!(
                "{p}{l}oc = i % {m}; {v}r = i / {m};\n{p}{l}ow = r % {ow}; r = r / {ow};\n{p}{l}oh = r % {oh}; r = r / {oh};\n{p}{l}od = r % {od}; {l}n = r / {od};\n"
            )
        } else {
            format!(
                "{p}{l}ow = i % {ow}; {v}r = i / {ow};\n{p}{l}oh = r % {oh}; r = r / {oh};\n{p}{l}od = r % {od}; r = r / {od};\n{p}{l}oc = r % {m}; {l}n = r / {m};\n"
            )
        }
    }

    /// X's offset of the output's image and group's first channel (`xbase`), of input
    /// position (`xd`, `xh`, `xw`) from there (`xoff`), and the stride between channels.
    pub fn x_index(&self, sx: &dyn Syntax) -> (String, String, usize) {
        let ([_, h, w], c, cg, pos) = (self.input, self.c, self.cg(), self.in_positions());
        let (xd, xh, xw) = (
            sx.coord("xd", true),
            sx.coord("xh", false),
            sx.coord("xw", false),
        );
        let spatial = format!("({xd} * {} + {xh}) * {} + {xw}", sx.index(h), sx.index(w));
        let (c_, cg_) = (sx.index(c), sx.index(cg));
        if self.channels_last {
            (
                format!("n * {} + g * {cg_}", sx.index(pos * c)),
                format!("({spatial}) * {c_}"),
                1,
            )
        } else {
            (
                format!("(n * {c_} + g * {cg_}) * {}", sx.index(pos)),
                spatial,
                pos,
            )
        }
    }

    /// The residual's offset for output element `i` (numpy broadcasting).
    fn residual_index(&self, sx: &dyn Syntax, r: &Residual) -> String {
        if r.full {
            return "i".into();
        }
        let coords = if self.channels_last {
            ["n", "od", "oh", "ow", "oc"]
        } else {
            ["n", "oc", "od", "oh", "ow"]
        };
        let terms: Vec<String> = coords
            .iter()
            .zip(&r.strides)
            .filter(|(_, &st)| st != 0)
            .map(|(c, &st)| format!("{c} * {}", sx.index(st)))
            .collect();
        super::index::sum(&terms, &sx.index(0))
    }

    /// The epilogue for `acc_`, one statement a line: f32 `v` declared from it, then
    /// bias, activation (the statement `act`, empty for none) and residual in the
    /// node's order, and `store` (the statement storing `v`).
    pub fn epilogue(&self, sx: &dyn Syntax, act: String, store: String) -> String {
        let load = |e: &str| sx.load_f32(e);
        let mut lines = vec![sx.var(Ty::F32, "v", "acc_")];
        if self.bias.is_some() {
            lines.push(format!("v = v + {};", load("bias[oc]")));
        }
        let res = self
            .residual
            .as_ref()
            .map(|r| {
                let at = self.residual_index(sx, r);
                format!("v = v + {};", load(&format!("res[{at}]")))
            })
            .unwrap_or_default();
        match self.order {
            EpilogueOrder::ActThenResidual => lines.extend([act, res]),
            EpilogueOrder::ResidualThenAct => lines.extend([res, act]),
        }
        lines.push(store);
        lines
            .iter()
            .filter(|l| !l.is_empty())
            .map(|l| format!("        {l}\n"))
            .collect()
    }

    /// The template holes both kernels (`conv_nd.cu`, `conv_nd.wgsl`) fill the same
    /// way: the description, sizes, window and index expressions.
    pub fn holes(&self, sx: &dyn Syntax) -> Vec<(&'static str, String)> {
        let (xbase, xoff, xcs) = self.x_index(sx);
        let ([dd_, h, w], [kd, kh, kw]) = (self.input, self.kernel);
        let ([sd, sh, sw], [dd, dh, dw], [pd, ph, pw]) = (self.stride, self.dilation, self.pad);
        let mut holes = vec![
            ("desc", self.describe()),
            ("decode", self.decode(sx)),
            ("xbase", xbase),
            ("xoff", xoff),
        ];
        holes.extend(
            [
                ("total", self.total()),
                ("mg", self.mg()),
                ("wrow", self.cg() * self.taps()),
                ("kd", kd),
                ("kh", kh),
                ("kw", kw),
                ("sd", sd),
                ("sh", sh),
                ("sw", sw),
                ("dd", dd),
                ("dh", dh),
                ("dw", dw),
                ("pd", pd),
                ("ph", ph),
                ("pw", pw),
                ("d", dd_),
                ("h", h),
                ("w", w),
                ("cg", self.cg()),
                ("xcs", xcs),
                ("taps", self.taps()),
            ]
            .map(|(k, v)| (k, v.to_string())),
        );
        holes
    }
}

/// `[n, c, *s]`, or `[n, *s, c]` channels-last.
fn layout_shape(n: usize, c: usize, s: &[usize], channels_last: bool) -> Vec<usize> {
    let mut v = vec![n];
    if channels_last {
        v.extend(s);
        v.push(c);
    } else {
        v.push(c);
        v.extend(s);
    }
    v
}

/// The first three values of `v` (callers pass exactly [`SPATIAL`] of them).
fn three(v: &[usize]) -> [usize; SPATIAL] {
    [v[0], v[1], v[2]]
}

/// Input `k` as a float operand, when present.
fn operand(g: &Graph, node: &Node, k: usize, what: &str) -> Result<Option<(Operand, Vec<usize>)>> {
    match opt_input(node, k) {
        None => Ok(None),
        Some(value) => {
            let (dtype, shape) = typed(g, node, value)?;
            check_float(node, dtype, what)?;
            Ok(Some((Operand { value, dtype }, shape)))
        }
    }
}

/// The residual of shape `rs` broadcast (numpy rules) to Y of shape `ys`.
fn residual(node: &Node, op: Operand, rs: &[usize], ys: &[usize]) -> Result<Residual> {
    let lead = ys
        .len()
        .checked_sub(rs.len())
        .ok_or_else(|| unsupported(node, "a residual of higher rank than Y"))?;
    let rst = super::index::strides(rs);
    let mut strides = [0; 5];
    for (a, (&r, &y)) in rs.iter().zip(&ys[lead..]).enumerate() {
        if r != y && r != 1 {
            return Err(unsupported(node, "a residual that does not broadcast to Y"));
        }
        strides[lead + a] = if r == 1 { 0 } else { rst[a] };
    }
    Ok(Residual {
        operand: op,
        strides,
        full: rs == ys,
    })
}

/// Reads Conv or FusedConv node `node` of `g` (X of rank 5) into a [`ConvNdSpec`].
pub fn spec(g: &Graph, node: &Node) -> Result<ConvNdSpec> {
    if let Some(k) = stray_attr(node) {
        return Err(unsupported(node, &format!("attribute `{k}`")));
    }
    let fused = node.op == Op::Fused(FusedOp::FusedConv);
    if !fused && FUSED_ATTRS.iter().any(|a| node.attrs.has(a)) {
        return Err(unsupported(node, "FusedConv attributes on a plain Conv"));
    }
    let (x, w, y) = (input(node, 0)?, input(node, 1)?, output(node, 0)?);
    let (x_dt, xs) = typed(g, node, x)?;
    let (w_dt, ws) = typed(g, node, w)?;
    let (out_dt, ys) = typed(g, node, y)?;
    check_float(node, x_dt, "convolutions")?;
    check_float(node, out_dt, "outputs")?;
    if w_dt != x_dt {
        return Err(unsupported(node, "weights of another dtype than X"));
    }
    if xs.len() != SPATIAL + 2 {
        return Err(unsupported(
            node,
            &format!("{}-D convolutions", xs.len().saturating_sub(2)),
        ));
    }
    if ws.len() != xs.len() || node.outputs.len() != 1 {
        return Err(unsupported(node, "weights whose rank differs from X's"));
    }
    if node.inputs.len() > if fused { 4 } else { 3 } {
        return Err(unsupported(node, "extra inputs"));
    }
    let channels_last = match node.attrs.str_or("layout", "NCHW").map_err(plan)? {
        "NCHW" => false,
        "NHWC" => true,
        other => return Err(unsupported(node, &format!("layout `{other}`"))),
    };
    let (n, c, sp) = if channels_last {
        (xs[0], xs[4], three(&xs[1..4]))
    } else {
        (xs[0], xs[1], three(&xs[2..]))
    };
    let group = usize::try_from(node.attrs.int_or("group", 1).map_err(plan)?)
        .map_err(|_| unsupported(node, "a negative group"))?;
    let m = ws[0];
    if group == 0 || c % group != 0 || m % group != 0 || ws[1] * group != c {
        return Err(unsupported(node, "channels that do not match the group"));
    }
    let kernel = three(&ws[2..]);
    if node.attrs.has("kernel_shape") && ints(node, "kernel_shape", 0, SPATIAL)? != kernel {
        return Err(unsupported(node, "a kernel_shape that differs from W's"));
    }
    let stride = three(&ints(node, "strides", 1, SPATIAL)?);
    let dilation = three(&ints(node, "dilations", 1, SPATIAL)?);
    let pads = ints(node, "pads", 0, 2 * SPATIAL)?;
    if stride.contains(&0) || dilation.contains(&0) || kernel.contains(&0) {
        return Err(unsupported(node, "zero strides, dilations or kernel dims"));
    }
    let auto_pad = node.attrs.str_or("auto_pad", "NOTSET").map_err(plan)?;
    if auto_pad.is_empty() {
        return Err(unsupported(node, "auto_pad ``"));
    }
    let (mut out, mut pad) = ([0; SPATIAL], [0; SPATIAL]);
    for i in 0..SPATIAL {
        (out[i], pad[i]) = resolve(
            node,
            auto_pad,
            (sp[i], kernel[i], stride[i], dilation[i]),
            (pads[i], pads[SPATIAL + i]),
        )?;
    }
    let want = layout_shape(n, m, &out, channels_last);
    if want != ys {
        return Err(plan(format!(
            "{}: output shape {ys:?}, expected {want:?}",
            node.name
        )));
    }
    let bias = operand(g, node, 2, "biases")?;
    check_bias(node, &bias, m)?;
    let residual = if fused {
        operand(g, node, 3, "residuals")?
            .map(|(op, rs)| residual(node, op, &rs, &ys))
            .transpose()?
    } else {
        None
    };
    let too_far = (0..SPATIAL).any(|i| {
        sp[i].max(out[i] * stride[i]) >= COORD_LIMIT
            || kernel[i] * dilation[i] >= COORD_LIMIT
            || pad[i] >= COORD_LIMIT
    });
    if too_far {
        return Err(unsupported(
            node,
            "spatial sizes, strides or pads of 2^24 or more",
        ));
    }
    let (act, order) = if fused {
        (
            Activation::from_node(node, CONV_ACTIVATIONS)
                .map_err(|e| unsupported(node, &e.to_string()))?,
            EpilogueOrder::from_node(node).map_err(|e| unsupported(node, &e.to_string()))?,
        )
    } else {
        (Activation::None, EpilogueOrder::ActThenResidual)
    };
    Ok(ConvNdSpec {
        site: Site::of(node),
        x,
        w,
        bias: bias.map(|b| b.0),
        residual,
        y,
        x_dt,
        out_dt,
        n,
        c,
        m,
        group,
        input: sp,
        kernel,
        output: out,
        stride,
        dilation,
        pad,
        channels_last,
        act,
        order,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(text: &str) -> Graph {
        gopt_ir::verify(gopt_ir::text::parse(text).expect("parses"))
            .expect("verifies")
            .into_inner()
    }

    #[test]
    fn reads_pads_strides_groups_and_same_padding() {
        let g = graph(
            "graph \"g\"(%0 \"x\": f32[2,4,5,6,7], %1 \"w\": f32[6,2,3,2,3]) -> (%2) {\n  %2 \"y\": f32[2,6,2,6,4] = Conv \"c\"(%0, %1) {group=2, strides=ints[2,1,2], dilations=ints[1,2,1], pads=ints[0,1,1,0,1,1]}\n}",
        );
        let s = spec(&g, &g.nodes[0]).expect("spec");
        assert_eq!((s.n, s.c, s.m, s.group, s.cg(), s.mg()), (2, 4, 6, 2, 2, 3));
        assert_eq!(s.output, [2, 6, 4]);
        assert_eq!(s.pad, [0, 1, 1]);
        assert_eq!(s.taps(), 18);
        let g = graph(
            "graph \"g\"(%0 \"x\": f32[1,1,5,5,5], %1 \"w\": f32[1,1,2,2,2]) -> (%2) {\n  %2 \"y\": f32[1,1,3,3,3] = Conv \"c\"(%0, %1) {strides=ints[2,2,2], auto_pad=\"SAME_LOWER\"}\n}",
        );
        let s = spec(&g, &g.nodes[0]).expect("spec");
        assert_eq!((s.output, s.pad), ([3, 3, 3], [1, 1, 1]));
    }

    #[test]
    fn reads_a_channels_last_fused_epilogue() {
        let g = graph(
            "graph \"g\"(%0 \"x\": f32[1,3,4,4,8], %1 \"w\": f32[5,8,1,1,1], %2 \"b\": f32[5], %3 \"r\": f32[4,1,5]) -> (%4) {\n  %4 \"y\": f32[1,3,4,4,5] = FusedConv \"c\"(%0, %1, %2, %3) {layout=\"NHWC\", activation=\"relu\", epilogue=\"bias_residual_act\"}\n}",
        );
        let s = spec(&g, &g.nodes[0]).expect("spec");
        assert!(s.channels_last);
        assert_eq!(s.y_shape(), vec![1, 3, 4, 4, 5]);
        let r = s.residual.expect("residual");
        assert_eq!(r.strides, [0, 0, 5, 0, 1]);
        assert!(!r.full);
        assert_eq!(
            (s.act, s.order),
            (Activation::Relu, EpilogueOrder::ResidualThenAct)
        );
    }
}
