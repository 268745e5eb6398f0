//! The WGSL execution plan of one specialized graph: its shaders in order, a buffer for
//! every value and the graph's inputs and outputs, as plain data (serde) that `gopt
//! compile --target wgsl` writes into the artifact and the wgpu executor replays.
//!
//! Activations share a pool of buffers by liveness ([`crate::memory::pool`]), because
//! WGSL binds whole buffers or 256-byte-aligned ranges and one buffer per value would
//! waste what the CUDA arena saves. Constants go to the weights blob in their WGSL
//! storage layout ([`super::storage_type`]), each distinct tensor once across the
//! buckets. Views dispatch nothing: their output binds their input's buffer, which
//! stays alive until the last reader of either. A node without a shader is an error
//! naming it (and every other such node), never a skipped step.

use super::{storage_type, write, WgslKernel, BACKEND, VIEWS};
use crate::lower::{absorb, counted, lower, Lowered};
use crate::memory;
use crate::plan::{
    concrete, count_kinds, kernel_kind, largest_value, refuse, tensor_bytes, Frame, WeightStore,
};
use crate::{CodegenError, Result};
use gopt_ir::{DType, Graph, Tensor, ValueId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Slot {
    /// In pooled buffer `i` ([`WgslPlan::buffers`]).
    Buffer(usize),
    /// In the weights blob at this byte offset (its own buffer at run time).
    Weight(usize),
}

/// The WGSL plan of one bucket.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WgslPlan {
    /// The version, inputs, outputs and value sizes (in WGSL storage layout) every
    /// plan records.
    pub frame: Frame,
    /// The shaders, in dispatch order.
    pub kernels: Vec<WgslKernel>,
    /// Size in bytes of each pooled buffer.
    pub buffers: Vec<usize>,
    /// Where each value a kernel touches lives (value id → slot).
    pub slots: BTreeMap<u32, Slot>,
    /// Whether a shader needs the adapter's f16.
    pub f16: bool,
}

impl WgslPlan {
    /// Each shader's kind, in dispatch order ([`kernel_kind`]: its op; matrix products
    /// are shaders too, so they keep theirs: `fusedmatmul`, `matmul`, `gemm`).
    pub fn step_kinds(&self) -> Vec<&str> {
        self.kernels.iter().map(|k| kernel_kind(&k.name)).collect()
    }

    /// Shaders per kind ([`WgslPlan::step_kinds`]); the counts sum to the shaders.
    pub fn kernel_kinds(&self) -> BTreeMap<String, usize> {
        count_kinds(self.step_kinds())
    }

    /// Bytes of the pooled buffers together.
    pub fn pool_bytes(&self) -> usize {
        self.buffers.iter().sum()
    }

    /// Bytes of the weights this plan binds (each distinct constant once).
    pub fn weight_bytes(&self) -> u128 {
        let mut seen = std::collections::BTreeSet::new();
        self.slots
            .iter()
            .filter_map(|(v, slot)| match slot {
                Slot::Weight(at) if seen.insert(*at) => {
                    Some(self.frame.value_bytes.get(v).copied().unwrap_or(0) as u128)
                }
                Slot::Weight(_) | Slot::Buffer(_) => None,
            })
            .sum()
    }

    /// Device bytes the plan needs: its pooled buffers and its weights.
    pub fn device_bytes(&self) -> u128 {
        self.buffers.iter().map(|&b| b as u128).sum::<u128>() + self.weight_bytes()
    }

    /// Checks [`WgslPlan::device_bytes`] against `limit`: an error saying `what` (the
    /// bucket) would allocate how much, the pool and weights, and the largest value
    /// (named from `g` when given).
    pub fn check_memory(
        &self,
        what: &str,
        g: Option<&Graph>,
        limit: &gopt_ir::limit::MemoryLimit,
    ) -> Result<()> {
        self.check_memory_with(what, g, self.weight_bytes(), limit)
    }

    /// [`WgslPlan::check_memory`] counting `weights` bytes of weights (those not on
    /// the device yet, when a model's buckets share them).
    pub fn check_memory_with(
        &self,
        what: &str,
        g: Option<&Graph>,
        weights: u128,
        limit: &gopt_ir::limit::MemoryLimit,
    ) -> Result<()> {
        let short = gopt_ir::limit::fmt_short;
        let pool: u128 = self.buffers.iter().map(|&b| b as u128).sum();
        limit
            .check(pool + weights, || {
                let pooled = |v: u32| matches!(self.slots.get(&v), Some(Slot::Buffer(_)));
                (
                    format!("{what}: the WGSL plan"),
                    format!(
                        "on the device (pooled buffers {}, weights {}{})",
                        short(pool),
                        short(weights),
                        largest_value(&self.frame.value_bytes, pooled, g)
                    ),
                )
            })
            .map_err(CodegenError::from)
    }

    /// Every shader, one module after another (for `kernels.wgsl`).
    pub fn source(&self) -> String {
        let mut s = String::new();
        for k in &self.kernels {
            s += &format!(
                "// ===== {} (node `{}`), workgroups {:?}, bindings: inputs {:?} outputs {:?} =====\n",
                k.name, k.node, k.workgroups, k.inputs, k.outputs
            );
            s += &k.source;
            s.push('\n');
        }
        s
    }
}

/// A tensor's bytes in its WGSL storage layout (bool and 8/16-bit integers widened to
/// 32 bits; everything else as it is on the host).
pub fn storage_bytes(t: &Tensor) -> Vec<u8> {
    let raw = tensor_bytes(t);
    match t.dtype() {
        DType::Bool | DType::U8 => raw
            .iter()
            .flat_map(|&b| u32::from(b).to_le_bytes())
            .collect(),
        DType::I8 => raw
            .iter()
            .flat_map(|&b| i32::from(b as i8).to_le_bytes())
            .collect(),
        DType::U16 => raw
            .chunks_exact(2)
            .flat_map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])).to_le_bytes())
            .collect(),
        DType::I16 => raw
            .chunks_exact(2)
            .flat_map(|c| i32::from(i16::from_le_bytes([c[0], c[1]])).to_le_bytes())
            .collect(),
        // f64 as f32, rounded to nearest (WGSL has no f64).
        DType::F64 => raw
            .chunks_exact(8)
            .flat_map(|c| {
                let v = f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
                (v as f32).to_le_bytes()
            })
            .collect(),
        DType::F32
        | DType::F16
        | DType::BF16
        | DType::I32
        | DType::I64
        | DType::U32
        | DType::U64 => raw,
    }
}

/// Bytes of `v` in its WGSL storage layout.
fn bytes_of(g: &Graph, v: ValueId) -> Result<usize> {
    let (dt, s) = concrete(g, v)?;
    let (_, size) = storage_type(dt).ok_or_else(|| {
        let name = &g.value(v).name;
        // The node that makes it (or the value itself, for an input or constant).
        let node = g.nodes.iter().find(|n| n.outputs.contains(&v));
        CodegenError::Unsupported {
            node: node.map_or_else(|| name.clone(), |n| n.name.clone()),
            op: node.map_or("value", |n| n.op.name()).to_string(),
            backend: "WGSL",
            what: format!("{dt} data (value `{name}`: WGSL storage has no {dt})"),
        }
    })?;
    Ok(s.iter().product::<usize>() * size)
}

/// Builds the plan of `g` (specialized and optimized) with its constants in `store`.
pub fn build_with(g: &gopt_ir::Verified, store: &mut WeightStore) -> Result<WgslPlan> {
    let (g, counts) = counted::bound(g)?;
    let g = &*g;
    let lowered: Vec<Lowered> = g
        .nodes
        .iter()
        .map(|n| lower(g, n, VIEWS))
        .collect::<Result<_>>()?;
    let mut kernels = Vec::new();
    let mut missing = Vec::new();
    for (i, (n, low)) in g.nodes.iter().zip(&lowered).enumerate() {
        match write(g, i, n, low) {
            Ok(k) => kernels.extend(k),
            Err(e @ CodegenError::Unsupported { .. }) => missing.push(e),
            Err(e) => return Err(e),
        }
    }
    // A node without a shader makes the plan unsupported (never a skipped step): the
    // error names the first such node and lists the others.
    if let Some(e) = refuse(BACKEND, missing) {
        return Err(e);
    }
    let views = memory::aliasing(g, &lowered, super::VIEWS);
    let lt = memory::lifetimes(g, &views, &absorb::early_writes(g, VIEWS));
    let pool = memory::pool(g, &lt, |v| bytes_of(g, v))?;
    let mut slots: BTreeMap<u32, Slot> = BTreeMap::new();
    let mut value_bytes: BTreeMap<u32, usize> = BTreeMap::new();
    let touched = kernels
        .iter()
        .flat_map(|k| k.inputs.iter().chain(&k.outputs).copied())
        .chain(g.inputs.iter().chain(&g.outputs).map(|v| v.0));
    for v in touched {
        if slots.contains_key(&v) {
            continue;
        }
        let id = ValueId(v);
        let slot = if let Some(k) = g.konst(lt.root(id)) {
            // Types WGSL stores as they are go in as shared handles (nothing copied);
            // 8- and 16-bit integers and bool are widened to 32 bits, f64 narrowed to f32.
            match k.dtype() {
                DType::Bool | DType::U8 | DType::I8 | DType::U16 | DType::I16 | DType::F64 => {
                    Slot::Weight(store.add(&storage_bytes(&k.decoded())))
                }
                DType::F32
                | DType::F16
                | DType::BF16
                | DType::I32
                | DType::I64
                | DType::U32
                | DType::U64 => Slot::Weight(store.add_const(k)),
            }
        } else {
            let b = pool.slots.get(&id).ok_or_else(|| {
                CodegenError::Plan(format!(
                    "value `{}` is read but no step writes it",
                    g.value(id).name
                ))
            })?;
            Slot::Buffer(*b)
        };
        slots.insert(v, slot);
        value_bytes.insert(v, bytes_of(g, id)?);
    }
    let f16 = kernels.iter().any(|k| k.source.contains("enable f16;"));
    Ok(WgslPlan {
        frame: Frame::of(g, value_bytes, pool.unplanned, &counts)?,
        kernels,
        buffers: pool.buffers,
        slots,
        f16,
    })
}

/// [`build_with`] and its own weights blob.
pub fn build(g: &gopt_ir::Verified) -> Result<(WgslPlan, Vec<u8>)> {
    let mut store = WeightStore::default();
    let p = build_with(g, &mut store)?;
    Ok((p, store.blob().to_vec()))
}
