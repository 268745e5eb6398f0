//! The CUDA execution plan of one specialized graph: the steps in order (generated
//! kernels and cuBLASLt GEMMs), where every value lives (an offset in the bucket's
//! arena, or in the weights blob uploaded once), and the graph's inputs and outputs.
//! It is plain data (serde), so `gopt compile` writes it into the artifact and the
//! runtime replays it without the graph.

mod fold;

use crate::cuda::conv_gemm;
use crate::cuda::gemm::{self, Gemm};
use crate::cuda::{emit_kernels, Kernel};
use crate::memory::{self, ALIGN};
use crate::{CodegenError, Result};
use fold::{fold_slices, slice_candidates};
use gopt_ir::{DType, Graph, Tensor, ValueId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Plan format version (bumped when a field changes meaning).
pub const VERSION: u32 = 1;

/// Where a value's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Place {
    /// At this byte offset of the bucket's arena.
    Arena(usize),
    /// At this byte offset of the weights blob.
    Weight(usize),
}

/// One step of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Step {
    /// Launch `kernels[i]`.
    Kernel(usize),
    /// A cuBLASLt matmul (then its post kernel, if any).
    Gemm(Gemm),
}

/// What a kernel that reads indices computed on the device reports. Each index is
/// checked against its axis after ONNX's negative wrap; one out of range makes the
/// kernel raise `code` in the run's error word (an atomic max on one `u32`, zeroed
/// before each run and read back with the outputs) and read element 0 instead, so the
/// kernel never reads out of bounds. The executor maps a nonzero word back to the
/// kernel whose check has that code and fails the run naming its node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexCheck {
    /// The code raised: [`index_code`] of the node, so the word (a maximum) names the
    /// earliest failing node when several fail.
    pub code: u32,
    /// The node's op (for the message).
    pub op: String,
    /// What was out of range, for the message (`an index out of range for an axis of
    /// length 5`).
    pub what: String,
}

/// The code node `node` of `g` raises when an index is out of range: counted down from
/// the graph's first node (`nodes.len()`) to its last (1), so that the largest code
/// raised in a run, which the atomic max keeps, is the earliest node in graph order
/// (later ones may only have read the clamped result).
pub fn index_code(g: &Graph, node: &gopt_ir::Node) -> Result<u32> {
    let i = g
        .nodes
        .iter()
        .position(|n| std::ptr::eq(n, node))
        .or_else(|| g.nodes.iter().position(|n| n.name == node.name))
        .ok_or_else(|| CodegenError::Plan(format!("node `{}` is not in the graph", node.name)))?;
    u32::try_from(g.nodes.len() - i).map_err(|_| {
        CodegenError::Plan(format!(
            "node `{}`: more than 2^32 nodes to number in the error word",
            node.name
        ))
    })
}

/// The error a nonzero error word `code` stands for: the kernel of `checks` (name,
/// node, check) that raises it, or a damaged-plan message.
pub fn index_error<'a>(
    code: u32,
    backend: &str,
    checks: impl IntoIterator<Item = (&'a str, &'a str, &'a IndexCheck)>,
) -> String {
    match checks.into_iter().find(|(_, _, c)| c.code == code) {
        Some((kernel, node, c)) => format!(
            "node `{node}` ({}): {} (detected on the GPU by the {backend} kernel {kernel})",
            c.op, c.what
        ),
        None => format!(
            "a {backend} kernel raised index error code {code}, which no kernel of the plan \
             has: the plan is damaged"
        ),
    }
}

/// A graph input or output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Io {
    /// The value's name.
    pub name: String,
    /// Its value id.
    pub value: u32,
    /// Dtype.
    pub dtype: DType,
    /// Shape in this bucket.
    pub shape: Vec<usize>,
}

/// The plan of one bucket.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CudaPlan {
    /// [`VERSION`].
    pub version: u32,
    /// Generated kernels (one module).
    pub kernels: Vec<Kernel>,
    /// Steps in execution order.
    pub steps: Vec<Step>,
    /// Where each value used by a step lives (value id → place).
    pub places: BTreeMap<u32, Place>,
    /// Each placed value's size in bytes.
    pub value_bytes: BTreeMap<u32, usize>,
    /// Arena size: the peak of the liveness-planned layout.
    pub arena_bytes: usize,
    /// What one buffer per intermediate would take.
    pub unplanned_bytes: usize,
    /// Size of the weights blob (shared by the buckets built into one store).
    pub weights_bytes: usize,
    /// Graph inputs, in order.
    pub inputs: Vec<Io>,
    /// Graph outputs, in order.
    pub outputs: Vec<Io>,
}

pub(crate) fn concrete(g: &Graph, v: ValueId) -> Result<(DType, Vec<usize>)> {
    let t = g.ty(v).map_err(|e| CodegenError::Plan(e.to_string()))?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or_else(|| {
        CodegenError::Plan(format!(
            "value `{}` has symbolic shape {t}: plans need a specialized graph",
            g.value(v).name
        ))
    })?;
    Ok((t.dtype, s))
}

/// A tensor's elements as bytes, row-major (bool as one byte).
pub fn tensor_bytes(t: &Tensor) -> Vec<u8> {
    fn raw<T: Copy>(a: &ndarray::ArrayD<T>) -> Vec<u8> {
        let a = a.as_standard_layout();
        let s = a.as_slice().unwrap_or(&[]);
        // SAFETY: T is a plain numeric type (or bool/half), so its bytes are its value.
        unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
            .to_vec()
    }
    gopt_ir::with_tensor!(t, a => raw(a))
}

/// The weights blob of one or more plans: each distinct constant once (the buckets of a
/// model share their weights), 256-byte aligned.
#[derive(Clone, Debug, Default)]
pub struct WeightStore {
    /// The bytes.
    pub blob: Vec<u8>,
    index: std::collections::HashMap<u64, Vec<(usize, usize)>>,
}

impl WeightStore {
    /// Adds `bytes` (or finds an identical entry) and returns its offset.
    pub fn add(&mut self, bytes: &[u8]) -> usize {
        let h = bytes.iter().fold(0xcbf29ce484222325u64, |h, &x| {
            (h ^ u64::from(x)).wrapping_mul(0x100000001b3)
        }) ^ bytes.len() as u64;
        if let Some(list) = self.index.get(&h) {
            for &(off, len) in list {
                if len == bytes.len() && self.blob[off..off + len] == *bytes {
                    return off;
                }
            }
        }
        let off = self.blob.len();
        self.blob.extend_from_slice(bytes);
        self.blob
            .resize(self.blob.len().div_ceil(ALIGN).max(1) * ALIGN, 0);
        self.index.entry(h).or_default().push((off, bytes.len()));
        off
    }
}

/// Builds the plan of `g` (a specialized, optimized graph) and its weights blob.
pub fn build(g: &Graph) -> Result<(CudaPlan, Vec<u8>)> {
    let mut store = WeightStore::default();
    let p = build_with(g, &mut store)?;
    Ok((p, store.blob))
}

/// Builds the plan of `g` with its constants in `store` (shared across buckets).
pub fn build_with(g: &Graph, store: &mut WeightStore) -> Result<CudaPlan> {
    let (emitted, others) = emit_kernels(g)?;
    let early = slice_candidates(g);
    let layout = memory::plan_with(g, &early)?;
    let mut emitted = emitted.into_iter().peekable();
    let mut kernels: Vec<Kernel> = Vec::new();
    let mut steps = Vec::new();
    let mut missing = Vec::new();
    // Values the plan adds (reordered weights, im2col scratch, converted biases) get
    // ids after the graph's.
    let mut next = g.values.len() as u32;
    let mut synth_weights: Vec<(u32, Tensor)> = Vec::new();
    let mut scratch: Vec<(u32, usize)> = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let mine: Vec<Kernel> =
            std::iter::from_fn(|| emitted.next_if(|k| k.node == n.name)).collect();
        let aliased = memory::is_view(n.op)
            && matches!((n.inputs.first(), n.outputs.first()),
                (Some(Some(i)), Some(o)) if layout.slots.get(i).is_some()
                    && layout.slots.get(i) == layout.slots.get(o));
        if aliased {
            continue;
        }
        if conv_gemm::applies(g, n) {
            let (wid, sid) = (next, next + 1);
            next += 2;
            let cg = conv_gemm::lower(g, n, &format!("k{i}"), &mut kernels, wid, sid)?;
            if let Some(k) = cg.im2col {
                kernels.push(k);
                steps.push(Step::Kernel(kernels.len() - 1));
                scratch.push((sid, cg.scratch_bytes));
            }
            steps.push(Step::Gemm(cg.gemm));
            synth_weights.push((wid, cg.weight));
            continue;
        }
        if gemm::handles(n.op) {
            let gm = gemm::lower(g, n, &format!("k{i}_epilogue"), &mut kernels)?;
            steps.push(Step::Gemm(gm));
            continue;
        }
        if mine.is_empty() {
            if others.iter().any(|(name, _)| *name == n.name) {
                missing.push((n.name.clone(), n.op.name().to_string()));
            }
            continue;
        }
        for k in mine {
            kernels.push(k);
            steps.push(Step::Kernel(kernels.len() - 1));
        }
    }
    fold_slices(g, &mut steps, &kernels, &early);
    if let [(node, op)] = missing.as_slice() {
        return Err(CodegenError::Unsupported {
            node: node.clone(),
            op: op.clone(),
            backend: "CUDA",
            what: "this op".into(),
        });
    }
    if !missing.is_empty() {
        let list: Vec<String> = missing
            .iter()
            .map(|(n, o)| format!("`{n}` ({o})"))
            .collect();
        return Err(CodegenError::Plan(format!(
            "the CUDA backend has no kernel for {} nodes: {}",
            missing.len(),
            list.join(", ")
        )));
    }
    // Places: arena slots for activations, the weights blob for constants.
    let mut places = BTreeMap::new();
    for (v, &slot) in &layout.slots {
        places.insert(v.0, Place::Arena(layout.buffers[slot].offset));
    }
    let mut add_weight = |places: &mut BTreeMap<u32, Place>, id: u32, t: &Tensor| {
        places.insert(id, Place::Weight(store.add(&tensor_bytes(t))));
    };
    let mut used: Vec<u32> = Vec::new();
    for s in &steps {
        match s {
            Step::Kernel(k) => used.extend(&kernels[*k].inputs),
            Step::Gemm(gm) => {
                used.extend([gm.a, gm.b]);
                used.extend(gm.bias.iter().chain(&gm.residual));
                if let Some(p) = gm.post {
                    used.extend(&kernels[p].inputs);
                }
            }
        }
    }
    used.extend(g.outputs.iter().map(|v| v.0));
    used.sort_unstable();
    used.dedup();
    for v in used {
        if let Some(t) = g.constant(ValueId(v)) {
            add_weight(&mut places, v, t);
        }
    }
    let mut value_bytes = BTreeMap::new();
    for (id, t) in &synth_weights {
        add_weight(&mut places, *id, t);
        value_bytes.insert(*id, t.len() * t.dtype().size());
    }
    // The im2col matrices live above the planned activations, one step each.
    let scratch_at = layout.peak_bytes.div_ceil(ALIGN) * ALIGN;
    let scratch_bytes = scratch.iter().map(|s| s.1).max().unwrap_or(0);
    for (id, bytes) in &scratch {
        places.insert(*id, Place::Arena(scratch_at));
        value_bytes.insert(*id, *bytes);
    }
    // cuBLASLt wants the bias in the output's dtype: constants are converted here.
    for s in &mut steps {
        if let Step::Gemm(gm) = s {
            if let (Some(b), Some(bd)) = (gm.bias, gm.bias_dtype) {
                if bd != gm.d_dtype {
                    let t = g.constant(ValueId(b)).ok_or_else(|| {
                        CodegenError::Plan(format!(
                            "GEMM `{}`: a {bd} bias that is not a constant cannot be fused into a {} output",
                            gm.node, gm.d_dtype
                        ))
                    })?;
                    let t = t.cast(gm.d_dtype);
                    value_bytes.insert(next, t.len() * t.dtype().size());
                    add_weight(&mut places, next, &t);
                    gm.bias = Some(next);
                    gm.bias_dtype = Some(gm.d_dtype);
                    next += 1;
                }
            }
        }
    }
    for v in g.inputs.iter().chain(&g.outputs) {
        if !places.contains_key(&v.0) {
            return Err(CodegenError::Plan(format!(
                "value `{}` has no place in the plan",
                g.value(*v).name
            )));
        }
    }
    let io = |vs: &[ValueId]| -> Result<Vec<Io>> {
        vs.iter()
            .map(|&v| {
                let (dtype, shape) = concrete(g, v)?;
                Ok(Io {
                    name: g.value(v).name.clone(),
                    value: v.0,
                    dtype,
                    shape,
                })
            })
            .collect()
    };
    for &v in places.keys() {
        if (v as usize) < g.values.len() {
            let (dt, s) = concrete(g, ValueId(v))?;
            let bytes = gopt_ir::budget::bytes(&s, dt.size())
                .and_then(|b| usize::try_from(b).ok())
                .ok_or_else(|| {
                    CodegenError::Plan(format!(
                        "value `{}` of shape {s:?}: its byte size overflows",
                        g.value(ValueId(v)).name
                    ))
                })?;
            value_bytes.insert(v, bytes);
        }
    }
    let plan = CudaPlan {
        version: VERSION,
        value_bytes,
        kernels,
        steps,
        places,
        arena_bytes: if scratch_bytes > 0 {
            scratch_at.checked_add(scratch_bytes).ok_or_else(|| {
                CodegenError::Plan("the arena's size overflows the address space".into())
            })?
        } else {
            layout.peak_bytes
        },
        unplanned_bytes: layout.total_bytes,
        weights_bytes: store.blob.len(),
        inputs: io(&g.inputs)?,
        outputs: io(&g.outputs)?,
    };
    Ok(plan)
}

/// The largest of the values `value_bytes` holds that `pooled` says live in the plan's
/// own memory (not the weights), described for a memory error: "the largest value
/// `y` (node `conv_t`) takes 4.00 GiB". Names come from `g` when the graph is at hand
/// (a loaded artifact has only value ids).
pub(crate) fn largest_value(
    value_bytes: &BTreeMap<u32, usize>,
    pooled: impl Fn(u32) -> bool,
    g: Option<&Graph>,
) -> String {
    let Some((&v, &bytes)) = value_bytes
        .iter()
        .filter(|(v, _)| pooled(**v))
        .max_by_key(|(_, b)| **b)
    else {
        return String::new();
    };
    let name = g
        .filter(|g| (v as usize) < g.values.len())
        .map(|g| {
            let id = ValueId(v);
            match g.nodes.iter().find(|n| n.outputs.contains(&id)) {
                Some(n) => format!(
                    "`{}` (node `{}`, {})",
                    g.value(id).name,
                    n.name,
                    n.op.name()
                ),
                None => format!("`{}`", g.value(id).name),
            }
        })
        .unwrap_or_else(|| format!("{v}"));
    format!(
        "; the largest value {name} takes {}",
        gopt_ir::limit::fmt_short(bytes as u128)
    )
}

impl CudaPlan {
    /// Device bytes the plan itself needs: its arena and the weights blob (the GEMM
    /// library's workspace comes on top at run time).
    pub fn device_bytes(&self) -> u128 {
        self.arena_bytes as u128 + self.weights_bytes as u128
    }

    /// Checks the plan's device bytes, plus `extra` bytes the caller adds (a
    /// workspace), against `limit`: an error saying `what` (the bucket) would allocate
    /// how much, the arena and weights, and the largest value (named from `g` when
    /// given).
    pub fn check_memory(
        &self,
        what: &str,
        g: Option<&Graph>,
        extra: u128,
        limit: &gopt_ir::limit::MemoryLimit,
    ) -> Result<()> {
        let short = |n: u128| gopt_ir::limit::fmt_short(n);
        limit
            .check(self.device_bytes() + extra, || {
                let pooled = |v: u32| matches!(self.places.get(&v), Some(Place::Arena(_)));
                (
                    format!("{what}: the CUDA plan"),
                    format!(
                        "on the GPU (arena {}, weights {}{}{})",
                        short(self.arena_bytes as u128),
                        short(self.weights_bytes as u128),
                        if extra > 0 {
                            format!(", workspace {}", short(extra))
                        } else {
                            String::new()
                        },
                        largest_value(&self.value_bytes, pooled, g)
                    ),
                )
            })
            .map_err(CodegenError::from)
    }

    /// Kernel launches and library calls per run.
    pub fn launches(&self) -> usize {
        self.steps
            .iter()
            .map(|s| match s {
                Step::Kernel(_) => 1,
                Step::Gemm(g) => 1 + usize::from(g.post.is_some()),
            })
            .sum()
    }
}
