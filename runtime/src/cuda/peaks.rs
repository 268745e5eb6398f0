//! What the GPU itself can do, measured rather than looked up: the bandwidth of a
//! device-to-device copy (the memory roof a kernel's achieved bandwidth is compared
//! with) and the number of SMs (below which a kernel's blocks leave some idle). The
//! GEMM roofs are measured by timing the plan of a large MatMul, in the `gopt` crate,
//! so that they come from the same cuBLASLt calls a model's GEMMs make.

use super::device::event_ms;
use super::{drv, gpu_lock, Device};
use crate::Result;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaSlice;

impl Device {
    /// Bytes moved per second (read plus write) by a device-to-device copy of `bytes`,
    /// the best of `iters` copies each timed between CUDA events, after one warm-up.
    pub fn copy_bandwidth(&self, bytes: usize, iters: usize) -> Result<f64> {
        let _gpu = gpu_lock();
        let src: CudaSlice<u8> = self
            .stream
            .alloc_zeros(bytes)
            .map_err(drv(format!("allocating {bytes} bytes to time a copy")))?;
        let mut dst: CudaSlice<u8> = self
            .stream
            .alloc_zeros(bytes)
            .map_err(drv(format!("allocating {bytes} bytes to time a copy")))?;
        let mut best = f64::INFINITY;
        for i in 0..=iters.max(1) {
            let ms = event_ms(&self.ctx, &self.stream, "copying on the device", || {
                self.stream
                    .memcpy_dtod(&src, &mut dst)
                    .map_err(drv("copying on the device"))
            })?;
            if i > 0 && ms > 0.0 {
                best = best.min(ms);
            }
        }
        Ok(2.0 * bytes as f64 / (best / 1e3))
    }

    /// The device's streaming multiprocessors.
    pub fn sm_count(&self) -> Result<u32> {
        let n = self
            .ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(drv("reading the SM count"))?;
        Ok(u32::try_from(n).unwrap_or(0))
    }
}
