//! LLM generation: a decoder exported with a KV cache (transformers/optimum's "decoder
//! with past" layout, or the opset-24 `TensorScatter` form), compiled into prefill and
//! decode steps and run token by token with the cache kept on the device.
//!
//! [`Generator::new`] reads the decoder's interface ([`gopt_passes::decoder::detect`]);
//! [`Generator::compile`] builds the steps a run needs ([`Step`]: prefill buckets over
//! (batch, prompt length), decode buckets over (batch, cache length), each one
//! optimization of the exported graph); [`Generator::generate`] pads the prompts into a
//! prefill bucket, samples the first token from its logits, writes the prompt's keys
//! and values into the decode bucket's cache, and replays the decode step once per new
//! token (one CUDA graph per step on CUDA), feeding the token, its position, the write
//! position and the mask. Each row of a batch keeps its own length: prompts are padded
//! on the right, and a row's new key goes to the slot after its own last one.
//!
//! ```no_run
//! use gopt::generate::{GenerateOptions, Generator, Request, Sampling};
//! use gopt::{Backend, Options, Precision};
//! use std::path::Path;
//! let model = gopt::load_model(Path::new("decoder.onnx"))?;
//! let opts = Options::new().precision(Precision::Bf16).backend(Backend::Cuda);
//! let mut g = Generator::new(&model, &opts, &GenerateOptions::default())?;
//! let out = g.generate(&[vec![1, 15043, 29892]], &Request::greedy(32), |_, _| {})?;
//! println!("{:?} at {:.2} ms/token", out.tokens[0], out.ms_per_token());
//! # Ok::<(), gopt::GoptError>(())
//! ```

mod inputs;
mod ranks;
mod sample;
mod session;
mod steps;

pub use gopt_passes::decoder::{Buckets, Decoder, Form, Step};
pub use sample::{argmax, Sampler, Sampling};
pub use steps::{cache_dtype, CompiledStep};

use crate::pipeline::{Backend, Options};
use crate::{GoptError, Imported, Result};
use gopt_codegen::plan::WeightStore;
use gopt_passes::decoder;
use session::{Loaded, Session};
use std::time::{Duration, Instant};

/// The bucket sizes a generator compiles (lazily: a run compiles the two steps it
/// needs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerateOptions {
    /// The longest cache (prompt plus new tokens per row) of a decode bucket.
    pub max_context: u64,
    /// The largest batch.
    pub max_batch: u64,
    /// The smallest prompt bucket (prompts are padded up to a power of two at least this).
    pub min_prompt: u64,
    /// The smallest cache bucket.
    pub min_context: u64,
    /// Tensor parallelism over this many ranks (`None`: one device). Each step is split
    /// Megatron-style, every rank keeping its K/V heads of the cache; on CUDA rank r
    /// runs on GPU r through NCCL, on the CPU the ranks are simulated together on the
    /// interpreter (a check of the split, not a speed-up).
    pub tensor_parallel: Option<usize>,
}

impl Default for GenerateOptions {
    fn default() -> GenerateOptions {
        GenerateOptions {
            max_context: 2048,
            max_batch: 64,
            min_prompt: 16,
            min_context: 128,
            tensor_parallel: None,
        }
    }
}

/// One generation's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// New tokens per row (the first comes from the prompt's logits).
    pub max_new_tokens: usize,
    /// How each token is chosen.
    pub sampling: Sampling,
    /// A token that ends a row (rows that emitted it stop growing; the run ends when
    /// all have).
    pub eos: Option<i64>,
    /// Keep each step's logits in [`Generation::logits`] (for checking them).
    pub record_logits: bool,
}

impl Request {
    /// Greedy decoding of `n` new tokens, no end token.
    pub fn greedy(n: usize) -> Request {
        Request {
            max_new_tokens: n,
            sampling: Sampling::Greedy,
            eos: None,
            record_logits: false,
        }
    }
}

/// What a generation produced and what it took.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Generation {
    /// The new tokens of each row (cut after an end token).
    pub tokens: Vec<Vec<i64>>,
    /// The prefill and decode steps that ran (`prefill batch=1 seq=16`).
    pub steps: [String; 2],
    /// The backend.
    pub backend: &'static str,
    /// From the call to the first token of every row (prefill included, compile not).
    pub time_to_first_token_ms: f64,
    /// Wall time of each decode step (host included: inputs in, logits out, sampling).
    pub step_ms: Vec<f64>,
    /// Bytes of the KV cache the decode step holds.
    pub cache_bytes: u128,
    /// Seconds spent compiling steps this call needed.
    pub compile_s: f64,
    /// Seconds spent loading them on the device (kernels, weights, arenas).
    pub load_s: f64,
    /// With [`Request::record_logits`]: the logits each token was chosen from, per
    /// step, per row.
    #[serde(skip)]
    pub logits: Vec<Vec<Vec<f32>>>,
}

impl Generation {
    /// Median milliseconds per decode step (0 without one).
    pub fn ms_per_token(&self) -> f64 {
        percentile(&self.step_ms, 0.5)
    }

    /// New tokens per second over the decode steps, all rows together.
    pub fn tokens_per_s(&self) -> f64 {
        let total: f64 = self.step_ms.iter().sum();
        let rows = self.tokens.len() as f64;
        if total > 0.0 {
            rows * self.step_ms.len() as f64 / (total / 1e3)
        } else {
            0.0
        }
    }
}

/// The `q` quantile of `xs` (nearest rank; 0 when empty).
pub fn percentile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// A decoder ready to generate: its interface, its compiled steps and their executors.
pub struct Generator {
    model: Imported,
    /// The weights `--quantize` quantized.
    quantized: Vec<gopt_passes::quantize::WeightReport>,
    decoder: Decoder,
    opts: Options,
    buckets: Buckets,
    /// The weights of each rank's plans (one store without tensor parallelism).
    stores: Vec<WeightStore>,
    ranks: Option<usize>,
    steps: Vec<CompiledStep>,
    loaded: Loaded,
}

impl Generator {
    /// Reads `model`'s generation interface (an error naming what is missing when it is
    /// not a decoder with a KV cache) and sets up the buckets; nothing is compiled yet.
    pub fn new(model: &Imported, opts: &Options, gen: &GenerateOptions) -> Result<Generator> {
        let decoder = decoder::detect(&model.model.graph)?;
        let (model, quantized) = crate::pipeline::quantized(model, opts)?;
        if gen.max_context < 2 || gen.max_batch < 1 {
            return Err(GoptError::Usage(format!(
                "max context {} and max batch {}: expected at least 2 and 1",
                gen.max_context, gen.max_batch
            )));
        }
        let max_context = decoder.fixed_capacity().unwrap_or(gen.max_context);
        let context = match decoder.fixed_capacity() {
            Some(c) => vec![c],
            None => Buckets::powers(gen.min_context.min(max_context), max_context)
                .into_iter()
                .map(|c| c.min(max_context))
                .collect(),
        };
        let buckets = Buckets {
            batch: Buckets::powers(1, gen.max_batch),
            prompt: Buckets::powers(gen.min_prompt.min(max_context), max_context)
                .into_iter()
                .map(|s| s.min(max_context))
                .collect(),
            context,
        };
        if let Some(n) = gen.tensor_parallel {
            if n == 0 || opts.get_backend() == Backend::Wgpu {
                return Err(GoptError::Usage(format!(
                    "--tensor-parallel {n}: {}",
                    if n == 0 {
                        "expected at least 1 rank"
                    } else {
                        "the ranks run on CUDA (NCCL), or simulated on the CPU; not on wgpu"
                    }
                )));
            }
        }
        let mut opts = opts.clone();
        if opts.get_backend() == Backend::Wgpu {
            let f16 = opts.get_wgsl_f16().unwrap_or(true);
            let p = crate::compiled::wgsl_precision(opts.get_config().precision, f16);
            opts = opts.precision(p);
        }
        Ok(Generator {
            model,
            quantized,
            decoder,
            opts,
            buckets,
            stores: (0..gen.tensor_parallel.unwrap_or(1))
                .map(|_| WeightStore::default())
                .collect(),
            ranks: gen.tensor_parallel,
            steps: Vec::new(),
            loaded: Loaded::Nothing,
        })
    }

    /// The weights `--quantize` quantized (empty without it), in model order.
    pub fn quantized(&self) -> &[gopt_passes::quantize::WeightReport] {
        &self.quantized
    }

    /// The decoder's interface.
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The options it compiles with (wgpu's precision lowered).
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// The bucket sizes.
    pub fn buckets(&self) -> &Buckets {
        &self.buckets
    }

    /// The steps compiled so far, in compile order.
    pub fn compiled(&self) -> &[CompiledStep] {
        &self.steps
    }

    /// Bytes of the weights the steps share (on each rank: rank 0's).
    pub fn weights_bytes(&self) -> usize {
        self.stores[0].len()
    }

    /// The weight store (to save the steps as an artifact; rank 0's).
    pub fn weight_store(&self) -> &WeightStore {
        &self.stores[0]
    }

    /// The tensor-parallel rank count (`None`: one device).
    pub fn tensor_parallel(&self) -> Option<usize> {
        self.ranks
    }

    /// The prefill and decode steps a generation of `prompts` (token ids per row) with
    /// `max_new` new tokens runs in, or why none can: a batch, or a prompt plus its new
    /// tokens, past the largest bucket.
    pub fn steps_for(&self, prompts: &[Vec<i64>], max_new: usize) -> Result<(Step, Step)> {
        let rows = prompts.len() as u64;
        let longest = prompts.iter().map(Vec::len).max().unwrap_or(0) as u64;
        let largest = |v: &[u64]| v.last().copied().unwrap_or(0);
        let batch = Buckets::fit(&self.buckets.batch, rows).ok_or_else(|| {
            GoptError::Inputs(format!(
                "a batch of {rows} prompts is above the largest batch bucket ({})",
                largest(&self.buckets.batch)
            ))
        })?;
        let need = longest + max_new as u64;
        let context = Buckets::fit(&self.buckets.context, need).ok_or_else(|| {
            GoptError::Inputs(format!(
                "a prompt of {longest} tokens plus {max_new} new ones needs a cache of {need} \
                 slots; the largest decode bucket holds {}{}",
                largest(&self.buckets.context),
                match self.decoder.fixed_capacity() {
                    Some(_) => " (the model's own cache length)",
                    None => " (raise --max-context)",
                }
            ))
        })?;
        let seq = Buckets::fit(&self.buckets.prompt, longest)
            .filter(|&s| s <= context)
            .unwrap_or(context);
        Ok((
            Step::Prefill { batch, seq },
            Step::Decode { batch, context },
        ))
    }

    /// Compiles the `steps` not compiled yet; `progress` gets each when it is done.
    pub fn compile(
        &mut self,
        steps: &[Step],
        progress: impl FnMut(&CompiledStep),
    ) -> Result<Duration> {
        let t = Instant::now();
        let todo: Vec<Step> = steps
            .iter()
            .copied()
            .filter(|s| !self.steps.iter().any(|c| c.step == *s))
            .collect();
        if todo.is_empty() {
            return Ok(Duration::ZERO);
        }
        let made = steps::compile(
            &self.model,
            &self.decoder,
            &self.opts,
            &todo,
            &mut self.stores,
            self.ranks,
            progress,
        )?;
        self.steps.extend(made);
        Ok(t.elapsed())
    }

    fn step(&self, s: Step) -> Result<&CompiledStep> {
        self.steps
            .iter()
            .find(|c| c.step == s)
            .ok_or_else(|| GoptError::Usage(format!("step {} is not compiled", s.name())))
    }

    /// Generates `req.max_new_tokens` tokens after each prompt (rows of token ids,
    /// each checked against the vocabulary), compiling the two steps it needs first;
    /// `on_token` gets each decode step's index and the tokens it chose per row.
    pub fn generate(
        &mut self,
        prompts: &[Vec<i64>],
        req: &Request,
        mut on_token: impl FnMut(usize, &[i64]),
    ) -> Result<Generation> {
        inputs::check_prompts(prompts, self.decoder.vocab)?;
        req.sampling.check().map_err(GoptError::Usage)?;
        if req.max_new_tokens == 0 {
            return Err(GoptError::Usage(
                "--max-new-tokens 0: expected at least 1".into(),
            ));
        }
        let (p, d) = self.steps_for(prompts, req.max_new_tokens)?;
        let compile = self.compile(&[p, d], |_| {})?;
        self.check_budget(p, d)?;
        let t_load = Instant::now();
        for s in [p, d] {
            let i =
                self.steps.iter().position(|c| c.step == s).ok_or_else(|| {
                    GoptError::Usage(format!("step {} is not compiled", s.name()))
                })?;
            self.loaded
                .load(&self.steps[i], &self.stores, self.ranks, &self.opts)?;
        }
        let load = t_load.elapsed();
        let t0 = Instant::now();
        let cache_dtype = steps::cache_dtype(&self.decoder, &self.opts);
        let (Step::Decode { batch, context }, Step::Prefill { seq, .. }) = (d, p) else {
            return Err(GoptError::Usage("steps out of order".into()));
        };
        let prefill = self
            .steps
            .iter()
            .find(|c| c.step == p)
            .ok_or_else(|| GoptError::Usage("prefill step missing".into()))?;
        let decode = self
            .steps
            .iter()
            .find(|c| c.step == d)
            .ok_or_else(|| GoptError::Usage("decode step missing".into()))?;
        let feed = inputs::Feed::new(&self.decoder, prefill, decode)?;
        let mut session = Session {
            prefill,
            decode,
            loaded: &mut self.loaded,
            host_caches: Vec::new(),
            cache_inputs: feed.cache_inputs.clone(),
            limit: self.opts.get_memory_limit(),
        };
        let rows = prompts.len();
        let lens: Vec<u64> = prompts.iter().map(|r| r.len() as u64).collect();
        let mut sampler = req.sampling.sampler();
        let pre_inputs = feed.prefill(prompts, batch as usize, seq as usize)?;
        let last: Vec<usize> = (0..rows)
            .map(|r| r * seq as usize + lens[r] as usize - 1)
            .collect();
        let logits = session.prefill(&pre_inputs, &last, &self.decoder.caches)?;
        let mut kept = Vec::new();
        let mut next = sample_rows(&logits, &mut sampler);
        if req.record_logits {
            kept.push(logits);
        }
        let ttft = t0.elapsed();
        let mut tokens: Vec<Vec<i64>> = next.iter().map(|&t| vec![t]).collect();
        let mut done: Vec<bool> = next.iter().map(|&t| Some(t) == req.eos).collect();
        let mut step_ms = Vec::with_capacity(req.max_new_tokens);
        on_token(0, &next);
        for step in 1..req.max_new_tokens {
            if done.iter().all(|&d| d) {
                break;
            }
            let t = Instant::now();
            // Row r's token `step - 1` (written at slot len + step - 1) goes in now.
            let pos: Vec<u64> = lens.iter().map(|&l| l + step as u64 - 1).collect();
            let ins = feed.decode(&next, &pos, batch as usize, context as usize)?;
            let logits = session.decode(&ins, rows)?;
            next = sample_rows(&logits, &mut sampler);
            if req.record_logits {
                kept.push(logits);
            }
            for r in 0..rows {
                if !done[r] {
                    tokens[r].push(next[r]);
                    done[r] = Some(next[r]) == req.eos;
                }
            }
            step_ms.push(t.elapsed().as_secs_f64() * 1e3);
            on_token(step, &next);
        }
        Ok(Generation {
            tokens,
            steps: [p.name(), d.name()],
            backend: self.opts.get_backend().name(),
            time_to_first_token_ms: ttft.as_secs_f64() * 1e3,
            step_ms,
            cache_bytes: self.decoder.cache_bytes(batch, context, cache_dtype),
            compile_s: compile.as_secs_f64(),
            load_s: load.as_secs_f64(),
            logits: kept,
        })
    }

    /// `--memory-budget`: the prefill and decode steps' predicted peak device memory
    /// together (the decode step's arena holds the cache) must fit it.
    fn check_budget(&self, p: Step, d: Step) -> Result<()> {
        let Some(budget) = self.opts.get_memory_budget() else {
            return Ok(());
        };
        let weights = self.stores[0].len();
        let mut total = weights as u128;
        for s in [p, d] {
            total += self.step(s)?.own_bytes(weights);
        }
        if total > u128::from(budget) {
            let Step::Decode { batch, context } = d else {
                return Err(GoptError::Usage("steps out of order".into()));
            };
            let cache = self.decoder.cache_bytes(
                batch,
                context,
                steps::cache_dtype(&self.decoder, &self.opts),
            );
            return Err(GoptError::Inputs(format!(
                "steps {} and {} need {} of device memory (weights {}, KV cache {}), above \
                 --memory-budget {}: use a shorter prompt or fewer new tokens, a smaller batch, \
                 or a larger budget",
                p.name(),
                d.name(),
                gopt_ir::limit::fmt_short(total),
                gopt_ir::limit::fmt_short(weights as u128),
                gopt_ir::limit::fmt_short(cache),
                gopt_ir::limit::fmt_short(u128::from(budget)),
            )));
        }
        Ok(())
    }

    /// The decode step a batch of `batch` rows with `tokens` tokens in the cache runs
    /// in (the smallest cache bucket holding them).
    pub fn decode_step(&self, batch: u64, tokens: u64) -> Result<Step> {
        let b = Buckets::fit(&self.buckets.batch, batch);
        let c = Buckets::fit(&self.buckets.context, tokens);
        match (b, c) {
            (Some(batch), Some(context)) => Ok(Step::Decode { batch, context }),
            _ => Err(GoptError::Inputs(format!(
                "no decode bucket holds {batch} rows of {tokens} tokens (largest: {} rows, {} slots)",
                self.buckets.batch.last().copied().unwrap_or(0),
                self.buckets.context.last().copied().unwrap_or(0)
            ))),
        }
    }

    /// Bytes a run of compiled step `s` reads from memory it does not write: each
    /// weight once (an embedding table only for the rows a step gathers), and, for a
    /// decode step, the whole KV cache (attention reads every slot, masked or not).
    /// `(weights, cache)`: what a token costs at the memory roof.
    pub fn traffic(&self, s: Step) -> Result<(u128, u128)> {
        let g = &self.step(s)?.variant.graph;
        let mut seen = std::collections::HashSet::new();
        let mut weights = 0u128;
        for n in &g.nodes {
            for (k, v) in n.inputs.iter().enumerate() {
                let Some(v) = v else { continue };
                let Some(c) = g.konst(*v) else { continue };
                if !seen.insert(*v) {
                    continue;
                }
                let gathered = n.op == gopt_ir::Op::Shape(gopt_ir::ops::ShapeOp::Gather) && k == 0;
                let idx = n
                    .inputs
                    .get(1)
                    .copied()
                    .flatten()
                    .and_then(|i| g.ty(i).ok());
                weights += match (gathered, idx.and_then(|t| gopt_ir::dim::concrete(&t.shape))) {
                    (true, Some(ix)) => {
                        let rows: usize = ix.iter().product();
                        let row = c.byte_size() / c.shape().first().copied().unwrap_or(1).max(1);
                        (rows * row).min(c.byte_size()) as u128
                    }
                    _ => c.byte_size() as u128,
                };
            }
        }
        let cache = match s {
            Step::Decode { batch, context } => self.decoder.cache_bytes(
                batch,
                context,
                steps::cache_dtype(&self.decoder, &self.opts),
            ),
            Step::Prefill { .. } => 0,
        };
        Ok((weights, cache))
    }

    /// Times decode step `d` on its own, as replayed per token: CUDA events around
    /// each replay (`iters` after `warmup`), milliseconds each. The inputs are a
    /// mid-generation state: every row's new token at slot `tokens - 1`, the mask 1 up
    /// to it.
    pub fn time_decode(
        &mut self,
        d: Step,
        tokens: u64,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        let Step::Decode { batch, context } = d else {
            return Err(GoptError::Usage(format!(
                "{} is not a decode step",
                d.name()
            )));
        };
        if tokens == 0 || tokens > context {
            return Err(GoptError::Usage(format!(
                "{tokens} tokens in a cache of {context}"
            )));
        }
        self.compile(&[d], |_| {})?;
        let i = self
            .steps
            .iter()
            .position(|c| c.step == d)
            .ok_or_else(|| GoptError::Usage(format!("step {} is not compiled", d.name())))?;
        self.loaded
            .load(&self.steps[i], &self.stores, self.ranks, &self.opts)?;
        let feed = inputs::Feed::for_decode(&self.decoder, &self.steps[i])?;
        let pos = vec![tokens - 1; batch as usize];
        let ins = feed.decode(
            &vec![0; batch as usize],
            &pos,
            batch as usize,
            context as usize,
        )?;
        if let Some((ranks, key)) = self.loaded.ranks(d) {
            return ranks::time(ranks, key, &ins, warmup, iters);
        }
        match self.opts.get_backend() {
            Backend::Cuda => {
                let exe = self.loaded.cuda(d)?;
                for (k, t) in &ins {
                    exe.set_input(*k, t)?;
                }
                Ok(exe.time(warmup, iters)?)
            }
            Backend::Wgpu | Backend::Cpu => Err(GoptError::Usage(
                "decode timing with CUDA events needs --backend cuda".into(),
            )),
        }
    }
}

/// The next token of each row of logits.
fn sample_rows(logits: &[Vec<f32>], sampler: &mut Sampler) -> Vec<i64> {
    logits.iter().map(|row| sampler.next(row)).collect()
}

impl Drop for Generator {
    fn drop(&mut self) {
        self.loaded.release();
    }
}
