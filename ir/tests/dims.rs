//! Dims named by text (ONNX `dim_param`): exporters name a total length by its formula
//! (`"past_sequence_length + sequence_length"`); it must become that expression so
//! binding its names binds it, while any other text stays one opaque symbol.

use gopt_ir::{Bindings, Dim};

#[test]
fn a_formula_becomes_an_expression_that_binding_resolves() {
    let d = Dim::parse("past_sequence_length + sequence_length");
    assert_eq!(
        d,
        Dim::sym("past_sequence_length").add(&Dim::sym("sequence_length"))
    );
    let b: Bindings = [
        ("past_sequence_length".into(), 16),
        ("sequence_length".into(), 1),
    ]
    .into();
    assert_eq!(d.bind(&b), Dim::Known(17));
    let b: Bindings = [("a".into(), 6), ("b".into(), 3)].into();
    assert_eq!(Dim::parse("2*(a + b)/3").bind(&b), Dim::Known(6));
    assert_eq!(
        Dim::parse("a*b+1").bind(&b),
        Dim::Known(19),
        "* binds tighter than +"
    );
}

#[test]
fn other_text_is_one_symbol() {
    for text in [
        "batch",
        "batch-size",
        "../../x",
        "/tmp/x",
        "seq.len + 1",
        "a - b",
        "a +",
        "(a",
        "a b",
        "n²",
        "2x + 1",
    ] {
        assert_eq!(Dim::parse(text), Dim::sym(text), "{text:?}");
    }
}
