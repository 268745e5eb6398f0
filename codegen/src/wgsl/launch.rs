//! The two launch shapes most WGSL kernels share, built in one place so each writer
//! states only what differs (its bindings, an index check, a loop bound): `n`
//! invocations over a 1-D range ([`WgslKernel::flat`], as CUDA's `Kernel::flat`), or a
//! single workgroup that walks the whole tensor ([`WgslKernel::one_workgroup`]).

use super::{WgslKernel, WORKGROUP};

impl WgslKernel {
    /// A shader of `n` invocations in workgroups of [`WORKGROUP`] (a grid-stride loop
    /// covers what the dispatch cannot), reading `inputs` and writing `outputs`, with no
    /// index check and no known loop bound: the shape of most generated shaders.
    pub fn flat(
        name: &str,
        node: &str,
        source: String,
        n: u32,
        inputs: Vec<u32>,
        outputs: Vec<u32>,
    ) -> WgslKernel {
        WgslKernel {
            workgroups: [n.div_ceil(WORKGROUP).clamp(1, 65535), 1, 1],
            ..WgslKernel::one_workgroup(name, node, source, inputs, outputs)
        }
    }

    /// A kernel of one workgroup, reading `inputs` and writing `outputs`, with no index
    /// check and no known loop bound.
    pub fn one_workgroup(
        name: &str,
        node: &str,
        source: String,
        inputs: Vec<u32>,
        outputs: Vec<u32>,
    ) -> WgslKernel {
        WgslKernel {
            name: name.to_string(),
            node: node.to_string(),
            source,
            workgroups: [1, 1, 1],
            inputs,
            outputs,
            index_check: None,
            loop_iterations: None,
        }
    }
}
