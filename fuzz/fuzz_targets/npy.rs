//! Fuzzes the `.npy` reader `gopt run` uses for inputs: header, dtype, shape (a forged
//! shape must be refused before anything is allocated for it), Fortran order and data.
//! The reader takes a path, so each input is written to a file first.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| std::env::temp_dir().join(format!("gopt-fuzz-{}.npy", std::process::id())))
}

fuzz_target!(|data: &[u8]| {
    if std::fs::write(path(), data).is_ok() {
        let _ = gopt::tensor_io::read_npy(path());
    }
});
