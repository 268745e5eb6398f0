//! ONNX's 4-bit integers (`INT4` = 22, `UINT4` = 21): how they are read, and where they
//! are refused.
//!
//! The IR has no 4-bit element type. A 4-bit weight is stored for one purpose: to be
//! dequantized (`DequantizeLinear`, int4 weights with blocked scales), and there the
//! value, not its width, is what counts. So constants (initializers, `Constant` values,
//! sparse values) are imported widened to one value per byte: `INT4` as i8 (each nibble
//! sign-extended), `UINT4` as u8. The file packs two values per byte, element `2j` in
//! the low nibble, in `raw_data`, external data or `int32_data` (one packed byte per
//! entry); [`unpack`] reads all three.
//!
//! Widening is exact only while nothing depends on the 4-bit range, so anything that
//! would compute or expose a 4-bit value is refused, naming the value:
//! - a graph input or output declared int4 / uint4 ([`value_reason`]) (a `value_info`
//!   declaring a computed value 4-bit is ignored: inference gives it its 8-bit type);
//! - a `QuantizeLinear` whose zero point is 4-bit (its output would be 4-bit, saturated
//!   to −8..7 or 0..15), a `CastLike` to a 4-bit target ([`visit`]); `Cast` to int4
//!   and 4-bit tensor attributes of other ops than `Constant` are refused as every
//!   attribute of an unknown dtype is;
//! - a graph output that carries a widened constant.
//!
//! Which values hold widened data is tracked through the data-movement ops ONNX allows
//! on 4-bit tensors ([`passes_through`]), in node order, within one graph (a sub-graph
//! capturing a widened constant is not tracked).

use super::error::{ImportError, Result, UnsupportedItem};
use super::proto;
use gopt_ir::{DType, Graph, Tensor, ValueId};
use ndarray::{ArrayD, IxDyn};
use std::collections::HashMap;

/// ONNX's element-type code of `UINT4`.
pub(crate) const UINT4: i32 = 21;
/// ONNX's element-type code of `INT4`.
pub(crate) const INT4: i32 = 22;

/// The IR dtype a 4-bit element-type code is widened to; `None` for any other code.
pub(crate) fn widened(code: i32) -> Option<DType> {
    match code {
        UINT4 => Some(DType::U8),
        INT4 => Some(DType::I8),
        _ => None,
    }
}

/// The code of a 4-bit tensor; `None` for any other.
pub(crate) fn code_of(t: &proto::TensorProto) -> Option<i32> {
    t.data_type.filter(|&c| widened(c).is_some())
}

/// ONNX's name of a 4-bit code (`int4`, `uint4`).
pub(crate) fn name(code: i32) -> &'static str {
    match code {
        UINT4 => "uint4",
        _ => "int4",
    }
}

/// Bytes holding `n` packed 4-bit values.
pub(crate) fn packed_bytes(n: usize) -> usize {
    n.div_ceil(2)
}

/// Widens `n` packed values (`packed_bytes(n)` bytes, low nibble first) to a tensor of
/// `shape`; `dtype` is what [`widened`] gave.
pub(crate) fn unpack(name: &str, dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    if bytes.len() != packed_bytes(n) {
        return Err(ImportError::invalid(
            "",
            format!(
                "tensor `{name}`: {} bytes of packed 4-bit data, its dims {shape:?} need {}",
                bytes.len(),
                packed_bytes(n)
            ),
        ));
    }
    let nibble = |i: usize| (bytes[i / 2] >> ((i % 2) * 4)) & 0xf;
    let bad = |_| ImportError::invalid("", format!("tensor `{name}`: dims {shape:?}"));
    match dtype {
        DType::I8 => {
            // Sign-extends: shifting the nibble to the top, then back arithmetically.
            let v = (0..n).map(|i| ((nibble(i) << 4) as i8) >> 4).collect();
            Ok(Tensor::I8(
                ArrayD::from_shape_vec(IxDyn(shape), v).map_err(bad)?,
            ))
        }
        _ => {
            let v = (0..n).map(nibble).collect();
            Ok(Tensor::U8(
                ArrayD::from_shape_vec(IxDyn(shape), v).map_err(bad)?,
            ))
        }
    }
}

/// Widens the `int32_data` form: one packed byte per entry.
pub(crate) fn unpack_int32(
    name: &str,
    dtype: DType,
    shape: &[usize],
    data: &[i32],
) -> Result<Tensor> {
    let mut bytes = Vec::with_capacity(data.len());
    for &x in data {
        let b = u8::try_from(x).map_err(|_| {
            ImportError::invalid(
                "",
                format!("tensor `{name}`: int32_data entry {x} is not a byte of two 4-bit values"),
            )
        })?;
        bytes.push(b);
    }
    unpack(name, dtype, shape, &bytes)
}

/// Why a value declared with element-type `code` cannot be imported, if it is 4-bit
/// (graph inputs, outputs and computed values are never widened).
pub(crate) fn value_reason(code: i32) -> Option<String> {
    widened(code).map(|_| {
        format!(
            "{} (gopt reads 4-bit tensors only as constants, widened to 8 bits for \
             DequantizeLinear; not as graph inputs, outputs or computed values)",
            name(code)
        )
    })
}

/// Ops that move 4-bit data without computing on it: their outputs carry widened
/// values when an input does.
pub(crate) fn passes_through(op: &str) -> bool {
    matches!(
        op,
        "Identity" | "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Transpose" | "Pad"
    )
}

/// A default-domain node, for [`visit`]'s messages.
#[derive(Clone, Copy)]
pub(crate) struct At<'a> {
    /// Node name.
    pub node: &'a str,
    /// ONNX op type.
    pub op: &'a str,
    /// Default-domain opset.
    pub opset: i64,
}

/// Refuses a default-domain node that would compute a 4-bit value from widened inputs,
/// and records the outputs of one that moves them. `widened` maps each value holding
/// widened data to its ONNX code.
pub(crate) fn visit(
    widened: &mut HashMap<ValueId, i32>,
    g: &Graph,
    at: At,
    inputs: &[Option<ValueId>],
    outputs: &[ValueId],
) -> Result<()> {
    if let Some(reason) = node_reason(at.op, inputs, widened, g) {
        return Err(ImportError::Unsupported {
            items: vec![UnsupportedItem {
                node: at.node.to_string(),
                op: at.op.to_string(),
                domain: "ai.onnx".into(),
                opset: at.opset,
                reason,
            }],
        });
    }
    let carried = inputs
        .iter()
        .flatten()
        .find_map(|v| widened.get(v).copied());
    if let (Some(code), true) = (carried, passes_through(at.op)) {
        widened.extend(outputs.iter().map(|&o| (o, code)));
    }
    Ok(())
}

/// Why a default-domain node cannot run on widened inputs, if it cannot.
fn node_reason(
    op: &str,
    inputs: &[Option<ValueId>],
    widened: &HashMap<ValueId, i32>,
    g: &Graph,
) -> Option<String> {
    let at = |i: usize| {
        let v = inputs.get(i).copied().flatten()?;
        widened
            .get(&v)
            .map(|&c| (g.value(v).name.as_str(), name(c)))
    };
    match op {
        "QuantizeLinear" => at(2).map(|(v, t)| {
            format!(
                "its zero point `{v}` is {t}, so its output would be {t}, which gopt does \
                 not compute (4-bit values are read only as constants for DequantizeLinear)"
            )
        }),
        "CastLike" => at(1).map(|(v, t)| {
            format!("it casts to the type of `{v}`, {t}, which gopt does not compute")
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int4_sign_extends_low_nibble_first() {
        // -8, -1, 0, 3, 7 as ONNX packs them (onnx.helper.make_tensor).
        let t = unpack_int32("x", DType::I8, &[5], &[248, 48, 7]).expect("unpack");
        assert_eq!(t.to_i64_vec(), vec![-8, -1, 0, 3, 7]);
        let raw = unpack("x", DType::I8, &[5], &[0xf8, 0x30, 0x07]).expect("unpack");
        assert_eq!(raw, t);
    }

    #[test]
    fn uint4_and_bad_lengths() {
        let t = unpack("x", DType::U8, &[3], &[0xf1, 0x09]).expect("unpack");
        assert_eq!(t.to_i64_vec(), vec![1, 15, 9]);
        let err = unpack("w", DType::U8, &[3], &[0xf1]).expect_err("short");
        assert!(err.to_string().contains("`w`"), "{err}");
        let err = unpack_int32("w", DType::U8, &[2], &[300]).expect_err("not a byte");
        assert!(err.to_string().contains("300"), "{err}");
    }
}
