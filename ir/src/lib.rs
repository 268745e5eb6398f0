//! gopt's intermediate representation.
//!
//! A model is a [`Graph`] of [`Node`]s over [`Value`]s held in arenas and addressed by
//! typed handles. Values carry a dtype and a shape whose dims may be symbolic
//! ([`Dim`]). The crate also owns what every later stage relies on: the verifier
//! ([`verify`]), shape inference ([`infer_types`]), specialisation and constant folding
//! ([`fold_constants`]), the stable text format ([`text`]) and the CPU reference
//! interpreter ([`interp`]), the oracle every backend is compared with.
#![warn(missing_docs)]

pub mod attr;
pub mod budget;
pub mod dim;
pub mod dtype;
pub mod error;
pub mod fold;
pub mod graph;
pub mod infer;
pub mod interp;
pub mod konst;
pub mod limit;
pub mod ops;
pub mod tensor;
pub mod text;
pub mod unroll;
pub mod verify;

pub use attr::{Attr, Attrs};
pub use dim::{Bindings, Dim, Shape};
pub use dtype::DType;
pub use error::{IrError, Result};
pub use fold::{bind_dims, fold_constants, FoldStats};
pub use graph::{Graph, Model, Node, NodeId, TensorType, Value, ValueId};
pub use infer::infer_types;
pub use konst::Const;
pub use ops::Op;
pub use tensor::{Elem, Tensor};
pub use verify::{verify, Verified};
