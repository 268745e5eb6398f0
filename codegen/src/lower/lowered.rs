//! What a node becomes on a GPU ([`Lowered`]): a view, a matrix product, a kernel of
//! one family with its spec ([`Kind`], [`Spec`]), a folded or absorbed step, a
//! collective, or nothing with a reason. [`super::lower`] makes it, once per node, for
//! every backend; the writers match over it and never read the graph.

use super::{
    arg, attention, collective, conv, conv_nd, conv_state, conv_transpose, counted, cumulative,
    einsum, elementwise, gather_elements, gemm, glu, index, indexed, linear_attention, loss, norm,
    packed, pool, quant, recurrent, reduce, resize, rotary, rows, sample, scatter, spectral,
    split_pad, topk, trilu,
};

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
