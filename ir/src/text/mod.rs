//! The stable text format of the IR: what snapshots show and what tests are written in
//! (as Cranelift's `.clif`). `print` then `parse` gives back an equivalent graph, and
//! printing that again gives the same text.
//!
//! ```text
//! graph "main"(%0 "x": f32[batch,4]) -> (%2) {
//!   %1 "w": f32[2] = const [1.0, 2.0]
//!   %2 "y": f32[batch,4] = Add "add0"(%0, %1) {}
//! }
//! ```

mod parse;
mod print;

pub use parse::parse;
pub use print::{print, print_with, quote, PrintOptions};
