//! The tensor-parallel artifact from the command line: `compile -o` writes it
//! ([`write_artifact`]), `gopt run DIR` runs it ([`run_artifact`]: every file checked
//! against the manifest first, then the inputs replicated or scattered to the ranks as
//! the manifest says, outputs read from rank 0 or reassembled from the ranks' blocks) and `gopt bench DIR` times it against the same model on one GPU
//! ([`bench_artifact`]: throughput and scaling efficiency). A bucket is chosen by its
//! input shapes (`run`) or `--bind` (`bench`); there is no padding into a larger
//! bucket as the single-GPU artifact does.

use super::super::{fmt_duration, outln};
use super::TpArgs;
use anyhow::{bail, Context, Result};
use gopt::artifact::ranks::{self, Bucket, Manifest};
use gopt::runtime::cuda::ranks::{RankPlan, Ranks};
use gopt::{Executor, Tensor};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// `gopt bench DIR --json`.
#[derive(serde::Serialize)]
struct BenchReport {
    artifact: String,
    ranks: usize,
    bucket: String,
    batch: usize,
    iters: usize,
    timing: &'static str,
    ms_per_run: f64,
    samples_per_s: f64,
    one_gpu_ms_per_run: Option<f64>,
    one_gpu_samples_per_s: Option<f64>,
    speed_up: Option<f64>,
    scaling_efficiency: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    one_gpu_error: Option<String>,
}

/// Whether `path` is a tensor-parallel artifact (a folder with the manifest).
pub fn is_artifact(path: &Path) -> bool {
    path.is_dir() && path.join(ranks::MANIFEST).is_file()
}

/// Copies the model into `dir` and writes the manifest of the rank files there.
pub(super) fn write_artifact(
    dir: &Path,
    model: &Path,
    n: usize,
    inputs: Vec<ranks::Input>,
    outputs: Vec<ranks::Input>,
    buckets: Vec<Bucket>,
) -> Result<()> {
    ranks::write(dir, model, n, inputs, outputs, buckets)
        .with_context(|| format!("writing {}", dir.join(ranks::MANIFEST).display()))
}

/// The manifest, checked, and `--tensor-parallel` (when given) matched against it.
fn open(dir: &Path, tp: &TpArgs) -> Result<Manifest> {
    let m =
        ranks::read(dir).with_context(|| format!("cannot load the artifact {}", dir.display()))?;
    if let Some(n) = tp.tensor_parallel {
        if n as usize != m.ranks {
            bail!(
                "--tensor-parallel {n}: the artifact {} was compiled for {} ranks",
                dir.display(),
                m.ranks
            );
        }
    }
    Ok(m)
}

/// "1 rank on GPU 0", "2 ranks on GPUs 0..1".
fn on_gpus(ranks: usize) -> String {
    match ranks {
        1 => "1 rank on GPU 0".to_string(),
        n => format!("{n} ranks on GPUs 0..{}", n - 1),
    }
}

/// Every rank's plan and weights of bucket `b`, loaded on the GPUs.
fn load(dir: &Path, m: &Manifest, b: &Bucket) -> Result<Ranks> {
    let mut plans = Vec::with_capacity(m.ranks);
    for r in 0..m.ranks {
        plans.push(RankPlan {
            plan: ranks::plan(dir, b, r)?,
            weights: ranks::weights(dir, b, r)?,
        });
    }
    Ranks::load(plans, true).with_context(|| {
        format!(
            "cannot load the {} ranks of {} (bucket {})",
            m.ranks,
            dir.display(),
            b.dir
        )
    })
}

/// `gopt run DIR` of a tensor-parallel artifact: `given` are the inputs (named, or in
/// order); returns the outputs, their names and notes for the report. A split input
/// is scattered (each rank its block), a split output reassembled from its ranks.
pub fn run_artifact(
    dir: &Path,
    tp: &TpArgs,
    given: Vec<(Option<String>, Tensor)>,
) -> Result<(Vec<Tensor>, Vec<String>, Vec<String>)> {
    let m = open(dir, tp)?;
    let names: Vec<String> = m.inputs.iter().map(|i| i.name.clone()).collect();
    let inputs = order(&names, given)?;
    // Each rank's inputs: all of a replicated one, its block of a split one (a shape
    // that does not split is no bucket's).
    let per_rank: Vec<Option<Vec<Tensor>>> = (0..m.ranks)
        .map(|r| {
            inputs
                .iter()
                .zip(&m.inputs)
                .map(|(t, i)| i.distribution.placement().part(t, r, m.ranks).ok())
                .collect()
        })
        .collect();
    let mut shapes = Vec::new();
    for b in &m.buckets {
        let plan = ranks::plan(dir, b, 0)?;
        let fits = per_rank[0].as_ref().is_some_and(|ins| {
            plan.frame.inputs.len() == ins.len()
                && plan
                    .frame
                    .inputs
                    .iter()
                    .zip(ins)
                    .all(|(io, t)| io.dtype == t.dtype() && io.shape == t.shape())
        });
        if !fits {
            shapes.push(format!(
                "{}: {:?}",
                b.dir,
                plan.frame
                    .inputs
                    .iter()
                    .map(|i| &i.shape)
                    .collect::<Vec<_>>()
            ));
            continue;
        }
        let out_names: Vec<String> = plan.frame.outputs.iter().map(|o| o.name.clone()).collect();
        let placement = |k: usize| {
            m.outputs
                .iter()
                .find(|o| o.name == out_names[k])
                .map_or(gopt::passes::shard::Placement::Whole, |o| {
                    o.distribution.placement()
                })
        };
        let split_out =
            (0..out_names.len()).any(|k| placement(k) != gopt::passes::shard::Placement::Whole);
        let each: Vec<Vec<Tensor>> = per_rank.into_iter().flatten().collect();
        let read: Vec<bool> = (0..m.ranks).map(|r| r == 0 || split_out).collect();
        let ranks = load(dir, &m, b)?;
        let outs = ranks
            .run_each(each, &read)
            .context("the tensor-parallel run")?;
        let outs: Vec<Vec<Tensor>> = outs.into_iter().flatten().collect();
        let whole = (0..out_names.len())
            .map(|k| {
                let parts: Vec<Tensor> = outs.iter().map(|o| o[k].clone()).collect();
                placement(k)
                    .assemble(&parts)
                    .with_context(|| format!("reassembling output `{}`", out_names[k]))
            })
            .collect::<Result<Vec<Tensor>>>()?;
        let split: Vec<String> = m
            .inputs
            .iter()
            .chain(&m.outputs)
            .filter(|i| i.distribution != ranks::Distribution::Replicated)
            .map(|i| i.name.clone())
            .collect();
        let note = format!(
            "tensor parallel: {}, bucket {}; {}",
            on_gpus(m.ranks),
            b.dir,
            if split.is_empty() {
                "inputs replicated, outputs from rank 0".to_string()
            } else {
                format!(
                    "split over the ranks (scattered, reassembled): {}",
                    split.join(", ")
                )
            }
        );
        return Ok((whole, out_names, vec![note]));
    }
    bail!(
        "the inputs' shapes ({:?}) are no bucket's of {} (rank 0's input shapes by bucket: {})",
        inputs
            .iter()
            .map(|t| t.shape().to_vec())
            .collect::<Vec<_>>(),
        dir.display(),
        shapes.join("; ")
    )
}

/// `given` in the order of `names`: a named input to its slot, the others to the
/// free slots in turn.
fn order(names: &[String], given: Vec<(Option<String>, Tensor)>) -> Result<Vec<Tensor>> {
    let mut slots: Vec<Option<Tensor>> = names.iter().map(|_| None).collect();
    let mut unnamed = Vec::new();
    for (name, t) in given {
        match name {
            Some(n) => {
                let Some(i) = names.iter().position(|x| *x == n) else {
                    bail!("no input named `{n}` (the inputs: {})", names.join(", "));
                };
                if slots[i].replace(t).is_some() {
                    bail!("input `{n}` given twice");
                }
            }
            None => unnamed.push(t),
        }
    }
    let mut unnamed = unnamed.into_iter();
    for s in slots.iter_mut().filter(|s| s.is_none()) {
        *s = unnamed.next();
    }
    if unnamed.next().is_some() {
        bail!(
            "more inputs than the model's {} ({})",
            names.len(),
            names.join(", ")
        );
    }
    slots
        .into_iter()
        .zip(names)
        .map(|(s, n)| s.with_context(|| format!("input `{n}` not given")))
        .collect()
}

/// `gopt bench DIR` of a tensor-parallel artifact: the bucket `binds` select (every
/// `SYMBOL=SIZE` given must match; the first such bucket), timed on all ranks, then
/// its model on GPU 0 alone; prints both throughputs and the scaling efficiency.
pub fn bench_artifact(
    dir: &Path,
    tp: &TpArgs,
    binds: &[String],
    warmup: usize,
    iters: usize,
    opts: gopt::pipeline::Options,
    json: bool,
) -> Result<ExitCode> {
    let m = open(dir, tp)?;
    let want = super::parse_binds(binds)?;
    let Some(b) = m
        .buckets
        .iter()
        .find(|b| want.iter().all(|(k, v)| b.sizes.get(k) == Some(v)))
    else {
        let all: Vec<&str> = m.buckets.iter().map(|b| b.dir.as_str()).collect();
        bail!(
            "no bucket of {} matches --bind (buckets: {})",
            dir.display(),
            all.join(", ")
        );
    };
    let plan = ranks::plan(dir, b, 0)?;
    // The whole model's input shapes: a split input's axis is its blocks' together.
    let specs: Vec<_> = plan
        .frame
        .inputs
        .iter()
        .map(|io| {
            let mut shape = io.shape.clone();
            let d = m
                .inputs
                .iter()
                .find(|i| i.name == io.name)
                .map(|i| i.distribution);
            if let Some(ranks::Distribution::Split { axis, blocks }) = d {
                if let Some(n) = shape.get_mut(axis) {
                    *n *= blocks;
                }
            }
            (io.name.clone(), io.dtype, shape)
        })
        .collect();
    let limit = gopt::ir::limit::MemoryLimit::host(opts.get_memory_limit());
    let inputs = super::super::bench::random_inputs(&specs, &limit)?;
    let each: Vec<Vec<Tensor>> = (0..m.ranks)
        .map(|r| {
            inputs
                .iter()
                .zip(&m.inputs)
                .map(|(t, i)| i.distribution.placement().part(t, r, m.ranks))
                .collect::<std::result::Result<Vec<_>, _>>()
        })
        .collect::<std::result::Result<_, _>>()?;
    // Samples per run: the first input's first dim (the batch).
    let batch = specs
        .first()
        .and_then(|s| s.2.first().copied())
        .unwrap_or(1)
        .max(1);
    let say = |line: String| {
        if !json {
            outln!("{line}");
        }
    };
    say(format!(
        "tensor parallel: {}, bucket {}, batch {batch}",
        on_gpus(m.ranks),
        b.dir
    ));
    let t = Instant::now();
    let ranks = load(dir, &m, b)?;
    say(format!(
        "  loaded the ranks in {}",
        fmt_duration(t.elapsed())
    ));
    let ms = ranks.time(each, warmup, iters)?;
    drop(ranks);
    let per_s = |ms: f64| batch as f64 / (ms / 1e3);
    say(format!(
        "  {} ranks: {ms:.3} ms/run (wall clock over {iters} runs), {:.1} samples/s",
        m.ranks,
        per_s(ms)
    ));
    // The same bucket of the model on one GPU, compiled as `gopt bench` does.
    let one = (|| -> Result<f64> {
        let model = gopt::load_model(&dir.join(ranks::MODEL))?;
        let opts = opts.backend(gopt::Backend::Cuda);
        let mut c = gopt::compile_buckets(&model, &opts, std::slice::from_ref(&b.sizes), |_| {})?;
        let Executor::Cuda(exe) = c.executor(0)? else {
            bail!("the 1-GPU model has no CUDA executor");
        };
        exe.set_inputs(&inputs)?;
        exe.time(warmup, 1)?;
        // Wall clock over the runs, as the ranks are timed.
        let t = Instant::now();
        exe.time(0, iters.max(1))?;
        Ok(t.elapsed().as_secs_f64() * 1e3 / iters.max(1) as f64)
    })();
    let mut r = BenchReport {
        artifact: dir.display().to_string(),
        ranks: m.ranks,
        bucket: b.dir.clone(),
        batch,
        iters,
        timing: "wall clock over the runs, every rank finished",
        ms_per_run: ms,
        samples_per_s: per_s(ms),
        one_gpu_ms_per_run: None,
        one_gpu_samples_per_s: None,
        speed_up: None,
        scaling_efficiency: None,
        one_gpu_error: None,
    };
    match one {
        Ok(ms1) => {
            say(format!(
                "  1 GPU:   {ms1:.3} ms/run (wall clock), {:.1} samples/s",
                per_s(ms1)
            ));
            say(format!(
                "  scaling efficiency {:.1}% (throughput at {} ranks / ({} x 1 GPU)); speed-up {:.2}x",
                100.0 * per_s(ms) / (m.ranks as f64 * per_s(ms1)),
                m.ranks,
                m.ranks,
                ms1 / ms
            ));
            r.one_gpu_ms_per_run = Some(ms1);
            r.one_gpu_samples_per_s = Some(per_s(ms1));
            r.speed_up = Some(ms1 / ms);
            r.scaling_efficiency = Some(ms1 / ms / m.ranks as f64);
        }
        Err(e) => {
            say(format!(
                "  1 GPU: cannot run ({e:#}); no scaling efficiency"
            ));
            r.one_gpu_error = Some(format!("{e:#}"));
        }
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_put_in_the_models_order() {
        let names = ["a".to_string(), "b".to_string()];
        let t = |v: f32| Tensor::from_f64s(gopt::ir::DType::F32, &[1], &[v as f64]).expect("t");
        let got = order(&names, vec![(Some("b".into()), t(2.0)), (None, t(1.0))]).expect("order");
        assert_eq!(got, vec![t(1.0), t(2.0)]);
        assert!(order(&names, vec![(None, t(1.0))]).is_err());
        assert!(order(&names, vec![(Some("c".into()), t(1.0))]).is_err());
    }
}
