//! What both backends' plans share: the graph's inputs and outputs ([`Io`]), the
//! weights store that holds each distinct constant once across a model's buckets
//! ([`WeightStore`]), the GPU index check and its error word ([`IndexCheck`]), the
//! refusal that lists every node a backend has no kernel for ([`refuse`]), and the kind
//! of each step for reports ([`kernel_kind`]). Each backend lays its steps and memory
//! out from the same lowering (`crate::lower`) and the same value lifetimes
//! (`crate::memory`): `crate::cuda::plan` in one arena, `crate::wgsl::plan` in a pool
//! of buffers.

use crate::memory::ALIGN;
use crate::{CodegenError, Result};
use bytes::Bytes;
use gopt_ir::{Const, DType, Graph, Tensor, ValueId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Artifact plan format version (bumped when a field of a plan changes meaning; 3:
/// outputs whose size the device counts, [`Count`]).
pub const VERSION: u32 = 3;

/// What a writer's `emit_kernels` gives: the kernels it wrote, in node order, and the
/// nodes it has none for (name, why).
pub type Emitted<K> = (Vec<K>, Vec<(String, String)>);

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
    /// Elements between consecutive rows (last-dim runs) on the device, when an output
    /// stays in the wider rows its producer wrote (a GEMM padded to aligned columns):
    /// the copy back keeps the first `shape.last()` of each. `None`: contiguous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_pitch: Option<usize>,
    /// An output whose size depends on the data (`crate::lower::counted`): `shape` is
    /// its bound, and the run keeps the count its kernel wrote along one axis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<Count>,
}

/// Where the size of an output that depends on the data is read: the kernel that
/// writes the output stores the output's length along `axis` in word `slot` of the
/// run's status buffer (word 0 is the index checks' error word). The buffer is read
/// back with the outputs, so the count costs no extra synchronization; the output is
/// laid out at its bound and the first `count` entries along the axis are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    /// The axis the count sizes.
    pub axis: usize,
    /// The status word holding it (1 + the output's position).
    pub slot: u32,
}

/// What a plan does for output `io` whose size depends on the data, for reports and
/// `--explain` (`None` for a static output).
pub fn describe_count(io: &Io) -> Option<String> {
    let c = io.count?;
    Some(format!(
        "output `{}`: its length along axis {} depends on the data; laid out for at most {} \
         and cut to the count the kernel writes, read back with the outputs (a 4-byte \
         device-to-host read in the copy the run makes anyway; no extra synchronization)",
        io.name,
        c.axis,
        io.shape.get(c.axis).copied().unwrap_or(0)
    ))
}

/// Words of the status buffer a plan with `outputs` needs: the error word and one per
/// counted output.
pub fn status_words(outputs: &[Io]) -> usize {
    outputs
        .iter()
        .filter_map(|o| o.count.map(|c| c.slot as usize + 1))
        .max()
        .unwrap_or(1)
}

/// Whether a kernel takes the status buffer as its last parameter (binding): when it
/// checks indices, or when it writes an output of `frame` whose size it counts.
pub fn takes_status(index_check: bool, outputs: &[u32], frame: &Frame) -> bool {
    index_check
        || frame
            .outputs
            .iter()
            .any(|o| o.count.is_some() && outputs.contains(&o.value))
}

/// Output `io` read back at its bound as `t`, cut to the count `words` hold along its
/// axis (a count above the bound is a damaged plan or kernel: an error).
pub fn keep_counted(io: &Io, t: Tensor, words: &[u32]) -> std::result::Result<Tensor, String> {
    let Some(c) = io.count else {
        return Ok(t);
    };
    let n = words.get(c.slot as usize).copied().ok_or_else(|| {
        format!(
            "output `{}`: no status word {} (a damaged plan)",
            io.name, c.slot
        )
    })? as usize;
    let bound = io.shape.get(c.axis).copied().unwrap_or(0);
    if n > bound {
        return Err(format!(
            "output `{}`: the kernel counted {n} entries along axis {}, above the bound {bound} \
             the plan laid out (a gopt bug)",
            io.name, c.axis
        ));
    }
    Ok(gopt_ir::map_tensor!(&t, a => a
        .slice_axis(ndarray::Axis(c.axis), ndarray::Slice::from(0..n))
        .as_standard_layout()
        .into_owned()))
}

pub(crate) fn concrete(g: &Graph, v: ValueId) -> Result<(DType, Vec<usize>)> {
    let t = g.ty(v).map_err(|e| CodegenError::Plan(e.to_string()))?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or_else(|| CodegenError::dynamic_shape(g, v, t))?;
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

/// The weights of one or more plans: each distinct constant once (the buckets of a
/// model share their weights), 256-byte aligned, at offsets the plans name. Entries
/// are shared constant handles, not bytes: a compile that only writes an artifact
/// streams each weight once into `weights.bin` ([`WeightStore::write`]), converting a
/// lazily cast weight on the way, and never holds the blob. A run in the same process
/// builds the blob once ([`WeightStore::blob`]); a loaded artifact maps its file.
#[derive(Clone, Debug, Default)]
pub struct WeightStore {
    entries: Vec<(usize, Const)>,
    len: usize,
    /// Offsets of entries by shared handle (the same weight read by two buckets).
    by_addr: std::collections::HashMap<usize, usize>,
    /// Entries of small constants by content hash (equal small constants share).
    by_content: std::collections::HashMap<u64, Vec<usize>>,
    /// Offsets of large constants by [`Const::recipe`] (each bucket's bf16 view of one
    /// weight is one entry).
    by_recipe: std::collections::HashMap<Vec<u64>, usize>,
    blob: std::sync::OnceLock<Bytes>,
}

/// Small constants are de-duplicated by content; larger ones by handle only (hashing
/// every weight would read them all).
const CONTENT_DEDUP_BYTES: usize = 64 << 10;

impl WeightStore {
    /// A store over the bytes of a saved `weights.bin` (entries are not known: only
    /// [`WeightStore::blob`] and [`WeightStore::len`] are meaningful).
    pub fn from_blob(blob: Bytes) -> WeightStore {
        WeightStore {
            len: blob.len(),
            blob: std::sync::OnceLock::from(blob),
            ..Default::default()
        }
    }

    /// Adds `bytes` (or finds an identical small entry) and returns its offset.
    pub fn add(&mut self, bytes: &[u8]) -> usize {
        let k = Const::from_le_bytes(DType::U8, vec![bytes.len()], Bytes::copy_from_slice(bytes))
            .expect("a byte vector's length matches its shape");
        self.add_const(&k)
    }

    /// Adds a constant (or finds it) and returns its offset. Nothing is copied or
    /// decoded for a large constant: it is found by handle, else by recipe (the same
    /// view of the same weight, made by another bucket).
    pub fn add_const(&mut self, k: &Const) -> usize {
        if let Some(&off) = self.by_addr.get(&k.addr()) {
            return off;
        }
        let small = k.byte_size() <= CONTENT_DEDUP_BYTES;
        let recipe = (!small).then(|| k.recipe());
        // A handle found by recipe or content is not kept: its address is not recorded,
        // since it may be freed and reused by another constant.
        if let Some(&off) = recipe.as_ref().and_then(|r| self.by_recipe.get(r)) {
            return off;
        }
        let key = small.then(|| {
            let bytes = k.to_le_bytes();
            let h = bytes.iter().fold(0xcbf29ce484222325u64, |h, &x| {
                (h ^ u64::from(x)).wrapping_mul(0x100000001b3)
            }) ^ bytes.len() as u64;
            (h, bytes)
        });
        if let Some((h, bytes)) = &key {
            for &e in self.by_content.get(h).into_iter().flatten() {
                let (off, other) = &self.entries[e];
                if other.byte_size() == bytes.len() && other.to_le_bytes() == *bytes {
                    return *off;
                }
            }
        }
        let off = self.len;
        if let Some((h, _)) = key {
            self.by_content
                .entry(h)
                .or_default()
                .push(self.entries.len());
        }
        self.entries.push((off, k.clone()));
        self.by_addr.insert(k.addr(), off);
        if let Some(r) = recipe {
            self.by_recipe.insert(r, off);
        }
        self.len = off + k.byte_size().div_ceil(ALIGN).max(1) * ALIGN;
        self.blob = std::sync::OnceLock::new();
        off
    }

    /// Bytes of the blob.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Streams the blob to `w`, one weight at a time (zero padding between entries).
    pub fn write(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        if let Some(b) = self.blob.get() {
            return w.write_all(b);
        }
        let mut at = 0;
        let zeros = [0u8; ALIGN];
        for (off, k) in &self.entries {
            while at < *off {
                let n = (*off - at).min(ALIGN);
                w.write_all(&zeros[..n])?;
                at += n;
            }
            k.write_le(&mut |b| w.write_all(b))?;
            at += k.byte_size();
        }
        while at < self.len {
            let n = (self.len - at).min(ALIGN);
            w.write_all(&zeros[..n])?;
            at += n;
        }
        Ok(())
    }

    /// The whole blob, built on first use (for an upload in this process) and kept.
    /// Entries are disjoint ranges, so they are computed in parallel: converting a
    /// 1.1B-parameter model's weights (cast to bf16, transposed) is seconds of work on
    /// one core.
    pub fn blob(&self) -> &[u8] {
        use rayon::prelude::*;
        self.blob.get_or_init(|| {
            let mut v = vec![0u8; self.len];
            let mut pieces: Vec<(&Const, &mut [u8])> = Vec::with_capacity(self.entries.len());
            let mut rest: &mut [u8] = &mut v;
            let mut at = 0;
            for (off, k) in &self.entries {
                let (_, tail) = std::mem::take(&mut rest).split_at_mut(off - at);
                let (piece, tail) = tail.split_at_mut(k.byte_size());
                pieces.push((k, piece));
                rest = tail;
                at = off + k.byte_size();
            }
            pieces.into_par_iter().for_each(|(k, piece)| {
                let mut filled = 0;
                let _ = k.write_le::<std::convert::Infallible>(&mut |b| {
                    piece[filled..filled + b.len()].copy_from_slice(b);
                    filled += b.len();
                    Ok(())
                });
            });
            Bytes::from(v)
        })
    }
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

/// The error for the nodes a backend has no kernel for (each an
/// [`CodegenError::Unsupported`] or a lowering's reason): the first node's, naming
/// how many more there are and which, so one compile lists them all. `None` when
/// there are none.
pub fn refuse(backend: &'static str, missing: Vec<CodegenError>) -> Option<CodegenError> {
    let mut it = missing.into_iter().map(|e| e.for_backend(backend));
    let first = it.next()?;
    let more: Vec<String> = it
        .map(|e| match e {
            CodegenError::Unsupported { node, what, .. } => format!("`{node}` ({what})"),
            e => e.to_string(),
        })
        .collect();
    if more.is_empty() {
        return Some(first);
    }
    Some(match first {
        CodegenError::Unsupported {
            node,
            op,
            backend,
            what,
        } => CodegenError::Unsupported {
            node,
            op,
            backend,
            what: format!("{what}; {} more nodes: {}", more.len(), more.join("; ")),
        },
        e => e,
    })
}

/// What every backend's plan records besides its steps and memory: the format version,
/// the graph's inputs and outputs, each placed value's bytes (in the backend's storage
/// layout) and what one buffer per value would take.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Frame {
    /// [`VERSION`].
    pub version: u32,
    /// Graph inputs, in order.
    pub inputs: Vec<Io>,
    /// Graph outputs, in order.
    pub outputs: Vec<Io>,
    /// Each placed value's size in bytes.
    pub value_bytes: BTreeMap<u32, usize>,
    /// What one buffer per value would take.
    pub unplanned_bytes: usize,
}

impl Frame {
    /// The frame of a plan of `g`.
    pub fn of(
        g: &Graph,
        value_bytes: BTreeMap<u32, usize>,
        unplanned_bytes: usize,
        counts: &BTreeMap<ValueId, Count>,
    ) -> Result<Frame> {
        let io = |vs: &[ValueId]| -> Result<Vec<Io>> {
            vs.iter()
                .map(|&v| {
                    let (dtype, shape) = concrete(g, v)?;
                    Ok(Io {
                        name: g.value(v).name.clone(),
                        value: v.0,
                        dtype,
                        shape,
                        row_pitch: None,
                        count: counts.get(&v).copied(),
                    })
                })
                .collect()
        };
        Ok(Frame {
            version: VERSION,
            inputs: io(&g.inputs)?,
            outputs: io(&g.outputs)?,
            value_bytes,
            unplanned_bytes,
        })
    }
}

/// The kind a cuBLASLt matmul step counts as (its epilogue kernel included).
pub const GEMM_KIND: &str = "gemm";

/// The kind of a kernel named `k{i}_{kind}`, as both backends name them: the op
/// (`transpose`, `layernormalization`, `attention`) or the part of one (`im2col`).
/// A name without `_` is its own kind.
pub fn kernel_kind(name: &str) -> &str {
    name.split_once('_').map_or(name, |(_, kind)| kind)
}

/// How many of each kind `kinds` holds (a plan's steps per kind, for reports).
pub fn count_kinds<'a>(kinds: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for k in kinds {
        *counts.entry(k.to_string()).or_default() += 1;
    }
    counts
}
