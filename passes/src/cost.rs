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
    /// One NVIDIA H200 (DESIGN.md: 3.7 TB/s for a vectorized element-wise kernel,
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
            tf32: false,
            cuda_graph: true,
            low_precision: None,
        }
    }

    fn launch(&self) -> f64 {
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
    let k = kind(op);
    if k == Kind::Free {
        return 0.0;
    }
    let bytes_of = |ty: &TensorType| -> f64 {
        let n: f64 = ty
            .shape
            .iter()
            .map(|d| d.known().unwrap_or(1) as f64)
            .product();
        n * ty.dtype.size() as f64
    };
    let bytes: f64 =
        inputs.iter().map(|t| bytes_of(t)).sum::<f64>() + outputs.iter().map(bytes_of).sum::<f64>();
    let mem = bytes / t.bandwidth;
    let shape = |i: usize| inputs.get(i).and_then(|t| gopt_ir::dim::concrete(&t.shape));
    let dt = inputs.first().map(|t| t.dtype);
    let out_shape = outputs
        .first()
        .and_then(|t| gopt_ir::dim::concrete(&t.shape));
    let compute = match k {
        Kind::Free | Kind::Stream => 0.0,
        Kind::Gemm => match op {
            Op::Nn(NnOp::MatMul | NnOp::Gemm) | Op::Fused(FusedOp::FusedMatMul) => {
                gemm_time(t, op, attrs, shape(0), shape(1), dt).unwrap_or(mem)
            }
            // Quantized and einsum forms: inputs are not (A, B); bytes bound them.
            _ => mem,
        },
        Kind::Conv => match op {
            Op::Nn(NnOp::Conv) | Op::Fused(FusedOp::FusedConv) => {
                conv_time(t, shape(1), out_shape, dt).unwrap_or(mem)
            }
            _ => mem,
        },
        Kind::Attention => attention_time(t, attrs, shape(0), shape(1), dt).unwrap_or(mem),
    };
    // A dtype cast is stored by the kernel that produces (or consumes) its operand, as
    // Inductor and TensorRT fuse them: it costs its extra write, not a launch.
    if op == Op::Elementwise(gopt_ir::ops::ElementwiseOp::Cast) {
        return outputs.iter().map(bytes_of).sum::<f64>() / t.bandwidth;
    }
    let mut time = mem.max(compute) + t.launch();
    let wide_math = dt == Some(DType::F32);
    if t.low_precision.is_some()
        && wide_math
        && matches!(k, Kind::Gemm | Kind::Conv | Kind::Attention)
    {
        time *= 1e3;
    }
    // At equal estimates the fused form wins: it is what later fusions extend.
    match op {
        Op::Fused(_) => time * (1.0 - 1e-6),
        _ => time,
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
) -> Option<f64> {
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
    Some(gemm_compute(t, batch, m, n, kb, dt))
}

/// Compute time of a (batched) `m×k · k×n` GEMM: dims rounded up to the tile, half
/// efficiency when rows are not 16-byte aligned (n or k not a multiple of 8).
pub fn gemm_compute(t: &Target, batch: usize, m: usize, n: usize, k: usize, dt: DType) -> f64 {
    let up = |x: usize| x.div_ceil(t.tile) * t.tile;
    let flops = 2.0 * (batch * up(m) * up(n) * up(k)) as f64;
    let aligned = n % 8 == 0 && k % 8 == 0;
    let eff = if aligned { 1.0 } else { 0.5 };
    flops / (t.gemm_rate(dt) * eff)
}

fn conv_time(
    t: &Target,
    w: Option<Vec<usize>>,
    y: Option<Vec<usize>>,
    dt: Option<DType>,
) -> Option<f64> {
    let (w, y, dt) = (w?, y?, dt?);
    let per_out: usize = w.get(1..)?.iter().product();
    let flops = 2.0 * (y.iter().product::<usize>() * per_out) as f64;
    // Depthwise convolutions do not use tensor cores.
    let rate = if w.get(1) == Some(&1) {
        t.fp32
    } else {
        t.gemm_rate(dt)
    };
    Some(flops / rate)
}

/// Attention FLOPs (`Q·Kᵀ` and `P·V`) over the tensor-core rate, for 4-D `[b, h, s, d]`
/// inputs or 3-D `[b, s, h · d]` ones with `q_num_heads`.
fn attention_time(
    t: &Target,
    attrs: &Attrs,
    q: Option<Vec<usize>>,
    k: Option<Vec<usize>>,
    dt: Option<DType>,
) -> Option<f64> {
    let (q, k, dt) = (q?, k?, dt?);
    // batch · heads · query rows · head size, and keys.
    let (rows_x_width, keys) = match (q.as_slice(), k.as_slice()) {
        ([b, h, s, d], [_, _, skv, _]) => (b * h * s * d, *skv),
        ([b, s, hd], [_, skv, _]) => {
            attrs.int_or("q_num_heads", 0).ok().filter(|h| *h > 0)?;
            (b * s * hd, *skv)
        }
        _ => return None,
    };
    let flops = 4.0 * (rows_x_width * keys) as f64;
    Some(flops / t.gemm_rate(dt))
}
