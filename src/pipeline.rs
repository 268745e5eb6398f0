//! The compile pipeline the CLI and the tests share: specialize a model to one shape
//! bucket, optimize it, and run it with inputs padded up to the bucket and outputs
//! sliced back. `gopt compile`, `run` and `test` all go through [`Options`], so every
//! optimization can be switched off and measured from any of them.

use crate::{GoptError, Result};
use gopt_ir::ops::ShapeOp;
use gopt_ir::{Attrs, Bindings, Dim, Graph, Model, Node, Op, Tensor, ValueId, Verified};
use gopt_passes::bucket::{self, Plan};
use gopt_passes::{Config, Pass, PassReport, Precision};
use std::collections::BTreeMap;

/// Compile options (the CLI's `--precision`, `--disable`, `--buckets`, budgets).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Optimizer configuration (precision, disabled passes, budgets, target).
    pub config: Config,
    /// Bucket sizes per symbol (`--buckets seq=32,64`); defaults where absent.
    pub buckets: Vec<(String, Vec<u64>)>,
    /// Skip the optimizer entirely (run the graph as imported and folded).
    pub no_optimize: bool,
    /// Where [`run`] executes.
    pub backend: Backend,
    /// CUDA: launch the plan step by step instead of replaying a captured CUDA graph.
    pub no_cuda_graph: bool,
    /// wgpu: the adapter to run on (the first whose name contains this), else the most
    /// preferred (a discrete GPU first).
    pub adapter: Option<String>,
    /// wgpu: whether the adapter can run f16 shaders (`None`: assumed, as for a
    /// `compile --target wgsl` without a device). Without it, half precisions lower to
    /// fp32.
    pub wgsl_f16: Option<bool>,
    /// The most bytes a run or a plan may allocate (`--memory-limit`). `None`: the
    /// machine's available memory on the CPU, the device's free memory on a GPU at run
    /// time, and [`gopt_ir::limit::GPU_DEFAULT`] for a plan made without a device.
    pub memory_limit: Option<u64>,
}

/// Where a compiled graph executes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// The CPU reference interpreter.
    #[default]
    Cpu,
    /// NVIDIA GPUs: generated CUDA kernels and cuBLASLt, replayed as a CUDA graph.
    Cuda,
    /// Any GPU wgpu reaches (Vulkan, Metal, DX12; lavapipe on the CPU): generated WGSL.
    Wgpu,
}

impl Backend {
    /// The name the CLI and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Wgpu => "wgpu",
        }
    }
}

impl Options {
    /// Parses the CLI's list forms.
    pub fn from_cli(precision: &str, disable: &[String], buckets: &[String]) -> Result<Options> {
        let p = Precision::from_name(precision).ok_or_else(|| {
            GoptError::Usage(format!(
                "--precision {precision}: expected fp32, tf32, bf16 or fp16"
            ))
        })?;
        let mut cfg = Config {
            precision: p,
            ..Config::default()
        };
        let mut no_optimize = false;
        for d in disable.iter().flat_map(|d| d.split(',')) {
            let d = d.trim();
            if d.is_empty() {
                continue;
            }
            if d == "all" {
                no_optimize = true;
                continue;
            }
            let pass = Pass::from_name(d).ok_or_else(|| {
                GoptError::Usage(format!(
                    "--disable {d}: unknown pass (passes: fusion, layout, precision, bucketing, all)"
                ))
            })?;
            cfg.disabled.push(pass);
        }
        let buckets = buckets
            .iter()
            .map(|b| bucket::parse_override(b).map_err(GoptError::from))
            .collect::<Result<Vec<_>>>()?;
        Ok(Options {
            config: cfg,
            buckets,
            no_optimize,
            ..Options::default()
        })
    }
}

/// One specialized, optimized graph.
#[derive(Debug)]
pub struct Variant {
    /// The bucket's bindings.
    pub bucket: BTreeMap<String, u64>,
    /// The graph to execute.
    pub graph: Verified,
    /// What the optimizer did (absent with `--disable all`).
    pub report: Option<PassReport>,
}

/// Specializes `model` to `bucket` and optimizes it.
pub fn specialize(
    model: &Model,
    bucket: &BTreeMap<String, u64>,
    opts: &Options,
) -> Result<Variant> {
    let b: Bindings = bucket.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let g = crate::prepare(model, &b)?;
    if opts.no_optimize {
        return Ok(Variant {
            bucket: bucket.clone(),
            graph: g,
            report: None,
        });
    }
    let o = gopt_passes::optimize(g, &opts.config)?;
    Ok(Variant {
        bucket: bucket.clone(),
        graph: o.graph,
        report: Some(o.report),
    })
}

/// The bucket plan of a model under `opts`.
pub fn plan(model: &Model, opts: &Options) -> Result<Plan> {
    Ok(bucket::plan(&model.graph, &opts.buckets)?)
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
    if !opts.config.enabled(Pass::Bucketing) {
        return Ok(actual);
    }
    let mut p = plan(model, opts)?;
    for (s, why) in p.padding.clone() {
        let explicit = opts.buckets.iter().any(|(n, _)| *n == s);
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
    let mut c = crate::Compiled::empty(model, opts);
    Ok(RunOutcome {
        outputs: c.run(inputs)?,
    })
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
