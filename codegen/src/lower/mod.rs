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
pub mod lowered;
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
pub mod views;

use gopt_ir::ops::{
    AttentionOp, ControlOp, ElementwiseOp, FusedOp, ImageOp, NnOp, ReduceOp, ShapeOp,
};
use gopt_ir::{Graph, Node, Op, Verified};

pub use lowered::{shallow_written, typed, Fold, GemmForm, Kind, Lowered, Spec};
use views::may_alias;
pub use views::{aliases, is_view, is_view_op, window, Views};

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
pub fn lower(g: &Verified, n: &Node, views: Views) -> crate::Result<Lowered> {
    lower_as(g, n, views, true)
}

/// What node `n` of `g` becomes, with the element-wise, row, reduction, arg, scan,
/// loss, Trilu, GatherElements, SwiGLU and RotaryEmbedding families' specs left unparsed
/// ([`Spec::Shallow`]): what [`absorb`] asks of a value's readers, while those
/// readers' specs ask [`absorb`] which of their inputs are read in place (parsing
/// here would go round that circle forever).
pub(crate) fn shallow(g: &Graph, n: &Node, views: Views) -> crate::Result<Lowered> {
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
