//! Import snapshots: each fixture in tests/in/import is imported and printed in the IR
//! text format (constants over 16 elements elided) into snapshots/import/. Every snapshot
//! is paired with a semantic check: the graph verifies (so the snapshot shows inferred
//! types) and its full text parses back to the same text.

use gopt_ir::text::{parse, print, print_with, PrintOptions};
use std::path::Path;

fn fixture(name: &str) -> gopt_ir::Graph {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/in/import")
        .join(format!("{name}.onnx"));
    let imported = gopt_frontends::onnx::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    imported.model.graph
}

fn check(name: &str) {
    let g = gopt_ir::verify(fixture(name))
        .unwrap_or_else(|e| panic!("{name}: imported graph does not verify: {e}"));
    snapshot(name, g.into_inner());
}

fn snapshot(name: &str, g: gopt_ir::Graph) {
    let full = print(&g);
    let reparsed =
        parse(&full).unwrap_or_else(|e| panic!("{name}: printed IR does not parse: {e}\n{full}"));
    assert_eq!(
        full,
        print(&reparsed),
        "{name}: print/parse/print is not a fixpoint"
    );
    let text = print_with(
        &g,
        PrintOptions {
            max_inline_elements: 16,
        },
    );
    insta::with_settings!({snapshot_path => "../snapshots/import", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn mlp() {
    check("mlp");
}

#[test]
fn conv_bn_relu6() {
    check("conv_bn_relu6");
}

#[test]
fn opset10_upgrades() {
    check("opset10_upgrades");
}

#[test]
fn shape_arith() {
    check("shape_arith");
}

#[test]
fn constants() {
    check("constants");
}

#[test]
fn if_capture() {
    check("if_capture");
}

#[test]
fn shape_arith_bound_and_folded() {
    let mut g = gopt_ir::verify(fixture("shape_arith"))
        .expect("verifies")
        .into_inner();
    let bindings = gopt_ir::Bindings::from([("batch".to_string(), 2), ("seq".to_string(), 5)]);
    gopt_ir::bind_dims(&mut g, &bindings).expect("binds");
    let stats = gopt_ir::fold_constants(&mut g).expect("folds");
    assert_eq!(g.nodes.len(), 1, "only the Reshape remains after folding");
    assert_eq!(stats.folded, 6);
    snapshot("shape_arith_bound_and_folded", g);
}
