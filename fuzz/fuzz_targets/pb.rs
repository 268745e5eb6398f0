//! Fuzzes the `.pb` tensor file reader (a serialized TensorProto, as `gopt run` inputs
//! and the conformance cases' data sets are): decoding and conversion to a tensor, with
//! a folder holding a small external-data file so that path is reached too. No input may
//! panic or allocate what the bytes do not back; every failure must be an error value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use std::path::PathBuf;
use std::sync::OnceLock;

/// A folder (one per process) holding `data.bin`, 64 bytes external data may name.
fn base_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("gopt-fuzz-pb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the fuzz folder");
        let bytes: Vec<u8> = (0u8..64).collect();
        std::fs::write(dir.join("data.bin"), bytes).expect("write data.bin");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = gopt_frontends::onnx::proto::TensorProto::decode(data) {
        let _ = gopt_frontends::onnx::tensor_from_proto(&t, Some(base_dir()));
    }
});
