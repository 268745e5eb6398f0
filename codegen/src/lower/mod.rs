//! Lowering: what each node of a verified, specialized graph becomes on a GPU, decided
//! once for every backend before any source is written ([`lower`], one exhaustive
//! `match` over the IR's ops: adding an op to the IR is a compile error here until it
//! is given a kernel kind or a reason it has none).
//!
//! A node becomes a view (its output aliases its input: no step), a matrix product (a
//! library GEMM on CUDA, a tiled shader on WGSL), a convolution run as a GEMM, a kernel
//! of one [`Kind`], or nothing with a reason. The shared facts each kernel kind needs
//! live here too, read from the node once: typed operands ([`support`]), element-wise
//! bodies ([`body`]), data-movement index maps ([`index`]), a convolution's spec
//! ([`conv`]), a pool's window ([`pool`]), a reduction's axes and runs ([`reduce`]),
//! and the specs of the other families ([`arg`], [`cumulative`], [`gather_elements`],
//! [`loss`], [`trilu`], [`resize`], [`sample`], [`scatter`], [`indexed`],
//! [`conv_transpose`], [`conv_nd`], [`conv_state`], [`norm`], [`topk`], [`quant`],
//! [`einsum`], [`glu`], [`rotary`], [`recurrent`], [`spectral`], [`linear_attention`]).
//! Most of the later families are one invocation per output element that loops over
//! what it reads: they exist for coverage (a model with one node no GPU kernel covers
//! does not run on that GPU at all), and each CUDA kernel mirrors its WGSL twin line by
//! line. The CUDA and WGSL writers (`crate::cuda`,
//! `crate::wgsl`) each match exhaustively over [`Lowered`] and [`Kind`], spell these
//! facts in their own language, and never import each other.

pub mod absorb;
pub mod arg;
pub mod attention;
pub mod body;
pub mod conv;
pub mod conv_nd;
pub mod conv_state;
pub mod conv_transpose;
pub mod counted;
pub mod cumulative;
pub mod einsum;
pub mod elementwise;
pub mod gather_elements;
pub mod gemm;
pub mod glu;
pub mod index;
pub mod indexed;
pub mod linear_attention;
pub mod loss;
pub mod norm;
pub mod packed;
pub mod pool;
pub mod quant;
pub mod recurrent;
pub mod reduce;
pub mod resize;
pub mod rotary;
pub mod rows;
pub mod sample;
pub mod scatter;
pub mod spectral;
pub mod split_pad;
pub mod support;
pub mod topk;
pub mod trilu;

use gopt_ir::ops::{
    AttentionOp, CollectiveOp, ControlOp, ElementwiseOp, FusedOp, ImageOp, NnOp, ReduceOp, ShapeOp,
};
use gopt_ir::{Graph, Node, Op, ValueId};

/// The kernel families both GPU writers implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// One output element per thread from a body over broadcast inputs (single
    /// element-wise ops and `FusedElementwise` groups).
    Elementwise,
    /// One row at a time along one axis: LayerNorm, RMSNorm, softmax and friends.
    Rows,
    /// Reductions over axes (and the global pools).
    Reduce,
    /// ArgMax, ArgMin, Hardmax: the position of an extremum along an axis.
    Arg,
    /// CumSum, CumProd: scans along an axis.
    Cumulative,
    /// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.
    Loss,
    /// Trilu: a triangle of the last two dims.
    Trilu,
    /// GatherElements: indices computed on the device, checked.
    GatherElements,
    /// Copies with an index map: Transpose, Slice, Gather, Expand, Concat, and the
    /// views that cannot alias (a view of a constant, or of a pinned buffer).
    Movement,
    /// Split and Pad.
    SplitPad,
    /// Direct and implicit-GEMM convolutions.
    Conv,
    /// MaxPool, AveragePool and LpPool windows (GlobalLpPool as one window).
    Pool,
    /// Scaled dot-product attention (flash-style).
    Attention,
    /// RNN, GRU, LSTM.
    Recurrent,
    /// DFT and STFT.
    Spectral,
    /// CausalConvWithState.
    ConvState,
    /// Conv and FusedConv of 3 spatial dims.
    ConvNd,
    /// LinearAttention.
    LinearAttention,
    /// Resize (every mode of ONNX Resize/Upsample).
    Resize,
    /// GridSample, AffineGrid, RoiAlign.
    Sample,
    /// ScatterND, ScatterElements, Scatter, TensorScatter.
    Scatter,
    /// GatherND, Tile, DepthToSpace, SpaceToDepth, CenterCropPad, ReverseSequence, OneHot, EyeLike, Range, ConstantOfShape.
    Indexed,
    /// ConvTranspose, Col2Im, MaxUnpool, DeformConv.
    ConvTranspose,
    /// BatchNormalization, InstanceNormalization, GroupNormalization, LRN, MeanVarianceNormalization.
    Norm,
    /// TopK.
    TopK,
    /// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.
    Quant,
    /// Einsum, Det.
    Einsum,
    /// SwiGLU.
    Glu,
    /// RotaryEmbedding.
    Rotary,
    /// NonZero, Compress, Unique, NonMaxSuppression: outputs laid out at a bound, with
    /// the size the kernel counts read back after the run ([`counted`]).
    Counted,
}

impl Kind {
    /// The family's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Elementwise => "elementwise",
            Kind::Rows => "rows",
            Kind::Reduce => "reduce",
            Kind::Arg => "arg",
            Kind::Cumulative => "cumulative",
            Kind::Loss => "loss",
            Kind::Trilu => "trilu",
            Kind::GatherElements => "gather_elements",
            Kind::Movement => "movement",
            Kind::SplitPad => "split_pad",
            Kind::Conv => "conv",
            Kind::Pool => "pool",
            Kind::Attention => "attention",
            Kind::Recurrent => "recurrent",
            Kind::Spectral => "spectral",
            Kind::ConvState => "conv_state",
            Kind::ConvNd => "conv_nd",
            Kind::LinearAttention => "linear_attention",
            Kind::Resize => "resize",
            Kind::Sample => "sample",
            Kind::Scatter => "scatter",
            Kind::Indexed => "indexed",
            Kind::ConvTranspose => "conv_transpose",
            Kind::Norm => "norm",
            Kind::TopK => "topk",
            Kind::Quant => "quant",
            Kind::Einsum => "einsum",
            Kind::Glu => "glu",
            Kind::Rotary => "rotary",
            Kind::Counted => "counted",
        }
    }
}

/// A kernel family with what its writers need, read from the node once while lowering
/// so that both backends' writers take the same facts and never parse the graph again.
///
/// Each family moves from [`Spec::Untyped`] (its writers still read the node) to a
/// variant of its own carrying its spec; the writers' dispatch matches every variant.
#[derive(Clone, Debug, PartialEq)]
pub enum Spec {
    /// A family whose writers still read the graph and the node themselves.
    Untyped(Kind),
}

impl Spec {
    /// The family, for reports and counts.
    pub fn kind(&self) -> Kind {
        match self {
            Spec::Untyped(k) => *k,
        }
    }
}

/// The lowering of a spec parsed from a node: a kernel when it parses, the node
/// refused (with the reason, reported with the other refused nodes) when the family
/// has no kernel for this form of it, the error otherwise.
pub fn typed<S>(parsed: crate::Result<S>, wrap: impl FnOnce(S) -> Spec) -> crate::Result<Lowered> {
    match parsed {
        Ok(s) => Ok(Lowered::Kernel(wrap(s))),
        Err(crate::CodegenError::Unsupported { what, .. }) => Ok(Lowered::Unsupported(what)),
        Err(e) => Err(e),
    }
}

/// The error for a family reaching a writer untyped after its spec was typed: a
/// lowering bug, since [`lower`] makes that family's own [`Spec`] variant.
pub fn typed_elsewhere(kind: Kind) -> crate::CodegenError {
    crate::CodegenError::Plan(format!(
        "the {} family is lowered with a typed spec, not Spec::Untyped (a gopt bug)",
        kind.name()
    ))
}

/// What one node becomes.
#[derive(Clone, Debug, PartialEq)]
pub enum Lowered {
    /// The output aliases input 0's bytes: no step runs.
    View,
    /// A matrix product with its epilogue (MatMul, Gemm, FusedMatMul).
    Gemm(GemmForm),
    /// A channels-last FusedConv with constant weights, run as a GEMM over an im2col
    /// matrix where the backend has a GEMM library (CUDA); a convolution kernel
    /// elsewhere.
    ConvGemm,
    /// The output is a contiguous run of input 0's bytes starting this many bytes in
    /// (a multiple of [`crate::memory::ALIGN`]): no step runs ([`window`]).
    Window(usize),
    /// A product with a packed low-bit weight (MatMulNBits, [`packed`]): a GEMV that
    /// dequantizes in registers for few rows; for many, the weight dequantized into
    /// scratch and a library GEMM where the backend has one.
    PackedGemm,
    /// A generated kernel: its family and the parameters its writers need ([`Spec`]).
    Kernel(Spec),
    /// No step of its own: its neighbours do its work ([`absorb`]): attention reads a
    /// Split's pieces in place, a row kernel stores a Cast's type.
    Absorbed,
    /// No kernel: a collective, which the CUDA executor runs as an NCCL call between
    /// the rank's steps (`cuda::collective`); other backends refuse it.
    Collective(CollectiveOp),
    /// No GPU kernel, and why (the op, or the mode of it).
    Unsupported(String),
}

/// The ONNX form of a matrix product (a library GEMM takes both; shaders differ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmForm {
    /// MatMul or FusedMatMul: numpy-style batched products with an epilogue.
    MatMul,
    /// Gemm: 2-D, `alpha`, `beta`, transposes and a broadcast C.
    Gemm,
}

/// How views are placed by the backend's memory plan.
#[derive(Clone, Copy, Debug)]
pub struct Views {
    /// Whether a graph output may alias another value's bytes (an arena: yes; a pool
    /// whose outputs are read back from their own buffers: no).
    pub alias_outputs: bool,
    /// Whether attention, element-wise, SwiGLU and rotary kernels read their inputs
    /// with any row stride and column offset, so a Split or Slice that cuts them from
    /// one tensor is absorbed ([`absorb`]).
    pub strided_reads: bool,
    /// Whether row kernels store a Cast's type next to (or instead of) their own, and
    /// SwiGLU and rotary kernels instead of theirs, so the Cast after a LayerNorm,
    /// RMSNorm, softmax, SwiGLU or RotaryEmbedding is absorbed ([`absorb`]).
    pub stores_casts: bool,
    /// Whether a value may start inside another's bytes (an arena: yes; a pool that
    /// binds whole buffers: no), so a Slice that cuts one contiguous, aligned run out
    /// of its input is a [`Lowered::Window`] instead of a copy.
    pub offset_views: bool,
}

/// Whether `op` is a view op: its output is its input's bytes under another shape.
pub fn is_view_op(op: Op) -> bool {
    matches!(
        op,
        Op::Shape(
            ShapeOp::Reshape
                | ShapeOp::Squeeze
                | ShapeOp::Unsqueeze
                | ShapeOp::Flatten
                | ShapeOp::Identity
        )
    )
}

/// Whether node `n` of `g` is a view: a view op, or a Transpose that moves only axes
/// of length 1 (the others keep their order, so the elements' order is the input's:
/// a decode step's `[batch, 1, heads, head] -> [batch, heads, 1, head]`).
pub fn is_view(g: &Graph, n: &Node) -> bool {
    is_view_op(n.op) || order_kept(g, n)
}

/// Whether Transpose node `n` keeps its input's element order.
fn order_kept(g: &Graph, n: &Node) -> bool {
    if n.op != Op::Shape(ShapeOp::Transpose) {
        return false;
    }
    let Some(Some(x)) = n.inputs.first() else {
        return false;
    };
    let Some(shape) = g.ty(*x).ok().and_then(|t| gopt_ir::dim::concrete(&t.shape)) else {
        return false;
    };
    let perm: Vec<usize> = match n.attrs.ints("perm") {
        Ok(Some(p)) => p.iter().map(|&a| a as usize).collect(),
        Ok(None) => (0..shape.len()).rev().collect(),
        Err(_) => return false,
    };
    let moved: Vec<usize> = perm
        .into_iter()
        .filter(|&a| shape.get(a).is_some_and(|&d| d != 1))
        .collect();
    moved.windows(2).all(|w| w[0] < w[1])
}

/// The byte offset of Slice node `n`'s output in its input, when the output is one
/// contiguous run of the input starting at a multiple of [`crate::memory::ALIGN`]
/// bytes: steps of 1, every axis before the one it cuts of length 1 and every axis
/// after it whole (a decode step's Q, K and V cut from one GEMM output).
pub fn window(g: &Graph, n: &Node) -> Option<usize> {
    if n.op != Op::Shape(ShapeOp::Slice) {
        return None;
    }
    let (x, y) = (n.inputs.first().copied().flatten()?, *n.outputs.first()?);
    let xt = g.ty(x).ok()?;
    let xs = gopt_ir::dim::concrete(&xt.shape)?;
    let ys = gopt_ir::dim::concrete(&g.ty(y).ok()?.shape)?;
    let (start, step) = index::slice_window(g, n, &xs).ok()?;
    if step.iter().any(|&s| s != 1) || xs.len() != ys.len() {
        return None;
    }
    let cut = (0..xs.len()).find(|&a| start[a] != 0 || ys[a] != xs[a])?;
    let before_unit = xs[..cut].iter().all(|&d| d == 1);
    let after_whole = (cut + 1..xs.len()).all(|a| start[a] == 0 && ys[a] == xs[a]);
    let inner: usize = xs[cut + 1..].iter().product();
    let offset = start[cut] as usize * inner * xt.dtype.size();
    (before_unit && after_whole && offset.is_multiple_of(crate::memory::ALIGN)).then_some(offset)
}

/// Whether view node `n` of `g` aliases its input under `views`: its source is not a
/// constant (constants live in the weights), and its output may alias.
pub fn aliases(g: &Graph, n: &Node, views: Views) -> bool {
    let (Some(Some(src)), [out]) = (n.inputs.first(), n.outputs.as_slice()) else {
        return false;
    };
    is_view(g, n) && may_alias(g, *src, *out, views)
}

/// Whether `out` may live in `src`'s bytes: `src` is not a constant and `out` is not
/// an input, nor an output where outputs may not alias.
fn may_alias(g: &Graph, src: ValueId, out: ValueId, views: Views) -> bool {
    !is_const_root(g, src)
        && (views.alias_outputs || !g.outputs.contains(&out))
        && !g.inputs.contains(&out)
}

/// Whether `v`, followed back through view nodes, is a constant.
fn is_const_root(g: &Graph, mut v: ValueId) -> bool {
    loop {
        if g.constants.contains_key(&v) {
            return true;
        }
        match g
            .nodes
            .iter()
            .find(|n| is_view(g, n) && n.outputs.first() == Some(&v))
            .and_then(|n| n.inputs.first().copied().flatten())
        {
            Some(src) => v = src,
            None => return false,
        }
    }
}

/// A counted kernel for `n` ([`counted`]), or why its outputs cannot be counted.
fn counted_kernel(g: &Graph, n: &Node) -> Lowered {
    match counted::refusal(g, n) {
        None => Lowered::Kernel(Spec::Untyped(Kind::Counted)),
        Some(why) => Lowered::Unsupported(why),
    }
}

/// What node `n` of `g` becomes on a GPU. An error is one no backend can report as a
/// missing kernel (a size known only at run time, a graph the planner cannot lay out);
/// a form of an op no kernel covers is [`Lowered::Unsupported`].
pub fn lower(g: &Graph, n: &Node, views: Views) -> crate::Result<Lowered> {
    if (views.stores_casts && absorb::cast_stored_by_producer(g, n))
        || (views.strided_reads && absorb::cut_read_in_place(g, n, views))
    {
        return Ok(Lowered::Absorbed);
    }
    use Kind::*;
    let k = |kind| Lowered::Kernel(Spec::Untyped(kind));
    let none = |why: &str| Lowered::Unsupported(why.to_string());
    // A family with a typed spec returns `typed(family::spec(g, n), Spec::Family)`.
    Ok(match n.op {
        Op::Elementwise(e) => match e {
            ElementwiseOp::Bernoulli
            | ElementwiseOp::RandomUniform
            | ElementwiseOp::RandomNormal
            | ElementwiseOp::RandomUniformLike
            | ElementwiseOp::RandomNormalLike
            | ElementwiseOp::Multinomial => none("random ops (they run on the CPU only)"),
            ElementwiseOp::Add
            | ElementwiseOp::Sub
            | ElementwiseOp::Mul
            | ElementwiseOp::Div
            | ElementwiseOp::Pow
            | ElementwiseOp::Mod
            | ElementwiseOp::Neg
            | ElementwiseOp::Abs
            | ElementwiseOp::Reciprocal
            | ElementwiseOp::Sqrt
            | ElementwiseOp::Exp
            | ElementwiseOp::Log
            | ElementwiseOp::Ceil
            | ElementwiseOp::Floor
            | ElementwiseOp::Round
            | ElementwiseOp::Sign
            | ElementwiseOp::Sin
            | ElementwiseOp::Cos
            | ElementwiseOp::Tan
            | ElementwiseOp::Asin
            | ElementwiseOp::Acos
            | ElementwiseOp::Atan
            | ElementwiseOp::Sinh
            | ElementwiseOp::Cosh
            | ElementwiseOp::Asinh
            | ElementwiseOp::Acosh
            | ElementwiseOp::Atanh
            | ElementwiseOp::Tanh
            | ElementwiseOp::Sigmoid
            | ElementwiseOp::Erf
            | ElementwiseOp::Relu
            | ElementwiseOp::LeakyRelu
            | ElementwiseOp::Elu
            | ElementwiseOp::Selu
            | ElementwiseOp::Celu
            | ElementwiseOp::HardSigmoid
            | ElementwiseOp::HardSwish
            | ElementwiseOp::Softplus
            | ElementwiseOp::Softsign
            | ElementwiseOp::ThresholdedRelu
            | ElementwiseOp::Shrink
            | ElementwiseOp::Mish
            | ElementwiseOp::Gelu
            | ElementwiseOp::Swish
            | ElementwiseOp::PRelu
            | ElementwiseOp::Not
            | ElementwiseOp::And
            | ElementwiseOp::Or
            | ElementwiseOp::Xor
            | ElementwiseOp::BitwiseNot
            | ElementwiseOp::BitwiseAnd
            | ElementwiseOp::BitwiseOr
            | ElementwiseOp::BitwiseXor
            | ElementwiseOp::BitShift
            | ElementwiseOp::IsNaN
            | ElementwiseOp::IsInf
            | ElementwiseOp::Equal
            | ElementwiseOp::Less
            | ElementwiseOp::LessOrEqual
            | ElementwiseOp::Greater
            | ElementwiseOp::GreaterOrEqual
            | ElementwiseOp::Max
            | ElementwiseOp::Min
            | ElementwiseOp::Sum
            | ElementwiseOp::Mean
            | ElementwiseOp::Where
            | ElementwiseOp::Clip
            | ElementwiseOp::Cast
            | ElementwiseOp::CastLike
            | ElementwiseOp::BitCast
            | ElementwiseOp::Dropout => k(Elementwise),
        },
        Op::Fused(f) => match f {
            FusedOp::FusedElementwise => k(Elementwise),
            FusedOp::FusedMatMul => Lowered::Gemm(GemmForm::MatMul),
            FusedOp::FusedConv if conv_nd::applies(g, n) => k(ConvNd),
            FusedOp::FusedConv if conv::as_gemm(g, n) => Lowered::ConvGemm,
            FusedOp::FusedConv => k(Conv),
        },
        Op::Reduce(r) => match r {
            ReduceOp::ReduceSum
            | ReduceOp::ReduceMean
            | ReduceOp::ReduceMax
            | ReduceOp::ReduceMin
            | ReduceOp::ReduceProd
            | ReduceOp::ReduceL1
            | ReduceOp::ReduceL2
            | ReduceOp::ReduceLogSum
            | ReduceOp::ReduceLogSumExp
            | ReduceOp::ReduceSumSquare => k(Reduce),
            ReduceOp::ArgMax | ReduceOp::ArgMin | ReduceOp::Hardmax => k(Arg),
            ReduceOp::Softmax
            | ReduceOp::LogSoftmax
            | ReduceOp::LayerNormalization
            | ReduceOp::RMSNormalization
            | ReduceOp::LpNormalization => k(Rows),
            ReduceOp::CumSum | ReduceOp::CumProd => k(Cumulative),
            ReduceOp::NegativeLogLikelihoodLoss | ReduceOp::SoftmaxCrossEntropyLoss => k(Loss),
            ReduceOp::TopK => k(TopK),
            ReduceOp::GroupNormalization
            | ReduceOp::InstanceNormalization
            | ReduceOp::BatchNormalization
            | ReduceOp::MeanVarianceNormalization
            | ReduceOp::LRN => k(Norm),
        },
        Op::Shape(s) => match s {
            ShapeOp::Reshape
            | ShapeOp::Flatten
            | ShapeOp::Squeeze
            | ShapeOp::Unsqueeze
            | ShapeOp::Identity => {
                if aliases(g, n, views) {
                    Lowered::View
                } else {
                    k(Movement)
                }
            }
            ShapeOp::Transpose if aliases(g, n, views) => Lowered::View,
            ShapeOp::Slice if views.offset_views => match (window(g, n), n.inputs.first()) {
                (Some(off), Some(Some(src))) if may_alias(g, *src, n.outputs[0], views) => {
                    Lowered::Window(off)
                }
                _ => k(Movement),
            },
            ShapeOp::Transpose
            | ShapeOp::Slice
            | ShapeOp::Gather
            | ShapeOp::Expand
            | ShapeOp::Concat => k(Movement),
            ShapeOp::Split | ShapeOp::Pad => k(SplitPad),
            ShapeOp::GatherElements => k(GatherElements),
            ShapeOp::Trilu => k(Trilu),
            ShapeOp::Tile
            | ShapeOp::DepthToSpace
            | ShapeOp::SpaceToDepth
            | ShapeOp::CenterCropPad
            | ShapeOp::ReverseSequence
            | ShapeOp::GatherND
            | ShapeOp::ConstantOfShape
            | ShapeOp::Range
            | ShapeOp::EyeLike
            | ShapeOp::OneHot => k(Indexed),
            ShapeOp::ScatterElements | ShapeOp::ScatterND | ShapeOp::Scatter => k(Scatter),
            ShapeOp::Shape | ShapeOp::Size => {
                none("Shape and Size (constants once shapes are specialized; not on a GPU)")
            }
            ShapeOp::Compress | ShapeOp::NonZero | ShapeOp::Unique => counted_kernel(g, n),
        },
        Op::Nn(o) => match o {
            NnOp::MatMul => Lowered::Gemm(GemmForm::MatMul),
            NnOp::Gemm => Lowered::Gemm(GemmForm::Gemm),
            NnOp::MatMulNBits => Lowered::PackedGemm,
            NnOp::Conv if conv_nd::applies(g, n) => k(ConvNd),
            NnOp::Conv => k(Conv),
            NnOp::MaxPool | NnOp::AveragePool => k(Pool),
            NnOp::GlobalAveragePool | NnOp::GlobalMaxPool => k(Reduce),
            NnOp::MatMulInteger
            | NnOp::QLinearMatMul
            | NnOp::ConvInteger
            | NnOp::QLinearConv
            | NnOp::QuantizeLinear
            | NnOp::DequantizeLinear
            | NnOp::DynamicQuantizeLinear => k(Quant),
            NnOp::ConvTranspose | NnOp::DeformConv | NnOp::MaxUnpool => k(ConvTranspose),
            NnOp::LpPool | NnOp::GlobalLpPool => k(Pool),
            NnOp::Einsum | NnOp::Det => k(Einsum),
        },
        Op::Attention(a) => match a {
            AttentionOp::Attention => k(Attention),
            AttentionOp::RotaryEmbedding => k(Rotary),
            AttentionOp::SwiGLU => k(Glu),
            AttentionOp::TensorScatter => k(Scatter),
            AttentionOp::CausalConvWithState => k(ConvState),
            AttentionOp::LinearAttention => k(LinearAttention),
            AttentionOp::FlexAttention => none("this op"),
        },
        Op::Image(i) => match i {
            ImageOp::Resize => k(Resize),
            ImageOp::GridSample | ImageOp::AffineGrid | ImageOp::RoiAlign => k(Sample),
            ImageOp::Col2Im => k(ConvTranspose),
            ImageOp::DFT | ImageOp::STFT => k(Spectral),
            ImageOp::NonMaxSuppression => counted_kernel(g, n),
            ImageOp::HannWindow
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
            | ImageOp::TreeEnsemble => none("this op"),
        },
        Op::Control(c) => match c {
            ControlOp::RNN | ControlOp::GRU | ControlOp::LSTM => k(Recurrent),
            ControlOp::If | ControlOp::Loop | ControlOp::Scan => {
                match n.attrs.str(gopt_ir::unroll::LEFT_ATTR) {
                    Ok(Some(why)) => none(&format!("control flow kept as it is: {why}")),
                    _ => none("control flow (GPU plans run it inlined or unrolled)"),
                }
            }
        },
        // Collectives run as NCCL calls between the ranks' steps, not as kernels.
        Op::Collective(c) => Lowered::Collective(c),
    })
}
