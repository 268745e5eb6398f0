//! The rotary rules alone: transformers' `x·cos + rotate_half(x)·sin` with constant
//! tables becomes ONNX `RotaryEmbedding` over the tables' first halves, and one over a
//! head view of a projection reads the projection's rows (`num_heads`); each computes
//! the input graph's numbers, and neither fires where its condition fails.

mod common;
use common::{check_not_applicable, check_rewrite, check_rules};

/// Constant tables `[1, 1, s, d]` whose halves are equal when `equal` (as
/// `cat(freqs, freqs)` makes them).
fn table(s: usize, d: usize, seed: u64, equal: bool) -> String {
    let half: Vec<f64> = common::rand(s * d / 2, seed);
    let mut v = Vec::with_capacity(s * d);
    for row in half.chunks(d / 2) {
        v.extend_from_slice(row);
        v.extend(row.iter().map(|x| if equal { *x } else { x + 0.5 }));
    }
    let v: Vec<String> = v.iter().map(|x| format!("{x:.6}")).collect();
    format!("[{}]", v.join(", "))
}

/// The same tables' first halves, `[1, s, d/2]`.
fn half_table(s: usize, d: usize, seed: u64) -> String {
    let v: Vec<String> = common::rand(s * d / 2, seed)
        .iter()
        .map(|x| format!("{x:.6}"))
        .collect();
    format!("[{}]", v.join(", "))
}

/// `x·cos + Concat(-x[.., from:], x[.., :from])·sin` over `x` `[2, 3, 4, 8]`.
fn rotate(from: i64, equal: bool) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[2,3,4,8]) -> (%12) {{
  %1 "cos": f32[1,1,4,8] = const {cos}
  %2 "sin": f32[1,1,4,8] = const {sin}
  %3 "h": i64[1] = const [{from}]
  %4 "e": i64[1] = const [9223372036854775807]
  %5 "z": i64[1] = const [0]
  %6 "ax": i64[1] = const [-1]
  %7 "one": i64[1] = const [1]
  %8 "x2": f32[2,3,4,{w2}] = Slice "x2"(%0, %3, %4, %6, %7)
  %9 "x1": f32[2,3,4,{from}] = Slice "x1"(%0, %5, %3, %6, %7)
  %10 "n": f32[2,3,4,{w2}] = Neg "n"(%8)
  %11 "r": f32[2,3,4,8] = Concat "r"(%10, %9) {{axis=-1}}
  %13 "a": f32[2,3,4,8] = Mul "a"(%0, %1)
  %14 "b": f32[2,3,4,8] = Mul "b"(%11, %2)
  %12 "y": f32[2,3,4,8] = Add "y"(%13, %14)
}}"#,
        cos = table(4, 8, 21, equal),
        sin = table(4, 8, 22, equal),
        w2 = 8 - from,
    )
}

#[test]
fn rotate_half_with_constant_tables_is_rotary_embedding() {
    let want = format!(
        r#"graph "g"(%0 "x": f32[2,3,4,8]) -> (%3) {{
  %1 "cos": f32[1,4,4] = const {cos}
  %2 "sin": f32[1,4,4] = const {sin}
  %3 "y": f32[2,3,4,8] = RotaryEmbedding "y"(%0, %1, %2)
}}"#,
        cos = half_table(4, 8, 21),
        sin = half_table(4, 8, 22),
    );
    check_rewrite("fuse-rotary", &rotate(4, true), &want);
    // Tables whose halves differ are not a rotation of pairs (c, c + d/2).
    check_not_applicable("fuse-rotary", &rotate(4, false));
    // Neither is a concatenation cut elsewhere than the middle.
    check_not_applicable("fuse-rotary", &rotate(3, true));
}

/// A projection `y` `[2, 4, 24]` seen as 3 heads `[2, 3, 4, 8]`, rotated, and merged
/// back to `[2, 4, 24]` (what attention reads).
fn heads(perm: &str) -> String {
    format!(
        r#"graph "g"(%0 "y": f32[2,4,24]) -> (%9) {{
  %1 "cos": f32[1,4,4] = const {cos}
  %2 "sin": f32[1,4,4] = const {sin}
  %3 "split": i64[4] = const [2, 4, 3, 8]
  %4 "q": f32[2,4,3,8] = Reshape "q"(%0, %3)
  %5 "t": f32[2,3,4,8] = Transpose "t"(%4) {{perm=ints[{perm}]}}
  %6 "r": f32[2,3,4,8] = RotaryEmbedding "r"(%5, %1, %2)
  %7 "back": f32[2,4,3,8] = Transpose "back"(%6) {{perm=ints[0,2,1,3]}}
  %8 "merge": i64[3] = const [2, 4, 24]
  %9 "o": f32[2,4,24] = Reshape "o"(%7, %8)
}}"#,
        cos = half_table(4, 8, 23),
        sin = half_table(4, 8, 24),
    )
}

#[test]
fn rotary_over_a_head_view_reads_the_rows() {
    let src = heads("0,2,1,3");
    check_rules(&["fuse-rotary-rows"], &src);
    // With the views cancelling, nothing but the 3-D RotaryEmbedding is left.
    let g = check_rules(
        &[
            "fuse-rotary-rows",
            "algebra-transpose-transpose",
            "algebra-transpose-identity",
            "algebra-reshape-reshape",
            "algebra-reshape-same",
        ],
        &src,
    );
    let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, ["RotaryEmbedding"], "{}", gopt_ir::text::print(&g));
    assert_eq!(g.nodes[0].attrs.int_or("num_heads", 0).unwrap(), 3);
    // An interleaved rotation's pairs are not the ones the rows form would compute
    // (its attributes are kept as they are only when empty).
    check_not_applicable(
        "fuse-rotary-rows",
        &heads("0,2,1,3").replace(
            "RotaryEmbedding \"r\"(%5, %1, %2)",
            "RotaryEmbedding \"r\"(%5, %1, %2) {interleaved=1}",
        ),
    );
}
