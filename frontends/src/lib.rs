//! Model importers. Each turns a model file into a `gopt_ir::Model`, normalising the
//! source format's versioned semantics so later stages see one form per op.

pub mod fs;
pub mod onnx;

pub use onnx::*;
