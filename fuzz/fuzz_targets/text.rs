//! Fuzzes the IR text parser (what IR tests and snapshots are written in): whatever
//! parses is verified (structure, shape inference) and printed again. No input may
//! panic; every failure must be an error value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(g) = gopt_ir::text::parse(src) {
        let _ = gopt_ir::text::print(&g);
        let _ = gopt_ir::verify(g);
    }
});
