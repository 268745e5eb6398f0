//! The quantized-weight rules (`passes/src/rules/quantized.rs`): a product by a
//! dequantized constant becomes one MatMulNBits (exact, for i8 and u8 weights, 4- and
//! 8-bit storage, blocked, per-column and per-tensor parameters), a constant bias joins
//! it, and bf16 lowers its activations; each also where it must not fire.

mod common;
use common::{check_not_applicable, check_rewrite, check_rewrite_within, check_rules};

/// `n` integers cycling through `lo..=hi`.
fn ints(n: usize, lo: i64, hi: i64) -> String {
    let span = hi - lo + 1;
    let v: Vec<String> = (0..n as i64)
        .map(|i| (lo + (i * 7 + 3) % span).to_string())
        .collect();
    format!("[{}]", v.join(", "))
}

/// `n` positive scales.
fn scales(n: usize) -> String {
    let v: Vec<String> = (0..n)
        .map(|i| format!("{:.4}", 0.01 + 0.003 * i as f64))
        .collect();
    format!("[{}]", v.join(", "))
}

/// `y = relu(x[2, 32] · DequantizeLinear(w[32, 6], ...))` with the given weight and
/// parameter declarations (`%1` the weight, `%2` the scale, then optional `%3`).
fn product(w: &str, params: &str, dq: &str) -> String {
    format!(
        r#"graph "g"(%0 "x": f32[2,32]) -> (%6) {{
  %1 "w": {w}
{params}
  %4 "d": f32[32,6] = {dq}
  %5 "m": f32[2,6] = MatMul "m"(%0, %4)
  %6 "y": f32[2,6] = Relu "r"(%5)
}}"#
    )
}

#[track_caller]
fn packs(src: &str, bits: i64) {
    let g = check_rewrite("fuse-dequantize-matmul", src, src);
    let g2 = check_rewrite("fuse-dequantize-matmul-no-zero-point", src, src);
    let found = [g, g2].iter().any(|g| {
        g.nodes.iter().any(|n| {
            n.op.name() == "MatMulNBits" && n.attrs.int("bits").ok().flatten() == Some(bits)
        })
    });
    assert!(found, "no {bits}-bit MatMulNBits from\n{src}");
}

#[test]
fn blocked_int4_weights_pack_into_4_bits() {
    let src = product(
        &format!("i8[32,6] = const {}", ints(192, -8, 7)),
        &format!(
            "  %2 \"s\": f32[2,6] = const {}\n  %3 \"z\": i8[2,6] = const {}",
            scales(12),
            ints(12, -2, 2)
        ),
        "DequantizeLinear \"dq\"(%1, %2, %3) {axis=0, block_size=16}",
    );
    packs(&src, 4);
}

#[test]
fn int8_per_column_and_per_tensor_weights_pack_into_8_bits() {
    let per_col = product(
        &format!("i8[32,6] = const {}", ints(192, -100, 100)),
        &format!("  %2 \"s\": f32[6] = const {}", scales(6)),
        "DequantizeLinear \"dq\"(%1, %2) {axis=1}",
    );
    packs(&per_col, 8);
    let per_tensor = product(
        &format!("u8[32,6] = const {}", ints(192, 0, 255)),
        "  %2 \"s\": f32[] = const [0.02]\n  %3 \"z\": u8[] = const [128]",
        "DequantizeLinear \"dq\"(%1, %2, %3)",
    );
    packs(&per_tensor, 8);
    // u8 values below 16 with a zero point: 4 bits, the zero point packed.
    let small = product(
        &format!("u8[32,6] = const {}", ints(192, 0, 15)),
        &format!(
            "  %2 \"s\": f32[2,6] = const {}\n  %3 \"z\": u8[2,6] = const {}",
            scales(12),
            ints(12, 0, 15)
        ),
        "DequantizeLinear \"dq\"(%1, %2, %3) {axis=0, block_size=16}",
    );
    packs(&small, 4);
}

#[test]
fn dequantized_products_the_kernels_cannot_read_stay() {
    // A block of 8 along K (under the kernels' 16).
    let small_block = product(
        &format!("i8[32,6] = const {}", ints(192, -8, 7)),
        &format!("  %2 \"s\": f32[4,6] = const {}", scales(24)),
        "DequantizeLinear \"dq\"(%1, %2) {axis=0, block_size=8}",
    );
    check_not_applicable("fuse-dequantize-matmul-no-zero-point", &small_block);
    // Per-row of K parameters (axis 0, no block): one scale per k.
    let per_row = product(
        &format!("i8[32,6] = const {}", ints(192, -8, 7)),
        &format!(
            "  %2 \"s\": f32[32] = const {}\n  %3 \"z\": i8[32] = const {}",
            scales(32),
            ints(32, 0, 0)
        ),
        "DequantizeLinear \"dq\"(%1, %2, %3) {axis=0}",
    );
    check_not_applicable("fuse-dequantize-matmul", &per_row);
}

const PACKED: &str = r#"graph "g"(%0 "x": f32[2,32]) -> (%7) {
  %1 "b": u8[4,1,16] = const [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64]
  %2 "s": f32[4] = const [0.01, 0.02, 0.03, 0.04]
  %3 "c": f32[4] = const [0.5, -0.5, 0.25, 1.0]
  %5 "m": f32[2,4] = MatMulNBits "m"(%0, %1, %2, _, _, _) {K=32, N=4, bits=4, block_size=32}
  %6 "a": f32[2,4] = Add "a"(%5, %3)
  %7 "y": f32[2,4] = Relu "r"(%6)
}"#;

#[test]
fn a_constant_bias_joins_the_packed_product() {
    let g = check_rewrite("fuse-packed-bias", PACKED, PACKED);
    let biased = g
        .nodes
        .iter()
        .any(|n| n.op.name() == "MatMulNBits" && n.inputs.get(5).copied().flatten().is_some());
    assert!(biased, "{}", gopt_ir::text::print(&g));
    // A bias over rows, not columns, stays an Add.
    let rows = PACKED
        .replace("%3 \"c\": f32[4]", "%3 \"c\": f32[2,1]")
        .replace("[0.5, -0.5, 0.25, 1.0]", "[0.5, -0.5]");
    check_not_applicable("fuse-packed-bias", &rows);
}

#[test]
fn the_dequantize_and_bias_rules_chain() {
    let src = product(
        &format!("i8[32,6] = const {}", ints(192, -8, 7)),
        &format!("  %2 \"s\": f32[2,6] = const {}", scales(12)),
        "DequantizeLinear \"dq\"(%1, %2) {axis=0, block_size=16}",
    );
    let g = check_rules(&["fuse-dequantize-matmul-no-zero-point"], &src);
    assert!(g.nodes.iter().any(|n| n.op.name() == "MatMulNBits"));
}

#[test]
fn bf16_lowers_packed_activations_but_not_the_output_product() {
    // The Relu after it computes the output: the product may lower, and with 32 rows
    // (the tensor-core path) the cost model takes it.
    let many = PACKED
        .replace("[2,32]", "[32,32]")
        .replace("[2,4]", "[32,4]");
    let g = check_rewrite_within("precision-packed", &many, &many, Some(2e-2));
    assert!(
        g.nodes.iter().any(|n| n.op.name() == "Cast"),
        "{}",
        gopt_ir::text::print(&g)
    );
    // A product that computes a graph output stays fp32.
    let out = r#"graph "g"(%0 "x": f32[2,32]) -> (%5) {
  %1 "b": u8[4,1,16] = const [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64]
  %2 "s": f32[4] = const [0.01, 0.02, 0.03, 0.04]
  %5 "m": f32[2,4] = MatMulNBits "m"(%0, %1, %2, _, _, _) {K=32, N=4, bits=4, block_size=32}
}"#;
    check_not_applicable("precision-packed", out);
}

/// Rotary's `rotate_half` of a packed product's heads (`[1, 3, 8]` as 2 heads of 4),
/// the first half ending at `first_half_end` (2 for a rotation by half).
fn rotate_half_packed(first_half_end: i64) -> String {
    let bytes: Vec<String> = (0..64).map(|i| ((i * 37 + 11) % 256).to_string()).collect();
    format!(
        r#"graph "g"(%0 "x": f32[1,3,8]) -> (%16) {{
  %1 "w": u8[8,1,8] = const [{b}]
  %2 "b": f32[8] = const [0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8]
  %17 "s": f32[8] = const [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]
  %3 "split": i64[4] = const [1, 3, -1, 4]
  %4 "zero": i64[1] = const [0]
  %5 "half": i64[1] = const [2]
  %6 "end": i64[1] = const [9223372036854775807]
  %7 "ax": i64[1] = const [-1]
  %8 "one": i64[1] = const [1]
  %9 "he": i64[1] = const [{first_half_end}]
  %10 "m": f32[1,3,8] = MatMulNBits "m"(%0, %1, %17, _, _, %2) {{K=8, N=8, bits=4, block_size=16}}
  %11 "r": f32[1,3,2,4] = Reshape "r"(%10, %3)
  %12 "q": f32[1,2,3,4] = Transpose "q"(%11) {{perm=ints[0,2,1,3]}}
  %13 "x2": f32[1,2,3,2] = Slice "x2"(%12, %5, %6, %7, %8)
  %14 "n": f32[1,2,3,2] = Neg "n"(%13)
  %15 "x1": f32[1,2,3,{w1}] = Slice "x1"(%12, %4, %9, %7, %8)
  %16 "y": f32[1,2,3,{wy}] = Concat "y"(%14, %15) {{axis=-1}}
}}"#,
        b = bytes.join(", "),
        w1 = first_half_end.min(4),
        wy = 2 + first_half_end.min(4),
    )
}

#[test]
fn rotate_half_folds_into_the_packed_rows() {
    let g = check_rewrite(
        "fuse-rotate-half-into-packed",
        &rotate_half_packed(2),
        &rotate_half_packed(2),
    );
    assert!(
        g.nodes
            .iter()
            .all(|n| !matches!(n.op.name(), "Neg" | "Concat" | "Slice")),
        "{}",
        gopt_ir::text::print(&g)
    );
    check_not_applicable("fuse-rotate-half-into-packed", &rotate_half_packed(3));
}

/// Two packed products of one input (`%0`), 8 columns each, the second `bits_last`-bit.
fn siblings(bits_last: usize) -> String {
    let bytes = |n: usize, seed: usize| -> String {
        let v: Vec<String> = (0..n)
            .map(|i| ((i * 29 + seed) % 256).to_string())
            .collect();
        v.join(", ")
    };
    let blob = 32 * bits_last / 8;
    format!(
        r#"graph "g"(%0 "x": f32[2,32]) -> (%10) {{
  %1 "b1": u8[8,1,16] = const [{b1}]
  %2 "s1": f32[8] = const [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08]
  %3 "b2": u8[8,1,{blob}] = const [{b2}]
  %4 "s2": f32[8] = const [0.08, 0.07, 0.06, 0.05, 0.04, 0.03, 0.02, 0.01]
  %5 "m1": f32[2,8] = MatMulNBits "m1"(%0, %1, %2, _, _, _) {{K=32, N=8, bits=4, block_size=32}}
  %6 "m2": f32[2,8] = MatMulNBits "m2"(%0, %3, %4, _, _, _) {{K=32, N=8, bits={bits_last}, block_size=32}}
  %7 "a": f32[2,8] = Relu "a"(%5)
  %8 "b": f32[2,8] = Sigmoid "b"(%6)
  %10 "y": f32[2,8] = Add "y"(%7, %8)
}}"#,
        b1 = bytes(128, 3),
        b2 = bytes(8 * blob, 7),
    )
}

#[test]
fn packed_siblings_merge_into_one_product() {
    let g = check_rewrite("fuse-sibling-packed", &siblings(4), &siblings(4));
    let products = g
        .nodes
        .iter()
        .filter(|n| n.op.name() == "MatMulNBits")
        .count();
    assert_eq!(products, 1, "{}", gopt_ir::text::print(&g));
    // 4- and 8-bit weights: different layouts, not merged.
    check_not_applicable("fuse-sibling-packed", &siblings(8));
}
