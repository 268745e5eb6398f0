//! The process's GPU: opened once on first use and shared by every compiled model (a
//! context per process, as CUDA intends); a machine without one gets
//! `RuntimeError::NoCuda`.

use crate::Result;
use gopt_runtime::cuda::Device;
use std::sync::{Arc, Mutex};

/// The process's GPU (opened on first use).
pub fn device() -> Result<Arc<Device>> {
    static DEV: Mutex<Option<Arc<Device>>> = Mutex::new(None);
    let mut d = DEV.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = &*d {
        return Ok(d.clone());
    }
    let dev = Arc::new(Device::open()?);
    *d = Some(dev.clone());
    Ok(dev)
}
