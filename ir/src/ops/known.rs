//! Value propagation during inference, for every family at once. Shape arithmetic
//! (`Size(Shape(x)) - 1`, `Equal(shape, 0)`, `Cast`...) runs on tiny integer tensors;
//! when all of a node's inputs are known (constants, or values whose every element
//! inference tracked as a known integer) the node is evaluated and its small integer or
//! bool outputs are tracked in turn. Consumers then see those values as
//! `InferInput.value`, so a Reshape or ConstantOfShape after such arithmetic gets exact
//! shapes instead of a rank inference cannot know.

use crate::dim::concrete;
use crate::graph::{Node, TensorType};
use crate::ops::{EvalCx, InferCx, InferInput, Op, SymInt};
use crate::tensor::Tensor;

/// Largest tensor (in elements) evaluated or tracked this way.
const MAX_KNOWN: usize = 64;

/// For each input without a value, the tensor its tracked elements spell, when they
/// are all known integers and its type is concrete.
pub fn materialize(
    cx: &InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Vec<Option<Tensor>> {
    inputs
        .iter()
        .enumerate()
        .map(|(i, inp)| {
            let inp = inp.as_ref()?;
            if inp.value.is_some() {
                return None;
            }
            let v = cx.sym_value((*node.inputs.get(i)?)?)?;
            let ints: Vec<i64> = v
                .iter()
                .map(|s| match s {
                    SymInt::Int(n) => Some(*n),
                    SymInt::Dim(_) => None,
                })
                .collect::<Option<_>>()?;
            tensor_of(&ints, inp.ty)
        })
        .collect()
}

fn tensor_of(ints: &[i64], ty: &TensorType) -> Option<Tensor> {
    let shape = concrete(&ty.shape)?;
    if shape.iter().product::<usize>() != ints.len()
        || !(ty.dtype.is_int() || ty.dtype == crate::DType::Bool)
    {
        return None;
    }
    let t = Tensor::I64(crate::tensor::array_from(&shape, ints.to_vec()).ok()?);
    Some(t.cast(ty.dtype))
}

/// Evaluates `op` when every present input has a small value and its inferred outputs
/// `tys` are small too (a ConstantOfShape of one huge dim is not materialised), within
/// a budget, and tracks its small integer and bool outputs.
pub fn evaluate(
    op: Op,
    cx: &mut InferCx,
    node: &Node,
    inputs: &[Option<InferInput>],
    tys: &[TensorType],
) {
    if !op.is_deterministic() || node.attrs.graphs().next().is_some() {
        return;
    }
    let big = |t: &TensorType| {
        concrete(&t.shape)
            .is_some_and(|s| crate::budget::elements(&s).is_none_or(|n| n > MAX_KNOWN as u64))
    };
    if tys.iter().any(big) {
        return;
    }
    let vals: Option<Vec<Option<&Tensor>>> = inputs
        .iter()
        .map(|i| match i {
            None => Some(None),
            Some(i) => i.value.filter(|t| t.len() <= MAX_KNOWN).map(Some),
        })
        .collect();
    let Some(vals) = vals else { return };
    let no_scope = |_: &str| None;
    let ecx = EvalCx { lookup: &no_scope };
    let fuel = 64 * MAX_KNOWN as u64;
    let Ok(outs) = crate::budget::with_fuel(fuel, || op.eval(&ecx, node, &vals)) else {
        return;
    };
    for (&v, t) in node.outputs.iter().zip(&outs) {
        if t.len() <= MAX_KNOWN && (t.dtype().is_int() || t.dtype() == crate::DType::Bool) {
            cx.set_sym_value(v, t.to_i64_vec().into_iter().map(SymInt::Int).collect());
        }
    }
}
