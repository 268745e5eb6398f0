//! Rule-test harness (rust-analyzer's `check_assist` style): a rule runs alone on a
//! graph written in the IR text format; `check_rewrite` asserts the expected graph lands
//! in the same e-class as the input's outputs and that the extracted result computes the
//! same numbers on pseudo-random inputs; `check_not_applicable` asserts the rule
//! changed nothing.
#![allow(dead_code)]

use egg::Runner;
use gopt_ir::text::{parse, print};
use gopt_ir::{interp, verify, DType, Tensor, Verified};
use gopt_passes::convert::{add_graph, to_egraph, to_graph};
use gopt_passes::extract::extract;
use gopt_passes::rules::by_name;
use gopt_passes::Target;

/// `n` pseudo-random values in [-1, 1], formatted for a `const [...]`.
pub fn vals(n: usize, seed: u64) -> String {
    let v: Vec<String> = rand(n, seed).iter().map(|x| format!("{x:.6}")).collect();
    format!("[{}]", v.join(", "))
}

/// `n` pseudo-random values in [-1, 1].
pub fn rand(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn load(src: &str) -> Verified {
    let g = parse(src).unwrap_or_else(|e| panic!("does not parse: {e}\n{src}"));
    verify(g).unwrap_or_else(|e| panic!("does not verify: {e}\n{src}"))
}

/// Pseudo-random inputs for a graph with static input shapes.
pub fn inputs(g: &Verified) -> Vec<Tensor> {
    g.inputs
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let ty = g.ty(v).expect("typed input");
            let shape = gopt_ir::dim::concrete(&ty.shape).expect("static input shape");
            let n: usize = shape.iter().product();
            match ty.dtype {
                DType::Bool => Tensor::from_f64s(DType::Bool, &shape, &vec![1.0; n]).expect("bool"),
                d if d.is_int() => Tensor::from_f64s(
                    d,
                    &shape,
                    &(0..n).map(|k| (k % 4) as f64).collect::<Vec<_>>(),
                )
                .expect("int"),
                d => Tensor::from_f64s(d, &shape, &rand(n, 100 + i as u64)).expect("float"),
            }
        })
        .collect()
}

/// Runs `rule` alone to saturation on `before`; returns the extracted graph.
#[track_caller]
pub fn check_rewrite(rule: &str, before: &str, after: &str) -> Verified {
    check_rewrite_within(rule, before, after, None)
}

/// [`check_rewrite`] for a rule that changes rounding (precision rules): the extracted
/// graph must stay within relative L2 error `l2` of the input graph.
#[track_caller]
pub fn check_rewrite_within(rule: &str, before: &str, after: &str, l2: Option<f64>) -> Verified {
    check_rules_within(&[rule], before, after, l2)
}

/// [`check_rewrite`] for rules that work together (each one's result the next one's
/// pattern): `src` must reach an equivalent extracted graph; it is returned.
#[track_caller]
pub fn check_rules(rules: &[&str], src: &str) -> Verified {
    check_rules_within(rules, src, src, None)
}

#[track_caller]
fn check_rules_within(rules: &[&str], before: &str, after: &str, l2: Option<f64>) -> Verified {
    let rs: Vec<_> = rules
        .iter()
        .map(|r| by_name(r).unwrap_or_else(|| panic!("no rule {r}")))
        .collect();
    let rule = rules.join(", ");
    let b = load(before);
    let a = load(after);
    let l = to_egraph(&b).expect("loads");
    let runner = Runner::default()
        .with_egraph(l.egraph)
        .with_iter_limit(6)
        .run(&rs);
    let mut eg = runner.egraph;
    let (aroots, _, _, _) = add_graph(&mut eg, &a).expect("expected graph loads");
    eg.rebuild();
    for (k, (x, y)) in l.roots.iter().zip(&aroots).enumerate() {
        assert_eq!(
            eg.find(*x),
            eg.find(*y),
            "{rule}: output {k} did not reach the expected form\nbefore:\n{before}\nexpected:\n{after}"
        );
    }
    let ex = extract(&eg, &Target::h200(), &l.roots);
    let g = to_graph(&eg, &ex.choice, &l.roots, &l.names, &l.pinned, &b)
        .expect("extracts")
        .fill_constants(&eg.analysis.consts);
    let g = verify(g).unwrap_or_else(|e| panic!("{rule}: extracted graph does not verify: {e}"));
    let ins = inputs(&b);
    let want = interp::run(&b, &ins).expect("before runs");
    let got = interp::run(&g, &ins)
        .unwrap_or_else(|e| panic!("{rule}: rewritten graph fails: {e}\n{}", print(&g)));
    for (w, o) in want.iter().zip(&got) {
        let (w, o) = (w.to_f64_vec(), o.to_f64_vec());
        assert_eq!(w.len(), o.len());
        if let Some(l2) = l2 {
            let num: f64 = w.iter().zip(&o).map(|(p, q)| (p - q) * (p - q)).sum();
            let den: f64 = w.iter().map(|p| p * p).sum();
            let rel = (num / den.max(1e-30)).sqrt();
            assert!(
                rel <= l2,
                "{rule}: relative L2 error {rel:e} > {l2:e}\n{}",
                print(&g)
            );
            continue;
        }
        for (p, q) in w.iter().zip(&o) {
            assert!(
                (p - q).abs() <= 1e-4 + 1e-4 * p.abs(),
                "{rule}: {p} vs {q}\n{}",
                print(&g)
            );
        }
    }
    g
}

/// Runs `rule` alone on `src` and asserts it never fired.
#[track_caller]
pub fn check_not_applicable(rule: &str, src: &str) {
    let r = by_name(rule).unwrap_or_else(|| panic!("no rule {rule}"));
    let g = load(src);
    let l = to_egraph(&g).expect("loads");
    let runner = Runner::default()
        .with_egraph(l.egraph)
        .with_iter_limit(6)
        .run(std::slice::from_ref(&r));
    let fired: usize = runner
        .iterations
        .iter()
        .map(|i| i.applied.values().sum::<usize>())
        .sum();
    assert_eq!(fired, 0, "{rule} fired on\n{src}");
}
