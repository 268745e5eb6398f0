//! A reduction, read once for every backend: which axes it reduces (`axes` as an
//! attribute or a constant input, `noop_with_empty_axes`, the global pools' spatial
//! axes), the input's dims merged into runs of kept and reduced dims, and how it folds
//! its elements ([`fold`]: identity, combine, map, finish, which each writer spells).

use super::support::{const_input, input, output, plan, typed, unsupported};
use crate::Result;
use gopt_ir::ops::{NnOp, ReduceOp};
use gopt_ir::{DType, Graph, Node, Op};

/// The reduced axes (sorted, unique) of `node` for an input of rank `rank`.
pub fn axes(g: &Graph, node: &Node, rank: usize) -> Result<Vec<usize>> {
    if matches!(node.op, Op::Nn(_)) {
        if rank < 2 {
            return Err(unsupported(node, "inputs of rank below 2"));
        }
        return Ok((2..rank).collect());
    }
    for k in node.attrs.0.keys() {
        if !["axes", "keepdims", "noop_with_empty_axes"].contains(&k.as_str()) {
            return Err(unsupported(node, &format!("attribute `{k}`")));
        }
    }
    let listed: Vec<i64> = match const_input(g, node, 1, "axes")? {
        Some(t) => t.to_i64_vec(),
        None => node
            .attrs
            .ints("axes")
            .map_err(plan)?
            .map(<[i64]>::to_vec)
            .unwrap_or_default(),
    };
    if listed.is_empty() {
        let noop = node.attrs.int_or("noop_with_empty_axes", 0).map_err(plan)? != 0;
        return Ok(if noop { vec![] } else { (0..rank).collect() });
    }
    let mut out = Vec::new();
    for a in listed {
        let r = rank as i64;
        if a < -r || a >= r {
            return Err(unsupported(
                node,
                &format!("axis {a} of a rank-{rank} input"),
            ));
        }
        out.push(if a < 0 { a + r } else { a } as usize);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The input's dims merged into runs of kept or reduced dims (size, reduced), size-1
/// dims dropped.
pub fn runs(xs: &[usize], axes: &[usize]) -> Vec<(usize, bool)> {
    let mut runs: Vec<(usize, bool)> = Vec::new();
    for (a, &d) in xs.iter().enumerate() {
        let red = axes.contains(&a);
        match runs.last_mut() {
            _ if d == 1 => {}
            Some((s, r)) if *r == red => *s *= d,
            _ => runs.push((d, red)),
        }
    }
    runs
}

/// The value a fold starts from (and pads partial groups with).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// 0.
    Zero,
    /// 1.
    One,
    /// -inf.
    NegInf,
    /// +inf.
    PosInf,
}

/// How two partial results combine (associative, so any order of threads works).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// `a + b`.
    Add,
    /// `a * b`.
    Mul,
    /// The larger, NaN propagating.
    Max,
    /// The smaller, NaN propagating.
    Min,
    /// `log(exp(a) + exp(b))`, without overflow (infinities and NaN as the
    /// interpreter's shifted sum).
    LogAddExp,
}

/// What each element contributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Map {
    /// The element.
    Id,
    /// Its square.
    Square,
    /// Its absolute value.
    Abs,
}

/// What the combined value of a group becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// Itself.
    Id,
    /// Divided by the group's size.
    Mean,
    /// Its square root.
    Sqrt,
    /// Its natural log.
    Log,
}

/// A reduction's fold: start from `identity`, `combine` the `map` of each element,
/// `finish` the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fold {
    /// The start (and padding) value.
    pub identity: Identity,
    /// How partial results combine.
    pub combine: Combine,
    /// Each element's contribution.
    pub map: Map,
    /// The result of a group.
    pub finish: Finish,
}

impl Fold {
    const fn new(identity: Identity, combine: Combine, map: Map, finish: Finish) -> Fold {
        Fold {
            identity,
            combine,
            map,
            finish,
        }
    }
}

/// The fold of reduction node `node` (the `Reduce*` ops and the global pools).
pub fn fold(node: &Node) -> Result<Fold> {
    use Combine as C;
    use Finish as F;
    use Identity as I;
    let sum = |map: Map, finish: Finish| Ok(Fold::new(I::Zero, C::Add, map, finish));
    let other = || Err(unsupported(node, "this op (not a reduction)"));
    match node.op {
        Op::Reduce(r) => match r {
            ReduceOp::ReduceSum => sum(Map::Id, F::Id),
            ReduceOp::ReduceMean => sum(Map::Id, F::Mean),
            ReduceOp::ReduceSumSquare => sum(Map::Square, F::Id),
            ReduceOp::ReduceL1 => sum(Map::Abs, F::Id),
            ReduceOp::ReduceL2 => sum(Map::Square, F::Sqrt),
            ReduceOp::ReduceLogSum => sum(Map::Id, F::Log),
            ReduceOp::ReduceMax => Ok(Fold::new(I::NegInf, C::Max, Map::Id, F::Id)),
            ReduceOp::ReduceMin => Ok(Fold::new(I::PosInf, C::Min, Map::Id, F::Id)),
            ReduceOp::ReduceProd => Ok(Fold::new(I::One, C::Mul, Map::Id, F::Id)),
            ReduceOp::ReduceLogSumExp => Ok(Fold::new(I::NegInf, C::LogAddExp, Map::Id, F::Id)),
            ReduceOp::ArgMax
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
            | ReduceOp::SoftmaxCrossEntropyLoss => other(),
        },
        Op::Nn(n) => match n {
            NnOp::GlobalAveragePool => sum(Map::Id, F::Mean),
            NnOp::GlobalMaxPool => Ok(Fold::new(I::NegInf, C::Max, Map::Id, F::Id)),
            NnOp::MatMul
            | NnOp::Gemm
            | NnOp::Conv
            | NnOp::MaxPool
            | NnOp::AveragePool
            | NnOp::MatMulInteger
            | NnOp::QLinearMatMul
            | NnOp::MatMulNBits
            | NnOp::ConvTranspose
            | NnOp::ConvInteger
            | NnOp::QLinearConv
            | NnOp::DeformConv
            | NnOp::QuantizeLinear
            | NnOp::DequantizeLinear
            | NnOp::DynamicQuantizeLinear
            | NnOp::LpPool
            | NnOp::GlobalLpPool
            | NnOp::MaxUnpool
            | NnOp::Einsum
            | NnOp::Det => other(),
        },
        Op::Elementwise(_)
        | Op::Fused(_)
        | Op::Shape(_)
        | Op::Attention(_)
        | Op::Image(_)
        | Op::Control(_)
        | Op::Collective(_) => other(),
    }
}

/// The fold of reduction `node` over data of `dt`: [`fold`], except over bool data,
/// where ReduceMax is "any" and ReduceMin "all" (the fold of 0/1 values starting from
/// false or true, the interpreter's identities, not from -inf or +inf); the other
/// reductions take no bool data (nor does the interpreter).
pub fn typed_fold(node: &Node, dt: DType) -> Result<Fold> {
    let f = fold(node)?;
    if dt != DType::Bool {
        return Ok(f);
    }
    let identity = match f.combine {
        Combine::Max => Identity::Zero,
        Combine::Min => Identity::One,
        Combine::Add | Combine::Mul | Combine::LogAddExp => {
            return Err(unsupported(node, "bool data for this reduction"));
        }
    };
    Ok(Fold { identity, ..f })
}

/// A reduction node's geometry, read once for every backend: its dtype, the input's
/// shape, the reduced axes, the dims merged into runs (size, reduced), and how many
/// elements each output reduces (`inner`) over how many outputs (`outer`).
#[derive(Clone, Debug)]
pub struct Geometry {
    /// X's (and Y's) dtype.
    pub dtype: DType,
    /// X's shape.
    pub xs: Vec<usize>,
    /// The reduced axes.
    pub axes: Vec<usize>,
    /// [`runs`] of X.
    pub runs: Vec<(usize, bool)>,
    /// Elements reduced into each output.
    pub inner: usize,
    /// Outputs.
    pub outer: usize,
}

impl Geometry {
    /// Whether the reduced elements of each output are contiguous (one reduced run,
    /// innermost).
    pub fn contiguous(&self) -> bool {
        self.runs.iter().filter(|r| r.1).count() == 1 && self.runs.last().is_some_and(|r| r.1)
    }
}

/// The geometry of reduction `node` of `g` (one output of X's dtype).
pub fn geometry(g: &Graph, node: &Node) -> Result<Geometry> {
    let (dtype, xs) = typed(g, node, input(node, 0)?)?;
    let (out_dt, ys) = typed(g, node, output(node, 0)?)?;
    if out_dt != dtype || node.outputs.len() != 1 {
        return Err(unsupported(node, "an output of another dtype"));
    }
    let axes = axes(g, node, xs.len())?;
    let runs = runs(&xs, &axes);
    let inner: usize = runs.iter().filter(|r| r.1).map(|r| r.0).product();
    let outer: usize = runs.iter().filter(|r| !r.1).map(|r| r.0).product();
    if outer != ys.iter().product::<usize>() {
        return Err(plan(format!(
            "{}: output {ys:?} does not match axes {axes:?}",
            node.name
        )));
    }
    Ok(Geometry {
        dtype,
        xs,
        axes,
        runs,
        inner,
        outer,
    })
}
