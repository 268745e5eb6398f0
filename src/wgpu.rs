//! The process's wgpu device (opened on first use per adapter choice and shared by every
//! compiled model) and the `--backend auto` choice: CUDA when a GPU with its driver,
//! NVRTC and cuBLASLt answers, else wgpu when an adapter exists (lavapipe counts: it
//! runs the same shaders on the CPU), else the CPU interpreter, with the reason for
//! each step down. It also gives the Vulkan loader's window-system libraries a valid
//! `XDG_RUNTIME_DIR` ([`ensure_runtime_dir`]): without one they print `error:` lines
//! on stderr although nothing failed.

use crate::pipeline::Backend;
use crate::Result;
use gopt_runtime::wgpu::WgpuDevice;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The wgpu device on the adapter `name` picks (opened on first use).
pub fn device(name: Option<&str>) -> Result<Arc<WgpuDevice>> {
    static RUNTIME_DIR: std::sync::Once = std::sync::Once::new();
    RUNTIME_DIR.call_once(ensure_runtime_dir);
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

/// Points `XDG_RUNTIME_DIR` at a private (0700) folder under the temporary directory when
/// it is unset or not an absolute path to a folder: the Wayland client library the
/// Vulkan loader pulls in prints `error: XDG_RUNTIME_DIR is invalid or not set` on every
/// instance otherwise. Changes nothing when it is valid. Call it before other threads
/// start (the `gopt` binary does so first thing); [`device`] calls it once too.
pub fn ensure_runtime_dir() {
    let valid = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .is_some_and(|p| p.is_absolute() && p.is_dir());
    if valid {
        return;
    }
    if let Some(dir) = private_runtime_dir() {
        std::env::set_var("XDG_RUNTIME_DIR", dir);
    }
}

/// `gopt-runtime-<uid>` under the temporary directory, made 0700 and checked to be this
/// user's own folder (not a link someone else planted); a per-process folder if not.
#[cfg(unix)]
fn private_runtime_dir() -> Option<std::path::PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    // The owner of /proc/self is this process's user (Linux, where the Wayland client
    // library is); elsewhere the folder is per process.
    let uid = std::fs::metadata("/proc/self").ok().map(|m| m.uid());
    let tmp = std::env::temp_dir();
    let mine = |p: &std::path::Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| {
            m.file_type().is_dir()
                && uid.is_none_or(|u| m.uid() == u)
                && m.permissions().mode() & 0o077 == 0
        })
    };
    let mut candidates = Vec::new();
    if let Some(u) = uid {
        candidates.push(tmp.join(format!("gopt-runtime-{u}")));
    }
    candidates.push(tmp.join(format!("gopt-runtime-{}", std::process::id())));
    candidates.into_iter().find(|p| {
        let _ = std::fs::DirBuilder::new().mode(0o700).create(p);
        mine(p)
    })
}

#[cfg(not(unix))]
fn private_runtime_dir() -> Option<std::path::PathBuf> {
    None
}
