//! The collective family: text round trip, shape inference, one rank alone (the
//! identity over one rank, a clear error over several), and the CPU rank simulation
//! (AllReduce sums the ranks' inputs in rank order, AllGather concatenates them along
//! its axis; a failing rank fails the others instead of hanging them).

use gopt_ir::ops::collective::simulate;
use gopt_ir::text::{parse, print};
use gopt_ir::{infer_types, interp, DType, Graph, Tensor};

/// `y = Collective(x * scale)` for an f32[2,3] input, `scale` a constant.
fn graph(collective: &str, attrs: &str, scale: f64, out: &str) -> Graph {
    let src = format!(
        r#"graph "g"(%0 "x": f32[2,3]) -> (%3) {{
  %1 "s": f32[] = const [{scale:?}]
  %2 "xs": f32[2,3] = Mul "m"(%0, %1) {{}}
  %3 "y": f32{out} = {collective} "c"(%2) {{{attrs}}}
}}"#
    );
    parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn x() -> Tensor {
    Tensor::from_f64s(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).expect("x")
}

#[test]
fn collectives_print_parse_and_infer() {
    for (op, attrs, out) in [
        ("AllReduce", "group=0, ranks=4", "[2,3]"),
        ("AllGather", "axis=1, group=0, ranks=4", "[2,12]"),
        ("AllGather", "axis=-2, ranks=2", "[4,3]"),
    ] {
        let mut g = graph(op, attrs, 1.0, out);
        for v in &mut g.values {
            if v.name == "y" {
                v.ty = None;
            }
        }
        infer_types(&mut g).expect("infer");
        let y = g.find_value("y").expect("y");
        assert_eq!(
            g.ty(y).expect("typed").to_string(),
            format!("f32{out}"),
            "{op}"
        );
        let text = print(&g);
        assert_eq!(print(&parse(&text).expect("parse back")), text);
    }
}

#[test]
fn one_rank_is_the_identity_and_several_need_the_others() {
    let g = graph("AllReduce", "ranks=1", 2.0, "[2,3]");
    let y = interp::run(&g, &[x()]).expect("one rank");
    assert_eq!(y[0].to_f64_vec(), vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);

    let g = graph("AllReduce", "ranks=2", 2.0, "[2,3]");
    let e = interp::run(&g, &[x()])
        .expect_err("two ranks run alone")
        .to_string();
    assert!(
        e.contains("AllReduce") && e.contains("2 ranks") && e.contains("simulate"),
        "{e}"
    );

    let g = graph("AllReduce", "ranks=0", 2.0, "[2,3]");
    let e = interp::run(&g, &[x()]).expect_err("zero ranks").to_string();
    assert!(e.contains("ranks"), "{e}");
}

#[test]
fn simulated_all_reduce_sums_the_ranks() {
    // Rank r scales x by r + 1: the sum over 3 ranks is 6 x, on every rank.
    let graphs: Vec<Graph> = (0..3)
        .map(|r| graph("AllReduce", "ranks=3", (r + 1) as f64, "[2,3]"))
        .collect();
    let outs = simulate(&graphs, &[x()]).expect("run");
    for o in outs {
        assert_eq!(o[0].to_f64_vec(), vec![6.0, 12.0, 18.0, 24.0, 30.0, 36.0]);
    }
}

#[test]
fn simulated_all_gather_concatenates_in_rank_order() {
    let graphs: Vec<Graph> = (0..2)
        .map(|r| {
            graph(
                "AllGather",
                "axis=1, ranks=2",
                if r == 0 { 1.0 } else { -1.0 },
                "[2,6]",
            )
        })
        .collect();
    let outs = simulate(&graphs, &[x()]).expect("run");
    for o in outs {
        assert_eq!(o[0].shape(), &[2, 6]);
        assert_eq!(
            o[0].to_f64_vec(),
            vec![1.0, 2.0, 3.0, -1.0, -2.0, -3.0, 4.0, 5.0, 6.0, -4.0, -5.0, -6.0]
        );
    }
}

#[test]
fn a_failing_rank_fails_the_others() {
    // Rank 1's collective claims 3 ranks: it fails before the exchange, and rank 0,
    // waiting there, fails too instead of hanging.
    let graphs = vec![
        graph("AllReduce", "ranks=2", 1.0, "[2,3]"),
        graph("AllReduce", "ranks=3", 1.0, "[2,3]"),
    ];
    let e = simulate(&graphs, &[x()])
        .expect_err("mismatched ranks")
        .to_string();
    assert!(e.contains("rank 1") && e.contains("3 ranks"), "{e}");
}
