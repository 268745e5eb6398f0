//! The tensor-parallel executor: one thread per GPU, each owning its rank's
//! [`Executable`] (built on GPU r as the single-GPU path builds one), all ranks'
//! NCCL communicators made once and joined to them, and every run sent to all ranks at
//! once: their collectives wait for each other inside the captured CUDA graphs.
//!
//! No rank is left waiting for one that failed: the ranks answer on one channel, and
//! the first error (or panic) aborts every communicator, which ends the collectives
//! the others are blocked in; the error names the rank. An aborted executor refuses
//! further runs. There is no barrier between the threads besides the collectives.

use super::collective::{Comms, RankComm};
use super::exec::{gpu_lock, Executable, Weights};
use super::nccl::check_ranks;
use super::Device;
use crate::{Result, RuntimeError};
use gopt_codegen::cuda::plan::CudaPlan;
use gopt_ir::Tensor;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// What a rank's thread is asked to do.
enum Cmd {
    /// Join the communicators.
    Join(RankComm),
    /// Copy the inputs in, run `times` times, wait; read the outputs back with `true`.
    Run(Arc<Vec<Tensor>>, usize, bool),
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

/// A tensor-parallel model loaded on `ranks` GPUs.
pub struct Ranks {
    senders: Vec<Sender<Cmd>>,
    answers: Receiver<Answer>,
    threads: Vec<JoinHandle<()>>,
    comms: Arc<Comms>,
}

impl Ranks {
    /// Checks the machine (driver, a GPU per rank, NCCL), then builds rank r's
    /// executable on GPU r in thread r and joins all ranks to one set of communicators.
    pub fn load(plans: Vec<RankPlan>, use_graph: bool) -> Result<Ranks> {
        let n = plans.len();
        check_ranks(n)?;
        let _gpu = gpu_lock();
        let (answer_tx, answers) = channel();
        let mut senders = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for (r, p) in plans.into_iter().enumerate() {
            let (tx, rx) = channel();
            let answer = answer_tx.clone();
            let t = std::thread::Builder::new()
                .name(format!("gopt-rank{r}"))
                .spawn(move || worker(r, p, use_graph, rx, answer))
                .map_err(|e| RuntimeError::Usage(format!("starting rank {r}'s thread: {e}")))?;
            senders.push(tx);
            threads.push(t);
        }
        drop(answer_tx);
        // Each thread answers once it has built its executable.
        let built = collect(&answers, n, None);
        let comms = match built.and_then(|_| Comms::new(n)) {
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
        let joined = ranks.all(|r| {
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

    /// How many ranks.
    pub fn ranks(&self) -> usize {
        self.senders.len()
    }

    /// One run: `inputs` copied to every rank (replicated), executed, rank 0's outputs
    /// read back.
    pub fn run(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let inputs = Arc::new(inputs);
        let _gpu = gpu_lock();
        let mut outs = self.all(|r| Cmd::Run(inputs.clone(), 1, r == 0))?;
        outs.swap_remove(0)
            .ok_or_else(|| RuntimeError::Cuda("rank 0 returned no outputs".into()))
    }

    /// Wall-clock milliseconds per run over `iters` runs of every rank (after `warmup`
    /// runs, the first capturing the graphs), inputs copied in once per batch of runs.
    pub fn time(&self, inputs: Vec<Tensor>, warmup: usize, iters: usize) -> Result<f64> {
        let inputs = Arc::new(inputs);
        let _gpu = gpu_lock();
        self.all(|_| Cmd::Run(inputs.clone(), warmup.max(1), false))?;
        let t = Instant::now();
        self.all(|_| Cmd::Run(inputs.clone(), iters.max(1), false))?;
        Ok(t.elapsed().as_secs_f64() * 1e3 / iters.max(1) as f64)
    }

    /// Sends every rank its command (the caller holds [`gpu_lock`]) and collects the
    /// answers in rank order; the first failure aborts the communicators (so no rank
    /// keeps waiting in a collective) and is returned, naming its rank.
    fn all(&self, cmd: impl Fn(usize) -> Cmd) -> Result<Vec<Option<Vec<Tensor>>>> {
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

/// Rank `r`'s thread: builds its executable on GPU r, answers, then serves commands
/// until the executor is dropped. A panic becomes an error answer.
fn worker(r: usize, p: RankPlan, use_graph: bool, rx: Receiver<Cmd>, answer: Sender<Answer>) {
    let guard = |f: &mut dyn FnMut() -> Result<Option<Vec<Tensor>>>| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(RuntimeError::Usage(format!("rank {r}'s thread panicked"))))
    };
    let mut exe = None;
    let built = guard(&mut || {
        let dev = Device::open_ordinal(r)?;
        let w = Weights::upload(&dev, &p.weights)?;
        exe = Some(Executable::new(&dev, p.plan.clone(), w, use_graph)?);
        Ok(None)
    });
    let failed = built.is_err();
    if answer.send((r, built)).is_err() || failed {
        return;
    }
    let Some(mut exe) = exe else { return };
    while let Ok(cmd) = rx.recv() {
        let a = guard(&mut || match &cmd {
            Cmd::Join(c) => exe.join(c.clone()).map(|_| None),
            Cmd::Run(inputs, times, read) => {
                exe.set_inputs(inputs)?;
                for _ in 0..*times {
                    exe.execute_locked()?;
                }
                match read {
                    true => exe.outputs().map(Some),
                    false => exe.finish().map(|_| None),
                }
            }
        });
        if answer.send((r, a)).is_err() {
            return;
        }
    }
}
