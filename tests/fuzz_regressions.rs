//! Inputs the fuzz targets (fuzz/, scripts/fuzz.sh) found crashing or hanging, each
//! replayed through the reader it broke: it must now end quickly with an error value.

use std::path::Path;
use std::time::{Duration, Instant};

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(name)
}

/// fuzz/npy: a 141-byte header of nested `{` took npyz's backtracking header parser
/// exponential time (a hang); it is refused before npyz sees it.
#[test]
fn npy_header_with_nested_brackets_is_refused_quickly() {
    let path = data("npy_nested_brackets_hang.npy");
    let start = Instant::now();
    let err = gopt::tensor_io::read_npy(&path).expect_err("a forged header");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
    assert!(err.to_string().contains("nests brackets"), "{err}");
}

/// The fuzz seeds stay readable: the check does not refuse real headers.
#[test]
fn npy_seeds_still_read() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/npy");
    for e in std::fs::read_dir(&dir).expect("fuzz/seeds/npy") {
        let p = e.expect("entry").path();
        gopt::tensor_io::read_npy(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }
}

/// fuzz/npy: a version-3 header declaring 2.3 GiB of header in a 146-byte file made npyz
/// allocate the declared length before reading (an out-of-memory under the fuzzer's
/// 2 GiB limit); the length is checked against the file first.
#[test]
fn npy_header_longer_than_the_file_is_refused() {
    let path = data("npy_v3_header_length_oom.npy");
    let err = gopt::tensor_io::read_npy(&path).expect_err("a forged header length");
    assert!(err.to_string().contains("header declares"), "{err}");
}
