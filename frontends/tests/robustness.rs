//! Corrupted model bytes never panic the importer: truncations and byte flips of real
//! models either import or fail with an error value.

mod common;
use common::*;
use gopt_frontends::onnx;

/// xorshift32: deterministic pseudo-random numbers without a dependency.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let fixtures = repo().join("tests/in/import");
    if let Ok(entries) = std::fs::read_dir(&fixtures) {
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            if p.extension().is_some_and(|e| e == "onnx") {
                out.push(std::fs::read(p).expect("read fixture"));
            }
        }
    }
    // A small model with a sub-graph, initializers and a Constant, built here so the
    // test does not depend on the fixtures.
    let then_g = graph(
        "then",
        vec![node("Add", &["x", "w"], &["t"], "then_add")],
        vec![],
        vec![vf("t", &[2])],
        vec![],
    );
    let else_g = graph(
        "else",
        vec![node("Identity", &["x"], &["e"], "else_id")],
        vec![],
        vec![vf("e", &[2])],
        vec![],
    );
    let m = model(
        graph(
            "g",
            vec![
                with(
                    node("Constant", &[], &["k"], "k"),
                    vec![a_ints("value_ints", &[1, 2])],
                ),
                with(
                    node("If", &["cond"], &["y"], "branch"),
                    vec![
                        a_graph("then_branch", then_g),
                        a_graph("else_branch", else_g),
                    ],
                ),
            ],
            vec![vi("cond", 9, &[]), vi("x", 1, &[D::S("n")])],
            vec![vf("y", &[2]), untyped("k")],
            vec![tf32("w", &[2], &[1.0, 2.0])],
        ),
        16,
    );
    out.push(bytes(&m));
    out
}

#[test]
fn truncations_and_flips_never_panic() {
    let mut rng = Rng(0x9E37_79B9);
    for seed in seeds() {
        for cut in (0..seed.len()).step_by((seed.len() / 64).max(1)) {
            let _ = onnx::import(&seed[..cut], None);
        }
        for _ in 0..300 {
            let mut m = seed.clone();
            for _ in 0..1 + rng.next() % 4 {
                let i = rng.next() as usize % m.len();
                m[i] = match rng.next() % 3 {
                    0 => m[i] ^ (1 << (rng.next() % 8)),
                    1 => rng.next() as u8,
                    _ => 0xff,
                };
            }
            if let Ok(imp) = onnx::import(&m, None) {
                let _ = gopt_ir::verify(imp.model.graph);
            }
        }
    }
}

#[test]
fn inspect_never_panics_on_corrupt_bytes() {
    let mut rng = Rng(12345);
    for seed in seeds() {
        for _ in 0..100 {
            let mut m = seed.clone();
            let i = rng.next() as usize % m.len();
            m[i] = rng.next() as u8;
            let _ = onnx::inspect_bytes(&m);
        }
    }
}
