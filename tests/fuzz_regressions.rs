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
