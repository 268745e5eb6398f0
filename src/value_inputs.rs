//! Graph inputs that decide shapes (a Reshape target, Slice bounds, reduction axes, a
//! Pad width, Resize sizes fed as inputs rather than initializers) leave every shape
//! after them unknown until a run, so no plan can be made ahead of it. Like TensorRT's
//! shape tensors, gopt specializes on their values: [`crate::Compiled::run`] makes them
//! constants of a copy of the model, keyed by the values, and compiles that copy (its
//! own buckets, plans and kernels) the first time those values are seen. The answer is
//! the same as with the values as inputs; only compile work is repeated per new value.

use gopt_ir::{Graph, Tensor};

/// The input positions of each op that determine its output's shape (or, for Dropout,
/// which computation it is).
fn shape_operands(op: &str) -> &'static [usize] {
    match op {
        "Reshape" | "Expand" | "Tile" | "Split" | "Squeeze" | "Unsqueeze" | "OneHot" | "TopK"
        | "Upsample" | "CenterCropPad" => &[1],
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd"
        | "ReduceSumSquare" | "ReduceL1" | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" => &[1],
        "Slice" => &[1, 2, 3, 4],
        "Pad" => &[1, 3],
        "Resize" => &[1, 2, 3],
        "ConstantOfShape" | "HannWindow" | "HammingWindow" | "BlackmanWindow" => &[0],
        "Range" => &[0, 1, 2],
        "AffineGrid" => &[1],
        "Col2Im" | "DFT" => &[1, 2],
        "STFT" => &[1, 3],
        "MaxUnpool" => &[2],
        "MelWeightMatrix" => &[0, 1, 2, 3, 4],
        // A condition or a trip count: GPU plans inline branches and unroll loops when
        // these are known (`gopt_ir::unroll`).
        "If" => &[0],
        "Loop" => &[0, 1],
        // Not a shape, but what the node computes: the identity, or (training with a
        // nonzero ratio) a random mask that only the CPU draws.
        "Dropout" => &[1, 2],
        _ => &[],
    }
}

/// Positions in `g.inputs` of the inputs that decide a shape operand (small tensors
/// only: at most 64 elements by their declared type): read by a node as one, or read by
/// a computation whose result is one (a trip count computed from start, limit and delta
/// inputs). Shape and Size end the walk: their results depend on types, not values.
pub fn positions(g: &Graph) -> Vec<usize> {
    let mut deciding: std::collections::HashSet<gopt_ir::ValueId> = g
        .nodes
        .iter()
        .flat_map(|n| {
            shape_operands(n.op.name())
                .iter()
                .filter_map(|&i| n.inputs.get(i).copied().flatten())
        })
        .collect();
    // An If or Loop reads outer values by capture too.
    let captured = g.capture_uses();
    loop {
        let before = deciding.len();
        for (n, caps) in g.nodes.iter().zip(&captured).rev() {
            let walks = !matches!(n.op.name(), "Shape" | "Size");
            if walks && n.outputs.iter().any(|o| deciding.contains(o)) {
                deciding.extend(n.inputs.iter().flatten().copied());
                deciding.extend(caps.iter().copied());
            }
        }
        if deciding.len() == before {
            break;
        }
    }
    let mut out = Vec::new();
    for (k, &v) in g.inputs.iter().enumerate() {
        let small = g.value(v).ty.as_ref().is_some_and(|t| {
            gopt_ir::dim::concrete(&t.shape).is_some_and(|s| s.iter().product::<usize>() <= 64)
        });
        if small && deciding.contains(&v) {
            out.push(k);
        }
    }
    out
}

/// A key for the values of the inputs at `positions`.
pub fn key(inputs: &[Tensor], positions: &[usize]) -> Vec<Vec<u8>> {
    positions
        .iter()
        .filter_map(|&k| inputs.get(k))
        .map(|t| {
            let mut b = format!("{}{:?}", t.dtype(), t.shape()).into_bytes();
            b.extend(gopt_codegen::plan::tensor_bytes(t));
            b
        })
        .collect()
}

/// `model` with the inputs at `positions` made constants holding their values in
/// `inputs` (made once per new set of values: it copies the model's weights).
pub fn specialize(
    model: &crate::Imported,
    inputs: &[Tensor],
    positions: &[usize],
) -> crate::Imported {
    let mut m = model.clone();
    let g = &mut m.model.graph;
    for &k in positions.iter().rev() {
        let v = g.inputs.remove(k);
        g.constants.insert(v, inputs[k].clone().into());
    }
    m
}

/// The inputs not at `positions`, in order (what the specialized model takes).
pub fn rest(inputs: &[Tensor], positions: &[usize]) -> Vec<Tensor> {
    inputs
        .iter()
        .enumerate()
        .filter(|(k, _)| !positions.contains(k))
        .map(|(_, t)| t.clone())
        .collect()
}
