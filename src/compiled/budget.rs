//! `--memory-budget` ([`crate::Options::memory_budget`]): each bucket's peak device
//! memory predicted from its plan ([`gopt_runtime::peak`]), before any kernel is
//! compiled, and the buckets that do not fit dropped with the reason.
//!
//! The budget covers what a run of the compiled model can hold at once. A run uploads
//! the weights once and keeps every bucket's executor it has loaded (see `device`), so
//! the kept buckets must fit together: the weights and the once-per-process costs
//! once, plus each kept bucket's own arena, workspace, modules and graph. Buckets are
//! taken smallest first (by what each adds), so a budget keeps as many as fit.

use super::{bucket_name, BackendPlan, Compiled, Skipped};
use crate::pipeline::Backend;
use crate::{GoptError, Result};
use gopt_ir::limit::fmt_short;
use gopt_passes::Budgets;
use gopt_runtime::peak::{self, all_loaded, PeakMemory};

impl Compiled {
    /// Bucket `i`'s predicted peak device memory (its plan run with the model's whole
    /// weights, as the first bucket a process loads); `None` on the CPU or for no such
    /// bucket.
    pub fn predicted_peak(&self, i: usize) -> Option<PeakMemory> {
        match &self.buckets.get(i)?.plan {
            BackendPlan::Cpu => None,
            BackendPlan::Cuda(p) => Some(peak::cuda(p, self.weights.len())),
            BackendPlan::Wgpu(p) => Some(peak::wgpu(p)),
        }
    }

    /// The predicted peak of a run that loads every bucket (`None` on the CPU).
    pub fn predicted_peak_all(&self) -> Option<u64> {
        let peaks: Option<Vec<PeakMemory>> = (0..self.buckets.len())
            .map(|i| self.predicted_peak(i))
            .collect();
        peaks.map(|p| all_loaded(&p))
    }

    /// Keeps the buckets whose predicted peaks fit `opts.memory_budget` together and
    /// skips the others with the reason; the kept ones are planned again into a fresh
    /// weights store, so the artifact holds only their weights. An error when no
    /// bucket fits, or when the backend has no device memory to budget.
    pub(super) fn apply_memory_budget(&mut self, budgets: Budgets) -> Result<()> {
        let Some(budget) = self.opts.get_memory_budget() else {
            return Ok(());
        };
        if self.opts.get_backend() == Backend::Cpu {
            return Err(GoptError::Usage(
                "--memory-budget predicts GPU memory: compile for CUDA or wgpu (--target \
                 cuda|wgsl)"
                    .into(),
            ));
        }
        let peaks = (0..self.buckets.len())
            .map(|i| {
                self.predicted_peak(i).ok_or_else(|| {
                    GoptError::Usage(format!(
                        "bucket {}: --memory-budget needs a GPU plan",
                        self.buckets[i].name()
                    ))
                })
            })
            .collect::<Result<Vec<PeakMemory>>>()?;
        let keep = choose(&peaks, budget);
        if keep.iter().all(|&k| k) {
            return Ok(());
        }
        if !keep.iter().any(|&k| k) {
            return Err(smallest(self, &peaks, budget));
        }
        let kept: Vec<PeakMemory> = keep
            .iter()
            .zip(&peaks)
            .filter(|(k, _)| **k)
            .map(|(_, p)| *p)
            .collect();
        let buckets = std::mem::take(&mut self.buckets);
        self.weights = gopt_codegen::plan::WeightStore::default();
        self.release_gpu();
        for ((b, peak), k) in buckets.into_iter().zip(&peaks).zip(&keep) {
            if !*k {
                self.skipped.push(Skipped {
                    reason: dropped_reason(peak, &kept, budget),
                    sizes: b.sizes,
                });
                continue;
            }
            let Some(v) = b.variant else {
                return Err(GoptError::Usage(format!(
                    "bucket {}: --memory-budget needs the bucket's graph (a compile, not a \
                     loaded artifact)",
                    b.name()
                )));
            };
            self.plan_bucket(&b.sizes, v, budgets)?;
        }
        Ok(())
    }
}

/// Which buckets to keep: smallest own part first, each kept while the kept set's
/// [`all_loaded`] stays within `budget`.
fn choose(peaks: &[PeakMemory], budget: u64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..peaks.len()).collect();
    order.sort_by_key(|&i| (peaks[i].own(), i));
    let mut keep = vec![false; peaks.len()];
    let mut kept: Vec<PeakMemory> = Vec::new();
    for i in order {
        kept.push(peaks[i]);
        if all_loaded(&kept) <= budget {
            keep[i] = true;
        } else {
            kept.pop();
        }
    }
    keep
}

/// Why a bucket was dropped: its peak against the budget, alone or with the kept ones.
fn dropped_reason(peak: &PeakMemory, kept: &[PeakMemory], budget: u64) -> String {
    let short = |n: u64| fmt_short(u128::from(n));
    let alone = peak.total();
    if alone > budget {
        return format!(
            "does not fit --memory-budget {}: predicted peak {} ({})",
            short(budget),
            short(alone),
            peak.breakdown()
        );
    }
    let mut with = kept.to_vec();
    with.push(*peak);
    format!(
        "does not fit --memory-budget {} with the {} bucket(s) kept: predicted peak {} \
         alone ({}), {} with them",
        short(budget),
        kept.len(),
        short(alone),
        peak.breakdown(),
        short(all_loaded(&with))
    )
}

/// The error when no bucket fits: the one with the smallest peak and its breakdown.
fn smallest(c: &Compiled, peaks: &[PeakMemory], budget: u64) -> GoptError {
    let best = (0..peaks.len()).min_by_key(|&i| (peaks[i].total(), i));
    match best {
        Some(i) => GoptError::MemoryBudget {
            budget,
            bucket: bucket_name(&c.buckets[i].sizes),
            peak: peaks[i],
        },
        None => GoptError::Usage("--memory-budget: the compile has no bucket".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peak(arena_mib: u64) -> PeakMemory {
        PeakMemory {
            weights: 10 << 20,
            arena: arena_mib << 20,
            workspace: 32 << 20,
            ..PeakMemory::default()
        }
    }

    #[test]
    fn the_smallest_buckets_are_kept_while_they_fit_together() {
        // Shared 10 MiB; each adds 32 MiB + its arena.
        let peaks = [peak(40), peak(1), peak(8)];
        // 10 + 33 + 40 = 83 MiB: the two smallest fit, the third would take 155.
        assert_eq!(choose(&peaks, 90 << 20), vec![false, true, true]);
        assert_eq!(choose(&peaks, 155 << 20), vec![true, true, true]);
        assert_eq!(choose(&peaks, 42 << 20), vec![false, false, false]);
        assert_eq!(choose(&peaks, 43 << 20), vec![false, true, false]);
    }

    #[test]
    fn a_dropped_bucket_says_whether_it_fits_alone() {
        let kept = [peak(1)];
        let alone = dropped_reason(&peak(100), &kept, 100 << 20);
        assert!(alone.starts_with("does not fit --memory-budget 100.00 MiB: predicted peak 142.00 MiB (weights 10.00 MiB, arena 100.00 MiB, workspace 32.00 MiB)"), "{alone}");
        let together = dropped_reason(&peak(8), &kept, 60 << 20);
        assert!(together.contains("with the 1 bucket(s) kept"), "{together}");
        assert!(together.ends_with("83.00 MiB with them"), "{together}");
    }
}
