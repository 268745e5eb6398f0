//! The WGSL execution plan of one specialized graph: its shaders in order, a buffer for
//! every value and the graph's inputs and outputs, as plain data (serde) that `gopt
//! compile --target wgsl` writes into the artifact and the wgpu executor replays.
//!
//! Activations share a pool of buffers by liveness (greedy, smallest free buffer that
//! fits, grown when none does), because WGSL binds whole buffers or 256-byte-aligned
//! ranges and one buffer per value would waste what the CUDA arena saves. Constants go
//! to the weights blob in their WGSL storage layout ([`super::storage_type`]), each
//! distinct tensor once across the buckets. Views (Reshape, Flatten, Squeeze,
//! Unsqueeze, Identity) dispatch nothing: their output binds their input's buffer, which
//! stays alive until the last reader of either. A node without a shader is an error
//! naming it, never a skipped step.

use super::{emit_kernels, storage_type, WgslKernel};
use crate::plan::{concrete, tensor_bytes, Io, WeightStore};
use crate::{CodegenError, Result};
use gopt_ir::{DType, Graph, Tensor, ValueId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Plan format version (bumped when a field changes meaning).
pub const VERSION: u32 = 1;

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
    /// [`VERSION`].
    pub version: u32,
    /// The shaders, in dispatch order.
    pub kernels: Vec<WgslKernel>,
    /// Size in bytes of each pooled buffer.
    pub buffers: Vec<usize>,
    /// Where each value a kernel touches lives (value id → slot).
    pub slots: BTreeMap<u32, Slot>,
    /// Each slotted value's size in bytes, in its storage layout.
    pub value_bytes: BTreeMap<u32, usize>,
    /// What one buffer per value would take.
    pub unplanned_bytes: usize,
    /// Whether a shader needs the adapter's f16.
    pub f16: bool,
    /// Graph inputs, in order.
    pub inputs: Vec<Io>,
    /// Graph outputs, in order.
    pub outputs: Vec<Io>,
}

impl WgslPlan {
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
                    Some(self.value_bytes.get(v).copied().unwrap_or(0) as u128)
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
                        crate::plan::largest_value(&self.value_bytes, pooled, g)
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
        _ => raw,
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
pub fn build_with(g: &Graph, store: &mut WeightStore) -> Result<WgslPlan> {
    let (mut kernels, missing) = emit_kernels(g)?;
    // A node without a shader makes the plan unsupported (never a skipped step): the
    // error names the first such node and lists the others.
    if let Some((node, why)) = missing.first() {
        let op = g
            .nodes
            .iter()
            .find(|n| n.name == *node)
            .map(|n| n.op.name().to_string())
            .unwrap_or_default();
        let what = why
            .split_once(": the WGSL backend has no kernel for ")
            .map(|(_, w)| w.to_string())
            .unwrap_or_else(|| "this op".into());
        let more: Vec<String> = missing[1..]
            .iter()
            .map(|(n, w)| format!("`{n}` ({w})"))
            .collect();
        return Err(CodegenError::Unsupported {
            node: node.clone(),
            op,
            backend: "WGSL",
            what: if more.is_empty() {
                what
            } else {
                format!("{what}; {} more nodes: {}", more.len(), more.join("; "))
            },
        });
    }
    let mut slots: BTreeMap<u32, Slot> = BTreeMap::new();
    let mut value_bytes: BTreeMap<u32, usize> = BTreeMap::new();
    let mut buffers: Vec<usize> = Vec::new();
    let mut unplanned = 0usize;
    let pinned: Vec<u32> = g.inputs.iter().chain(&g.outputs).map(|v| v.0).collect();
    // Graph inputs and outputs own their buffers for the whole run.
    let fresh = |buffers: &mut Vec<usize>, n: usize| {
        buffers.push(n.max(4));
        buffers.len() - 1
    };
    for &v in &pinned {
        if slots.contains_key(&v) {
            continue;
        }
        if let Some(t) = g.constant(ValueId(v)) {
            slots.insert(v, Slot::Weight(store.add(&storage_bytes(t))));
        } else {
            let n = bytes_of(g, ValueId(v))?;
            slots.insert(v, Slot::Buffer(fresh(&mut buffers, n)));
        }
        value_bytes.insert(v, bytes_of(g, ValueId(v))?);
    }
    // Views alias their input (same bytes, same storage layout): the kernel goes, and
    // the output is an alias resolved to the value that owns the buffer.
    let mut alias: HashMap<u32, u32> = HashMap::new();
    let view_nodes: HashMap<&str, ValueId> = g
        .nodes
        .iter()
        .filter(|n| crate::memory::is_view(n.op))
        .filter_map(|n| Some((n.name.as_str(), n.inputs.first().copied().flatten()?)))
        .collect();
    kernels.retain(|k| {
        let (Some(&src), [out]) = (view_nodes.get(k.node.as_str()), k.outputs.as_slice()) else {
            return true;
        };
        if pinned.contains(out) || k.inputs.len() != 1 {
            return true;
        }
        let root = *alias.get(&src.0).unwrap_or(&src.0);
        alias.insert(*out, root);
        false
    });
    let root = |v: u32| *alias.get(&v).unwrap_or(&v);
    // Last kernel touching each buffer owner (through any of its aliases).
    let mut last: HashMap<u32, usize> = HashMap::new();
    for (i, k) in kernels.iter().enumerate() {
        for &v in k.inputs.iter().chain(&k.outputs) {
            last.insert(root(v), i);
        }
    }
    let mut free: Vec<usize> = Vec::new();
    let mut owner: HashMap<usize, u32> = HashMap::new();
    for (i, k) in kernels.iter().enumerate() {
        for &v in &k.inputs {
            if slots.contains_key(&v) {
                continue;
            }
            if alias.contains_key(&v) {
                let r = root(v);
                let slot = match slots.get(&r) {
                    Some(s) => *s,
                    None => {
                        let t = g.constant(ValueId(r)).ok_or_else(|| {
                            CodegenError::Plan(format!(
                                "kernel {} (node `{}`) reads a view of `{}` before any kernel writes it",
                                k.name,
                                k.node,
                                g.value(ValueId(r)).name
                            ))
                        })?;
                        let s = Slot::Weight(store.add(&storage_bytes(t)));
                        slots.insert(r, s);
                        value_bytes.insert(r, bytes_of(g, ValueId(r))?);
                        s
                    }
                };
                slots.insert(v, slot);
                value_bytes.insert(v, bytes_of(g, ValueId(v))?);
                continue;
            }
            let t = g.constant(ValueId(v)).ok_or_else(|| {
                CodegenError::Plan(format!(
                    "kernel {} (node `{}`) reads `{}` before any kernel writes it",
                    k.name,
                    k.node,
                    g.value(ValueId(v)).name
                ))
            })?;
            slots.insert(v, Slot::Weight(store.add(&storage_bytes(t))));
            value_bytes.insert(v, bytes_of(g, ValueId(v))?);
        }
        for &v in &k.outputs {
            if slots.contains_key(&v) {
                continue;
            }
            let n = bytes_of(g, ValueId(v))?;
            unplanned += n;
            // The smallest free buffer that fits, else the largest free one grown.
            let pick = free
                .iter()
                .enumerate()
                .filter(|(_, &b)| buffers[b] >= n)
                .min_by_key(|(_, &b)| buffers[b])
                .or_else(|| free.iter().enumerate().max_by_key(|(_, &b)| buffers[b]))
                .map(|(j, _)| j);
            let b = match pick {
                Some(j) => {
                    let b = free.swap_remove(j);
                    buffers[b] = buffers[b].max(n);
                    b
                }
                None => fresh(&mut buffers, n),
            };
            owner.insert(b, v);
            slots.insert(v, Slot::Buffer(b));
            value_bytes.insert(v, n);
        }
        // Values read for the last time here give their buffer back (after the
        // kernel: an output never shares a buffer with an input of its kernel).
        for &v in k.inputs.iter().chain(&k.outputs) {
            let v = root(v);
            if last.get(&v) == Some(&i) && !pinned.contains(&v) {
                if let Some(Slot::Buffer(b)) = slots.get(&v) {
                    if owner.get(b) == Some(&v) {
                        owner.remove(b);
                        free.push(*b);
                    }
                }
            }
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
    let f16 = kernels.iter().any(|k| k.source.contains("enable f16;"));
    Ok(WgslPlan {
        version: VERSION,
        kernels,
        buffers,
        slots,
        value_bytes,
        unplanned_bytes: unplanned,
        f16,
        inputs: io(&g.inputs)?,
        outputs: io(&g.outputs)?,
    })
}

/// [`build_with`] and its own weights blob.
pub fn build(g: &Graph) -> Result<(WgslPlan, Vec<u8>)> {
    let mut store = WeightStore::default();
    let p = build_with(g, &mut store)?;
    Ok((p, store.blob))
}
