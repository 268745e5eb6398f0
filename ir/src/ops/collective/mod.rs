//! Collectives: the communication between the ranks of a tensor-parallel model, as IR
//! ops so that the optimizer, the cost model and the backends see them like any other
//! node (the sharding pass, `gopt_passes::shard`, inserts them).
//!
//! - `AllReduce(x)`: every rank receives the element-wise sum of all ranks' `x`;
//! - `AllGather(x)`: every rank receives all ranks' `x` concatenated along `axis`, in
//!   rank order.
//!
//! Attributes: `ranks` (the number of ranks taking part, at least 1), `group` (which
//! communicator, 0 unless a model runs several) and, for `AllGather`, `axis`.
//!
//! One rank alone cannot compute a collective over several: evaluation asks this
//! thread's [`Exchange`] for the other ranks' parts ([`with_exchange`]); without one,
//! a collective over more than one rank is an error and over one rank the identity.
//! [`simulate`] runs the rank graphs of a sharded model together on the CPU that way.
//! Collectives are never folded as constants ([`CollectiveOp::is_deterministic`]).

use crate::attr::Attrs;
use crate::dim::Dim;
use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::util::{in_ty, input};
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::Tensor;
use std::cell::RefCell;
use std::sync::Arc;

mod sim;
pub use sim::{simulate, simulate_each, Rendezvous};

op_family! {
    /// Communication between the ranks of a sharded model (gopt-internal, not ONNX).
    internal CollectiveOp {
        AllReduce,
        AllGather,
    }
}

/// Hands one rank's part of a collective to the other ranks and returns every rank's
/// part, in rank order (the same on every rank).
pub trait Exchange: Send + Sync {
    /// The number of ranks the exchange connects.
    fn ranks(&self) -> usize;
    /// Contributes `part` as `rank`'s and waits for the other ranks' parts.
    fn exchange(&self, rank: usize, part: Tensor) -> Result<Vec<Tensor>>;
}

thread_local! {
    static EXCHANGE: RefCell<Option<(Arc<dyn Exchange>, usize)>> = const { RefCell::new(None) };
}

/// Runs `f` with collectives evaluated on this thread exchanging through `ex` as rank
/// `rank`.
pub fn with_exchange<R>(ex: Arc<dyn Exchange>, rank: usize, f: impl FnOnce() -> R) -> R {
    let prev = EXCHANGE.with(|e| e.borrow_mut().replace((ex, rank)));
    let r = f();
    EXCHANGE.with(|e| *e.borrow_mut() = prev);
    r
}

/// The attributes every collective has: `ranks` and `group`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    /// Ranks taking part.
    pub ranks: usize,
    /// Communicator index.
    pub group: i64,
}

impl Group {
    /// Reads `ranks` (required, at least 1) and `group` (default 0).
    pub fn of(attrs: &Attrs) -> Result<Group> {
        let ranks = attrs.req_int("ranks")?;
        if ranks < 1 {
            return Err(IrError::Attr {
                name: "ranks".into(),
                msg: format!("must be at least 1, got {ranks}"),
            });
        }
        Ok(Group {
            ranks: ranks as usize,
            group: attrs.int_or("group", 0)?,
        })
    }
}

impl CollectiveOp {
    /// Reference semantics: the exchange through this thread's [`Exchange`].
    pub fn eval(self, cx: &EvalCx, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let g = Group::of(&node.attrs)?;
        let x = input(inputs, 0)?;
        if g.ranks == 1 {
            return Ok(vec![x.clone()]);
        }
        let exchanged = EXCHANGE.with(|e| e.borrow().clone());
        let Some((ex, rank)) = exchanged else {
            return Err(IrError::Unsupported(format!(
                "`{}` over {} ranks needs the other ranks' parts: run the rank graphs \
                 together (gopt_ir::ops::collective::simulate, or a multi-GPU run), not \
                 one alone",
                self.name(),
                g.ranks
            )));
        };
        if ex.ranks() != g.ranks {
            return Err(IrError::Invalid(format!(
                "`{}` expects {} ranks, the exchange connects {}",
                self.name(),
                g.ranks,
                ex.ranks()
            )));
        }
        let parts = ex.exchange(rank, x.clone())?;
        for (r, p) in parts.iter().enumerate() {
            if p.dtype() != x.dtype() || (self == CollectiveOp::AllReduce && p.shape() != x.shape())
            {
                return Err(IrError::Shape(format!(
                    "`{}`: rank {r} gave {} {:?}, rank {rank} {} {:?}",
                    self.name(),
                    p.dtype(),
                    p.shape(),
                    x.dtype(),
                    x.shape()
                )));
            }
        }
        let y = match self {
            CollectiveOp::AllReduce => sum(&parts)?,
            CollectiveOp::AllGather => {
                let axis = gather_axis(node, x.rank())?;
                let refs: Vec<Option<&Tensor>> = parts.iter().map(Some).collect();
                let mut cat = node.clone();
                cat.attrs = Attrs::default();
                cat.attrs.set("axis", crate::attr::Attr::Int(axis as i64));
                let mut out = crate::ops::ShapeOp::Concat.eval(cx, &cat, &refs)?;
                out.pop()
                    .ok_or_else(|| IrError::Invalid("Concat gave no output".into()))?
            }
        };
        Ok(vec![y])
    }

    /// Output types: `AllReduce` keeps its input's, `AllGather` multiplies `axis` by
    /// the rank count.
    pub fn infer(
        self,
        _cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        let g = Group::of(&node.attrs)?;
        let x = in_ty(inputs, 0)?.ty;
        match self {
            CollectiveOp::AllReduce => Ok(vec![x.clone()]),
            CollectiveOp::AllGather => {
                let axis = gather_axis(node, x.shape.len())?;
                let mut shape = x.shape.clone();
                shape[axis] = shape[axis].mul(&Dim::Known(g.ranks as u64));
                Ok(vec![TensorType::new(x.dtype, shape)])
            }
        }
    }

    /// False: a collective's result depends on the other ranks, not only on its input,
    /// so constant folding leaves it alone.
    pub fn is_deterministic(self) -> bool {
        match self {
            CollectiveOp::AllReduce | CollectiveOp::AllGather => false,
        }
    }
}

/// `AllGather`'s `axis`, normalised against `rank`.
fn gather_axis(node: &Node, rank: usize) -> Result<usize> {
    let a = node.attrs.req_int("axis")?;
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(IrError::Attr {
            name: "axis".into(),
            msg: format!("{a} is out of range for rank {rank}"),
        });
    }
    Ok(if a < 0 { a + r } else { a } as usize)
}

/// The element-wise sum of `parts` (same dtype and shape), in rank order, accumulated
/// in f64 and rounded once to the dtype.
fn sum(parts: &[Tensor]) -> Result<Tensor> {
    let first = &parts[0];
    let mut acc = first.to_f64_vec();
    for p in &parts[1..] {
        for (a, b) in acc.iter_mut().zip(p.to_f64_vec()) {
            *a += b;
        }
    }
    Tensor::from_f64s(first.dtype(), first.shape(), &acc)
}
