//! Data-movement kernels, from the index maps of [`crate::lower::index`]: Transpose,
//! Slice (constant bounds, positive steps), Gather, Expand, Concat, and the view ops
//! (Reshape, Flatten, Squeeze, Unsqueeze, Identity) as copies when a plan needs one. One
//! thread per output element; the output coordinates are unrolled with constant
//! divisors (shapes are static per bucket) and mapped to the input's offset. Gather checks every index (the indices may be computed on the
//! device): one out of range raises the node's code in the run's error word and reads
//! row 0, never outside the data ([`crate::plan::IndexCheck`]).

use super::elementwise::storage;
use super::support::blocks;
use super::Kernel;
use crate::lower::index::{movement, Lit, Read};
use crate::plan::{index_code, IndexCheck};
use crate::template::fill;
use crate::Result;
use gopt_ir::{Graph, Node};

const TEMPLATE: &str = include_str!("movement.cu");

/// Code that splits the output index `i` into coordinates `c0..c{r-1}`, innermost
/// first.
fn coords(out: &[usize]) -> String {
    let split: String = (0..out.len())
        .rev()
        .map(|a| {
            format!(
                "        const long long c{a} = r % {d}LL; r /= {d}LL;\n",
                d = out[a]
            )
        })
        .collect();
    format!("        long long r = i;\n{split}        (void)r;\n")
}

/// Emits the kernel for `node`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    let mv = movement(g, node, Lit("LL")).map_err(|e| e.for_backend("CUDA"))?;
    let t = storage(mv.dtype);
    let n: usize = mv.shape.iter().product();
    let mut params: Vec<String> = mv
        .inputs
        .iter()
        .enumerate()
        .map(|(k, (_, dt))| format!("const {}* __restrict__ in{k}", storage(*dt)))
        .collect();
    params.push(format!("{t}* __restrict__ out"));
    let mut check = None;
    let body = match &mv.read {
        Read::Copy => "        out[i] = in0[i];\n".to_string(),
        Read::Strided(at) => format!("{}        out[i] = in0[{at}];\n", coords(&mv.shape)),
        Read::Gather {
            index,
            data,
            axis_len,
        } => {
            let code = index_code(g, node)?;
            check = Some(IndexCheck {
                code,
                op: node.op.name().into(),
                what: format!("an index out of range for an axis of length {axis_len}"),
            });
            params.push("unsigned int* __restrict__ gopt_err".into());
            // Out of range (after the negative wrap): raise the node's code, read row 0.
            format!(
                "{}        long long k = (long long)in1[{index}];\n        if (k < 0) k += {axis_len}LL;\n        if (k < 0 || k >= {axis_len}LL) {{ atomicMax(gopt_err, {code}u); k = 0; }}\n        out[i] = in0[{data}];\n",
                coords(&mv.shape),
            )
        }
        Read::Concat { axis, parts } => {
            let copy = |(k, (end, at)): (usize, &(usize, String))| {
                let other = if k == 0 { "" } else { "else " };
                format!("        {other}if (c{axis} < {end}LL) out[i] = in{k}[{at}];\n")
            };
            coords(&mv.shape) + &parts.iter().enumerate().map(copy).collect::<String>()
        }
    };
    let holes = [
        ("what", node.op.name()),
        ("name", name),
        ("params", &params.join(", ")),
        ("n", &n.to_string()),
        ("body", &body),
    ];
    let inputs = mv.inputs.iter().map(|(v, _)| v.0).collect();
    let mut k = grid_stride(node, name, fill(TEMPLATE, &holes)?, n, inputs);
    k.outputs = vec![mv.out.0];
    k.index_check = check;
    Ok(k)
}

/// A grid-stride kernel of `n` threads in blocks of 256, reading `inputs` (its outputs
/// and index check left for the caller).
pub(super) fn grid_stride(
    node: &Node,
    name: &str,
    source: String,
    n: usize,
    inputs: Vec<u32>,
) -> Kernel {
    Kernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        threads: n,
        vectorized: false,
        inputs,
        outputs: Vec::new(),
        shared_mem: 0,
        grid: blocks(n, 256),
        block: 256,
        index_check: None,
    }
}
