//! `gopt adapters`: the GPUs (and CPU implementations such as lavapipe) wgpu can run
//! WGSL kernels on, most preferred first — what the WGSL backend would pick.

use super::outln;
use anyhow::Result;
use serde::Serialize;
use std::process::ExitCode;

/// List the adapters wgpu sees (for the WGSL backend).
#[derive(clap::Args)]
#[command(
    long_about = "Lists the adapters wgpu finds (Vulkan, Metal, DX12, GL), most preferred \
                  first: discrete GPUs, then integrated, virtual, and CPU implementations \
                  such as Mesa's lavapipe. The WGSL backend runs on the first unless told \
                  otherwise. Exit 0 even when there are none (the list says so).",
    after_help = "Examples:\n  gopt adapters\n  gopt adapters --json"
)]
pub struct Args {
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Adapter {
    name: String,
    kind: String,
    backend: String,
    f16: bool,
    timestamps: bool,
    cooperative_matrix: bool,
    max_storage_binding_bytes: u64,
}

/// Runs `gopt adapters`.
pub fn main(args: &Args) -> Result<ExitCode> {
    let list: Vec<Adapter> = gopt::runtime::wgpu::adapters()
        .into_iter()
        .map(|a| Adapter {
            name: a.name,
            kind: a.kind,
            backend: a.backend,
            f16: a.f16,
            timestamps: a.timestamps,
            cooperative_matrix: a.cooperative_matrix,
            max_storage_binding_bytes: a.max_binding,
        })
        .collect();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&list)?);
    } else if list.is_empty() {
        outln!("no wgpu adapter (on Linux without a GPU: apt-get install mesa-vulkan-drivers)");
    } else {
        for (i, a) in list.iter().enumerate() {
            outln!(
                "{}{}  ({}, {}{}{}{}; storage bindings up to {})",
                if i == 0 { "* " } else { "  " },
                a.name,
                a.kind,
                a.backend,
                if a.f16 { ", f16" } else { "" },
                if a.timestamps { ", timestamps" } else { "" },
                if a.cooperative_matrix {
                    ", cooperative matrix"
                } else {
                    ""
                },
                gopt::report::human_bytes(a.max_storage_binding_bytes)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
