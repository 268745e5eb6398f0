//! The CPU simulation of a multi-rank run: each rank's graph runs in the interpreter on
//! its own thread, and the collectives meet at a [`Rendezvous`] that hands every rank
//! all ranks' parts. It is how a sharded model is checked against the unsharded one
//! without GPUs.

use super::{with_exchange, Exchange};
use crate::error::{IrError, Result};
use crate::graph::Graph;
use crate::tensor::Tensor;
use std::borrow::Borrow;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Meets `ranks` threads once per collective: each contributes its part and leaves with
/// all of them. A rank that fails [aborts](Rendezvous::abort) it, so that the others
/// stop waiting and fail too instead of hanging.
pub struct Rendezvous {
    ranks: usize,
    state: Mutex<Round>,
    turn: Condvar,
}

#[derive(Default)]
struct Round {
    parts: Vec<Option<Tensor>>,
    /// Parts handed in this round.
    given: usize,
    /// Ranks that took the full set this round.
    taken: usize,
    /// All parts are in; ranks are taking them.
    full: bool,
    aborted: Option<String>,
}

impl Rendezvous {
    /// A rendezvous of `ranks` ranks.
    pub fn new(ranks: usize) -> Rendezvous {
        Rendezvous {
            ranks,
            state: Mutex::new(Round {
                parts: vec![None; ranks],
                ..Round::default()
            }),
            turn: Condvar::new(),
        }
    }

    /// Makes every waiting and later exchange fail with `why`.
    pub fn abort(&self, why: &str) {
        let mut s = self.lock();
        s.aborted.get_or_insert_with(|| why.to_string());
        self.turn.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, Round> {
        // A poisoned lock means a rank panicked: its round is lost either way.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, Round>) -> MutexGuard<'a, Round> {
        self.turn.wait(g).unwrap_or_else(|p| p.into_inner())
    }
}

fn aborted(why: &str) -> IrError {
    IrError::Invalid(format!("another rank failed: {why}"))
}

impl Exchange for Rendezvous {
    fn ranks(&self) -> usize {
        self.ranks
    }

    fn exchange(&self, rank: usize, part: Tensor) -> Result<Vec<Tensor>> {
        let mut s = self.lock();
        // Wait until the previous round has been taken by every rank.
        while s.full || s.parts.get(rank).is_some_and(Option::is_some) {
            if let Some(why) = &s.aborted {
                return Err(aborted(why));
            }
            s = self.wait(s);
        }
        if let Some(why) = &s.aborted {
            return Err(aborted(why));
        }
        let slot = s
            .parts
            .get_mut(rank)
            .ok_or_else(|| IrError::Invalid(format!("rank {rank} of {}", self.ranks)))?;
        *slot = Some(part);
        s.given += 1;
        if s.given == self.ranks {
            s.full = true;
            self.turn.notify_all();
        }
        while !s.full {
            if let Some(why) = &s.aborted {
                return Err(aborted(why));
            }
            s = self.wait(s);
        }
        let all: Vec<Tensor> = s.parts.iter().flatten().cloned().collect();
        s.taken += 1;
        if s.taken == self.ranks {
            *s = Round {
                parts: vec![None; self.ranks],
                aborted: s.aborted.take(),
                ..Round::default()
            };
            self.turn.notify_all();
        }
        Ok(all)
    }
}

/// Runs `graphs` (rank `r`'s graph at `r`) together on the CPU, each on `inputs`, each
/// rank's collectives exchanging with the others'; returns each rank's outputs.
pub fn simulate<G: Borrow<Graph> + Sync>(
    graphs: &[G],
    inputs: &[Tensor],
) -> Result<Vec<Vec<Tensor>>> {
    let each = vec![inputs.to_vec(); graphs.len()];
    simulate_each(graphs, &each)
}

/// [`simulate`] with each rank's own inputs at its index (a rank that reads its shard
/// of an input). The graphs are anything that lends a [`Graph`] (a `Verified` one).
pub fn simulate_each<G: Borrow<Graph> + Sync>(
    graphs: &[G],
    inputs: &[Vec<Tensor>],
) -> Result<Vec<Vec<Tensor>>> {
    if inputs.len() != graphs.len() {
        return Err(IrError::Invalid(format!(
            "{} ranks but {} input sets",
            graphs.len(),
            inputs.len()
        )));
    }
    let rv = Arc::new(Rendezvous::new(graphs.len()));
    std::thread::scope(|scope| {
        let handles: Vec<_> = graphs
            .iter()
            .enumerate()
            .map(|(rank, g)| {
                let rv = rv.clone();
                scope.spawn(move || {
                    let ex: Arc<dyn Exchange> = rv.clone();
                    let r =
                        with_exchange(ex, rank, || crate::interp::run(g.borrow(), &inputs[rank]));
                    if let Err(e) = &r {
                        rv.abort(&format!("rank {rank}: {e}"));
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(rank, h)| {
                h.join()
                    .unwrap_or_else(|_| Err(IrError::Invalid(format!("rank {rank} panicked"))))
            })
            .collect()
    })
}
