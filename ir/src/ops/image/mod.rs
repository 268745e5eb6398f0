//! Resampling, image and signal processing, and the few small ops that belong to no
//! other family (text vectorisation, training-domain optimizers, classic-ML helpers).
//! Each submodule owns one group; this module declares the family, dispatches, and
//! holds the conversions the groups share (float inputs are computed in f64 and rounded
//! back to their dtype once).

mod fft;
mod grid;
mod misc;
mod ml;
mod nms;
mod resize;
mod roi;
mod signal;
mod train;
mod tree;

use crate::dtype::DType;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::op_family;
use crate::ops::{EvalCx, InferCx, InferInput};
use crate::tensor::{Elem, Tensor};
use half::{bf16, f16};
use ndarray::ArrayD;

op_family! {
    /// Resampling, image and signal processing, and small unowned ops.
    #[allow(clippy::upper_case_acronyms)]
    ImageOp {
        Resize, GridSample, AffineGrid, RoiAlign, Col2Im, NonMaxSuppression,
        DFT, STFT, HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix,
        TfIdfVectorizer, Adagrad, Adam, Momentum,
        Binarizer, ArrayFeatureExtractor, LabelEncoder, TreeEnsemble,
    }
}

impl ImageOp {
    /// Reference semantics.
    pub fn eval(
        self,
        _cx: &EvalCx,
        node: &Node,
        inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        match self {
            ImageOp::Resize => resize::eval(node, inputs),
            ImageOp::GridSample => grid::grid_sample(node, inputs),
            ImageOp::AffineGrid => grid::affine_grid(node, inputs),
            ImageOp::RoiAlign => roi::roi_align(node, inputs),
            ImageOp::Col2Im => roi::col2im(node, inputs),
            ImageOp::NonMaxSuppression => nms::eval(node, inputs),
            ImageOp::DFT => signal::dft(node, inputs),
            ImageOp::STFT => signal::stft(node, inputs),
            ImageOp::HannWindow => signal::window(signal::Window::Hann, node, inputs),
            ImageOp::HammingWindow => signal::window(signal::Window::Hamming, node, inputs),
            ImageOp::BlackmanWindow => signal::window(signal::Window::Blackman, node, inputs),
            ImageOp::MelWeightMatrix => signal::mel_weight_matrix(node, inputs),
            ImageOp::TfIdfVectorizer => misc::tfidf(node, inputs),
            ImageOp::Adagrad => train::adagrad(node, inputs),
            ImageOp::Adam => train::adam(node, inputs),
            ImageOp::Momentum => train::momentum(node, inputs),
            ImageOp::Binarizer => ml::binarizer(node, inputs),
            ImageOp::ArrayFeatureExtractor => ml::array_feature_extractor(node, inputs),
            ImageOp::LabelEncoder => ml::label_encoder(node, inputs),
            ImageOp::TreeEnsemble => tree::tree_ensemble(node, inputs),
        }
    }

    /// Output types.
    pub fn infer(
        self,
        cx: &mut InferCx,
        node: &Node,
        inputs: &[Option<InferInput>],
    ) -> Result<Vec<TensorType>> {
        match self {
            ImageOp::Resize => resize::infer(cx, node, inputs),
            ImageOp::GridSample => grid::infer_grid_sample(node, inputs),
            ImageOp::AffineGrid => grid::infer_affine_grid(cx, node, inputs),
            ImageOp::RoiAlign => roi::infer_roi_align(node, inputs),
            ImageOp::Col2Im => roi::infer_col2im(cx, node, inputs),
            ImageOp::NonMaxSuppression => nms::infer(cx, inputs),
            ImageOp::DFT => signal::infer_dft(cx, node, inputs),
            ImageOp::STFT => signal::infer_stft(cx, node, inputs),
            ImageOp::HannWindow | ImageOp::HammingWindow | ImageOp::BlackmanWindow => {
                signal::infer_window(cx, node, inputs)
            }
            ImageOp::MelWeightMatrix => signal::infer_mel(cx, node, inputs),
            ImageOp::TfIdfVectorizer => misc::infer_tfidf(node, inputs),
            ImageOp::Adagrad => train::infer(train::Optimizer::Adagrad, inputs),
            ImageOp::Adam => train::infer(train::Optimizer::Adam, inputs),
            ImageOp::Momentum => train::infer(train::Optimizer::Momentum, inputs),
            ImageOp::Binarizer => ml::infer_binarizer(inputs),
            ImageOp::ArrayFeatureExtractor => ml::infer_array_feature_extractor(cx, inputs),
            ImageOp::LabelEncoder => ml::infer_label_encoder(node, inputs),
            ImageOp::TreeEnsemble => tree::infer_tree_ensemble(cx, node, inputs),
        }
    }
}

/// A float tensor's data as f64 (exact for every float dtype).
fn to_f64_array(t: &Tensor, what: &str) -> Result<ArrayD<f64>> {
    match t {
        Tensor::F32(a) => Ok(a.mapv(f64::from)),
        Tensor::F64(a) => Ok(a.clone()),
        Tensor::F16(a) => Ok(a.mapv(f64::from)),
        Tensor::BF16(a) => Ok(a.mapv(f64::from)),
        t => Err(IrError::DType {
            context: what.to_string(),
            expected: "f32, f64, f16 or bf16".into(),
            found: t.dtype(),
        }),
    }
}

/// Rounds f64 results back to a float dtype.
fn from_f64_array(a: ArrayD<f64>, dtype: DType) -> Result<Tensor> {
    Ok(match dtype {
        DType::F64 => Tensor::F64(a),
        DType::F32 => Tensor::F32(a.mapv(|v| v as f32)),
        DType::F16 => Tensor::F16(a.mapv(f16::from_f64)),
        DType::BF16 => Tensor::BF16(a.mapv(bf16::from_f64)),
        d => return unsupported(format!("float result of dtype {d}")),
    })
}

/// Converts f64 results to `dtype` the way ONNX's reference `saturate_cast` does:
/// integers round half to even and clamp to their range, floats clamp to their finite
/// range.
fn saturate_from_f64(a: ArrayD<f64>, dtype: DType) -> Result<Tensor> {
    fn int<T: Elem>(a: &ArrayD<f64>, lo: f64, hi: f64) -> Tensor {
        T::wrap(a.mapv(|v| T::from_f64(v.round_ties_even().clamp(lo, hi))))
    }
    Ok(match dtype {
        DType::F64 => Tensor::F64(a),
        DType::F32 => Tensor::F32(a.mapv(|v| v.clamp(f32::MIN as f64, f32::MAX as f64) as f32)),
        DType::F16 => Tensor::F16(a.mapv(|v| f16::from_f64(v.clamp(-65504.0, 65504.0)))),
        DType::BF16 => Tensor::BF16(
            a.mapv(|v| bf16::from_f64(v.clamp(bf16::MIN.to_f64(), bf16::MAX.to_f64()))),
        ),
        DType::I8 => int::<i8>(&a, i8::MIN as f64, i8::MAX as f64),
        DType::I16 => int::<i16>(&a, i16::MIN as f64, i16::MAX as f64),
        DType::I32 => int::<i32>(&a, i32::MIN as f64, i32::MAX as f64),
        DType::I64 => int::<i64>(&a, i64::MIN as f64, i64::MAX as f64),
        DType::U8 => int::<u8>(&a, 0.0, u8::MAX as f64),
        DType::U16 => int::<u16>(&a, 0.0, u16::MAX as f64),
        DType::U32 => int::<u32>(&a, 0.0, u32::MAX as f64),
        DType::U64 => int::<u64>(&a, 0.0, u64::MAX as f64),
        DType::Bool => return unsupported("bool data"),
    })
}

/// The single value of a scalar (or one-element) integer input.
fn scalar_i64(t: &Tensor, what: &str) -> Result<i64> {
    if t.len() != 1 {
        return Err(IrError::Shape(format!(
            "{what} must hold one value, found shape {:?}",
            t.shape()
        )));
    }
    if !t.dtype().is_int() {
        return Err(IrError::DType {
            context: what.to_string(),
            expected: "an integer type".into(),
            found: t.dtype(),
        });
    }
    Ok(t.to_i64_vec()[0])
}

/// The single value of a scalar (or one-element) numeric input, as f64.
fn scalar_f64(t: &Tensor, what: &str) -> Result<f64> {
    if t.len() != 1 {
        return Err(IrError::Shape(format!(
            "{what} must hold one value, found shape {:?}",
            t.shape()
        )));
    }
    Ok(t.to_f64_vec()[0])
}

/// Checks that a dtype is a float type the family computes with.
fn require_float(dtype: DType, what: &str) -> Result<()> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(IrError::DType {
            context: what.to_string(),
            expected: "f32, f64, f16 or bf16".into(),
            found: dtype,
        })
    }
}

/// The dtype an ONNX `output_datatype` type code names (the windows and
/// MelWeightMatrix keep it as an int attribute). Only float codes are valid there.
fn dtype_from_onnx_code(node: &Node, default: i64) -> Result<DType> {
    if let Some(d) = node.attrs.dtype("output_datatype").ok().flatten() {
        return Ok(d);
    }
    match node.attrs.int_or("output_datatype", default)? {
        1 => Ok(DType::F32),
        10 => Ok(DType::F16),
        11 => Ok(DType::F64),
        16 => Ok(DType::BF16),
        c => unsupported(format!(
            "output_datatype {c} (only float types are supported)"
        )),
    }
}
