//! A WGSL plan on a wgpu device: shader modules, pipelines, buffers and bind groups are
//! made once per bucket, and a run writes the inputs, records every dispatch into one
//! compute pass of one command buffer, and reads the outputs back. The device's limits
//! are checked before anything is created, so a tensor too large for a storage binding
//! is a clear error naming its kernel rather than a validation panic inside wgpu, and
//! shader or pipeline errors are caught in an error scope and returned with the node.

use super::device::{from_storage, to_storage, AdapterInfo, WgpuDevice};
use super::err;
use crate::{Result, RuntimeError};
use gopt_codegen::plan::{index_error, keep_counted, status_words, takes_status};
use gopt_codegen::wgsl::plan::{Slot, WgslPlan};
use gopt_ir::limit::MemoryLimit;
use gopt_ir::Tensor;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The weights on the device: one buffer per distinct constant (by blob offset), shared
/// by the buckets of a model.
#[derive(Default)]
pub struct WgpuWeights {
    buffers: HashMap<usize, wgpu::Buffer>,
}

impl WgpuWeights {
    /// Device bytes held.
    pub fn bytes(&self) -> usize {
        self.buffers.values().map(|b| b.size() as usize).sum()
    }

    fn get(&mut self, dev: &WgpuDevice, blob: &[u8], at: usize, n: usize) -> Result<wgpu::Buffer> {
        if let Some(b) = self.buffers.get(&at) {
            return Ok(b.clone());
        }
        let bytes = blob.get(at..at + n).ok_or_else(|| {
            err(format!(
                "the weights blob ({} bytes) has no {n} bytes at {at}: the artifact is damaged",
                blob.len()
            ))
        })?;
        let b = storage(dev, n, wgpu::BufferUsages::empty());
        write(dev, &b, bytes);
        self.buffers.insert(at, b.clone());
        Ok(b)
    }
}

fn storage(dev: &WgpuDevice, n: usize, extra: wgpu::BufferUsages) -> wgpu::Buffer {
    dev.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: n.max(4).div_ceil(4) as u64 * 4,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC
            | extra,
        mapped_at_creation: false,
    })
}

/// Writes `bytes` at the start of `b` (padded to the 4-byte copy granularity).
fn write(dev: &WgpuDevice, b: &wgpu::Buffer, bytes: &[u8]) {
    if bytes.len().is_multiple_of(4) {
        dev.queue.write_buffer(b, 0, bytes);
    } else {
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().div_ceil(4) * 4, 0);
        dev.queue.write_buffer(b, 0, &padded);
    }
}

/// The memory a plan on `dev` may take: `flag` (`--memory-limit`), else the machine's
/// available memory on adapters that use it (CPU, integrated GPUs), else
/// [`GPU_DEFAULT`](gopt_ir::limit::GPU_DEFAULT): wgpu cannot tell how much a discrete
/// GPU has free.
pub fn memory_limit(dev: &WgpuDevice, flag: Option<u64>) -> MemoryLimit {
    match dev.adapter.kind.as_str() {
        "Cpu" | "IntegratedGpu" => MemoryLimit::host(flag),
        _ => MemoryLimit::gpu_plan(flag),
    }
}

/// Checks that what loading `plan` allocates on `dev` — its pooled buffers and the
/// weights `weights` does not hold yet — fits [`memory_limit`]: an error naming `what`
/// (the bucket) and the bytes, before anything is allocated.
pub fn check_memory(
    dev: &WgpuDevice,
    what: &str,
    plan: &WgslPlan,
    weights: &WgpuWeights,
    flag: Option<u64>,
) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    let new: u128 = plan
        .slots
        .iter()
        .filter_map(|(v, slot)| match slot {
            Slot::Weight(at) if !weights.buffers.contains_key(at) && seen.insert(*at) => {
                Some(plan.frame.value_bytes.get(v).copied().unwrap_or(0) as u128)
            }
            Slot::Weight(_) | Slot::Buffer(_) => None,
        })
        .sum();
    plan.check_memory_with(what, None, new, &memory_limit(dev, flag))
        .map_err(|e| match e {
            gopt_codegen::CodegenError::Memory(m) => RuntimeError::Memory(m),
            e => err(e),
        })
}

/// A bucket's plan made ready on a device.
pub struct WgpuExecutable {
    dev: Arc<WgpuDevice>,
    plan: WgslPlan,
    pipelines: Vec<wgpu::ComputePipeline>,
    groups: Vec<wgpu::BindGroup>,
    /// Where each value is: its buffer.
    places: HashMap<u32, wgpu::Buffer>,
    readback: Vec<wgpu::Buffer>,
    /// The error word the index checks raise, and its read-back buffer (plans whose
    /// kernels read indices only).
    errors: Option<(wgpu::Buffer, wgpu::Buffer)>,
    timestamps: Option<(wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer)>,
    device_bytes: usize,
}

impl WgpuExecutable {
    /// Checks `plan` against the device's limits and makes its pipelines, buffers and
    /// bind groups; constants come from `blob` through `weights`.
    pub fn new(
        dev: Arc<WgpuDevice>,
        plan: WgslPlan,
        weights: &mut WgpuWeights,
        blob: &[u8],
    ) -> Result<WgpuExecutable> {
        check_memory(&dev, "this bucket", &plan, weights, None)?;
        let limits = dev.device.limits();
        if plan.f16 && !dev.adapter.f16 {
            return Err(err(format!(
                "this plan has f16 shaders and {} has no SHADER_F16: compile with \
                 --precision fp32 for it",
                dev.adapter.name
            )));
        }
        let max_bind = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        // Kernels that check indices or count an output bind the status buffer last.
        let status = |k: &gopt_codegen::wgsl::WgslKernel| {
            takes_status(k.index_check.is_some(), &k.outputs, &plan.frame)
        };
        // Lavapipe ends an invocation's loops early without an error: a kernel known to
        // loop longer is refused there rather than answering wrong.
        if dev.adapter.name.contains("llvmpipe") {
            let limit = gopt_codegen::wgsl::LAVAPIPE_LOOP_LIMIT;
            if let Some(k) = plan
                .kernels
                .iter()
                .find(|k| k.loop_iterations.is_some_and(|n| n > limit))
            {
                return Err(err(format!(
                    "kernel {} (node `{}`) loops about {} times per invocation; {} ends \
                     loops after {limit} and would return a wrong answer (run it on a GPU)",
                    k.name,
                    k.node,
                    k.loop_iterations.unwrap_or(0),
                    dev.adapter.name
                )));
            }
        }
        for k in &plan.kernels {
            let n = k.inputs.len() + k.outputs.len() + usize::from(status(k));
            if n as u32 > limits.max_storage_buffers_per_shader_stage {
                return Err(err(format!(
                    "kernel {} (node `{}`) binds {n} storage buffers; {} allows {}",
                    k.name, k.node, dev.adapter.name, limits.max_storage_buffers_per_shader_stage
                )));
            }
            for &v in k.inputs.iter().chain(&k.outputs) {
                let bytes = plan.frame.value_bytes.get(&v).copied().unwrap_or(0);
                if bytes as u64 > max_bind {
                    return Err(err(format!(
                        "kernel {} (node `{}`) binds a {bytes}-byte tensor, above {}'s \
                         storage binding limit of {max_bind} bytes: compile smaller buckets \
                         (--buckets) or use the CUDA backend",
                        k.name, k.node, dev.adapter.name
                    )));
                }
            }
            if k.workgroups
                .iter()
                .any(|&w| w > limits.max_compute_workgroups_per_dimension)
            {
                return Err(err(format!(
                    "kernel {} (node `{}`) dispatches {:?} workgroups; {} allows {} per dimension",
                    k.name,
                    k.node,
                    k.workgroups,
                    dev.adapter.name,
                    limits.max_compute_workgroups_per_dimension
                )));
            }
        }
        let d = &dev.device;
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        // Identical shaders (repeated layers) share one module and pipeline.
        let mut by_source: HashMap<&str, wgpu::ComputePipeline> = HashMap::new();
        let mut pipelines = Vec::with_capacity(plan.kernels.len());
        for k in &plan.kernels {
            let p = by_source.entry(k.source.as_str()).or_insert_with(|| {
                let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(&k.name),
                    source: wgpu::ShaderSource::Wgsl(k.source.as_str().into()),
                });
                d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&k.name),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                })
            });
            pipelines.push(p.clone());
        }
        let pooled: Vec<wgpu::Buffer> = plan
            .buffers
            .iter()
            .map(|&n| storage(&dev, n, wgpu::BufferUsages::empty()))
            .collect();
        let mut places = HashMap::new();
        for (&v, slot) in &plan.slots {
            let n = plan.frame.value_bytes.get(&v).copied().unwrap_or(0);
            let b = match *slot {
                Slot::Buffer(i) => pooled.get(i).cloned().ok_or_else(|| {
                    err(format!("value {v} is in buffer {i}, which the plan lacks"))
                })?,
                Slot::Weight(at) => weights.get(&dev, blob, at, n)?,
            };
            places.insert(v, b);
        }
        // The status buffer: the index checks' error word, then the counted outputs'
        // sizes.
        let words = (status_words(&plan.frame.outputs) * 4) as u64;
        let errors = plan.kernels.iter().any(&status).then(|| {
            let word = storage(&dev, words as usize, wgpu::BufferUsages::empty());
            let read = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gopt status words"),
                size: words,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            (word, read)
        });
        let mut groups = Vec::with_capacity(plan.kernels.len());
        for (k, p) in plan.kernels.iter().zip(&pipelines) {
            let entries = k
                .inputs
                .iter()
                .chain(&k.outputs)
                .enumerate()
                .map(|(i, v)| {
                    let b = places.get(v).ok_or_else(|| {
                        err(format!(
                            "kernel {} (node `{}`): value {v} has no buffer",
                            k.name, k.node
                        ))
                    })?;
                    let n = plan
                        .frame
                        .value_bytes
                        .get(v)
                        .copied()
                        .unwrap_or(4)
                        .max(4)
                        .div_ceil(4)
                        * 4;
                    Ok(wgpu::BindGroupEntry {
                        binding: i as u32,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer: b,
                            offset: 0,
                            size: wgpu::BufferSize::new(n as u64),
                        }),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let mut entries = entries;
            if status(k) {
                let (word, _) = errors.as_ref().ok_or_else(|| err("no error word"))?;
                entries.push(wgpu::BindGroupEntry {
                    binding: entries.len() as u32,
                    resource: word.as_entire_binding(),
                });
            }
            groups.push(d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&k.name),
                layout: &p.get_bind_group_layout(0),
                entries: &entries,
            }));
        }
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(err(format!("building the plan's pipelines: {e}")));
        }
        let readback = plan
            .frame
            .outputs
            .iter()
            .map(|o| {
                let n = plan.frame.value_bytes.get(&o.value).copied().unwrap_or(4);
                d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(&o.name),
                    size: n.max(4).div_ceil(4) as u64 * 4,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })
            .collect();
        let timestamps = d
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
            .then(|| {
                let set = d.create_query_set(&wgpu::QuerySetDescriptor {
                    label: None,
                    ty: wgpu::QueryType::Timestamp,
                    count: 2,
                });
                let resolve = d.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: 16,
                    usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                let read = d.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: 16,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                (set, resolve, read)
            });
        let device_bytes = pooled.iter().map(|b| b.size() as usize).sum();
        Ok(WgpuExecutable {
            dev,
            plan,
            pipelines,
            groups,
            places,
            readback,
            errors,
            timestamps,
            device_bytes,
        })
    }

    /// The plan it runs.
    pub fn plan(&self) -> &WgslPlan {
        &self.plan
    }

    /// Device bytes of its pooled buffers (weights not included).
    pub fn device_bytes(&self) -> usize {
        self.device_bytes
    }

    /// The adapter it runs on.
    pub fn adapter(&self) -> &AdapterInfo {
        &self.dev.adapter
    }

    /// Writes the inputs (graph order; dtypes and shapes of the plan's bucket).
    pub fn set_inputs(&mut self, inputs: &[Tensor]) -> Result<()> {
        if inputs.len() != self.plan.frame.inputs.len() {
            return Err(RuntimeError::Usage(format!(
                "the plan takes {} inputs, got {}",
                self.plan.frame.inputs.len(),
                inputs.len()
            )));
        }
        for (io, t) in self.plan.frame.inputs.iter().zip(inputs) {
            if t.dtype() != io.dtype || t.shape() != io.shape.as_slice() {
                return Err(RuntimeError::Usage(format!(
                    "input `{}`: the plan wants {} {:?}, got {} {:?}",
                    io.name,
                    io.dtype,
                    io.shape,
                    t.dtype(),
                    t.shape()
                )));
            }
            let b = &self.places[&io.value];
            write(&self.dev, b, &to_storage(t)?);
        }
        Ok(())
    }

    /// Writes input `index` only (the others keep what they hold: a KV cache carried
    /// on the device between generation steps).
    pub fn set_input(&mut self, index: usize, t: &Tensor) -> Result<()> {
        let io =
            self.plan.frame.inputs.get(index).ok_or_else(|| {
                RuntimeError::Usage(format!("the plan has no input {}", index + 1))
            })?;
        if t.dtype() != io.dtype || t.shape() != io.shape.as_slice() {
            return Err(RuntimeError::Usage(format!(
                "input `{}`: the plan wants {} {:?}, got {} {:?}",
                io.name,
                io.dtype,
                io.shape,
                t.dtype(),
                t.shape()
            )));
        }
        write(&self.dev, &self.places[&io.value], &to_storage(t)?);
        Ok(())
    }

    /// Runs the plan once, then copies each `(output, input)` pair's output buffer
    /// into the input's, on the device, in the same submission: a generation step's
    /// present keys and values become the next step's cache without leaving the GPU.
    pub fn execute_carrying(&mut self, carry: &[(usize, usize)]) -> Result<()> {
        let frame = &self.plan.frame;
        let mut enc = self.dev.device.create_command_encoder(&Default::default());
        self.record(&mut enc, false);
        for &(o, i) in carry {
            let (Some(out), Some(inp)) = (frame.outputs.get(o), frame.inputs.get(i)) else {
                return Err(RuntimeError::Usage(format!(
                    "no output {o} or input {i} to carry"
                )));
            };
            let n = frame.value_bytes.get(&out.value).copied().unwrap_or(0);
            if frame.value_bytes.get(&inp.value).copied() != Some(n) {
                return Err(RuntimeError::Usage(format!(
                    "output `{}` and input `{}` differ in size",
                    out.name, inp.name
                )));
            }
            let size = (n.div_ceil(4) * 4) as u64;
            enc.copy_buffer_to_buffer(
                &self.places[&out.value],
                0,
                &self.places[&inp.value],
                0,
                size,
            );
        }
        self.dev.queue.submit([enc.finish()]);
        self.wait()
    }

    /// Reads output `index` back alone (with the error word, which fails the read
    /// naming the node whose index was out of range).
    pub fn output(&self, index: usize) -> Result<Tensor> {
        if index >= self.plan.frame.outputs.len() {
            return Err(RuntimeError::Usage(format!(
                "the plan has no output {}",
                index + 1
            )));
        }
        let mut enc = self.dev.device.create_command_encoder(&Default::default());
        self.copy_back_of(&mut enc, &[index]);
        self.dev.queue.submit([enc.finish()]);
        self.read_back_of(&[index])?
            .pop()
            .ok_or_else(|| err("no output read back"))
    }

    fn record(&self, enc: &mut wgpu::CommandEncoder, timed: bool) {
        if let Some((word, _)) = &self.errors {
            enc.clear_buffer(word, 0, None);
        }
        let timestamp_writes = match (&self.timestamps, timed) {
            (Some((set, _, _)), true) => Some(wgpu::ComputePassTimestampWrites {
                query_set: set,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            }),
            _ => None,
        };
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("gopt plan"),
            timestamp_writes,
        });
        for ((k, p), g) in self
            .plan
            .kernels
            .iter()
            .zip(&self.pipelines)
            .zip(&self.groups)
        {
            pass.set_pipeline(p);
            pass.set_bind_group(0, g, &[]);
            let [x, y, z] = k.workgroups;
            pass.dispatch_workgroups(x.max(1), y.max(1), z.max(1));
        }
    }

    fn wait(&self) -> Result<()> {
        self.dev
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(err)?;
        Ok(())
    }

    /// Runs the plan once on the inputs written last, and waits for it.
    pub fn execute(&mut self) -> Result<()> {
        let mut enc = self.dev.device.create_command_encoder(&Default::default());
        self.record(&mut enc, false);
        self.dev.queue.submit([enc.finish()]);
        self.wait()
    }

    /// Reads the outputs back (graph order).
    pub fn outputs(&self) -> Result<Vec<Tensor>> {
        let mut enc = self.dev.device.create_command_encoder(&Default::default());
        self.copy_back(&mut enc);
        self.dev.queue.submit([enc.finish()]);
        self.read_back()
    }

    /// The indices of every output.
    fn all_outputs(&self) -> Vec<usize> {
        (0..self.plan.frame.outputs.len()).collect()
    }

    /// Records the copies of the outputs (and the error word) to their read-back
    /// buffers.
    fn copy_back(&self, enc: &mut wgpu::CommandEncoder) {
        self.copy_back_of(enc, &self.all_outputs());
    }

    /// [`Self::copy_back`] of the outputs `which` only.
    fn copy_back_of(&self, enc: &mut wgpu::CommandEncoder, which: &[usize]) {
        for &i in which {
            let (o, r) = (&self.plan.frame.outputs[i], &self.readback[i]);
            enc.copy_buffer_to_buffer(&self.places[&o.value], 0, r, 0, r.size());
        }
        if let Some((word, read)) = &self.errors {
            enc.copy_buffer_to_buffer(word, 0, read, 0, read.size());
        }
    }

    /// Maps the read-back buffers (one wait) and converts the outputs; a nonzero error
    /// word fails the run naming the node whose index was out of range.
    fn read_back(&self) -> Result<Vec<Tensor>> {
        self.read_back_of(&self.all_outputs())
    }

    /// [`Self::read_back`] of the outputs `which` only (copied by
    /// [`Self::copy_back_of`]).
    fn read_back_of(&self, which: &[usize]) -> Result<Vec<Tensor>> {
        for &i in which {
            self.readback[i]
                .slice(..)
                .map_async(wgpu::MapMode::Read, |_| {});
        }
        if let Some((_, read)) = &self.errors {
            read.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        }
        self.wait()?;
        // Every buffer is unmapped before any error returns: the next run maps them again.
        let words: Result<Vec<u32>> = match &self.errors {
            Some((_, read)) => {
                let w = read.slice(..).get_mapped_range().map_err(err).map(|v| {
                    v.chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect()
                });
                read.unmap();
                w
            }
            None => Ok(vec![0]),
        };
        let outs: Vec<Result<Tensor>> = which
            .iter()
            .map(|&i| {
                let (o, r) = (&self.plan.frame.outputs[i], &self.readback[i]);
                let n = self
                    .plan
                    .frame
                    .value_bytes
                    .get(&o.value)
                    .copied()
                    .unwrap_or(0);
                let t = {
                    let view = r.slice(..).get_mapped_range().map_err(err)?;
                    from_storage(o.dtype, &o.shape, &view[..n])
                };
                r.unmap();
                t
            })
            .collect();
        let words = words?;
        {
            let code = words.first().copied().unwrap_or(0);
            if code != 0 {
                let checks = self.plan.kernels.iter().filter_map(|k| {
                    Some((k.name.as_str(), k.node.as_str(), k.index_check.as_ref()?))
                });
                return Err(RuntimeError::IndexOutOfRange(index_error(
                    code, "wgpu", checks,
                )));
            }
        }
        outs.into_iter()
            .zip(which)
            .map(|(t, &i)| keep_counted(&self.plan.frame.outputs[i], t?, &words).map_err(err))
            .collect()
    }

    /// Writes the inputs, runs the plan and reads the outputs, in one command buffer.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.set_inputs(inputs)?;
        let mut enc = self.dev.device.create_command_encoder(&Default::default());
        self.record(&mut enc, false);
        self.copy_back(&mut enc);
        self.dev.queue.submit([enc.finish()]);
        self.read_back()
    }

    /// Times `iters` executions after `warmup` ones; milliseconds per execution, and
    /// whether they are GPU timestamps around the compute pass (else wall-clock time
    /// from submit to completion).
    pub fn time(&mut self, warmup: usize, iters: usize) -> Result<(Vec<f64>, bool)> {
        for _ in 0..warmup {
            self.execute()?;
        }
        let mut out = Vec::with_capacity(iters);
        let period = f64::from(self.dev.queue.get_timestamp_period());
        for _ in 0..iters {
            match &self.timestamps {
                Some((set, resolve, read)) => {
                    let mut enc = self.dev.device.create_command_encoder(&Default::default());
                    self.record(&mut enc, true);
                    enc.resolve_query_set(set, 0..2, resolve, 0);
                    enc.copy_buffer_to_buffer(resolve, 0, read, 0, 16);
                    self.dev.queue.submit([enc.finish()]);
                    read.slice(..).map_async(wgpu::MapMode::Read, |_| {});
                    self.wait()?;
                    let (a, b) = {
                        let v = read.slice(..).get_mapped_range().map_err(err)?;
                        let w = |i: usize| {
                            u64::from_le_bytes(v[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
                        };
                        (w(0), w(1))
                    };
                    read.unmap();
                    out.push(b.saturating_sub(a) as f64 * period / 1e6);
                }
                None => {
                    let t = Instant::now();
                    self.execute()?;
                    out.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
        Ok((out, self.timestamps.is_some()))
    }

    /// Each kernel timed alone (dispatched in its own pass between timestamps, `iters`
    /// times): label and median milliseconds, in plan order. Empty without timestamps.
    pub fn profile(&mut self, iters: usize) -> Result<Vec<crate::StepTime>> {
        let Some((set, resolve, read)) = &self.timestamps else {
            return Ok(Vec::new());
        };
        let period = f64::from(self.dev.queue.get_timestamp_period());
        let mut samples = vec![Vec::new(); self.plan.kernels.len()];
        for _ in 0..iters.max(1) {
            for (i, ((k, p), g)) in self
                .plan
                .kernels
                .iter()
                .zip(&self.pipelines)
                .zip(&self.groups)
                .enumerate()
            {
                let mut enc = self.dev.device.create_command_encoder(&Default::default());
                {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: None,
                        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                            query_set: set,
                            beginning_of_pass_write_index: Some(0),
                            end_of_pass_write_index: Some(1),
                        }),
                    });
                    pass.set_pipeline(p);
                    pass.set_bind_group(0, g, &[]);
                    let [x, y, z] = k.workgroups;
                    pass.dispatch_workgroups(x.max(1), y.max(1), z.max(1));
                }
                enc.resolve_query_set(set, 0..2, resolve, 0);
                enc.copy_buffer_to_buffer(resolve, 0, read, 0, 16);
                self.dev.queue.submit([enc.finish()]);
                read.slice(..).map_async(wgpu::MapMode::Read, |_| {});
                self.wait()?;
                let ms = {
                    let v = read.slice(..).get_mapped_range().map_err(err)?;
                    let w = |i: usize| {
                        u64::from_le_bytes(v[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
                    };
                    w(1).saturating_sub(w(0)) as f64 * period / 1e6
                };
                read.unmap();
                samples[i].push(ms);
            }
        }
        Ok(self
            .plan
            .kernels
            .iter()
            .zip(samples)
            .map(|(k, mut t)| {
                t.sort_by(|a, b| a.total_cmp(b));
                let [x, y, z] = k.workgroups;
                crate::StepTime {
                    label: format!("{} `{}`", k.name, k.node),
                    node: k.node.clone(),
                    ms: t[t.len() / 2],
                    blocks: Some(u64::from(x.max(1)) * u64::from(y.max(1)) * u64::from(z.max(1))),
                }
            })
            .collect())
    }
}
