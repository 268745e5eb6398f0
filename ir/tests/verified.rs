//! A `Verified` graph's types may only be narrowed: a symbolic dim made known keeps it
//! verified (a GPU plan lays a data-dependent size out at its bound); any other change
//! of dtype, rank or known dim is refused.

use gopt_ir::text::parse;
use gopt_ir::{verify, DType, Dim, TensorType, ValueId};

const SRC: &str = r#"graph "main"(%0 "x": f32[n,4]) -> (%1) {
  %1 "y": f32[n,4] = Relu "r"(%0)
}
"#;

fn ty(dtype: DType, dims: &[Dim]) -> TensorType {
    TensorType::new(dtype, dims.to_vec())
}

#[test]
fn a_symbolic_dim_may_become_known() {
    let mut g = verify(parse(SRC).expect("parses")).expect("verifies");
    let y = ValueId(1);
    g.refine_type(y, ty(DType::F32, &[Dim::Known(7), Dim::Known(4)]))
        .expect("narrowing n to 7 is allowed");
    assert_eq!(g.ty(y).expect("typed").to_string(), "f32[7,4]");
}

#[test]
fn anything_but_narrowing_is_refused() {
    let mut g = verify(parse(SRC).expect("parses")).expect("verifies");
    let y = ValueId(1);
    for (bad, what) in [
        (ty(DType::F16, &[Dim::Known(7), Dim::Known(4)]), "dtype"),
        (
            ty(DType::F32, &[Dim::Known(7), Dim::Known(5)]),
            "a known dim",
        ),
        (ty(DType::F32, &[Dim::Known(28)]), "rank"),
    ] {
        let e = g.refine_type(y, bad).expect_err(what).to_string();
        assert!(e.contains("`y`") && e.contains("narrowed"), "{what}: {e}");
    }
    assert_eq!(
        g.ty(y).expect("typed").to_string(),
        "f32[n,4]",
        "left as it was"
    );
}
