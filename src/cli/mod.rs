//! Pieces the subcommands share: exit codes, error printing, stdout that survives a
//! closed pipe, and the `--backend` choice.

pub mod adapters;
pub mod bench;
pub mod compile;
pub mod inspect;
pub mod run;
pub mod test;

use std::time::Duration;

/// Exit code for errors: unreadable or invalid models, bad inputs, bad usage.
pub const EXIT_ERROR: u8 = 2;
/// Exit code when tests ran and some failed.
pub const EXIT_FAILED: u8 = 1;

/// Where to execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The CPU reference interpreter.
    Cpu,
    /// An NVIDIA GPU: generated CUDA kernels and cuBLASLt, replayed as a CUDA graph.
    Cuda,
}

impl Backend {
    /// The pipeline's backend.
    pub fn pipeline(self) -> gopt::pipeline::Backend {
        match self {
            Backend::Cpu => gopt::pipeline::Backend::Cpu,
            Backend::Cuda => gopt::pipeline::Backend::Cuda,
        }
    }
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
