//! Running the `gopt` binary from a test: the repository root, the shipped models, a
//! fresh scratch folder per test, one run's exit code and output, and the checks every
//! CLI test makes (no panic; exit 0, or exit 2 with one `error:` line).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The repository root (the binary runs there).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The path of a shipped model, `tests/data/models/NAME/model.onnx`.
pub fn model_path(name: &str) -> String {
    root()
        .join("tests/data/models")
        .join(name)
        .join("model.onnx")
        .display()
        .to_string()
}

/// A fresh, empty scratch folder for one test, under the test target's own folder.
pub fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(env!("CARGO_CRATE_NAME"))
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// One run of the binary.
pub struct Out {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Wall time of the run.
    pub took: Duration,
}

/// Runs `gopt ARGS` in the repository root (Mesa's Vulkan drivers get a runtime dir
/// when the environment has none).
pub fn gopt(args: &[&str]) -> Out {
    let t = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gopt"));
    cmd.args(args).current_dir(root());
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let out = cmd.output().expect("run gopt");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: t.elapsed(),
    }
}

/// Checks exit code 2, no panic, and a single `error:` line, which it returns.
#[track_caller]
pub fn error_line(out: &Out) -> String {
    assert!(
        !out.stderr.contains("panicked"),
        "gopt panicked:\n{}",
        out.stderr
    );
    assert_eq!(
        out.code, 2,
        "exit code\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let line = out.stderr.trim_end();
    assert!(line.starts_with("error: "), "stderr: {line}");
    assert_eq!(line.lines().count(), 1, "one error line expected:\n{line}");
    line.to_string()
}

/// [`error_line`], mentioning every needle (as written); returns the line.
#[track_caller]
pub fn assert_error(out: &Out, needles: &[&str]) -> String {
    let line = error_line(out);
    for n in needles {
        assert!(line.contains(n), "error should mention `{n}`: {line}");
    }
    line
}

/// Checks exit code 0 and no panic.
#[track_caller]
pub fn assert_ok(out: &Out) {
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
}
