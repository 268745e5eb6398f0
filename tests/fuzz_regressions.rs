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

/// fuzz/npy: a shape whose dims multiply past u64 (`(14966504185106442919, 2, 2)`) made
/// npyz's header parser overflow (a panic in a checked build, a wrapped element count in
/// a release one); the shape is checked before npyz sees it.
#[test]
fn npy_shape_whose_product_overflows_is_refused() {
    let path = data("npy_shape_product_overflow.npy");
    let err = gopt::tensor_io::read_npy(&path).expect_err("a forged shape");
    assert!(err.to_string().contains("too many elements"), "{err}");
}

/// fuzz/pb: a TensorProto whose dims hold a 0 (so zero elements) beside dims that
/// multiply past isize::MAX passed the element count check and then panicked in
/// ndarray, which bounds the product of the nonzero dims even for an empty array.
#[test]
fn pb_empty_tensor_with_overflowing_dims_is_refused() {
    let path = data("pb_zero_dim_shape_overflow.pb");
    let err = gopt::tensor_io::read_tensor(&path).expect_err("forged dims");
    assert!(err.to_string().contains("overflow"), "{err}");
}

/// fuzz/text: a `\u` escape not followed by `{` (`"x -> \u}"`) sliced the input
/// backwards in the IR text parser; it is now a parse error.
#[test]
fn ir_text_bad_unicode_escape_is_refused() {
    for src in [
        "gr%5 \"x -> \\u}",
        "\"\\u",
        "\"\\u{",
        "\"\\u{}\"",
        "\"\\u{110000}\"",
    ] {
        let err = gopt::ir::text::parse(src).expect_err(src);
        assert!(
            err.to_string().contains("escape") || err.to_string().contains("unterminated"),
            "{src}: {err}"
        );
    }
}
