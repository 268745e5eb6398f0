//! Text format: print → parse → print is a fixpoint, and parse errors name the line.

use gopt_ir::text::{parse, print, print_with, PrintOptions};
use gopt_ir::{interp, Tensor};

const SRC: &str = r#"graph "main"(%0 "x": f32[batch,(seq+1),(batch*seq)]) -> (%3) {
  %1 "w": f32[3] = const [1.0, -2.5, inf]
  %2 "k": i64[2] = const [9007199254740993, -4]
  %4 "b": bool[2] = const [true, false]
  %3 "y": f32[batch,(seq+1),(batch*seq)] = Add "add0"(%0, %1) {alpha=0.5, axes=ints[0,-1], mode="a \"q\"", to=dtype bf16, v=tensor f16[2] [0.5, 1.0], fs=floats[], n=-3}
}
"#;

#[test]
fn print_parse_print_is_a_fixpoint() {
    let g = parse(SRC).expect("parses");
    let text = print(&g);
    let again = print(&parse(&text).expect("reparses"));
    assert_eq!(text, again);
    assert!(
        text.contains("9007199254740993"),
        "i64 beyond 2^53 kept exactly: {text}"
    );
    assert!(text.contains("(seq+1)") && text.contains("(batch*seq)"));
    assert!(text.contains("to=dtype bf16"));
}

#[test]
fn nested_graphs_and_captures_round_trip() {
    let src = r#"graph "main"(%0 "c": bool[], %1 "x": f32[2]) -> (%2) {
  %2 "y": f32[2] = If "if0"(%0) {else_branch=graph "e"() -> (%0) captures(%1 "x": f32[2]) {
    %0 "o": f32[2] = Relu "r"(%1)
  }, then_branch=graph "t"() -> (%0) captures(%1 "x": f32[2]) {
    %0 "o2": f32[2] = Identity "i"(%1)
  }}
}
"#;
    let g = parse(src).expect("parses");
    let text = print(&g);
    assert_eq!(text, print(&parse(&text).expect("reparses")));
    let sub = g.nodes[0].attrs.graph("then_branch").expect("then branch");
    assert_eq!(sub.captures.len(), 1);
}

#[test]
fn parsed_graph_runs() {
    let src = r#"graph "g"(%0 "x": f32[3]) -> (%2) {
  %1 "w": f32[3] = const [1.0, 2.0, 3.0]
  %2 "y": f32[3] = Add "a"(%0, %1)
}
"#;
    let g = parse(src).expect("parses");
    let x = Tensor::from_f64s(gopt_ir::DType::F32, &[3], &[0.5, 0.5, 0.5]).expect("tensor");
    let out = interp::run(&g, &[x]).expect("runs");
    assert_eq!(out[0].to_f64_vec(), vec![1.5, 2.5, 3.5]);
}

#[test]
fn elided_constants_do_not_parse_back() {
    let g = parse(SRC).expect("parses");
    let text = print_with(
        &g,
        PrintOptions {
            max_inline_elements: 2,
        },
    );
    assert!(text.contains("<3 elements, fnv "), "{text}");
    let err = parse(&text)
        .expect_err("elided data cannot round-trip")
        .to_string();
    assert!(err.contains("elided"), "{err}");
}

#[test]
fn errors_name_the_line() {
    let bad = "graph \"g\"() -> () {\n  %0 \"a\": f32[1] = Frobnicate \"n\"()\n}\n";
    let err = parse(bad).expect_err("unknown op").to_string();
    assert!(
        err.starts_with("line 2:") && err.contains("Frobnicate"),
        "{err}"
    );
    let undefined = "graph \"g\"() -> (%4) {\n}\n";
    assert!(parse(undefined)
        .expect_err("undefined")
        .to_string()
        .contains("%4"));
    let twice = "graph \"g\"(%0 \"a\": f32[], %0 \"b\": f32[]) -> () {\n}\n";
    assert!(parse(twice)
        .expect_err("twice")
        .to_string()
        .contains("defined twice"));
}
