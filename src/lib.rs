//! gopt: an ahead-of-time graph compiler for neural-network inference.
//!
//! This facade re-exports the pipeline's crates; the `gopt` binary is a thin layer over it.

pub use gopt_frontends as frontends;
pub use gopt_ir as ir;
