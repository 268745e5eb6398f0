//! The rewrite chain behind a kernel (`gopt_passes::explain`): it starts at the imported
//! ops, names the rules that fired in order, ends at the extracted kernel with its
//! estimate, and stays bounded on deep residual graphs.

mod common;
use common::vals;
use gopt_ir::{text::parse, verify, Verified};
use gopt_passes::explain::{self, Chain, IMPORTED, MAX_STEPS};
use gopt_passes::{convert, extract, optimize, rules, Config, Target};
use std::time::{Duration, Instant};

fn load(src: &str) -> Verified {
    let g = parse(src).unwrap_or_else(|e| panic!("does not parse: {e}\n{src}"));
    verify(g).unwrap_or_else(|e| panic!("does not verify: {e}\n{src}"))
}

fn explained() -> Config {
    Config {
        explain: true,
        ..Config::default()
    }
}

/// `y = Gelu(x @ w + b)`: one FusedMatMul with a bias and a GELU epilogue.
fn mlp() -> Verified {
    load(&format!(
        r#"graph "g"(%0 "x": f32[8,64]) -> (%5) {{
  %1 "w": f32[64,48] = const {w}
  %2 "b": f32[48] = const {b}
  %3 "m": f32[8,48] = MatMul "m"(%0, %1)
  %4 "a": f32[8,48] = Add "a"(%3, %2)
  %5 "y": f32[8,48] = Gelu "act"(%4)
}}"#,
        w = vals(64 * 48, 1),
        b = vals(48, 2)
    ))
}

fn rules_of(c: &Chain) -> Vec<&str> {
    c.steps.iter().map(|s| s.rule.as_str()).collect()
}

#[test]
fn chain_goes_from_imported_ops_to_the_fused_kernel() {
    let o = optimize(mlp(), &explained()).expect("optimizes");
    let r = &o.report;
    assert_eq!(r.chains.len(), 1, "{:#?}", r.chains);
    let c = &r.chains[0];
    let kernel = r
        .after
        .kernel_list
        .iter()
        .find(|k| k.name == c.kernel)
        .expect("the chain names a kernel of the optimized graph");
    assert!(kernel.op.starts_with("FusedMatMul"), "{}", kernel.op);
    assert_eq!(
        rules_of(c),
        [IMPORTED, "fuse-matmul-bias", "fuse-matmul-gelu"],
        "{}",
        c.render()
    );
    let forms: Vec<&str> = c.steps.iter().map(|s| s.form.as_str()).collect();
    assert_eq!(
        forms,
        [
            "Gelu(Add(MatMul(x, const), const))",
            "Gelu(FusedMatMul(x, const, const))",
            "FusedMatMul{gelu}(x, const, const)",
        ]
    );
    // The first step costs what the imported nodes cost, the last what the kernel does.
    let first = c.steps[0].est_us;
    let last = c.steps[c.steps.len() - 1].est_us;
    assert!(
        (first - r.before.est_us).abs() < 1e-6 * r.before.est_us,
        "{first} vs {}",
        r.before.est_us
    );
    assert!(
        (last - kernel.est_us).abs() < 1e-6 * kernel.est_us,
        "{last} vs {}",
        kernel.est_us
    );
    assert!(last < first, "fusing made it cheaper: {}", c.render());
    assert!(!c.truncated);
}

#[test]
fn no_chains_unless_asked_and_unchanged_kernels_have_none() {
    let o = optimize(mlp(), &Config::default()).expect("optimizes");
    assert!(o.report.chains.is_empty());
    // A lone Softmax is imported as it is: no chain.
    let g = load(
        r#"graph "g"(%0 "x": f32[4,9]) -> (%1) {
  %1 "y": f32[4,9] = Softmax "s"(%0)
}"#,
    );
    let o = optimize(g, &explained()).expect("optimizes");
    assert!(o.report.chains.is_empty(), "{:#?}", o.report.chains);
}

#[test]
fn chains_are_deterministic_and_render() {
    let a = optimize(mlp(), &explained()).expect("optimizes").report;
    let b = optimize(mlp(), &explained()).expect("optimizes").report;
    assert_eq!(a.chains, b.chains);
    let text = a.chains[0].render();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(lines[0], format!("{}:", a.chains[0].kernel));
    assert!(
        lines[3].trim_start().starts_with("fuse-matmul-gelu"),
        "{text}"
    );
    assert!(
        lines[3].ends_with("FusedMatMul{gelu}(x, const, const)"),
        "{text}"
    );
    let md = explain::render_markdown(&a.chains);
    assert!(
        md.starts_with("```text\n") && md.ends_with("```\n\n"),
        "{md}"
    );
}

/// `layers` residual blocks `x = x + Relu(x @ w_i + b_i)`: every block's output is read
/// twice, so the term of the last one, expanded as a tree, has 2^layers leaves.
fn residual_chain(layers: usize) -> Verified {
    let mut s = String::from("graph \"g\"(%0 \"x\": f32[4,16]) -> (%L) {\n");
    let mut x = 0usize;
    let mut v = 1usize;
    for i in 0..layers {
        let (w, b, m, a, r, y) = (v, v + 1, v + 2, v + 3, v + 4, v + 5);
        v += 6;
        s += &format!(
            "  %{w} \"w{i}\": f32[16,16] = const {}\n",
            vals(256, i as u64)
        );
        s += &format!(
            "  %{b} \"b{i}\": f32[16] = const {}\n",
            vals(16, 1000 + i as u64)
        );
        s += &format!("  %{m} \"m{i}\": f32[4,16] = MatMul \"m{i}\"(%{x}, %{w})\n");
        s += &format!("  %{a} \"a{i}\": f32[4,16] = Add \"a{i}\"(%{m}, %{b})\n");
        s += &format!("  %{r} \"r{i}\": f32[4,16] = Relu \"r{i}\"(%{a})\n");
        s += &format!("  %{y} \"y{i}\": f32[4,16] = Add \"y{i}\"(%{x}, %{r})\n");
        x = y;
    }
    s += "}\n";
    load(&s.replace("%L", &format!("%{x}")))
}

/// Saturates like `optimize` (same rules and budgets) but without egg's `Runner`, whose
/// debug-build self-check flattens every recorded union's terms as trees: exponential
/// here, and only in debug builds.
fn saturate(eg: &mut gopt_passes::analysis::Egraph, cfg: &Config) {
    let table = rules::table(cfg);
    for _ in 0..cfg.budgets.iterations {
        let found: Vec<_> = table.iter().map(|r| r.search(eg)).collect();
        let mut changed = false;
        for (r, m) in table.iter().zip(&found) {
            changed |= !r.apply(eg, m).is_empty();
        }
        eg.rebuild();
        if !changed || eg.total_number_of_nodes() > cfg.budgets.nodes {
            break;
        }
    }
}

#[test]
fn deep_residual_chains_stay_bounded() {
    let layers = 200;
    let g = residual_chain(layers).into_inner();
    let cfg = explained();
    let t = Target::h200();
    let start = Instant::now();
    let (loaded, imported) = explain::to_egraph_explained(&g, g.constants.clone()).expect("loads");
    let mut eg = loaded.egraph;
    saturate(&mut eg, &cfg);
    let ex = extract::extract(&eg, &t, &loaded.roots);
    let rebuilt = convert::to_graph(
        &eg,
        &ex.choice,
        &loaded.roots,
        &loaded.names,
        &loaded.pinned,
        &g,
    )
    .expect("rebuilds");
    let t_chains = Instant::now();
    let chains = explain::chains(&eg, &t, imported, &ex.choice, &rebuilt, &g);
    let chain_time = t_chains.elapsed();
    // Every block became one FusedMatMul (bias, relu, residual): one chain each.
    assert_eq!(chains.len(), layers, "{:#?}", chains.first());
    let longest = chains
        .iter()
        .flat_map(|c| &c.steps)
        .map(|s| s.form.len())
        .max()
        .unwrap_or(0);
    assert!(longest < 400, "a form stays short: {longest} chars");
    for c in &chains {
        assert!(c.steps.len() <= MAX_STEPS, "{}", c.render());
        assert_eq!(c.steps[0].rule, IMPORTED, "{}", c.render());
        assert!(
            rules_of(c).contains(&"fuse-matmul-residual")
                || rules_of(c).contains(&"fuse-matmul-residual-left"),
            "{}",
            c.render()
        );
    }
    let last = &chains[layers - 1];
    let form = &last.steps[0].form;
    assert!(form.starts_with("Add("), "{}", last.render());
    assert!(
        chain_time < Duration::from_secs(10),
        "{layers} chains took {chain_time:?} (whole test {:?})",
        start.elapsed()
    );
}
