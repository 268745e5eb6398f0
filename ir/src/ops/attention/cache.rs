//! ONNX `TensorScatter` (opset 24): writes a block of new key/value entries into a
//! fixed-size cache at a per-batch write index, linearly or wrapping around
//! (`mode="circular"`). The functional form of an in-place KV-cache update; mirrors
//! `onnx/reference/ops/op_tensor_scatter.py`.

use crate::error::{IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input, norm_axis, opt_input};
use crate::ops::InferInput;
use crate::tensor::{Elem, Tensor};
use ndarray::ArrayD;

/// Runs the op.
pub(super) fn eval(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let past = input(inputs, 0)?;
    let update = input(inputs, 1)?;
    let circular = match node.attrs.str_or("mode", "linear")? {
        "linear" => false,
        "circular" => true,
        m => {
            return Err(IrError::Attr {
                name: "mode".into(),
                msg: format!("expected \"linear\" or \"circular\", got {m:?}"),
            })
        }
    };
    let axis = norm_axis(node.attrs.int_or("axis", -2)?, past.rank())?;
    if axis == 0 {
        return Err(IrError::Attr {
            name: "axis".into(),
            msg: "the sequence axis cannot be the batch axis 0".into(),
        });
    }
    if update.dtype() != past.dtype() {
        return Err(IrError::DType {
            context: "TensorScatter update".into(),
            expected: past.dtype().name().into(),
            found: update.dtype(),
        });
    }
    let (ps, us) = (past.shape(), update.shape());
    let compatible = ps.len() == us.len()
        && ps
            .iter()
            .zip(us)
            .enumerate()
            .all(|(i, (p, u))| if i == axis { u <= p } else { u == p });
    if !compatible {
        return Err(IrError::Shape(format!(
            "update {us:?} does not fit cache {ps:?} along axis {axis}"
        )));
    }
    let batch = ps[0];
    let writes = match opt_input(inputs, 2) {
        Some(w) => w.to_i64_vec(),
        None => vec![0; batch],
    };
    if writes.len() != batch {
        return Err(IrError::Shape(format!(
            "write_indices has {} entries for batch {batch}",
            writes.len()
        )));
    }
    let out = crate::map_tensor!(past, a => scatter(a, update, &writes, axis, circular)?);
    Ok(vec![out])
}

fn scatter<T: Elem>(
    past: &ArrayD<T>,
    update: &Tensor,
    writes: &[i64],
    axis: usize,
    circular: bool,
) -> Result<ArrayD<T>> {
    let update = update.as_array::<T>()?;
    let shape = past.shape();
    let prefix: usize = shape[..axis].iter().product();
    let per_batch = prefix / shape[0].max(1);
    let max_seq = shape[axis];
    let seq = update.shape()[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = past.as_standard_layout().into_owned();
    let upd = update.as_standard_layout();
    let (dst, src) = (
        out.as_slice_mut().expect("standard layout"),
        upd.as_slice().expect("standard layout"),
    );
    for p in 0..prefix {
        let start = writes[p / per_batch.max(1)];
        for s in 0..seq {
            let mut idx = start + s as i64;
            if circular {
                idx = idx.rem_euclid(max_seq.max(1) as i64);
            }
            if idx < 0 || idx >= max_seq as i64 {
                return Err(IrError::Shape(format!(
                    "write position {idx} outside cache length {max_seq}"
                )));
            }
            let d = (p * max_seq + idx as usize) * inner;
            let u = (p * seq + s) * inner;
            dst[d..d + inner].copy_from_slice(&src[u..u + inner]);
        }
    }
    Ok(out)
}

/// Output types: those of the cache.
pub(super) fn infer(inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    Ok(vec![in_ty(inputs, 0)?.ty.clone()])
}
