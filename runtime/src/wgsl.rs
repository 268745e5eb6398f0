//! The WGSL executor through wgpu (issue 5, being built): adapter selection (a discrete
//! GPU first, then integrated, then a CPU implementation such as Mesa's lavapipe, which
//! CI uses), and running one generated shader on host tensors, which the kernel tests
//! use. Whole plans, bind groups built once per bucket and one command buffer per run,
//! come next.

use crate::{Result, RuntimeError};
use gopt_codegen::plan::tensor_bytes;
use gopt_codegen::wgsl::WgslKernel;
use gopt_ir::{DType, Tensor};

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
    }
}

/// A wgpu device and its queue.
pub struct WgpuDevice {
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// The adapter it runs on.
    pub adapter: AdapterInfo,
}

fn err(what: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Usage(format!("wgpu: {what}"))
}

impl WgpuDevice {
    /// Opens the most preferred adapter, or the first whose name contains `name`.
    pub fn open(name: Option<&str>) -> Result<WgpuDevice> {
        let instance = instance();
        let mut all = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        all.sort_by_key(|a| rank(&a.get_info()));
        let seen: Vec<String> = all.iter().map(|a| a.get_info().name).collect();
        let adapter = match name {
            Some(n) => all.into_iter().find(|a| a.get_info().name.contains(n)),
            None => all.into_iter().next(),
        }
        .ok_or_else(|| {
            RuntimeError::Usage(format!(
                "no wgpu adapter{} (adapters seen: {}); on Linux without a GPU, install \
                 Mesa's lavapipe (`apt-get install mesa-vulkan-drivers libvulkan1`)",
                name.map(|n| format!(" matching `{n}`")).unwrap_or_default(),
                if seen.is_empty() {
                    "none".into()
                } else {
                    seen.join(", ")
                }
            ))
        })?;
        let features = adapter.features() & wgpu::Features::SHADER_F16;
        let desc = wgpu::DeviceDescriptor {
            label: Some("gopt"),
            required_features: features,
            required_limits: adapter.limits(),
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
            let size = bytes.len().max(4).div_ceil(4) * 4;
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
            .map(|t| storage(&tensor_bytes(t), wgpu::BufferUsages::empty()))
            .collect();
        let sizes: Vec<usize> = outs
            .iter()
            .map(|(dt, s)| s.iter().product::<usize>() * dt.size())
            .collect();
        let outbufs: Vec<wgpu::Buffer> = sizes
            .iter()
            .map(|&n| storage(&vec![0u8; n], wgpu::BufferUsages::COPY_SRC))
            .collect();
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
        outs.iter()
            .zip(&readback)
            .zip(&sizes)
            .map(|(((dt, shape), r), &n)| {
                let view = r.slice(..).get_mapped_range().map_err(err)?;
                crate::cuda::from_bytes(*dt, shape, &view[..n])
            })
            .collect()
    }
}
