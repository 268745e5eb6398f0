//! The artifact's integrity check. `plan.json` records the SHA-256 of every other file
//! of the artifact (`model.onnx`, `weights.bin`, `kernels.*`, `report.md`, the bucket
//! graphs; not `report.json`, whose stage timings differ between two compiles) and of
//! its own bytes, taken with that hash's value blank; loading recomputes them all and
//! refuses an artifact where any differs, naming the file. An edited kernel, plan or
//! weight never runs as if gopt had compiled it. (A checksum, not a signature: whoever
//! rewrites the hashes too is not stopped.)

pub mod ranks;

use crate::{GoptError, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// The artifact's plan file.
pub const PLAN: &str = "plan.json";

/// Largest `plan.json` read (plans are kilobytes to a few megabytes).
const MAX_PLAN_BYTES: u64 = 1 << 30;

/// The JSON key of the plan's own hash; the first field of `plan.json`, so that its
/// first occurrence in the text is the top-level one (strings inside the plan escape
/// their quotes and cannot spell it).
pub const SELF_KEY: &str = "sha256";

/// The hex SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The hex SHA-256 of the regular file `dir/name`, streamed.
pub fn file_sha256(dir: &Path, name: &str) -> Result<String> {
    let p = dir.join(name);
    let (mut f, _) =
        gopt_frontends::fs::open_regular(&p, u64::MAX).map_err(|e| GoptError::io(&p, e))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(|e| GoptError::io(&p, e))?;
    Ok(hex(&h.finalize()))
}

/// A writer that hashes what passes through it (a large file is hashed as it is
/// written instead of read back).
pub struct HashingWriter<W> {
    inner: W,
    hash: Sha256,
}

impl<W: std::io::Write> HashingWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hash: Sha256::new(),
        }
    }

    /// Flushes and returns the hex SHA-256 of everything written.
    pub fn finish(mut self) -> std::io::Result<String> {
        self.inner.flush()?;
        Ok(hex(&self.hash.finalize()))
    }
}

impl<W: std::io::Write> std::io::Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The hashes of `names` in `dir`, by name.
pub fn hash_files(dir: &Path, names: &[String]) -> Result<BTreeMap<String, String>> {
    names
        .iter()
        .map(|n| Ok((n.clone(), file_sha256(dir, n)?)))
        .collect()
}

fn blank_field() -> String {
    format!("\"{SELF_KEY}\": \"\"")
}

fn filled_field(hash: &str) -> String {
    format!("\"{SELF_KEY}\": \"{hash}\"")
}

/// Fills the plan's own hash into `json` (pretty-printed, its first field `sha256`
/// blank): the hash is that of the bytes with the field blank.
pub fn seal(json: &[u8]) -> Result<Vec<u8>> {
    let text = std::str::from_utf8(json).map_err(|e| GoptError::Usage(e.to_string()))?;
    let blank = blank_field();
    if !text.contains(&blank) {
        return Err(GoptError::Usage(format!(
            "the plan has no blank `{SELF_KEY}` field to seal"
        )));
    }
    let hash = sha256(json);
    Ok(text.replacen(&blank, &filled_field(&hash), 1).into_bytes())
}

/// Reads `dir/plan.json` (a regular file of sane size); [`check_plan`] checks it.
pub fn read_plan(dir: &Path) -> Result<Vec<u8>> {
    let p = dir.join(PLAN);
    gopt_frontends::fs::read_regular(&p, MAX_PLAN_BYTES).map_err(|e| GoptError::io(&p, e))
}

/// Checks that `bytes` (the text of `plan.json`) hash to `claimed` with that field
/// blank.
pub fn check_plan(dir: &Path, bytes: &[u8], claimed: &str) -> Result<()> {
    check_sealed(dir, PLAN, bytes, claimed)
}

/// Checks that file `name` of artifact `dir` exists and has the SHA-256 `want` that
/// `record` (`the plan`, `the manifest`) records, naming the file when not.
pub(crate) fn check_file(dir: &Path, name: &str, want: &str, record: &str) -> Result<()> {
    if !dir.join(name).is_file() {
        return Err(GoptError::Usage(format!(
            "{}: integrity check failed: {name} is missing ({record} records its \
             SHA-256); compile the artifact again",
            dir.display()
        )));
    }
    let got = file_sha256(dir, name)?;
    if got != want {
        return Err(GoptError::Usage(format!(
            "{}: integrity check failed: {name} was modified after gopt wrote it \
             (SHA-256 {got}, {record} records {want}); compile the artifact again",
            dir.display()
        )));
    }
    Ok(())
}

/// [`check_plan`] for the sealed file `name` (a plan or a manifest).
pub fn check_sealed(dir: &Path, name: &str, bytes: &[u8], claimed: &str) -> Result<()> {
    let bad = || {
        GoptError::Usage(format!(
            "{}: integrity check failed: {name} was modified after gopt wrote it (its \
             SHA-256 does not match the one it records); compile the artifact again",
            dir.display()
        ))
    };
    let text = std::str::from_utf8(bytes).map_err(|_| bad())?;
    let filled = filled_field(claimed);
    if claimed.is_empty() || !text.contains(&filled) {
        return Err(bad());
    }
    let blank = text.replacen(&filled, &blank_field(), 1);
    if sha256(blank.as_bytes()) != claimed {
        return Err(bad());
    }
    Ok(())
}

/// Checks every file `files` lists against its recorded hash; a missing or modified file
/// is an error naming it.
pub fn check_files(dir: &Path, files: &BTreeMap<String, String>) -> Result<()> {
    for (name, want) in files {
        if !is_plain_name(name) {
            return Err(GoptError::Usage(format!(
                "{}: {PLAN} lists `{name}`, which is not a file name inside the artifact",
                dir.display()
            )));
        }
        check_file(dir, name, want, "the plan")?;
    }
    Ok(())
}

/// A single path component that stays inside the folder (no separators, not `.`/`..`).
pub(crate) fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !Path::new(name).is_absolute()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_plan_checks_and_any_edit_is_caught() {
        let json = b"{\n  \"sha256\": \"\",\n  \"format\": \"x\"\n}".to_vec();
        let sealed = seal(&json).expect("seal");
        let text = String::from_utf8(sealed.clone()).expect("utf8");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        let claimed = v["sha256"].as_str().expect("hash").to_string();
        assert_eq!(claimed.len(), 64);
        let dir = Path::new("art");
        check_plan(dir, &sealed, &claimed).expect("intact plan");
        // A whitespace edit, a value edit and a hash edit are all caught.
        let spaced = text.replace("\"format\"", " \"format\"");
        assert!(check_plan(dir, spaced.as_bytes(), &claimed).is_err());
        let edited = text.replace("\"x\"", "\"y\"");
        assert!(check_plan(dir, edited.as_bytes(), &claimed).is_err());
        let other = "0".repeat(64);
        let forged = text.replace(&claimed, &other);
        assert!(check_plan(dir, forged.as_bytes(), &other).is_err());
    }

    #[test]
    fn listed_names_stay_inside_the_artifact() {
        for bad in ["", ".", "..", "../x", "/etc/passwd", "a/b"] {
            assert!(!is_plain_name(bad), "{bad}");
        }
        assert!(is_plain_name("weights.bin"));
    }
}
