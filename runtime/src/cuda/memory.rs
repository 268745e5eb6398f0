//! Measuring the device memory a bucket really takes, phase by phase: the numbers
//! `gopt bench` prints beside the prediction of `gopt_runtime::peak`, and the
//! calibration data for that prediction's constants.
//!
//! A [`Probe`] reads the device's free memory (`cuMemGetInfo`, after synchronizing the
//! context, so pool allocations made on streams are counted) when it starts, then
//! again at the end of each phase the executor goes through: the weights upload, the
//! module load, the arena, the cuBLASLt handle and workspace, the status words, the
//! GEMMs' preparation, the CUDA graph's capture and upload, and any the caller marks
//! (the first runs). Each phase's delta is how much the free memory dropped during it;
//! the peak is the start minus the lowest free memory seen. The free memory is the
//! whole device's, so nothing else should run on it while a probe is active.
//!
//! The executor reports its phases to the probe active in the process, if any (one at
//! a time); without one they cost nothing.

use super::{drv, Device};
use crate::{Result, RuntimeError};
use cudarc::driver::CudaContext;
use std::sync::{Arc, Mutex, MutexGuard};

/// One phase: its name and how much the device's free memory dropped during it (in
/// bytes; negative when memory was given back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// `weights`, `modules`, `arena`, `cublaslt`, `status`, `gemms`, `graph`, or the
    /// caller's name.
    pub name: &'static str,
    /// Free memory at the phase's start minus at its end.
    pub bytes: i64,
}

/// What a probe measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Measured {
    /// Free memory when the probe started minus the lowest free memory it saw.
    pub peak_bytes: u64,
    /// The phases, in order.
    pub phases: Vec<Phase>,
}

struct State {
    ctx: Arc<CudaContext>,
    start_free: u64,
    last_free: u64,
    min_free: u64,
    phases: Vec<Phase>,
}

static ACTIVE: Mutex<Option<State>> = Mutex::new(None);

fn active() -> MutexGuard<'static, Option<State>> {
    ACTIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The device's free memory once the context's work (and its pool allocations) is done.
fn settled_free(ctx: &CudaContext) -> Result<u64> {
    ctx.synchronize()
        .map_err(drv("synchronizing to read the free device memory"))?;
    let (free, _total) = ctx
        .mem_get_info()
        .map_err(drv("reading the free device memory"))?;
    Ok(free as u64)
}

/// A memory measurement in progress (one per process at a time). Dropping it without
/// [`Probe::finish`] discards it.
pub struct Probe {
    _only_through_start: (),
}

impl Probe {
    /// Starts measuring on `dev` (whose context is open): the free memory now is the
    /// baseline. An error when another probe is active.
    pub fn start(dev: &Device) -> Result<Probe> {
        let mut a = active();
        if a.is_some() {
            return Err(RuntimeError::Usage(
                "a device memory probe is already active in this process".into(),
            ));
        }
        let free = settled_free(&dev.ctx)?;
        *a = Some(State {
            ctx: dev.ctx.clone(),
            start_free: free,
            last_free: free,
            min_free: free,
            phases: Vec::new(),
        });
        Ok(Probe {
            _only_through_start: (),
        })
    }

    /// Ends a phase the caller ran (`first run`): records how much free memory it took.
    pub fn mark(&self, name: &'static str) -> Result<()> {
        phase(name)
    }

    /// Ends the measurement.
    pub fn finish(self) -> Result<Measured> {
        let state = active().take().ok_or_else(|| {
            RuntimeError::Usage("the device memory probe was ended elsewhere".into())
        })?;
        Ok(Measured {
            peak_bytes: state.start_free.saturating_sub(state.min_free),
            phases: state.phases,
        })
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        active().take();
    }
}

/// Ends phase `name` of the active probe (nothing without one). Not to be called while
/// a stream is capturing: it synchronizes the context.
pub(crate) fn phase(name: &'static str) -> Result<()> {
    let mut a = active();
    let Some(state) = a.as_mut() else {
        return Ok(());
    };
    let free = settled_free(&state.ctx)?;
    let dropped = i128::from(state.last_free) - i128::from(free);
    state.phases.push(Phase {
        name,
        bytes: i64::try_from(dropped).unwrap_or(i64::MAX),
    });
    state.last_free = free;
    state.min_free = state.min_free.min(free);
    Ok(())
}
