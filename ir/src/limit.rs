//! Memory limits: what the interpreter, the planners and the runtimes may allocate, so
//! that a model whose tensors would not fit (a ConvTranspose with huge strides, a batch
//! of a hundred million) is refused with an error naming what would have allocated how
//! much, before the allocation, instead of ending the process in an allocator abort or
//! a driver out-of-memory.
//!
//! A limit comes from `--memory-limit SIZE` ([`parse_size`]) or, by default, from what
//! the target can give: the machine's available memory for the CPU ([`host_available`]),
//! the device's free memory for a GPU at run time, and [`GPU_DEFAULT`] for a plan made
//! without a device.

use std::fmt;

/// The limit a GPU plan is checked against when no device is at hand and no
/// `--memory-limit` was given: the memory of the largest GPUs made today (288 GiB:
/// B300, MI355X). A plan above it cannot run on any GPU.
pub const GPU_DEFAULT: u64 = 288 << 30;

/// Where a limit comes from (said in errors, so the user knows what to change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `--memory-limit` (or [`MemoryLimit::new`] in the library).
    Flag,
    /// The machine's available memory (`MemAvailable`, or what the cgroup allows).
    HostAvailable,
    /// The GPU's free memory.
    DeviceFree,
    /// [`GPU_DEFAULT`]: a plan made without a device.
    LargestGpu,
    /// Nothing known (a system where available memory cannot be read).
    Unknown,
}

/// A memory limit in bytes and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    /// The most bytes that may be allocated.
    pub bytes: u64,
    /// Where the number comes from.
    pub origin: Origin,
}

impl MemoryLimit {
    /// A limit the user set (`--memory-limit`).
    pub fn new(bytes: u64) -> MemoryLimit {
        MemoryLimit {
            bytes,
            origin: Origin::Flag,
        }
    }

    /// The user's limit if there is one, else the machine's available memory.
    pub fn host(flag: Option<u64>) -> MemoryLimit {
        match flag {
            Some(b) => MemoryLimit::new(b),
            None => match host_available() {
                Some(bytes) => MemoryLimit {
                    bytes,
                    origin: Origin::HostAvailable,
                },
                None => MemoryLimit {
                    bytes: u64::MAX,
                    origin: Origin::Unknown,
                },
            },
        }
    }

    /// The user's limit if there is one, else [`GPU_DEFAULT`] (a plan made without a
    /// device).
    pub fn gpu_plan(flag: Option<u64>) -> MemoryLimit {
        match flag {
            Some(b) => MemoryLimit::new(b),
            None => MemoryLimit {
                bytes: GPU_DEFAULT,
                origin: Origin::LargestGpu,
            },
        }
    }

    /// The lower of the user's limit (if any) and `free` bytes free on the device.
    pub fn device(flag: Option<u64>, free: u64) -> MemoryLimit {
        match flag {
            Some(b) if b <= free => MemoryLimit::new(b),
            _ => MemoryLimit {
                bytes: free,
                origin: Origin::DeviceFree,
            },
        }
    }

    /// `Err` when `bytes` is above the limit; `what` gives who would allocate them
    /// and for what (see [`MemoryError`]), only called on refusal.
    pub fn check(
        &self,
        bytes: u128,
        what: impl FnOnce() -> (String, String),
    ) -> Result<(), MemoryError> {
        if bytes > u128::from(self.bytes) {
            let (what, detail) = what();
            return Err(MemoryError {
                what,
                detail,
                bytes,
                live: 0,
                limit: *self,
            });
        }
        Ok(())
    }
}

impl fmt::Display for MemoryLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = fmt_bytes(u128::from(self.bytes));
        match self.origin {
            Origin::Flag => write!(f, "{b} (--memory-limit)"),
            Origin::HostAvailable => write!(
                f,
                "{b} (the memory available on this machine; --memory-limit sets another)"
            ),
            Origin::DeviceFree => write!(f, "{b} (free on the GPU)"),
            Origin::LargestGpu => write!(
                f,
                "{b} (the largest GPU memory; --memory-limit sets the target's)"
            ),
            Origin::Unknown => write!(f, "{b} (unknown available memory)"),
        }
    }
}

/// An allocation refused because it would go above a [`MemoryLimit`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct MemoryError {
    /// Who would allocate: "node `x` (ConvTranspose)", "bucket batch=8: the CUDA plan".
    pub what: String,
    /// For what, after the bytes (may be empty): "for its output f32[1,2,3]".
    pub detail: String,
    /// The bytes it would allocate.
    pub bytes: u128,
    /// Bytes already held when it would allocate (0 when not tracked).
    pub live: u128,
    /// The limit.
    pub limit: MemoryLimit,
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.live == 0 {
            write!(
                f,
                "{} would allocate {}{}{}; the memory limit is {}",
                self.what,
                fmt_bytes(self.bytes),
                sep(&self.detail),
                self.detail,
                self.limit
            )
        } else {
            write!(
                f,
                "{} would allocate {}{}{} with {} already live ({} together); the memory limit is {}",
                self.what,
                fmt_bytes(self.bytes),
                sep(&self.detail),
                self.detail,
                fmt_bytes(self.live),
                fmt_bytes(self.bytes.saturating_add(self.live)),
                self.limit
            )
        }
    }
}

fn sep(detail: &str) -> &'static str {
    if detail.is_empty() {
        ""
    } else {
        " "
    }
}

/// Bytes of a tensor of `dims` with `elem_size`-byte elements, saturating instead of
/// overflowing.
pub fn bytes_of(dims: impl IntoIterator<Item = u64>, elem_size: usize) -> u128 {
    dims.into_iter().fold(elem_size as u128, |acc, d| {
        acc.saturating_mul(u128::from(d))
    })
}

/// A byte count in binary units with the exact count: `12.00 TiB (13194139533312 bytes)`.
pub fn fmt_bytes(n: u128) -> String {
    let short = fmt_short(n);
    if n < 1024 || n == u128::MAX {
        short
    } else {
        format!("{short} ({n} bytes)")
    }
}

/// A byte count in binary units: `12.00 TiB`, `100 bytes`.
pub fn fmt_short(n: u128) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n == u128::MAX {
        return "more than 2^128 bytes".into();
    }
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} bytes")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// Parses a size: plain bytes (`1048576`), or a number with a unit, binary
/// (`512K`, `512M`, `24G`, `1T`, `1.5GiB`, `512MiB`) or decimal (`24GB`, `500MB`, `2kB`);
/// case does not matter. Zero, negative and non-finite sizes are refused.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(format!(
                "`{s}`: unknown unit `{}` (expected a number of bytes, optionally with \
                 K, M, G, T, KiB, MiB, GiB, TiB (binary) or KB, MB, GB, TB (decimal), e.g. 512M, 24G, 1.5GiB)",
                unit.trim()
            ))
        }
    };
    let v: f64 = num.parse().map_err(|_| {
        format!("`{s}`: expected a size such as 512M, 24G, 1.5GiB or a number of bytes")
    })?;
    let bytes = (v * mult).round();
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!(
            "`{s}`: expected a size of at least 1 byte and below 16 EiB"
        ));
    }
    Ok(bytes as u64)
}

/// The machine's available memory: Linux's `MemAvailable`, lowered to what the
/// process's cgroup (v2) still allows; `None` where neither can be read.
pub fn host_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let avail = meminfo_field(&meminfo, "MemAvailable:")?;
    Some(match cgroup_headroom() {
        Some(c) => avail.min(c),
        None => avail,
    })
}

/// This process's peak resident memory so far (Linux's `VmHWM`); `None` where it
/// cannot be read.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    meminfo_field(&status, "VmHWM:")
}

/// A `/proc/meminfo` (or `/proc/self/status`) field in bytes.
fn meminfo_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// `memory.max - memory.current` of this process's cgroup (v2), when it has a limit.
fn cgroup_headroom() -> Option<u64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?;
    let cur: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(max.saturating_sub(cur))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_rss_covers_what_was_touched() {
        // Linux only (CI and the GPU machine): 64 MiB written must show in the peak.
        let Some(before) = peak_rss() else { return };
        let v = vec![1u8; 64 << 20];
        let after = peak_rss().unwrap_or(0);
        assert!(after >= before.max(v.len() as u64), "{before} -> {after}");
        assert_eq!(v.iter().map(|&x| x as u64).sum::<u64>(), 64 << 20);
    }

    #[test]
    fn sizes_parse_in_binary_and_decimal_units() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("24G"), Ok(24 << 30));
        assert_eq!(parse_size("24g"), Ok(24 << 30));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("24GB"), Ok(24_000_000_000));
        assert_eq!(parse_size("2 kB"), Ok(2000));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
    }

    #[test]
    fn bad_sizes_are_errors() {
        for s in [
            "",
            "G",
            "abc",
            "12X",
            "-5",
            "0",
            "0.1",
            "1e3",
            "nan",
            "1.2.3G",
            "99999999999T",
        ] {
            assert!(parse_size(s).is_err(), "{s} parsed");
        }
    }

    #[test]
    fn meminfo_is_read_in_bytes() {
        let text = "MemTotal:       24684084 kB\nMemAvailable:   22692348 kB\n";
        assert_eq!(meminfo_field(text, "MemAvailable:"), Some(22692348 * 1024));
        assert_eq!(meminfo_field(text, "SwapFree:"), None);
    }

    #[test]
    fn byte_counts_saturate_and_print_exactly() {
        assert_eq!(bytes_of([2, 3], 4), 24);
        assert_eq!(bytes_of([u64::MAX, u64::MAX, u64::MAX], 4), u128::MAX);
        assert_eq!(fmt_bytes(1 << 40), "1.00 TiB (1099511627776 bytes)");
        assert_eq!(fmt_bytes(100), "100 bytes");
    }

    #[test]
    fn the_error_names_what_and_the_limit() {
        let e = MemoryLimit::new(1 << 30)
            .check(1 << 32, || {
                (
                    "node `n` (Relu)".into(),
                    "for its output f32[1073741824]".into(),
                )
            })
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "node `n` (Relu) would allocate 4.00 GiB (4294967296 bytes) for its output \
             f32[1073741824]; the memory limit is 1.00 GiB (1073741824 bytes) (--memory-limit)"
        );
        assert!(MemoryLimit::new(1 << 30)
            .check(1 << 30, || unreachable!())
            .is_ok());
    }
}
