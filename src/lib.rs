//! gopt: an ahead-of-time graph compiler for neural-network inference.
//!
//! This facade re-exports the pipeline's crates and offers the calls the `gopt` binary
//! (a thin layer over this library) and the integration tests share:
//!
//! - [`load_model`] imports a model file;
//! - [`compile`] turns it into a [`Compiled`] model for the [`Options`] given (precision,
//!   buckets, passes, budgets, backend), which [`Compiled::run`] executes and
//!   [`Compiled::save`] writes as an artifact;
//! - [`prepare`] specializes a model to concrete dims (binds symbols, folds the shape
//!   sub-graphs to constants) and verifies it;
//! - [`run_cpu`] runs a model on the CPU reference interpreter, as imported;
//! - [`testing`] runs ONNX-layout test cases against reference outputs;
//! - [`report`] describes what specialization left in a graph;
//! - [`generate`] runs LLM generation on a decoder exported with a KV cache.
//!
//! ```no_run
//! use gopt::{Backend, Options, Precision};
//! use std::path::Path;
//! let model = gopt::load_model(Path::new("tests/data/models/bert_small/model.onnx"))?;
//! let (_, ids) = gopt::tensor_io::read_tensor(Path::new("ids.npy"))?;
//! let (_, mask) = gopt::tensor_io::read_tensor(Path::new("mask.npy"))?;
//! let opts = Options::new()
//!     .precision(Precision::Bf16)
//!     .buckets("batch", [1])
//!     .buckets("seq", [128])
//!     .backend(Backend::Wgpu);
//! let mut compiled = gopt::compile(&model, &opts)?;
//! for b in compiled.buckets() {
//!     println!("{}: {} kernels, {} launches per run", b.name(), b.kernels(), b.launches());
//! }
//! let outputs = compiled.run(&[ids.clone(), mask.clone()])?;
//! // The reference: the CPU interpreter on the model as imported.
//! let reference = gopt::run_cpu(&model, &[ids, mask])?;
//! # Ok::<(), gopt::GoptError>(())
//! ```
#![warn(missing_docs)]

pub mod artifact;
pub mod backend;
pub mod charts;
pub mod compiled;
pub mod cuda;
pub mod error;
pub mod generate;
pub mod options;
pub mod pipeline;
pub mod report;
pub mod roofline;
pub mod tensor_io;
pub mod testing;
pub mod value_inputs;
pub mod wgpu;

pub use backend::Backend;
pub use compiled::{
    bucket_name, compile, compile_buckets, compile_plan, BackendPlan, Bucket, Compiled, Executor,
    Skipped,
};
pub use error::{GoptError, Result};
pub use gopt_codegen as codegen;
pub use gopt_frontends as frontends;
pub use gopt_frontends::{ImportError, Imported, Inspection};
pub use gopt_ir as ir;
pub use gopt_ir::{Bindings, DType, Graph, IrError, Model, Tensor, Verified};
pub use gopt_passes as passes;
pub use gopt_passes::{Budgets, Pass, Precision};
pub use gopt_runtime as runtime;
pub use pipeline::Options;

use gopt_ir::{bind_dims, fold_constants, interp, verify};
use std::path::Path;

/// Imports a model file (ONNX; external data files are read relative to its folder).
pub fn load_model(path: &Path) -> Result<Imported> {
    Ok(gopt_frontends::load(path)?)
}

/// Specializes a copy of `model`'s graph: checks its structure, replaces the symbols in
/// `bindings` by their sizes, folds every node whose inputs became constant (the shape
/// sub-graphs exporters emit), and verifies the result. Symbols left unbound stay
/// symbolic; with empty bindings this only folds what is already constant.
pub fn prepare(model: &Model, bindings: &Bindings) -> Result<Verified> {
    let mut graph = model.graph.clone();
    gopt_ir::verify::check_structure(&graph, &[])?;
    if !bindings.is_empty() {
        bind_dims(&mut graph, bindings)?;
    }
    fold_constants(&mut graph)?;
    Ok(verify(graph)?)
}

/// Runs `model` on the CPU reference interpreter. `inputs` are the graph inputs in order
/// (constants are not inputs); their dtypes and shapes are checked against the declared
/// ones, then the graph is interpreted as imported. The interpreter needs no shape
/// inference, so models whose shapes depend on input values (a Reshape target fed as an
/// input, loop-carried values without declared types) run too; `prepare` is the
/// compile path, which needs every type.
pub fn run_cpu(model: &Imported, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    let graph = &model.model.graph;
    interp::check_inputs(graph, inputs)?;
    gopt_ir::verify::check_structure(graph, &[])?;
    Ok(interp::run(graph, inputs)?)
}

/// Names of the graph's inputs, in order.
pub fn input_names(graph: &Graph) -> Vec<String> {
    graph
        .inputs
        .iter()
        .map(|&v| graph.value(v).name.clone())
        .collect()
}

/// Names of the graph's outputs, in order.
pub fn output_names(graph: &Graph) -> Vec<String> {
    graph
        .outputs
        .iter()
        .map(|&v| graph.value(v).name.clone())
        .collect()
}

/// Puts run-time inputs in graph order. Each entry is bound by name when it has one and
/// otherwise to the first graph input not bound yet, in order. Every graph input must be
/// bound exactly once.
pub fn order_inputs(graph: &Graph, given: Vec<(Option<String>, Tensor)>) -> Result<Vec<Tensor>> {
    let names = input_names(graph);
    let mut slots: Vec<Option<Tensor>> = vec![None; names.len()];
    let mut positional = Vec::new();
    for (name, t) in given {
        match name {
            Some(n) => {
                let Some(i) = names.iter().position(|x| *x == n) else {
                    return Err(GoptError::Inputs(format!(
                        "the model has no input named `{n}` (its inputs: {})",
                        list(&names)
                    )));
                };
                if slots[i].is_some() {
                    return Err(GoptError::Inputs(format!("input `{n}` is given twice")));
                }
                slots[i] = Some(t);
            }
            None => positional.push(t),
        }
    }
    let mut positional = positional.into_iter();
    for slot in slots.iter_mut().filter(|s| s.is_none()) {
        match positional.next() {
            Some(t) => *slot = Some(t),
            None => break,
        }
    }
    let extra = positional.count();
    if extra > 0 {
        return Err(GoptError::Inputs(format!(
            "{extra} more input(s) given than the model takes (its inputs: {})",
            list(&names)
        )));
    }
    let missing: Vec<String> = names
        .iter()
        .zip(&slots)
        .filter(|(_, s)| s.is_none())
        .map(|(n, _)| format!("`{n}`"))
        .collect();
    if !missing.is_empty() {
        return Err(GoptError::Inputs(format!(
            "missing input(s) {}; give them as NAME=FILE (its inputs: {})",
            missing.join(", "),
            list(&names)
        )));
    }
    Ok(slots.into_iter().flatten().collect())
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
