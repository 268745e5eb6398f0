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
pub mod collective;
pub mod conv;
pub mod conv_nd;
pub mod conv_state;
pub mod conv_transpose;
pub mod counted;
pub mod cumulative;
pub(crate) mod dispatch;
pub mod einsum;
pub mod elementwise;
pub mod gather_elements;
pub mod gemm;
pub mod glu;
pub mod index;
pub mod indexed;
pub mod linear_attention;
pub mod loss;
pub mod nms;
pub mod norm;
pub mod norm_kernel;
pub mod packed;
pub mod pool;
pub mod quant;
pub mod recurrent;
pub mod reduce;
pub mod resize;
pub mod rotary;
pub mod row_crop;
pub mod rows;
pub mod sample;
pub mod scatter;
pub mod spectral;
pub mod split_pad;
pub mod support;
pub mod topk;
pub mod trilu;
pub mod unique;

use gopt_ir::ops::{
    AttentionOp, ControlOp, ElementwiseOp, FusedOp, ImageOp, NnOp, ReduceOp, ShapeOp,
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
/// Each family has a variant of its own carrying its spec; the writers' dispatch
/// matches every variant, so a new family is a compile error in both writers.
#[derive(Clone, Debug, PartialEq)]
pub enum Spec {
    /// A family's kind with its spec left unparsed: what [`shallow`] answers. Never
    /// written: a writer given one refuses it ([`shallow_written`]).
    Shallow(Kind),
    /// An element-wise op or body ([`elementwise`]).
    Elementwise(Box<elementwise::Spec>),
    /// Trilu ([`trilu`]).
    Trilu(Box<trilu::Spec>),
    /// GatherElements ([`gather_elements`]).
    GatherElements(Box<gather_elements::Spec>),
    /// ArgMax, ArgMin, Hardmax ([`arg`]).
    Arg(Box<arg::Spec>),
    /// CumSum, CumProd ([`cumulative`]).
    Cumulative(Box<cumulative::Spec>),
    /// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ([`loss`]).
    Loss(Box<loss::Spec>),
    /// LayerNormalization, RMSNormalization, Softmax, LogSoftmax, LpNormalization
    /// ([`rows`]).
    Rows(Box<rows::Spec>),
    /// The `Reduce*` ops and the global pools ([`reduce`]).
    Reduce(Box<reduce::Spec>),
    /// Data movement ([`index`]).
    Movement(Box<index::MovementSpec>),
    /// Split and Pad ([`split_pad`]).
    SplitPad(Box<split_pad::SplitPad>),
    /// SwiGLU ([`glu`]).
    Glu(Box<glu::GluSpec>),
    /// RotaryEmbedding ([`rotary`]).
    Rotary(Box<rotary::RotarySpec>),
    /// TopK ([`topk`]).
    TopK(Box<topk::TopKSpec>),
    /// The normalizations ([`norm`]).
    Norm(Box<norm::NormSpec>),
    /// The ops whose output size the device counts ([`counted`]).
    Counted(Box<counted::CountedSpec>),
    /// A 1-D or 2-D convolution ([`conv`]).
    Conv(Box<conv::ConvSpec>),
    /// Einsum or Det ([`einsum`]).
    Einsum(Box<einsum::EinsumSpec>),
    /// A quantization op ([`quant`]).
    Quant(Box<quant::QuantSpec>),
    /// ConvTranspose, Col2Im, MaxUnpool or DeformConv ([`conv_transpose`]).
    ConvTranspose(Box<conv_transpose::Spec>),
    /// A convolution of 3 spatial dims ([`conv_nd`]).
    ConvNd(Box<conv_nd::ConvNdSpec>),
    /// CausalConvWithState ([`conv_state`]).
    ConvState(Box<conv_state::ConvStateSpec>),
    /// A windowed pool ([`pool`]).
    Pool(Box<pool::PoolSpec>),
    /// Resize.
    Resize(Box<resize::ResizeSpec>),
    /// RNN, GRU, LSTM.
    Recurrent(Box<recurrent::RecurrentSpec>),
    /// GridSample, AffineGrid, RoiAlign.
    Sample(Box<sample::SampleSpec>),
    /// Scaled dot-product attention.
    Attention(Box<attention::Attention>),
    /// DFT, STFT.
    Spectral(Box<spectral::SpectralSpec>),
    /// LinearAttention.
    LinearAttention(Box<linear_attention::LinearAttentionSpec>),
    /// ScatterND, ScatterElements, Scatter, TensorScatter.
    Scatter(Box<scatter::Scatter>),
    /// GatherND, Tile, DepthToSpace, SpaceToDepth, CenterCropPad, ReverseSequence,
    /// OneHot, EyeLike, Range, ConstantOfShape.
    Indexed(Box<indexed::Indexed>),
}

impl Spec {
    /// The family, for reports and counts.
    pub fn kind(&self) -> Kind {
        match self {
            Spec::Shallow(k) => *k,
            Spec::Elementwise(_) => Kind::Elementwise,
            Spec::Trilu(_) => Kind::Trilu,
            Spec::GatherElements(_) => Kind::GatherElements,
            Spec::Arg(_) => Kind::Arg,
            Spec::Cumulative(_) => Kind::Cumulative,
            Spec::Loss(_) => Kind::Loss,
            Spec::Rows(_) => Kind::Rows,
            Spec::Reduce(_) => Kind::Reduce,
            Spec::Movement(_) => Kind::Movement,
            Spec::SplitPad(_) => Kind::SplitPad,
            Spec::Glu(_) => Kind::Glu,
            Spec::Rotary(_) => Kind::Rotary,
            Spec::TopK(_) => Kind::TopK,
            Spec::Norm(_) => Kind::Norm,
            Spec::Counted(_) => Kind::Counted,
            Spec::Conv(_) => Kind::Conv,
            Spec::Einsum(_) => Kind::Einsum,
            Spec::Quant(_) => Kind::Quant,
            Spec::ConvTranspose(_) => Kind::ConvTranspose,
            Spec::ConvNd(_) => Kind::ConvNd,
            Spec::ConvState(_) => Kind::ConvState,
            Spec::Pool(_) => Kind::Pool,
            Spec::Resize(_) => Kind::Resize,
            Spec::Recurrent(_) => Kind::Recurrent,
            Spec::Sample(_) => Kind::Sample,
            Spec::Attention(_) => Kind::Attention,
            Spec::Spectral(_) => Kind::Spectral,
            Spec::LinearAttention(_) => Kind::LinearAttention,
            Spec::Scatter(_) => Kind::Scatter,
            Spec::Indexed(_) => Kind::Indexed,
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

/// The error for a [`Spec::Shallow`] reaching a writer: a lowering bug, since only
/// [`lower`] makes what writers take.
pub fn shallow_written(kind: Kind) -> crate::CodegenError {
    crate::CodegenError::Plan(format!(
        "a shallow lowering of the {} family reached a writer (a gopt bug)",
        kind.name()
    ))
}

/// What one node becomes.
#[derive(Clone, Debug, PartialEq)]
pub enum Lowered {
    /// The output aliases input 0's bytes: no step runs.
    View,
    /// A matrix product with its epilogue (MatMul, Gemm, FusedMatMul), read once
    /// ([`gemm::GemmSpec`]).
    Gemm(Box<gemm::GemmSpec>),
    /// A channels-last FusedConv with constant weights, run as a GEMM over an im2col
    /// matrix where the backend has a GEMM library (CUDA); a convolution kernel
    /// elsewhere.
    ConvGemm(Box<conv::ConvGemmSpec>),
    /// The output is a contiguous run of input 0's bytes starting this many bytes in
    /// (a multiple of [`crate::memory::ALIGN`]): no step runs ([`window`]).
    Window(usize),
    /// A product with a packed low-bit weight (MatMulNBits, [`packed`]): a GEMV that
    /// dequantizes in registers for few rows; for many, the weight dequantized into
    /// scratch and a library GEMM where the backend has one.
    PackedGemm(Box<packed::PackedSpec>),
    /// A generated kernel: its family and the parameters its writers need ([`Spec`]).
    Kernel(Spec),
    /// No step of its own: its neighbours do its work ([`absorb`]): attention reads a
    /// Split's pieces in place, a row kernel stores a Cast's type.
    Absorbed,
    /// No step of its own: a Slice whose work another step does ([`Fold`]), decided by
    /// a backend's plan from the graph and the lowering before any kernel is written
    /// (the CUDA plan's `cuda::fold`; other backends fold nothing).
    Folded(Fold),
    /// No kernel: a collective, which the CUDA executor runs as an NCCL call between
    /// the rank's steps (`cuda::collective`); other backends refuse it.
    Collective(Box<collective::Collective>),
    /// No GPU kernel, and why (the op, or the mode of it).
    Unsupported(String),
}

/// How a folded Slice (the first columns of its input, `Y[.., :n]`) is done without a
/// step of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// The GEMM of node `into` computes only the first `columns` columns, straight
    /// into the Slice's output (the padded product is never written).
    IntoGemm {
        /// The node whose GEMM writes the Slice's output.
        into: usize,
        /// The columns kept.
        columns: usize,
    },
    /// A graph output: it stays in its source's rows, `pitch` elements apart, and the
    /// copy back keeps each row's first columns (`Io::row_pitch`).
    PaddedRows {
        /// The source's row length in elements.
        pitch: usize,
    },
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

/// The lowering of a GEMM-family spec: `wrap`ped when it parses, refused (as
/// [`typed`]) when no GPU backend runs this form of it.
fn refused_or<S>(
    parsed: crate::Result<S>,
    wrap: impl FnOnce(S) -> Lowered,
) -> crate::Result<Lowered> {
    match parsed {
        Ok(s) => Ok(wrap(s)),
        Err(crate::CodegenError::Unsupported { what, .. }) => Ok(Lowered::Unsupported(what)),
        Err(e) => Err(e),
    }
}

/// The matrix product of node `n`, form `form` ([`gemm`]).
fn product(g: &Graph, n: &Node, form: GemmForm) -> crate::Result<Lowered> {
    refused_or(gemm::spec(g, n, form), |s| Lowered::Gemm(Box::new(s)))
}

/// The sampling kernel of node `n`, op `op` ([`sample`]).
fn sampled(g: &Graph, n: &Node, op: sample::SampleOp) -> crate::Result<Lowered> {
    typed(sample::spec(g, n, op), |s| Spec::Sample(Box::new(s)))
}

/// The DFT or STFT kernel of node `n`, op `op` ([`spectral`]).
fn spectral_kernel(g: &Graph, n: &Node, op: spectral::SpectralOp) -> crate::Result<Lowered> {
    typed(spectral::spec(g, n, op), |s| Spec::Spectral(Box::new(s)))
}

/// The scatter kernel of node `n`, op `op` ([`scatter`]).
fn scattered(g: &Graph, n: &Node, op: scatter::ScatterOp, views: Views) -> crate::Result<Lowered> {
    typed(scatter::spec(g, n, op, views), |s| {
        Spec::Scatter(Box::new(s))
    })
}

/// The indexing kernel of node `n`, op `op` ([`indexed`]).
fn indexed_kernel(g: &Graph, n: &Node, op: indexed::IndexedOp) -> crate::Result<Lowered> {
    typed(indexed::spec(g, n, op), |s| Spec::Indexed(Box::new(s)))
}

/// What node `n` of `g` becomes on a GPU. An error is one no backend can report as a
/// missing kernel (a size known only at run time, a graph the planner cannot lay out);
/// a form of an op no kernel covers is [`Lowered::Unsupported`].
pub fn lower(g: &Graph, n: &Node, views: Views) -> crate::Result<Lowered> {
    lower_as(g, n, views, true)
}

/// What node `n` of `g` becomes, with the element-wise, row, reduction, arg, scan,
/// loss, Trilu, GatherElements, SwiGLU and RotaryEmbedding families' specs left unparsed
/// ([`Spec::Shallow`]): what [`absorb`] asks of a value's readers, while those
/// readers' specs ask [`absorb`] which of their inputs are read in place (parsing
/// here would go round that circle forever).
pub fn shallow(g: &Graph, n: &Node, views: Views) -> crate::Result<Lowered> {
    lower_as(g, n, views, false)
}

/// [`lower`] (`parse`) or [`shallow`].
fn lower_as(g: &Graph, n: &Node, views: Views, parse: bool) -> crate::Result<Lowered> {
    if (views.stores_casts && absorb::cast_stored_by_producer(g, n))
        || (views.strided_reads && absorb::cut_read_in_place(g, n, views))
    {
        return Ok(Lowered::Absorbed);
    }
    use reduce::ReduceKind;
    use Kind::*;
    let k = |kind| Lowered::Kernel(Spec::Shallow(kind));
    let none = |why: &str| Lowered::Unsupported(why.to_string());
    // A typed family's spec, or (shallow) its kind alone.
    let parsed = |kind: Kind, spec: &dyn Fn() -> crate::Result<Lowered>| {
        if parse {
            spec()
        } else {
            Ok(k(kind))
        }
    };
    let arg = |a| {
        parsed(Arg, &|| {
            typed(arg::spec(g, n, a), |s| Spec::Arg(Box::new(s)))
        })
    };
    let reduction = |kind| {
        parsed(Reduce, &|| {
            typed(reduce::spec(g, n, kind), |s| Spec::Reduce(Box::new(s)))
        })
    };
    let row = |op: &dyn Fn() -> crate::Result<rows::RowOp>| {
        parsed(Rows, &|| {
            let spec = op().and_then(|op| rows::spec(g, n, op, views.stores_casts));
            typed(spec, |s| Spec::Rows(Box::new(s)))
        })
    };
    let elementwise = || {
        parsed(Elementwise, &|| {
            typed(elementwise::spec(g, n, views), |s| {
                Spec::Elementwise(Box::new(s))
            })
        })
    };
    // A family with a typed spec returns `typed(family::spec(g, n), Spec::Family)`.
    let movement = |mv| typed(index::spec(g, n, mv), |s| Spec::Movement(Box::new(s)));
    let norm = |op| typed(norm::spec(g, n, op), |s| Spec::Norm(Box::new(s)));
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
            | ElementwiseOp::Dropout => elementwise()?,
        },
        Op::Fused(f) => match f {
            FusedOp::FusedElementwise => elementwise()?,
            FusedOp::FusedMatMul => product(g, n, GemmForm::MatMul)?,
            FusedOp::FusedConv if conv_nd::applies(g, n) => {
                typed(conv_nd::spec(g, n), |s| Spec::ConvNd(Box::new(s)))?
            }
            FusedOp::FusedConv => conv::lowered(g, n)?,
        },
        Op::Reduce(r) => match r {
            ReduceOp::ReduceSum => reduction(ReduceKind::Sum)?,
            ReduceOp::ReduceMean => reduction(ReduceKind::Mean)?,
            ReduceOp::ReduceMax => reduction(ReduceKind::Max)?,
            ReduceOp::ReduceMin => reduction(ReduceKind::Min)?,
            ReduceOp::ReduceProd => reduction(ReduceKind::Prod)?,
            ReduceOp::ReduceL1 => reduction(ReduceKind::L1)?,
            ReduceOp::ReduceL2 => reduction(ReduceKind::L2)?,
            ReduceOp::ReduceLogSum => reduction(ReduceKind::LogSum)?,
            ReduceOp::ReduceLogSumExp => reduction(ReduceKind::LogSumExp)?,
            ReduceOp::ReduceSumSquare => reduction(ReduceKind::SumSquare)?,
            ReduceOp::ArgMax => arg(arg::ArgKind::Max)?,
            ReduceOp::ArgMin => arg(arg::ArgKind::Min)?,
            ReduceOp::Hardmax => arg(arg::ArgKind::Hardmax)?,
            ReduceOp::Softmax => row(&|| Ok(rows::RowOp::Softmax))?,
            ReduceOp::LogSoftmax => row(&|| Ok(rows::RowOp::LogSoftmax))?,
            ReduceOp::LayerNormalization => row(&|| Ok(rows::RowOp::LayerNorm))?,
            ReduceOp::RMSNormalization => row(&|| Ok(rows::RowOp::RmsNorm))?,
            ReduceOp::LpNormalization => row(&|| rows::lp_norm(n))?,
            ReduceOp::CumSum | ReduceOp::CumProd => parsed(Cumulative, &|| {
                typed(cumulative::spec(g, n), |s| Spec::Cumulative(Box::new(s)))
            })?,
            ReduceOp::NegativeLogLikelihoodLoss | ReduceOp::SoftmaxCrossEntropyLoss => {
                parsed(Loss, &|| {
                    typed(loss::spec(g, n), |s| Spec::Loss(Box::new(s)))
                })?
            }
            ReduceOp::TopK => typed(topk::spec(g, n), |s| Spec::TopK(Box::new(s)))?,
            ReduceOp::GroupNormalization => norm(norm::NormOp::Group)?,
            ReduceOp::InstanceNormalization => norm(norm::NormOp::Instance)?,
            ReduceOp::BatchNormalization => norm(norm::NormOp::Batch)?,
            ReduceOp::MeanVarianceNormalization => norm(norm::NormOp::MeanVariance)?,
            ReduceOp::LRN => norm(norm::NormOp::Lrn)?,
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
                    movement(index::Move::Copy)?
                }
            }
            ShapeOp::Transpose if aliases(g, n, views) => Lowered::View,
            ShapeOp::Slice if views.offset_views => {
                let src = n.inputs.first().copied().flatten();
                match window(g, n).zip(src) {
                    Some((off, src)) if may_alias(g, src, n.outputs[0], views) => {
                        Lowered::Window(off)
                    }
                    Some(_) | None => movement(index::Move::Slice)?,
                }
            }
            ShapeOp::Transpose => movement(index::Move::Transpose)?,
            ShapeOp::Slice => movement(index::Move::Slice)?,
            ShapeOp::Gather => movement(index::Move::Gather)?,
            ShapeOp::Expand => movement(index::Move::Expand)?,
            ShapeOp::Concat => movement(index::Move::Concat)?,
            ShapeOp::Split => typed(split_pad::split(g, n), |s| {
                Spec::SplitPad(Box::new(split_pad::SplitPad::Split(s)))
            })?,
            ShapeOp::Pad => typed(split_pad::pad(g, n), |s| {
                Spec::SplitPad(Box::new(split_pad::SplitPad::Pad(s)))
            })?,
            ShapeOp::GatherElements => parsed(GatherElements, &|| {
                typed(gather_elements::spec(g, n), |s| {
                    Spec::GatherElements(Box::new(s))
                })
            })?,
            ShapeOp::Trilu => parsed(Trilu, &|| {
                typed(trilu::spec(g, n), |s| Spec::Trilu(Box::new(s)))
            })?,
            ShapeOp::Tile => return indexed_kernel(g, n, indexed::IndexedOp::Tile),
            ShapeOp::DepthToSpace => return indexed_kernel(g, n, indexed::IndexedOp::DepthToSpace),
            ShapeOp::SpaceToDepth => return indexed_kernel(g, n, indexed::IndexedOp::SpaceToDepth),
            ShapeOp::CenterCropPad => {
                return indexed_kernel(g, n, indexed::IndexedOp::CenterCropPad)
            }
            ShapeOp::ReverseSequence => {
                return indexed_kernel(g, n, indexed::IndexedOp::ReverseSequence)
            }
            ShapeOp::GatherND => return indexed_kernel(g, n, indexed::IndexedOp::GatherNd),
            ShapeOp::ConstantOfShape => {
                return indexed_kernel(g, n, indexed::IndexedOp::ConstantOfShape)
            }
            ShapeOp::Range => return indexed_kernel(g, n, indexed::IndexedOp::Range),
            ShapeOp::EyeLike => return indexed_kernel(g, n, indexed::IndexedOp::EyeLike),
            ShapeOp::OneHot => return indexed_kernel(g, n, indexed::IndexedOp::OneHot),
            ShapeOp::ScatterElements | ShapeOp::Scatter => {
                return scattered(g, n, scatter::ScatterOp::Elements, views)
            }
            ShapeOp::ScatterND => return scattered(g, n, scatter::ScatterOp::Nd, views),
            ShapeOp::Shape | ShapeOp::Size => {
                none("Shape and Size (constants once shapes are specialized; not on a GPU)")
            }
            ShapeOp::Compress => counted::lower(g, n, counted::CountedOp::Compress)?,
            ShapeOp::NonZero => counted::lower(g, n, counted::CountedOp::NonZero)?,
            ShapeOp::Unique => counted::lower(g, n, counted::CountedOp::Unique)?,
        },
        Op::Nn(o) => match o {
            NnOp::MatMul => product(g, n, GemmForm::MatMul)?,
            NnOp::Gemm => product(g, n, GemmForm::Gemm)?,
            NnOp::MatMulNBits => {
                refused_or(packed::spec(g, n), |s| Lowered::PackedGemm(Box::new(s)))?
            }
            NnOp::Conv if conv_nd::applies(g, n) => {
                typed(conv_nd::spec(g, n), |s| Spec::ConvNd(Box::new(s)))?
            }
            NnOp::Conv => typed(conv::spec(g, n), |s| Spec::Conv(Box::new(s)))?,
            NnOp::MaxPool | NnOp::AveragePool => {
                typed(pool::spec(g, n), |s| Spec::Pool(Box::new(s)))?
            }
            NnOp::GlobalAveragePool => reduction(ReduceKind::GlobalAverage)?,
            NnOp::GlobalMaxPool => reduction(ReduceKind::GlobalMax)?,
            NnOp::MatMulInteger
            | NnOp::QLinearMatMul
            | NnOp::ConvInteger
            | NnOp::QLinearConv
            | NnOp::QuantizeLinear
            | NnOp::DequantizeLinear
            | NnOp::DynamicQuantizeLinear => {
                typed(quant::spec(g, n), |s| Spec::Quant(Box::new(s)))?
            }
            NnOp::ConvTranspose | NnOp::DeformConv | NnOp::MaxUnpool => {
                typed(conv_transpose::spec(g, n), |s| {
                    Spec::ConvTranspose(Box::new(s))
                })?
            }
            NnOp::LpPool | NnOp::GlobalLpPool => {
                typed(pool::spec(g, n), |s| Spec::Pool(Box::new(s)))?
            }
            NnOp::Einsum | NnOp::Det => typed(einsum::spec(g, n), |s| Spec::Einsum(Box::new(s)))?,
        },
        Op::Attention(a) => match a {
            AttentionOp::Attention => {
                let a = attention::lower(g, n, views.strided_reads);
                return typed(a, |s| Spec::Attention(Box::new(s)));
            }
            // Their specs ask `absorb` which inputs are read in place, as the
            // element-wise spec does: parsed only when not shallow.
            AttentionOp::RotaryEmbedding => parsed(Rotary, &|| {
                typed(rotary::spec(g, n, views), |s| Spec::Rotary(Box::new(s)))
            })?,
            AttentionOp::SwiGLU => parsed(Glu, &|| {
                typed(glu::spec(g, n, views), |s| Spec::Glu(Box::new(s)))
            })?,
            AttentionOp::TensorScatter => return scattered(g, n, scatter::ScatterOp::Cache, views),
            AttentionOp::CausalConvWithState => {
                typed(conv_state::spec(g, n), |s| Spec::ConvState(Box::new(s)))?
            }
            AttentionOp::LinearAttention => {
                let s = linear_attention::spec(g, n);
                return typed(s, |s| Spec::LinearAttention(Box::new(s)));
            }
            AttentionOp::FlexAttention => none("this op"),
        },
        Op::Image(i) => match i {
            ImageOp::Resize => return typed(resize::spec(g, n), |s| Spec::Resize(Box::new(s))),
            ImageOp::GridSample => return sampled(g, n, sample::SampleOp::Grid),
            ImageOp::AffineGrid => return sampled(g, n, sample::SampleOp::Affine),
            ImageOp::RoiAlign => return sampled(g, n, sample::SampleOp::Roi),
            ImageOp::Col2Im => typed(conv_transpose::spec(g, n), |s| {
                Spec::ConvTranspose(Box::new(s))
            })?,
            ImageOp::DFT => return spectral_kernel(g, n, spectral::SpectralOp::Dft),
            ImageOp::STFT => return spectral_kernel(g, n, spectral::SpectralOp::Stft),
            ImageOp::NonMaxSuppression => counted::lower(g, n, counted::CountedOp::Nms)?,
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
            ControlOp::RNN | ControlOp::GRU | ControlOp::LSTM => {
                return typed(recurrent::spec(g, n), |s| Spec::Recurrent(Box::new(s)))
            }
            ControlOp::If | ControlOp::Loop | ControlOp::Scan => {
                match n.attrs.str(gopt_ir::unroll::LEFT_ATTR) {
                    Ok(Some(why)) => none(&format!("control flow kept as it is: {why}")),
                    Ok(None) | Err(_) => {
                        none("control flow (GPU plans run it inlined or unrolled)")
                    }
                }
            }
        },
        // Collectives run as NCCL calls between the ranks' steps, not as kernels.
        Op::Collective(c) => Lowered::Collective(Box::new(collective::spec(g, n, c)?)),
    })
}
