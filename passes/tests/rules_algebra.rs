//! Each algebra rule alone: it reaches its stated right side (and computes the same
//! numbers), and it does not fire where its side condition fails.

mod common;
use common::{check_not_applicable, check_rewrite, vals};

#[test]
fn identity() {
    check_rewrite(
        "algebra-identity",
        r#"graph "g"(%0 "x": f32[2,3]) -> (%2) {
  %1 "i": f32[2,3] = Identity "i"(%0)
  %2 "y": f32[2,3] = Relu "r"(%1)
}"#,
        r#"graph "g"(%0 "x": f32[2,3]) -> (%1) {
  %1 "y": f32[2,3] = Relu "r"(%0)
}"#,
    );
}

#[test]
fn cast_same() {
    let src = r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "c": f32[3] = Cast "c"(%0) {to=dtype f32}
  %2 "y": f32[3] = Relu "r"(%1)
}"#;
    check_rewrite(
        "algebra-cast-same",
        src,
        r#"graph "g"(%0 "x": f32[3]) -> (%1) {
  %1 "y": f32[3] = Relu "r"(%0)
}"#,
    );
    check_not_applicable(
        "algebra-cast-same",
        r#"graph "g"(%0 "x": f32[3]) -> (%1) {
  %1 "c": bf16[3] = Cast "c"(%0) {to=dtype bf16}
}"#,
    );
}

#[test]
fn transpose_pairs() {
    let src = r#"graph "g"(%0 "x": f32[2,3,4]) -> (%2) {
  %1 "t1": f32[3,4,2] = Transpose "t1"(%0) {perm=ints[1,2,0]}
  %2 "t2": f32[4,2,3] = Transpose "t2"(%1) {perm=ints[1,2,0]}
}"#;
    check_rewrite(
        "algebra-transpose-transpose",
        src,
        r#"graph "g"(%0 "x": f32[2,3,4]) -> (%1) {
  %1 "t": f32[4,2,3] = Transpose "t"(%0) {perm=ints[2,0,1]}
}"#,
    );
    check_rewrite(
        "algebra-transpose-identity",
        r#"graph "g"(%0 "x": f32[2,3]) -> (%2) {
  %1 "t": f32[2,3] = Transpose "t"(%0) {perm=ints[0,1]}
  %2 "y": f32[2,3] = Relu "r"(%1)
}"#,
        r#"graph "g"(%0 "x": f32[2,3]) -> (%1) {
  %1 "y": f32[2,3] = Relu "r"(%0)
}"#,
    );
    check_not_applicable(
        "algebra-transpose-identity",
        r#"graph "g"(%0 "x": f32[2,3]) -> (%1) {
  %1 "t": f32[3,2] = Transpose "t"(%0) {perm=ints[1,0]}
}"#,
    );
}

#[test]
fn reshape_chain() {
    check_rewrite(
        "algebra-reshape-reshape",
        r#"graph "g"(%0 "x": f32[2,3,4]) -> (%4) {
  %1 "s1": i64[2] = const [6, 4]
  %2 "s2": i64[1] = const [24]
  %3 "a": f32[6,4] = Reshape "a"(%0, %1)
  %4 "b": f32[24] = Reshape "b"(%3, %2)
}"#,
        r#"graph "g"(%0 "x": f32[2,3,4]) -> (%2) {
  %1 "s": i64[1] = const [24]
  %2 "b": f32[24] = Reshape "b"(%0, %1)
}"#,
    );
}

#[test]
fn neutral_elements() {
    check_rewrite(
        "algebra-add-zero",
        r#"graph "g"(%0 "x": f32[2,3]) -> (%3) {
  %1 "z": f32[3] = const [0.0, 0.0, 0.0]
  %2 "a": f32[2,3] = Add "a"(%0, %1)
  %3 "y": f32[2,3] = Relu "r"(%2)
}"#,
        r#"graph "g"(%0 "x": f32[2,3]) -> (%1) {
  %1 "y": f32[2,3] = Relu "r"(%0)
}"#,
    );
    // Adding zeros that broadcast x to a larger shape is not a no-op.
    check_not_applicable(
        "algebra-add-zero",
        r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "z": f32[2,3] = const [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
  %2 "a": f32[2,3] = Add "a"(%0, %1)
}"#,
    );
    check_not_applicable(
        "algebra-mul-one",
        r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "c": f32[3] = const [1.0, 2.0, 1.0]
  %2 "a": f32[3] = Mul "a"(%0, %1)
}"#,
    );
}

#[test]
fn constants_move_right() {
    check_rewrite(
        "algebra-add-const-right",
        r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "c": f32[3] = const [1.0, 2.0, 3.0]
  %2 "a": f32[3] = Add "a"(%1, %0)
}"#,
        r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "c": f32[3] = const [1.0, 2.0, 3.0]
  %2 "a": f32[3] = Add "a"(%0, %1)
}"#,
    );
    check_not_applicable(
        "algebra-mul-const-right",
        r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "c": f32[3] = const [1.0, 2.0, 3.0]
  %2 "a": f32[3] = Mul "a"(%0, %1)
}"#,
    );
}

#[test]
fn batchnorm_folds_into_conv() {
    let w = vals(4 * 3 * 9, 1);
    let src = format!(
        r#"graph "g"(%0 "x": f32[1,3,5,5]) -> (%8) {{
  %1 "w": f32[4,3,3,3] = const {w}
  %2 "b": f32[4] = const [0.1, 0.2, 0.3, 0.4]
  %3 "s": f32[4] = const [1.5, 0.5, -1.0, 2.0]
  %4 "beta": f32[4] = const [0.0, 1.0, -1.0, 0.5]
  %5 "m": f32[4] = const [0.2, -0.2, 0.1, 0.0]
  %6 "v": f32[4] = const [1.0, 0.25, 4.0, 0.5]
  %7 "c": f32[1,4,5,5] = Conv "c"(%0, %1, %2) {{pads=ints[1,1,1,1]}}
  %8 "bn": f32[1,4,5,5] = BatchNormalization "bn"(%7, %3, %4, %5, %6) {{epsilon=1e-5}}
}}"#
    );
    let g = check_rewrite_any("algebra-batchnorm-into-conv", &src);
    assert!(g.nodes.iter().all(|n| n.op.name() != "BatchNormalization"));
    check_not_applicable(
        "algebra-batchnorm-into-conv",
        r#"graph "g"(%0 "x": f32[1,4,2,2]) -> (%5) {
  %1 "s": f32[4] = const [1.5, 0.5, -1.0, 2.0]
  %2 "beta": f32[4] = const [0.0, 1.0, -1.0, 0.5]
  %3 "m": f32[4] = const [0.2, -0.2, 0.1, 0.0]
  %4 "v": f32[4] = const [1.0, 0.25, 4.0, 0.5]
  %5 "bn": f32[1,4,2,2] = BatchNormalization "bn"(%0, %1, %2, %3, %4)
}"#,
    );
}

#[test]
fn power_of_two_scale_folds_into_weight() {
    let w = vals(12, 2);
    let src = format!(
        r#"graph "g"(%0 "x": f32[2,4]) -> (%4) {{
  %1 "w": f32[4,3] = const {w}
  %2 "c": f32[] = const [0.25]
  %3 "m": f32[2,3] = MatMul "m"(%0, %1)
  %4 "y": f32[2,3] = Mul "s"(%3, %2)
}}"#
    );
    let g = check_rewrite_any("algebra-mul-pow2-into-weight", &src);
    assert!(g.nodes.iter().all(|n| n.op.name() != "Mul"));
    check_not_applicable(
        "algebra-mul-pow2-into-weight",
        &src.replace("[0.25]", "[0.3]"),
    );
}

/// Checks a rule whose right side holds computed constants: it fires, the result
/// verifies and computes the same numbers.
#[track_caller]
fn check_rewrite_any(rule: &str, src: &str) -> gopt_ir::Verified {
    check_rewrite(rule, src, src)
}

#[test]
fn one_over_x_is_reciprocal() {
    // torch exports rsqrt as Div(ones(1), Sqrt(x)): the constant has shape [1].
    let src = r#"graph "g"(%0 "x": f32[2,3,1]) -> (%3) {
  %1 "one": f32[1] = const [1.0]
  %2 "s": f32[2,3,1] = Sqrt "s"(%0)
  %3 "d": f32[2,3,1] = Div "d"(%1, %2)
}"#;
    check_rewrite(
        "algebra-div-one",
        src,
        r#"graph "g"(%0 "x": f32[2,3,1]) -> (%2) {
  %1 "s": f32[2,3,1] = Sqrt "s"(%0)
  %2 "r": f32[2,3,1] = Reciprocal "r"(%1)
}"#,
    );
    check_not_applicable("algebra-div-one", &src.replace("[1.0]", "[2.0]"));
    // Ones that broadcast x to a larger shape are not 1 / x.
    check_not_applicable(
        "algebra-div-one",
        r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "one": f32[2,3] = const [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
  %2 "d": f32[2,3] = Div "d"(%1, %0)
}"#,
    );
}

#[test]
fn transposes_move_out_of_elementwise_math() {
    // Rotary's q·cos with q in [b, h, s, d] and cos [1, 1, s, d].
    let mul = format!(
        r#"graph "g"(%0 "x": f32[1,3,2,4]) -> (%3) {{
  %1 "cos": f32[1,1,3,4] = const {c}
  %2 "t": f32[1,2,3,4] = Transpose "t"(%0) {{perm=ints[0,2,1,3]}}
  %3 "y": f32[1,2,3,4] = Mul "y"(%2, %1)
}}"#,
        c = vals(12, 31)
    );
    let g = check_rewrite_any("algebra-transpose-out-of-mul", &mul);
    let last = g.nodes.last().expect("a node");
    assert_eq!(last.op.name(), "Transpose", "{}", gopt_ir::text::print(&g));
    // A constant that broadcasts the product to a larger shape stays where it is.
    check_not_applicable(
        "algebra-transpose-out-of-mul",
        r#"graph "g"(%0 "x": f32[1,3,1,4]) -> (%3) {
  %1 "c": f32[1,2,3,4] = const [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0]
  %2 "t": f32[1,1,3,4] = Transpose "t"(%0) {perm=ints[0,2,1,3]}
  %3 "y": f32[1,2,3,4] = Mul "y"(%2, %1)
}"#,
    );
    let add = r#"graph "g"(%0 "a": f32[1,3,2,4], %1 "b": f32[1,3,2,4]) -> (%4) {
  %2 "ta": f32[1,2,3,4] = Transpose "ta"(%0) {perm=ints[0,2,1,3]}
  %3 "tb": f32[1,2,3,4] = Transpose "tb"(%1) {perm=ints[0,2,1,3]}
  %4 "y": f32[1,2,3,4] = Add "y"(%2, %3)
}"#;
    check_rewrite(
        "algebra-transpose-out-of-add",
        add,
        r#"graph "g"(%0 "a": f32[1,3,2,4], %1 "b": f32[1,3,2,4]) -> (%3) {
  %2 "s": f32[1,3,2,4] = Add "s"(%0, %1)
  %3 "y": f32[1,2,3,4] = Transpose "y"(%2) {perm=ints[0,2,1,3]}
}"#,
    );
    // Different permutations do not share one transpose.
    check_not_applicable(
        "algebra-transpose-out-of-add",
        &add.replace("%1 \"b\": f32[1,3,2,4]", "%1 \"b\": f32[1,3,4,2]")
            .replace(
                "Transpose \"tb\"(%1) {perm=ints[0,2,1,3]}",
                "Transpose \"tb\"(%1) {perm=ints[0,3,1,2]}",
            ),
    );
}
