//! The one backend vocabulary, from the CLI's flags to the executors: [`Backend`] names
//! where a compiled graph runs and what each bucket is planned for. Its names
//! ([`Backend::name`]) are the ones `--backend`, `compile --target`, reports and
//! artifacts use, and [`FromStr`] and clap's `ValueEnum` read the same names (with
//! their aliases), so no second list of backend names exists.

use clap::builder::PossibleValue;
use std::fmt;
use std::str::FromStr;

/// Where a compiled graph executes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The CPU reference interpreter.
    #[default]
    Cpu,
    /// NVIDIA GPUs: generated CUDA kernels and cuBLASLt, replayed as a CUDA graph.
    Cuda,
    /// Any GPU wgpu reaches (Vulkan, Metal, DX12; lavapipe on the CPU): generated WGSL.
    Wgpu,
}

impl Backend {
    /// Every backend, in the order the CLI lists them.
    pub const ALL: [Backend; 3] = [Backend::Cpu, Backend::Cuda, Backend::Wgpu];

    /// The name the CLI, reports and artifacts use.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Wgpu => "wgpu",
        }
    }

    /// Other names the CLI accepts for it: `wgsl` (the language of the wgpu plan, the
    /// `compile --target` spelling) and `none` (`compile --target none`: no code
    /// generation, the CPU interpreter runs the optimized graphs).
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Backend::Cpu => &["none"],
            Backend::Cuda => &[],
            Backend::Wgpu => &["wgsl"],
        }
    }

    /// One line for `--help`.
    fn help(self) -> &'static str {
        match self {
            Backend::Cpu => {
                "The CPU reference interpreter; `compile` plans no kernels (alias: none)"
            }
            Backend::Cuda => {
                "NVIDIA GPUs: CUDA C kernels for NVRTC, cuBLASLt GEMMs, a liveness-planned \
                 arena, replayed as a CUDA graph"
            }
            Backend::Wgpu => {
                "Any GPU wgpu reaches (Vulkan, Metal, DX12; Mesa's lavapipe on the CPU): WGSL \
                 compute shaders, pooled buffers (alias: wgsl)"
            }
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl clap::ValueEnum for Backend {
    fn value_variants<'a>() -> &'a [Self] {
        &Backend::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(
            PossibleValue::new(self.name())
                .aliases(self.aliases().iter().copied())
                .help(self.help()),
        )
    }
}

/// A name that is no backend's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownBackend(pub String);

impl fmt::Display for UnknownBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Backend::ALL.iter().map(|b| b.name()).collect();
        write!(
            f,
            "unknown backend `{}` (one of {})",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownBackend {}

impl FromStr for Backend {
    type Err = UnknownBackend;

    /// A backend by its name or one of its aliases, case-sensitive as on the CLI.
    fn from_str(s: &str) -> Result<Backend, UnknownBackend> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s || b.aliases().contains(&s))
            .ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn names_and_aliases_read_back() {
        for b in Backend::ALL {
            assert_eq!(b.name().parse::<Backend>(), Ok(b));
            assert_eq!(<Backend as ValueEnum>::from_str(b.name(), false), Ok(b));
            for a in b.aliases() {
                assert_eq!(a.parse::<Backend>(), Ok(b));
                assert_eq!(<Backend as ValueEnum>::from_str(a, false), Ok(b));
            }
        }
        assert_eq!("wgsl".parse::<Backend>(), Ok(Backend::Wgpu));
        assert_eq!("none".parse::<Backend>(), Ok(Backend::Cpu));
        assert!("auto".parse::<Backend>().is_err());
        assert!("metal".parse::<Backend>().is_err());
    }
}
