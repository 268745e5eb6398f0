//! Fuzzes ONNX decoding and import, then verification (structure, shape inference) of
//! whatever imports: no input may panic; every failure must be an error value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(imported) = gopt_frontends::onnx::import(data, None) {
        let _ = gopt_ir::verify(imported.model.graph);
    }
});
