//! wgpu devices: adapter selection (a discrete GPU first, then integrated, then a CPU
//! implementation such as Mesa's lavapipe, which CI uses), the WGSL storage layout of
//! host tensors, and running one generated shader on host tensors, which the kernel
//! tests use. Whole plans run in [`super::exec`].

use super::err;
use crate::{Result, RuntimeError};
use gopt_codegen::wgsl::WgslKernel;
use gopt_ir::{DType, Tensor};

/// Bytes per element of `dt` in a wgpu buffer (`gopt_codegen::wgsl::storage_type`), or
/// an error for the dtype WGSL storage cannot hold (bf16; f64 is stored as f32).
pub fn storage_size(dt: DType) -> Result<usize> {
    gopt_codegen::wgsl::storage_type(dt)
        .map(|(_, n)| n)
        .ok_or_else(|| err(format!("{dt} tensors have no WGSL storage form")))
}

/// A host tensor's bytes in the layout WGSL kernels use: bool and 8/16-bit integers
/// widened to one 32-bit word per element (bool 0/1, signed values sign-extended),
/// f64 narrowed to f32, everything else as it is (i64/u64 keep their little-endian
/// bytes).
pub fn to_storage(t: &Tensor) -> Result<Vec<u8>> {
    storage_size(t.dtype())?;
    Ok(gopt_codegen::wgsl::plan::storage_bytes(t))
}

/// The tensor of `dt` and `shape` whose storage layout (see [`to_storage`]) is
/// `bytes`: 32-bit words narrowed back for bool (non-zero is true) and 8/16-bit
/// integers (their low bits).
pub fn from_storage(dt: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let size = storage_size(dt)?;
    if bytes.len() != n * size {
        return Err(err(format!(
            "{} bytes do not hold a {dt} tensor of {shape:?} in WGSL storage",
            bytes.len()
        )));
    }
    match dt {
        DType::Bool | DType::U8 | DType::U16 | DType::I8 | DType::I16 => {
            let words: Vec<f64> = bytes
                .chunks_exact(4)
                .map(|w| {
                    let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    match dt {
                        DType::Bool => f64::from(u8::from(v != 0)),
                        DType::U8 => f64::from(v as u8),
                        DType::U16 => f64::from(v as u16),
                        DType::I8 => f64::from(v as i8),
                        _ => f64::from(v as i16),
                    }
                })
                .collect();
            Tensor::from_f64s(dt, shape, &words).map_err(err)
        }
        // f64 is stored as f32 (WGSL has no f64): widened back.
        DType::F64 => {
            let v: Vec<f64> = bytes
                .chunks_exact(4)
                .map(|w| f64::from(f32::from_le_bytes([w[0], w[1], w[2], w[3]])))
                .collect();
            Tensor::from_f64s(dt, shape, &v).map_err(err)
        }
        _ => crate::host::from_bytes(dt, shape, bytes),
    }
}

/// What an adapter is (for `--adapter` and the report).
#[derive(Clone, Debug)]
pub struct AdapterInfo {
    /// Its name (`NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// Discrete, integrated, virtual, CPU.
    pub kind: String,
    /// Vulkan, Metal, DX12, GL.
    pub backend: String,
    /// Whether it can run f16 shaders.
    pub f16: bool,
    /// Whether it has GPU timestamp queries (how `bench` times a run).
    pub timestamps: bool,
    /// Whether wgpu exposes its cooperative (tensor-core) matrices on it: in wgpu 30
    /// only 8×8 f32 tiles, which NVIDIA's Vulkan driver does not list.
    pub cooperative_matrix: bool,
    /// Largest storage buffer binding in bytes.
    pub max_binding: u64,
}

/// The adapters wgpu sees, most preferred first.
pub fn adapters() -> Vec<AdapterInfo> {
    let instance = instance();
    let mut list: Vec<(u8, AdapterInfo)> =
        pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
            .into_iter()
            .map(|a| (rank(&a.get_info()), info(&a)))
            .collect();
    list.sort_by_key(|(r, a)| (*r, a.name.clone()));
    list.into_iter().map(|(_, a)| a).collect()
}

fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle())
}

fn rank(i: &wgpu::AdapterInfo) -> u8 {
    match i.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

fn info(a: &wgpu::Adapter) -> AdapterInfo {
    let i = a.get_info();
    AdapterInfo {
        name: i.name.clone(),
        kind: format!("{:?}", i.device_type),
        backend: format!("{:?}", i.backend),
        f16: a.features().contains(wgpu::Features::SHADER_F16),
        timestamps: a.features().contains(wgpu::Features::TIMESTAMP_QUERY),
        cooperative_matrix: a
            .features()
            .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX),
        max_binding: a.limits().max_storage_buffer_binding_size,
    }
}

/// A wgpu device and its queue.
pub struct WgpuDevice {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    /// The adapter it runs on.
    pub adapter: AdapterInfo,
}

impl WgpuDevice {
    /// Opens the most preferred adapter, or the first whose name contains `name`.
    pub fn open(name: Option<&str>) -> Result<WgpuDevice> {
        Self::open_with_limits(name, None)
    }

    /// [`WgpuDevice::open`] with these limits instead of all the adapter has (e.g.
    /// `wgpu::Limits::default()`, what every WebGPU implementation guarantees, to check a
    /// plan against the smallest devices).
    pub fn open_with_limits(
        name: Option<&str>,
        limits: Option<wgpu::Limits>,
    ) -> Result<WgpuDevice> {
        let instance = instance();
        let mut all = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        all.sort_by_key(|a| rank(&a.get_info()));
        let seen: Vec<String> = all.iter().map(|a| a.get_info().name).collect();
        let adapter = match name {
            Some(n) => all.into_iter().find(|a| a.get_info().name.contains(n)),
            None => all.into_iter().next(),
        }
        .ok_or_else(|| RuntimeError::NoAdapter {
            name: name.map(str::to_string),
            seen,
        })?;
        let features =
            adapter.features() & (wgpu::Features::SHADER_F16 | wgpu::Features::TIMESTAMP_QUERY);
        let desc = wgpu::DeviceDescriptor {
            label: Some("gopt"),
            required_features: features,
            required_limits: limits.unwrap_or_else(|| adapter.limits()),
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc)).map_err(err)?;
        Ok(WgpuDevice {
            device,
            queue,
            adapter: info(&adapter),
        })
    }

    /// Runs one shader on `inputs` (its bindings, in order) and returns its outputs of
    /// the given dtypes and shapes.
    pub fn run_kernel(
        &self,
        k: &WgslKernel,
        inputs: &[&Tensor],
        outs: &[(DType, Vec<usize>)],
    ) -> Result<Vec<Tensor>> {
        if k.source.contains("enable f16;") && !self.adapter.f16 {
            return Err(err(format!(
                "kernel {} needs f16 shaders, which {} does not have",
                k.name, self.adapter.name
            )));
        }
        let d = &self.device;
        let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(&k.name),
            source: wgpu::ShaderSource::Wgsl(k.source.as_str().into()),
        });
        let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&k.name),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let storage = |bytes: &[u8], extra: wgpu::BufferUsages| {
            // At least one element of the widest storage type (vec2<u32>).
            let size = bytes.len().max(16).div_ceil(4) * 4;
            let b = d.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: size as u64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | extra,
                mapped_at_creation: false,
            });
            let mut padded = bytes.to_vec();
            padded.resize(size, 0);
            self.queue.write_buffer(&b, 0, &padded);
            b
        };
        let ins: Vec<wgpu::Buffer> = inputs
            .iter()
            .map(|t| Ok(storage(&to_storage(t)?, wgpu::BufferUsages::empty())))
            .collect::<Result<_>>()?;
        let sizes: Vec<usize> = outs
            .iter()
            .map(|(dt, s)| Ok(s.iter().product::<usize>() * storage_size(*dt)?))
            .collect::<Result<_>>()?;
        let mut outbufs: Vec<wgpu::Buffer> = sizes
            .iter()
            .map(|&n| storage(&vec![0u8; n], wgpu::BufferUsages::COPY_SRC))
            .collect();
        // A kernel that checks indices binds the error word after its outputs.
        if k.index_check.is_some() {
            outbufs.push(storage(&[0u8; 4], wgpu::BufferUsages::COPY_SRC));
        }
        let entries: Vec<wgpu::BindGroupEntry> = ins
            .iter()
            .chain(&outbufs)
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let readback: Vec<wgpu::Buffer> = outbufs
            .iter()
            .map(|b| {
                d.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: b.size(),
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })
            .collect();
        let mut enc = d.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            let [x, y, z] = k.workgroups;
            pass.dispatch_workgroups(x.max(1), y.max(1), z.max(1));
        }
        for (o, r) in outbufs.iter().zip(&readback) {
            enc.copy_buffer_to_buffer(o, 0, r, 0, o.size());
        }
        self.queue.submit([enc.finish()]);
        for r in &readback {
            r.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        }
        d.poll(wgpu::PollType::wait_indefinitely()).map_err(err)?;
        if let (Some(c), Some(r)) = (&k.index_check, readback.get(outs.len())) {
            let view = r.slice(..).get_mapped_range().map_err(err)?;
            let code = u32::from_le_bytes([view[0], view[1], view[2], view[3]]);
            if code != 0 {
                let checks = [(k.name.as_str(), k.node.as_str(), c)];
                return Err(RuntimeError::IndexOutOfRange(
                    gopt_codegen::plan::index_error(code, "wgpu", checks),
                ));
            }
        }
        outs.iter()
            .zip(&readback)
            .zip(&sizes)
            .map(|(((dt, shape), r), &n)| {
                let view = r.slice(..).get_mapped_range().map_err(err)?;
                from_storage(*dt, shape, &view[..n])
            })
            .collect()
    }
}
