//! What the adapter itself can do, measured: the bandwidth of a buffer-to-buffer copy
//! (the memory roof `gopt bench --profile` compares each shader's achieved bandwidth
//! with). The compute roofs are measured by timing the plan of a MatMul, in the `gopt`
//! crate, through the same shaders a model's GEMMs use.

use super::device::WgpuDevice;
use super::err;
use crate::Result;
use std::time::Instant;

impl WgpuDevice {
    /// Bytes moved per second (read plus write) by copying `bytes` from one buffer to
    /// another (capped at the adapter's largest buffer), the best of `iters` copies
    /// after one warm-up, each timed from submit to completion on the wall clock (a
    /// copy has no compute pass to carry GPU timestamps; at tens of MiB the submit
    /// costs little beside the copy).
    pub fn copy_bandwidth(&self, bytes: u64, iters: usize) -> Result<f64> {
        let max = self.device.limits().max_buffer_size;
        let size = bytes.min(max) / 4 * 4;
        if size == 0 {
            return Err(err("no buffer to time a copy with"));
        }
        let buffer = |usage| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gopt copy bandwidth"),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let src = buffer(wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST);
        let dst = buffer(wgpu::BufferUsages::COPY_DST);
        // Touch the source so the driver backs it with memory before the timing.
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.clear_buffer(&src, 0, None);
        self.queue.submit([enc.finish()]);
        let mut best = f64::INFINITY;
        for i in 0..=iters.max(1) {
            let mut enc = self.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&src, 0, &dst, 0, size);
            let t = Instant::now();
            self.queue.submit([enc.finish()]);
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(err)?;
            let s = t.elapsed().as_secs_f64();
            if i > 0 && s > 0.0 {
                best = best.min(s);
            }
        }
        Ok(2.0 * size as f64 / best)
    }
}
