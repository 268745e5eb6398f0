//! Reading a node's operands for lowering, the same for every backend: present inputs
//! and outputs, typed static shapes, constant inputs, and the error for a mode no GPU
//! kernel implements. Errors made here name no backend ([`NEUTRAL`]); each backend's
//! planner relabels them with its own name ([`crate::CodegenError::for_backend`]), so
//! a message says which backend refused the node.

use crate::{CodegenError, Result};
use gopt_ir::{DType, Graph, Node, Tensor, ValueId};

/// The backend name of errors made while lowering, before a backend claims them.
pub const NEUTRAL: &str = "GPU";

/// The error for a mode or operand of `node` the GPU kernels do not implement.
pub fn unsupported(node: &Node, what: &str) -> CodegenError {
    CodegenError::Unsupported {
        node: node.name.clone(),
        op: node.op.name().into(),
        backend: NEUTRAL,
        what: what.into(),
    }
}

/// A node resolved to one of its family's forms: where it is, and which op with what
/// (the families whose writers need nothing else).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sited<F> {
    /// The node: its name, op and operands.
    pub site: Site,
    /// The op and its parameters.
    pub form: F,
}

impl<F> Sited<F> {
    /// Node `node` of `g`, its form read by the family's `form`.
    pub fn read(g: &Graph, node: &Node, form: fn(&Graph, &Node) -> Result<F>) -> Result<Self> {
        Ok(Sited {
            site: Site::of(node),
            form: form(g, node)?,
        })
    }
}

/// The node a spec was read from, as the writers need it without the graph: its name
/// and op (kernel names, error messages) and its operands' value ids (the buffers a
/// kernel binds), absent optional inputs kept as `None` in their positions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The node's name.
    pub node: String,
    /// The op's name.
    pub op: &'static str,
    /// Input value ids, `None` where an optional input is absent.
    pub inputs: Vec<Option<u32>>,
    /// Output value ids.
    pub outputs: Vec<u32>,
}

impl Site {
    /// The site of `node`.
    pub fn of(node: &Node) -> Site {
        Site {
            node: node.name.clone(),
            op: node.op.name(),
            inputs: node.inputs.iter().map(|v| v.map(|v| v.0)).collect(),
            outputs: node.outputs.iter().map(|v| v.0).collect(),
        }
    }

    /// The error for a mode or operand of this node a writer does not implement
    /// ([`unsupported`] without the node).
    pub fn unsupported(&self, what: &str) -> CodegenError {
        CodegenError::Unsupported {
            node: self.node.clone(),
            op: self.op.into(),
            backend: NEUTRAL,
            what: what.into(),
        }
    }

    /// Input `k`'s value id, which must be present.
    pub fn input(&self, k: usize) -> Result<u32> {
        self.inputs
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| self.unsupported(&format!("a missing input {k}")))
    }

    /// Output `k`'s value id.
    pub fn output(&self, k: usize) -> Result<u32> {
        self.outputs
            .get(k)
            .copied()
            .ok_or_else(|| self.unsupported(&format!("a missing output {k}")))
    }
}

/// A plan error (a graph that was not verified or typed).
pub fn plan(e: impl std::fmt::Display) -> CodegenError {
    CodegenError::Plan(e.to_string())
}

/// Input `k` of `node`, which must be present.
pub fn input(node: &Node, k: usize) -> Result<ValueId> {
    node.inputs
        .get(k)
        .copied()
        .flatten()
        .ok_or_else(|| unsupported(node, &format!("a missing input {k}")))
}

/// Input `k` of `node` when present.
pub fn opt_input(node: &Node, k: usize) -> Option<ValueId> {
    node.inputs.get(k).copied().flatten()
}

/// Output `k` of `node`.
pub fn output(node: &Node, k: usize) -> Result<ValueId> {
    node.outputs
        .get(k)
        .copied()
        .ok_or_else(|| unsupported(node, &format!("a missing output {k}")))
}

/// The dtype and static shape of `v`, an operand of `node`.
pub fn typed(g: &Graph, node: &Node, v: ValueId) -> Result<(DType, Vec<usize>)> {
    let t = g.ty(v).map_err(plan)?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
    Ok((t.dtype, s))
}

/// Input `k` as a constant tensor (`None` when the input is absent).
pub fn const_input<'g>(
    g: &'g Graph,
    node: &Node,
    k: usize,
    what: &str,
) -> Result<Option<&'g Tensor>> {
    match opt_input(node, k) {
        None => Ok(None),
        Some(v) => g
            .constant(v)
            .map(Some)
            .ok_or_else(|| unsupported(node, &format!("{what} that is not a constant"))),
    }
}

/// The float dtypes the GPU kernels compute in f32 (f32, f16, bf16).
pub fn check_float(node: &Node, dt: DType, what: &str) -> Result<()> {
    match dt {
        DType::F32 | DType::F16 | DType::BF16 => Ok(()),
        other => Err(unsupported(node, &format!("{other} {what}"))),
    }
}

/// The verified graph of IR text `src`, for the lowering tests (a text that does not
/// parse or verify fails the test with the error and the text).
#[cfg(test)]
pub fn test_graph(src: &str) -> Graph {
    let g = gopt_ir::text::parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    gopt_ir::verify(g)
        .unwrap_or_else(|e| panic!("{e}\n{src}"))
        .into_inner()
}
