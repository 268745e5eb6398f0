//! The arena planner: buffers whose lifetimes do not overlap share bytes, overlapping
//! ones never do, views alias their source, and the arena is never larger than the sum.

use gopt_codegen::memory::{plan, ALIGN};
use gopt_ir::text::parse;

fn layout(src: &str) -> gopt_codegen::memory::Layout {
    let g = gopt_ir::verify(parse(src).expect("parses")).expect("verifies");
    plan(&g).expect("plans")
}

#[test]
fn a_chain_reuses_memory() {
    // x -> a -> b -> c -> y: at most two activations are live at once.
    let l = layout(
        r#"graph "g"(%0 "x": f32[1024]) -> (%4) {
  %1 "a": f32[1024] = Relu "r1"(%0)
  %2 "b": f32[1024] = Relu "r2"(%1)
  %3 "c": f32[1024] = Relu "r3"(%2)
  %4 "y": f32[1024] = Relu "r4"(%3)
}"#,
    );
    assert_eq!(l.buffers.len(), 5);
    assert_eq!(l.total_bytes, 5 * 4096);
    assert!(
        l.peak_bytes <= 3 * 4096,
        "peak {} for a chain",
        l.peak_bytes
    );
    assert!(l.peak_bytes >= 2 * 4096);
}

#[test]
fn overlapping_lifetimes_never_share_bytes() {
    let l = layout(
        r#"graph "g"(%0 "x": f32[100]) -> (%4) {
  %1 "a": f32[100] = Relu "r1"(%0)
  %2 "b": f32[100] = Relu "r2"(%0)
  %3 "c": f32[100] = Add "add1"(%1, %1)
  %4 "y": f32[100] = Add "add2"(%2, %3)
}"#,
    );
    for (i, a) in l.buffers.iter().enumerate() {
        assert_eq!(a.offset % ALIGN, 0);
        for b in &l.buffers[i + 1..] {
            let time = a.first <= b.last && b.first <= a.last;
            let space = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
            assert!(
                !(time && space),
                "{a:?} and {b:?} overlap in time and space"
            );
        }
    }
    assert!(l.peak_bytes <= l.total_bytes);
}

#[test]
fn views_alias_their_source() {
    let l = layout(
        r#"graph "g"(%0 "x": f32[2,8]) -> (%3) {
  %1 "s": i64[1] = const [16]
  %2 "v": f32[16] = Reshape "view"(%0, %1)
  %3 "y": f32[16] = Relu "r"(%2)
}"#,
    );
    let g = gopt_ir::verify(
        parse(
            r#"graph "g"(%0 "x": f32[2,8]) -> (%3) {
  %1 "s": i64[1] = const [16]
  %2 "v": f32[16] = Reshape "view"(%0, %1)
  %3 "y": f32[16] = Relu "r"(%2)
}"#,
        )
        .unwrap(),
    )
    .unwrap();
    let x = g.inputs[0];
    let v = g.nodes[0].outputs[0];
    assert_eq!(l.slots[&x], l.slots[&v], "the reshape is a view of x");
    assert_eq!(l.buffers.len(), 2);
}

#[test]
fn symbolic_shapes_are_an_error() {
    let g = gopt_ir::verify(
        parse(
            r#"graph "g"(%0 "x": f32[batch]) -> (%1) {
  %1 "y": f32[batch] = Relu "r"(%0)
}"#,
        )
        .unwrap(),
    )
    .unwrap();
    let e = plan(&g).expect_err("symbolic");
    assert!(e.to_string().contains("known only at run time"), "{e}");
}

#[test]
fn graph_inputs_keep_their_bytes_for_the_whole_run() {
    // A plan executes again on inputs copied in once (benchmarks, CUDA-graph replays):
    // nothing may reuse an input's bytes, even after its last reader.
    let g = gopt_ir::verify(
        parse(
            r#"graph "g"(%0 "x": f32[1024]) -> (%4) {
  %1 "a": f32[1024] = Relu "r1"(%0)
  %2 "b": f32[1024] = Relu "r2"(%1)
  %3 "c": f32[1024] = Relu "r3"(%2)
  %4 "y": f32[1024] = Relu "r4"(%3)
}"#,
        )
        .expect("parses"),
    )
    .expect("verifies");
    let l = plan(&g).expect("plans");
    let x = &l.buffers[l.slots[&g.inputs[0]]];
    for (i, b) in l.buffers.iter().enumerate() {
        if i == l.slots[&g.inputs[0]] {
            continue;
        }
        assert!(
            b.offset >= x.offset + x.bytes || x.offset >= b.offset + b.bytes,
            "{b:?} reuses the input's bytes {x:?}"
        );
    }
}
