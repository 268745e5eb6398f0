//! Matrix products (MatMul, FusedMatMul, Gemm) as every GPU backend reads them: the
//! transposes, `alpha`, Gemm's `beta` and C, FusedMatMul's activation, bias and
//! residual ([`Parts`]), and the product's sizes with the batch dims resolved
//! ([`Problem`]: a B without batch dims is shared, so A's batch dims fold into M; an A
//! without them is shared across B's batches; equal batch dims step together). What no
//! GPU backend runs (batch dims that broadcast partially, non-float operands) is refused
//! here; a backend narrows further on its own (dtypes, epilogue forms).

use super::support::{check_float, input, output, typed, unsupported, Site};
use super::GemmForm;
use crate::Result;
use gopt_ir::ops::fused::{Activation, MATMUL_ACTIVATIONS};
use gopt_ir::ops::{FusedOp, NnOp};
use gopt_ir::{DType, Graph, Node, Op, ValueId};

/// A GEMM node's transposes and epilogue, as the IR states them:
/// `act(alpha · op(A)·op(B) + beta · bias) + residual`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Parts {
    /// The activation (none for MatMul and Gemm).
    pub act: Activation,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of `bias` (Gemm's `beta`; 1 otherwise).
    pub beta: f32,
    /// A is stored `[K, M]` (Gemm's `transA`).
    pub trans_a: bool,
    /// B is stored `[.., N, K]` (Gemm's `transB`, FusedMatMul's `trans_b`).
    pub trans_b: bool,
    /// Added before the activation: FusedMatMul's bias, Gemm's C (absent when `beta`
    /// is 0, as the reference skips it).
    pub bias: Option<ValueId>,
    /// Added after the activation (FusedMatMul).
    pub residual: Option<ValueId>,
}

/// Reads the transposes and epilogue of GEMM node `node`.
pub fn parts(node: &Node) -> Result<Parts> {
    let a = &node.attrs;
    let at = |i: usize| node.inputs.get(i).copied().flatten();
    let err = |e: gopt_ir::IrError| unsupported(node, &e.to_string());
    let flag = |name: &str| a.int_or(name, 0).map(|v| v != 0).map_err(err);
    let float = |name: &str| a.float_or(name, 1.0).map_err(err);
    if node.op == Op::Nn(NnOp::MatMul) {
        Ok(Parts {
            act: Activation::None,
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: false,
            bias: None,
            residual: None,
        })
    } else if node.op == Op::Fused(FusedOp::FusedMatMul) {
        Ok(Parts {
            act: Activation::from_node(node, MATMUL_ACTIVATIONS).map_err(err)?,
            alpha: float("alpha")?,
            beta: 1.0,
            trans_a: false,
            trans_b: flag("trans_b")?,
            bias: at(2),
            residual: at(3),
        })
    } else if node.op == Op::Nn(NnOp::Gemm) {
        let beta = float("beta")?;
        Ok(Parts {
            act: Activation::None,
            alpha: float("alpha")?,
            beta,
            trans_a: flag("transA")?,
            trans_b: flag("transB")?,
            bias: at(2).filter(|_| beta != 0.0),
            residual: None,
        })
    } else {
        Err(unsupported(node, "this op (not a GEMM)"))
    }
}

/// A product's operands and sizes: per batch, row-major `[M, N] = op(A)·op(B)` with
/// `op(A)` of `[M, K]` and `op(B)` of `[K, N]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    /// A (`[.., M, K]`, or `[K, M]` with `trans_a`).
    pub a: ValueId,
    /// B (`[.., K, N]`, or `[.., N, K]` with `trans_b`).
    pub b: ValueId,
    /// The output, `M × N` per batch.
    pub out: ValueId,
    /// Dtype of A and B.
    pub dtype: DType,
    /// Dtype of the output.
    pub out_dtype: DType,
    /// Rows (A's batch dims folded in when B is shared).
    pub m: usize,
    /// Columns.
    pub n: usize,
    /// Reduction length.
    pub k: usize,
    /// Batches (1 when folded).
    pub batch: usize,
    /// Elements between A's batches (0: shared).
    pub stride_a: usize,
    /// Elements between B's batches (0: shared).
    pub stride_b: usize,
    /// See [`Parts::trans_a`].
    pub trans_a: bool,
    /// See [`Parts::trans_b`].
    pub trans_b: bool,
}

/// The sizes of GEMM node `node` with transposes `p`.
pub fn problem(g: &Graph, node: &Node, p: &Parts) -> Result<Problem> {
    let (a, b, out) = (input(node, 0)?, input(node, 1)?, output(node, 0)?);
    let (dtype, mut ash) = typed(g, node, a)?;
    let (bdt, mut bsh) = typed(g, node, b)?;
    let (out_dtype, osh) = typed(g, node, out)?;
    if bdt != dtype {
        return Err(unsupported(node, &format!("A {dtype} × B {bdt}")));
    }
    check_float(node, dtype, "operands")?;
    check_float(node, out_dtype, "output")?;
    if ash.len() == 1 {
        if p.trans_a {
            return Err(unsupported(node, "transA with a 1-D A"));
        }
        ash.insert(0, 1);
    }
    if bsh.len() == 1 {
        if p.trans_b {
            return Err(unsupported(node, "trans_b with a 1-D B"));
        }
        bsh.push(1);
    }
    let (ra, rb) = (ash.len() - 2, bsh.len() - 2);
    let (m, k) = if p.trans_a {
        (ash[ra + 1], ash[ra])
    } else {
        (ash[ra], ash[ra + 1])
    };
    let (kb, n) = if p.trans_b {
        (bsh[rb + 1], bsh[rb])
    } else {
        (bsh[rb], bsh[rb + 1])
    };
    if k != kb {
        return Err(unsupported(node, &format!("K mismatch {k} vs {kb}")));
    }
    let abatch: usize = ash[..ra].iter().product();
    let bbatch: usize = bsh[..rb].iter().product();
    let (m_all, batch, stride_a, stride_b) = if bbatch == 1 && !p.trans_a {
        (m * abatch, 1, 0, 0)
    } else if abatch == 1 {
        (m, bbatch, 0, k * n)
    } else if ash[..ra] == bsh[..rb] {
        (m, abatch, m * k, k * n)
    } else {
        return Err(unsupported(
            node,
            &format!("batch dims {ash:?} × {bsh:?} that broadcast partially"),
        ));
    };
    if osh.iter().product::<usize>() != m_all * n * batch {
        return Err(unsupported(
            node,
            &format!("an output {osh:?} that is not M×N per batch"),
        ));
    }
    Ok(Problem {
        a,
        b,
        out,
        dtype,
        out_dtype,
        m: m_all,
        n,
        k,
        batch,
        stride_a,
        stride_b,
        trans_a: p.trans_a,
        trans_b: p.trans_b,
    })
}

/// Gemm's C (`c`) as `[rows, cols]`, each 1 or the output's `M`, `N`: it broadcasts
/// (unidirectionally) to `[M, N]`.
pub fn gemm_c(g: &Graph, node: &Node, c: ValueId, m: usize, n: usize) -> Result<[usize; 2]> {
    let (_, cs) = typed(g, node, c)?;
    let rc = match cs[..] {
        [] => [1, 1],
        [x] => [1, x],
        [x, y] => [x, y],
        [_, _, _, ..] => return Err(unsupported(node, "a C of rank above 2")),
    };
    if (rc[0] != 1 && rc[0] != m) || (rc[1] != 1 && rc[1] != n) {
        return Err(unsupported(
            node,
            &format!("a C of shape {cs:?} that does not broadcast to [{m}, {n}]"),
        ));
    }
    Ok(rc)
}

/// A value a GEMM writer reads or writes, typed once here: its id, dtype and static
/// shape, and whether it is a constant (a constant bias of another dtype is converted
/// by the CUDA plan; the GEMV wants a constant B).
#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    /// The value.
    pub id: ValueId,
    /// Its dtype.
    pub dtype: DType,
    /// Its static shape.
    pub shape: Vec<usize>,
    /// Whether it is a constant of the graph.
    pub konst: bool,
}

/// Operand `v` of `node`.
pub fn operand(g: &Graph, node: &Node, v: ValueId) -> Result<Operand> {
    let (dtype, shape) = typed(g, node, v)?;
    Ok(Operand {
        id: v,
        dtype,
        shape,
        konst: g.konst(v).is_some(),
    })
}

/// What follows a product, typed: `out = act(P + beta · bias) + residual`, with `P`
/// the (scaled) product. Shared by the GEMM family's writers and the convolutions run
/// as a GEMM.
#[derive(Clone, Debug, PartialEq)]
pub struct Tail {
    /// The output.
    pub out: Operand,
    /// The activation.
    pub act: Activation,
    /// Added before the activation, scaled by `beta`.
    pub bias: Option<Operand>,
    /// Scale of `bias` (Gemm's `beta`; 1 otherwise).
    pub beta: f32,
    /// Added after the activation.
    pub residual: Option<Operand>,
}

/// The tail of `node`: output 0, activation `act`, `bias` scaled by `beta`, `residual`.
pub fn tail(
    g: &Graph,
    node: &Node,
    act: Activation,
    bias: Option<ValueId>,
    beta: f32,
    residual: Option<ValueId>,
) -> Result<Tail> {
    let read = |v: Option<ValueId>| v.map(|v| operand(g, node, v)).transpose();
    Ok(Tail {
        out: operand(g, node, output(node, 0)?)?,
        act,
        bias: read(bias)?,
        beta,
        residual: read(residual)?,
    })
}

/// One GEMM node (MatMul, FusedMatMul, Gemm), lowered: everything its writers read.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmSpec {
    /// The node.
    pub site: Site,
    /// MatMul-style or Gemm.
    pub form: GemmForm,
    /// Transposes and epilogue as the IR states them.
    pub parts: Parts,
    /// Sizes, strides and dtypes.
    pub problem: Problem,
    /// B, typed (the GEMV asks for a constant of rank 2).
    pub b: Operand,
    /// The epilogue's operands, typed (`parts.bias`, `parts.residual`, the output).
    pub tail: Tail,
    /// Gemm's C as `[rows, cols]` broadcast to `[M, N]` ([`gemm_c`]).
    pub c: Option<[usize; 2]>,
}

/// The spec of GEMM node `node` of form `form`; refuses what no GPU backend runs.
pub fn spec(g: &Graph, node: &Node, form: GemmForm) -> Result<GemmSpec> {
    let parts = parts(node)?;
    let problem = problem(g, node, &parts)?;
    let c = match (form, parts.bias) {
        (GemmForm::Gemm, Some(c)) => Some(gemm_c(g, node, c, problem.m, problem.n)?),
        (GemmForm::Gemm, None) | (GemmForm::MatMul, _) => None,
    };
    Ok(GemmSpec {
        site: Site::of(node),
        form,
        b: operand(g, node, problem.b)?,
        tail: tail(g, node, parts.act, parts.bias, parts.beta, parts.residual)?,
        parts,
        problem,
        c,
    })
}
