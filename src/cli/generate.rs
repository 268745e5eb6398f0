//! `gopt generate`: LLM generation on a decoder exported with a KV cache — prompt token
//! ids in, new token ids out, with the time to the first token, the time per token and
//! the cache it held.

use super::{adapter_name, backend_cannot, outln, DeviceArgs};
use anyhow::{bail, Context, Result};
use gopt::generate::{GenerateOptions, Generation, Generator, Request, Sampling};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Generate tokens with a decoder exported with its KV cache.
#[derive(clap::Args)]
#[command(
    long_about = "Generates new tokens after one or more prompts with a causal LM exported \
                  with its KV cache (transformers/optimum's decoder-with-past layout: \
                  input_ids, attention_mask, position_ids and past_key_values.N.key/value \
                  in; logits and present.N.key/value out; or the opset-24 TensorScatter \
                  form). gopt compiles two steps from the one export: a prefill step over \
                  the prompt (padded to a power of two) and a decode step against a cache \
                  of fixed length (the smallest power of two holding the prompt and the new \
                  tokens, up to --max-context), with the cache updated in place: on CUDA it \
                  stays in the decode step's memory and each token is one CUDA-graph replay. \
                  Tokens are chosen greedily unless --temperature is given (then sampled, \
                  with --top-k/--top-p/--seed). Prints the new token ids of each prompt and \
                  a summary: compile time, time to first token, milliseconds per token (the \
                  median decode step, host work included), tokens per second, cache bytes. \
                  Prompts are token ids: gopt has no tokenizer. A prompt too long for the \
                  largest cache, a token outside the vocabulary or a cache beyond \
                  --memory-budget is an error (exit 2) before anything runs or is written.",
    after_help = "Examples:\n  \
        gopt generate tests/data/decoders/llama_decoder/model.onnx --prompt-ids 1,42,7 --max-new-tokens 16\n  \
        gopt generate decoder.onnx --prompt-ids prompt.txt --max-new-tokens 128 --precision bf16 --backend cuda\n  \
        gopt generate decoder.onnx --prompt-ids 1,2,3 --batch 8 --max-new-tokens 64 --json\n  \
        gopt generate decoder.onnx --prompt-ids 5,6 --prompt-ids 7,8,9 --max-new-tokens 32 \\\n      \
        --temperature 0.8 --top-p 0.95 --seed 1 -o tokens.json\n\n\
        --prompt-ids takes a comma-separated list of ids, or a file: .npy (int, [seq] or\n\
        [batch, seq]) or text with one prompt per line (ids separated by spaces or commas)."
)]
pub struct Args {
    #[command(flatten)]
    pub tp: super::tensor_parallel::TpArgs,
    /// The decoder (.onnx) exported with its KV cache.
    pub model: PathBuf,
    /// A prompt as comma-separated token ids (`1,15043,29892`) or a file (.npy, or
    /// text with one prompt per line). Repeat for more prompts (one batch row each).
    #[arg(long = "prompt-ids", value_name = "FILE|LIST", required = true)]
    pub prompts: Vec<String>,
    /// New tokens per prompt (the first comes from the prompt's logits).
    #[arg(long, value_name = "N")]
    pub max_new_tokens: usize,
    /// Rows of the batch: a single prompt is repeated this many times (with several
    /// prompts, it must equal their count).
    #[arg(long, value_name = "B")]
    pub batch: Option<usize>,
    /// Sample at this temperature instead of taking the most likely token.
    #[arg(long, value_name = "T")]
    pub temperature: Option<f32>,
    /// When sampling: keep the K most likely tokens.
    #[arg(long, value_name = "K", requires = "temperature")]
    pub top_k: Option<usize>,
    /// When sampling: keep the most likely tokens up to this probability (nucleus).
    #[arg(long, value_name = "P", requires = "temperature")]
    pub top_p: Option<f32>,
    /// When sampling: the random stream's seed (the same seed gives the same tokens).
    #[arg(long, value_name = "S", default_value_t = 0, requires = "temperature")]
    pub seed: u64,
    /// Stop a row when it emits this token id (the run ends when all rows have).
    #[arg(long, value_name = "ID")]
    pub eos: Option<i64>,
    /// The longest cache a decode step holds per row (prompt plus new tokens).
    #[arg(long, value_name = "N", default_value_t = 2048)]
    pub max_context: u64,
    /// The device memory the prefill and decode steps may hold together (weights,
    /// intermediates, KV cache): 512MiB, 12GiB, 1.5G or bytes; predicted before
    /// anything is allocated.
    #[arg(long, value_name = "SIZE", value_parser = super::memory::parse_budget)]
    pub memory_budget: Option<u64>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Also write the new tokens (JSON, one list per prompt) to FILE, once the run has
    /// finished (nothing is written when it fails).
    #[arg(short, long = "output", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub opt: super::compile::OptArgs,
}

#[derive(Serialize)]
struct Report<'a> {
    model: String,
    backend: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    adapter: Option<String>,
    precision: String,
    /// `--tensor-parallel N`: the rank count.
    #[serde(skip_serializing_if = "Option::is_none")]
    tensor_parallel: Option<usize>,
    notes: Vec<String>,
    prompt_tokens: Vec<usize>,
    tokens: &'a [Vec<i64>],
    prefill_step: &'a str,
    decode_step: &'a str,
    import_ms: f64,
    compile_ms: f64,
    load_ms: f64,
    time_to_first_token_ms: f64,
    ms_per_token_p50: f64,
    ms_per_token_p95: f64,
    tokens_per_s: f64,
    cache_bytes: u128,
    weights_bytes: usize,
    /// `--quantize`: what was quantized, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    quantized: Option<String>,
}

/// Runs `gopt generate`.
pub fn main(args: &Args) -> Result<ExitCode> {
    let candidates = tensor_parallel_backends(args)?;
    let t0 = Instant::now();
    let prompts = read_prompts(&args.prompts, args.batch)?;
    let model = gopt::load_model(&args.model)
        .with_context(|| format!("cannot import {}", args.model.display()))?;
    let import_ms = t0.elapsed().as_secs_f64() * 1e3;
    let sampling = match args.temperature {
        None => Sampling::Greedy,
        Some(t) => Sampling::Random {
            temperature: t,
            top_k: args.top_k,
            top_p: args.top_p,
            seed: args.seed,
        },
    };
    sampling.check().map_err(anyhow::Error::msg)?;
    if args.max_new_tokens == 0 {
        bail!("--max-new-tokens 0: expected at least 1");
    }
    let req = Request {
        max_new_tokens: args.max_new_tokens,
        sampling,
        eos: args.eos,
        record_logits: false,
    };
    let gen = GenerateOptions {
        max_context: args.max_context,
        tensor_parallel: args.tp.tensor_parallel.map(|n| n as usize),
        ..GenerateOptions::default()
    };
    let (auto, mut notes) = args.device.candidates();
    let candidates = candidates.unwrap_or(auto);
    let mut last_err = None;
    for backend in candidates {
        let mut opts = args.opt.options()?;
        if let Some(b) = args.memory_budget {
            opts = opts.memory_budget(b);
        }
        if let Err(e) = args.device.apply(&mut opts, backend) {
            notes.push(format!("{}: {e:#}", backend.name()));
            last_err = Some(e);
            continue;
        }
        let mut g = Generator::new(&model, &opts, &gen)
            .with_context(|| format!("cannot generate with {}", args.model.display()))?;
        let bar = progress(args, &prompts);
        let run = g.generate(&prompts, &req, |step, _| {
            if let Some(b) = &bar {
                b.set_position(step as u64 + 1);
            }
        });
        if let Some(b) = &bar {
            b.finish_and_clear();
        }
        match run {
            Ok(out) => return finish(args, &g, &out, &prompts, notes, import_ms),
            Err(e) if backend_cannot(&e) && args.device.backend == super::BackendChoice::Auto => {
                notes.push(format!("{} could not run it: {e}", backend.name()));
                last_err = Some(e.into());
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(last_err.unwrap_or_else(|| anyhow::anyhow!("no backend could run the model")))
}

/// With `--tensor-parallel N`, the backends that may run the ranks: CUDA, once this
/// machine is checked for N GPUs and NCCL (exit 2 naming what is missing), or the CPU
/// when `--backend cpu` asks for the ranks simulated on the interpreter; `None`
/// without the flag.
fn tensor_parallel_backends(args: &Args) -> Result<Option<Vec<gopt::Backend>>> {
    use super::BackendChoice::{Auto, Only};
    let Some(n) = args.tp.tensor_parallel else {
        return Ok(None);
    };
    let what = format!("gopt generate --tensor-parallel {n}");
    match args.device.backend {
        Only(gopt::Backend::Cpu) => Ok(Some(vec![gopt::Backend::Cpu])),
        Only(gopt::Backend::Wgpu) => bail!(
            "{what}: the ranks run on CUDA GPUs through NCCL (or, with --backend cpu, \
             simulated on the interpreter); not on wgpu"
        ),
        Auto | Only(gopt::Backend::Cuda) => {
            gopt::runtime::cuda::nccl::check_ranks(n as usize).with_context(|| what.clone())?;
            Ok(Some(vec![gopt::Backend::Cuda]))
        }
    }
}

/// A progress bar on stderr for runs long enough to want one (hidden when stderr is
/// not a terminal).
fn progress(args: &Args, prompts: &[Vec<i64>]) -> Option<indicatif::ProgressBar> {
    if args.json || args.max_new_tokens < 32 {
        return None;
    }
    let b = indicatif::ProgressBar::new(args.max_new_tokens as u64);
    b.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "generating {{bar:30}} {{pos}}/{{len}} tokens x {} rows, {{per_sec}}",
            prompts.len()
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(b)
}

fn finish(
    args: &Args,
    g: &Generator,
    out: &Generation,
    prompts: &[Vec<i64>],
    notes: Vec<String>,
    import_ms: f64,
) -> Result<ExitCode> {
    let opts = g.options();
    let r = Report {
        model: args.model.display().to_string(),
        backend: out.backend,
        adapter: adapter_name(opts),
        precision: opts.get_config().precision.name().to_string(),
        tensor_parallel: g.tensor_parallel(),
        notes,
        prompt_tokens: prompts.iter().map(Vec::len).collect(),
        tokens: &out.tokens,
        prefill_step: &out.steps[0],
        decode_step: &out.steps[1],
        import_ms,
        compile_ms: out.compile_s * 1e3,
        load_ms: out.load_s * 1e3,
        time_to_first_token_ms: out.time_to_first_token_ms,
        ms_per_token_p50: out.ms_per_token(),
        ms_per_token_p95: gopt::generate::percentile(&out.step_ms, 0.95),
        tokens_per_s: out.tokens_per_s(),
        cache_bytes: out.cache_bytes,
        weights_bytes: g.weights_bytes(),
        quantized: super::quantized::summary(opts.get_quantize().as_ref(), g.quantized()),
    };
    if let Some(path) = &args.out {
        write_atomic(path, &serde_json::to_vec(&out.tokens)?)?;
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (i, t) in out.tokens.iter().enumerate() {
        let ids: Vec<String> = t.iter().map(i64::to_string).collect();
        outln!(
            "prompt {i} ({} tokens): {}",
            r.prompt_tokens[i],
            ids.join(" ")
        );
    }
    let short = |n: u128| gopt::ir::limit::fmt_short(n);
    outln!(
        "backend {}{}, precision {}; steps: {}, {}",
        r.backend,
        r.adapter
            .as_ref()
            .map(|a| format!(" ({a})"))
            .unwrap_or_default(),
        r.precision,
        r.prefill_step,
        r.decode_step
    );
    if let Some(n) = r.tensor_parallel {
        outln!(
            "tensor parallel: {n} rank{}, {}; the logits from rank 0, each rank's K/V heads of \
             the cache kept on it",
            if n == 1 { "" } else { "s" },
            match r.backend {
                "cpu" => "simulated together on the CPU interpreter".to_string(),
                _ if n == 1 => "GPU 0, NCCL".to_string(),
                _ => format!("GPUs 0..{}, NCCL", n - 1),
            }
        );
    }
    for n in &r.notes {
        outln!("note: {n}");
    }
    if let Some(q) = &r.quantized {
        outln!("{q}");
    }
    outln!(
        "compile {:.0} ms, load {:.0} ms; time to first token {:.2} ms; {:.3} ms per token \
         (p50, p95 {:.3}); {:.1} tokens/s over {} rows; KV cache {}, weights {}",
        r.compile_ms,
        r.load_ms,
        r.time_to_first_token_ms,
        r.ms_per_token_p50,
        r.ms_per_token_p95,
        r.tokens_per_s,
        prompts.len(),
        short(r.cache_bytes),
        short(r.weights_bytes as u128)
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to `path` through a temporary file renamed into place.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// The prompts of `--prompt-ids` (each a list or a file of one or more prompts),
/// repeated to `batch` rows when one prompt is given.
pub fn read_prompts(specs: &[String], batch: Option<usize>) -> Result<Vec<Vec<i64>>> {
    let mut prompts = Vec::new();
    for s in specs {
        let path = Path::new(s);
        if path.is_file() {
            prompts.extend(read_file(path).with_context(|| format!("--prompt-ids {s}"))?);
        } else {
            prompts.push(parse_ids(s).with_context(|| {
                format!("--prompt-ids {s}: not a file, nor token ids separated by commas")
            })?);
        }
    }
    match (batch, prompts.len()) {
        (Some(0), _) => bail!("--batch 0: expected at least 1"),
        (Some(b), 1) => Ok(vec![prompts[0].clone(); b]),
        (Some(b), n) if b != n => bail!("--batch {b} with {n} prompts: give one prompt, or {b}"),
        _ => Ok(prompts),
    }
}

fn parse_ids(s: &str) -> Result<Vec<i64>> {
    let ids = s
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<i64>()
                .with_context(|| format!("`{t}` is not a token id"))
        })
        .collect::<Result<Vec<i64>>>()?;
    if ids.is_empty() {
        bail!("no token ids");
    }
    Ok(ids)
}

fn read_file(path: &Path) -> Result<Vec<Vec<i64>>> {
    if path.extension().is_some_and(|e| e == "npy") {
        let (_, t) = gopt::tensor_io::read_tensor(path)?;
        if !t.dtype().is_int() || !(1..=2).contains(&t.rank()) {
            bail!(
                "expected an integer [seq] or [batch, seq] array, got {} {:?}",
                t.dtype(),
                t.shape()
            );
        }
        let width = t.shape().last().copied().unwrap_or(0);
        let v = t.to_i64_vec();
        return Ok(v.chunks(width.max(1)).map(<[i64]>::to_vec).collect());
    }
    let text = std::fs::read_to_string(path).context("cannot read it as text")?;
    let rows: Vec<Vec<i64>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| parse_ids(l).with_context(|| format!("line {}", i + 1)))
        .collect::<Result<_>>()?;
    if rows.is_empty() {
        bail!("the file holds no prompt");
    }
    Ok(rows)
}
