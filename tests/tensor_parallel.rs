//! Tensor parallelism on the CPU: the sharding pass (`gopt_passes::shard`) splits the
//! shipped models (GPT-2 with its merged Q/K/V Gemm, BERT, the Llama decoders with
//! grouped-query heads, RMSNorm, rotary and SwiGLU) N ways, and the N rank graphs run
//! together in the interpreter (`gopt_ir::ops::collective::simulate`, each AllReduce a
//! sum of the ranks' inputs, each AllGather their concatenation) must give the
//! unsharded graph's outputs on every rank: fp32, the largest error within 1e-4 of the
//! output's largest magnitude. Dims that do not divide are errors naming the dim.
//! With fewer K/V heads than ranks the K/V heads are replicated; a decode step reads
//! its rank's shard of the past KV cache and keeps its shard of the present one, which
//! the test compares with the matching block of the unsharded output. Generation's
//! own steps (the decoder lowered as `gopt generate` compiles it: the prompt's presents
//! kept per rank, the decode step's cache written in place by a `TensorScatter`) split
//! the same way, each rank holding its K/V heads of the cache.

use gopt::generate::Step;
use gopt::ir::ops::collective::simulate_each;
use gopt::ir::ValueId;
use gopt::ir::{DType, Dim, Model, Tensor, Verified};
use gopt::passes::decoder::CACHE_POSITION;
use gopt::passes::shard::{collectives, shard, shard_keeping, Placement, ShardError};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

mod common;

const BATCH: usize = 2;
const SEQ: usize = 9;

fn load(dir: &str, name: &str) -> Model {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(dir)
        .join(name)
        .join("model.onnx");
    gopt::load_model(&path)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .model
}

/// Decoder `name` as a prompt of BATCH x SEQ ([`common::decoders::prefill`]).
fn prefill(name: &str) -> Model {
    common::decoders::prefill(name, BATCH, SEQ)
}

/// `m` specialized to BATCH x SEQ (its first symbol the batch, the others the
/// sequence), and inputs for it: token ids, a mask of ones.
fn specialized(m: &Model) -> (Verified, Vec<Tensor>) {
    let mut bind = BTreeMap::new();
    for &v in &m.graph.inputs {
        let ty = m.graph.values[v.index()].ty.as_ref().expect("typed");
        for d in &ty.shape {
            if let Dim::Sym(s) = d {
                let size = if bind.is_empty() { BATCH } else { SEQ };
                bind.entry(s.to_string()).or_insert(size as u64);
            }
        }
    }
    specialized_to(m, bind)
}

/// An input tensor for each of `g`'s inputs (every dim bound), its values
/// `data(name, dtype, elements, last dim)`.
fn inputs_for(g: &Verified, data: impl Fn(&str, DType, usize, usize) -> Vec<f64>) -> Vec<Tensor> {
    g.inputs
        .iter()
        .map(|&v| {
            let val = g.value(v);
            let ty = val.ty.as_ref().expect("typed");
            let shape: Vec<usize> = ty
                .shape
                .iter()
                .map(|d| d.known().expect("bound") as usize)
                .collect();
            let n: usize = shape.iter().product();
            let last = shape.last().copied().unwrap_or(1).max(1);
            Tensor::from_f64s(ty.dtype, &shape, &data(&val.name, ty.dtype, n, last)).expect("input")
        })
        .collect()
}

/// `m` with its symbols bound as in `bind`, and inputs for it: token ids, a mask of
/// ones, floats (a past cache) in [-1, 1).
fn specialized_to(m: &Model, bind: BTreeMap<String, u64>) -> (Verified, Vec<Tensor>) {
    let bindings = bind.into_iter().collect();
    let g = gopt::prepare(m, &bindings).expect("prepare");
    let inputs = inputs_for(&g, |name, dtype, n, _| {
        if name.contains("mask") {
            vec![1.0; n]
        } else if dtype == DType::F32 {
            (0..n)
                .map(|i| ((i * 37 + 11) % 500) as f64 / 250.0 - 1.0)
                .collect()
        } else {
            (0..n).map(|i| ((i * 37 + 11) % 500) as f64).collect()
        }
    });
    (g, inputs)
}

/// The largest error relative to the largest magnitude of `want`.
fn rel_max(got: &Tensor, want: &Tensor) -> f64 {
    assert_eq!(got.shape(), want.shape());
    let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-30);
    a.iter()
        .zip(&b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

/// Rank `rank`'s part of `t` placed as `p`: all of it, or its block along the axis.
fn part(t: &Tensor, p: Placement, rank: usize, ranks: usize) -> Tensor {
    p.part(t, rank, ranks).expect("part")
}

/// Shards `m` `ranks` ways, runs the ranks together and compares every rank's outputs
/// with the unsharded graph's; returns the AllReduce and AllGather counts of rank 0.
fn check(what: &str, m: &Model, ranks: usize) -> (usize, usize) {
    let (g, inputs) = specialized(m);
    check_graph(what, &g, &inputs, ranks)
}

/// [`check`] of a specialized graph on `inputs`: each rank reads its part of each input
/// and must output its part of each output (all of a whole or gathered one, its block
/// of a split one).
fn check_graph(what: &str, g: &Verified, inputs: &[Tensor], ranks: usize) -> (usize, usize) {
    check_keeping(what, g, inputs, ranks, &HashSet::new())
}

/// [`check_graph`] with the outputs `per_rank` kept on their ranks when split.
fn check_keeping(
    what: &str,
    g: &Verified,
    inputs: &[Tensor],
    ranks: usize,
    per_rank: &HashSet<ValueId>,
) -> (usize, usize) {
    let want = gopt::ir::interp::run(g, inputs).unwrap_or_else(|e| panic!("{what}: {e}"));
    let s = shard_keeping(g, ranks, per_rank).unwrap_or_else(|e| panic!("{what} x{ranks}: {e}"));
    assert_eq!(s.ranks.len(), ranks);
    assert_eq!(
        (s.inputs.len(), s.outputs.len()),
        (inputs.len(), want.len())
    );
    let graphs: Vec<gopt::ir::Graph> = s.ranks.iter().map(|r| gopt::ir::Graph::clone(r)).collect();
    let each: Vec<Vec<Tensor>> = (0..ranks)
        .map(|r| {
            inputs
                .iter()
                .zip(&s.inputs)
                .map(|(t, p)| part(t, *p, r, ranks))
                .collect()
        })
        .collect();
    let outs = simulate_each(&graphs, &each).unwrap_or_else(|e| panic!("{what} x{ranks}: {e}"));
    for (r, got) in outs.iter().enumerate() {
        assert_eq!(got.len(), want.len());
        for (k, (o, w)) in got.iter().zip(&want).enumerate() {
            let e = rel_max(o, &part(w, s.outputs[k], r, ranks));
            assert!(
                e <= 1e-4,
                "{what} x{ranks}: rank {r} output {k}: error {e:.3e} > 1e-4"
            );
        }
    }
    let c = collectives(&s.ranks[0]);
    let count = |op: &str| c.iter().filter(|(o, _)| o.name() == op).count();
    (count("AllReduce"), count("AllGather"))
}

#[test]
fn gpt2_splits_two_and_four_ways() {
    let m = load("models", "gpt2_small");
    for ranks in [2, 4] {
        // Two layers: one AllReduce after attention's projection and one after the
        // MLP's, per layer; the LM head's logits gathered.
        assert_eq!(check("gpt2_small", &m, ranks), (4, 1), "x{ranks}");
    }
}

#[test]
fn bert_splits_three_ways() {
    let m = load("models", "bert_small");
    let (reduces, _) = check("bert_small", &m, 3);
    assert_eq!(reduces, 4);
}

#[test]
fn llama_decoders_split_two_ways() {
    for name in ["llama_decoder", "hf_llama_decoder"] {
        let (reduces, gathers) = check(name, &prefill(name), 2);
        // The logits are gathered; the four present K/V caches stay on their ranks.
        assert_eq!((reduces, gathers), (4, 1), "{name}");
    }
}

#[test]
fn llama_decoders_replicate_their_kv_heads_four_ways() {
    // 4 query heads, 2 K/V heads: at N=4 each K/V head is computed on two ranks.
    for name in ["llama_decoder", "hf_llama_decoder"] {
        let m = prefill(name);
        let (g, _) = specialized(&m);
        let s = shard(&g, 4).unwrap_or_else(|e| panic!("{name}: {e}"));
        let caches: Vec<_> = s
            .outputs
            .iter()
            .filter(|p| **p != Placement::Gathered)
            .collect();
        assert_eq!(caches.len(), 4, "{name}: {:?}", s.outputs);
        for p in caches {
            assert_eq!(*p, Placement::Split { axis: 1, blocks: 2 }, "{name}");
        }
        assert_eq!(check(name, &m, 4), (4, 1), "{name}");
    }
}

/// Decoder `name` as one decode step: BATCH rows of one token after `past` cached ones,
/// the caches graph inputs.
fn decode_step(name: &str, past: u64) -> (Verified, Vec<Tensor>) {
    let m = load("decoders", name);
    let bind: BTreeMap<String, u64> = [
        ("batch_size", BATCH as u64),
        ("sequence_length", 1),
        ("past_sequence_length", past),
        ("past_sequence_length + sequence_length", past + 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    specialized_to(&m, bind)
}

#[test]
fn a_decode_step_reads_and_keeps_its_cache_shard() {
    for name in ["llama_decoder", "hf_llama_decoder"] {
        let (g, inputs) = decode_step(name, 5);
        for ranks in [2, 4] {
            let s = shard(&g, ranks).unwrap_or_else(|e| panic!("{name} x{ranks}: {e}"));
            // The four past caches arrive split by K/V head (2 of them), the presents
            // stay so; ids, mask and positions are whole.
            let split = Placement::Split { axis: 1, blocks: 2 };
            let n = |ps: &[Placement]| ps.iter().filter(|p| **p == split).count();
            assert_eq!((n(&s.inputs), n(&s.outputs)), (4, 4), "{name} x{ranks}");
            assert_eq!(s.gathered, ["logits"], "{name} x{ranks}");
            assert_eq!(
                check_graph(name, &g, &inputs, ranks),
                (4, 1),
                "{name} x{ranks}"
            );
        }
    }
}

#[test]
fn one_rank_keeps_the_structure_with_one_rank_collectives() {
    // The multi-GPU path on one GPU: the same split products, each collective over one
    // rank, and the outputs unchanged.
    let m = load("models", "gpt2_small");
    let (g, inputs) = specialized(&m);
    let s = shard(&g, 1).expect("one rank");
    assert_eq!(s.ranks.len(), 1);
    assert_eq!(s.row.len(), shard(&g, 2).expect("two ranks").row.len());
    assert!(s.inputs.iter().all(|p| *p == Placement::Whole));
    let (reduces, gathers) = check_graph("gpt2_small x1", &g, &inputs, 1);
    assert!(reduces > 0, "no AllReduce at one rank");
    assert!(gathers <= 1, "{gathers} AllGathers");
}

#[test]
fn dims_that_do_not_divide_are_named() {
    // BERT: 3 heads over 2 ranks (its 333-wide MLP does not divide either).
    let (g, _) = specialized(&load("models", "bert_small"));
    let e = shard(&g, 2).expect_err("3 heads, 2 ranks");
    assert!(matches!(e, ShardError::Indivisible { ranks: 2, .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("333") || msg.contains("(3)"), "{msg}");
    // Llama: 4 query heads over 8 ranks (its 2 K/V heads would replicate).
    let (g, _) = specialized(&prefill("llama_decoder"));
    let msg = shard(&g, 8)
        .expect_err("4 query heads, 8 ranks")
        .to_string();
    assert!(msg.contains("(4)") && msg.contains("8 ranks"), "{msg}");
    // 2 K/V heads over 3 ranks: neither divides the other (nor do the 64 columns).
    let e = shard(&g, 3).expect_err("2 K/V heads, 3 ranks");
    assert!(matches!(e, ShardError::Indivisible { ranks: 3, .. }), "{e}");
    // Zero ranks.
    assert!(matches!(shard(&g, 0), Err(ShardError::NoRanks)));
}

/// Decoder `name`'s generation `step` as `gopt generate` compiles it (fp32 caches):
/// the exported graph specialized and lowered by the decoder pass, with inputs (token
/// ids, positions, a mask of ones, write position 5, caches in [-1, 1)).
fn generation_step(name: &str, step: Step) -> (Verified, Vec<Tensor>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/decoders")
        .join(name)
        .join("model.onnx");
    let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let d = gopt::passes::decoder::detect(&model.model.graph).expect("a decoder");
    let g = gopt::prepare(&model.model, &d.bindings(step)).expect("prepare");
    let g = d.lower(&g, step, DType::F32).expect("lower");
    let inputs = inputs_for(&g, |name, dtype, n, last| match name {
        "input_ids" => (0..n).map(|i| ((i * 7 + 3) % 11) as f64).collect(),
        "position_ids" if matches!(step, Step::Decode { .. }) => vec![5.0; n],
        "position_ids" => (0..n).map(|i| (i % last) as f64).collect(),
        CACHE_POSITION => vec![5.0; n],
        m if m.contains("mask") => vec![1.0; n],
        _ if dtype == DType::F32 => (0..n)
            .map(|i| ((i * 37 + 11) % 500) as f64 / 250.0 - 1.0)
            .collect(),
        _ => vec![0.0; n],
    });
    (g, inputs)
}

#[test]
fn generation_steps_keep_each_ranks_cache() {
    let prefill = Step::Prefill { batch: 2, seq: 8 };
    let decode = Step::Decode {
        batch: 2,
        context: 16,
    };
    for name in [
        "llama_decoder",
        "hf_llama_decoder",
        "scatter_decoder",
        "gpt2_decoder",
    ] {
        for step in [prefill, decode] {
            let (g, inputs) = generation_step(name, step);
            let presents: HashSet<ValueId> = g.outputs[1..].iter().copied().collect();
            // GPT-2's 3 heads split 3 ways; the Llama-style ones' 2 K/V heads are
            // replicated at 4.
            let ranks_to_try: &[usize] = if name.contains("gpt2") { &[3] } else { &[2, 4] };
            for &ranks in ranks_to_try {
                let what = format!("{name} {}", step.name());
                let s = shard_keeping(&g, ranks, &presents)
                    .unwrap_or_else(|e| panic!("{what} x{ranks}: {e}"));
                // Every present stays split by head on its ranks, the logits are
                // whole on every rank; a decode step reads its rank's heads of each
                // cache.
                assert!(
                    s.outputs[1..]
                        .iter()
                        .all(|p| matches!(p, Placement::Split { axis: 1, .. })),
                    "{what} x{ranks}: {:?}",
                    s.outputs
                );
                // (GPT-2's tied LM head: 500 columns do not divide by 3, so it stays
                // whole.)
                assert!(
                    matches!(s.outputs[0], Placement::Gathered | Placement::Whole),
                    "{what} x{ranks}"
                );
                let split_in = s
                    .inputs
                    .iter()
                    .filter(|p| matches!(p, Placement::Split { axis: 1, .. }))
                    .count();
                // The caches a step reads: decode's, and the fixed-size ones of the
                // scatter form in its prompt too.
                let want_in = g
                    .inputs
                    .iter()
                    .filter(|&&v| g.value(v).name.starts_with("past_key_values"))
                    .count();
                assert_eq!(split_in, want_in, "{what} x{ranks}: {:?}", s.inputs);
                let (reduces, _) = check_keeping(&what, &g, &inputs, ranks, &presents);
                assert!(reduces >= 2, "{what} x{ranks}: {reduces} AllReduce");
            }
        }
    }
}

/// Greedy generation on the CPU with its steps split `ranks` ways (the ranks simulated
/// together on the interpreter, each holding its K/V heads of the cache) chooses the
/// same tokens as the unsplit generator, every step's logits within 1e-4 of the
/// largest.
#[test]
fn split_generation_matches_one_device() {
    use gopt::generate::{GenerateOptions, Generator, Request};
    let prompts = vec![vec![5, 17, 42, 7, 99], vec![3, 1, 400, 12, 8, 250, 77, 31]];
    use gopt::passes::quantize::{Quantize, Scheme};
    let int = |scheme, group, asymmetric| {
        Some(Quantize {
            group,
            asymmetric,
            ..Quantize::new(scheme)
        })
    };
    // Quantized weights are cut with their scales: the Llama decoder's 64 output
    // projection rows lie in one group of 128 (each rank takes its scales) or are whole
    // groups of 16; its 176 MLP rows straddle groups either way, so its MLP stays whole.
    let cases = [
        ("llama_decoder", 2, None),
        ("llama_decoder", 4, None),
        ("hf_llama_decoder", 2, None),
        ("scatter_decoder", 2, None),
        ("gpt2_decoder", 3, None),
        ("llama_decoder", 2, int(Scheme::Int8, 128, false)),
        ("llama_decoder", 4, int(Scheme::Int4, 128, true)),
        ("llama_decoder", 2, int(Scheme::Int4, 16, true)),
        ("hf_llama_decoder", 4, int(Scheme::Int8, 16, false)),
    ];
    for (name, ranks, quantize) in cases {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/decoders")
            .join(name)
            .join("model.onnx");
        let m = gopt::load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let run = |tp: Option<usize>| {
            let mut opts = gopt::Options::new().backend(gopt::Backend::Cpu);
            if let Some(q) = quantize {
                opts = opts.quantize(q);
            }
            let gen = GenerateOptions {
                max_context: 64,
                max_batch: 2,
                min_context: 32,
                tensor_parallel: tp,
                ..GenerateOptions::default()
            };
            let mut g = Generator::new(&m, &opts, &gen).unwrap_or_else(|e| panic!("{name}: {e}"));
            let req = Request {
                record_logits: true,
                ..Request::greedy(6)
            };
            let out = g
                .generate(&prompts, &req, |_, _| {})
                .unwrap_or_else(|e| panic!("{name} x{tp:?}: {e}"));
            // Both steps ran split: a graph per rank, each with its collectives.
            for c in g.compiled() {
                assert_eq!(
                    c.rest.len() + 1,
                    tp.unwrap_or(1),
                    "{name} {}",
                    c.step.name()
                );
                let reduces = collectives(&c.variant.graph).len();
                assert_eq!(reduces > 0, tp.is_some(), "{name} {}", c.step.name());
            }
            out
        };
        let (one, split) = (run(None), run(Some(ranks)));
        assert_eq!(one.tokens, split.tokens, "{name} x{ranks}");
        assert_eq!(one.logits.len(), split.logits.len(), "{name} x{ranks}");
        for (step, (a, b)) in one.logits.iter().zip(&split.logits).enumerate() {
            for (row, (a, b)) in a.iter().zip(b).enumerate() {
                let scale = a.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
                let worst = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
                assert!(
                    worst <= 1e-4 * scale,
                    "{name} x{ranks}: step {step} row {row}: {worst:.3e} of {scale:.3e}"
                );
            }
        }
    }
}
