//! The compile pipeline the CLI and the tests share: specialize a model to one shape
//! bucket, optimize it, and run it with inputs padded up to the bucket and outputs
//! sliced back. [`Options`] is the typed set of choices a compile takes (precision,
//! buckets, passes, budgets, backend, memory limit); `gopt compile`, `run` and `test`
//! parse their flags into it, so every optimization can be switched off and measured
//! from any of them.

pub use crate::backend::Backend;
pub use crate::options::Options;
use crate::{GoptError, Result};
use gopt_ir::ops::ShapeOp;
use gopt_ir::{Attrs, Bindings, Dim, Graph, Model, Node, Op, Tensor, ValueId, Verified};
use gopt_passes::bucket::{self, Plan};
use gopt_passes::{Pass, PassReport};
use std::collections::BTreeMap;

/// One specialized, optimized graph.
#[derive(Debug)]
pub struct Variant {
    /// The bucket's bindings.
    pub bucket: BTreeMap<String, u64>,
    /// The graph to execute.
    pub graph: Verified,
    /// What the optimizer did (absent with `--disable all`).
    pub report: Option<PassReport>,
    /// GPU backends: each If, Loop and Scan made straight-line and how, or left and why
    /// ([`gopt_ir::unroll`]).
    pub control_flow: Vec<String>,
}

/// Specializes `model` to `bucket` and optimizes it.
pub fn specialize(
    model: &Model,
    bucket: &BTreeMap<String, u64>,
    opts: &Options,
) -> Result<Variant> {
    let b: Bindings = bucket.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let g = crate::prepare(model, &b)?;
    optimize_prepared(g, bucket, opts)
}

/// Optimizes `g`, a graph specialized to `bucket` already (bound, folded and verified,
/// perhaps rewritten since, as generation's steps are), for `opts`' backend.
pub fn optimize_prepared(
    g: Verified,
    bucket: &BTreeMap<String, u64>,
    opts: &Options,
) -> Result<Variant> {
    let (g, control_flow) = straight_line(g, opts)?;
    if !opts.get_optimize() {
        return Ok(Variant {
            bucket: bucket.clone(),
            graph: for_backend(g, opts)?,
            report: None,
            control_flow,
        });
    }
    let o = gopt_passes::optimize(g, opts.get_config())?;
    Ok(Variant {
        bucket: bucket.clone(),
        graph: for_backend(o.graph, opts)?,
        report: Some(o.report),
        control_flow,
    })
}

/// For a GPU backend, `g` with its control flow made straight-line where it can be
/// ([`gopt_ir::unroll`]: constant conditions inlined, computed ones selected, loops
/// with known counts unrolled), and one line per control node saying what happened.
/// The CPU interpreter runs control flow as it is.
fn straight_line(g: Verified, opts: &Options) -> Result<(Verified, Vec<String>)> {
    let has_control = g.nodes.iter().any(|n| gopt_ir::unroll::is_control(&n.op));
    if opts.get_backend() == Backend::Cpu || !has_control {
        return Ok((g, Vec::new()));
    }
    let mut graph = g.into_inner();
    let r = gopt_ir::unroll::unroll_control(&mut graph)?;
    let mut lines = r.done;
    lines.extend(r.left.into_iter().map(|l| format!("left: {l}")));
    Ok((gopt_ir::verify(graph)?, lines))
}

/// The graph as the backend binds it: for wgpu, weights above the storage binding
/// limit split into pieces ([`gopt_passes::split_weights`]).
fn for_backend(g: Verified, opts: &Options) -> Result<Verified> {
    if opts.get_backend() != Backend::Wgpu {
        return Ok(g);
    }
    let storage = gopt_passes::split_weights::Storage {
        max_binding: opts
            .get_wgsl_max_binding()
            .unwrap_or(gopt_codegen::wgsl::WEBGPU_MAX_BINDING),
        elem_bytes: |dt| gopt_codegen::wgsl::storage_type(dt).map(|(_, width)| width as u64),
    };
    // A clone shares the weights; it is kept only when something was split.
    let mut graph = Graph::clone(&g);
    if gopt_passes::split_weights::split_large_weights(&mut graph, storage)? == 0 {
        return Ok(g);
    }
    Ok(gopt_ir::verify(graph)?)
}

/// The bucket plan of a model under `opts` (an error for a bucket symbol the model
/// does not have, or a size of 0).
pub fn plan(model: &Model, opts: &Options) -> Result<Plan> {
    for (s, sizes) in opts.get_buckets() {
        if sizes.is_empty() || sizes.contains(&0) {
            return Err(GoptError::Usage(format!(
                "buckets of `{s}`: {sizes:?}: expected one or more sizes above 0"
            )));
        }
    }
    Ok(bucket::plan(&model.graph, opts.get_buckets())?)
}

/// The bucket a run with these symbol sizes uses: with bucketing on, padded dims go to
/// their bucket and other dims must match an explicit bucket (or stay exact when none
/// was asked for); with bucketing off, the sizes themselves.
pub fn bucket_for(
    model: &Model,
    actual: &Bindings,
    opts: &Options,
) -> Result<BTreeMap<String, u64>> {
    let actual: BTreeMap<String, u64> = actual.iter().map(|(k, v)| (k.clone(), *v)).collect();
    if !opts.get_config().enabled(Pass::Bucketing) {
        return Ok(actual);
    }
    let mut p = plan(model, opts)?;
    for (s, why) in p.padding.clone() {
        let explicit = opts.get_buckets().iter().any(|(n, _)| *n == s);
        if why.is_some() && !explicit {
            if let Some(a) = actual.get(&s) {
                p.sizes.insert(s.clone(), vec![*a]);
            }
        }
    }
    // Symbols that only appear inside (not on inputs) are bound exactly.
    let mut chosen = p.choose(&actual)?;
    for (k, v) in actual {
        chosen.entry(k).or_insert(v);
    }
    Ok(chosen)
}

/// Result of [`run`].
#[derive(Debug)]
pub struct RunOutcome {
    /// Outputs, sliced back to the run's sizes.
    pub outputs: Vec<Tensor>,
}

/// Compiles `model` for the bucket `inputs` need and runs it once on the chosen backend
/// (the CPU reference interpreter, the CUDA plan or the WGSL plan): [`crate::Compiled::run`] on a
/// fresh [`crate::Compiled`].
pub fn run(model: &crate::Imported, inputs: &[Tensor], opts: &Options) -> Result<RunOutcome> {
    let mut c = crate::Compiled::new(model, opts)?;
    Ok(RunOutcome {
        outputs: c.run(inputs)?,
    })
}

/// `model` with its weights quantized as `opts.quantize` asks (a copy; weights not
/// quantized stay shared), and what was quantized; `model` itself when nothing is asked.
pub fn quantized(
    model: &crate::Imported,
    opts: &Options,
) -> Result<(crate::Imported, Vec<gopt_passes::quantize::WeightReport>)> {
    let Some(q) = &opts.get_quantize() else {
        return Ok((model.clone(), Vec::new()));
    };
    q.check().map_err(GoptError::Usage)?;
    if !opts.get_optimize() {
        return Err(GoptError::Usage(
            "--quantize needs the optimizer (it runs the quantized products packed); drop \
             --disable all"
                .into(),
        ));
    }
    let mut m = model.clone();
    let reports = gopt_passes::quantize::quantize(&mut m.model.graph, q);
    Ok((m, reports))
}

/// Pads (or slices) each input to its bucket's dims.
pub(crate) fn pad_inputs(
    model: &Model,
    inputs: &[Tensor],
    bucket: &BTreeMap<String, u64>,
) -> Result<Vec<Tensor>> {
    let g = &model.graph;
    inputs
        .iter()
        .zip(&g.inputs)
        .map(|(t, &v)| resize(t, &dims_of(g, v), bucket))
        .collect()
}

/// Slices outputs computed at the bucket's sizes back to the run's own sizes.
pub(crate) fn slice_outputs(
    model: &Model,
    outs: Vec<Tensor>,
    bucket: &BTreeMap<String, u64>,
    actual: &BTreeMap<String, u64>,
) -> Result<Vec<Tensor>> {
    let padded_any = bucket.iter().any(|(k, v)| actual.get(k) != Some(v));
    if !padded_any {
        return Ok(outs);
    }
    let dims = output_dims(model, actual)?;
    outs.iter()
        .zip(&dims)
        .map(|(t, d)| resize(t, d, actual))
        .collect()
}

/// The outputs' shapes at the run's own sizes: the model specialized to them (bound and
/// folded, not optimized). Exporters declare outputs with unrelated dim names such as
/// `MatMul_dim_0`, and symbolic inference can lose a dim through `Range`, so this is the
/// reliable way to know what to slice back.
fn output_dims(model: &Model, actual: &BTreeMap<String, u64>) -> Result<Vec<Vec<Dim>>> {
    let b: Bindings = actual.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let g = crate::prepare(model, &b)?;
    Ok(g.outputs.iter().map(|&v| dims_of(&g, v)).collect())
}

fn dims_of(g: &Graph, v: ValueId) -> Vec<Dim> {
    g.value(v)
        .ty
        .as_ref()
        .map(|t| t.shape.to_vec())
        .unwrap_or_default()
}

/// Pads with zeros (or slices) each axis whose declared dim, evaluated with `sizes`,
/// differs from the tensor's size on that axis.
fn resize(t: &Tensor, dims: &[Dim], sizes: &BTreeMap<String, u64>) -> Result<Tensor> {
    let b: Bindings = sizes.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let mut out = t.clone();
    for (axis, d) in dims.iter().enumerate() {
        let Some(want) = d.bind(&b).known() else {
            continue;
        };
        let Some(&have) = out.shape().get(axis) else {
            continue;
        };
        let have = have as u64;
        if want > have {
            let mut pads = vec![0i64; 2 * out.rank()];
            pads[out.rank() + axis] = (want - have) as i64;
            out = apply(ShapeOp::Pad, &[out.clone(), Tensor::from_i64s(&pads)])?;
        } else if want < have {
            out = apply(
                ShapeOp::Slice,
                &[
                    out.clone(),
                    Tensor::from_i64s(&[0]),
                    Tensor::from_i64s(&[want as i64]),
                    Tensor::from_i64s(&[axis as i64]),
                ],
            )?;
        }
    }
    Ok(out)
}

fn apply(op: ShapeOp, inputs: &[Tensor]) -> Result<Tensor> {
    let node = Node {
        name: String::new(),
        op: Op::Shape(op),
        attrs: Attrs::default(),
        inputs: (0..inputs.len()).map(|i| Some(ValueId(i as u32))).collect(),
        outputs: vec![ValueId(inputs.len() as u32)],
    };
    let lookup = |_: &str| None;
    let cx = gopt_ir::ops::EvalCx { lookup: &lookup };
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(Some).collect();
    let mut out = Op::Shape(op).eval(&cx, &node, &refs)?;
    Ok(out.remove(0))
}
