//! The attention-mask rules (passes/src/rules/mask.rs) on the pattern transformers'
//! BERT export builds: a padding mask `[B,1,1,S]` And-ed with an all-true constant,
//! expanded to `[B,1,S,S]` and turned additive by a Where before attention. Together they
//! leave attention reading the `[B,1,1,S]` form, computing the same numbers; each rule's
//! side condition is checked where it must not fire.

mod common;
use common::{check_not_applicable, check_rules, vals};

/// The export's mask chain; `and_const` is the `[1,1,S,1]` bool constant it And-s in.
fn bert_mask(and_const: &str) -> String {
    format!(
        r#"graph "g"(%0 "q": f32[2,2,4,3], %1 "k": f32[2,2,4,3], %2 "v": f32[2,2,4,3], %3 "pad": bool[2,1,1,4]) -> (%11) {{
  %4 "c": bool[1,1,4,1] = const {and_const}
  %5 "s": i64[4] = const [2, 1, 4, 4]
  %6 "zero": f32[] = const [0.0]
  %7 "neg": f32[] = const [-3.4028235e38]
  %8 "and": bool[2,1,4,4] = And "and"(%4, %3)
  %9 "ex": bool[2,1,4,4] = Expand "ex"(%8, %5)
  %10 "m": f32[2,1,4,4] = Where "w"(%9, %6, %7)
  %11 "o": f32[2,2,4,3] = Attention "att"(%0, %1, %2, %10) {{scale=0.5}}
}}"#
    )
}

const RULES: [&str; 5] = [
    "mask-and-true",
    "mask-true-and",
    "mask-expand-expand",
    "mask-where-of-expand",
    "mask-attention-unexpand",
];

#[test]
fn attention_reads_the_padding_mask_unexpanded() {
    let g = check_rules(&RULES, &bert_mask("[true, true, true, true]"));
    let att = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "Attention")
        .expect("attention kept");
    let mask = att.inputs[3].expect("a mask");
    let ty = g.value(mask).ty.clone().expect("typed");
    let dims: Vec<String> = ty.shape.iter().map(|d| d.to_string()).collect();
    assert_eq!(dims, ["2", "1", "1", "4"], "{}", gopt_ir::text::print(&g));
    assert!(
        !g.nodes.iter().any(|n| n.op.name() == "Expand"),
        "{}",
        gopt_ir::text::print(&g)
    );
}

#[test]
fn a_constant_with_a_false_keeps_the_and() {
    check_not_applicable("mask-and-true", &bert_mask("[true, false, true, true]"));
    check_not_applicable("mask-true-and", &bert_mask("[true, false, true, true]"));
}

#[test]
fn where_with_a_tensor_branch_keeps_its_expand() {
    let src = format!(
        r#"graph "g"(%0 "c": bool[2,1,1,4]) -> (%4) {{
  %1 "s": i64[4] = const [2, 1, 4, 4]
  %2 "x": f32[2,1,4,4] = const {x}
  %3 "ex": bool[2,1,4,4] = Expand "ex"(%0, %1)
  %4 "m": f32[2,1,4,4] = Where "w"(%3, %2, %2)
}}"#,
        x = vals(32, 1)
    );
    check_not_applicable("mask-where-of-expand", &src);
}

#[test]
fn one_expand_or_an_unexpanded_mask_is_left_alone() {
    let one = r#"graph "g"(%0 "c": bool[2,1,1,4]) -> (%2) {
  %1 "s": i64[4] = const [2, 1, 4, 4]
  %2 "ex": bool[2,1,4,4] = Expand "ex"(%0, %1)
}"#;
    check_not_applicable("mask-expand-expand", one);
    // Attention already reading its mask unexpanded: nothing to absorb.
    let plain = r#"graph "g"(%0 "q": f32[2,2,4,3], %1 "k": f32[2,2,4,3], %2 "v": f32[2,2,4,3], %3 "m": f32[2,1,1,4]) -> (%4) {
  %4 "o": f32[2,2,4,3] = Attention "att"(%0, %1, %2, %3) {scale=0.5}
}"#;
    check_not_applicable("mask-attention-unexpand", plain);
}
