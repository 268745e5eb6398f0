//! BatchNormalization, InstanceNormalization, GroupNormalization, LRN and
//! MeanVarianceNormalization, read once for every backend, as one of three kernel
//! shapes ([`NormKind`]):
//!
//! - BatchNormalization with stored statistics is per element: channel `c` of
//!   `[N, C, ...]` data is `(x - mean[c]) * (scale[c] / sqrt(var[c] + eps)) + B[c]`.
//! - The others that standardise a group of elements first compute the group's
//!   statistics ([`Stats`]): the data is viewed as runs of kept dims (which group) and
//!   reduced dims (which element of it), as a reduction's ([`super::reduce::runs`]):
//!   GroupNormalization (and InstanceNormalization, one group per channel) reduces
//!   each sample's group of channels, BatchNormalization in training mode each channel
//!   over the batch and spatial dims (and writes the running statistics), and
//!   MeanVarianceNormalization any set of axes. One block (workgroup) per group sums in
//!   two passes (the mean, then the squared deviations, or the squares for MVN) as
//!   the interpreter does, then normalizes.
//! - LRN is per element: the sum of squares over a window of neighbouring channels.
//!
//! Statistics are in f32 whatever the storage (f16 and bf16 convert on load and store);
//! each parameter is read in its own dtype.

use super::support::{check_float, input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// A tensor a kernel binds: the graph value, its dtype and its name in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    /// The graph value.
    pub value: ValueId,
    /// Its dtype (a float the kernels compute in f32).
    pub dtype: DType,
    /// Its name in the kernel's source.
    pub name: &'static str,
}

/// The ops of the family, as [`super::lower`] maps them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormOp {
    /// BatchNormalization.
    Batch,
    /// GroupNormalization.
    Group,
    /// InstanceNormalization.
    Instance,
    /// MeanVarianceNormalization.
    MeanVariance,
    /// LRN.
    Lrn,
}

/// A normalization node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct NormSpec {
    /// The node.
    pub site: Site,
    /// The inputs the kernel reads, in binding order: `x` first, then the parameters.
    pub inputs: Vec<Operand>,
    /// The outputs it writes, in binding order: `y` first (x's dtype and shape), then
    /// BatchNormalization's running mean and variance in training mode.
    pub outputs: Vec<Operand>,
    /// The data's dtype.
    pub dtype: DType,
    /// Data elements.
    pub n: usize,
    /// What the kernel computes.
    pub kind: NormKind,
}

/// The three kernel shapes of the family.
#[derive(Clone, Debug, PartialEq)]
pub enum NormKind {
    /// BatchNormalization with stored statistics: one thread per element of `[N, C,
    /// S]` data reads `scale`, `bias`, `input_mean`, `input_var` at its channel.
    Batch {
        /// Channels.
        c: usize,
        /// Spatial elements per channel and sample (at least 1).
        s: usize,
        /// `epsilon`.
        eps: f32,
    },
    /// Statistics per group, then each element normalized.
    Stats(Stats),
    /// LRN over `[N, C, S]` data: `x / (bias + alpha / size * sum of x^2 over the
    /// channels c - before ..= c + after) ^ beta`.
    Lrn {
        /// Channels.
        c: usize,
        /// Spatial elements per channel and sample (at least 1).
        s: usize,
        /// Channels of the window below the element's.
        before: usize,
        /// Channels of the window above it.
        after: usize,
        /// `bias`.
        bias: f32,
        /// `alpha / size` (rounded once from f64, as the interpreter).
        scale: f32,
        /// `beta`.
        beta: f32,
    },
}

/// A normalization by per-group statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// The data's dims merged into runs (size, reduced): kept runs number the groups,
    /// reduced runs the elements of each.
    pub runs: Vec<(usize, bool)>,
    /// Groups (one block each).
    pub groups: usize,
    /// Elements of each group.
    pub len: usize,
    /// How the statistics become the output.
    pub formula: Formula,
}

/// What a [`Stats`] kernel computes from a group's mean and second pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Formula {
    /// GroupNormalization and InstanceNormalization: `(x - mean) * (1 / sqrt(var +
    /// eps)) * scale[ch] + B[ch]` where element `j` of group `g` is in channel `ch =
    /// (g % groups) * per_group + j / s`; a parameter of one value per group (before
    /// opset 21) is read at `ch / per_group`.
    Group {
        /// Groups per sample (`num_groups`; C for InstanceNormalization).
        groups: usize,
        /// Channels per group.
        per_group: usize,
        /// Spatial elements per channel (at least 1).
        s: usize,
        /// `scale` holds one value per group (else per channel).
        scale_per_group: bool,
        /// `B` holds one value per group (else per channel).
        bias_per_group: bool,
        /// `epsilon`.
        eps: f32,
    },
    /// BatchNormalization in training mode (group = channel): the batch statistics
    /// normalize, `(x - mean) * (scale[c] / sqrt(var + eps)) + B[c]`, and the running
    /// ones are `input * momentum + batch * (1 - momentum)`.
    Train {
        /// `epsilon`.
        eps: f32,
        /// `momentum`.
        momentum: f32,
        /// The running mean's and variance's operands (`outputs[1]` and `outputs[2]`).
        running: [Operand; 2],
    },
    /// MeanVarianceNormalization: `(x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9)` (the
    /// second pass sums squares, not squared deviations).
    Mvn,
}

fn operand(g: &Graph, node: &Node, v: ValueId, name: &'static str) -> Result<Operand> {
    let (dtype, _) = typed(g, node, v)?;
    check_float(node, dtype, "data")?;
    Ok(Operand {
        value: v,
        dtype,
        name,
    })
}

/// A parameter input `k` of `node`, which must hold `len` values.
fn param(g: &Graph, node: &Node, k: usize, name: &'static str, len: usize) -> Result<Operand> {
    let v = input(node, k)?;
    let (_, shape) = typed(g, node, v)?;
    if shape.iter().product::<usize>() != len {
        return Err(unsupported(
            node,
            &format!("a `{name}` of shape {shape:?} (not {len} values)"),
        ));
    }
    operand(g, node, v, name)
}

/// `(N, C, spatial size)` of `[N, C, ...]` data.
fn ncs(node: &Node, shape: &[usize]) -> Result<(usize, usize, usize)> {
    let [n, c, rest @ ..] = shape else {
        return Err(unsupported(node, "data of rank below 2"));
    };
    Ok((*n, *c, rest.iter().product()))
}

fn float_attr(node: &Node, name: &str, default: f32) -> Result<f32> {
    node.attrs.float_or(name, default).map_err(plan)
}

/// Reads normalization node `node` of `g`, an `op`.
pub fn spec(g: &Graph, node: &Node, op: NormOp) -> Result<NormSpec> {
    let x = operand(g, node, input(node, 0)?, "x")?;
    let y = output(node, 0)?;
    let (ydt, _) = typed(g, node, y)?;
    let (dtype, shape) = typed(g, node, x.value)?;
    if ydt != dtype {
        return Err(plan(format!("{}: output of another dtype", node.name)));
    }
    let n: usize = shape.iter().product();
    if n == 0 {
        return Err(unsupported(node, "an empty input"));
    }
    let mut inputs = vec![x];
    let mut outputs = vec![Operand {
        value: y,
        dtype,
        name: "y",
    }];
    let kind = match op {
        NormOp::Batch => {
            let (_, c, s) = ncs(node, &shape)?;
            let eps = float_attr(node, "epsilon", 1e-5)?;
            let training = node.attrs.int_or("training_mode", 0).map_err(plan)? != 0;
            for (k, name) in [
                (1, "scale"),
                (2, "bias"),
                (3, "input_mean"),
                (4, "input_var"),
            ] {
                inputs.push(param(g, node, k, name, c)?);
            }
            if training {
                let running = [
                    operand(g, node, output(node, 1)?, "running_mean")?,
                    operand(g, node, output(node, 2)?, "running_var")?,
                ];
                outputs.extend(running);
                let momentum = float_attr(node, "momentum", 0.9)?;
                let runs = super::reduce::runs(&[shape[0], c, s], &[0, 2]);
                NormKind::Stats(Stats {
                    runs,
                    groups: c,
                    len: n / c,
                    formula: Formula::Train {
                        eps,
                        momentum,
                        running,
                    },
                })
            } else {
                NormKind::Batch {
                    c,
                    s: s.max(1),
                    eps,
                }
            }
        }
        NormOp::Group | NormOp::Instance => {
            let (batch, c, s) = ncs(node, &shape)?;
            let groups = if op == NormOp::Instance {
                c
            } else {
                let g = node.attrs.req_int("num_groups").map_err(plan)?;
                usize::try_from(g).map_err(|_| unsupported(node, "num_groups below 1"))?
            };
            if groups == 0 || c % groups != 0 {
                return Err(unsupported(
                    node,
                    &format!("{c} channels in {groups} groups"),
                ));
            }
            let per_group = c / groups;
            let mut per_group_param = |k: usize, name: &'static str| -> Result<bool> {
                let v = input(node, k)?;
                let (_, ps) = typed(g, node, v)?;
                let len: usize = ps.iter().product();
                let by_group = op == NormOp::Group && len == groups && groups != c;
                inputs.push(param(g, node, k, name, if by_group { groups } else { c })?);
                Ok(by_group)
            };
            let scale_per_group = per_group_param(1, "scale")?;
            let bias_per_group = per_group_param(2, "bias")?;
            let len = per_group * s;
            NormKind::Stats(Stats {
                runs: super::reduce::runs(&[batch * groups, len], &[1]),
                groups: batch * groups,
                len,
                formula: Formula::Group {
                    groups,
                    per_group,
                    s: s.max(1),
                    scale_per_group,
                    bias_per_group,
                    eps: float_attr(node, "epsilon", 1e-5)?,
                },
            })
        }
        NormOp::MeanVariance => {
            let listed = node
                .attrs
                .ints("axes")
                .map_err(plan)?
                .map(<[i64]>::to_vec)
                .unwrap_or_else(|| vec![0, 2, 3]);
            let mut axes = Vec::new();
            for a in listed {
                axes.push(gopt_ir::ops::util::norm_axis(a, shape.len()).map_err(plan)?);
            }
            axes.sort_unstable();
            axes.dedup();
            let len: usize = axes.iter().map(|&a| shape[a]).product();
            NormKind::Stats(Stats {
                runs: super::reduce::runs(&shape, &axes),
                groups: n / len,
                len,
                formula: Formula::Mvn,
            })
        }
        NormOp::Lrn => {
            let (_, c, s) = ncs(node, &shape)?;
            let size = node.attrs.req_int("size").map_err(plan)?;
            let size = usize::try_from(size)
                .ok()
                .filter(|&s| s >= 1)
                .ok_or_else(|| unsupported(node, "a size below 1"))?;
            let alpha = float_attr(node, "alpha", 1e-4)?;
            NormKind::Lrn {
                c,
                s: s.max(1),
                before: (size - 1) / 2,
                after: size / 2,
                bias: float_attr(node, "bias", 1.0)?,
                scale: (alpha as f64 / size as f64) as f32,
                beta: float_attr(node, "beta", 0.75)?,
            }
        }
    };
    if opt_input(node, inputs.len()).is_some() {
        return Err(unsupported(node, "an extra input"));
    }
    Ok(NormSpec {
        site: Site::of(node),
        inputs,
        outputs,
        dtype,
        n,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::super::reduce::runs;

    #[test]
    fn group_and_batch_views_merge_into_runs() {
        // GroupNormalization on [3, 4, 2, 2] in 2 groups: 6 groups of 8 elements.
        assert_eq!(runs(&[6, 8], &[1]), vec![(6, false), (8, true)]);
        // BatchNormalization training on [2, 3, 20]: channels kept, the rest reduced.
        assert_eq!(
            runs(&[2, 3, 20], &[0, 2]),
            vec![(2, true), (3, false), (20, true)]
        );
        // One sample: the batch run drops out.
        assert_eq!(runs(&[1, 3, 20], &[0, 2]), vec![(3, false), (20, true)]);
    }
}
