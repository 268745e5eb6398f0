//! CausalConvWithState, read once for every backend: a depthwise causal 1-D
//! convolution over `[batch, channels, length]` whose left padding is the previous
//! call's last `k - 1` positions (`past_state`, zeros when absent), with an optional
//! bias and fused SiLU; its second output is the new state, the last `k - 1` positions
//! of the past and the input joined. One invocation per element of either output.

use super::support::{check_float, input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// A CausalConvWithState node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvStateSpec {
    /// The node: its name, op and operands.
    pub site: Site,
    /// The input `[batch, channels, length]`.
    pub x: ValueId,
    /// The taps `[channels, 1, k]`.
    pub w: ValueId,
    /// The bias `[channels]`, when given.
    pub bias: Option<ValueId>,
    /// The previous state `[batch, channels, k - 1]`, when given.
    pub past: Option<ValueId>,
    /// The output `[batch, channels, length]`.
    pub y: ValueId,
    /// The new state `[batch, channels, k - 1]`, when asked for.
    pub state: Option<ValueId>,
    /// The dtype of every operand.
    pub dtype: DType,
    /// Batch.
    pub batch: usize,
    /// Channels.
    pub channels: usize,
    /// Input length.
    pub len: usize,
    /// Taps.
    pub k: usize,
    /// SiLU after the bias.
    pub silu: bool,
}

impl ConvStateSpec {
    /// Elements of `y`.
    pub fn y_elems(&self) -> usize {
        self.batch * self.channels * self.len
    }

    /// The template holes both kernels fill the same way: sizes and the header note.
    pub fn holes(&self) -> Vec<(&'static str, String)> {
        vec![
            ("k", self.k.to_string()),
            ("km1", (self.k - 1).to_string()),
            ("len", self.len.max(1).to_string()),
            ("channels", self.channels.max(1).to_string()),
            (
                "silu_note",
                if self.silu { ", SiLU" } else { "" }.to_string(),
            ),
            ("ny", self.y_elems().to_string()),
            ("ns", self.state_elems().to_string()),
        ]
    }

    /// Elements of the new state (0 when it is not an output).
    pub fn state_elems(&self) -> usize {
        self.state
            .map_or(0, |_| self.batch * self.channels * (self.k - 1))
    }
}

/// Reads CausalConvWithState node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<ConvStateSpec> {
    let x = input(node, 0)?;
    let w = input(node, 1)?;
    let (dtype, xs) = typed(g, node, x)?;
    check_float(node, dtype, "data")?;
    let [batch, channels, len] = xs[..] else {
        return Err(unsupported(node, "an input that is not 3-D"));
    };
    let (wdt, ws) = typed(g, node, w)?;
    let k = match ws[..] {
        [c, 1, k] if c == channels && k >= 1 => Some(k),
        [..] => None,
    }
    .ok_or_else(|| unsupported(node, &format!("weights {ws:?}")))?;
    let same = |v: ValueId, what: &str, want: &[usize]| -> Result<ValueId> {
        let (dt, s) = typed(g, node, v)?;
        if dt != dtype || s != want {
            return Err(unsupported(node, &format!("a {what} {dt}{s:?}")));
        }
        Ok(v)
    };
    if wdt != dtype {
        return Err(unsupported(
            node,
            &format!("{wdt} weights with {dtype} data"),
        ));
    }
    let bias = opt_input(node, 2)
        .map(|b| same(b, "bias", &[channels]))
        .transpose()?;
    let past = opt_input(node, 3)
        .map(|p| same(p, "past_state", &[batch, channels, k - 1]))
        .transpose()?;
    let silu = match node.attrs.str_or("activation", "none").map_err(plan)? {
        "none" => false,
        "silu" | "swish" => true,
        a => return Err(unsupported(node, &format!("activation {a:?}"))),
    };
    Ok(ConvStateSpec {
        site: Site::of(node),
        x,
        w,
        bias,
        past,
        y: output(node, 0)?,
        state: node.outputs.get(1).copied(),
        dtype,
        batch,
        channels,
        len,
        k,
        silu,
    })
}
