//! The process's wgpu device (opened on first use per adapter choice and shared by every
//! compiled model) and the `--backend auto` choice: CUDA when a GPU with its driver,
//! NVRTC and cuBLASLt answers, else wgpu when an adapter exists (lavapipe counts: it
//! runs the same shaders on the CPU), else the CPU interpreter, with the reason for
//! each step down.

use crate::pipeline::Backend;
use crate::Result;
use gopt_runtime::wgsl::WgpuDevice;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The wgpu device on the adapter `name` picks (opened on first use).
pub fn device(name: Option<&str>) -> Result<Arc<WgpuDevice>> {
    static DEVS: Mutex<Option<HashMap<Option<String>, Arc<WgpuDevice>>>> = Mutex::new(None);
    let mut d = DEVS.lock().unwrap_or_else(|e| e.into_inner());
    let map = d.get_or_insert_with(HashMap::new);
    let key = name.map(str::to_string);
    if let Some(dev) = map.get(&key) {
        return Ok(dev.clone());
    }
    let dev = Arc::new(WgpuDevice::open(name)?);
    map.insert(key, dev.clone());
    Ok(dev)
}

/// What `--backend auto` runs on, and why (one line per backend tried).
pub fn auto(adapter: Option<&str>) -> (Backend, Vec<String>) {
    let mut why = Vec::new();
    match crate::cuda::device() {
        Ok(_) => return (Backend::Cuda, why),
        Err(e) => why.push(format!("auto passed over cuda: {e}")),
    }
    match device(adapter) {
        Ok(_) => return (Backend::Wgpu, why),
        Err(e) => why.push(format!("auto passed over wgpu: {e}")),
    }
    (Backend::Cpu, why)
}
