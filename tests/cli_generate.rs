//! The generation commands from the command line: `gopt generate` (tokens, the summary,
//! `--json`, `-o`, prompts from files, sampling flags), `gopt compile --generate` (every
//! step with its plan) and `gopt bench --decode`, and their refusals: each bad input is
//! exit 2 with one `error:` line, and `-o` is not written when the run fails.
//!
//! The expected tokens of the repo's Llama-style decoder, [62, 417, 186, 213] after
//! `5,17,42,7,99`, come from the ONNX reference evaluator (onnx 1.23) running the
//! export step by step (bench/make_decoder.py's check), not from gopt.

mod common;
use common::cli::{assert_error, assert_ok, gopt, model_path, root, scratch};

/// A decoder of `tests/data/decoders`.
fn decoder(name: &str) -> String {
    root()
        .join("tests/data/decoders")
        .join(name)
        .join("model.onnx")
        .display()
        .to_string()
}

const PROMPT: &str = "5,17,42,7,99";
const EXPECTED: [i64; 4] = [62, 417, 186, 213];

fn json(out: &common::cli::Out) -> serde_json::Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

#[test]
fn generate_prints_the_tokens_and_the_summary() {
    let m = decoder("llama_decoder");
    let out = gopt(&[
        "generate",
        &m,
        "--prompt-ids",
        PROMPT,
        "--max-new-tokens",
        "4",
        "--backend",
        "cpu",
    ]);
    assert_ok(&out);
    assert!(
        out.stdout.contains("prompt 0 (5 tokens): 62 417 186 213"),
        "{}",
        out.stdout
    );
    for needle in [
        "time to first token",
        "ms per token",
        "tokens/s",
        "KV cache",
        "decode batch=1 context=128",
    ] {
        assert!(out.stdout.contains(needle), "{needle}: {}", out.stdout);
    }
    let out = gopt(&[
        "generate",
        &m,
        "--prompt-ids",
        PROMPT,
        "--max-new-tokens",
        "4",
        "--backend",
        "cpu",
        "--json",
    ]);
    assert_ok(&out);
    let v = json(&out);
    let tokens: Vec<i64> = v["tokens"][0]
        .as_array()
        .expect("tokens")
        .iter()
        .filter_map(|t| t.as_i64())
        .collect();
    assert_eq!(tokens, EXPECTED);
    assert_eq!(v["prefill_step"], "prefill batch=1 seq=16");
    assert!(v["cache_bytes"].as_u64().unwrap_or(0) > 0, "{v}");
}

#[test]
fn prompts_come_from_lists_files_and_batch_copies() {
    let dir = scratch("prompts_come_from_lists_files_and_batch_copies");
    let file = dir.join("prompts.txt");
    std::fs::write(&file, "5 17 42 7 99\n\n3,1,400\n").expect("write prompts");
    let (m, f) = (decoder("llama_decoder"), file.display().to_string());
    let out = gopt(&[
        "generate",
        &m,
        "--prompt-ids",
        &f,
        "--max-new-tokens",
        "4",
        "--backend",
        "cpu",
        "--json",
    ]);
    assert_ok(&out);
    let v = json(&out);
    assert_eq!(v["prompt_tokens"], serde_json::json!([5, 3]));
    assert_eq!(v["tokens"][0], serde_json::json!(EXPECTED));
    let out = gopt(&[
        "generate",
        &m,
        "--prompt-ids",
        PROMPT,
        "--batch",
        "3",
        "--max-new-tokens",
        "4",
        "--backend",
        "cpu",
        "--json",
    ]);
    assert_ok(&out);
    let v = json(&out);
    for r in 0..3 {
        assert_eq!(v["tokens"][r], serde_json::json!(EXPECTED), "row {r}");
    }
}

#[test]
fn output_file_is_written_only_after_a_run() {
    let dir = scratch("output_file_is_written_only_after_a_run");
    let path = dir.join("tokens.json");
    let (m, p) = (decoder("gpt2_decoder"), path.display().to_string());
    let bad = gopt(&[
        "generate",
        &m,
        "--prompt-ids",
        "1,2,900",
        "--max-new-tokens",
        "4",
        "--backend",
        "cpu",
        "-o",
        &p,
    ]);
    assert_error(&bad, &["900", "vocabulary"]);
    assert!(!path.exists(), "a failed run wrote {p}");
    let ok = gopt(&[
        "generate",
        &m,
        "--prompt-ids",
        PROMPT,
        "--max-new-tokens",
        "3",
        "--backend",
        "cpu",
        "-o",
        &p,
    ]);
    assert_ok(&ok);
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("written")).expect("json");
    assert_eq!(v.as_array().map(Vec::len), Some(1));
    assert_eq!(v[0].as_array().map(Vec::len), Some(3));
}

#[test]
fn bad_input_is_exit_2_with_one_line() {
    let m = decoder("llama_decoder");
    let run = |args: &[&str]| {
        let mut a = vec!["generate", m.as_str()];
        a.extend(args);
        gopt(&a)
    };
    assert_error(
        &run(&[
            "--prompt-ids",
            PROMPT,
            "--max-new-tokens",
            "3000",
            "--backend",
            "cpu",
        ]),
        &["3005", "2048", "--max-context"],
    );
    assert_error(
        &run(&[
            "--prompt-ids",
            "1,-4",
            "--max-new-tokens",
            "2",
            "--backend",
            "cpu",
        ]),
        &["-4", "vocabulary"],
    );
    assert_error(
        &run(&[
            "--prompt-ids",
            "1,x,3",
            "--max-new-tokens",
            "2",
            "--backend",
            "cpu",
        ]),
        &["`x` is not a token id"],
    );
    assert_error(
        &run(&[
            "--prompt-ids",
            PROMPT,
            "--max-new-tokens",
            "0",
            "--backend",
            "cpu",
        ]),
        &["--max-new-tokens 0"],
    );
    assert_error(
        &run(&[
            "--prompt-ids",
            "1,2",
            "--prompt-ids",
            "3",
            "--batch",
            "3",
            "--max-new-tokens",
            "2",
        ]),
        &["--batch 3 with 2 prompts"],
    );
    assert_error(
        &run(&[
            "--prompt-ids",
            PROMPT,
            "--max-new-tokens",
            "2",
            "--temperature",
            "0",
            "--backend",
            "cpu",
        ]),
        &["temperature 0"],
    );
    let bert = model_path("bert_small");
    let out = gopt(&[
        "generate",
        &bert,
        "--prompt-ids",
        PROMPT,
        "--max-new-tokens",
        "2",
        "--backend",
        "cpu",
    ]);
    assert_error(&out, &["not a decoder", "past"]);
}

#[test]
fn a_memory_budget_below_the_steps_is_refused_before_running() {
    let m = decoder("llama_decoder");
    let out = gopt(&[
        "generate",
        &m,
        "--prompt-ids",
        PROMPT,
        "--max-new-tokens",
        "4",
        "--backend",
        "wgpu",
        "--memory-budget",
        "100KiB",
    ]);
    assert_error(&out, &["--memory-budget", "KV cache"]);
}

#[test]
fn compile_generate_reports_every_step() {
    let m = decoder("llama_decoder");
    let out = gopt(&[
        "compile",
        &m,
        "--generate",
        "--max-batch",
        "2",
        "--max-context",
        "256",
        "--precision",
        "bf16",
        "--json",
    ]);
    assert_ok(&out);
    let v = json(&out);
    let steps = v["steps"].as_array().expect("steps");
    // Batches 1, 2 x prompts 16..256 (5) + contexts 128, 256 (2).
    assert_eq!(steps.len(), 14, "{v}");
    for s in steps {
        let name = s["step"].as_str().unwrap_or("");
        let kinds = &s["kernel_kinds"];
        if name.starts_with("decode") {
            assert_eq!(
                kinds["tensorscatter"], 4,
                "{name}: one in-place write per cache: {kinds}"
            );
            assert!(s["cache_bytes"].as_u64().unwrap_or(0) > 0);
        }
        // Per layer: Q/K/V, the output projection, gate and up (one GEMM), down.
        if name == "decode batch=1 context=128" {
            assert!(kinds["gemv"].as_u64().unwrap_or(0) >= 8, "{name}: {kinds}");
        }
    }
    assert_eq!(v["form"], "concat");
    assert_eq!(v["caches"], 4);
}

#[test]
fn bench_decode_reports_the_traffic_per_token() {
    let m = decoder("llama_decoder");
    let out = gopt(&[
        "bench",
        &m,
        "--decode",
        "--batch",
        "2",
        "--context",
        "100",
        "--backend",
        "cpu",
        "--iters",
        "10",
        "--json",
    ]);
    assert_ok(&out);
    let v = json(&out);
    assert_eq!(v["step"], "decode batch=2 context=128");
    assert!(v["p50_ms"].as_f64().unwrap_or(0.0) > 0.0, "{v}");
    assert!(
        v["weight_bytes_per_token"].as_u64().unwrap_or(0) > 500_000,
        "{v}"
    );
    assert_eq!(v["cache_bytes_per_token"], 2 * 4 * 2 * 128 * 16 * 4);
    let bad = gopt(&["bench", &m, "--decode", "--seq", "4"]);
    assert_error(&bad, &["--seq"]);
}
