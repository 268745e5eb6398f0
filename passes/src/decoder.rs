//! Generation: a causal-LM decoder exported with a KV cache, turned into the two graphs
//! autoregressive generation runs — a *prefill* step over the prompt and a *decode*
//! step per new token — with the cache kept in place between steps.
//!
//! Exporters (transformers through optimum, `torch.onnx.export` of a `DynamicCache`
//! wrapper) write one graph for both: inputs `input_ids [batch, seq]`,
//! `attention_mask [batch, past + seq]`, `position_ids [batch, seq]` and per layer
//! `past_key_values.N.key/value [batch, kv_heads, past, head]`; outputs `logits` and
//! `present.N.key/value`, each the `Concat(past, new)` of its past along the sequence
//! axis. Run as written, every step copies the whole cache into a new tensor. [`detect`]
//! recognizes that interface from the graph's structure (which input is read by which
//! concatenation that is which output), and [`Decoder::lower`] rewrites a bucket's
//! specialized graph:
//!
//! - **prefill** (`past` bound to 0): the concatenation is the new keys themselves; the
//!   present outputs are the new keys and values in the cache's dtype, which the runtime
//!   writes into the cache once;
//! - **decode** (`seq` = 1, `past` bound to `context - 1`): each past input becomes the
//!   cache itself, `[batch, kv_heads, context, head]`, and `Concat(past, new)` becomes
//!   `TensorScatter(cache, new, cache_position)`: one row written per step at the
//!   position the runtime gives (input `cache_position`, one per batch row), read in
//!   place by attention. The backends run a `TensorScatter` whose cache is a graph
//!   input read by nothing else in place (its output aliases the input's memory), so
//!   the cache lives on the device across steps and a step moves only the new rows.
//!
//! The decode rewrite changes the order of the keys attention sees: the cache holds the
//! step's key at its position, where the exported graph appends it after the past.
//! Attention is the same function of any order of its keys as long as the mask
//! follows them, so the contract of a decode bucket is that `attention_mask` is given
//! in cache order (1 for the slots written so far and the one being written, 0 for the
//! rest); the positions come from `position_ids`, never from where a key sits. Slots
//! not yet written are masked, which is why a decoder without an `attention_mask` input
//! is refused. The opset-24 form (the cache already a fixed-size input updated by
//! `TensorScatter` at `write_indices`) needs no rewrite: its scatter runs in place and
//! the runtime feeds `write_indices` (and `nonpad_kv_seqlen`) from the step.

use crate::PassError;
use gopt_ir::ops::{AttentionOp, ElementwiseOp, ShapeOp};
use gopt_ir::{Attr, Attrs, Bindings, DType, Dim, Graph, Op, TensorType, ValueId, Verified};
use std::collections::BTreeMap;

type Result<T> = std::result::Result<T, PassError>;

/// The name of the decode step's extra input: where each batch row's new key goes.
pub const CACHE_POSITION: &str = "cache_position";

/// The symbol a decode bucket binds to its cache length (keys per row).
pub const CONTEXT: &str = "context";

/// How the exported graph keeps its cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `present = Concat(past, new)`: the cache grows by `seq` each step.
    Concat,
    /// `present = TensorScatter(past, new, write_indices)`: a fixed-size cache (opset 24).
    Scatter,
}

/// One cache tensor: a past input and the present output it becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache {
    /// The past input's name (`past_key_values.0.key`).
    pub past: String,
    /// The present output's name (`present.0.key`).
    pub present: String,
    /// The sequence axis.
    pub axis: usize,
    /// The dims other than the batch and the sequence (`[kv_heads, head]`), in order.
    pub inner: Vec<u64>,
    /// The dtype the model declares.
    pub dtype: DType,
}

/// A decoder's generation interface, read from its graph by [`detect`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoder {
    /// How the cache is kept.
    pub form: Form,
    /// The token ids input (`[batch, seq]`, integer).
    pub input_ids: String,
    /// The attention mask input (`[batch, past + seq]`); absent only in the scatter form.
    pub attention_mask: Option<String>,
    /// The position ids input (`[batch, seq]`), when the model takes one.
    pub position_ids: Option<String>,
    /// Scatter form: the input giving each row's write position.
    pub write_indices: Option<String>,
    /// Scatter form: the input giving each row's count of valid keys, if any.
    pub nonpad: Option<String>,
    /// The logits output (`[batch, seq, vocab]`).
    pub logits: String,
    /// Vocabulary size (the logits' last dim).
    pub vocab: u64,
    /// The caches, in input order.
    pub caches: Vec<Cache>,
    /// The batch symbol.
    pub batch: String,
    /// The sequence symbol (new tokens per step).
    pub seq: String,
    /// Concat form: the past-length symbol.
    pub past: Option<String>,
    /// Concat form: the mask's length symbol when it is a name of its own rather than
    /// an expression over `past` and `seq` (optimum writes
    /// `"past_sequence_length + sequence_length"` as one name).
    pub total: Option<String>,
    /// Scatter form: the cache's length (fixed by the model).
    pub capacity: Option<u64>,
    /// Outputs other than the logits and the presents (not computed while generating).
    pub dropped: Vec<String>,
}

/// Which step a bucket runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    /// The prompt: `seq` tokens, no past.
    Prefill {
        /// Batch rows.
        batch: u64,
        /// Prompt length (padded).
        seq: u64,
    },
    /// One new token per row against a cache of `context` slots.
    Decode {
        /// Batch rows.
        batch: u64,
        /// Cache slots per row.
        context: u64,
    },
}

impl Step {
    /// `prefill batch=1 seq=128`, `decode batch=1 context=256`.
    pub fn name(self) -> String {
        match self {
            Step::Prefill { batch, seq } => format!("prefill batch={batch} seq={seq}"),
            Step::Decode { batch, context } => format!("decode batch={batch} context={context}"),
        }
    }

    /// Batch rows.
    pub fn batch(self) -> u64 {
        match self {
            Step::Prefill { batch, .. } | Step::Decode { batch, .. } => batch,
        }
    }
}

fn refuse(msg: impl Into<String>) -> PassError {
    PassError::Option(format!(
        "not a decoder gopt can generate with: {}",
        msg.into()
    ))
}

fn sym_name(d: &Dim) -> Option<String> {
    match d {
        Dim::Sym(s) => Some(s.to_string()),
        Dim::Known(_) | Dim::Add(..) | Dim::Mul(..) | Dim::Div(..) => None,
    }
}

fn ty(g: &Graph, v: ValueId) -> Result<&TensorType> {
    g.ty(v).map_err(PassError::from)
}

/// The node producing `v`, if any.
fn producer(g: &Graph, v: ValueId) -> Option<usize> {
    g.nodes.iter().position(|n| n.outputs.contains(&v))
}

/// Readers of `v`: (node index, input slot).
fn readers(g: &Graph, v: ValueId) -> Vec<(usize, usize)> {
    let mut r = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for (k, x) in n.inputs.iter().enumerate() {
            if *x == Some(v) {
                r.push((i, k));
            }
        }
    }
    r
}

fn axis_of(g: &Graph, node: usize, rank: usize) -> Result<usize> {
    let n = &g.nodes[node];
    let default = if n.op == Op::Attention(AttentionOp::TensorScatter) {
        -2
    } else {
        0
    };
    let a = n.attrs.int_or("axis", default).map_err(PassError::from)?;
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(refuse(format!(
            "node `{}` has axis {a} for rank {rank}",
            n.name
        )));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// Reads the generation interface of `g` (the imported, unspecialized graph): the cache
/// pairs from structure, the other roles by name (`input_ids`, `attention_mask`,
/// `position_ids`, `logits`; the scatter form's `write_indices` and
/// `nonpad_kv_seqlen` by what reads them). Anything else is an error naming it.
pub fn detect(g: &Graph) -> Result<Decoder> {
    let name = |v: ValueId| g.value(v).name.clone();
    let mut caches = Vec::new();
    let mut form = None;
    let mut write_indices = None;
    let mut cache_inputs = Vec::new();
    for &out in &g.outputs {
        let Some(p) = producer(g, out) else { continue };
        let n = &g.nodes[p];
        let (f, past) = match (n.op, n.inputs.first().copied().flatten()) {
            (Op::Shape(ShapeOp::Concat), Some(past)) if n.inputs.len() == 2 => (Form::Concat, past),
            (Op::Attention(AttentionOp::TensorScatter), Some(past)) => (Form::Scatter, past),
            _ => continue,
        };
        if !g.inputs.contains(&past) {
            continue;
        }
        if *form.get_or_insert(f) != f {
            return Err(refuse("its caches mix Concat and TensorScatter updates"));
        }
        if f == Form::Scatter {
            let w = n.inputs.get(2).copied().flatten();
            match (w, write_indices) {
                (Some(w), None) if g.inputs.contains(&w) => write_indices = Some(w),
                (Some(w), Some(prev)) if w == prev => {}
                _ => {
                    return Err(refuse(format!(
                        "TensorScatter `{}` does not take its write_indices from the one graph input the others use",
                        n.name
                    )))
                }
            }
        }
        let t = ty(g, past)?;
        let axis = axis_of(g, p, t.shape.len())?;
        if t.shape.len() < 3 || axis == 0 {
            return Err(refuse(format!(
                "cache input `{}` ({t}) has no batch axis before its sequence axis {axis}",
                name(past)
            )));
        }
        let inner = t
            .shape
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 0 && *i != axis)
            .map(|(_, d)| {
                d.known().ok_or_else(|| {
                    refuse(format!(
                        "cache input `{}` ({t}) has a symbolic head dim",
                        name(past)
                    ))
                })
            })
            .collect::<Result<Vec<u64>>>()?;
        cache_inputs.push(past);
        caches.push(Cache {
            past: name(past),
            present: name(out),
            axis,
            inner,
            dtype: t.dtype,
        });
    }
    let Some(form) = form else {
        return Err(refuse(
            "no output is the Concat (or TensorScatter) of a past key/value input: export the \
             model with its KV cache (inputs past_key_values.N.key/value, outputs present.N.key/value)",
        ));
    };
    // Caches in input order.
    caches.sort_by_key(|c| {
        g.find_value(&c.past)
            .and_then(|v| g.inputs.iter().position(|&i| i == v))
    });
    let by_name = |n: &str| g.inputs.iter().copied().find(|&v| g.value(v).name == n);
    let input_ids = by_name("input_ids").ok_or_else(|| refuse("no input named `input_ids`"))?;
    let ids_ty = ty(g, input_ids)?;
    if !ids_ty.dtype.is_int() || ids_ty.shape.len() != 2 {
        return Err(refuse(format!(
            "input `input_ids` is {ids_ty}, expected integer [batch, seq]"
        )));
    }
    let batch = sym_name(&ids_ty.shape[0]).ok_or_else(|| {
        refuse(format!(
            "input_ids' batch dim {} is not a symbol",
            ids_ty.shape[0]
        ))
    })?;
    let seq = sym_name(&ids_ty.shape[1]).ok_or_else(|| {
        refuse(format!(
            "input_ids' sequence dim {} is not a symbol",
            ids_ty.shape[1]
        ))
    })?;
    let attention_mask = by_name("attention_mask");
    let position_ids = by_name("position_ids");
    let nonpad = match form {
        Form::Concat => None,
        Form::Scatter => g.nodes.iter().find_map(|n| {
            (n.op == Op::Attention(AttentionOp::Attention))
                .then(|| n.inputs.get(6).copied().flatten())
                .flatten()
                .filter(|v| g.inputs.contains(v))
        }),
    };
    let known: Vec<ValueId> = [
        Some(input_ids),
        attention_mask,
        position_ids,
        write_indices,
        nonpad,
    ]
    .into_iter()
    .flatten()
    .chain(cache_inputs.iter().copied())
    .collect();
    if let Some(&v) = g.inputs.iter().find(|v| !known.contains(v)) {
        return Err(refuse(format!(
            "input `{}` is none of input_ids, attention_mask, position_ids or a past key/value \
             (gopt does not know what to feed it at each step)",
            name(v)
        )));
    }
    let (past, total, capacity) = match form {
        Form::Concat => {
            let Some(mask) = attention_mask else {
                return Err(refuse(
                    "no `attention_mask` input: gopt keeps the cache at a fixed size and masks the \
                     slots not written yet through it",
                ));
            };
            let mt = ty(g, mask)?;
            if mt.shape.len() != 2 {
                return Err(refuse(format!(
                    "attention_mask is {mt}, expected [batch, past + seq]"
                )));
            }
            let first = ty(g, cache_inputs[0])?;
            let past = sym_name(&first.shape[caches[0].axis]).ok_or_else(|| {
                refuse(format!(
                    "past input `{}` has a fixed length ({first})",
                    caches[0].past
                ))
            })?;
            let total = sym_name(&mt.shape[1]).filter(|s| *s != past && *s != seq);
            (Some(past), total, None)
        }
        Form::Scatter => {
            let first = ty(g, cache_inputs[0])?;
            let cap = first.shape[caches[0].axis].known().ok_or_else(|| {
                refuse(format!(
                    "the TensorScatter cache `{}` has no fixed length ({first})",
                    caches[0].past
                ))
            })?;
            (None, None, Some(cap))
        }
    };
    for (c, &v) in caches.iter().zip(&cache_inputs) {
        let t = ty(g, v)?;
        let same_past = match (&past, form) {
            (Some(p), Form::Concat) => sym_name(&t.shape[c.axis]).as_deref() == Some(p.as_str()),
            _ => t.shape[c.axis].known() == capacity,
        };
        if sym_name(&t.shape[0]).as_deref() != Some(batch.as_str()) || !same_past {
            return Err(refuse(format!(
                "cache input `{}` ({t}) does not share the batch `{batch}` and the cache length of `{}`",
                c.past, caches[0].past
            )));
        }
    }
    let presents: Vec<&str> = caches.iter().map(|c| c.present.as_str()).collect();
    let others: Vec<ValueId> = g
        .outputs
        .iter()
        .copied()
        .filter(|&v| !presents.contains(&g.value(v).name.as_str()))
        .collect();
    let logits = others
        .iter()
        .copied()
        .find(|&v| g.value(v).name == "logits")
        .or_else(|| others.first().copied())
        .ok_or_else(|| refuse("no logits output"))?;
    let lt = ty(g, logits)?;
    let vocab = match lt.shape.last().and_then(Dim::known) {
        Some(v) if lt.shape.len() == 3 && lt.dtype.is_float() => v,
        _ => {
            return Err(refuse(format!(
                "output `{}` is {lt}, expected float logits [batch, seq, vocab] with a known vocab",
                name(logits)
            )))
        }
    };
    Ok(Decoder {
        form,
        input_ids: name(input_ids),
        attention_mask: attention_mask.map(name),
        position_ids: position_ids.map(name),
        write_indices: write_indices.map(name),
        nonpad: nonpad.map(name),
        logits: name(logits),
        vocab,
        batch,
        seq,
        past,
        total,
        capacity,
        dropped: others
            .iter()
            .filter(|&&v| v != logits)
            .map(|&v| name(v))
            .collect(),
        caches,
    })
}

impl Decoder {
    /// The symbol sizes that specialize the exported graph to `step` (before
    /// [`Decoder::lower`]): batch, new tokens, past length and the mask's length.
    pub fn bindings(&self, step: Step) -> Bindings {
        let (batch, seq, past) = match step {
            Step::Prefill { batch, seq } => (batch, seq, 0),
            Step::Decode { batch, context } => (batch, 1, context.saturating_sub(1)),
        };
        let mut b: Bindings = [(self.batch.clone(), batch), (self.seq.clone(), seq)].into();
        if let Some(p) = &self.past {
            b.insert(p.clone(), past);
        }
        if let Some(t) = &self.total {
            b.insert(t.clone(), past + seq);
        }
        b
    }

    /// Cache slots per row a step of this model can hold at most (`None`: any, the
    /// concat form grows by bucket).
    pub fn fixed_capacity(&self) -> Option<u64> {
        self.capacity
    }

    /// Bytes of the whole cache for `batch` rows of `context` slots in `dtype`.
    pub fn cache_bytes(&self, batch: u64, context: u64, dtype: DType) -> u128 {
        self.caches
            .iter()
            .map(|c| {
                let inner: u128 = c.inner.iter().map(|&d| d as u128).product();
                inner * batch as u128 * context as u128 * dtype.size() as u128
            })
            .sum()
    }

    /// Rewrites `g`, the exported graph specialized with [`Decoder::bindings`] of `step`
    /// and folded, into the step's graph (see the module docs), its caches stored as
    /// `cache_dtype`. Inputs of the result: the model's own (the past ones replaced by
    /// the caches in decode) and, in decode, [`CACHE_POSITION`]; outputs: the logits,
    /// then the presents.
    pub fn lower(&self, g: &Graph, step: Step, cache_dtype: DType) -> Result<Verified> {
        let mut g = g.clone();
        let find = |g: &Graph, n: &str| {
            g.find_value(n).ok_or_else(|| {
                PassError::Internal(format!("decoder value `{n}` vanished after folding"))
            })
        };
        let logits = find(&g, &self.logits)?;
        let mut outputs = vec![logits];
        let batch = step.batch();
        let position = match (step, self.form) {
            (Step::Decode { .. }, Form::Concat) => {
                let ty = TensorType::new(DType::I64, vec![Dim::Known(batch)]);
                Some(g.add_input(CACHE_POSITION, ty))
            }
            _ => None,
        };
        for c in &self.caches {
            let past = find(&g, &c.past)?;
            let present = find(&g, &c.present)?;
            let out = match (self.form, step) {
                (Form::Scatter, _) => {
                    self.scatter_in_place(&mut g, c, past, present, cache_dtype)?
                }
                (Form::Concat, Step::Prefill { .. }) => {
                    prefill_pair(&mut g, c, past, present, cache_dtype)?
                }
                (Form::Concat, Step::Decode { context, .. }) => {
                    let pos =
                        position.ok_or_else(|| PassError::Internal("no cache position".into()))?;
                    decode_pair(&mut g, c, past, present, pos, context, cache_dtype)?
                }
            };
            outputs.push(out);
        }
        g.outputs = outputs;
        // Inputs nothing reads any more (the past of a prefill, folded away) go.
        let read: Vec<ValueId> = g
            .nodes
            .iter()
            .flat_map(|n| n.inputs.iter().flatten().copied())
            .collect();
        let keep = |v: &ValueId| read.contains(v) || g.outputs.contains(v);
        let kept: Vec<ValueId> = g.inputs.iter().copied().filter(keep).collect();
        g.inputs = kept;
        g.prune();
        Ok(gopt_ir::verify(g)?)
    }

    /// The scatter form: the cache input already is the cache; its scatter is stored in
    /// `cache_dtype` when the model's differs (a cast of the update before it, of the
    /// result after it for the readers).
    fn scatter_in_place(
        &self,
        g: &mut Graph,
        c: &Cache,
        past: ValueId,
        present: ValueId,
        cache_dtype: DType,
    ) -> Result<ValueId> {
        if cache_dtype == c.dtype {
            return Ok(present);
        }
        let node = producer(g, present)
            .ok_or_else(|| PassError::Internal(format!("`{}` has no producer", c.present)))?;
        let update = g.nodes[node].inputs.get(1).copied().flatten();
        let update = update.ok_or_else(|| refuse(format!("`{}` has no update", c.present)))?;
        let cast_in = cast(g, update, cache_dtype, &format!("{}/update", c.present));
        retype_input(g, past, cache_dtype)?;
        g.nodes[node].inputs[1] = Some(cast_in);
        let stored = g.add_value(&format!("{}/stored", c.present), None);
        let old = std::mem::replace(&mut g.nodes[node].outputs[0], stored);
        reroute(g, old, None, |g| {
            cast(g, stored, c.dtype, &format!("{}/read", c.present))
        });
        take_name(g, old, stored);
        Ok(stored)
    }
}

/// A `Cast` of `x` to `to`, as a new node; its output value.
fn cast(g: &mut Graph, x: ValueId, to: DType, name: &str) -> ValueId {
    let mut a = Attrs::default();
    a.set("to", Attr::DType(to));
    let n = g.add_node(
        name,
        Op::Elementwise(ElementwiseOp::Cast),
        a,
        vec![Some(x)],
        &[name],
    );
    g.nodes[n.index()].outputs[0]
}

/// Points every reader of `old` (but node `except`) at the value `make` adds (made once,
/// only when there is a reader).
fn reroute(
    g: &mut Graph,
    old: ValueId,
    except: Option<usize>,
    make: impl FnOnce(&mut Graph) -> ValueId,
) {
    let rs: Vec<(usize, usize)> = readers(g, old)
        .into_iter()
        .filter(|(i, _)| Some(*i) != except)
        .collect();
    if rs.is_empty() {
        return;
    }
    let new = make(g);
    for (i, k) in rs {
        g.nodes[i].inputs[k] = Some(new);
    }
}

fn retype_input(g: &mut Graph, v: ValueId, dtype: DType) -> Result<()> {
    let t = ty(g, v)?.clone();
    g.values[v.index()].ty = Some(TensorType::new(dtype, t.shape));
    Ok(())
}

/// The concatenation node producing `present` from `past`: `(node, new keys)`.
fn concat_of(g: &Graph, c: &Cache, past: ValueId, present: ValueId) -> Result<(usize, ValueId)> {
    let node =
        producer(g, present).ok_or_else(|| refuse(format!("`{}` has no producer", c.present)))?;
    let n = &g.nodes[node];
    match (n.op, n.inputs.as_slice()) {
        (Op::Shape(ShapeOp::Concat), [Some(p), Some(new)]) if *p == past => Ok((node, *new)),
        _ => Err(refuse(format!(
            "after specialization, `{}` is computed by `{}` ({}), not Concat(`{}`, new)",
            c.present, n.name, n.op, c.past
        ))),
    }
}

/// Refuses a past input that something other than its concatenation reads as data.
fn only_concat_reads(g: &Graph, c: &Cache, past: ValueId, concat: usize) -> Result<()> {
    match readers(g, past).into_iter().find(|(i, _)| *i != concat) {
        None => Ok(()),
        Some((i, _)) => Err(refuse(format!(
            "past input `{}` is read by node `{}` ({}) besides its Concat: gopt keeps the cache in \
             place and can only feed the concatenation",
            c.past, g.nodes[i].name, g.nodes[i].op
        ))),
    }
}

/// Prefill: the past is empty, so `present` is the new keys; readers of the
/// concatenation read them directly, and the output is them in the cache's dtype.
fn prefill_pair(
    g: &mut Graph,
    c: &Cache,
    past: ValueId,
    present: ValueId,
    dtype: DType,
) -> Result<ValueId> {
    let (node, new) = concat_of(g, c, past, present)?;
    only_concat_reads(g, c, past, node)?;
    reroute(g, present, Some(node), |_| new);
    g.nodes.remove(node);
    let stored = cast(g, new, dtype, &format!("{}/stored", c.present));
    take_name(g, present, stored);
    Ok(stored)
}

/// Gives `to` the name of `from` (a replaced output keeps its name), `from` a suffix.
fn take_name(g: &mut Graph, from: ValueId, to: ValueId) {
    let name = g.value(from).name.clone();
    g.values[from.index()].name = format!("{name}/replaced");
    g.values[to.index()].name = name;
}

/// Decode: the past input becomes the cache (one slot more, the cache's dtype), the
/// concatenation a `TensorScatter` of the new row at `pos`, read by the concatenation's
/// readers (through a cast back when the dtypes differ).
fn decode_pair(
    g: &mut Graph,
    c: &Cache,
    past: ValueId,
    present: ValueId,
    pos: ValueId,
    context: u64,
    dtype: DType,
) -> Result<ValueId> {
    let (node, new) = concat_of(g, c, past, present)?;
    only_concat_reads(g, c, past, node)?;
    let mut shape = ty(g, past)?.shape.clone();
    shape[c.axis] = Dim::Known(context);
    g.values[past.index()].ty = Some(TensorType::new(dtype, shape));
    let update = if ty(g, new)?.dtype == dtype {
        new
    } else {
        cast(g, new, dtype, &format!("{}/update", c.present))
    };
    let mut a = Attrs::default();
    a.set("axis", Attr::Int(c.axis as i64));
    let scatter_name = format!("{}/write", c.present);
    let n = g.add_node(
        &scatter_name,
        Op::Attention(AttentionOp::TensorScatter),
        a,
        vec![Some(past), Some(update), Some(pos)],
        &[&scatter_name],
    );
    let written = g.nodes[n.index()].outputs[0];
    let model_dtype = ty(g, present)?.dtype;
    reroute(g, present, Some(node), |g| {
        if model_dtype == dtype {
            written
        } else {
            cast(g, written, model_dtype, &format!("{}/read", c.present))
        }
    });
    let node = producer(g, present).ok_or_else(|| PassError::Internal("concat vanished".into()))?;
    g.nodes.remove(node);
    take_name(g, present, written);
    Ok(written)
}

/// The bucket sizes generation compiles by default: batch rows and prompt lengths
/// (powers of two) and cache lengths, each as a sorted list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buckets {
    /// Batch sizes.
    pub batch: Vec<u64>,
    /// Prompt lengths of the prefill buckets.
    pub prompt: Vec<u64>,
    /// Cache lengths of the decode buckets.
    pub context: Vec<u64>,
}

impl Buckets {
    /// Powers of two from `lo` up to and including the first at or past `hi`.
    pub fn powers(lo: u64, hi: u64) -> Vec<u64> {
        let mut v = Vec::new();
        let mut x = lo.max(1);
        loop {
            v.push(x);
            if x >= hi {
                break;
            }
            x = x.saturating_mul(2);
        }
        v
    }

    /// The smallest size of `sizes` at or above `n`.
    pub fn fit(sizes: &[u64], n: u64) -> Option<u64> {
        sizes.iter().copied().find(|&s| s >= n)
    }

    /// Every step these buckets compile: prefill then decode, by batch.
    pub fn steps(&self) -> Vec<Step> {
        let mut v = Vec::new();
        for &batch in &self.batch {
            v.extend(self.prompt.iter().map(|&seq| Step::Prefill { batch, seq }));
        }
        for &batch in &self.batch {
            v.extend(
                self.context
                    .iter()
                    .map(|&context| Step::Decode { batch, context }),
            );
        }
        v
    }
}

/// Symbol sizes of a step for reports (`{"batch": 1, "context": 256}`).
pub fn step_sizes(step: Step) -> BTreeMap<String, u64> {
    match step {
        Step::Prefill { batch, seq } => {
            [("batch".to_string(), batch), ("seq".to_string(), seq)].into()
        }
        Step::Decode { batch, context } => {
            [("batch".to_string(), batch), (CONTEXT.to_string(), context)].into()
        }
    }
}

/// Stores every GEMM weight of `g` (a step's optimized graph) as `[N, K]`: a
/// constant 2-D `B` of `MatMul`, `FusedMatMul` or `Gemm` read untransposed becomes its
/// lazy transpose with the node's `trans_b` (`transB`) set. Decode reads each weight
/// once per token with a GEMV whose warps each stream one output column's `K`
/// contiguous weights; cuBLASLt takes the same layout at full speed, so the prefill
/// steps use it too and the two share one copy of each weight. Runs after the
/// optimizer, whose weight rewrites (Q/K/V merging, padding, rotate-half) work on
/// `[K, N]`.
pub fn weights_nk(g: Verified) -> Result<Verified> {
    use gopt_ir::ops::{FusedOp, NnOp};
    let mut g = g.into_inner();
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        let flag = match n.op {
            Op::Fused(FusedOp::FusedMatMul) => "trans_b",
            Op::Nn(NnOp::Gemm) => "transB",
            Op::Nn(NnOp::MatMul) => "trans_b",
            _ => continue,
        };
        if n.attrs.int_or(flag, 0).map_err(PassError::from)? != 0 {
            continue;
        }
        if n.op == Op::Nn(NnOp::Gemm) && n.attrs.int_or("transA", 0).map_err(PassError::from)? != 0
        {
            continue;
        }
        let Some(Some(b)) = n.inputs.get(1).copied() else {
            continue;
        };
        let Some(k) = g.konst(b).filter(|k| k.rank() == 2) else {
            continue;
        };
        let t = k.transpose(&[1, 0]).map_err(PassError::from)?;
        let name = format!("{}/nk", g.value(b).name);
        let nb = g.add_const(&name, t);
        let n = &mut g.nodes[i];
        n.inputs[1] = Some(nb);
        if n.op == Op::Nn(NnOp::MatMul) {
            // MatMul has no transpose: it becomes the FusedMatMul it is.
            n.op = Op::Fused(FusedOp::FusedMatMul);
            n.inputs.resize(4, None);
        }
        n.attrs.set(flag, Attr::Int(1));
    }
    g.prune();
    Ok(gopt_ir::verify(g)?)
}
