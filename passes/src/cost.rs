//! The cost model: a roofline estimate of each e-node's run time on a target GPU. A
//! kernel takes the longer of its compute time (FLOPs over the rate of the unit that runs
//! it, by dtype) and its memory time (bytes read and written over bandwidth), plus one
//! launch. Views (reshape, squeeze, identity, output projections) cost nothing. GEMMs lose
//! efficiency when their dims are not multiples of the tensor-core tile (rounded up to 64)
//! and when rows are not 16-byte aligned (no vector loads), which is what makes padding
//! pay. Casts cost only their extra write (backends fold them into the neighbouring
//! kernel's loads or stores). The defaults are the H200 figures measured in DESIGN.md.

use crate::analysis::{attrs_of, Egraph};
use crate::lang::{Leaf, Term};
use gopt_ir::ops::{AttentionOp, ControlOp, FusedOp, ImageOp, NnOp, ReduceOp, ShapeOp};
use gopt_ir::{Attrs, DType, Op, TensorType};
use serde::Serialize;

/// What the cost model knows about the target.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// Name shown in reports.
    pub name: String,
    /// Achievable DRAM bandwidth for streaming kernels, bytes/s.
    pub bandwidth: f64,
    /// Dense tensor-core rate for bf16/f16 inputs with fp32 accumulation, FLOP/s.
    pub tensor_f16: f64,
    /// Tensor-core rate for tf32, FLOP/s.
    pub tensor_tf32: f64,
    /// CUDA-core fp32 rate, FLOP/s.
    pub fp32: f64,
    /// Launch cost of one kernel replayed from a CUDA graph, s.
    pub launch_graph: f64,
    /// Launch cost of one kernel launched eagerly, s.
    pub launch_eager: f64,
    /// GEMM tile edge: dims are rounded up to it.
    pub tile: usize,
    /// Streaming multiprocessors: a kernel with fewer blocks than this leaves some idle.
    pub sms: usize,
    /// Whether fp32 GEMMs may use tf32 tensor cores.
    pub tf32: bool,
    /// Whether kernels are replayed from a CUDA graph.
    pub cuda_graph: bool,
    /// The low precision the user asked for (`--precision bf16|fp16`): a requirement,
    /// so an allow-list op (GEMM, conv, attention) left in fp32 costs a thousandfold.
    #[serde(skip)]
    pub low_precision: Option<DType>,
}

impl Target {
    /// One NVIDIA H200 (132 SMs; DESIGN.md: 3.7 TB/s for a vectorized element-wise kernel,
    /// 824 TFLOP/s measured for a cuBLASLt bf16 GEMM, 0.82 µs per kernel from a CUDA
    /// graph and 4.5 µs eagerly; tf32 at half the bf16 rate, fp32 CUDA cores 60 TFLOP/s).
    pub fn h200() -> Target {
        Target {
            name: "NVIDIA H200 (sm_90)".into(),
            bandwidth: 3.7e12,
            tensor_f16: 824e12,
            tensor_tf32: 412e12,
            fp32: 60e12,
            launch_graph: 0.82e-6,
            launch_eager: 4.5e-6,
            tile: 64,
            sms: 132,
            tf32: false,
            cuda_graph: true,
            low_precision: None,
        }
    }

    /// The launch cost of one kernel, as this target launches them.
    pub fn launch(&self) -> f64 {
        if self.cuda_graph {
            self.launch_graph
        } else {
            self.launch_eager
        }
    }

    fn gemm_rate(&self, dt: DType) -> f64 {
        match dt {
            DType::BF16 | DType::F16 => self.tensor_f16,
            DType::F32 if self.tf32 => self.tensor_tf32,
            _ => self.fp32,
        }
    }
}

/// How a node executes, for costing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// No kernel: a view of its input or a leaf.
    Free,
    /// A matrix multiplication (library GEMM, maybe with an epilogue).
    Gemm,
    /// A convolution.
    Conv,
    /// Fused scaled-dot-product attention.
    Attention,
    /// A memory-bound kernel (element-wise, reduction, normalization, data movement).
    Stream,
}

/// The execution kind of an op: exhaustive, so a new op must be classified here.
pub fn kind(op: Op) -> Kind {
    match op {
        // Every element-wise op is one streaming kernel.
        Op::Elementwise(_) => Kind::Stream,
        Op::Shape(s) => match s {
            ShapeOp::Identity
            | ShapeOp::Reshape
            | ShapeOp::Flatten
            | ShapeOp::Squeeze
            | ShapeOp::Unsqueeze
            | ShapeOp::Shape
            | ShapeOp::Size => Kind::Free,
            // A slice or split along an axis is a strided view its consumers read in
            // place (GEMM and attention kernels take strides).
            ShapeOp::Slice | ShapeOp::Split => Kind::Free,
            ShapeOp::Expand
            | ShapeOp::Tile
            | ShapeOp::Transpose
            | ShapeOp::Concat
            | ShapeOp::DepthToSpace
            | ShapeOp::SpaceToDepth
            | ShapeOp::Pad
            | ShapeOp::CenterCropPad
            | ShapeOp::ReverseSequence
            | ShapeOp::Gather
            | ShapeOp::GatherElements
            | ShapeOp::GatherND
            | ShapeOp::Compress
            | ShapeOp::NonZero
            | ShapeOp::ScatterElements
            | ShapeOp::ScatterND
            | ShapeOp::Scatter
            | ShapeOp::ConstantOfShape
            | ShapeOp::Range
            | ShapeOp::EyeLike
            | ShapeOp::OneHot
            | ShapeOp::Trilu
            | ShapeOp::Unique => Kind::Stream,
        },
        Op::Nn(n) => match n {
            NnOp::MatMul
            | NnOp::Gemm
            | NnOp::MatMulInteger
            | NnOp::QLinearMatMul
            | NnOp::MatMulNBits
            | NnOp::Einsum => Kind::Gemm,
            NnOp::Conv
            | NnOp::ConvTranspose
            | NnOp::ConvInteger
            | NnOp::QLinearConv
            | NnOp::DeformConv => Kind::Conv,
            NnOp::QuantizeLinear
            | NnOp::DequantizeLinear
            | NnOp::DynamicQuantizeLinear
            | NnOp::AveragePool
            | NnOp::MaxPool
            | NnOp::LpPool
            | NnOp::GlobalAveragePool
            | NnOp::GlobalMaxPool
            | NnOp::GlobalLpPool
            | NnOp::MaxUnpool
            | NnOp::Det => Kind::Stream,
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
            | ReduceOp::ReduceSumSquare
            | ReduceOp::ArgMax
            | ReduceOp::ArgMin
            | ReduceOp::TopK
            | ReduceOp::Hardmax
            | ReduceOp::Softmax
            | ReduceOp::LogSoftmax
            | ReduceOp::CumSum
            | ReduceOp::CumProd
            | ReduceOp::LayerNormalization
            | ReduceOp::RMSNormalization
            | ReduceOp::GroupNormalization
            | ReduceOp::InstanceNormalization
            | ReduceOp::BatchNormalization
            | ReduceOp::LpNormalization
            | ReduceOp::MeanVarianceNormalization
            | ReduceOp::LRN
            | ReduceOp::NegativeLogLikelihoodLoss
            | ReduceOp::SoftmaxCrossEntropyLoss => Kind::Stream,
        },
        Op::Attention(a) => match a {
            AttentionOp::Attention | AttentionOp::FlexAttention => Kind::Attention,
            AttentionOp::RotaryEmbedding
            | AttentionOp::TensorScatter
            | AttentionOp::LinearAttention
            | AttentionOp::CausalConvWithState
            | AttentionOp::SwiGLU => Kind::Stream,
        },
        Op::Control(c) => match c {
            ControlOp::If | ControlOp::Loop | ControlOp::Scan => Kind::Stream,
            ControlOp::RNN | ControlOp::GRU | ControlOp::LSTM => Kind::Stream,
        },
        Op::Image(i) => match i {
            ImageOp::Resize
            | ImageOp::GridSample
            | ImageOp::AffineGrid
            | ImageOp::RoiAlign
            | ImageOp::Col2Im
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
            | ImageOp::TreeEnsemble => Kind::Stream,
        },
        Op::Fused(f) => match f {
            FusedOp::FusedMatMul => Kind::Gemm,
            FusedOp::FusedConv => Kind::Conv,
            FusedOp::FusedElementwise => Kind::Stream,
        },
    }
}

/// The family of kernel `op` makes, for charts and tables: `gemm`, `conv`,
/// `attention` (the [`Kind`]s with a compute roof), then the streaming ones by what
/// they do: `norm`, `softmax`, `reduce`, `pool`, `elementwise`, `movement`, `other`;
/// `view` for ops that launch nothing.
pub fn family(op: Op) -> &'static str {
    match kind(op) {
        Kind::Free => return "view",
        Kind::Gemm => return "gemm",
        Kind::Conv => return "conv",
        Kind::Attention => return "attention",
        Kind::Stream => {}
    }
    match op {
        Op::Elementwise(_) | Op::Fused(_) => "elementwise",
        Op::Shape(_) => "movement",
        Op::Reduce(r) => match r {
            ReduceOp::LayerNormalization
            | ReduceOp::RMSNormalization
            | ReduceOp::GroupNormalization
            | ReduceOp::InstanceNormalization
            | ReduceOp::BatchNormalization
            | ReduceOp::LpNormalization
            | ReduceOp::MeanVarianceNormalization
            | ReduceOp::LRN => "norm",
            ReduceOp::Softmax | ReduceOp::LogSoftmax | ReduceOp::Hardmax => "softmax",
            ReduceOp::ReduceSum
            | ReduceOp::ReduceMean
            | ReduceOp::ReduceMax
            | ReduceOp::ReduceMin
            | ReduceOp::ReduceProd
            | ReduceOp::ReduceL1
            | ReduceOp::ReduceL2
            | ReduceOp::ReduceLogSum
            | ReduceOp::ReduceLogSumExp
            | ReduceOp::ReduceSumSquare
            | ReduceOp::ArgMax
            | ReduceOp::ArgMin
            | ReduceOp::TopK
            | ReduceOp::CumSum
            | ReduceOp::CumProd
            | ReduceOp::NegativeLogLikelihoodLoss
            | ReduceOp::SoftmaxCrossEntropyLoss => "reduce",
        },
        Op::Nn(n) => match n {
            NnOp::AveragePool
            | NnOp::MaxPool
            | NnOp::LpPool
            | NnOp::GlobalAveragePool
            | NnOp::GlobalMaxPool
            | NnOp::GlobalLpPool
            | NnOp::MaxUnpool => "pool",
            NnOp::QuantizeLinear | NnOp::DequantizeLinear | NnOp::DynamicQuantizeLinear => {
                "elementwise"
            }
            NnOp::MatMul
            | NnOp::Gemm
            | NnOp::MatMulInteger
            | NnOp::QLinearMatMul
            | NnOp::MatMulNBits
            | NnOp::Einsum
            | NnOp::Conv
            | NnOp::ConvTranspose
            | NnOp::ConvInteger
            | NnOp::QLinearConv
            | NnOp::DeformConv
            | NnOp::Det => "other",
        },
        Op::Attention(a) => match a {
            AttentionOp::RotaryEmbedding | AttentionOp::SwiGLU => "elementwise",
            AttentionOp::TensorScatter => "movement",
            AttentionOp::Attention
            | AttentionOp::FlexAttention
            | AttentionOp::LinearAttention
            | AttentionOp::CausalConvWithState => "other",
        },
        Op::Control(_) | Op::Image(_) => "other",
    }
}

/// Estimated seconds for one e-node of `eg`, given its class's facts. Leaves are free;
/// a node whose class failed inference is infinitely expensive (never chosen).
pub fn node_cost(t: &Target, eg: &Egraph, class: egg::Id, n: &Term) -> f64 {
    let Term::Op(key, ch) = n else {
        return 0.0;
    };
    let data = &eg[class].data;
    if data.error.is_some() || data.tys.is_empty() {
        return f64::INFINITY;
    }
    if kind(key.0) == Kind::Free {
        return 0.0;
    }
    let Some(attrs) = attrs_of(eg, ch[0]) else {
        return f64::INFINITY;
    };
    let inputs: Vec<&TensorType> = ch[1..]
        .iter()
        .filter(|&&c| {
            !eg[c]
                .nodes
                .iter()
                .any(|n| matches!(n, Term::Leaf(Leaf::Absent)))
        })
        .filter_map(|&c| eg[c].data.tys.first())
        .collect();
    op_cost(t, key.0, attrs, &inputs, &data.tys)
}

/// Estimated seconds for `op` with these attributes and present inputs' and outputs'
/// types (what both the e-graph and a finished graph's report cost).
pub fn op_cost(
    t: &Target,
    op: Op,
    attrs: &Attrs,
    inputs: &[&TensorType],
    outputs: &[TensorType],
) -> f64 {
    op_work(t, op, attrs, inputs, outputs).seconds
}

/// What one kernel does, in the units of a roofline: the bytes it moves, the
/// operations it performs, the unit that performs them, and the cost model's
/// estimate and class. `seconds` is what extraction minimizes (with its penalties);
/// `class` is decided by the rules of [`Class`] from the unpenalized terms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Work {
    /// Bytes read and written (every present input once, every output once).
    pub bytes: f64,
    /// Operations: 2·m·n·k for a GEMM (before tile rounding), 2 per multiply-add of a
    /// convolution or attention, and one per element for a streaming kernel (the
    /// larger of its input and output element counts), so that every kernel has a
    /// place on a roofline.
    pub flops: f64,
    /// The unit the operations run on.
    pub unit: Unit,
    /// Estimated seconds (what [`op_cost`] returns).
    pub seconds: f64,
    /// Estimated seconds of the memory term alone (bytes over bandwidth).
    pub memory_s: f64,
    /// Estimated seconds of the compute term alone (with tile rounding).
    pub compute_s: f64,
    /// The class the cost model predicts.
    pub class: Class,
}

/// The unit a kernel's operations run on, for its compute roof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Unit {
    /// Tensor cores on bf16/f16 inputs, fp32 accumulation.
    TensorF16,
    /// Tensor cores in tf32.
    TensorTf32,
    /// CUDA cores (fp32 and everything else).
    Cores,
}

impl Unit {
    /// `bf16/f16 tensor cores`, `tf32 tensor cores`, `CUDA cores`.
    pub fn name(self) -> &'static str {
        match self {
            Unit::TensorF16 => "bf16/f16 tensor cores",
            Unit::TensorTf32 => "tf32 tensor cores",
            Unit::Cores => "CUDA cores",
        }
    }

    /// The key the device's measured peaks use (`bf16`, `tf32`, `fp32`).
    pub fn key(self) -> &'static str {
        match self {
            Unit::TensorF16 => "bf16",
            Unit::TensorTf32 => "tf32",
            Unit::Cores => "fp32",
        }
    }
}

/// What bounds a kernel. The cost model predicts one from its estimate
/// ([`classify_estimate`]); `gopt bench --profile` decides one from the measured time
/// against the device's measured peaks (`gopt::roofline`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Class {
    /// The launch and its latency cost more than the work.
    Launch,
    /// Bytes over bandwidth bound it.
    Memory,
    /// Operations over the unit's rate bound it.
    Compute,
    /// Too little parallel work to fill the device: neither roof is reached.
    UnderOccupied,
}

impl Class {
    /// `launch-bound`, `memory-bound`, `compute-bound`, `under-occupied`.
    pub fn name(self) -> &'static str {
        match self {
            Class::Launch => "launch-bound",
            Class::Memory => "memory-bound",
            Class::Compute => "compute-bound",
            Class::UnderOccupied => "under-occupied",
        }
    }
}

/// The cost model's class for a kernel whose memory term is `memory_s`, compute term
/// `compute_s` and parallel work `blocks` (output tiles of a GEMM, 256-element blocks
/// of a streaming kernel): launch-bound when both terms are below one launch;
/// under-occupied when it has fewer blocks than the device has SMs; otherwise the
/// larger term decides.
pub fn classify_estimate(t: &Target, memory_s: f64, compute_s: f64, blocks: f64) -> Class {
    if memory_s.max(compute_s) < t.launch() {
        Class::Launch
    } else if blocks < t.sms as f64 {
        Class::UnderOccupied
    } else if compute_s >= memory_s {
        Class::Compute
    } else {
        Class::Memory
    }
}

/// The [`Work`] of `op` with these attributes and present inputs' and outputs' types.
pub fn op_work(
    t: &Target,
    op: Op,
    attrs: &Attrs,
    inputs: &[&TensorType],
    outputs: &[TensorType],
) -> Work {
    let k = kind(op);
    let elems = |ty: &TensorType| -> f64 {
        ty.shape
            .iter()
            .map(|d| d.known().unwrap_or(1) as f64)
            .product()
    };
    let bytes_of = |ty: &TensorType| -> f64 { elems(ty) * ty.dtype.size() as f64 };
    let free = Work {
        bytes: 0.0,
        flops: 0.0,
        unit: Unit::Cores,
        seconds: 0.0,
        memory_s: 0.0,
        compute_s: 0.0,
        class: Class::Launch,
    };
    if k == Kind::Free {
        return free;
    }
    let bytes: f64 =
        inputs.iter().map(|t| bytes_of(t)).sum::<f64>() + outputs.iter().map(bytes_of).sum::<f64>();
    let mem = bytes / t.bandwidth;
    let shape = |i: usize| inputs.get(i).and_then(|t| gopt_ir::dim::concrete(&t.shape));
    let dt = inputs.first().map(|t| t.dtype);
    let out_shape = outputs
        .first()
        .and_then(|t| gopt_ir::dim::concrete(&t.shape));
    let out_elems: f64 = outputs.iter().map(elems).sum();
    let stream_flops = inputs.iter().map(|t| elems(t)).fold(out_elems, f64::max);
    let stream = Compute {
        seconds: 0.0,
        flops: stream_flops,
        unit: Unit::Cores,
        blocks: out_elems.max(stream_flops) / 256.0,
    };
    let c = match k {
        Kind::Free | Kind::Stream => stream,
        Kind::Gemm => match op {
            Op::Nn(NnOp::MatMul | NnOp::Gemm) | Op::Fused(FusedOp::FusedMatMul) => {
                gemm_time(t, op, attrs, shape(0), shape(1), dt).unwrap_or(Compute {
                    seconds: mem,
                    ..stream
                })
            }
            Op::Nn(NnOp::MatMulNBits) => packed_time(t, attrs, shape(0), dt).unwrap_or(Compute {
                seconds: mem,
                ..stream
            }),
            // Quantized and einsum forms: inputs are not (A, B); bytes bound them.
            _ => Compute {
                seconds: mem,
                ..stream
            },
        },
        Kind::Conv => match op {
            Op::Nn(NnOp::Conv) | Op::Fused(FusedOp::FusedConv) => {
                conv_time(t, shape(1), out_shape, dt).unwrap_or(Compute {
                    seconds: mem,
                    ..stream
                })
            }
            _ => Compute {
                seconds: mem,
                ..stream
            },
        },
        Kind::Attention => attention_time(t, attrs, shape(0), shape(1), dt).unwrap_or(Compute {
            seconds: mem,
            ..stream
        }),
    };
    let class = classify_estimate(t, mem, c.seconds, c.blocks);
    let work = |seconds: f64| Work {
        bytes,
        flops: c.flops,
        unit: c.unit,
        seconds,
        memory_s: mem,
        compute_s: c.seconds,
        class,
    };
    // A dtype cast is stored by the kernel that produces (or consumes) its operand, as
    // Inductor and TensorRT fuse them: it costs its extra write, not a launch.
    if op == Op::Elementwise(gopt_ir::ops::ElementwiseOp::Cast) {
        return work(outputs.iter().map(bytes_of).sum::<f64>() / t.bandwidth);
    }
    let mut time = mem.max(c.seconds) + t.launch();
    // A packed product with few rows is priced by its kernel ([`packed_time`]): fp32
    // activations are a choice the cost model weighs, not a precision the user refused.
    let packed_gemv = op == Op::Nn(NnOp::MatMulNBits)
        && shape(0).is_some_and(|a| a.iter().rev().skip(1).product::<usize>() <= 16);
    let wide_math = dt == Some(DType::F32) && !packed_gemv;
    if t.low_precision.is_some()
        && wide_math
        && matches!(k, Kind::Gemm | Kind::Conv | Kind::Attention)
    {
        time *= 1e3;
    }
    // At equal estimates the fused form wins: it is what later fusions extend.
    work(match op {
        Op::Fused(_) => time * (1.0 - 1e-6),
        _ => time,
    })
}

/// The compute side of a kernel: seconds on its unit, operations, and its parallel
/// work in blocks (for the occupancy rule of [`classify_estimate`]).
#[derive(Clone, Copy, Debug)]
struct Compute {
    seconds: f64,
    flops: f64,
    unit: Unit,
    blocks: f64,
}

/// The unit a GEMM-like op on `dt` inputs runs on.
fn gemm_unit(t: &Target, dt: DType) -> Unit {
    match dt {
        DType::BF16 | DType::F16 => Unit::TensorF16,
        DType::F32 if t.tf32 => Unit::TensorTf32,
        _ => Unit::Cores,
    }
}

/// GEMM FLOPs over the unit's rate, with tile quantization and an alignment penalty.
fn gemm_time(
    t: &Target,
    op: Op,
    attrs: &Attrs,
    a: Option<Vec<usize>>,
    b: Option<Vec<usize>>,
    dt: Option<DType>,
) -> Option<Compute> {
    let (a, b, dt) = (a?, b?, dt?);
    let trans_b = match op {
        Op::Nn(NnOp::Gemm) => attrs.int_or("transB", 0).ok()? != 0,
        _ => attrs.int_or("trans_b", 0).ok()? != 0,
    };
    let (kb, n) = match b.as_slice() {
        [.., x, y] if trans_b => (*y, *x),
        [.., x, y] => (*x, *y),
        _ => return None,
    };
    let m: usize = a.iter().rev().skip(1).product::<usize>().max(1);
    let batch: usize = if b.len() > 2 {
        b[..b.len() - 2].iter().product::<usize>().max(1)
    } else {
        1
    };
    let m = if b.len() > 2 { m / batch.max(1) } else { m };
    // Output tiles of 128×128, the size a large cuBLASLt kernel takes on Hopper.
    // In f64: dims from a hostile model must not overflow a usize product.
    let f = |x: usize| x as f64;
    let tiles = f(batch) * f(m.div_ceil(128)) * f(n.div_ceil(128));
    Some(Compute {
        seconds: gemm_compute(t, batch, m, n, kb, dt),
        flops: 2.0 * f(batch) * f(m) * f(n) * f(kb),
        unit: gemm_unit(t, dt),
        blocks: tiles,
    })
}

/// A product with a packed low-bit weight (MatMulNBits): its memory term is the packed
/// bytes (B's u8 type, counted with the inputs). Up to `gopt_codegen`'s 16 rows it is a
/// GEMV: with bf16/f16 activations on tensor cores (two instructions per weight to
/// unpack: bound by the bytes), with fp32 ones on CUDA cores, where unpacking, the
/// conversion and one FMA per weight and row cost about eight fp32 operations' issue
/// slots per multiply-add (`2·m·n·k` FLOPs at an eighth of the fp32 rate). Above, the
/// weight is dequantized into scratch (written at bandwidth) and multiplied on tensor
/// cores like any GEMM.
fn packed_time(
    t: &Target,
    attrs: &Attrs,
    a: Option<Vec<usize>>,
    dt: Option<DType>,
) -> Option<Compute> {
    let (a, dt) = (a?, dt?);
    let k = usize::try_from(attrs.int("K").ok()??).ok()?;
    let n = usize::try_from(attrs.int("N").ok()??).ok()?;
    let m: usize = a.iter().rev().skip(1).product::<usize>().max(1);
    let f = |x: usize| x as f64;
    let flops = 2.0 * f(m) * f(n) * f(k);
    if m <= 16 {
        let (rate, unit) = match dt {
            DType::F32 => (t.fp32 / 8.0, Unit::Cores),
            _ => (t.gemm_rate(dt), gemm_unit(t, dt)),
        };
        return Some(Compute {
            seconds: flops / rate,
            flops,
            unit,
            blocks: f(n) / 16.0,
        });
    }
    let scratch = f(n) * f(k) * dt.size() as f64 / t.bandwidth;
    Some(Compute {
        seconds: gemm_compute(t, 1, m, n, k, dt) + scratch,
        flops,
        unit: gemm_unit(t, dt),
        blocks: f(m.div_ceil(128)) * f(n.div_ceil(128)),
    })
}

/// Compute time of a (batched) `m×k · k×n` GEMM: dims rounded up to the tile, half
/// efficiency when rows are not 16-byte aligned (n or k not a multiple of 8).
pub fn gemm_compute(t: &Target, batch: usize, m: usize, n: usize, k: usize, dt: DType) -> f64 {
    let up = |x: usize| (x.div_ceil(t.tile) * t.tile) as f64;
    let flops = 2.0 * batch as f64 * up(m) * up(n) * up(k);
    let aligned = n % 8 == 0 && k % 8 == 0;
    let eff = if aligned { 1.0 } else { 0.5 };
    flops / (t.gemm_rate(dt) * eff)
}

fn conv_time(
    t: &Target,
    w: Option<Vec<usize>>,
    y: Option<Vec<usize>>,
    dt: Option<DType>,
) -> Option<Compute> {
    let (w, y, dt) = (w?, y?, dt?);
    let per_out: usize = w.get(1..)?.iter().product();
    let outs: f64 = y.iter().map(|&d| d as f64).product();
    let flops = 2.0 * outs * per_out as f64;
    // Depthwise convolutions do not use tensor cores.
    let (rate, unit) = if w.get(1) == Some(&1) {
        (t.fp32, Unit::Cores)
    } else {
        (t.gemm_rate(dt), gemm_unit(t, dt))
    };
    Some(Compute {
        seconds: flops / rate,
        flops,
        unit,
        // An implicit GEMM's 128×128 output tiles (output pixels by output channels);
        // a depthwise kernel's blocks of 256 outputs.
        blocks: match unit {
            Unit::Cores => outs / 256.0,
            Unit::TensorF16 | Unit::TensorTf32 => outs / (128.0 * 128.0),
        },
    })
}

/// Attention FLOPs (`Q·Kᵀ` and `P·V`) over the tensor-core rate, for 4-D `[b, h, s, d]`
/// inputs or 3-D `[b, s, h · d]` ones with `q_num_heads`.
fn attention_time(
    t: &Target,
    attrs: &Attrs,
    q: Option<Vec<usize>>,
    k: Option<Vec<usize>>,
    dt: Option<DType>,
) -> Option<Compute> {
    let (q, k, dt) = (q?, k?, dt?);
    // batch · heads · query rows · head size, keys, and the blocks of 64 query rows
    // per head a flash kernel runs.
    let f = |x: usize| x as f64;
    let (rows_x_width, keys, blocks) = match (q.as_slice(), k.as_slice()) {
        ([b, h, s, d], [_, _, skv, _]) => (
            f(*b) * f(*h) * f(*s) * f(*d),
            f(*skv),
            f(*b) * f(*h) * f(s.div_ceil(64)),
        ),
        ([b, s, hd], [_, skv, _]) => {
            let h = attrs.int_or("q_num_heads", 0).ok().filter(|h| *h > 0)?;
            (
                f(*b) * f(*s) * f(*hd),
                f(*skv),
                f(*b) * h as f64 * f(s.div_ceil(64)),
            )
        }
        _ => return None,
    };
    let flops = 4.0 * rows_x_width * keys;
    Some(Compute {
        seconds: flops / t.gemm_rate(dt),
        flops,
        unit: gemm_unit(t, dt),
        blocks,
    })
}
