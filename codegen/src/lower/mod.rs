//! Lowering: what each node of a verified, specialized graph becomes on a GPU, decided
//! once for every backend before any source is written.
//!
//! The shared facts live here: a node's typed operands ([`support`]), the body of an
//! element-wise node ([`body`]), the index maps of data movement ([`index`]), a
//! convolution's resolved spec ([`conv`]), a pool's window ([`pool`]) and a
//! reduction's axes and runs ([`reduce`]). The CUDA and WGSL writers spell these in
//! their own language and never import each other.

pub mod body;
pub mod conv;
pub mod index;
pub mod pool;
pub mod reduce;
pub mod support;
