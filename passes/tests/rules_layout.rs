//! The layout rule that lets attention read its heads in place: each case runs the rule
//! alone (the harness checks the expected form is reached and the numbers match).

mod common;
use common::{check_not_applicable, check_rewrite};

/// Attention over `[b, h, s, d]` heads transposed from `[b, s, h, d]` tensors (q: 2
/// heads, k and v: 1, so grouped-query), `perm` on every transpose.
fn heads(perm: &str) -> String {
    format!(
        r#"graph "g"(%0 "q": f32[1,4,2,3], %1 "k": f32[1,4,1,3], %2 "v": f32[1,4,1,3]) -> (%6) {{
  %3 "tq": f32[1,2,4,3] = Transpose "tq"(%0) {{perm={perm}}}
  %4 "tk": f32[1,1,4,3] = Transpose "tk"(%1) {{perm={perm}}}
  %5 "tv": f32[1,1,4,3] = Transpose "tv"(%2) {{perm={perm}}}
  %6 "o": f32[1,2,4,3] = Attention "a"(%3, %4, %5) {{is_causal=1, scale=0.5}}
}}"#
    )
}

#[test]
fn attention_reads_heads_in_place() {
    let after = r#"graph "g"(%0 "q": f32[1,4,2,3], %1 "k": f32[1,4,1,3], %2 "v": f32[1,4,1,3]) -> (%11) {
  %3 "s6": i64[3] = const [1, 4, 6]
  %4 "s3": i64[3] = const [1, 4, 3]
  %5 "s4": i64[4] = const [1, 4, 2, 3]
  %6 "q3": f32[1,4,6] = Reshape "q3"(%0, %3)
  %7 "k3": f32[1,4,3] = Reshape "k3"(%1, %4)
  %8 "v3": f32[1,4,3] = Reshape "v3"(%2, %4)
  %9 "a3": f32[1,4,6] = Attention "a3"(%6, %7, %8) {is_causal=1, kv_num_heads=1, q_num_heads=2, scale=0.5}
  %10 "a4": f32[1,4,2,3] = Reshape "a4"(%9, %5)
  %11 "o": f32[1,2,4,3] = Transpose "o"(%10) {perm=ints[0,2,1,3]}
}"#;
    check_rewrite(
        "layout-attention-heads-in-place",
        &heads("ints[0,2,1,3]"),
        after,
    );
}

#[test]
fn other_transposes_stay() {
    // [0,1,3,2] swaps rows and head columns: not a head layout.
    let src = r#"graph "g"(%0 "q": f32[1,2,3,3], %1 "k": f32[1,2,3,3], %2 "v": f32[1,2,3,3]) -> (%6) {
  %3 "tq": f32[1,2,3,3] = Transpose "tq"(%0) {perm=ints[0,1,3,2]}
  %4 "tk": f32[1,2,3,3] = Transpose "tk"(%1) {perm=ints[0,1,3,2]}
  %5 "tv": f32[1,2,3,3] = Transpose "tv"(%2) {perm=ints[0,1,3,2]}
  %6 "o": f32[1,2,3,3] = Attention "a"(%3, %4, %5)
}"#;
    check_not_applicable("layout-attention-heads-in-place", src);
}
