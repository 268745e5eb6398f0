//! `gopt compile --explain-node NAME`: the chain of rewrites behind one kernel, per
//! bucket, and the report.md section listing the chain of every kernel a rewrite
//! changed. The chains themselves come from the optimizer ([`gopt::passes::explain`]);
//! this module finds the kernel a user named and says why when it cannot.

use super::outln;
use anyhow::{bail, Result};
use gopt::passes::explain::Chain;
use gopt::passes::PassReport;

/// How many close names an unknown `--explain-node` suggests.
const SUGGESTIONS: usize = 5;

/// One bucket as `--explain-node` sees it: its name and the optimizer's report.
pub struct Bucket<'a> {
    /// `batch=1 seq=128`, or `static shapes`.
    pub name: String,
    /// `None` when the optimizer did not run (`--disable all`).
    pub report: Option<&'a PassReport>,
}

/// Fails (exit 2) when a name is a kernel of no bucket, listing close kernel names.
pub fn check_names(names: &[String], buckets: &[Bucket]) -> Result<()> {
    let kernels: Vec<&str> = all_kernels(buckets);
    for name in names {
        if kernels.contains(&name.as_str()) {
            continue;
        }
        if buckets.iter().all(|b| b.report.is_none()) {
            bail!("--explain-node {name}: the optimizer did not run (--disable all), so no kernel has rewrites to explain");
        }
        let close = closest(name, &kernels);
        if close.is_empty() {
            bail!(
                "--explain-node {name}: no kernel has that name (`gopt compile --explain` \
                 and report.json's `after.kernel_list` list the kernels)"
            );
        }
        bail!(
            "--explain-node {name}: no kernel has that name; close names: {}",
            close.join(", ")
        );
    }
    Ok(())
}

/// Prints the chain of each named kernel in each bucket.
pub fn print_nodes(names: &[String], buckets: &[Bucket]) {
    for name in names {
        for b in buckets {
            outln!("== bucket {}: kernel {name}", b.name);
            for line in describe(name, b.report).lines() {
                outln!("  {line}");
            }
        }
    }
}

/// What `--explain-node` says about kernel `name` in one bucket.
pub fn describe(name: &str, report: Option<&PassReport>) -> String {
    let Some(r) = report else {
        return "not optimized (--disable all)\n".to_string();
    };
    let Some(kernel) = r.after.kernel_list.iter().find(|k| k.name == name) else {
        return "not a kernel of this bucket\n".to_string();
    };
    let head = format!(
        "{} ({}), est. {:.2} µs\n",
        kernel.op, kernel.precision, kernel.est_us
    );
    match r.chains.iter().find(|c| c.kernel == name) {
        Some(c) => head + &render_steps(c),
        None if kernel.op == "FusedElementwise" => {
            head + "formed after extraction by element-wise grouping (not an e-graph rewrite)\n"
        }
        None => head + "imported as it is: no rewrite changed this kernel\n",
    }
}

/// A chain's steps, one line each (the kernel's name is the caller's heading).
fn render_steps(c: &Chain) -> String {
    c.render()
        .lines()
        .skip(1)
        .map(|l| format!("{}\n", l.trim_start()))
        .collect()
}

/// The report.md section of one bucket: every kernel a rewrite changed, with its chain.
pub fn markdown(r: &PassReport) -> String {
    if r.chains.is_empty() {
        return String::new();
    }
    format!(
        "### rewrite chains ({} kernels changed by rewrites)\n\nEach step: the rule that \
         fired, the estimated time of the kernel's region after it, and the region \
         (`<Op>`: an input the kernel reads; `…`: cut).\n\n{}",
        r.chains.len(),
        gopt::passes::explain::render_markdown(&r.chains)
    )
}

/// The `--explain` line that points at `--explain-node`.
pub fn summary_line(r: &PassReport) -> Option<String> {
    let first = r.chains.first()?;
    Some(format!(
        "rewrite chains: {} kernels changed by rewrites (e.g. --explain-node {})",
        r.chains.len(),
        first.kernel
    ))
}

fn all_kernels<'a>(buckets: &[Bucket<'a>]) -> Vec<&'a str> {
    let mut names: Vec<&str> = buckets
        .iter()
        .filter_map(|b| b.report)
        .flat_map(|r| r.after.kernel_list.iter().map(|k| k.name.as_str()))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Up to [`SUGGESTIONS`] kernel names close to `name`: those containing it (or it
/// containing them) first, then by edit distance, at most half the name's length away.
fn closest(name: &str, kernels: &[&str]) -> Vec<String> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = kernels
        .iter()
        .filter_map(|&k| {
            let kl = k.to_lowercase();
            if kl.contains(&lower) || lower.contains(&kl) {
                return Some((0, k));
            }
            let d = edit_distance(&lower, &kl);
            (d <= lower.chars().count().max(4) / 2).then_some((d, k))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(SUGGESTIONS)
        .map(|(_, k)| k.to_string())
        .collect()
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diag + usize::from(ca != *cb));
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_rank_substrings_then_distance() {
        let ks = ["fc1/Gelu", "fc2/Add", "ln/LayerNorm", "fc1/Gemm"];
        assert_eq!(closest("fc1", &ks), vec!["fc1/Gelu", "fc1/Gemm"]);
        assert_eq!(closest("fc2/Adc", &ks), vec!["fc2/Add"]);
        assert!(closest("zzzzzzzz", &ks).is_empty());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
