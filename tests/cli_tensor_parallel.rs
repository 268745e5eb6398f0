//! `--tensor-parallel N` from the command line: `gopt compile` builds and reports the
//! rank graphs and their CUDA plans (no GPU needed: the plans' kernels are generated,
//! not run) with each rank's AllReduce count and bytes, and writes them with `-o`;
//! a width that does not divide is exit 2 naming it; `run`, `bench` and `generate`
//! refuse a multi-rank run on a machine without the GPUs or NCCL (exit 2); `--help`
//! explains the flag.

mod common;
use common::cli::{assert_error, assert_ok, gopt, model_path, scratch};

#[test]
fn compile_reports_each_ranks_plan_and_allreduces() {
    let dir = scratch("compile_tp");
    let out_dir = dir.display().to_string();
    let gpt2 = model_path("gpt2_small");
    let out = gopt(&[
        "compile",
        &gpt2,
        "--tensor-parallel",
        "2",
        "--target",
        "cuda",
        "--bind",
        "batch=1",
        "--bind",
        "seq=16",
        "-o",
        &out_dir,
    ]);
    assert_ok(&out);
    let s = &out.stdout;
    assert!(s.contains("tensor parallel: 2 ranks"), "{s}");
    // GPT-2 small: 2 layers, an AllReduce after attention and after the MLP of each,
    // each [1,16,144] f32 = 9 KiB; the logits gathered.
    for r in 0..2 {
        let line = s
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("rank {r}:")))
            .unwrap_or_else(|| panic!("no rank {r} line:\n{s}"));
        assert!(line.contains("4 AllReduce (36.00 KiB"), "{line}");
        assert!(line.contains("1 AllGather"), "{line}");
        assert!(
            line.contains("CUDA plan:") && line.contains("(4 allreduce, 1 allgather)"),
            "{line}"
        );
        let rank = dir.join(format!("rank{r}")).join("batch=1_seq=16");
        for f in ["graph.ir", "plan.json", "weights.bin"] {
            assert!(rank.join(f).is_file(), "{} missing", rank.join(f).display());
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn compile_names_a_dim_that_does_not_divide() {
    let bert = model_path("bert_small");
    let out = gopt(&[
        "compile",
        &bert,
        "--tensor-parallel",
        "2",
        "--target",
        "none",
        "--bind",
        "batch=1",
        "--bind",
        "seq=8",
    ]);
    assert_error(&out, &["does not divide into 2 ranks"]);
}

#[test]
fn runs_refuse_more_ranks_than_this_machine_has() {
    let gpt2 = model_path("gpt2_small");
    for cmd in ["run", "bench"] {
        let out = gopt(&[cmd, &gpt2, "--tensor-parallel", "2"]);
        assert_error(&out, &["--tensor-parallel 2"]);
    }
    let llama = common::cli::root()
        .join("tests/data/decoders/llama_decoder/model.onnx")
        .display()
        .to_string();
    let out = gopt(&[
        "generate",
        &llama,
        "--prompt-ids",
        "5,17",
        "--max-new-tokens",
        "2",
        "--tensor-parallel",
        "2",
    ]);
    assert_error(&out, &["gopt generate --tensor-parallel 2"]);
    let help = gopt(&["run", "--help"]);
    assert_ok(&help);
    assert!(
        help.stdout.contains("--tensor-parallel <N>"),
        "{}",
        help.stdout
    );
    assert!(help.stdout.contains("NCCL"), "{}", help.stdout);
}
