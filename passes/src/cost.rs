//! The cost model: a roofline estimate of each e-node's run time on a target GPU. A
//! kernel takes the longer of its compute time (FLOPs over the rate of the unit that runs
//! it, by dtype) and its memory time (bytes read and written over bandwidth), plus one
//! launch. Views (reshape, squeeze, identity, output projections) cost nothing. GEMMs lose
//! efficiency when their dims are not multiples of the tensor-core tile (rounded up to 64)
//! and when rows are not 16-byte aligned (no vector loads), which is what makes padding
//! pay. Casts cost only their extra write (backends fold them into the neighbouring
//! kernel's loads or stores). The defaults are the H200 figures measured in DESIGN.md.
//!
//! What a roofline alone misses, each measured on the H200 by `gopt bench --profile`
//! (`Target::h200` says where): a tiled matrix kernel (GEMM, convolution, attention)
//! pays a fixed pipeline latency on top of its launch; a kernel runs on at most as many
//! SMs as it has blocks, and its last wave of tiles runs part-empty ([`kernels`]); a
//! kernel that runs one thread per output element (a broadcasting element-wise op, a
//! transpose, a gather) is bound by its threads' index math and memory instructions
//! before the bytes bind it; and a gather reads the rows it gathers, not its whole
//! table ([`stream`]).

mod kernels;
pub mod link;
mod stream;
#[cfg(test)]
mod tests;

pub use kernels::gemm_compute;

use crate::analysis::{attrs_of, Egraph};
use crate::lang::{Leaf, Term};
use gopt_ir::ops::{AttentionOp, ControlOp, FusedOp, ImageOp, NnOp, ReduceOp, ShapeOp};
use gopt_ir::{Attrs, DType, Op, TensorType};
use kernels::{attention_time, conv_time, gemm_time, packed_time, Compute};
use serde::Serialize;
use stream::elems;

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
    /// Streaming multiprocessors: a kernel with fewer blocks than this leaves some idle,
    /// and tiles beyond it run in waves (0: unknown, no occupancy or wave rule).
    pub sms: usize,
    /// Latency of a tiled matrix kernel (a cuBLASLt GEMM, a convolution, fused
    /// attention) on top of its launch: its first tiles loaded before the first MMA and
    /// its last ones stored after, which one wave of tiles cannot hide, s.
    pub tile_latency: f64,
    /// Output elements per second of a kernel that runs one thread per output element
    /// (broadcasting or mixed-type element-wise ops, transposes, gathers and other
    /// index maps): each thread's index math and its loads and store bind it below the
    /// bandwidth (0: unknown, no such bound).
    pub scalar_rate: f64,
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
    ///
    /// The tile latency and the scalar rate were measured by `gopt bench --profile` on
    /// the H200 (bf16, BERT-base, each step timed in a CUDA graph of its own):
    /// - tile latency 2 µs: cuBLASLt GEMMs of 128 rows (batch 1) took 3.7–6.6 µs where
    ///   a launch and the roofline come to 1.6–2.6 µs, and those of 4096 rows (batch
    ///   32) 1.4–3 µs more than those (18 µs with a GELU epilogue); a launch plus 2 µs
    ///   is also the 2.8 µs `gopt_codegen`'s flash-decoding kernel takes on 128 keys;
    /// - scalar rate 280 G outputs/s, the geometric mean of: BERT-base's broadcasting
    ///   mask And, Expand and Where at batch 32 (0.5 M outputs in 1.5–1.8 µs beyond the
    ///   launch: 290–345 G/s), its embedding sum with a broadcast operand (225 G/s) and
    ///   word-embedding Gather (403 G/s), and in docs/benchmarks.md a scalar f32 slice of
    ///   GPT-2's logits (212 G/s) and the scalar bf16 erf-GELU kernel (240 G/s).
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
            tile_latency: 2.0e-6,
            scalar_rate: 280e9,
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
    /// Communication between GPUs, bound by the link ([`link`]).
    Collective,
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
        Op::Collective(_) => Kind::Collective,
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
        Kind::Collective => return "collective",
        Kind::Stream => {}
    }
    match op {
        Op::Elementwise(_) | Op::Fused(_) => "elementwise",
        Op::Collective(_) => "collective",
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
    /// Bytes read and written (every present input once, every output once; a gather's
    /// data only where it gathers).
    pub bytes: f64,
    /// Operations: 2·m·n·k for a GEMM (before tile rounding), 2 per multiply-add of a
    /// convolution or attention, and one per element for a streaming kernel (the
    /// larger of its input element counts as read and its output's), so that every
    /// kernel has a place on a roofline.
    pub flops: f64,
    /// The unit the operations run on.
    pub unit: Unit,
    /// Estimated seconds (what [`op_cost`] returns).
    pub seconds: f64,
    /// Estimated seconds of the memory term alone: bytes over bandwidth, or a kernel of
    /// one thread per output element's outputs over the scalar rate when slower,
    /// stretched when its blocks leave SMs idle.
    pub memory_s: f64,
    /// Estimated seconds of the compute term alone (with tile rounding, idle SMs and
    /// the last wave's empty slots).
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
    if let Op::Collective(c) = op {
        return link::collective_work(c, attrs, outputs);
    }
    let bytes_of = |ty: &TensorType| -> f64 { elems(ty) * ty.dtype.size() as f64 };
    let out_elems: f64 = outputs.iter().map(elems).sum();
    let reads = stream::reads(op, inputs, out_elems);
    let bytes: f64 = inputs
        .iter()
        .zip(&reads)
        .map(|(t, n)| n * t.dtype.size() as f64)
        .sum::<f64>()
        + outputs.iter().map(bytes_of).sum::<f64>();
    let mem = bytes / t.bandwidth;
    let shape = |i: usize| inputs.get(i).and_then(|t| gopt_ir::dim::concrete(&t.shape));
    let dt = inputs.first().map(|t| t.dtype);
    let out_shape = outputs
        .first()
        .and_then(|t| gopt_ir::dim::concrete(&t.shape));
    let stream = Compute::streaming(reads.iter().copied().fold(out_elems, f64::max));
    let bound = Compute {
        seconds: mem,
        ..stream
    };
    let c = match k {
        Kind::Free | Kind::Stream | Kind::Collective => stream,
        Kind::Gemm => match op {
            Op::Nn(NnOp::MatMul | NnOp::Gemm) | Op::Fused(FusedOp::FusedMatMul) => {
                trans_b(op, attrs)
                    .and_then(|tb| gemm_time(t, tb, shape(0), shape(1), dt))
                    .unwrap_or(bound)
            }
            Op::Nn(NnOp::MatMulNBits) => packed_time(t, attrs, shape(0), dt).unwrap_or(bound),
            // Quantized and einsum forms: inputs are not (A, B); bytes bound them.
            _ => bound,
        },
        Kind::Conv => match op {
            Op::Nn(NnOp::Conv) | Op::Fused(FusedOp::FusedConv) => {
                conv_time(t, op, attrs, shape(0), shape(1), out_shape, dt).unwrap_or(bound)
            }
            _ => bound,
        },
        Kind::Attention => attention_time(t, attrs, shape(0), shape(1), dt).unwrap_or(bound),
    };
    // One thread per output element: its index math, loads and store bind before the
    // bytes do. Idle SMs slow the memory side as they slow compute.
    let scalar_s =
        if k == Kind::Stream && t.scalar_rate > 0.0 && stream::scalar(op, inputs, outputs) {
            out_elems / t.scalar_rate
        } else {
            0.0
        };
    let mem = mem.max(scalar_s) / c.occupancy;
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
    let mut time = mem.max(c.seconds) + t.launch() + c.fixed;
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

/// Whether a GEMM's B is stored transposed (`None`: an attribute of the wrong type).
fn trans_b(op: Op, attrs: &Attrs) -> Option<bool> {
    let name = match op {
        Op::Nn(NnOp::Gemm) => "transB",
        _ => "trans_b",
    };
    Some(attrs.int_or(name, 0).ok()? != 0)
}
