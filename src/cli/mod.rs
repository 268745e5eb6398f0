//! Pieces the subcommands share: exit codes, error printing, stdout that survives a
//! closed pipe, and the `--backend` choice.

pub mod adapters;
pub mod bench;
pub mod bench_decode;
pub mod charts;
pub mod compile;
pub mod compile_generate;
pub mod explain;
pub mod gemm_tune;
pub mod generate;
pub mod inspect;
pub mod memory;
pub mod profile;
pub mod quantized;
pub mod run;
pub mod tensor_parallel;
pub mod test;

use std::time::Duration;

/// Exit code for errors: unreadable or invalid models, bad inputs, bad usage.
pub const EXIT_ERROR: u8 = 2;
/// Exit code when tests ran and some failed.
pub const EXIT_FAILED: u8 = 1;

/// `--backend`: one [`gopt::Backend`] by its name, or `auto`, the first that works here.
/// The names, aliases and help lines are the backend's own ([`gopt::backend`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// The first that works here: cuda, then wgpu, then cpu (says which ran and why).
    Auto,
    /// The backend named.
    Only(gopt::Backend),
}

impl clap::ValueEnum for BackendChoice {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: std::sync::LazyLock<Vec<BackendChoice>> = std::sync::LazyLock::new(|| {
            std::iter::once(BackendChoice::Auto)
                .chain(gopt::Backend::ALL.map(BackendChoice::Only))
                .collect()
        });
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        match self {
            BackendChoice::Auto => Some(clap::builder::PossibleValue::new("auto").help(
                "The first that works here: cuda, then wgpu, then cpu (says which ran and why)",
            )),
            BackendChoice::Only(b) => b.to_possible_value(),
        }
    }
}

/// The backend flags `run`, `test` and `bench` share.
#[derive(clap::Args, Clone, Debug)]
pub struct DeviceArgs {
    /// Where to execute: auto tries cuda, then wgpu, then cpu. An artifact runs on the
    /// backend it was compiled for with auto; another backend runs its model.onnx
    /// compiled again for that backend (said in a note).
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// wgpu: run on the first adapter whose name contains NAME (`gopt adapters` lists
    /// them); default: a discrete GPU first, then integrated, then CPU (lavapipe).
    #[arg(long, value_name = "NAME")]
    pub adapter: Option<String>,
    /// CUDA: launch kernel by kernel instead of replaying a captured CUDA graph.
    #[arg(long)]
    pub no_cuda_graph: bool,
}

impl DeviceArgs {
    /// The backends to try, in order, and why the ones `auto` passed over were passed
    /// over: one backend unless `--backend auto`.
    pub fn candidates(&self) -> (Vec<gopt::Backend>, Vec<String>) {
        use gopt::Backend as B;
        match self.backend {
            BackendChoice::Only(b) => (vec![b], vec![]),
            BackendChoice::Auto => {
                let (first, why) = gopt::wgpu::auto(self.adapter.as_deref());
                let list = match first {
                    B::Cuda => vec![B::Cuda, B::Wgpu, B::Cpu],
                    B::Wgpu => vec![B::Wgpu, B::Cpu],
                    B::Cpu => vec![B::Cpu],
                };
                (list, why)
            }
        }
    }

    /// Sets `opts` up for `backend` (the adapter, whether it has f16, CUDA graphs).
    pub fn apply(
        &self,
        opts: &mut gopt::pipeline::Options,
        backend: gopt::Backend,
    ) -> anyhow::Result<()> {
        let mut o = self.apply_loaded(std::mem::take(opts)).backend(backend);
        if backend == gopt::Backend::Wgpu {
            let dev = gopt::wgpu::device(self.adapter.as_deref())?;
            o = o.wgsl_f16(dev.adapter.f16);
        }
        *opts = o;
        Ok(())
    }

    /// `opts` with the choices that hold whatever the backend: CUDA graphs on or off,
    /// the wgpu adapter asked for.
    pub fn apply_loaded(&self, opts: gopt::pipeline::Options) -> gopt::pipeline::Options {
        let opts = opts.cuda_graph(!self.no_cuda_graph);
        match &self.adapter {
            Some(a) => opts.adapter(a),
            None => opts,
        }
    }
}

/// Whether an error means "this backend cannot run this model here" (no device, or no
/// kernel for a node), after which `--backend auto` tries the next one.
pub fn backend_cannot(e: &gopt::GoptError) -> bool {
    matches!(e, gopt::GoptError::Codegen(_) | gopt::GoptError::Runtime(_)) || e.is_unsupported()
}

/// The adapter a wgpu run used, for reports.
pub fn adapter_name(opts: &gopt::pipeline::Options) -> Option<String> {
    (opts.get_backend() == gopt::Backend::Wgpu)
        .then(|| gopt::wgpu::device(opts.get_adapter()).ok())
        .flatten()
        .map(|d| {
            format!(
                "{} ({}, {})",
                d.adapter.name, d.adapter.kind, d.adapter.backend
            )
        })
}

/// Writes a line to stdout; if stdout is closed (`gopt test | head`), exits quietly
/// instead of panicking.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout().lock(), $($t)*).is_err() {
            std::process::exit(141);
        }
    }};
}
pub(crate) use outln;

/// Prints an error: one `error:` line whose parts are the distinct messages of the cause
/// chain, or with `verbose` the message and then each cause on its own line.
pub fn print_error(e: &anyhow::Error, verbose: bool) {
    let chain: Vec<String> = e
        .chain()
        .map(|c| c.to_string().replace('\n', " "))
        .collect();
    if verbose {
        let mut lines = chain.iter();
        if let Some(first) = lines.next() {
            eprintln!("error: {first}");
        }
        for c in lines {
            eprintln!("  caused by: {c}");
        }
    } else {
        let mut line = String::new();
        for m in &chain {
            if line.contains(m.as_str()) {
                continue;
            }
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(m);
        }
        eprintln!("error: {line}");
    }
}

/// A duration in ms (below 10 s) or s.
pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// A float printed compactly: plain for moderate magnitudes, scientific otherwise.
pub fn fmt_num(v: f64) -> String {
    if v == 0.0 || v.is_nan() || v.is_infinite() {
        format!("{v}")
    } else if (1e-3..1e5).contains(&v.abs()) {
        let s = format!("{v:.5}");
        let s = s.trim_end_matches('0');
        s.trim_end_matches('.').to_string()
    } else {
        format!("{v:.4e}")
    }
}
