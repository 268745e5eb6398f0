//! The tensor-parallel executor: one thread per GPU, each owning its rank's state
//! ([`Rank`]: its device, weights and executables, built on GPU r as the single-GPU
//! path builds them), all ranks' NCCL communicators made once and joined to them, and
//! every command sent to all ranks at once: their collectives wait for each other
//! inside the captured CUDA graphs. A command is a job run on each rank's thread
//! ([`Ranks::each`]), so a one-shot model ([`Ranks::load`], [`Ranks::run`]) and a
//! generation (prefill and decode steps sharing weights, the caches staying on their
//! ranks) drive the same machinery.
//!
//! No rank is left waiting for one that failed: the ranks answer on one channel, and
//! the first error (or panic) aborts every communicator, which ends the collectives
//! the others are blocked in; the error names the rank. An aborted executor refuses
//! further runs. There is no barrier between the threads besides the collectives.

use super::collective::{Comms, RankComm};
use super::exec::{gpu_lock, Executable, Weights};
use super::nccl::check_ranks;
use super::{Device, TuneOptions};
use crate::{Result, RuntimeError};
use gopt_codegen::cuda::plan::CudaPlan;
use gopt_ir::Tensor;
use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Work for one rank, run on its thread under the caller's [`gpu_lock`] (so it uses
/// [`Rank::execute`], not [`Executable::execute`]); it may return tensors.
pub type Job = Box<dyn FnOnce(&mut Rank) -> Result<Option<Vec<Tensor>>> + Send>;

/// What a rank's thread is asked to do.
enum Cmd {
    /// Join the communicators.
    Join(RankComm),
    /// Run a job.
    Job(Job),
}

/// A rank's answer: its index and what it returned (outputs when asked).
type Answer = (usize, Result<Option<Vec<Tensor>>>);

/// One rank's plan and weights.
pub struct RankPlan {
    /// The rank's CUDA plan.
    pub plan: CudaPlan,
    /// Its weights blob.
    pub weights: Vec<u8>,
}

/// What rank r's thread holds: GPU r, the weights its plans share, its executables by
/// the caller's keys, its communicator.
pub struct Rank {
    /// This rank.
    pub rank: usize,
    dev: Device,
    weights: Option<Arc<Weights>>,
    exes: BTreeMap<usize, Executable>,
    comm: Option<RankComm>,
}

impl Rank {
    /// Uploads `blob` as the weights the executables added from now on read (those
    /// added before keep theirs).
    pub fn upload(&mut self, blob: &[u8]) -> Result<()> {
        self.weights = Some(Weights::upload(&self.dev, blob)?);
        Ok(())
    }

    /// Drops every executable (before new weights replace theirs).
    pub fn clear(&mut self) {
        self.exes.clear();
    }

    /// Whether an executable is loaded under `key`.
    pub fn has(&self, key: usize) -> bool {
        self.exes.contains_key(&key)
    }

    /// Builds `plan`'s executable on this rank's GPU with the uploaded weights, joins
    /// it to the communicators and captures its graph, under `key`.
    pub fn add(
        &mut self,
        key: usize,
        plan: CudaPlan,
        use_graph: bool,
        tuning: &TuneOptions,
    ) -> Result<()> {
        let weights = self.weights.clone().ok_or_else(|| {
            RuntimeError::Usage(format!("rank {}: no weights uploaded", self.rank))
        })?;
        let mut exe = Executable::with_tuning(&self.dev, plan, weights, use_graph, tuning)?;
        if let Some(c) = &self.comm {
            exe.join(c.clone())?;
        }
        exe.capture_locked()?;
        self.exes.insert(key, exe);
        Ok(())
    }

    /// The executable under `key`.
    pub fn exe(&mut self, key: usize) -> Result<&mut Executable> {
        let r = self.rank;
        self.exes
            .get_mut(&key)
            .ok_or_else(|| RuntimeError::Usage(format!("rank {r}: no executable {key} loaded")))
    }

    /// The executables under `a` and `b` (distinct keys) at once.
    pub fn two(&mut self, a: usize, b: usize) -> Result<(&mut Executable, &mut Executable)> {
        let r = self.rank;
        let (mut x, mut y) = (None, None);
        for (k, e) in self.exes.iter_mut() {
            if *k == a {
                x = Some(e);
            } else if *k == b {
                y = Some(e);
            }
        }
        match (x, y) {
            (Some(x), Some(y)) => Ok((x, y)),
            _ => Err(RuntimeError::Usage(format!(
                "rank {r}: executables {a} and {b} are not both loaded"
            ))),
        }
    }

    /// One run of the executable under `key` (its collectives meet the other ranks').
    pub fn execute(&mut self, key: usize) -> Result<()> {
        self.exe(key)?.execute_locked()
    }

    /// Waits for the executable under `key` to finish its runs and checks them.
    pub fn finish(&mut self, key: usize) -> Result<()> {
        self.exe(key)?.finish()
    }
}

/// A tensor-parallel model loaded on `ranks` GPUs.
pub struct Ranks {
    senders: Vec<Sender<Cmd>>,
    answers: Receiver<Answer>,
    threads: Vec<JoinHandle<()>>,
    comms: Arc<Comms>,
}

impl Ranks {
    /// Checks the machine (driver, a GPU per rank, NCCL), then opens GPU r in thread r
    /// for each of `n` ranks and joins them to one set of communicators; nothing is
    /// loaded yet.
    pub fn start(n: usize) -> Result<Ranks> {
        check_ranks(n)?;
        let _gpu = gpu_lock();
        let (answer_tx, answers) = channel();
        let mut senders = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for r in 0..n {
            let (tx, rx) = channel();
            let answer = answer_tx.clone();
            let t = std::thread::Builder::new()
                .name(format!("gopt-rank{r}"))
                .spawn(move || worker(r, rx, answer))
                .map_err(|e| RuntimeError::Usage(format!("starting rank {r}'s thread: {e}")))?;
            senders.push(tx);
            threads.push(t);
        }
        drop(answer_tx);
        // Each thread answers once it has opened its GPU.
        let opened = collect(&answers, n, None);
        let comms = match opened.and_then(|_| Comms::new(n)) {
            Ok(c) => c,
            Err(e) => {
                drop(senders);
                join_all(threads);
                return Err(e);
            }
        };
        let ranks = Ranks {
            senders,
            answers,
            threads,
            comms,
        };
        let joined = ranks.send(|r| {
            Cmd::Join(RankComm {
                comms: ranks.comms.clone(),
                rank: r,
            })
        });
        // Dropping `ranks` on an error takes the lock again.
        drop(_gpu);
        joined?;
        Ok(ranks)
    }

    /// [`Ranks::start`] with one plan per rank loaded (key 0), as `gopt run DIR` runs
    /// a tensor-parallel artifact.
    pub fn load(plans: Vec<RankPlan>, use_graph: bool) -> Result<Ranks> {
        let ranks = Ranks::start(plans.len())?;
        let tuning = TuneOptions::from_env();
        let mut plans: Vec<Option<RankPlan>> = plans.into_iter().map(Some).collect();
        ranks.each(|r| {
            let p = plans[r].take();
            let tuning = tuning.clone();
            Box::new(move |rank: &mut Rank| {
                let p = p.ok_or_else(|| RuntimeError::Usage("a rank's plan was taken".into()))?;
                rank.upload(&p.weights)?;
                rank.add(0, p.plan, use_graph, &tuning)?;
                Ok(None)
            })
        })?;
        Ok(ranks)
    }

    /// How many ranks.
    pub fn ranks(&self) -> usize {
        self.senders.len()
    }

    /// Runs `job(r)` on every rank r at once (under [`gpu_lock`]) and returns what each
    /// returned, in rank order; the first failure aborts the communicators and is
    /// returned, naming its rank.
    pub fn each(&self, mut job: impl FnMut(usize) -> Job) -> Result<Vec<Option<Vec<Tensor>>>> {
        let _gpu = gpu_lock();
        self.send(|r| Cmd::Job(job(r)))
    }

    /// One run of the plan loaded by [`Ranks::load`]: `inputs` copied to every rank
    /// (replicated), executed, rank 0's outputs read back.
    pub fn run(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let each = vec![inputs; self.ranks()];
        let read: Vec<bool> = (0..self.ranks()).map(|r| r == 0).collect();
        let mut outs = self.run_each(each, &read)?;
        outs.swap_remove(0)
            .ok_or_else(|| RuntimeError::Cuda("rank 0 returned no outputs".into()))
    }

    /// One run of the plan loaded by [`Ranks::load`], rank r on `inputs[r]` (its
    /// block of a split input); the outputs of each rank r with `read[r]`.
    pub fn run_each(
        &self,
        inputs: Vec<Vec<Tensor>>,
        read: &[bool],
    ) -> Result<Vec<Option<Vec<Tensor>>>> {
        if inputs.len() != self.ranks() || read.len() != self.ranks() {
            return Err(RuntimeError::Usage(format!(
                "{} input sets for {} ranks",
                inputs.len(),
                self.ranks()
            )));
        }
        let mut inputs: Vec<Option<Vec<Tensor>>> = inputs.into_iter().map(Some).collect();
        self.each(|r| {
            let ins = inputs[r].take().unwrap_or_default();
            let read = read[r];
            Box::new(move |rank: &mut Rank| {
                rank.exe(0)?.set_inputs(&ins)?;
                rank.execute(0)?;
                match read {
                    true => rank.exe(0)?.outputs().map(Some),
                    false => rank.finish(0).map(|_| None),
                }
            })
        })
    }

    /// Wall-clock milliseconds per run over `iters` runs of every rank (after `warmup`
    /// runs) of the plan loaded by [`Ranks::load`], rank r's inputs `inputs[r]`
    /// copied in once.
    pub fn time(&self, inputs: Vec<Vec<Tensor>>, warmup: usize, iters: usize) -> Result<f64> {
        if inputs.len() != self.ranks() {
            return Err(RuntimeError::Usage(format!(
                "{} input sets for {} ranks",
                inputs.len(),
                self.ranks()
            )));
        }
        let inputs: Vec<Arc<Vec<Tensor>>> = inputs.into_iter().map(Arc::new).collect();
        let runs = |times: usize| {
            self.each(|r| {
                let inputs = inputs[r].clone();
                Box::new(move |rank: &mut Rank| {
                    rank.exe(0)?.set_inputs(&inputs)?;
                    for _ in 0..times {
                        rank.execute(0)?;
                    }
                    rank.exe(0)?.finish().map(|_| None)
                })
            })
        };
        runs(warmup.max(1))?;
        let t = Instant::now();
        runs(iters.max(1))?;
        Ok(t.elapsed().as_secs_f64() * 1e3 / iters.max(1) as f64)
    }

    /// Sends every rank its command (the caller holds [`gpu_lock`]) and collects the
    /// answers in rank order; the first failure aborts the communicators (so no rank
    /// keeps waiting in a collective) and is returned, naming its rank.
    fn send(&self, mut cmd: impl FnMut(usize) -> Cmd) -> Result<Vec<Option<Vec<Tensor>>>> {
        if self.comms.aborted() {
            return Err(RuntimeError::Usage(
                "a rank failed earlier and the communicators were aborted; load the model again"
                    .into(),
            ));
        }
        for (r, s) in self.senders.iter().enumerate() {
            if s.send(cmd(r)).is_err() {
                self.comms.abort();
                return Err(RuntimeError::Usage(format!(
                    "rank {r}'s thread has stopped"
                )));
            }
        }
        collect(&self.answers, self.ranks(), Some(&self.comms))
    }
}

impl Drop for Ranks {
    fn drop(&mut self) {
        let _gpu = gpu_lock();
        self.senders.clear();
        join_all(std::mem::take(&mut self.threads));
    }
}

/// `n` answers, in rank order; on the first error `comms` (when made) are aborted and
/// the rest still awaited (they return once the abort ends their collectives).
fn collect(
    answers: &Receiver<Answer>,
    n: usize,
    comms: Option<&Arc<Comms>>,
) -> Result<Vec<Option<Vec<Tensor>>>> {
    let mut got: Vec<Option<Option<Vec<Tensor>>>> = (0..n).map(|_| None).collect();
    let mut first: Option<RuntimeError> = None;
    for _ in 0..n {
        let Ok((r, a)) = answers.recv() else {
            if let Some(c) = comms {
                c.abort();
            }
            return Err(first.unwrap_or_else(|| {
                RuntimeError::Usage("a rank's thread stopped without answering".into())
            }));
        };
        match a {
            Ok(v) => got[r] = Some(v),
            Err(e) => {
                if first.is_none() {
                    if let Some(c) = comms {
                        c.abort();
                    }
                    first = Some(named(r, e));
                }
            }
        }
    }
    match first {
        Some(e) => Err(e),
        None => Ok(got.into_iter().map(Option::flatten).collect()),
    }
}

/// `e` with rank `r` named (the same kind of error, so the exit status is the same;
/// a missing library or a memory refusal is the machine's, said as it is).
fn named(r: usize, e: RuntimeError) -> RuntimeError {
    match e {
        RuntimeError::Driver { what, msg } => RuntimeError::Driver {
            what: format!("{what} (rank {r})"),
            msg,
        },
        RuntimeError::Compile { what, log } => RuntimeError::Compile {
            what: format!("{what} (rank {r})"),
            log,
        },
        RuntimeError::Cuda(m) => RuntimeError::Cuda(format!("rank {r}: {m}")),
        RuntimeError::Wgpu(m) => RuntimeError::Wgpu(format!("rank {r}: {m}")),
        RuntimeError::IndexOutOfRange(m) => RuntimeError::IndexOutOfRange(format!("rank {r}: {m}")),
        RuntimeError::Usage(m) => RuntimeError::Usage(format!("rank {r}: {m}")),
        e
        @ (RuntimeError::NoCuda(_) | RuntimeError::NoAdapter { .. } | RuntimeError::Memory(_)) => e,
    }
}

fn join_all(threads: Vec<JoinHandle<()>>) {
    for t in threads {
        // A thread that panicked has already answered with an error.
        let _ = t.join();
    }
}

/// Rank `r`'s thread: opens GPU r, answers, then runs jobs until the executor is
/// dropped. A panic becomes an error answer.
fn worker(r: usize, rx: Receiver<Cmd>, answer: Sender<Answer>) {
    let guard = |f: &mut dyn FnMut() -> Result<Option<Vec<Tensor>>>| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(RuntimeError::Usage(format!("rank {r}'s thread panicked"))))
    };
    let mut dev = None;
    let opened = guard(&mut || {
        dev = Some(Device::open_ordinal(r)?);
        Ok(None)
    });
    let failed = opened.is_err();
    if answer.send((r, opened)).is_err() || failed {
        return;
    }
    let Some(dev) = dev else { return };
    let mut rank = Rank {
        rank: r,
        dev,
        weights: None,
        exes: BTreeMap::new(),
        comm: None,
    };
    while let Ok(cmd) = rx.recv() {
        let mut cmd = Some(cmd);
        let a = guard(&mut || match cmd.take() {
            Some(Cmd::Join(c)) => {
                for e in rank.exes.values_mut() {
                    e.join(c.clone())?;
                }
                rank.comm = Some(c);
                Ok(None)
            }
            Some(Cmd::Job(job)) => job(&mut rank),
            None => Ok(None),
        });
        if answer.send((r, a)).is_err() {
            return;
        }
    }
}
