//! Classic-ML helpers of the `ai.onnx.ml` domain over numeric data: `Binarizer`,
//! `ArrayFeatureExtractor` and `LabelEncoder` (numeric keys and values; string tensors
//! never reach the IR). `TreeEnsemble` lives in `tree.rs`. Mirrors
//! `onnx/reference/ops/aionnxml/op_*.py`.

use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input};
use crate::ops::{InferCx, InferInput};
use crate::tensor::{Elem, Tensor};
use ndarray::{ArrayD, Axis, IxDyn};
use std::collections::HashMap;

/// Runs Binarizer: 1 where `x > threshold`, else 0, in x's dtype.
pub(super) fn binarizer(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let th = node.attrs.float_or("threshold", 0.0)? as f64;
    fn go<T: Elem>(a: &ArrayD<T>, th: f64) -> ArrayD<T> {
        a.mapv(|v| T::from_f64(if v.to_f64() > th { 1.0 } else { 0.0 }))
    }
    if x.dtype() == DType::Bool {
        return unsupported("Binarizer of bool data");
    }
    Ok(vec![crate::map_tensor!(x, a => go(a, th))])
}

/// Binarizer's output type: the input's.
pub(super) fn infer_binarizer(inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    Ok(vec![in_ty(inputs, 0)?.ty.clone()])
}

/// Runs ArrayFeatureExtractor: selects entries of the last axis; a 1-D input yields
/// one row, as ONNX Runtime does.
pub(super) fn array_feature_extractor(
    _node: &Node,
    inputs: &[Option<&Tensor>],
) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    let idx_t = input(inputs, 1)?;
    if !idx_t.dtype().is_int() {
        return Err(IrError::DType {
            context: "ArrayFeatureExtractor indices".into(),
            expected: "i64".into(),
            found: idx_t.dtype(),
        });
    }
    let idx = idx_t.to_i64_vec();
    let last = x.shape().last().copied().unwrap_or(0);
    let idx: Vec<usize> = idx
        .iter()
        .map(|&i| {
            usize::try_from(i)
                .ok()
                .filter(|&i| i < last)
                .ok_or_else(|| {
                    IrError::Shape(format!(
                        "ArrayFeatureExtractor index {i} out of range for a last dim of {last}"
                    ))
                })
        })
        .collect::<Result<_>>()?;
    let mut shape: Vec<usize> = match x.shape() {
        [] => return Err(IrError::Shape("ArrayFeatureExtractor of a scalar".into())),
        [_] => vec![1],
        s => s[..s.len() - 1].to_vec(),
    };
    shape.push(idx.len());
    fn go<T: Elem>(a: &ArrayD<T>, idx: &[usize], shape: &[usize]) -> ArrayD<T> {
        let axis = Axis(a.ndim() - 1);
        let sel = a.select(axis, idx);
        let v: Vec<T> = sel.iter().copied().collect();
        ArrayD::from_shape_vec(IxDyn(shape), v).expect("same element count")
    }
    Ok(vec![crate::map_tensor!(x, a => go(a, &idx, &shape))])
}

/// ArrayFeatureExtractor's output type.
pub(super) fn infer_array_feature_extractor(
    cx: &mut InferCx,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let idx = in_ty(inputs, 1)?;
    let n = match (idx.value, crate::dim::concrete(&idx.ty.shape)) {
        (Some(v), _) => Dim::from(v.len()),
        (None, Some(s)) => Dim::from(s.iter().product::<usize>()),
        (None, None) => cx.fresh_dim("features"),
    };
    let mut shape = match x.shape.len() {
        0 => return Err(IrError::Shape("ArrayFeatureExtractor of a scalar".into())),
        1 => vec![Dim::Known(1)],
        r => x.shape[..r - 1].to_vec(),
    };
    shape.push(n);
    Ok(vec![TensorType::new(x.dtype, shape)])
}

/// LabelEncoder's numeric mapping: keys (as exact bit patterns of i64 or f64, NaN
/// matching NaN), values and default, and the output dtype.
struct Encoder {
    map: HashMap<u64, f64>,
    int_map: HashMap<i64, i64>,
    key_dtype: DType,
    out: DType,
    default: f64,
    default_int: i64,
}

fn key_bits(v: f64) -> u64 {
    if v.is_nan() {
        f64::NAN.to_bits()
    } else if v == 0.0 {
        0
    } else {
        v.to_bits()
    }
}

impl Encoder {
    fn new(node: &Node) -> Result<Encoder> {
        let a = &node.attrs;
        if a.has("keys_strings") || a.has("values_strings") {
            return unsupported("LabelEncoder with string keys or values");
        }
        let (key_dtype, keys_f, keys_i): (DType, Vec<f64>, Vec<i64>) =
            if let Some(k) = a.ints("keys_int64s")? {
                (
                    DType::I64,
                    k.iter().map(|&v| v as f64).collect(),
                    k.to_vec(),
                )
            } else if let Some(k) = a.floats("keys_floats")? {
                (DType::F32, k.iter().map(|&v| v as f64).collect(), vec![])
            } else if let Some(k) = a.tensor("keys_tensor")? {
                (k.dtype(), k.to_f64_vec(), k.to_i64_vec())
            } else {
                return Err(IrError::Attr {
                    name: "keys_*".into(),
                    msg: "LabelEncoder needs keys".into(),
                });
            };
        let (out, vals_f, vals_i, default, default_int) =
            if let Some(v) = a.ints("values_int64s")? {
                let d = a.int_or("default_int64", -1)?;
                (
                    DType::I64,
                    v.iter().map(|&x| x as f64).collect(),
                    v.to_vec(),
                    d as f64,
                    d,
                )
            } else if let Some(v) = a.floats("values_floats")? {
                let d = a.float_or("default_float", -0.0)? as f64;
                (
                    DType::F32,
                    v.iter().map(|&x| x as f64).collect(),
                    vec![],
                    d,
                    0,
                )
            } else if let Some(v) = a.tensor("values_tensor")? {
                let d = a.tensor("default_tensor")?;
                let (df, di) = match d.filter(|d| d.len() == 1) {
                    Some(d) => (d.to_f64_vec()[0], d.to_i64_vec()[0]),
                    None if v.dtype().is_int() => (-1.0, -1),
                    None => (-0.0, 0),
                };
                (v.dtype(), v.to_f64_vec(), v.to_i64_vec(), df, di)
            } else {
                return Err(IrError::Attr {
                    name: "values_*".into(),
                    msg: "LabelEncoder needs values".into(),
                });
            };
        if keys_f.len() != vals_f.len() {
            return Err(IrError::Attr {
                name: "keys_*".into(),
                msg: format!("{} keys for {} values", keys_f.len(), vals_f.len()),
            });
        }
        let exact_ints = key_dtype.is_int() && out.is_int();
        let mut e = Encoder {
            map: HashMap::new(),
            int_map: HashMap::new(),
            key_dtype,
            out,
            default,
            default_int,
        };
        // A repeated key maps to its last value, as Python's dict does.
        for (i, &k) in keys_f.iter().enumerate() {
            e.map.insert(key_bits(k), vals_f[i]);
            if exact_ints {
                e.int_map.insert(keys_i[i], vals_i[i]);
            }
        }
        Ok(e)
    }

    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        if x.dtype() != self.key_dtype {
            return Err(IrError::DType {
                context: "LabelEncoder input (must match the keys)".into(),
                expected: self.key_dtype.name().into(),
                found: x.dtype(),
            });
        }
        if self.key_dtype.is_int() && self.out.is_int() {
            let v: Vec<i64> = x
                .to_i64_vec()
                .iter()
                .map(|k| self.int_map.get(k).copied().unwrap_or(self.default_int))
                .collect();
            let t = Tensor::I64(ArrayD::from_shape_vec(IxDyn(x.shape()), v).expect("same shape"));
            return Ok(t.cast(self.out));
        }
        let v: Vec<f64> = x
            .to_f64_vec()
            .iter()
            .map(|&k| self.map.get(&key_bits(k)).copied().unwrap_or(self.default))
            .collect();
        Tensor::from_f64s(self.out, x.shape(), &v)
    }
}

/// Runs LabelEncoder on numeric data.
pub(super) fn label_encoder(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    Ok(vec![Encoder::new(node)?.apply(x)?])
}

/// LabelEncoder's output type: the values' dtype, the input's shape.
pub(super) fn infer_label_encoder(
    node: &Node,
    inputs: &[Option<InferInput>],
) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let e = Encoder::new(node)?;
    Ok(vec![TensorType::new(e.out, x.shape.clone())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Attr;
    use crate::ops::{ImageOp, Op};

    #[test]
    fn label_encoder_maps_int_keys_to_floats_with_default() {
        let mut n = Node {
            name: "le".into(),
            op: Op::Image(ImageOp::LabelEncoder),
            attrs: Default::default(),
            inputs: vec![],
            outputs: vec![],
        };
        n.attrs.set("keys_int64s", Attr::Ints(vec![1, 7, -3]));
        n.attrs
            .set("values_floats", Attr::Floats(vec![0.5, 1.5, 2.5]));
        n.attrs.set("default_float", Attr::Float(9.0));
        let x = Tensor::from_i64s(&[7, 2, -3, 1]);
        let y = label_encoder(&n, &[Some(&x)]).unwrap();
        assert_eq!(y[0].dtype(), DType::F32);
        assert_eq!(y[0].to_f64_vec(), vec![1.5, 9.0, 2.5, 0.5]);
    }
}
