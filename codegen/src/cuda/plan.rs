//! The CUDA execution plan of one specialized graph: the steps in order (generated
//! kernels and cuBLASLt GEMMs), where every value lives (an offset in the bucket's
//! arena, or in the weights blob uploaded once), and the graph's inputs and outputs.
//! It is plain data (serde), so `gopt compile` writes it into the artifact and the
//! runtime replays it without the graph. What each node becomes comes from
//! [`crate::lower`]; the arena from [`crate::memory::arena`].

use super::collective::Collective;
use super::conv_gemm;
use super::fold;
use super::gemm::{self, Gemm};
use super::{kernel, kernel_name, Kernel, BACKEND, VIEWS};
use crate::lower::{absorb, counted, lower, Fold, Lowered};
use crate::memory::{self, ALIGN};
use crate::plan::{
    concrete, count_kinds, kernel_kind, largest_value, refuse, Frame, WeightStore, GEMM_KIND,
};
use crate::{CodegenError, Result};
use gopt_ir::{Const, Graph, Tensor, ValueId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    /// An NCCL collective between the ranks of a tensor-parallel model.
    Collective(Collective),
}

/// The plan of one bucket.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CudaPlan {
    /// The version, inputs, outputs and value sizes every plan records.
    pub frame: Frame,
    /// Generated kernels (one module).
    pub kernels: Vec<Kernel>,
    /// Steps in execution order.
    pub steps: Vec<Step>,
    /// Where each value used by a step lives (value id → place).
    pub places: BTreeMap<u32, Place>,
    /// Arena size: the peak of the liveness-planned layout.
    pub arena_bytes: usize,
    /// Size of the weights blob (shared by the buckets built into one store).
    pub weights_bytes: usize,
    /// fp32 GEMMs compute in tf32 on tensor cores (`--precision tf32`).
    #[serde(default)]
    pub tf32: bool,
}

/// Builds the plan of `g` (a specialized, optimized graph) and its weights blob.
pub fn build(g: &gopt_ir::Verified) -> Result<(CudaPlan, Vec<u8>)> {
    let mut store = WeightStore::default();
    let p = build_with(g, &mut store)?;
    Ok((p, store.blob().to_vec()))
}

/// Choices of a plan that a compile makes for its workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Products with few rows and a constant `[N, K]` weight run as the generated
    /// GEMV kernel ([`super::gemv`]) instead of cuBLASLt: generation's decode steps,
    /// whose weights are stored that way.
    pub gemv: bool,
}

/// Builds the plan of `g` with its constants in `store` (shared across buckets).
pub fn build_with(g: &gopt_ir::Verified, store: &mut WeightStore) -> Result<CudaPlan> {
    build_with_options(g, store, PlanOptions::default())
}

/// [`build_with`] with the choices of `opts`.
pub fn build_with_options(
    g: &gopt_ir::Verified,
    store: &mut WeightStore,
    opts: PlanOptions,
) -> Result<CudaPlan> {
    let (g, counts) = counted::bound(g)?;
    let g = &*g;
    let mut lowered: Vec<Lowered> = g
        .nodes
        .iter()
        .map(|n| lower(g, n, VIEWS))
        .collect::<Result<_>>()?;
    fold::decide(g, &mut lowered, opts);
    let mut early = fold::slice_candidates(g, &lowered);
    early.extend(absorb::early_writes(g, VIEWS));
    for (n, low) in g.nodes.iter().zip(&lowered) {
        if let Lowered::Folded(Fold::PaddedRows { .. }) = low {
            for o in &n.outputs {
                early.remove(o);
            }
        }
    }
    // What folds into a GEMM: the GEMM's node → the Slice's output and the columns kept.
    let mut folded_into = std::collections::HashMap::new();
    for (n, low) in g.nodes.iter().zip(&lowered) {
        if let (Lowered::Folded(Fold::IntoGemm { into, columns }), Some(out)) =
            (low, n.outputs.first())
        {
            folded_into.insert(*into, (*out, *columns));
        }
    }
    let views = memory::aliasing(g, &lowered, VIEWS);
    let layout = memory::arena(g, &views, &early)?;
    let mut kernels: Vec<Kernel> = Vec::new();
    let mut steps = Vec::new();
    let mut missing = Vec::new();
    // Values the plan adds (reordered weights, im2col scratch, converted biases) get
    // ids after the graph's.
    let mut next = g.values.len() as u32;
    let mut synth_weights: Vec<(u32, Tensor)> = Vec::new();
    let mut scratch: Vec<(u32, usize)> = Vec::new();
    for (i, (n, low)) in g.nodes.iter().zip(&lowered).enumerate() {
        let done: Result<()> = match low {
            Lowered::View | Lowered::Window(_) | Lowered::Absorbed | Lowered::Folded(_) => Ok(()),
            Lowered::ConvGemm(s) => {
                let (wid, sid) = (next, next + 1);
                next += 2;
                conv_gemm::lower(s, &format!("k{i}"), &mut kernels, wid, sid).map(|cg| {
                    if let Some(k) = cg.im2col {
                        kernels.push(k);
                        steps.push(Step::Kernel(kernels.len() - 1));
                        scratch.push((sid, cg.scratch_bytes));
                    }
                    steps.push(Step::Gemm(cg.gemm));
                    synth_weights.push((wid, cg.weight));
                })
            }
            Lowered::PackedGemm(sp) => {
                let sid = next;
                next += 1;
                super::packed::lower(sp, &format!("k{i}"), sid).map(|p| {
                    for k in p.kernels {
                        kernels.push(k);
                        steps.push(Step::Kernel(kernels.len() - 1));
                    }
                    if let Some(gm) = p.gemm {
                        steps.push(Step::Gemm(gm));
                    }
                    if p.scratch_bytes > 0 {
                        scratch.push((sid, p.scratch_bytes));
                    }
                })
            }
            Lowered::Gemm(sp) if opts.gemv && super::gemv::applies(sp) => {
                super::gemv::emit(sp, &format!("k{i}_gemv")).map(|k| {
                    kernels.push(k);
                    steps.push(Step::Kernel(kernels.len() - 1));
                })
            }
            Lowered::Gemm(sp) => {
                gemm::lower(sp, &format!("k{i}_epilogue"), &mut kernels).map(|mut gm| {
                    if let Some(&(out, columns)) = folded_into.get(&i) {
                        fold::into_gemm(&mut gm, out, columns);
                    }
                    steps.push(Step::Gemm(gm))
                })
            }
            Lowered::Kernel(spec) => kernel(spec, &kernel_name(i, n)).map(|k| {
                kernels.push(k);
                steps.push(Step::Kernel(kernels.len() - 1));
            }),
            Lowered::Collective(c) => {
                steps.push(Step::Collective((**c).clone()));
                Ok(())
            }
            Lowered::Unsupported(why) => Err(crate::lower::support::unsupported(n, why)),
        };
        match done {
            Ok(()) => {}
            Err(e @ CodegenError::Unsupported { .. }) => missing.push(e),
            Err(e) => return Err(e),
        }
    }
    if let Some(e) = refuse(BACKEND, missing) {
        return Err(e);
    }
    // Places: arena slots for activations (a window starts inside its source's
    // bytes), the weights blob for constants.
    let within = window_offsets(g, &lowered);
    let mut places = BTreeMap::new();
    for (v, &slot) in &layout.slots {
        let at = within.get(v).copied().unwrap_or(0);
        places.insert(v.0, Place::Arena(layout.buffers[slot].offset + at));
    }
    let mut add_weight = |places: &mut BTreeMap<u32, Place>, id: u32, t: &Const| {
        places.insert(id, Place::Weight(store.add_const(t)));
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
            Step::Collective(c) => used.push(c.input),
        }
    }
    used.extend(g.outputs.iter().map(|v| v.0));
    used.sort_unstable();
    used.dedup();
    for v in used {
        if let Some(t) = g.konst(ValueId(v)) {
            add_weight(&mut places, v, t);
        }
    }
    let mut value_bytes = BTreeMap::new();
    for (id, t) in &synth_weights {
        add_weight(&mut places, *id, &Const::from(t.clone()));
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
                    let t = g.konst(ValueId(b)).ok_or_else(|| {
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
    let mut frame = Frame::of(g, value_bytes, layout.total_bytes, &counts)?;
    for (n, low) in g.nodes.iter().zip(&lowered) {
        if let Lowered::Folded(Fold::PaddedRows { pitch }) = low {
            for io in &mut frame.outputs {
                if n.outputs.iter().any(|o| o.0 == io.value) {
                    io.row_pitch = Some(*pitch);
                }
            }
        }
    }
    let plan = CudaPlan {
        frame,
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
        weights_bytes: store.len(),
        tf32: false,
    };
    Ok(plan)
}

/// How far into its root's bytes each value that lives in another's starts: windows
/// add their offset to their source's, views keep it.
fn window_offsets(g: &Graph, lowered: &[Lowered]) -> std::collections::HashMap<ValueId, usize> {
    let mut within = std::collections::HashMap::new();
    for (n, low) in g.nodes.iter().zip(lowered) {
        let add = match low {
            Lowered::Window(off) => *off,
            Lowered::View => 0,
            Lowered::Gemm(_)
            | Lowered::ConvGemm(_)
            | Lowered::PackedGemm(_)
            | Lowered::Kernel(_)
            | Lowered::Absorbed
            | Lowered::Folded(_)
            | Lowered::Collective(_)
            | Lowered::Unsupported(_) => continue,
        };
        if let (Some(Some(src)), Some(out)) = (n.inputs.first(), n.outputs.first()) {
            let base = within.get(src).copied().unwrap_or(0);
            if base + add > 0 {
                within.insert(*out, base + add);
            }
        }
    }
    within
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
                        largest_value(&self.frame.value_bytes, pooled, g)
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
                Step::Collective(_) => 1,
            })
            .sum()
    }

    /// Each step's kind, in plan order: a generated kernel's ([`kernel_kind`]: its op,
    /// or `im2col` for a convolution's), [`GEMM_KIND`] for a cuBLASLt matmul (its
    /// epilogue kernel included). A step naming no kernel of the plan is `unknown`.
    pub fn step_kinds(&self) -> Vec<&str> {
        self.steps
            .iter()
            .map(|s| match s {
                Step::Kernel(k) => self
                    .kernels
                    .get(*k)
                    .map_or("unknown", |k| kernel_kind(&k.name)),
                Step::Gemm(_) => GEMM_KIND,
                Step::Collective(c) => match c.kind {
                    super::collective::CollectiveKind::AllReduce => "allreduce",
                    super::collective::CollectiveKind::AllGather => "allgather",
                },
            })
            .collect()
    }

    /// Steps per kind ([`CudaPlan::step_kinds`]); the counts sum to the steps.
    pub fn kernel_kinds(&self) -> BTreeMap<String, usize> {
        count_kinds(self.step_kinds())
    }
}
