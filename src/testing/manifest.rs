//! Manifests of expected passes: one case name per line, sorted (`#` starts a comment).
//! A checked-in manifest per backend turns "this case used to pass" into a test that
//! fails when it regresses, while new passes only ask for the manifest to be rewritten.

use super::{CaseResult, Status};
use crate::error::{GoptError, Result};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// Reads a manifest's case names (blank lines and `#` comments are ignored).
pub fn read_manifest(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| GoptError::io(path, e))?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// Writes the sorted names of the passing cases of `results`, one per line.
pub fn write_manifest(path: &Path, results: &[CaseResult]) -> Result<()> {
    let names: BTreeSet<&str> = results
        .iter()
        .filter(|r| r.status == Status::Pass)
        .map(|r| r.name.as_str())
        .collect();
    let text: String = names.iter().map(|n| format!("{n}\n")).collect();
    std::fs::write(path, text).map_err(|e| GoptError::io(path, e))
}

/// How a run compares with a manifest.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ManifestCheck {
    /// Listed cases that ran and did not pass: `(name, status, message)`.
    pub regressions: Vec<(String, Status, Option<String>)>,
    /// Listed cases that were not among the cases run.
    pub not_run: Vec<String>,
    /// Cases that passed (or planned, with `--plan-only`) but are not listed (the
    /// manifest can be updated).
    pub unlisted_passes: Vec<String>,
}

impl ManifestCheck {
    /// True when no listed case that ran failed to pass.
    pub fn ok(&self) -> bool {
        self.regressions.is_empty()
    }
}

/// Compares `results` with the `listed` expected passes.
pub fn check_manifest(results: &[CaseResult], listed: &[String]) -> ManifestCheck {
    check_manifest_for(results, listed, Status::Pass)
}

/// Compares `results` with `listed`, every one of which must have status `want` (PASS;
/// PLANNED for a `--plan-only` run, which checks that a GPU manifest's cases still
/// build their plans on a machine without the GPU).
pub fn check_manifest_for(
    results: &[CaseResult],
    listed: &[String],
    want: Status,
) -> ManifestCheck {
    let by_name: HashMap<&str, &CaseResult> =
        results.iter().map(|r| (r.name.as_str(), r)).collect();
    let listed_set: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    let mut check = ManifestCheck::default();
    for name in &listed_set {
        match by_name.get(name) {
            Some(r) if r.status == want => {}
            Some(r) => check
                .regressions
                .push((name.to_string(), r.status, r.message.clone())),
            None => check.not_run.push(name.to_string()),
        }
    }
    let mut unlisted: Vec<String> = results
        .iter()
        .filter(|r| r.status == want && !listed_set.contains(r.name.as_str()))
        .map(|r| r.name.clone())
        .collect();
    unlisted.sort();
    check.unlisted_passes = unlisted;
    check
}
