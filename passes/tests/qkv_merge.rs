//! The Q/K/V merge holds at every precision: an attention block whose Q, K and V are
//! three GEMMs of one input comes out of the whole optimizer with one GEMM feeding all
//! three, at fp32, bf16 and fp16, with biases, with zero biases (which algebra removes)
//! and without biases. At bf16/fp16 the GEMMs that attention reads are the ones writing
//! the low type (casts moved through the slices), with fp32 biases and low-type weights.

mod common;
use common::vals;
use gopt_passes::{optimize, Config, Precision};

const S: usize = 128;
const HIDDEN: usize = 64;
const HEADS: usize = 4;
const HEAD: usize = HIDDEN / HEADS;

#[derive(Clone, Copy, Debug)]
enum Bias {
    Random,
    Zero,
    None,
}

/// One BERT-style self-attention block as the TorchScript exporter writes it: Q/K/V
/// `MatMul (+ Add bias) -> Reshape -> Transpose` (K to `[b, h, d, s]`), scaled scores,
/// softmax, context, and an output projection.
fn block(bias: Bias) -> String {
    let w = |seed| vals(HIDDEN * HIDDEN, seed);
    let b = |seed| match bias {
        Bias::Random => vals(HIDDEN, seed),
        Bias::Zero | Bias::None => format!("[{}]", vec!["0.0"; HIDDEN].join(", ")),
    };
    let proj = |i: usize, out: usize, w: usize, b: usize| {
        match bias {
        Bias::None => format!(
            "  %{out} \"p{i}\": f32[1,{S},{HIDDEN}] = MatMul \"p{i}\"(%0, %{w})\n"
        ),
        Bias::Random | Bias::Zero => format!(
            "  %{m} \"m{i}\": f32[1,{S},{HIDDEN}] = MatMul \"m{i}\"(%0, %{w})\n  %{out} \"p{i}\": f32[1,{S},{HIDDEN}] = Add \"p{i}\"(%{b}, %{m})\n",
            m = out + 100
        ),
    }
    };
    format!(
        r#"graph "g"(%0 "x": f32[1,{S},{HIDDEN}]) -> (%31) {{
  %1 "wq": f32[{HIDDEN},{HIDDEN}] = const {wq}
  %2 "wk": f32[{HIDDEN},{HIDDEN}] = const {wk}
  %3 "wv": f32[{HIDDEN},{HIDDEN}] = const {wv}
  %4 "bq": f32[{HIDDEN}] = const {bq}
  %5 "bk": f32[{HIDDEN}] = const {bk}
  %6 "bv": f32[{HIDDEN}] = const {bv}
  %7 "heads": i64[4] = const [1, {S}, {HEADS}, {HEAD}]
  %8 "scale": f32[] = const [0.25]
  %9 "merge": i64[3] = const [1, {S}, {HIDDEN}]
  %10 "wo": f32[{HIDDEN},{HIDDEN}] = const {wo}
{q}{k}{v}  %14 "qh": f32[1,{S},{HEADS},{HEAD}] = Reshape "qh"(%11, %7)
  %15 "kh": f32[1,{S},{HEADS},{HEAD}] = Reshape "kh"(%12, %7)
  %16 "vh": f32[1,{S},{HEADS},{HEAD}] = Reshape "vh"(%13, %7)
  %17 "qt": f32[1,{HEADS},{S},{HEAD}] = Transpose "qt"(%14) {{perm=ints[0,2,1,3]}}
  %18 "kt": f32[1,{HEADS},{HEAD},{S}] = Transpose "kt"(%15) {{perm=ints[0,2,3,1]}}
  %19 "vt": f32[1,{HEADS},{S},{HEAD}] = Transpose "vt"(%16) {{perm=ints[0,2,1,3]}}
  %20 "s": f32[1,{HEADS},{S},{S}] = MatMul "s"(%17, %18)
  %21 "sc": f32[1,{HEADS},{S},{S}] = Mul "sc"(%20, %8)
  %22 "p": f32[1,{HEADS},{S},{S}] = Softmax "p"(%21) {{axis=-1}}
  %23 "c": f32[1,{HEADS},{S},{HEAD}] = MatMul "c"(%22, %19)
  %24 "ct": f32[1,{S},{HEADS},{HEAD}] = Transpose "ct"(%23) {{perm=ints[0,2,1,3]}}
  %25 "cm": f32[1,{S},{HIDDEN}] = Reshape "cm"(%24, %9)
  %31 "y": f32[1,{S},{HIDDEN}] = MatMul "o"(%25, %10)
}}"#,
        wq = w(1),
        wk = w(2),
        wv = w(3),
        wo = w(4),
        bq = b(5),
        bk = b(6),
        bv = b(7),
        q = proj(0, 11, 1, 4),
        k = proj(1, 12, 2, 5),
        v = proj(2, 13, 3, 6),
    )
}

#[test]
fn qkv_from_one_gemm_at_every_precision_with_and_without_biases() {
    for bias in [Bias::Random, Bias::Zero, Bias::None] {
        let src = block(bias);
        for p in [Precision::Fp32, Precision::Bf16, Precision::Fp16] {
            let g = gopt_ir::text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
            let g = gopt_ir::verify(g).expect("verifies");
            let cfg = Config {
                precision: p,
                ..Config::default()
            };
            let o = optimize(g, &cfg).expect("optimizes");
            let r = &o.report;
            assert_eq!(r.attention.fused, 1, "{bias:?} {p:?}\n{}", r.explain());
            assert_eq!(
                r.attention.qkv_one_gemm,
                1,
                "{bias:?} {p:?}: Q/K/V not from one GEMM\n{}\n{}",
                r.explain(),
                gopt_ir::text::print(&o.graph)
            );
            // One GEMM for Q/K/V and the output projection.
            let gemms = o
                .graph
                .nodes
                .iter()
                .filter(|n| n.op.name() == "FusedMatMul")
                .count();
            assert_eq!(
                gemms,
                2,
                "{bias:?} {p:?}\n{}",
                gopt_ir::text::print(&o.graph)
            );
            // The merge is of Q, K and V only (not also of an earlier merge of them).
            let widths: Vec<u64> = o
                .graph
                .nodes
                .iter()
                .filter(|n| n.op.name() == "FusedMatMul")
                .filter_map(|n| o.graph.ty(n.outputs[0]).ok()?.shape.last()?.known())
                .collect();
            assert!(
                widths.contains(&(3 * HIDDEN as u64)),
                "{bias:?} {p:?}: widths {widths:?}"
            );
        }
    }
}
