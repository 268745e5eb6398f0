//! Fuzzes artifact loading (`gopt run ARTIFACT_DIR`, `Compiled::load`): the input is the
//! text of `plan.json`, placed beside the valid `model.onnx` and `weights.bin` of
//! fuzz/fixtures/artifact. A JSON object gets its integrity fields made valid first (its
//! `files` hashes replaced by the real ones and the whole plan sealed), so the fuzzer
//! reaches the plan's contents and not only the hash check; any other input is loaded as
//! written. No input may panic; every failure must be an error value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::OnceLock;

const MODEL: &[u8] = include_bytes!("../fixtures/artifact/model.onnx");
const WEIGHTS: &[u8] = include_bytes!("../fixtures/artifact/weights.bin");

/// The artifact folder (one per process) holding the fixed model and weights.
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("gopt-fuzz-artifact-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the artifact folder");
        std::fs::write(dir.join("model.onnx"), MODEL).expect("write model.onnx");
        std::fs::write(dir.join("weights.bin"), WEIGHTS).expect("write weights.bin");
        dir
    })
}

/// The plan with valid `files` hashes for the fixed files and a valid own hash, or
/// `None` when it is not a JSON object (loaded as written then).
fn sealed(data: &[u8]) -> Option<Vec<u8>> {
    let Ok(Value::Object(mut plan)) = serde_json::from_slice::<Value>(data) else {
        return None;
    };
    plan.remove(gopt::artifact::SELF_KEY);
    let mut files = Map::new();
    files.insert("model.onnx".into(), gopt::artifact::sha256(MODEL).into());
    files.insert("weights.bin".into(), gopt::artifact::sha256(WEIGHTS).into());
    plan.insert("files".into(), Value::Object(files));
    // `sha256` must be the first field (see artifact::SELF_KEY).
    let body = serde_json::to_string_pretty(&Value::Object(plan)).ok()?;
    let text = format!(
        "{{\n  \"{}\": \"\",{}",
        gopt::artifact::SELF_KEY,
        body.strip_prefix('{')?
    );
    gopt::artifact::seal(text.as_bytes()).ok()
}

fuzz_target!(|data: &[u8]| {
    let plan = sealed(data).unwrap_or_else(|| data.to_vec());
    if std::fs::write(dir().join(gopt::artifact::PLAN), plan).is_ok() {
        let _ = gopt::Compiled::load(dir(), &gopt::pipeline::Options::default());
    }
});
