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
        gopt bench model.onnx --batch 32 --seq 128 --precision bf16\n\n\
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
    Adapters(cli::adapters::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Inspect(a) => cli::inspect::main(a),
        Command::Run(a) => cli::run::main(a),
        Command::Test(a) => cli::test::main(a),
        Command::Compile(a) => cli::compile::main(a),
        Command::Bench(a) => cli::bench::main(a),
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
