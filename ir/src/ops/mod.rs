//! The operation set. Ops are grouped into families, one enum and one module each, so
//! that every `match` over ops is exhaustive (adding an op makes the compiler list every
//! place to update) and each family's semantics, shape inference and reference
//! implementation live together. Op names are ONNX's; semantics are those of the latest
//! ONNX opset (importers upgrade older forms). The one exception is the `fused` family:
//! gopt-internal ops the optimizer produces (a matrix product or convolution with its
//! epilogue, a chain of element-wise ops), which no ONNX model may name
//! ([`Op::from_onnx_name`]).

use crate::attr::Attrs;
use crate::dim::Dim;
use crate::error::Result;
use crate::graph::{Graph, Node, TensorType, ValueId};
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::fmt;

pub mod attention;
pub mod collective;
pub mod control;
pub mod elementwise;
pub mod fused;
pub mod image;
pub mod known;
pub mod nn;
pub mod reduce;
pub mod shape;
pub mod util;

pub use attention::AttentionOp;
pub use collective::CollectiveOp;
pub use control::ControlOp;
pub use elementwise::ElementwiseOp;
pub use fused::FusedOp;
pub use image::ImageOp;
pub use nn::NnOp;
pub use reduce::ReduceOp;
pub use shape::ShapeOp;

/// Declares an op family: a fieldless enum whose variant names are the op names, with
/// `ALL`, `name()` and `from_name()`. `internal FamilyOp { ... }` declares a family of
/// gopt-internal (non-ONNX) ops; the difference is only in the variants' docs, the
/// importer's refusal of such names is [`Op::is_internal`]'s.
#[macro_export]
macro_rules! op_family {
    ($(#[$m:meta])* internal $name:ident { $($v:ident),* $(,)? }) => {
        $crate::op_family!(@family "gopt-internal" $(#[$m])* $name { $($v),* });
    };
    ($(#[$m:meta])* $name:ident { $($v:ident),* $(,)? }) => {
        $crate::op_family!(@family "ONNX" $(#[$m])* $name { $($v),* });
    };
    (@family $kind:literal $(#[$m:meta])* $name:ident { $($v:ident),* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $(#[doc = concat!($kind, " `", stringify!($v), "`.")] $v),*
        }
        impl $name {
            /// Every op of the family.
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            /// The op's name.
            pub fn name(self) -> &'static str {
                match self { $($name::$v => stringify!($v)),* }
            }
            /// The op with this name, if it belongs to the family.
            pub fn from_name(s: &str) -> Option<Self> {
                match s { $(stringify!($v) => Some($name::$v),)* _ => None }
            }
        }
    };
}

/// An operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// Element-wise math, comparisons, logic, casts.
    Elementwise(ElementwiseOp),
    /// Reductions, softmax, normalizations, scans, losses.
    Reduce(ReduceOp),
    /// Shape computations and data movement.
    Shape(ShapeOp),
    /// Linear algebra, convolution, pooling, quantization.
    Nn(NnOp),
    /// Resampling, image and signal processing.
    Image(ImageOp),
    /// Control flow and recurrent networks.
    Control(ControlOp),
    /// Attention and related sequence-model blocks.
    Attention(AttentionOp),
    /// Fused forms the optimizer produces (gopt-internal, not ONNX).
    Fused(FusedOp),
    /// Communication between the ranks of a sharded model (gopt-internal, not ONNX).
    Collective(CollectiveOp),
}

impl Op {
    /// The op's name (ONNX's, or the internal name of a fused op).
    pub fn name(self) -> &'static str {
        match self {
            Op::Elementwise(o) => o.name(),
            Op::Reduce(o) => o.name(),
            Op::Shape(o) => o.name(),
            Op::Nn(o) => o.name(),
            Op::Image(o) => o.name(),
            Op::Control(o) => o.name(),
            Op::Attention(o) => o.name(),
            Op::Fused(o) => o.name(),
            Op::Collective(o) => o.name(),
        }
    }

    /// The op with this name in any family, internal ones included (the text format
    /// reads every op this way).
    pub fn from_name(s: &str) -> Option<Op> {
        ElementwiseOp::from_name(s)
            .map(Op::Elementwise)
            .or_else(|| ReduceOp::from_name(s).map(Op::Reduce))
            .or_else(|| ShapeOp::from_name(s).map(Op::Shape))
            .or_else(|| NnOp::from_name(s).map(Op::Nn))
            .or_else(|| ImageOp::from_name(s).map(Op::Image))
            .or_else(|| ControlOp::from_name(s).map(Op::Control))
            .or_else(|| AttentionOp::from_name(s).map(Op::Attention))
            .or_else(|| FusedOp::from_name(s).map(Op::Fused))
            .or_else(|| CollectiveOp::from_name(s).map(Op::Collective))
    }

    /// The ONNX op with this name: [`Op::from_name`] without the gopt-internal ops, so
    /// that a model naming one (`FusedMatMul` in the default domain) is refused as
    /// unsupported by importers.
    pub fn from_onnx_name(s: &str) -> Option<Op> {
        Op::from_name(s).filter(|op| !op.is_internal())
    }

    /// True for gopt-internal ops (the fused and collective families), which are not
    /// ONNX ops.
    pub fn is_internal(self) -> bool {
        match self {
            Op::Fused(_) | Op::Collective(_) => true,
            Op::Elementwise(_)
            | Op::Reduce(_)
            | Op::Shape(_)
            | Op::Nn(_)
            | Op::Image(_)
            | Op::Control(_)
            | Op::Attention(_) => false,
        }
    }

    /// Every op, family by family.
    pub fn all() -> Vec<Op> {
        let mut v: Vec<Op> = Vec::new();
        v.extend(ElementwiseOp::ALL.iter().map(|&o| Op::Elementwise(o)));
        v.extend(ReduceOp::ALL.iter().map(|&o| Op::Reduce(o)));
        v.extend(ShapeOp::ALL.iter().map(|&o| Op::Shape(o)));
        v.extend(NnOp::ALL.iter().map(|&o| Op::Nn(o)));
        v.extend(ImageOp::ALL.iter().map(|&o| Op::Image(o)));
        v.extend(ControlOp::ALL.iter().map(|&o| Op::Control(o)));
        v.extend(AttentionOp::ALL.iter().map(|&o| Op::Attention(o)));
        v.extend(FusedOp::ALL.iter().map(|&o| Op::Fused(o)));
        v.extend(CollectiveOp::ALL.iter().map(|&o| Op::Collective(o)));
        v
    }

    /// Runs the op on concrete inputs (the reference semantics). Inside
    /// [`budget::with_fuel`](crate::budget::with_fuel) (constant evaluation at compile
    /// time) the elements it reads and will produce are charged first, so an evaluation
    /// past the budget is refused before it allocates.
    pub fn eval(self, cx: &EvalCx, node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        if crate::budget::limited() {
            self.charge_eval(node, inputs)?;
        }
        self.eval_family(cx, node, inputs)
    }

    /// Charges fuel for evaluating this op: its inputs' elements and its outputs' (from
    /// inference over the inputs' values, known dims only). An op whose output types
    /// cannot be inferred from its inputs is charged for its inputs only.
    fn charge_eval(self, node: &Node, inputs: &[Option<&Tensor>]) -> Result<()> {
        let read: u64 = inputs.iter().flatten().map(|t| t.len() as u64).sum();
        crate::budget::charge(read)?;
        let tys: Vec<Option<TensorType>> = inputs
            .iter()
            .map(|t| t.map(|t| TensorType::new(t.dtype(), crate::dim::shape_of(t.shape()))))
            .collect();
        let views: Vec<Option<InferInput>> = tys
            .iter()
            .zip(inputs)
            .map(|(ty, t)| ty.as_ref().map(|ty| InferInput { ty, value: *t }))
            .collect();
        let Ok(outs) = self.infer_family(&mut InferCx::default(), node, &views) else {
            return Ok(());
        };
        for t in &outs {
            crate::budget::check_type(t)?;
            // Data-dependent dims (NonZero's count...) are bounded by the inputs, which
            // are charged already: only the known dims count.
            let n = t
                .shape
                .iter()
                .filter_map(crate::dim::Dim::known)
                .fold(1u64, u64::saturating_mul);
            crate::budget::charge(n)?;
        }
        Ok(())
    }

    fn eval_family(
        self,
        cx: &EvalCx,
        node: &Node,
        inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        match self {
            Op::Elementwise(o) => o.eval(cx, node, inputs),
            Op::Reduce(o) => o.eval(cx, node, inputs),
            Op::Shape(o) => o.eval(cx, node, inputs),
            Op::Nn(o) => o.eval(cx, node, inputs),
            Op::Image(o) => o.eval(cx, node, inputs),
            Op::Control(o) => o.eval(cx, node, inputs),
            Op::Attention(o) => o.eval(cx, node, inputs),
            Op::Fused(o) => o.eval(cx, node, inputs),
            Op::Collective(o) => o.eval(cx, node, inputs),
        }
    }

    /// Computes output types from input types (and input values where they are constant).
    pub fn infer(
        self,
        cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        // Inputs whose contents inference tracked read as values (see `known`).
        let tracked = known::materialize(cx, node, inputs);
        let inputs: Vec<Option<InferInput>> = inputs
            .iter()
            .zip(&tracked)
            .map(|(i, t)| {
                i.map(|i| InferInput {
                    ty: i.ty,
                    value: i.value.or(t.as_ref()),
                })
            })
            .collect();
        let inputs = inputs.as_slice();
        let tys = self.infer_family(cx, node, inputs)?;
        // No shape arithmetic may wrap: an output too big for one tensor is an error
        // here, where the node is known, not a wrapped size in a later stage.
        for t in &tys {
            crate::budget::check_type(t)?;
        }
        known::evaluate(self, cx, node, inputs, &tys);
        Ok(tys)
    }

    fn infer_family(
        self,
        cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        match self {
            Op::Elementwise(o) => o.infer(cx, node, inputs),
            Op::Reduce(o) => o.infer(cx, node, inputs),
            Op::Shape(o) => o.infer(cx, node, inputs),
            Op::Nn(o) => o.infer(cx, node, inputs),
            Op::Image(o) => o.infer(cx, node, inputs),
            Op::Control(o) => o.infer(cx, node, inputs),
            Op::Attention(o) => o.infer(cx, node, inputs),
            Op::Fused(o) => o.infer(cx, node, inputs),
            Op::Collective(o) => o.infer(cx, node, inputs),
        }
    }

    /// False for ops whose result is not a function of their inputs (random ops), which
    /// constant folding must leave alone.
    pub fn is_deterministic(self) -> bool {
        match self {
            Op::Elementwise(o) => o.is_deterministic(),
            Op::Fused(o) => o.is_deterministic(),
            Op::Collective(o) => o.is_deterministic(),
            Op::Reduce(_)
            | Op::Shape(_)
            | Op::Nn(_)
            | Op::Image(_)
            | Op::Control(_)
            | Op::Attention(_) => true,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What shape inference knows about one input: its type and, when it is a constant (or
/// was folded to one), its value.
#[derive(Clone, Copy, Debug)]
pub struct InferInput<'a> {
    /// Dtype and symbolic shape.
    pub ty: &'a TensorType,
    /// The value when known at compile time.
    pub value: Option<&'a Tensor>,
}

/// One element of a small integer tensor that inference tracks (a shape being computed
/// from `Shape`, as exporters emit): a known integer or a symbolic dim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymInt {
    /// A known value (negative ones are meaningful: Reshape's -1).
    Int(i64),
    /// A symbolic, non-negative value (`batch`, `seq+1`).
    Dim(Dim),
}

/// State shared by the inference of one graph: fresh symbols for data-dependent dims,
/// and the symbolic contents of shape-like values that are not constants (so
/// `Reshape(x, Concat(Gather(Shape(x), 0), [-1]))` gets `[batch, ...]`, not fresh dims).
#[derive(Debug, Default)]
pub struct InferCx {
    fresh: u32,
    sym_values: HashMap<ValueId, Vec<SymInt>>,
}

impl InferCx {
    /// A new symbol for a dim only known at run time (NonZero's count, Unique's size...).
    pub fn fresh_dim(&mut self, hint: &str) -> Dim {
        self.fresh += 1;
        Dim::sym(&format!("{hint}_{}", self.fresh))
    }

    /// The elements (row-major) of value `v`, when inference tracked them.
    pub fn sym_value(&self, v: ValueId) -> Option<&[SymInt]> {
        self.sym_values.get(&v).map(Vec::as_slice)
    }

    /// Records the elements (row-major) of value `v`.
    pub fn set_sym_value(&mut self, v: ValueId, elems: Vec<SymInt>) {
        self.sym_values.insert(v, elems);
    }
}

/// Evaluation context: gives control-flow ops a way to run their sub-graphs, with the
/// sub-graphs' captured values resolved in the enclosing scopes.
pub struct EvalCx<'a> {
    /// Resolves an outer-scope value by name.
    pub lookup: &'a dyn Fn(&str) -> Option<Tensor>,
}

impl EvalCx<'_> {
    /// Runs a sub-graph on `inputs`, its captures read from the enclosing scopes.
    pub fn run_subgraph(&self, g: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        crate::interp::run_scoped(g, inputs, self.lookup)
    }
}

/// Reads an attribute set: shorthand used by the families.
pub fn attrs(node: &Node) -> &Attrs {
    &node.attrs
}
