//! Tensor parallelism on the CPU: the sharding pass (`gopt_passes::shard`) splits the
//! shipped models (GPT-2 with its merged Q/K/V Gemm, BERT, the Llama decoders with
//! grouped-query heads, RMSNorm, rotary and SwiGLU) N ways, and the N rank graphs run
//! together in the interpreter (`gopt_ir::ops::collective::simulate`, each AllReduce a
//! sum of the ranks' inputs, each AllGather their concatenation) must give the
//! unsharded graph's outputs on every rank: fp32, the largest error within 1e-4 of the
//! output's largest magnitude. Dims that do not divide are errors naming the dim.

use gopt::ir::ops::collective::simulate;
use gopt::ir::{Dim, Model, Tensor, Verified};
use gopt::passes::shard::{collectives, shard, ShardError};
use std::collections::BTreeMap;
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
    let bindings = bind.into_iter().collect();
    let g = gopt::prepare(m, &bindings).expect("prepare");
    let inputs = g
        .inputs
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
            let data: Vec<f64> = if val.name.contains("mask") {
                vec![1.0; n]
            } else {
                (0..n).map(|i| ((i * 37 + 11) % 500) as f64).collect()
            };
            Tensor::from_f64s(ty.dtype, &shape, &data).expect("input")
        })
        .collect();
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

/// Shards `m` `ranks` ways, runs the ranks together and compares every rank's outputs
/// with the unsharded graph's; returns the AllReduce and AllGather counts of rank 0.
fn check(what: &str, m: &Model, ranks: usize) -> (usize, usize) {
    let (g, inputs) = specialized(m);
    let want = gopt::ir::interp::run(&g, &inputs).unwrap_or_else(|e| panic!("{what}: {e}"));
    let s = shard(&g, ranks).unwrap_or_else(|e| panic!("{what} x{ranks}: {e}"));
    assert_eq!(s.ranks.len(), ranks);
    let graphs: Vec<gopt::ir::Graph> = s.ranks.iter().map(|r| gopt::ir::Graph::clone(r)).collect();
    let outs = simulate(&graphs, &inputs).unwrap_or_else(|e| panic!("{what} x{ranks}: {e}"));
    for (r, got) in outs.iter().enumerate() {
        assert_eq!(got.len(), want.len());
        for (k, (o, w)) in got.iter().zip(&want).enumerate() {
            let e = rel_max(o, w);
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
        // The logits and the four present K/V caches are gathered.
        assert_eq!((reduces, gathers), (4, 5), "{name}");
    }
}

#[test]
fn one_rank_is_the_identity() {
    let m = load("models", "gpt2_small");
    let (g, _) = specialized(&m);
    let s = shard(&g, 1).expect("one rank");
    assert_eq!(s.ranks.len(), 1);
    assert_eq!(*s.ranks[0], *g);
    assert!(collectives(&s.ranks[0]).is_empty());
}

#[test]
fn dims_that_do_not_divide_are_named() {
    // BERT: 3 heads over 2 ranks (its 333-wide MLP does not divide either).
    let (g, _) = specialized(&load("models", "bert_small"));
    let e = shard(&g, 2).expect_err("3 heads, 2 ranks");
    assert!(matches!(e, ShardError::Indivisible { ranks: 2, .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("333") || msg.contains("(3)"), "{msg}");
    // Llama: 2 K/V heads over 4 ranks.
    let (g, _) = specialized(&prefill("llama_decoder"));
    let msg = shard(&g, 4).expect_err("2 K/V heads, 4 ranks").to_string();
    assert!(msg.contains("(2)") && msg.contains("4 ranks"), "{msg}");
    // Zero ranks.
    assert!(matches!(shard(&g, 0), Err(ShardError::NoRanks)));
}
