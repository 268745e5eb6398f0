//! The `gopt` command line: a thin layer over the `gopt` library. Each subcommand lives in
//! `cli/<name>.rs`; errors end the process with exit code 2 and one `error:` line.

mod cli;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// gopt: an ahead-of-time graph compiler for neural-network inference.
#[derive(Parser)]
#[command(
    name = "gopt",
    version,
    about = "gopt: an ahead-of-time graph compiler for neural-network inference",
    long_about = "gopt imports a model (ONNX), verifies it, infers every value's dtype and \
                  (symbolic) shape, specializes it to concrete dims and runs it on the CPU \
                  reference interpreter, the oracle every backend is compared with.",
    after_help = "Examples:\n  \
        gopt inspect model.onnx\n  \
        gopt compile model.onnx --bind batch=1 --bind seq=128\n  \
        gopt run model.onnx --input input_ids=ids.npy -o out/\n  \
        gopt test tests/data/conformance\n  \
        gopt bench model.onnx --batch 32 --seq 128 --precision bf16\n  \
        gopt generate decoder.onnx --prompt-ids 1,42,7 --max-new-tokens 32\n\n\
        Exit codes: 0 success, 1 test failures, 2 errors (bad model, bad input, bad usage).\n\
        Run `gopt help <command>` for each command's options and examples."
)]
struct Cli {
    /// On an error, print every cause on its own line instead of one summary line.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Inspect(cli::inspect::Args),
    Run(cli::run::Args),
    Test(cli::test::Args),
    Compile(cli::compile::Args),
    Bench(cli::bench::Args),
    Generate(cli::generate::Args),
    Adapters(cli::adapters::Args),
}

fn main() -> ExitCode {
    // Before any thread starts: the environment is the process's.
    gopt::wgpu::ensure_runtime_dir();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version print to stdout and exit 0; `gopt` alone prints the help.
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            e.exit()
        }
        Err(e) => {
            eprintln!("error: {}", usage_error(&e));
            return ExitCode::from(cli::EXIT_ERROR);
        }
    };
    let result = match &cli.command {
        Command::Inspect(a) => cli::inspect::main(a),
        Command::Run(a) => cli::run::main(a),
        Command::Test(a) => cli::test::main(a),
        Command::Compile(a) => cli::compile::main(a),
        Command::Bench(a) => cli::bench::main(a),
        Command::Generate(a) => cli::generate::main(a),
        Command::Adapters(a) => cli::adapters::main(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            cli::print_error(&e, cli.verbose);
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}

/// clap's message for a bad command line as one line: its lines up to the usage
/// summary, joined, and where to read more.
fn usage_error(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        let line = line.strip_prefix("error:").unwrap_or(line).trim();
        if !line.is_empty() {
            parts.push(line.to_string());
        }
    }
    let mut msg = parts.join(" ");
    if let Some(tip) = text.lines().find(|l| l.contains("try '")) {
        msg.push_str(&format!(" ({})", tip.trim().trim_end_matches('.')));
    }
    msg
}
