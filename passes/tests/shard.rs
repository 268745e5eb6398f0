//! The sharding pass on small graphs built here: an MLP block (column-parallel up,
//! row-parallel down, the AllReduce before the bias and residual) computes the unsplit
//! block's numbers when its ranks run together; a width that does not divide is an
//! error naming it; N=1 keeps the structure with 1-rank collectives; a 3-D ONNX
//! Attention splits by whole heads; and the cost model prices a collective by its
//! ring traffic over NVLink.

use gopt_ir::ops::collective::simulate;
use gopt_ir::ops::{CollectiveOp, ElementwiseOp, NnOp};
use gopt_ir::{dim, verify, Attr, Attrs, DType, Graph, Op, Tensor, TensorType};
use gopt_passes::cost::link::{COLLECTIVE_LATENCY_S, NVLINK4_BYTES_PER_S};
use gopt_passes::cost::{op_work, Target};
use gopt_passes::shard::{collectives, shard, ShardError};

fn data(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| (((i as u64 * 2654435761 + seed * 40503) % 1000) as f64 / 500.0) - 1.0)
        .collect();
    Tensor::from_f64s(DType::F32, shape, &v).expect("data")
}

/// `y = relu(x @ W1 + b1) @ W2 + b2 + x`, x f32[3,8], W1 [8,width].
fn mlp(width: usize) -> Graph {
    let mut g = Graph::new("mlp");
    let x = g.add_input("x", TensorType::new(DType::F32, dim::shape_of(&[3, 8])));
    let w1 = g.add_const("w1", data(&[8, width], 1));
    let b1 = g.add_const("b1", data(&[width], 2));
    let w2 = g.add_const("w2", data(&[width, 8], 3));
    let b2 = g.add_const("b2", data(&[8], 4));
    let ew = |e| Op::Elementwise(e);
    let n = g.add_node(
        "up",
        Op::Nn(NnOp::MatMul),
        Attrs::default(),
        vec![Some(x), Some(w1)],
        &["h"],
    );
    let h = g.nodes[n.index()].outputs[0];
    let n = g.add_node(
        "up_bias",
        ew(ElementwiseOp::Add),
        Attrs::default(),
        vec![Some(h), Some(b1)],
        &["hb"],
    );
    let hb = g.nodes[n.index()].outputs[0];
    let n = g.add_node(
        "act",
        ew(ElementwiseOp::Relu),
        Attrs::default(),
        vec![Some(hb)],
        &["a"],
    );
    let a = g.nodes[n.index()].outputs[0];
    let n = g.add_node(
        "down",
        Op::Nn(NnOp::MatMul),
        Attrs::default(),
        vec![Some(a), Some(w2)],
        &["d"],
    );
    let d = g.nodes[n.index()].outputs[0];
    let n = g.add_node(
        "down_bias",
        ew(ElementwiseOp::Add),
        Attrs::default(),
        vec![Some(d), Some(b2)],
        &["db"],
    );
    let db = g.nodes[n.index()].outputs[0];
    let n = g.add_node(
        "residual",
        ew(ElementwiseOp::Add),
        Attrs::default(),
        vec![Some(db), Some(x)],
        &["y"],
    );
    let y = g.nodes[n.index()].outputs[0];
    g.outputs.push(y);
    g
}

#[test]
fn an_mlp_splits_and_its_ranks_sum_to_the_whole() {
    let g = verify(mlp(16)).expect("verify");
    let x = data(&[3, 8], 9);
    let want = gopt_ir::interp::run(&g, std::slice::from_ref(&x)).expect("run");
    // One rank keeps the structure: the same split, an AllReduce over one rank.
    for ranks in [1, 2, 4] {
        let s = shard(&g, ranks).expect("shard");
        assert_eq!(
            (s.column.as_slice(), s.row.as_slice()),
            (&["up".to_string()][..], &["down".to_string()][..])
        );
        for r in &s.ranks {
            let c = collectives(r);
            assert_eq!(c.len(), 1, "one AllReduce");
            assert_eq!(c[0], (CollectiveOp::AllReduce, 3 * 8 * 4));
            // Each rank holds 1/N of the up and down weights.
            let w1 = r
                .nodes
                .iter()
                .find(|n| n.name == "up")
                .and_then(|n| n.inputs[1])
                .expect("w1");
            assert_eq!(
                r.ty(w1).expect("typed").to_string(),
                format!("f32[8,{}]", 16 / ranks)
            );
        }
        let graphs: Vec<Graph> = s.ranks.iter().map(|r| Graph::clone(r)).collect();
        let outs = simulate(&graphs, std::slice::from_ref(&x)).expect("simulate");
        for got in outs {
            let (a, b) = (got[0].to_f64_vec(), want[0].to_f64_vec());
            for (p, q) in a.iter().zip(&b) {
                assert!(
                    (p - q).abs() <= 1e-5 * (1.0 + q.abs()),
                    "x{ranks}: {p} vs {q}"
                );
            }
        }
    }
}

#[test]
fn odd_widths_are_named() {
    let g = verify(mlp(15)).expect("verify");
    let e = shard(&g, 2).expect_err("15 columns, 2 ranks");
    assert!(matches!(e, ShardError::Indivisible { ranks: 2, .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("`up`") && msg.contains("15 output columns"),
        "{msg}"
    );
}

#[test]
fn collectives_cost_their_ring_traffic_over_nvlink() {
    let t = Target::h200();
    let ty = TensorType::new(DType::F32, dim::shape_of(&[1, 128, 768]));
    let bytes = 128.0 * 768.0 * 4.0;
    for (ranks, share) in [(1usize, 0.0), (2, 1.0), (4, 1.5)] {
        let mut a = Attrs::default();
        a.set("ranks", Attr::Int(ranks as i64));
        let w = op_work(
            &t,
            Op::Collective(CollectiveOp::AllReduce),
            &a,
            &[&ty],
            std::slice::from_ref(&ty),
        );
        let want = if ranks == 1 {
            0.0
        } else {
            share * bytes / NVLINK4_BYTES_PER_S + COLLECTIVE_LATENCY_S
        };
        assert!(
            (w.seconds - want).abs() < 1e-12,
            "x{ranks}: {} vs {want}",
            w.seconds
        );
    }
}

#[test]
fn a_split_placement_scatters_and_reassembles() {
    use gopt_passes::shard::Placement;
    let t = data(&[2, 4, 3], 5);
    // 2 blocks over 4 ranks (replicated K/V heads): ranks 0 and 1 hold block 0.
    let p = Placement::Split { axis: 1, blocks: 2 };
    let parts: Vec<Tensor> = (0..4).map(|r| p.part(&t, r, 4).expect("part")).collect();
    assert_eq!(parts[0].shape(), &[2, 2, 3]);
    assert_eq!(parts[0], parts[1]);
    assert_ne!(parts[1], parts[2]);
    assert_eq!(p.assemble(&parts).expect("assemble"), t);
    assert_eq!(
        Placement::Whole.assemble(&parts[..1]).expect("whole"),
        parts[0]
    );
    let odd = Placement::Split { axis: 2, blocks: 2 };
    assert!(odd.part(&t, 0, 2).is_err(), "3 does not split in 2");
}

/// `y = Attention(x Wq, x Wk, x Wv) Wo` on 3-D inputs: x f32[2,5,16], 4 query heads and
/// 2 K/V heads of 4 (`q_num_heads`, `kv_num_heads`), causal.
fn attention_3d() -> Graph {
    let mut g = Graph::new("attention_3d");
    let x = g.add_input("x", TensorType::new(DType::F32, dim::shape_of(&[2, 5, 16])));
    let product = |g: &mut Graph, name: &str, cols: usize, seed: u64, a| {
        let w = g.add_const(&format!("{name}_w"), data(&[16, cols], seed));
        let n = g.add_node(
            name,
            Op::Nn(NnOp::MatMul),
            Attrs::default(),
            vec![Some(a), Some(w)],
            &[name],
        );
        g.nodes[n.index()].outputs[0]
    };
    let q = product(&mut g, "q", 16, 11, x);
    let k = product(&mut g, "k", 8, 12, x);
    let v = product(&mut g, "v", 8, 13, x);
    let mut a = Attrs::default();
    a.set("q_num_heads", Attr::Int(4));
    a.set("kv_num_heads", Attr::Int(2));
    a.set("is_causal", Attr::Int(1));
    let n = g.add_node(
        "attention",
        Op::Attention(gopt_ir::ops::AttentionOp::Attention),
        a,
        vec![Some(q), Some(k), Some(v)],
        &["o"],
    );
    let o = g.nodes[n.index()].outputs[0];
    let y = product(&mut g, "out", 16, 14, o);
    g.outputs.push(y);
    g
}

#[test]
fn a_3d_attention_splits_by_whole_heads() {
    let g = verify(attention_3d()).expect("verify");
    let x = data(&[2, 5, 16], 7);
    let want = gopt_ir::interp::run(&g, std::slice::from_ref(&x)).expect("run");
    let s = shard(&g, 2).expect("2 ranks");
    assert_eq!(s.row, ["out".to_string()]);
    assert_eq!(s.column.len(), 3, "{:?}", s.column);
    let heads = s.ranks[1]
        .nodes
        .iter()
        .find(|n| n.name == "attention")
        .map(|n| {
            (
                n.attrs.int_or("q_num_heads", 0),
                n.attrs.int_or("kv_num_heads", 0),
            )
        });
    assert!(matches!(heads, Some((Ok(2), Ok(1)))), "{heads:?}");
    let graphs: Vec<Graph> = s.ranks.iter().map(|r| Graph::clone(r)).collect();
    for got in simulate(&graphs, std::slice::from_ref(&x)).expect("simulate") {
        let (p, q) = (got[0].to_f64_vec(), want[0].to_f64_vec());
        for (a, b) in p.iter().zip(&q) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
    }
    // 4 ranks: 2 K/V heads do not split into whole heads (3-D K/V heads are not
    // replicated), so nothing splits.
    let e = shard(&g, 4).expect_err("2 K/V heads, 4 ranks").to_string();
    assert!(
        e.contains("does not split into 4 ranks of whole heads"),
        "{e}"
    );
}
